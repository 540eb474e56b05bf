"""The proxy's write-back without HTTP: conversations, step keys, shapes, failures, LRU, SQLite."""

from __future__ import annotations

import threading
import time

import orjson
import pytest

from iclr_cli.compress import Settings
from iclr_cli.errors import UsageError
from iclr_cli.policies import parse_variant
from iclr_cli.scoring.fake import FakeScorer
from iclr_cli.serve import replies
from iclr_cli.serve.batching import BatchingScorer
from iclr_cli.serve.chat import CHAT
from iclr_cli.serve.dialect import Reply
from iclr_cli.serve.state import ServeState
from iclr_cli.serve.store_sqlite import SqliteStore
from iclr_cli.token_accounting import account, token_counter

REASONING = "Look at the file first.\n\nMaybe grep for it.\n\nThe answer is in line 3.\n\nCheck the tests too."
SYSTEM = {"role": "system", "content": "You are an agent."}
USER = {"role": "user", "content": "Fix the bug."}


def assistant(i: int, reasoning: str = REASONING, field: str = "reasoning_content", **extra) -> dict:
    msg = {"role": "assistant", "content": None, "tool_calls": [{"id": f"call_{i}", "type": "function", "function": {"name": "bash", "arguments": f'{{"command": "ls {i}"}}'}}]}
    if field == "think":
        msg["content"] = f"<think>{reasoning}</think>Running ls."
    else:
        msg[field] = reasoning
    return {**msg, **extra}


def tool(i: int) -> dict:
    return {"role": "tool", "tool_call_id": f"call_{i}", "content": f"file{i}.py"}


def conversation(steps: int, **kw) -> list[dict]:
    out = [SYSTEM, USER]
    for i in range(steps):
        out += [assistant(i, **kw), tool(i)]
    return out


def make_state(variant="iclr", scorer=None, **kw) -> ServeState:
    inner = scorer or FakeScorer()
    return ServeState(Settings(parse_variant(variant)), BatchingScorer(inner), inner.tokenizer, **kw)


def send(state: ServeState, messages: list[dict], header=None, **body) -> tuple[dict, object]:
    raw = orjson.dumps({"model": "m", "messages": messages, **body})
    rw = state.rewrite(orjson.loads(raw), raw, header)
    return orjson.loads(rw.body), rw


def test_first_request_and_step_in_progress_are_never_compressed():
    state = make_state()
    body, rw = send(state, [SYSTEM, USER])
    assert rw.conversation is None and body["messages"] == [SYSTEM, USER]
    # a trailing assistant message (prefill / step in progress) is not complete
    body, rw = send(state, [SYSTEM, USER, assistant(0)])
    assert body["messages"][-1]["reasoning_content"] == REASONING and rw.compressed == 0


def test_completed_step_is_compressed_once_and_reused():
    scorer = FakeScorer()
    state = make_state(scorer=scorer)
    body, rw = send(state, conversation(1))
    first = body["messages"][2]["reasoning_content"]
    assert "[SKIP]" in first and rw.compressed == 1 and scorer.calls == 1
    body2, rw2 = send(state, conversation(2))
    assert body2["messages"][2]["reasoning_content"] == first  # stored text reused, not recomputed
    assert rw2.compressed == 1 and scorer.calls == 2
    assert body2["messages"][:4] == body["messages"]


def test_unread_assistant_text_is_counted_once_per_step(caplog):
    state = make_state()
    msgs = conversation(2, thoughts="a field no adapter reads")
    with caplog.at_level("WARNING", logger="iclr.serve"):
        send(state, msgs[:4])
        send(state, msgs)  # step 0 is stored: its text is not reported again
    total = state.stats.total
    assert total.steps_compressed == 2 and total.unrecognised == 2
    said = [r.getMessage() for r in caplog.records if "thoughts" in r.getMessage()]
    assert len(said) == 2 and "messages[2].thoughts" in said[0] and "messages[4].thoughts" in said[1]


def test_reasoning_shapes_are_written_back_in_place():
    state = make_state()
    body, _ = send(state, conversation(1, field="think"))
    content = body["messages"][2]["content"]
    assert content.startswith("<think>") and content.endswith("</think>Running ls.") and "[SKIP]" in content

    details = [{"type": "reasoning.text", "text": REASONING, "signature": "sig", "format": "x"}, {"type": "reasoning.encrypted", "data": "opaque"}]
    body, _ = send(make_state(), [SYSTEM, USER, assistant(0, field="reasoning", reasoning_details=details), tool(0)])
    msg = body["messages"][2]
    assert "[SKIP]" in msg["reasoning"]
    # the signed entry loses its signature; the encrypted copy of the old text goes
    assert msg["reasoning_details"] == [{"type": "reasoning.text", "text": msg["reasoning"], "format": "x"}]


