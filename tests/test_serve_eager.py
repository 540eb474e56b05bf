"""Scoring a reply's step ahead, while the agent runs its tool (docs/serve.md, "What scoring costs").

The same client runs twice through ``iclr serve``, with scoring ahead on and off: the upstream
must receive the same bytes and the proxy must store the same compressed steps, whether the
next request finds the result done (a hit), still running (a wait), or not matching (a miss:
the client edited its history, dropped or changed the reasoning, or never followed up).
"""

from __future__ import annotations

import json
import threading
import time

import orjson
import pytest

from replay_fixtures import call, completion
from serve_fixtures import Stream, proxy, scripted_upstream

from iclr_cli.scoring.base import ScoreRequest
from iclr_cli.scoring.fake import FakeScorer
from iclr_cli.serve.batching import BatchingScorer
from iclr_cli.serve.eager import EagerScorer
from iclr_cli.serve.stats import Stats

pytest.importorskip("starlette")
openai = pytest.importorskip("openai")

SYSTEM = {"role": "system", "content": "You are an agent."}
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()


def reasoning(step: int) -> str:
    return "\n\n".join(" ".join(WORDS[(step * 3 + b + k) % len(WORDS)] for k in range(3 + b)) + f" ({step}.{b})" for b in range(5))


def _chunk(delta: dict, finish=None) -> dict:
    return {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 0, "model": "fake-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def tool_stream(i: int, text: str) -> Stream:
    """A streamed reply: reasoning in three pieces, then one tool call in two."""
    third = len(text) // 3 + 1
    events = [_chunk({"role": "assistant", "content": ""})]
    events += [_chunk({"reasoning_content": text[a : a + third]}) for a in range(0, len(text), third)]
    events.append(_chunk({"tool_calls": [{"index": 0, "id": f"call_{i}", "type": "function", "function": {"name": "bash", "arguments": ""}}]}))
    events.append(_chunk({"tool_calls": [{"index": 0, "function": {"arguments": orjson.dumps({"command": f"ls {i}"}).decode()}}]}))
    events.append(_chunk({}, "tool_calls"))
    return Stream(events)


def responder(steps: int):
    """Replies by the number of assistant turns in the request: a tool call with reasoning for
    the first ``steps``, then a final answer; streamed when the request asks for it."""
    def reply(body, index):
        i = sum(m.get("role") == "assistant" for m in body["messages"])
        if i >= steps:
            return completion("done")
        if body.get("stream"):
            return tool_stream(i, reasoning(i))
        return completion(None, [call("bash", {"command": f"ls {i}"}, call_id=f"call_{i}")], reasoning_content=reasoning(i))

    return [reply] * 200


def _assemble(chunks) -> dict:
    msg: dict = {"role": "assistant", "content": ""}
    calls: dict[int, dict] = {}
    for c in chunks:
        if not c.choices:
            continue
        d = c.choices[0].delta
        msg["content"] += d.content or ""
        extra = (d.model_extra or {}).get("reasoning_content")
        if extra:
            msg["reasoning_content"] = msg.get("reasoning_content", "") + extra
        for tc in d.tool_calls or []:
            slot = calls.setdefault(tc.index, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
            slot["id"] = tc.id or slot["id"]
            slot["function"]["name"] += (tc.function.name or "") if tc.function else ""
            slot["function"]["arguments"] += (tc.function.arguments or "") if tc.function else ""
    if calls:
        msg["tool_calls"] = [calls[i] for i in sorted(calls)]
    return msg


def drive(url: str, user: str, *, streamed=False, edit=None, after_reply=None, until=None) -> list[dict]:
    """One agent: send, append the reply (``edit(i, messages, reply)`` may change what goes
    back) and a tool result, until a reply without tool calls (or ``until`` replies);
    ``after_reply(i)`` runs after each reply with tool calls (the tool's time)."""
    sdk = openai.OpenAI(base_url=url, api_key="sk", max_retries=0, timeout=60)
    messages = [SYSTEM, {"role": "user", "content": user}]
    i = 0
    while True:
        if streamed:
            reply = _assemble(sdk.chat.completions.create(model="fake-model", messages=messages, stream=True))
        else:
            reply = sdk.chat.completions.create(model="fake-model", messages=messages).choices[0].message.model_dump(exclude_none=True)
        if not reply.get("tool_calls"):
            return messages
        if after_reply is not None:
            after_reply(i)
        if until is not None and i + 1 >= until:
            return messages
        messages = list(messages)
        reply = edit(i, messages, reply) if edit else reply
        messages += [reply, {"role": "tool", "tool_call_id": reply["tool_calls"][0]["id"], "content": f"out {i}"}]
        i += 1


def ahead(counts) -> dict:
    """The counts of scoring a finished step ahead (not those of feeding along the stream)."""
    return {k: v for k, v in counts.to_record().items() if not k.startswith("fed_")}


def scored(state, n: int) -> None:
    """Wait (not a timed assertion) until ``n`` steps were queued for scoring ahead and every
    one of them is scored, as when the agent's tool outlasts the scoring; on a loaded machine
    the next request would otherwise find its step still running and count a wait."""
    deadline = time.monotonic() + 120
    while (state.stats.eager.scored < n or state.scorer.in_progress) and time.monotonic() < deadline:
        time.sleep(0.005)


def run(client, *, eager: bool, steps: int = 5, **options):
    """Run ``client(url, state)`` through a proxy; (upstream bodies, stored steps, state)."""
    with scripted_upstream(responder(steps)) as up, proxy(up.url, eager_scoring=eager, **options) as (url, state):
        client(url, state)
        stored = {c.id: dict(c.steps) for c in state.conversations()}
        return list(up.raw), stored, state


@pytest.mark.parametrize("streamed", [False, True])
def test_scored_ahead_equals_scored_at_the_next_request(streamed):
    def client(url, state):
        drive(url, "Fix the bug.", streamed=streamed, after_reply=lambda i: scored(state, i + 1) if state.scores_ahead else None)

    off_raw, off_steps, off = run(client, eager=False)
    on_raw, on_steps, on = run(client, eager=True)
    assert on_raw == off_raw and on_steps == off_steps
    assert len(on_raw) == 6 and sum(b"[SKIP]" in raw for raw in on_raw) == 5
    assert on.stats.total.steps_compressed == off.stats.total.steps_compressed == 5
    # every compressed step found its result scored ahead, done before the request came
    assert ahead(on.stats.eager) == {"scored": 5, "hits": 5, "waits": 0, "misses": 0, "unused": 0}
    # P and the history of every request, the first one's under a provisional stream, were fed while the upstream worked
    assert on.stats.eager.fed_context == 6
    assert off.stats.eager.scored == 0 and off.stats.eager.fed_context == 0 and not off.scores_ahead


def test_a_tool_that_returns_at_once_races_the_scoring_and_changes_nothing():
    def client(url, state):
        threads = [threading.Thread(target=drive, args=(url, f"task {k}"), kwargs={"streamed": k % 2 == 1}) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)

    off_raw, off_steps, _ = run(client, eager=False)
    on_raw, on_steps, on = run(client, eager=True)
    assert sorted(on_raw) == sorted(off_raw) and on_steps == off_steps and len(on_steps) == 4
    e = on.stats.eager
    assert e.hits + e.waits + e.misses == on.stats.total.steps_compressed == 20
    assert e.scored == e.hits + e.waits + e.unused  # what was scored ahead was used or counted unused


def test_next_requests_that_differ_from_the_reply_fall_back_to_scoring_then():
    def edit(i, messages, reply):
        if i == 1:  # the client drops the reasoning: nothing to score for this step
            reply = {k: v for k, v in reply.items() if k != "reasoning_content"}
        if i == 2:  # the client sends other reasoning back
            reply = {**reply, "reasoning_content": reply["reasoning_content"].upper()}
        if i == 3:  # the client edits an earlier tool result: later steps are new
            messages[3] = {**messages[3], "content": "edited"}
        return reply

    def client(url, state):
        drive(url, "Fix the bug.", edit=edit, after_reply=lambda i: scored(state, i + 1) if state.scores_ahead else None)
        # a second agent never follows its first reply up; a third evicts its conversation
        drive(url, "Another task.", until=1, after_reply=lambda i: scored(state, 6) if state.scores_ahead else None)
        drive(url, "A third task.", until=1, after_reply=lambda i: scored(state, 7) if state.scores_ahead else None)

    off_raw, off_steps, _ = run(client, eager=False, max_conversations=1)
    on_raw, on_steps, on = run(client, eager=True, max_conversations=1)
    assert on_raw == off_raw and on_steps == off_steps
    assert sum(b"[SKIP]" in raw for raw in on_raw) >= 3
    e = on.stats.eager
    # Steps 0 and 4 found their results (hits). Step 1 came back without reasoning (nothing to
    # score), step 2 with other reasoning (a miss); the edit in request 4 made steps 1-3 new
    # steps, compressed again against the edited history (step 1 unscored, 2 and 3 misses).
    assert on.stats.total.steps_completed == 7
    # step 1 without reasoning, both times, had nothing to compress: not counted as compressed
    assert on.stats.total.steps_compressed == 5 and on.stats.total.steps_nothing_to_compress == 2
    assert ahead(e) == {"scored": 7, "hits": 2, "waits": 0, "misses": 3, "unused": 4}
    # unused: steps 1, 2 and 3 as predicted (replaced by the next reply's) and the second
    # agent's reply, dropped with its conversation; the third's is still kept
    assert on.scorer.pending == 1


def test_restored_reasoning_finds_the_step_scored_ahead():
    def edit(i, messages, reply):
        return {k: v for k, v in reply.items() if k != "reasoning_content"}  # the client drops it

    def client(url, state):
        drive(url, "Fix the bug.", edit=edit, after_reply=lambda i: scored(state, i + 1) if state.scores_ahead else None)

    off_raw, off_steps, _ = run(client, eager=False, restore_reasoning=True)
    on_raw, on_steps, on = run(client, eager=True, restore_reasoning=True)
    assert on_raw == off_raw and on_steps == off_steps and sum(b"[SKIP]" in raw for raw in on_raw) == 5
    assert (on.stats.eager.hits, on.stats.eager.misses) == (5, 0)


def _reserialised(how: str):
    """The turn sent back as real clients re-serialise it (OpenCode, Qwen Code: ``content: null``
    as ``""``, the arguments re-encoded; SDKs: ``null`` fields, a streaming ``index``)."""
    def edit(i, messages, reply):
        reply = dict(reply)
        calls = [dict(c, function=dict(c["function"])) for c in reply["tool_calls"]]
        for c in calls:
            args = orjson.loads(c["function"]["arguments"])
            if how == "compact":
                c["function"]["arguments"] = orjson.dumps(args).decode()
            else:  # spaced, as json.dumps writes it
                c["function"]["arguments"] = json.dumps(args)
                c["index"] = 0
        reply["tool_calls"] = calls
        reply["content"] = "" if how == "compact" else None
        reply["refusal"] = None
        return reply

    return edit


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("how", ["compact", "spaced"])
def test_a_client_that_re_serialises_its_turn_finds_the_step_scored_ahead(streamed, how):
    def client(url, state):
        drive(url, "Fix the bug.", streamed=streamed, edit=_reserialised(how),
              after_reply=lambda i: scored(state, i + 1) if state.scores_ahead else None)

    off_raw, off_steps, _ = run(client, eager=False)
    on_raw, on_steps, on = run(client, eager=True)
    assert on_raw == off_raw and on_steps == off_steps and sum(b"[SKIP]" in raw for raw in on_raw) == 5
    # one conversation (the first request's reply and the client's copy of it have one id), and
    # every step found the result scored ahead from the reply as the proxy relayed it
    assert len(on_steps) == 1
    assert ahead(on.stats.eager) == {"scored": 5, "hits": 5, "waits": 0, "misses": 0, "unused": 0}


def test_a_request_waits_for_its_step_still_being_scored_ahead():
    entered, release = threading.Event(), threading.Event()

    class Held(FakeScorer):
        def score(self, requests):
            if requests[0].history and not requests[0].partial:  # step 1 (scored ahead) holds until released
                entered.set()
                release.wait(30)
            return super().score(requests)

    held = Held(record_requests=True)
    with scripted_upstream(responder(5)) as up, proxy(up.url, scorer=held, tokenizer=held.tokenizer) as (url, state):
        promote = state.scorer.inner.promote

        def promoted(future):  # the next request found step 1 still being scored: let it finish
            release.set()
            return promote(future)

        state.scorer.inner.promote = promoted
        drive(url, "Fix the bug.", after_reply=lambda i: entered.wait(30) if i == 1 else None, until=3)
        e = state.stats.eager
    assert release.is_set() and e.waits >= 1 and e.hits + e.waits + e.misses == state.stats.total.steps_compressed == 2
    # step 1 was scored once, ahead, and the request waited for that result
    assert sum(bool(r.history) for r in held.requests_seen if "(1." in r.step and not r.partial) == 1


def test_waited_for_requests_go_before_work_ahead():
    order, entered, release = [], threading.Event(), threading.Event()

    class Logged(FakeScorer):
        def score(self, requests):
            order.extend(r.stream for r in requests)
            if requests[0].stream == "first":
                entered.set()
                release.wait(10)
            return super().score(requests)

    batching = BatchingScorer(Logged(), wait_s=0)
    eager = EagerScorer(batching, Stats())

    def req(stream, step="[reasoning]\nOne.\n\nTwo."):
        return ScoreRequest(stream, ("[user]\nGo.\n\n",), (), step, ((12, 16), (18, len(step))))

    first = batching.submit([req("first")])
    assert entered.wait(10)
    eager.prefetch(req("ahead-1"))
    eager.prefetch(req("ahead-2"))
    asked = threading.Thread(target=eager.score, args=([req("ahead-2")],))  # a request now waits for it
    asked.start()
    while len(batching._urgent) < 1:
        time.sleep(0.002)
    waiting = threading.Thread(target=eager.score, args=([req("now")],))
    waiting.start()
    while batching.queued < 3:
        time.sleep(0.002)
    release.set()
    for t in (asked, waiting):
        t.join(10)
    first.result(10)
    batching.close()
    # waited-for requests first (ahead-2 promoted when asked for), work ahead after them
    assert order == ["first", "ahead-2", "now", "ahead-1"]
    assert ahead(eager.stats.eager) == {"scored": 2, "hits": 0, "waits": 1, "misses": 1, "unused": 0}


def _anthropic_client(url, state, streamed, steps):
    from wire_fixtures import thinking, tool_use

    sdk = pytest.importorskip("anthropic").Anthropic(base_url=url.removesuffix("/v1"), api_key="sk-ant", max_retries=0, timeout=60)
    messages = [{"role": "user", "content": "Fix the bug."}]
    for i in range(steps + 1):
        kw = dict(model="claude-x", max_tokens=1000, system="You are an agent.", messages=messages)
        if streamed:
            with sdk.messages.stream(**kw) as stream:
                out = stream.get_final_message()
        else:
            out = sdk.messages.create(**kw)
        blocks = [b.model_dump(exclude_none=True) for b in out.content]
        if blocks[0] != thinking(reasoning(i)) or blocks[1] != tool_use(f"toolu_{i}", "Bash", {"command": f"ls {i}"}):
            return
        if state.scores_ahead:
            scored(state, i + 1)
        messages = messages + [{"role": "assistant", "content": blocks},
                               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"out {i}"}]}]


