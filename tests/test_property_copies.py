"""Properties of prune over generated Bedrock Converse, LiteLLM spend-log, LangChain and Gemini
CLI files (hypothesis), the formats where one reasoning text is often held more than once.

- ``--variant none`` is the identity, byte for byte.
- Any variant changes nothing but reasoning: read back through the same adapter, P and every
  action and observation are as they were, and the reasoning is what write-back reports.
- Every copy of a reasoning text holds the same text after the edit (the request's two copies
  in a spend-log row; every record of a Gemini CLI message id; ``additional_kwargs`` and the
  content block of a LangChain message).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iclr_cli.compress import Settings, compress_trajectories
from iclr_cli.formats import registry
from iclr_cli.formats.writeback import write_document
from iclr_cli.policies import parse_variant
from iclr_cli.scoring.fake import FakeScorer

ALPHABET = st.characters(codec="utf-8", exclude_categories=("Cs", "Cc"), exclude_characters="<>*") | st.sampled_from(' "\\.é中')
PARA = st.text(ALPHABET, min_size=1, max_size=24).filter(lambda s: s.strip() == s and s)
SEP = st.sampled_from(["\n\n", "\n\n\n"])
NAME = st.sampled_from(["bash", "read_file", "edit"])


@st.composite
def reasoning(draw):
    paras = draw(st.lists(PARA, min_size=1, max_size=4))
    return draw(SEP).join(paras)


@st.composite
def turns(draw):
    """An abstract run: per turn, a reasoning text (or None), whether it is signed, tool calls
    with their results, and a final text."""
    out = []
    for t in range(draw(st.integers(1, 3))):
        calls = [(f"c{t}_{k}", draw(NAME), draw(PARA), draw(PARA)) for k in range(draw(st.integers(0, 2)))]
        out.append({"reasoning": draw(st.one_of(st.none(), reasoning())), "signed": draw(st.booleans()), "calls": calls,
                    "text": draw(st.one_of(st.just(""), PARA)), "both": draw(st.booleans())})
    return out


def converse(run, draw_layout) -> bytes:
    messages = [{"role": "user", "content": [{"text": "Fix the bug."}]}]
    for turn in run:
        content = []
        if turn["reasoning"] is not None:
            block = {"text": turn["reasoning"], **({"signature": "sig"} if turn["signed"] else {})}
            content.append({"reasoningContent": {"reasoningText": block}})
        if turn["text"]:
            content.append({"text": turn["text"]})
        content += [{"toolUse": {"toolUseId": cid, "name": name, "input": {"q": arg}}} for cid, name, arg, _ in turn["calls"]]
        messages.append({"role": "assistant", "content": content or [{"text": "ok"}]})
        if turn["calls"]:
            messages.append({"role": "user", "content": [{"toolResult": {"toolUseId": cid, "content": [{"text": res}]}} for cid, _, _, res in turn["calls"]]})
    return dump({"modelId": "m", "system": [{"text": "Be careful."}], "messages": messages}, draw_layout)


def chat_reply(turn) -> dict:
    msg: dict = {"role": "assistant", "content": turn["text"] or None}
    if turn["reasoning"] is not None:
        msg["reasoning_content"] = turn["reasoning"]
        if turn["signed"]:
            msg["thinking_blocks"] = [{"type": "thinking", "thinking": turn["reasoning"], "signature": "sig"}]
    if turn["calls"]:
        msg["tool_calls"] = [{"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps({"q": arg})}} for cid, name, arg, _ in turn["calls"]]
    return msg


def spend_logs(run, _layout) -> bytes:
    history = [{"role": "system", "content": "Be careful."}, {"role": "user", "content": "Fix the bug."}]
    rows = []
    for t, turn in enumerate(run):
        reply = chat_reply(turn)
        rows.append({"request_id": f"req-{t}", "call_type": "acompletion", "spend": 0.001, "messages": list(history),
                     "response": {"id": f"r{t}", "choices": [{"index": 0, "message": reply}]},
                     "proxy_server_request": {"model": "m", "messages": list(history)}})
        history += [reply, *({"role": "tool", "tool_call_id": cid, "content": res} for cid, _, _, res in turn["calls"])]
    return b"".join(json.dumps(r, separators=(",", ":"), ensure_ascii=False).encode() + b"\n" for r in rows)


def langchain(run, layout) -> bytes:
    messages = [{"type": "human", "data": {"content": "Fix the bug.", "additional_kwargs": {}, "response_metadata": {}, "type": "human"}}]
    for turn in run:
        content: list = []
        kwargs: dict = {}
        if turn["reasoning"] is not None:
            block = {"type": "thinking", "thinking": turn["reasoning"], **({"signature": "sig"} if turn["signed"] else {})}
            if turn["both"] or turn["signed"]:
                content.append(block)
            if turn["both"] or not turn["signed"]:
                kwargs["reasoning_content"] = turn["reasoning"]
        if turn["text"]:
            content.append({"type": "text", "text": turn["text"]})
        calls = [{"name": name, "args": {"q": arg}, "id": cid, "type": "tool_call"} for cid, name, arg, _ in turn["calls"]]
        messages.append({"type": "ai", "data": {"content": content, "additional_kwargs": kwargs, "response_metadata": {}, "type": "ai", "tool_calls": calls}})
        messages += [{"type": "tool", "data": {"content": res, "type": "tool", "tool_call_id": cid, "additional_kwargs": {}, "response_metadata": {}}} for cid, _, _, res in turn["calls"]]
    return dump(messages, layout)


def gemini_cli(run, _layout) -> bytes:
    lines = [{"sessionId": "s", "projectHash": "p", "startTime": "t", "lastUpdated": "t"},
             {"id": "u0", "timestamp": "t", "type": "user", "content": [{"text": "Fix the bug."}]}]
    for t, turn in enumerate(run):
        thoughts = [{"subject": "Plan", "description": turn["reasoning"], "timestamp": "t"}] if turn["reasoning"] is not None else []
        msg = {"id": f"g{t}", "timestamp": "t", "type": "gemini", "content": turn["text"], "thoughts": thoughts, "tokens": None, "model": "gemini-2.5-pro"}
        lines.append(msg)
        lines.append({"$set": {"lastUpdated": f"t{t}"}})
        lines.append({**msg, "tokens": {"input": 10, "output": 5, "total": 15}})
        if turn["calls"]:
            calls = [{"id": cid, "name": name, "args": {"q": arg}, "status": "success", "timestamp": "t",
                      "result": [{"functionResponse": {"id": cid, "name": name, "response": {"output": res}}}]} for cid, name, arg, res in turn["calls"]]
            lines.append({**msg, "tokens": {"input": 10, "output": 5, "total": 15}, "toolCalls": calls})
            lines.append({"id": f"r{t}", "timestamp": "t", "type": "user", "content": [c["result"][0] for c in calls]})
    return b"".join(json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode() + b"\n" for v in lines)


def dump(value, layout) -> bytes:
    if layout == "indent":
        return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode()
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


RENDER = {"bedrock": converse, "litellm-spend": spend_logs, "langchain": langchain, "gemini-cli": gemini_cli}
VARIANTS = ["iclr", "delete-all", "random-40"]
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def not_reasoning(traj):
    return ([(p.kind, p.label, p.text, p.call_id) for p in traj.prompt],
            [[(p.kind, p.label, p.text, p.call_id) for p in s.parts if p.kind != "reasoning"] for s in traj.steps])


def copies_agree(fmt: str, out: bytes) -> None:
    """Every copy of a reasoning text holds the same text (see the module docstring)."""
    if fmt == "litellm-spend":
        for row in map(json.loads, out.splitlines()):
            assert row["messages"] == row["proxy_server_request"]["messages"]
    elif fmt == "gemini-cli":
        seen: dict[str, list] = {}
        for rec in map(json.loads, out.splitlines()):
            if rec.get("type") == "gemini":
                assert seen.setdefault(rec["id"], rec["thoughts"]) == rec["thoughts"]
    elif fmt == "langchain":
        for msg in json.loads(out):
            data = msg["data"]
            plain = data["additional_kwargs"].get("reasoning_content")
            blocks = [b["thinking"] for b in data["content"] if isinstance(b, dict) and b.get("type") == "thinking"] if isinstance(data["content"], list) else []
            if plain is not None and blocks:
                assert blocks == [plain]


@pytest.mark.parametrize("fmt", sorted(RENDER))
@SETTINGS
@given(run=turns(), layout=st.sampled_from(["indent", "compact"]))
def test_variant_none_is_the_identity(fmt, run, layout):
    data = RENDER[fmt](run, layout)
    adapter = registry.get(fmt)
    assert registry.detect(data, "gen").name == fmt
    doc = adapter.load(data, "gen")
    assert adapter.dump(doc, doc.trajectories) == data


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("fmt", sorted(RENDER))
@SETTINGS
@given(run=turns(), layout=st.sampled_from(["indent", "compact"]))
def test_any_variant_changes_only_reasoning_and_every_copy_alike(fmt, variant, run, layout):
    data = RENDER[fmt](run, layout)
    adapter = registry.get(fmt)
    doc = adapter.load(data, "gen")
    scorer = FakeScorer()
    results = compress_trajectories(doc.trajectories, Settings(parse_variant(variant)), scorer, scorer.tokenizer)
    wrote = write_document(adapter, doc, [r.compressed for r in results])
    again = adapter.load(wrote.data, "gen").trajectories
    assert len(again) == len(doc.trajectories)
    for before, after, written in zip(doc.trajectories, again, wrote.written):
        assert not_reasoning(after) == not_reasoning(before)
        assert [[p.text for p in s.reasoning if p.text] for s in after.steps] == [[p.text for p in s.reasoning if p.text] for s in written.steps]
    copies_agree(fmt, wrote.data)
