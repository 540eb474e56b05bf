"""A thinking block sent back with ``"signature": ""`` (a client that assembles the stream but
ignores ``signature_delta``: nextlevelbuilder/goclaw #566) gets the signature the proxy saw put
back under ``--restore-reasoning``, on a sealed upstream (Anthropic) and a plain one (DeepSeek's
Anthropic-compatible endpoint); an empty signature is no signature, in ``/stats`` and in every
adapter that decides whether a block is signed."""

from __future__ import annotations

import json

import httpx
import orjson
import pytest

from serve_fixtures import proxy, scripted_upstream
from wire_fixtures import SIGNATURE, anthropic_events, anthropic_message, anthropic_reply, thinking, tool_use

from iclr_cli.blocks import SKIP
from iclr_cli.compress import Settings
from iclr_cli.formats.adapters import anthropic as anthropic_format
from iclr_cli.formats.adapters import bedrock, claude_code, gemini, langchain, openai_chat, pi
from iclr_cli.policies import parse_variant
from iclr_cli.scoring.fake import FakeScorer
from iclr_cli.serve import replies
from iclr_cli.serve.batching import BatchingScorer
from iclr_cli.serve.messages import SEALED_THINKING, UNSIGNED_THINKING, MessagesDialect, is_edit_of, resign
from iclr_cli.serve.state import ServeState
from iclr_cli.trajectory import WriteBack

R = "Open the parser first.\n\nThe tokenizer splits on commas only.\n\nQuoted commas break the row.\n\nHandle the quotes in split()."
USER = {"role": "user", "content": "Why are some rows cut short?"}
RESULT = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "def split(line): ..."}]}
CALL = tool_use("toolu_1", "Read", {"path": "parser.py"})


def sse(events: list[dict]) -> bytes:
    """The bytes Anthropic streams for ``events`` (as the proxy relays them)."""
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def streamed_reply(dialect: MessagesDialect, blocks: list[dict]):
    """The reply read from a stream whose signature arrives as a ``signature_delta``."""
    return dialect.read_reply(sse(anthropic_events(anthropic_message(blocks))), True)


def state_after_reply(dialect: MessagesDialect, blocks: list[dict], **kw) -> ServeState:
    scorer = FakeScorer()
    state = ServeState(Settings(parse_variant("iclr")), BatchingScorer(scorer), scorer.tokenizer, **kw)
    replies.record_reply(state, None, dialect.parse({"model": "m", "messages": [USER]}), streamed_reply(dialect, blocks), dialect)
    return state


def send(state: ServeState, dialect: MessagesDialect, assistant: list[dict]) -> list[dict]:
    """The assistant message's blocks as the proxy sends them upstream."""
    raw = orjson.dumps({"model": "m", "messages": [USER, {"role": "assistant", "content": assistant}, RESULT]})
    return orjson.loads(state.rewrite(orjson.loads(raw), raw, None, dialect).body)["messages"][1]["content"]


# -- the reply as streamed holds the signature -------------------------------------------------

def test_the_streamed_reply_assembles_the_signature_from_its_delta():
    reply = streamed_reply(MessagesDialect(), [thinking(R), CALL])
    assert reply.items[0]["content"][0] == {"type": "thinking", "thinking": R, "signature": SIGNATURE}


# -- sealed upstream: only the exact text gets its signature back --------------------------------

@pytest.mark.parametrize("dropped", ["empty", "missing"])
def test_sealed_upstream_gets_the_original_signature_back(dropped):
    dialect = MessagesDialect(sealed=True)
    state = state_after_reply(dialect, [thinking(R), CALL], restore_reasoning=True)
    block = {"type": "thinking", "thinking": R, "signature": ""} if dropped == "empty" else {"type": "thinking", "thinking": R}
    assert send(state, dialect, [block, CALL]) == [thinking(R), CALL]
    assert state.stats.total.sealed == {SEALED_THINKING: 1}  # signed now, and counted so


