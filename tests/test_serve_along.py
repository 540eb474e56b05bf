"""Scoring along the stream (docs/serve.md, "Scoring along the stream"; iclr_cli.serve.along).

A scripted upstream streams each reply at a provider's pace (events spaced out); the same
client runs through ``iclr serve`` with scoring ahead off and on. On every wire and reasoning
carrier the upstream must receive the same bytes, the proxy must feed P and the history when
each request arrives and the reply's reasoning while it streams, and the finished step's own
scoring must then charge only the last few tokens (the paced fake charges what a real scorer
with kept state would run). Counts and bytes are asserted, never times.
"""

from __future__ import annotations

import json
import time

import orjson
import pytest

from replay_fixtures import completion
from serve_fixtures import Stream, proxy, scripted_upstream
from wire_fixtures import anthropic_events, anthropic_message, function_call, output_message, reasoning_item, response, responses_events, text, thinking, tool_use

from iclr_cli.scoring.fake import FakeScorer
from iclr_cli.serve import along

pytest.importorskip("starlette")
openai = pytest.importorskip("openai")

STEPS = 3
PACE_S = 0.02
WORDS = "the parser reads a header then checks each field against the schema before it returns".split()


def reasoning(step: int) -> str:
    return "\n\n".join(" ".join(WORDS[(step * 5 + b * 3 + k) % len(WORDS)] for k in range(8 + b)) + f" ({step}.{b})" for b in range(4))


class Charged(FakeScorer):
    """The paced fake (instant at this pace), noting what each finished step's call charged."""

    def __init__(self):
        super().__init__(tokens_per_s=1e9, record_requests=True)
        self.final_charges: list[int] = []

    def score(self, requests):
        before = self.tokens_run
        out = super().score(requests)
        if not any(r.partial for r in requests):
            self.final_charges.append(self.tokens_run - before)
        return out


def tool_time(state, n: int) -> None:
    """The agent's tool runs until the proxy has queued the reply's finished step (``n``
    replies so far), as a real tool call outlasts that; polled, nothing is timed."""
    deadline = time.monotonic() + 60
    while state is not None and state.scores_ahead and state.stats.eager.scored < n and time.monotonic() < deadline:
        time.sleep(0.005)


def _chunk(delta: dict, finish=None) -> dict:
    return {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 0, "model": "fake-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def chat_stream(i: int, carrier: str) -> Stream:
    words = reasoning(i).split(" ")
    pieces = [w + " " for w in words[:-1]] + [words[-1]]
    if carrier == "think":
        deltas = [{"content": "<think>"}] + [{"content": p} for p in pieces] + [{"content": "</think>\nRunning it."}]
    else:
        deltas = [{carrier: p} for p in pieces]
    events = [_chunk({"role": "assistant", "content": ""})] + [_chunk(d) for d in deltas]
    events.append(_chunk({"tool_calls": [{"index": 0, "id": f"call_{i}", "type": "function", "function": {"name": "bash", "arguments": ""}}]}))
    events.append(_chunk({"tool_calls": [{"index": 0, "function": {"arguments": orjson.dumps({"command": f"ls {i}"}).decode()}}]}))
    events.append(_chunk({}, "tool_calls"))
    return Stream(events, interval_s=PACE_S)


def chat_script(carrier: str):
    def reply(body, index):
        i = sum(m.get("role") == "assistant" for m in body["messages"])
        return chat_stream(i, carrier) if i < STEPS else completion("done")

    return [reply] * 50


def drive_chat(url: str, carrier: str, state=None) -> None:
    sdk = openai.OpenAI(base_url=url, api_key="sk", max_retries=0, timeout=60)
    messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Fix the bug."}]
    for i in range(STEPS + 1):
        if i == STEPS:
            sdk.chat.completions.create(model="fake-model", messages=messages)
            return
        msg: dict = {"role": "assistant", "content": ""}
        call = {"id": None, "type": "function", "function": {"name": "", "arguments": ""}}
        for c in sdk.chat.completions.create(model="fake-model", messages=messages, stream=True):
            d = c.choices[0].delta if c.choices else None
            if d is None:
                continue
            msg["content"] += d.content or ""
            extra = (d.model_extra or {}).get(carrier) if carrier != "think" else None
            if extra:
                msg[carrier] = msg.get(carrier, "") + extra
            for tc in d.tool_calls or []:
                call["id"] = tc.id or call["id"]
                call["function"]["name"] += tc.function.name or ""
                call["function"]["arguments"] += tc.function.arguments or ""
        msg["tool_calls"] = [call]
        tool_time(state, i + 1)
        messages = messages + [msg, {"role": "tool", "tool_call_id": call["id"], "content": f"out {i}"}]


def messages_script():
    def reply(body, index):
        i = sum(m.get("role") == "assistant" for m in body["messages"])
        blocks = [thinking(reasoning(i), ""), tool_use(f"toolu_{i}", "Bash", {"command": f"ls {i}"})] if i < STEPS else [text("Fixed.")]
        return Stream(anthropic_events(anthropic_message(blocks), pieces=24), named=True, interval_s=PACE_S)

    return [reply] * 50


def drive_messages(url: str, state=None) -> None:
    sdk = pytest.importorskip("anthropic").Anthropic(base_url=url.removesuffix("/v1"), api_key="sk-ant", max_retries=0, timeout=60)
    messages = [{"role": "user", "content": "Fix the bug."}]
    for i in range(STEPS + 1):
        with sdk.messages.stream(model="claude-x", max_tokens=1000, system="You are an agent.", messages=messages) as stream:
            out = stream.get_final_message()
        blocks = [b.model_dump(exclude_none=True) for b in out.content]
        if i == STEPS:
            return
        tool_time(state, i + 1)
        messages = messages + [{"role": "assistant", "content": blocks},
                               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"out {i}"}]}]


