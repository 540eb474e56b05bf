"""``iclr serve`` keeps each live conversation's scorer state between requests (docs/serve.md, "What scoring costs").

On the tiny random Llama (entropies depend on the whole context) in the sliding window that
``serve`` scores in, with a limit small enough that the window slides: a proxy that keeps each
conversation's keys and values sends the upstream exactly the bytes of one that scores every
step from scratch, with block entropies within 1e-3 bits, and forwards only each request's new
tokens. The same holds when the memory budget evicts conversations (they come back and are
recomputed), when the write-back changes the prefix the scorer holds, and when a client edits
its history.
"""

from __future__ import annotations

import random

import httpx
import orjson
import pytest

torch = pytest.importorskip("torch")

from tiny_llama import TOL, WORDS, paragraph, scorer, tiny, tiny_dir  # noqa: F401

from iclr_cli.compress import Settings
from iclr_cli.policies import parse_variant
from iclr_cli.serve.batching import BatchingScorer
from iclr_cli.serve.state import ServeState
from iclr_cli.scoring.streams import common_prefix

LIMIT = 160


class Recording:
    """The real scorer, recording every request and result (in the scorer thread)."""

    def __init__(self, inner):
        self.inner = inner
        self.name, self.max_tokens, self.overflow, self.tokenizer = inner.name, inner.max_tokens, inner.overflow, inner.tokenizer
        self.calls: list[tuple[object, object, int]] = []  # (request, result, tokens forwarded)

    def score(self, requests):
        before = self.inner.stats.forward_tokens
        results = self.inner.score(requests)
        assert len(requests) == 1  # one conversation at a time here: forwarded tokens are per request
        self.calls.append((requests[0], results[0], self.inner.stats.forward_tokens - before))
        return results

    def forget(self, stream):
        self.inner.forget(stream)

    def cache_info(self):
        return self.inner.cache_info()