def test_without_the_flag_the_block_goes_as_sent_counted_unsigned_and_said_once(caplog):
    dialect = MessagesDialect(sealed=True)
    state = state_after_reply(dialect, [thinking(R), CALL])
    with caplog.at_level("WARNING", logger="iclr.serve"):
        assert send(state, dialect, [thinking(R, ""), CALL]) == [thinking(R, ""), CALL]
        send(state, dialect, [thinking(R, ""), CALL])  # the same request again: the step is decided once
    assert state.stats.total.sealed == {UNSIGNED_THINKING: 1}
    assert SEALED_THINKING not in state.stats.total.sealed  # an empty signature is not a signature
    assert caplog.text.count("arrives with an empty or no signature") == 1 and "--restore-reasoning" in caplog.text


def test_sealed_upstream_never_signs_a_changed_text():
    dialect = MessagesDialect(sealed=True)
    state = state_after_reply(dialect, [thinking(R), CALL], restore_reasoning=True)
    edited = R.replace("Quoted commas break the row.", SKIP)
    assert send(state, dialect, [thinking(edited, ""), CALL]) == [thinking(edited, ""), CALL]
    assert state.stats.total.sealed == {UNSIGNED_THINKING: 1}


def test_a_signature_is_never_taken_from_another_turn():
    dialect = MessagesDialect(sealed=True)
    state = state_after_reply(dialect, [thinking(R), CALL], restore_reasoning=True)
    other = tool_use("toolu_9", "Read", {"path": "other.py"})
    raw = orjson.dumps({"model": "m", "messages": [USER, {"role": "assistant", "content": [thinking(R, ""), other]},
                                                   {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "x"}]}]})
    assert state.rewrite(orjson.loads(raw), raw, None, dialect).body == raw


# -- plain upstream (DeepSeek's Anthropic endpoint): the signature comes back, the text compressed --

def test_plain_upstream_gets_the_signature_back_on_the_compressed_text():
    dialect = MessagesDialect(sealed=False)
    state = state_after_reply(dialect, [thinking(R, "ZHMtc2ln"), CALL], restore_reasoning=True)
    sent = send(state, dialect, [thinking(R, ""), CALL])
    assert sent[0]["signature"] == "ZHMtc2ln" and sent[0]["thinking"].split("\n\n").count(SKIP) == 3 and sent[1] == CALL
    assert state.stats.total.sealed == {} and state.stats.total.steps_compressed == 1
    plain = state_after_reply(dialect, [thinking(R, "ZHMtc2ln"), CALL])  # without the flag: the key as sent
    assert send(plain, dialect, [thinking(R, ""), CALL])[0]["signature"] == ""


def test_plain_upstream_signs_iclrs_own_edit_of_the_text_too():
    """A client whose history iclr pruned (``iclr prune`` on its session file) sends the edited
    text: on a plain upstream the edit keeps the signature (sealing.py), on a sealed one never."""
    edited = R.replace("The tokenizer splits on commas only.", SKIP)
    dialect = MessagesDialect(sealed=False)
    state = state_after_reply(dialect, [thinking(R, "ZHMtc2ln"), CALL], restore_reasoning=True)
    assert send(state, dialect, [thinking(edited, ""), CALL])[0]["signature"] == "ZHMtc2ln"
    unrelated = state_after_reply(dialect, [thinking(R, "ZHMtc2ln"), CALL], restore_reasoning=True)
    assert send(unrelated, dialect, [thinking("Something else entirely.", ""), CALL])[0]["signature"] == ""


def test_a_reply_that_carried_no_signature_gives_none():
    dialect = MessagesDialect(sealed=False)
    state = state_after_reply(dialect, [thinking(R, ""), CALL], restore_reasoning=True)
    assert send(state, dialect, [thinking(R, ""), CALL])[0]["signature"] == ""


# -- the matching rule, pure ----------------------------------------------------------------------

def test_resign_matches_by_text_and_each_signature_signs_one_block():
    stored = [thinking("First.", "c2ln-1"), thinking("Second.", "c2ln-2"), CALL]
    sent = [thinking("Second.", ""), thinking("First.", ""), CALL]
    assert resign(sent, stored, edited_keep_signature=False) == [thinking("Second.", "c2ln-2"), thinking("First.", "c2ln-1"), CALL]
    twice = [thinking("First.", ""), thinking("First.", ""), CALL]
    assert resign(twice, stored, edited_keep_signature=False) == [thinking("First.", "c2ln-1"), thinking("First.", ""), CALL]
    signed_already = [thinking("First.", "c2ln-x"), CALL]
    assert resign(signed_already, stored, edited_keep_signature=True) is None  # a signature sent is never replaced
    # an edit is matched only with its own block (same place, same number of blocks)
    assert resign([thinking(SKIP, ""), CALL], stored, edited_keep_signature=True) is None
    assert resign([thinking(SKIP, ""), thinking("Second.", ""), CALL], stored, edited_keep_signature=True)[0]["signature"] == "c2ln-1"