CALL = [{"id": "call_0", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls 0"}'}}]
HARMONY = f"<|channel|>analysis<|message|>{REASONING}<|end|><|start|>assistant<|channel|>final<|message|>Running ls."
# (an assistant turn with reasoning in one shape the message-level API reads, the same turn as
# a client that drops the reasoning sends it back)
SHAPES = {
    "reasoning_content": ({"reasoning_content": REASONING, "content": None}, {"content": None}),
    "reasoning": ({"reasoning": REASONING, "content": None}, {"content": None}),
    "thinking": ({"thinking": REASONING, "content": "Running ls."}, {"content": "Running ls."}),
    "think": ({"content": f"<think>{REASONING}</think>Running ls."}, {"content": "Running ls."}),
    "lone-close": ({"content": f"{REASONING}</think>Running ls."}, {"content": "Running ls."}),
    "harmony": ({"content": HARMONY}, {"content": "Running ls."}),
    "mistral": ({"content": [{"type": "thinking", "thinking": REASONING}, {"type": "text", "text": "Running ls."}]}, {"content": [{"type": "text", "text": "Running ls."}]}),
}


def _turn(fields: dict) -> dict:
    return {"role": "assistant", **fields, "tool_calls": CALL}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_shape_is_compressed_in_place_and_recognised_without_its_reasoning(shape):
    with_reasoning, dropped = SHAPES[shape]
    state = make_state()
    body, rw = send(state, [SYSTEM, USER, _turn(with_reasoning), tool(0)])
    sent = body["messages"][2]
    assert rw.compressed == 1 and orjson.dumps(sent).count(b"[SKIP]") == 3
    assert {k: v for k, v in sent.items() if k not in ("content", *with_reasoning)} == {"role": "assistant", "tool_calls": CALL}
    assert "Running ls." in orjson.dumps(sent).decode() or sent.get("content") is None
    # the conversation is the same when the client sends the turn back without its reasoning
    assert send(state, [SYSTEM, USER, _turn(dropped), tool(0)])[1].conversation == rw.conversation


def test_deleted_reasoning_content_is_sent_as_empty_string():
    body, _ = send(make_state("delete-all"), conversation(2))
    assert [m["reasoning_content"] for m in body["messages"] if m["role"] == "assistant"] == ["", ""]


def test_variant_none_forwards_the_clients_bytes():
    state = make_state("none")
    raw = orjson.dumps({"model": "m", "messages": conversation(2)}) + b" "
    assert state.rewrite(orjson.loads(raw), raw, None).body == raw


def test_conversations_are_told_apart_and_the_header_overrides():
    state = make_state()
    a = conversation(1)
    b = [SYSTEM, USER, assistant(5), tool(5)]  # same P, another reply
    _, ra = send(state, a)
    _, rb = send(state, b)
    assert ra.conversation != rb.conversation
    # a client that drops reasoning from its copy is still the same conversation
    dropped = [SYSTEM, USER, {k: v for k, v in a[2].items() if k != "reasoning_content"}, a[3]]
    assert send(state, dropped)[1].conversation == ra.conversation
    _, rh = send(state, a, header="my-run-1")
    assert rh.conversation == "h:my-run-1"
    assert {c.id for c in state.conversations()} == {ra.conversation, rb.conversation, "h:my-run-1"}


def test_first_reply_gives_the_conversation_its_id():
    state = make_state()
    reply = {"role": "assistant", "content": None, "reasoning_content": REASONING, "tool_calls": assistant(0)["tool_calls"]}
    conv = replies.record_reply(state, None, CHAT.parse({"messages": [SYSTEM, USER]}), Reply((reply,)))
    assert conv is not None and conv.id == send(state, conversation(1))[1].conversation


def test_restore_reasoning_reinserts_by_tool_call_id():
    state = make_state(restore_reasoning=True)
    reply = {"role": "assistant", "content": None, "reasoning_content": REASONING, "tool_calls": assistant(0)["tool_calls"]}
    replies.record_reply(state, None, CHAT.parse({"messages": [SYSTEM, USER]}), Reply((reply,)))
    dropped = [SYSTEM, USER, {"role": "assistant", "content": None, "tool_calls": assistant(0)["tool_calls"]}, tool(0)]
    body, _ = send(state, dropped)
    sent = body["messages"][2]["reasoning_content"]
    assert "[SKIP]" in sent and sent == send(make_state(), conversation(1))[0]["messages"][2]["reasoning_content"]
    # without the option the turn goes on without reasoning
    plain = make_state()
    replies.record_reply(plain, None, CHAT.parse({"messages": [SYSTEM, USER]}), Reply((reply,)))
    assert "reasoning_content" not in send(plain, dropped)[0]["messages"][2]


class Failing:
    """Raises on the first ``fail`` calls, then scores like the fake."""

    def __init__(self, fail: int = 1):
        self.inner = FakeScorer()
        self.name, self.max_tokens, self.overflow, self.tokenizer = "fake", self.inner.max_tokens, "window", self.inner.tokenizer
        self.fail = fail

    def score(self, requests):
        if self.fail:
            self.fail -= 1
            raise RuntimeError("proxy model crashed")
        return self.inner.score(requests)


def test_scorer_failure_forwards_uncompressed_and_keeps_that_choice():
    state = make_state(scorer=Failing(fail=2))  # the batch, then the request scored alone
    body, _ = send(state, conversation(1))
    assert body["messages"][2]["reasoning_content"] == REASONING
    body, _ = send(state, conversation(2))  # the scorer works again
    assert body["messages"][2]["reasoning_content"] == REASONING  # step 0 stays as first sent
    assert "[SKIP]" in body["messages"][4]["reasoning_content"]
    conv = state.conversations()[-1]
    assert conv.counts.scorer_failures == 1 and state.stats.total.scorer_failures == 1
    assert [s.failure for s in conv.steps.values()].count(None) == 1
    # the one accounting over (as generated, as sent): the failed step counts as generated,
    # nothing of it deleted; the other as compress_step counted it
    count = token_counter(state.tokenizer)
    expected = account(count, [(REASONING, REASONING), (REASONING, body["messages"][4]["reasoning_content"])])
    assert conv.counts.reasoning == state.stats.total.reasoning == expected
    assert expected.deleted > 0 and expected.generated == 2 * count(REASONING) and expected.markers == 3


def test_lru_bound_in_memory_and_sqlite_keeps_every_conversation_until_it_expires(tmp_path):
    settings = {"variant": "iclr"}
    state = make_state(store=SqliteStore(tmp_path, settings), max_conversations=2)
    convs = [[SYSTEM, {"role": "user", "content": f"task {i}"}, assistant(i), tool(i)] for i in range(3)]
    sent = [send(state, c)[0] for c in convs]
    assert len(state.conversations()) == 2  # the memory bound: least recently used dropped
    state.store.close()
    again = make_state(scorer=Failing(fail=100), store=SqliteStore(tmp_path, settings), max_conversations=2)
    assert again.conversations() == []  # nothing loaded up front: read when a request comes
    # every conversation comes back with its compressed steps, the evicted one too (no scoring needed)
    for c, s in zip(convs, sent):
        assert send(again, c)[0] == s
    assert again.stats.total.scorer_failures == 0
    assert len(again.conversations()) == 2
    again.store.close()
    with pytest.raises(UsageError, match="other settings"):
        SqliteStore(tmp_path, {"variant": "delete-all"})


def test_sqlite_conversations_expire_after_the_ttl(tmp_path):
    store = SqliteStore(tmp_path, {"variant": "iclr"}, ttl_s=60)
    state = make_state(store=store)
    conv = [SYSTEM, {"role": "user", "content": "task"}, assistant(0), tool(0)]
    send(state, conv)
    (conv_id,) = [c.id for c in state.conversations()]
    assert len(store.conversation(conv_id).steps) == 1
    assert store.expire(time.time() + 30) == 0
    assert store.expire(time.time() + 61) == 1
    assert store.conversation(conv_id) is None
    store.close()


def test_batching_scorer_gathers_concurrent_requests():
    entered, release = threading.Event(), threading.Event()
    sizes = []

    class Slow(FakeScorer):
        def score(self, requests):
            sizes.append(len(requests))
            if len(sizes) == 1:
                entered.set()
                release.wait(10)
            return super().score(requests)

    batching = BatchingScorer(Slow(), wait_s=0)
    state = ServeState(Settings(parse_variant("iclr")), batching, batching.tokenizer)
    threads = [threading.Thread(target=send, args=(state, [SYSTEM, {"role": "user", "content": f"t{i}"}, assistant(i), tool(i)])) for i in range(4)]
    threads[0].start()
    assert entered.wait(10)
    for t in threads[1:]:
        t.start()
    while batching.queued < 3:
        threading.Event().wait(0.005)
    release.set()
    for t in threads:
        t.join(10)
    batching.close()
    assert sizes == [1, 3] and batching.largest_batch == 3