def conversation(seed: int, steps: int) -> list[dict]:
    rng = random.Random(seed)
    out = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": f"Fix the failing test number {seed}."}]
    for i in range(steps):
        reasoning = "\n\n".join(paragraph(rng, rng.randint(4, 10)) for _ in range(rng.randint(3, 4)))
        call = {"id": f"call_{seed}_{i}", "type": "function", "function": {"name": "bash", "arguments": orjson.dumps({"command": f"grep -n {rng.choice(WORDS)} app.py"}).decode()}}
        out += [{"role": "assistant", "content": None, "reasoning_content": reasoning, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": call["id"], "content": paragraph(rng, rng.randint(3, 8))}]
    return out


def make(tiny, **kw):
    state_kw = {k: kw.pop(k) for k in ("max_conversations",) if k in kw}
    inner = Recording(scorer(tiny, max_tokens=LIMIT, context="sliding", batch_size=1, **kw))
    return ServeState(Settings(parse_variant("iclr")), BatchingScorer(inner, wait_s=0), inner.tokenizer, **state_kw), inner


def send(state: ServeState, messages: list[dict]) -> bytes:
    raw = orjson.dumps({"model": "m", "messages": messages})
    return state.rewrite(orjson.loads(raw), raw).body


def play(state: ServeState, schedule: list[list[dict]]) -> list[bytes]:
    """Send each request of ``schedule`` in order; the upstream bodies."""
    return [send(state, msgs) for msgs in schedule]


def interleaved(convs: list[list[dict]]) -> list[list[dict]]:
    """Requests of several conversations, turn by turn (each request ends with a tool result)."""
    longest = max(len(c) for c in convs)
    return [c[:end] for end in range(4, longest + 1, 2) for c in convs if end <= len(c)]


def entropies(rec: Recording) -> list[tuple[str, list]]:
    return [(req.stream, [(b.n_tokens, b.entropy_bits) for b in res.blocks]) for req, res, _ in rec.calls]


def assert_same_scores(a: Recording, b: Recording) -> None:
    ea, eb = entropies(a), entropies(b)
    assert len(ea) == len(eb) > 0
    for (sa, xa), (sb, xb) in zip(ea, eb):
        assert sa == sb and [n for n, _ in xa] == [n for n, _ in xb]
        for (_, ha), (_, hb) in zip(xa, xb):
            assert (ha is None) == (hb is None) and (ha is None or abs(ha - hb) < TOL)


def test_kept_scorer_state_equals_scoring_from_scratch_and_costs_only_new_tokens(tiny):
    convs = [conversation(seed, 7) for seed in (1, 2, 3)]
    schedule = interleaved(convs)
    naive_state, naive = make(tiny, prefix_cache=False)
    kept_state, kept = make(tiny)
    want = play(naive_state, schedule)
    assert play(kept_state, schedule) == want
    assert_same_scores(kept, naive)
    # not vacuous: steps were compressed and the window slid
    assert sum(b"[SKIP]" in body for body in want) > 10
    assert sum(res.windowed for _, res, _ in naive.calls) >= 6
    # Each request forwards exactly the tokens after what it shares with the stream's previous
    # request, and that shared prefix ends inside the step before (the write-back replaced its
    # reasoning, so the stored prefix changed there): a step costs its own new tokens.
    last: dict[str, list[int]] = {}
    shortened = 0
    for req, _, forwarded in kept.calls:
        ids = kept.inner._lay_out(req).ids
        prev = last.get(req.stream)
        common = common_prefix(prev, ids) if prev else 0
        assert forwarded == len(ids) - common
        shortened += prev is not None and common < len(prev)
        last[req.stream] = ids
    assert shortened >= 12
    assert kept.inner.stats.forward_tokens * 2 < naive.inner.stats.forward_tokens
    info = kept.cache_info()
    assert info["streams"] == 3 and info["evictions"] == 0 and info["bytes"] == info["tokens"] * kept.inner._shape.bytes_per_token > 0
    assert naive.cache_info()["streams"] == 0


def test_memory_budget_evicts_least_recently_used_and_a_returning_conversation_is_recomputed(tiny):
    convs = [conversation(seed, 6) for seed in (4, 5, 6)]
    schedule = interleaved(convs)
    naive_state, naive = make(tiny, prefix_cache=False)
    want = play(naive_state, schedule)
    # room for about one conversation's state: every turn evicts the one used longest ago
    tight_state, tight = make(tiny, cache_tokens=2 * LIMIT + LIMIT // 8)
    assert play(tight_state, schedule) == want
    assert_same_scores(tight, naive)
    info = tight.cache_info()
    assert info["evictions"] >= 10 and info["streams"] == 1 and info["tokens"] <= info["budget_tokens"]
    # then one conversation alone: it re-enters once, and from then on it reuses its state
    reused = tight.inner.stats.reused_tokens
    more = conversation(4, 9)
    alone = [more[:end] for end in range(len(convs[0]) + 2, len(more) + 1, 2)]
    assert play(tight_state, alone) == play(naive_state, alone)
    assert_same_scores(tight, naive)
    assert tight.inner.stats.reused_tokens > reused


def test_a_client_edit_of_its_history_is_scored_as_from_scratch(tiny):
    conv = conversation(7, 6)
    edited = [dict(m) for m in conv]
    edited[5] = {**edited[5], "content": "The file was edited by someone else."}  # step 1's tool result
    schedule = [conv[:end] for end in (4, 6, 8, 10)] + [edited[:end] for end in (10, 12, 14)]
    naive_state, naive = make(tiny, prefix_cache=False)
    kept_state, kept = make(tiny)
    want = play(naive_state, schedule)
    assert play(kept_state, schedule) == want
    assert_same_scores(kept, naive)
    # the edit made steps 2.. new steps: compressed again against the edited history
    assert len(kept.calls) == 3 + 5


def test_an_evicted_conversation_takes_its_scorer_state_with_it(tiny):
    state, rec = make(tiny, max_conversations=1)
    a, b = conversation(8, 3), conversation(9, 3)
    send(state, a[:6])
    assert rec.cache_info()["streams"] == 1
    send(state, b[:4])  # evicts conversation a; its state is dropped before b is scored
    send(state, b[:6])
    assert rec.cache_info()["streams"] == 1 and len(state.conversations()) == 1
    assert rec.cache_info()["evictions"] == 0


def test_scoring_ahead_with_kept_state_sends_the_same_bytes_over_http(tiny):
    """Both at once, through HTTP and the openai SDK, on the tiny Llama: scoring ahead and
    kept scorer state, against neither (every step scored from scratch at its request)."""
    pytest.importorskip("openai")
    from test_serve_eager import drive, run, scored

    seen = {}

    def client(url, state):
        for k, streamed in enumerate((False, True)):
            drive(url, f"task {k}", streamed=streamed, after_reply=lambda i: scored(state, 5 * k + i + 1) if state.scores_ahead else None)
        base = url.removesuffix("/v1")
        seen["stats"], seen["metrics"] = httpx.get(base + "/stats").json(), httpx.get(base + "/metrics").text

    def options(**kw):
        s = scorer(tiny, max_tokens=LIMIT, context="sliding", batch_size=1, **kw)
        return {"scorer": s, "tokenizer": s.tokenizer}

    plain_raw, plain_steps, _ = run(client, eager=False, **options(prefix_cache=False))
    raw, steps, state = run(client, eager=True, **options())
    assert raw == plain_raw and steps == plain_steps and sum(b"[SKIP]" in r for r in raw) == 10
    # each step found its result scored ahead (done, or still running: the tool took no time)
    assert state.stats.eager.hits + state.stats.eager.waits == 10 and state.stats.eager.misses == 0
    info = seen["stats"]["scorer_state"]
    assert info["streams"] == 2 and info["evictions"] == 0 and info["tokens"] > 0
    assert info["bytes"] == info["tokens"] * state.scorer.inner.inner._shape.bytes_per_token
    assert seen["stats"]["eager_scoring"] == state.stats.eager.to_record()
    metrics = seen["metrics"]
    assert f"iclr_serve_scorer_state_bytes {float(info['bytes'])}" in metrics
    assert "iclr_serve_scorer_state_conversations 2.0" in metrics and "iclr_serve_scorer_state_evictions_total 0.0" in metrics
    assert 'iclr_serve_eager_scoring_total{outcome="scored"} 10.0' in metrics


@pytest.mark.parametrize("context,exact", [("auto", True), ("fresh", True), ("auto", False)])
def test_the_first_step_prefills_all_of_p_unless_the_context_is_fresh(tiny_dir, context, exact):
    """An agent's P (system prompt and tools) is tens of thousands of tokens: under ``--exact``
    in serve's default (sliding) context the first compressed step runs all of it through the
    proxy whatever ``--max-tokens`` says; ``--context fresh`` cuts it to ``--max-tokens``; the
    default profile reads its first and last 512 characters (iclr_cli.scoring.profile)."""
    from iclr_cli.serve.server import ServeOptions, build

    system = "You are a coding agent. " + " ".join(f"Rule {i}: read the file before you edit it." for i in range(120))
    messages = [{"role": "system", "content": system}, *conversation(7, 1)[1:]]
    app, state = build(ServeOptions(upstream="http://127.0.0.1:9/v1", proxy_model=str(tiny_dir), max_tokens=LIMIT, exact=exact,
                                    context=context, eager_scoring=False, batch_size=1, max_wait=None))
    try:
        prompt_tokens = len(state.tokenizer.encode(system)[0])
        assert prompt_tokens > 8 * LIMIT
        body = send(state, messages)
        forwarded = state.scorer.cache_info()["forward_tokens"]
    finally:
        state.scorer.close()
    assert state.stats.total.steps_compressed == 1 and b"[SKIP]" in body
    if context == "fresh":
        assert 0 < forwarded <= LIMIT
    elif exact:
        assert forwarded > prompt_tokens
    else:
        elided = len(state.tokenizer.encode(system[:512] + system[-512:])[0])
        assert elided < forwarded < prompt_tokens / 2


def test_a_second_conversation_with_the_same_p_does_not_prefill_it(tiny_dir):
    """P once per machine (iclr_cli.scoring.prefix): a new conversation with a P seen before
    starts from the shared state after P; the bytes sent upstream are those of a proxy that
    scores every step from scratch, and the scorer says the new conversation needs no prefill."""
    from iclr_cli.serve.server import ServeOptions, build

    system = "You are a coding agent. " + " ".join(f"Rule {i}: read the file before you edit it." for i in range(120))
    convs = [[{"role": "system", "content": system}, *conversation(seed, 1)[1:]] for seed in (7, 8)]
    bodies, forwarded = {}, {}
    for cache in (True, False):
        # --exact: the whole system prompt is read (the default elides it to 1,024 characters)
        app, state = build(ServeOptions(upstream="http://127.0.0.1:9/v1", proxy_model=str(tiny_dir), max_tokens=LIMIT, exact=True,
                                        eager_scoring=False, batch_size=1, max_wait=None, prefix_cache=cache))
        try:
            inner = state.scorer.inner
            prompt_tokens = len(state.tokenizer.encode(system)[0])
            bodies[cache], forwarded[cache] = [], []
            for messages in convs:
                before = inner.stats.forward_tokens
                bodies[cache].append(send(state, messages))
                forwarded[cache].append(inner.stats.forward_tokens - before)
            info = state.scorer.cache_info()
            if cache:  # the system prompt is shared, each conversation's first user message is not
                assert (info["prompt_misses"], info["prompt_hits"]) == (1, 1)
        finally:
            state.scorer.close()
    assert bodies[True] == bodies[False] and all(b"[SKIP]" in b for b in bodies[True])
    assert forwarded[False][1] > prompt_tokens and forwarded[True][0] == forwarded[False][0]
    assert forwarded[True][1] < forwarded[False][1] - prompt_tokens // 2