@pytest.mark.parametrize("edited, expected", [
    (R, True), ("", True), (R.replace("Quoted commas break the row.", SKIP), True),
    ("Open the parser first.\n\nHandle the quotes in split().", True),  # blocks removed (delete-all of some)
    ("Open parser first.", True),  # tokens removed (random-R)
    ("Open the parser first.\n\nAnd the lexer.", False), ("first. Open the parser", False),
])
def test_is_edit_of(edited, expected):
    assert is_edit_of(edited, R) is expected


# -- end to end: the anthropic SDK streams, the client drops the signature -------------------------

anthropic = pytest.importorskip("anthropic")
pytest.importorskip("starlette")


def client_round_trip(kind: str, restore: bool, signature: str):
    """Two turns through ``iclr serve --upstream-kind KIND``: the first streamed (the signature
    arrives as a signature_delta), sent back by a client that drops it. Returns (the thinking
    block as sent upstream on turn 2, /stats total)."""
    script = [anthropic_reply([thinking(R, signature), CALL], stream=True), anthropic_reply([{"type": "text", "text": "Fixed."}], stream=True)]
    with scripted_upstream(script) as up, proxy(up.url, upstream_kind=kind, restore_reasoning=restore) as (url, _):
        client = anthropic.Anthropic(base_url=url.removesuffix("/v1"), api_key="sk-ant-client", max_retries=0, timeout=30)
        with client.messages.stream(model="claude-x", max_tokens=1000, messages=[USER]) as stream:
            first = stream.get_final_message()
        blocks = [b.model_dump(exclude_none=True) for b in first.content]
        assert blocks[0]["signature"] == signature  # the client got it, and drops it:
        blocks[0]["signature"] = ""
        with client.messages.stream(model="claude-x", max_tokens=1000, messages=[USER, {"role": "assistant", "content": blocks}, RESULT]) as stream:
            stream.get_final_message()
        total = httpx.get(url.removesuffix("/v1") + "/stats").json()["total"]
    return orjson.loads(up.raw[1])["messages"][1]["content"][0], total


@pytest.mark.parametrize("restore", [True, False], ids=["restore", "as-sent"])
def test_anthropic_sdk_on_a_sealed_upstream(restore):
    block, total = client_round_trip("anthropic", restore, SIGNATURE)
    assert block == (thinking(R) if restore else thinking(R, ""))
    assert total["sealed"] == ({SEALED_THINKING: 1} if restore else {UNSIGNED_THINKING: 1})


@pytest.mark.parametrize("restore", [True, False], ids=["restore", "as-sent"])
def test_anthropic_sdk_on_deepseeks_anthropic_endpoint(restore):
    block, total = client_round_trip("deepseek", restore, "ZHMtc2ln")
    assert block["signature"] == ("ZHMtc2ln" if restore else "") and block["thinking"].split("\n\n").count(SKIP) == 3
    assert total["sealed"] == {} and total["steps_compressed"] == 1


# -- every adapter: an empty signature signs nothing ------------------------------------------------

def _anthropic(sig):
    return {"model": "claude-sonnet-4-5", "messages": [USER, {"role": "assistant", "content": [thinking(R, sig), CALL]}, RESULT]}


def _claude_code(sig):
    base = {"isSidechain": False, "sessionId": "s-1", "cwd": "/w"}
    return [{**base, "type": "user", "uuid": "u1", "parentUuid": None, "message": USER},
            {**base, "type": "assistant", "uuid": "a1", "parentUuid": "u1",
             "message": {"model": "claude-sonnet-4-5", "id": "m1", "role": "assistant", "content": [thinking(R, sig), CALL]}}]