def responses_script(summary: bool):
    def reply(body, index):
        i = sum(1 for item in body["input"] if item.get("type") == "function_call")
        if i >= STEPS:
            output = [output_message("Fixed.")]
        else:
            item = reasoning_item(reasoning(i), f"rs_{i}", summary=summary)
            if summary:
                item["content"] = []
            output = [item, function_call(f"call_{i}", "shell", {"cmd": f"ls {i}"})]
        return Stream(responses_events(response(output, response_id=f"resp_{i}"), pieces=24), named=True, interval_s=PACE_S)

    return [reply] * 50


def drive_responses(url: str, state=None) -> None:
    sdk = openai.OpenAI(base_url=url, api_key="sk", max_retries=0, timeout=60)
    items = [{"role": "user", "content": "Fix the bug."}]
    for i in range(STEPS + 1):
        out = next(e for e in sdk.responses.create(model="gpt-test", input=items, instructions="You are an agent.", store=False, stream=True)
                   if e.type == "response.completed").response
        if i == STEPS:
            return
        tool_time(state, i + 1)
        items = items + [o.model_dump(exclude_none=True) for o in out.output] + [{"type": "function_call_output", "call_id": f"call_{i}", "output": f"out {i}"}]


WIRES = {
    "chat reasoning_content": (lambda: chat_script("reasoning_content"), lambda url, state: drive_chat(url, "reasoning_content", state)),
    "chat reasoning": (lambda: chat_script("reasoning"), lambda url, state: drive_chat(url, "reasoning", state)),
    "chat <think> in content": (lambda: chat_script("think"), lambda url, state: drive_chat(url, "think", state)),
    "messages thinking_delta": (messages_script, drive_messages),
    "responses reasoning_text": (lambda: responses_script(False), drive_responses),
    "responses summary deltas": (lambda: responses_script(True), drive_responses),
}


@pytest.fixture
def every_chunk(monkeypatch):
    """A feed at every chunk the scorer is free for (no quarter-second spacing), so that the
    last feed reliably covers the whole reasoning before the tool call ends the reply."""
    monkeypatch.setattr(along, "MIN_INTERVAL_S", 0.0)
    monkeypatch.setattr(along, "MIN_NEW_BYTES", 1)


@pytest.mark.parametrize("wire", list(WIRES))
def test_a_reply_is_scored_along_the_stream_and_the_same_bytes_go_upstream(wire, every_chunk):
    script, drive = WIRES[wire]

    def once(eager: bool):
        scorer = Charged()
        with scripted_upstream(script()) as up, proxy(up.url, eager_scoring=eager, scorer=scorer, tokenizer=scorer.tokenizer) as (url, state):
            drive(url, state)
            return list(up.raw), {c.id: dict(c.steps) for c in state.conversations()}, state, scorer

    off_raw, off_steps, off, _ = once(False)
    on_raw, on_steps, on, scorer = once(True)
    assert on_raw == off_raw and on_steps == off_steps and len(on_raw) == STEPS + 1
    assert sum(b"[SKIP]" in raw for raw in on_raw) == STEPS
    e = on.stats.eager
    assert e.fed_context == STEPS + 1  # every request, the first one's P under its provisional stream
    assert e.fed_reasoning >= STEPS  # each reply fed while it streamed
    assert off.stats.eager.fed_context == off.stats.eager.fed_reasoning == 0
    assert e.hits + e.waits == STEPS and e.misses == 0
    # the finished steps ran only the last words the feeds held back (a whole step is ~45 tokens here)
    # the first reply was fed under a provisional stream, renamed to its conversation
    assert any(r.partial and r.step and r.stream.startswith("first:") for r in scorer.requests_seen)
    assert len(scorer.final_charges) == STEPS and sum(scorer.final_charges) <= 6 * STEPS, scorer.final_charges


