"""P once per machine (iclr_cli.scoring.prefix) on tiny random Llamas.

A new stream whose P was seen before starts from the shared state after P: the same entropies
as a scorer without that cache (within TOL, STYLE.md 9), P's tokens not forwarded again, in
this scorer (memory) and in a new one (disk); another model, another P or a broken file never
give a state that is not theirs.
"""

import os
import random

import pytest

torch = pytest.importorskip("torch")

from tiny_llama import TOL, paragraph, scorer, tiny, tiny_dir  # noqa: F401

from iclr_cli.scoring.base import ScoreRequest
from iclr_cli.scoring.kv import KVShape
from iclr_cli.scoring.prefix import MIN_PROMPT_TOKENS, PROMPT_DIR_ENV, PromptCache, PromptState, prompt_dir

LIMIT = 512  # the tiny model's positions: windows really slide


def make_prompt(seed: int, paragraphs: int) -> tuple[str, ...]:
    rng = random.Random(seed)
    system = "[system]\n" + " ".join(paragraph(rng, 12) for _ in range(paragraphs)) + "\n\n"
    tools = "[tools]\n" + " ".join(paragraph(rng, 10) for _ in range(paragraphs // 3)) + "\n\n"
    return system, tools


def make_request(stream: str, prompt, steps: int = 2, seed: int = 1) -> ScoreRequest:
    """A step after ``steps`` history segments; two blocks, the first one after the label."""
    rng = random.Random(seed)
    history = tuple(f"[reasoning]\n{paragraph(rng, 18)}\n\n[tool_result]\n{paragraph(rng, 14)}\n\n" for _ in range(steps))
    first, second = paragraph(rng, 12), paragraph(rng, 10)
    step = f"[reasoning]\n{first}\n\n{second}"
    return ScoreRequest(stream, tuple(prompt), history, step, ((12, 12 + len(first)), (14 + len(first), len(step))))


def prompt_tokens(tokenizer, prompt) -> int:
    return sum(len(tokenizer.encode(seg)[0]) for seg in prompt)


def forwarded(s, req):
    """(result, tokens forwarded) of scoring ``req`` alone."""
    before = s.stats.forward_tokens
    [res] = s.score([req])
    return res, s.stats.forward_tokens - before


def assert_close(a, b):
    assert a.skipped is None and b.skipped is None
    assert [x.n_tokens for x in a.blocks] == [y.n_tokens for y in b.blocks]
    for x, y in zip(a.blocks, b.blocks):
        assert abs(x.entropy_bits - y.entropy_bits) < TOL, (x, y)
    assert (a.windowed, a.history_kept, a.context_tokens, a.context) == (b.windowed, b.history_kept, b.context_tokens, b.context)


# P of ~330 tokens: all of it fits a 512-token fresh window; ~650 tokens: longer than the
# sliding window itself (its tail past the sink slides out while P is read).
CASES = [("fresh", 18, 5), ("sliding", 18, 4), ("sliding", 36, 3)]


@pytest.mark.parametrize("context,paragraphs,steps", CASES)
def test_a_second_stream_with_the_same_p_skips_its_prefill_and_scores_the_same(tiny, tmp_path, context, paragraphs, steps):
    prompt = make_prompt(0, paragraphs)
    n = prompt_tokens(tiny[1], prompt)
    assert n >= MIN_PROMPT_TOKENS
    reqs = [make_request(name, prompt, steps) for name in "ABC"]
    ref = scorer(tiny, max_tokens=LIMIT, context=context, prompt_cache=False)
    shared = scorer(tiny, max_tokens=LIMIT, context=context, prompt_cache_dir=tmp_path)
    expected = [forwarded(ref, r) for r in reqs]
    assert any(r.windowed for r, _ in expected)  # over the limit: history cut or the window slid
    a, fa = forwarded(shared, reqs[0])
    assert shared.cache_info()["prompt_misses"] == 1 and shared.cache_info()["prompt_hits"] == 0
    assert fa == expected[0][1]  # the P-only run plus the rest: no token twice
    assert shared.stats.reused_tokens == 0  # P computed for this request was forwarded, not reused
    assert_close(a, expected[0][0])
    for req, (want, tokens) in zip(reqs[1:], expected[1:]):
        before = shared.stats.reused_tokens
        got, f = forwarded(shared, req)
        assert_close(got, want)
        assert f == tokens - n  # P is not forwarded again
        assert shared.stats.reused_tokens - before == n
    info = shared.cache_info()
    assert (info["prompt_hits"], info["prompt_misses"], info["prompt_disk_hits"], info["prompt_states"]) == (2, 1, 0, 1)
    assert info["streams"] == 3


@pytest.mark.parametrize("context", ["fresh", "sliding"])
def test_a_new_scorer_finds_p_on_disk(tiny, tmp_path, context):
    prompt = make_prompt(0, 18)
    n = prompt_tokens(tiny[1], prompt)
    req = make_request("A", prompt)
    want, tokens = forwarded(scorer(tiny, max_tokens=LIMIT, context=context, prompt_cache=False), req)
    first = scorer(tiny, max_tokens=LIMIT, context=context, prompt_cache_dir=tmp_path)
    forwarded(first, req)
    assert len(list(tmp_path.glob("*.pt"))) == 1
    later = scorer(tiny, max_tokens=LIMIT, context=context, prompt_cache_dir=tmp_path)
    b = make_request("B", prompt)
    assert later.prefills(b) is False  # known from the folder before any scoring
    got, f = forwarded(later, b)
    assert_close(got, want)
    assert f == tokens - n
    info = later.cache_info()
    assert (info["prompt_hits"], info["prompt_disk_hits"], info["prompt_misses"]) == (1, 1, 0)
    # reset() forgets the states in memory, not the files
    later.reset()
    assert later.cache_info()["prompt_states"] == 0
    got, f = forwarded(later, make_request("C", prompt))
    assert_close(got, want) and f == tokens - n
    assert later.cache_info()["prompt_disk_hits"] == 2


def test_another_model_never_takes_the_first_models_p(tiny, tmp_path):
    model, tokenizer = tiny
    torch.manual_seed(1)
    other = type(model)(model.config).eval()  # same architecture and tokenizer, other weights
    prompt = make_prompt(0, 18)
    req = make_request("A", prompt)
    forwarded(scorer(tiny, max_tokens=LIMIT, context="sliding", prompt_cache_dir=tmp_path), req)
    want, tokens = forwarded(scorer((other, tokenizer), max_tokens=LIMIT, context="sliding", prompt_cache=False), req)
    s = scorer((other, tokenizer), max_tokens=LIMIT, context="sliding", prompt_cache_dir=tmp_path)
    assert s.prefills(make_request("B", prompt)) is True
    got, f = forwarded(s, req)
    assert_close(got, want) and f == tokens
    assert (s.cache_info()["prompt_disk_hits"], s.cache_info()["prompt_misses"]) == (0, 1)
    assert len(list(tmp_path.glob("*.pt"))) == 2
    # one weight tensor changed in the middle of the model: another fingerprint too
    with torch.no_grad():
        other.model.layers[0].mlp.up_proj.weight.copy_(model.model.layers[0].mlp.up_proj.weight)
    assert scorer((other, tokenizer), max_tokens=LIMIT, context="sliding", prompt_cache_dir=tmp_path)._prompts.fingerprint \
        not in (s._prompts.fingerprint, scorer(tiny, max_tokens=LIMIT, prompt_cache_dir=tmp_path)._prompts.fingerprint)


def test_a_corrupt_or_foreign_file_is_ignored_and_removed(tiny, tmp_path):
    prompt = make_prompt(0, 18)
    req = make_request("A", prompt)
    want, tokens = forwarded(scorer(tiny, max_tokens=LIMIT, context="sliding", prompt_cache=False), req)
    forwarded(scorer(tiny, max_tokens=LIMIT, context="sliding", prompt_cache_dir=tmp_path), req)
    [path] = tmp_path.glob("*.pt")

    def edited(change):
        data = torch.load(path, weights_only=True)
        change(data)
        torch.save(data, path)

    breakages = (lambda: path.write_bytes(path.read_bytes()[:1000]),  # cut short
                 lambda: path.write_bytes(b"not a torch file"),
                 lambda: edited(lambda d: d.update(key="0" * 64)),  # readable, names another key
                 lambda: edited(lambda d: d.update(kv=d["kv"][:, :, :, 1:])),  # keys of the wrong length
                 lambda: edited(lambda d: d.update(kv=d["kv"].double())))  # another dtype
    for breakage in breakages:
        breakage()
        s = scorer(tiny, max_tokens=LIMIT, context="sliding", prompt_cache_dir=tmp_path)
        got, f = forwarded(s, make_request("B", prompt))
        assert_close(got, want) and f == tokens
        assert (s.cache_info()["prompt_disk_hits"], s.cache_info()["prompt_misses"]) == (0, 1)
        assert s._prompts.disk_errors == 1
        assert len(list(tmp_path.glob("*.pt"))) == 1  # removed, then the state written again
    assert scorer(tiny, max_tokens=LIMIT, context="sliding", prompt_cache_dir=tmp_path)._prompts.get(path.stem)[1] == "disk"


@pytest.mark.parametrize("context", ["fresh", "sliding"])
def test_only_the_part_of_p_before_its_first_user_turn_is_shared(tiny, tmp_path, context):
    # An agent's system prompt and tools are the same in every session, its first user
    # message (the task) is not: sessions share the state after P's segments before it.
    shared = make_prompt(0, 18)
    n = prompt_tokens(tiny[1], shared)
    rng = random.Random(5)
    tasks = [f"[user]\n{paragraph(rng, 15)}\n\n" for _ in range(3)]
    ref = scorer(tiny, max_tokens=LIMIT, context=context, prompt_cache=False)
    s = scorer(tiny, max_tokens=LIMIT, context=context, prompt_cache_dir=tmp_path)
    for k, (name, task) in enumerate(zip("ABC", tasks)):
        req = make_request(name, (*shared, task))
        assert s.prefills(req) is (k == 0)
        (got, f), (want, tokens) = forwarded(s, req), forwarded(ref, req)
        assert_close(got, want)
        assert f == (tokens if k == 0 else tokens - n)  # the task is read again, the rest of P not
    assert (s.cache_info()["prompt_hits"], s.cache_info()["prompt_misses"]) == (2, 1)
    # a P that starts with a user turn shares nothing
    alone = (tasks[0] + " ".join(shared),)
    for name in "DE":
        s.score([make_request(name, alone)])
    assert (s.cache_info()["prompt_hits"], s.cache_info()["prompt_misses"]) == (2, 1)


def test_a_part_within_the_limit_is_one_plain_forward_shared_by_both_modes(tiny, tmp_path):
    # Every token before index `limit` is read in the sliding window's first plain run, so a
    # shared part that fits the limit has the keys and values of one causal forward pass:
    # the state a fresh scorer stored serves a sliding one.
    prompt = make_prompt(0, 18)
    n = prompt_tokens(tiny[1], prompt)
    scorer(tiny, max_tokens=LIMIT, context="fresh", prompt_cache_dir=tmp_path).score([make_request("A", prompt, 5)])
    s = scorer(tiny, max_tokens=LIMIT, context="sliding", prompt_cache_dir=tmp_path)
    req = make_request("B", prompt, 4)
    assert s.prefills(req) is False
    (got, f), (want, tokens) = forwarded(s, req), forwarded(scorer(tiny, max_tokens=LIMIT, context="sliding", prompt_cache=False), req)
    assert_close(got, want) and f == tokens - n
    assert (s.cache_info()["prompt_disk_hits"], s.cache_info()["prompt_misses"]) == (1, 0)


def test_a_sliding_stream_resumes_inside_the_sink(tiny, tmp_path, monkeypatch):
    # A shared part shorter than the sink (sink = min(|P|, limit // 2)): the new stream's
    # first plain run goes on after it, then the window slides over a long history.
    from iclr_cli.scoring import prompt_keys

    monkeypatch.setattr(prompt_keys, "MIN_PROMPT_TOKENS", 64)
    shared = make_prompt(0, 8)
    n = prompt_tokens(tiny[1], shared)
    rng = random.Random(9)
    tasks = [f"[user]\n{paragraph(rng, 30)}\n\n" for _ in range(2)]
    assert n < prompt_tokens(tiny[1], (*shared, tasks[0])) < LIMIT // 2
    ref = scorer(tiny, max_tokens=LIMIT, context="sliding", prompt_cache=False)
    s = scorer(tiny, max_tokens=LIMIT, context="sliding", prompt_cache_dir=tmp_path)
    for k, name in enumerate("AB"):
        for steps in (2, 8):  # the stream's second request continues from its own state
            req = make_request(name, (*shared, tasks[k]), steps, seed=k)
            (got, f), (want, tokens) = forwarded(s, req), forwarded(ref, req)
            assert_close(got, want)
            if steps == 2:
                assert f == (tokens if k == 0 else tokens - n)
    assert want.windowed and (s.cache_info()["prompt_hits"], s.cache_info()["prompt_misses"]) == (1, 1)


def test_another_p_or_a_short_p_misses(tiny, tmp_path):
    s = scorer(tiny, max_tokens=LIMIT, context="sliding", prompt_cache_dir=tmp_path)
    ref = scorer(tiny, max_tokens=LIMIT, context="sliding", prompt_cache=False)
    for name, prompt in (("A", make_prompt(0, 18)), ("B", make_prompt(7, 18))):
        req = make_request(name, prompt)
        (got, f), (want, tokens) = forwarded(s, req), forwarded(ref, req)
        assert_close(got, want) and f == tokens
    assert (s.cache_info()["prompt_hits"], s.cache_info()["prompt_misses"]) == (0, 2)
    short = ("[system]\nYou are a coding agent.\n\n",)
    assert prompt_tokens(tiny[1], short) < MIN_PROMPT_TOKENS
    for name in "CD":
        s.score([make_request(name, short)])
    assert (s.cache_info()["prompt_hits"], s.cache_info()["prompt_misses"]) == (0, 2)
    assert s.prefills(make_request("E", short)) is True


def test_fresh_with_p_cut_to_fit_takes_no_shared_state(tiny, tmp_path):
    # P and the step over the limit: P is cut from its start, so P is not the input's prefix.
    s = scorer(tiny, max_tokens=LIMIT, context="fresh", prompt_cache_dir=tmp_path)
    ref = scorer(tiny, max_tokens=LIMIT, context="fresh", prompt_cache=False)
    prompt = make_prompt(0, 36)
    for name in "AB":
        (got, _), (want, _) = forwarded(s, make_request(name, prompt)), forwarded(ref, make_request(name, prompt))
        assert_close(got, want) and got.windowed
    assert (s.cache_info()["prompt_hits"], s.cache_info()["prompt_misses"]) == (0, 0)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("context", ["fresh", "sliding"])
def test_prefills_is_false_for_a_new_stream_once_p_is_shared(tiny, tmp_path, context):
    s = scorer(tiny, max_tokens=LIMIT, context=context, prompt_cache_dir=tmp_path)
    prompt = make_prompt(0, 18)
    assert s.prefills(make_request("A", prompt)) is True
    s.score([make_request("A", prompt)])
    assert s.prefills(make_request("B", prompt)) is False
    assert s.prefills(make_request("B", make_prompt(7, 18))) is True
    off = scorer(tiny, max_tokens=LIMIT, context=context, prompt_cache=False)
    off.score([make_request("A", prompt)])
    assert off.prefills(make_request("B", prompt)) is True


@pytest.mark.parametrize("context", ["fresh", "sliding"])
def test_the_shared_state_is_never_changed_by_the_jobs_that_start_from_it(tiny, tmp_path, context):
    prompt = make_prompt(0, 36 if context == "sliding" else 18)
    s = scorer(tiny, max_tokens=LIMIT, context=context, prompt_cache_dir=tmp_path)
    ref = scorer(tiny, max_tokens=LIMIT, context=context, prompt_cache=False)
    s.score([make_request("A", prompt, 3)])
    [entry] = s._prompts._memory.values()
    kept = (entry.ids, entry.kv.clone(), entry.lo, entry.rot)
    if context == "sliding":  # P longer than the window: its state already slid (dropped, rotated)
        assert entry.lo > 0 and entry.rot > 0 and entry.tokens < len(entry.ids)
    # B and C with other histories (the store is truncated, rotated and dropped from), then
    # B's next step, and two new streams in one call (one batch, one shared state)
    for req in (make_request("B", prompt, 4, seed=2), make_request("C", prompt, 2, seed=3), make_request("B", prompt, 5, seed=2)):
        (got, _), (want, _) = forwarded(s, req), forwarded(ref, req)
        assert_close(got, want)
    both = [make_request("D", prompt, 1, seed=4), make_request("E", prompt, 3, seed=5)]
    for got, want in zip(s.score(both), ref.score(both)):
        assert_close(got, want)
    assert (entry.ids, entry.lo, entry.rot) == kept[:1] + kept[2:] and torch.equal(entry.kv, kept[1])
    assert s.cache_info()["prompt_misses"] == 1 and s.cache_info()["prompt_hits"] == 4


def test_new_streams_in_one_call_compute_p_once(tiny, tmp_path):
    prompt = make_prompt(0, 18)
    n = prompt_tokens(tiny[1], prompt)
    reqs = [make_request(name, prompt, 2, seed=k) for k, name in enumerate("ABC")]
    ref = scorer(tiny, max_tokens=LIMIT, context="sliding", prompt_cache=False)
    s = scorer(tiny, max_tokens=LIMIT, context="sliding", prompt_cache_dir=tmp_path)
    want = ref.score(reqs)
    for got, w in zip(s.score(reqs), want):
        assert_close(got, w)
    assert s.stats.forward_tokens == ref.stats.forward_tokens - 2 * n
    assert (s.cache_info()["prompt_hits"], s.cache_info()["prompt_misses"]) == (2, 1)
    assert s.stats.reused_tokens == 2 * n


def test_no_prefix_cache_turns_the_shared_p_off(tiny, tmp_path, monkeypatch):
    monkeypatch.setenv(PROMPT_DIR_ENV, str(tmp_path / "env"))
    assert prompt_dir() == tmp_path / "env"
    prompt = make_prompt(0, 18)
    for kw in ({"prefix_cache": False}, {"prompt_cache": False}):
        s = scorer(tiny, max_tokens=LIMIT, context="sliding", **kw)
        for name in "AB":
            s.score([make_request(name, prompt)])
        assert s.cache_info()["prompt_misses"] == 0 and s.cache_info()["prompt_states"] is None
    assert not (tmp_path / "env").exists()
    on = scorer(tiny, max_tokens=LIMIT, context="sliding")  # default: the folder of the variable
    on.score([make_request("A", prompt)])
    assert len(list((tmp_path / "env").glob("*.pt"))) == 1


def test_memory_and_disk_bounds(tmp_path):
    shape = KVShape(1, 1, 4, torch.float32, torch.device("cpu"))

    def entry(n, fill):
        return PromptState(tuple(range(n)), torch.full((1, 2, 1, n, 4), float(fill)))

    cache = PromptCache(shape, tmp_path, "fp", 512, max_entries=2, max_tokens=300)
    cache.put("a" * 64, entry(100, 1))
    one_file = (tmp_path / ("a" * 64 + ".pt")).stat().st_size
    cache.put("b" * 64, entry(100, 2))
    cache.put("c" * 64, entry(100, 3))  # the third state: the oldest leaves memory
    assert list(cache._memory) == ["b" * 64, "c" * 64] and cache.held == 200
    cache.put("d" * 64, entry(400, 4))  # over the token budget: on disk only
    assert "d" * 64 not in cache._memory and cache.get("d" * 64)[1] == "disk"
    assert torch.equal(cache.get("d" * 64)[0].kv, entry(400, 4).kv)
    # disk: at most ~3 small files; the least recently used go first
    small = PromptCache(shape, tmp_path / "small", "fp", 512, max_tokens=0, disk_bytes=3 * one_file + 100)
    for k, name in enumerate("pqr"):
        small.put(name * 64, entry(100, k))
        os.utime(tmp_path / "small" / f"{name * 64}.pt", (1000 + k, 1000 + k))
    assert small.get("p" * 64)[1] == "disk"  # read: now the most recently used
    small.put("s" * 64, entry(100, 9))
    assert sorted(p.stem[0] for p in (tmp_path / "small").glob("*.pt")) == ["p", "r", "s"]
    assert small.get("q" * 64) == (None, None)
    cache.clear()
    assert len(cache) == 0 and cache.held == 0 and cache.get("b" * 64)[1] == "disk"


def test_warm_loads_the_p_states_this_model_used_last_and_readiness_waits_for_it(tiny, tmp_path):
    """``iclr serve`` is ready once P is warm (iclr_cli.serve.health): a new scorer reads the
    states its model used most recently into memory before its first batch, so the first new
    conversation hits memory, not disk; a model with no history is warm at once."""
    prompt = make_prompt(0, 18)
    first = scorer(tiny, max_tokens=LIMIT, context="sliding", prompt_cache_dir=tmp_path)
    first.score([make_request("A", prompt)])
    second = scorer(tiny, max_tokens=LIMIT, context="sliding", prompt_cache_dir=tmp_path)
    assert not second.is_warm() and second.cache_info()["prompt_states"] == 0
    assert second.warm() == 1 and second.is_warm() and second.cache_info()["prompt_states"] == 1
    second.score([make_request("B", prompt)])
    info = second.cache_info()
    assert (info["prompt_hits"], info["prompt_disk_hits"], info["prompt_misses"]) == (1, 0, 0)
    # another folder: nothing to load, warm once asked; without the cache, warm from the start
    other = scorer(tiny, max_tokens=LIMIT, context="sliding", prompt_cache_dir=tmp_path / "empty")
    assert not other.is_warm() and other.warm() == 0 and other.is_warm()
    assert scorer(tiny, max_tokens=LIMIT, prompt_cache=False).is_warm()
    # a broken list of recent states loads nothing and is no error
    for path in tmp_path.glob("recent-*.json"):
        path.write_text("{not json")
    broken = scorer(tiny, max_tokens=LIMIT, context="sliding", prompt_cache_dir=tmp_path)
    assert broken.warm() == 0 and broken.is_warm()