def _responses_client(url, state, streamed, steps):
    sdk = openai.OpenAI(base_url=url, api_key="sk", max_retries=0, timeout=60)
    items = [{"role": "user", "content": "Fix the bug."}]
    for i in range(steps + 1):
        kw = dict(model="gpt-test", input=items, instructions="You are an agent.", store=False)
        if streamed:
            out = next(e for e in sdk.responses.create(stream=True, **kw) if e.type == "response.completed").response
        else:
            out = sdk.responses.create(**kw)
        got = [o.model_dump(exclude_none=True) for o in out.output]
        if got[0]["type"] != "reasoning":
            return
        if state.scores_ahead:
            scored(state, i + 1)
        items = items + got + [{"type": "function_call_output", "call_id": f"call_{i}", "output": f"out {i}"}]


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("api", ["messages", "responses"])
def test_scored_ahead_on_the_anthropic_and_responses_endpoints(api, streamed):
    from wire_fixtures import anthropic_reply, function_call, output_message, reasoning_item, responses_reply, text, thinking, tool_use

    steps = 3
    if api == "messages":
        script = [anthropic_reply([thinking(reasoning(i)), tool_use(f"toolu_{i}", "Bash", {"command": f"ls {i}"})], stream=streamed) for i in range(steps)]
        script.append(anthropic_reply([text("Fixed.")], stream=streamed))
        drive_api = _anthropic_client
    else:
        script = [responses_reply([reasoning_item(reasoning(i), f"rs_{i}"), function_call(f"call_{i}", "shell", {"cmd": f"ls {i}"})],
                                  stream=streamed, response_id=f"resp_{i}") for i in range(steps)]
        script.append(responses_reply([output_message("Fixed.")], stream=streamed))
        drive_api = _responses_client

    def once(eager: bool):
        with scripted_upstream(list(script)) as up, proxy(up.url, eager_scoring=eager) as (url, state):
            drive_api(url, state, streamed, steps)
            return list(up.raw), {c.id: dict(c.steps) for c in state.conversations()}, state

    off_raw, off_steps, off = once(False)
    on_raw, on_steps, on = once(True)
    assert on_raw == off_raw and on_steps == off_steps and len(on_raw) == steps + 1
    assert sum(b"[SKIP]" in raw for raw in on_raw) == steps and on.stats.total.steps_compressed == steps
    assert ahead(on.stats.eager) == {"scored": steps, "hits": steps, "waits": 0, "misses": 0, "unused": 0}
    assert on.stats.eager.fed_context == steps + 1