def _litellm(sig):
    return {"model": "claude-sonnet-4-5", "messages": [USER, {"role": "assistant", "content": None, "reasoning_content": R,
            "thinking_blocks": [thinking(R, sig)], "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "ok"}]}


def _openrouter(sig):
    return {"model": "anthropic/claude-sonnet-4.5", "messages": [USER, {"role": "assistant", "content": "Reading.", "reasoning": R,
            "reasoning_details": [{"type": "reasoning.text", "text": R, "signature": sig, "format": "anthropic-claude-v1", "index": 0}]}]}


def _bedrock(sig):
    return {"messages": [{"role": "user", "content": [{"text": "hi"}]},
                         {"role": "assistant", "content": [{"reasoningContent": {"reasoningText": {"text": R, "signature": sig}}}, {"text": "ok"}]}]}


def _langchain(sig):
    return [{"type": "human", "data": {"content": "hi", "additional_kwargs": {}, "response_metadata": {}, "type": "human"}},
            {"type": "ai", "data": {"content": [thinking(R, sig), {"type": "text", "text": "ok"}], "additional_kwargs": {},
                                    "response_metadata": {}, "type": "ai", "tool_calls": []}}]


def _pi(sig):
    return [{"type": "session", "id": "s1", "timestamp": "t", "cwd": "/w"},
            {"type": "message", "timestamp": "t", "message": {"role": "user", "content": "fix it"}},
            {"type": "message", "timestamp": "t", "message": {"role": "assistant", "api": "anthropic-messages", "stopReason": "stop",
                                                              "content": [{"type": "thinking", "thinking": R, "thinkingSignature": sig}, {"type": "text", "text": "ok"}]}}]


def _gemini(sig):
    return {"contents": [{"role": "user", "parts": [{"text": "hi"}]}, {"role": "model", "parts": [{"text": R, "thought": True, "thoughtSignature": sig}, {"text": "ok"}]}]}


ADAPTERS = {  # name: (adapter, document, write-back of a signed block)
    "anthropic": (anthropic_format.ADAPTER, _anthropic, WriteBack.SIGNED),
    "claude_code": (claude_code.ADAPTER, _claude_code, WriteBack.SIGNED),
    "openai thinking_blocks": (openai_chat.ADAPTER, _litellm, WriteBack.SIGNED),
    "openai reasoning_details": (openai_chat.ADAPTER, _openrouter, WriteBack.SIGNED),
    "bedrock": (bedrock.ADAPTER, _bedrock, WriteBack.SIGNED),
    "langchain": (langchain.ADAPTER, _langchain, WriteBack.SIGNED),
    "pi": (pi.ADAPTER, _pi, WriteBack.SIGNED),
    "gemini": (gemini.ADAPTER, _gemini, WriteBack.READ_ONLY),
}


@pytest.mark.parametrize("name", ADAPTERS)
@pytest.mark.parametrize("signature", ["c2lnbmVk", ""], ids=["signed", "empty"])
def test_an_empty_signature_is_unsigned_in_every_adapter(name, signature):
    adapter, make, signed = ADAPTERS[name]
    value = make(signature)
    data = ("".join(json.dumps(v) + "\n" for v in value) if name in ("claude_code", "pi") else json.dumps(value)).encode()
    doc = adapter.load(data, "t.jsonl" if name in ("claude_code", "pi") else "t.json")
    [part] = [p for t in doc.trajectories for s in t.steps for p in s.parts if p.kind == "reasoning"]
    assert part.text == R
    assert part.write_back is (signed if signature else WriteBack.IN_PLACE)
    assert bool(doc.signatures) is (name == "gemini" and bool(signature))  # a Gemini signature is listed; an empty one is none


@pytest.mark.parametrize("sealed", [True, False], ids=["sealed", "plain"])
@pytest.mark.parametrize("signature", [SIGNATURE, ""], ids=["signed", "empty"])
def test_messages_wire_counts_only_a_real_signature_as_signed(sealed, signature):
    scorer = FakeScorer()
    state = ServeState(Settings(parse_variant("iclr")), BatchingScorer(scorer), scorer.tokenizer)
    sent = send(state, MessagesDialect(sealed=sealed), [thinking(R, signature), CALL])
    expected = ({SEALED_THINKING: 1} if signature else {UNSIGNED_THINKING: 1}) if sealed else {}
    assert state.stats.total.sealed == expected
    assert (sent[0]["thinking"] == R) is sealed and sent[0]["signature"] == signature