def test_a_partial_responses_stream_is_read_item_by_item():
    from iclr_cli.serve.responses import read_partial_stream
    from serve_fixtures import Stream as _S  # noqa: F401

    item = reasoning_item("first part", "rs_1", summary=True)
    events = responses_events(response([item, function_call("call_1", "shell", {"cmd": "ls"})]), pieces=3)
    body = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
    cut = body.index(b"event: response.reasoning_summary_text.delta")
    cut = body.index(b"event: response.reasoning_summary_text.delta", cut + 1) + 20  # into the second summary delta
    partial = read_partial_stream(body[:cut])
    assert partial[0]["type"] == "reasoning" and partial[0]["summary"][0]["text"] == "firs"
    assert read_partial_stream(body)[0] == item


def test_a_client_gone_mid_stream_drops_the_reply_s_queued_feeds():
    class Queue:
        dropped: list = []

        def drop(self, future):
            self.dropped.append(future)
            return True

    from concurrent.futures import Future

    class State:
        scores_ahead = True
        scorer = Queue()

    class Sent:
        conversation, request, stream = "c", object(), "c"

    feeder = along.Feeder(State(), Sent(), None, None)
    queued, done = Future(), Future()
    done.set_result([])
    feeder._futures += [queued, done]
    feeder.close()
    assert Queue.dropped == [queued] and feeder._closed
    feeder.chunk(bytearray(b"x" * 1000))  # nothing fed after close
    assert feeder._task is None


def test_a_first_request_that_starts_no_conversation_leaves_no_scorer_state(every_chunk):
    """Its P was fed under a provisional stream; an error answer (no reply) drops it."""
    from replay_fixtures import Reply

    scorer = Charged()
    with scripted_upstream([Reply({"error": {"message": "overloaded"}}, status=529)]) as up, \
            proxy(up.url, scorer=scorer, tokenizer=scorer.tokenizer) as (url, state):
        sdk = openai.OpenAI(base_url=url, api_key="sk", max_retries=0, timeout=60)
        with pytest.raises(openai.APIStatusError):
            sdk.chat.completions.create(model="fake-model", messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi."}])
        deadline = time.monotonic() + 30
        while scorer._kept and time.monotonic() < deadline:
            time.sleep(0.01)
        assert state.stats.eager.fed_context == 1 and not scorer._kept  # fed, then dropped


def test_a_reply_with_no_step_takes_its_requests_history_feed_out_of_the_queue():
    """A final answer has no step to score: the P-and-history feed its request queued would
    only run ahead of other conversations' current steps, so it leaves the queue unrun."""
    import threading

    from iclr_cli.scoring.base import ScoreRequest

    def reply(body, index):
        return chat_stream(0, "reasoning_content") if not any(m["role"] == "assistant" for m in body["messages"]) else completion("done")

    gate = threading.Event()
    gate.set()
    scorer = FakeScorer(tokens_per_s=1e9, gate=gate, record_requests=True)
    with scripted_upstream([reply] * 5) as up, proxy(up.url, scorer=scorer, tokenizer=scorer.tokenizer) as (url, state):
        sdk = openai.OpenAI(base_url=url, api_key="sk", max_retries=0, timeout=60)
        messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Fix the bug."}]
        msg: dict = {"role": "assistant", "content": "", "reasoning_content": ""}
        call = {"id": None, "type": "function", "function": {"name": "", "arguments": ""}}
        for c in sdk.chat.completions.create(model="fake-model", messages=messages, stream=True):
            d = c.choices[0].delta if c.choices else None
            if d is not None:
                msg["reasoning_content"] += (d.model_extra or {}).get("reasoning_content") or ""
                for tc in d.tool_calls or []:
                    call["id"] = tc.id or call["id"]
                    call["function"]["name"] += tc.function.name or ""
                    call["function"]["arguments"] += tc.function.arguments or ""
        msg["tool_calls"] = [call]
        tool_time(state, 1)
        deadline = time.monotonic() + 30
        while state.scorer.in_progress and time.monotonic() < deadline:  # step 0 scored ahead
            time.sleep(0.01)
        gate.clear()  # another conversation's batch holds the scorer from here
        state.scorer.submit([ScoreRequest("other", ("[system]\nBusy.\n\n",), (), "", (), partial=True)], eager=True, due=0)
        sdk.chat.completions.create(model="fake-model", messages=messages + [msg, {"role": "tool", "tool_call_id": call["id"], "content": "out 0"}])
        deadline = time.monotonic() + 30
        while not state.stats.eager.fed_context_dropped and time.monotonic() < deadline:
            time.sleep(0.01)
        dropped = state.stats.eager.fed_context_dropped
        gate.set()
        assert state.stats.total.steps_compressed == 1
    # the second request's history feed (P and step 0) was queued, then dropped unrun
    assert dropped == 1 and state.stats.eager.fed_context == 2
    assert not [r for r in scorer.requests_seen if r.partial and not r.step and r.history]
