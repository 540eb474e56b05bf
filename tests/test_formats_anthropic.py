"""Anthropic Messages adapter: parsing, byte-exact round trip, signed write-back (METHOD.md,
"Provider rules"), and the CLI on it."""

import json

import pytest

from format_helpers import (
    SAMPLES,
    assert_signatures_follow_edits,
    run_cli,
    thinking_blocks,
    tool_ids,
    without_reasoning,
)
from iclr_cli.blocks import SKIP
from iclr_cli.formats import registry
from iclr_cli.formats.adapters.anthropic import ADAPTER, REDACTED_TEXT
from iclr_cli.trajectory import WriteBack

SAMPLE = SAMPLES / "anthropic_messages.json"


def load_bytes(data: bytes, name: str = "t.json"):
    return ADAPTER.load(data, name)


def test_sample_is_detected_and_parsed_into_steps():
    data = SAMPLE.read_bytes()
    assert registry.detect(data, str(SAMPLE)).name == "anthropic"
    [traj] = ADAPTER.load(data, str(SAMPLE)).trajectories
    assert [p.label for p in traj.prompt] == ["system", "user"]
    assert len(traj.steps) == 3
    kinds = [[(p.kind, p.label) for p in s.parts] for s in traj.steps]
    assert kinds[0] == [
        ("reasoning", "reasoning"),
        ("action", "assistant"),
        ("action", "tool_call:describe_table"),
        ("action", "tool_call:describe_table"),
        ("observation", "tool_result"),
        ("observation", "tool_result"),
    ]
    redacted, signed = traj.steps[1].parts[:2]
    assert redacted.write_back is WriteBack.READ_ONLY and redacted.text == REDACTED_TEXT and redacted.label == "redacted_thinking"
    assert signed.write_back is WriteBack.SIGNED
    # READ_ONLY reasoning is not part of R_t: the step has one scorable reasoning part
    assert [len(s.reasoning) for s in traj.steps] == [1, 1, 1]
    assert all(s.reasoning[0].text.count("\n\n") >= 1 for s in traj.steps)
    assert json.loads(traj.steps[0].parts[2].text) == {"table": "events"}
    assert traj.meta["model"] == "claude-opus-4-6"


def test_round_trip_is_byte_identical_for_json_and_jsonl(tmp_path):
    data = SAMPLE.read_bytes()
    doc = ADAPTER.load(data, "s.json")
    assert ADAPTER.dump(doc, doc.trajectories) == data
    record = json.loads(data)
    jsonl = (json.dumps(record) + "\r\n" + json.dumps(record["messages"], ensure_ascii=False) + "\n").encode()
    doc = ADAPTER.load(jsonl, "s.jsonl")
    assert [t.id for t in doc.trajectories] == ["s.jsonl#0", "s.jsonl#1"]
    assert ADAPTER.dump(doc, doc.trajectories) == jsonl


def _write_thinking(content: list, texts: list[str]) -> list:
    """``content`` of one assistant message after its thinking parts get ``texts``."""
    data = json.dumps([{"role": "user", "content": "q"}, {"role": "assistant", "content": content}]).encode()
    doc = ADAPTER.load(data, "t.json")
    [traj] = doc.trajectories
    edited = traj.with_steps([traj.steps[0].with_reasoning(texts)])
    return json.loads(ADAPTER.dump(doc, [edited]))[1]["content"]


def test_thinking_write_back_rules():
    content = [
        {"type": "thinking", "thinking": "a\n\nb", "signature": "SIG", "extra": 1},
        {"type": "redacted_thinking", "data": "XYZ"},
        {"type": "tool_use", "id": "t1", "name": "bash", "input": {}},
    ]
    edited = _write_thinking(content, ["[SKIP]\n\nb"])
    assert edited[0] == {"type": "thinking", "thinking": "[SKIP]\n\nb", "extra": 1}
    assert edited[1:] == content[1:]
    assert _write_thinking(content, [""]) == content[1:]
    alone = [{"type": "thinking", "thinking": "x", "signature": "S"}]
    assert _write_thinking(alone, [""]) == [{"type": "thinking", "thinking": ""}]
    two = [{"type": "thinking", "thinking": "x", "signature": "S"}, {"type": "thinking", "thinking": "y", "signature": "T"}]
    assert _write_thinking(two, ["", ""]) == [{"type": "thinking", "thinking": ""}]
    assert _write_thinking(two, ["", "y"]) == two[1:]


def test_prune_iclr_changes_only_reasoning_and_drops_signatures_of_edited_blocks(tmp_path, capsys):
    out = tmp_path / "out.json"
    code, stdout, _ = run_cli(capsys, "prune", str(SAMPLE), "--model", "fake", "--variant", "iclr", "-o", str(out), "-q")
    assert code == 0 and out.read_bytes() == SAMPLE.read_bytes()  # claude-*: signed thinking is sealed by default
    code, stdout, _ = run_cli(capsys, "prune", str(SAMPLE), "--model", "fake", "--variant", "iclr", "--signed-thinking", "edit", "-o", str(out), "-q")
    assert code == 0 and stdout == ""
    before, after = json.loads(SAMPLE.read_bytes()), json.loads(out.read_bytes())
    assert without_reasoning(after) == without_reasoning(before)
    assert tool_ids(after) == tool_ids(before)
    assert assert_signatures_follow_edits(before, after) == 3
    assert all(SKIP in b["thinking"] for b in thinking_blocks(after))
    redacted = before["messages"][3]["content"][0]
    assert redacted["type"] == "redacted_thinking"
    assert json.dumps(redacted["data"]).encode() in out.read_bytes()
    assert after["messages"][3]["content"][0] == redacted


def test_prune_delete_all_removes_thinking_but_keeps_a_lone_block(tmp_path, capsys):
    doc = {
        "model": "claude-sonnet-4-5",
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "p1\n\np2", "signature": "S1"}]},
            {"role": "user", "content": "and?"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "q1\n\nq2", "signature": "S2"},
                {"type": "redacted_thinking", "data": "OPAQUE=="},
                {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"cmd": "ls"}},
            ]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt"}]},
        ]
    }
    src = tmp_path / "in.json"
    src.write_text(json.dumps(doc, indent=2))
    out = tmp_path / "out.json"
    code, _, _ = run_cli(capsys, "prune", str(src), "--variant", "delete-all", "--model", "fake", "--signed-thinking", "edit", "-o", str(out), "-q")
    assert code == 0
    after = json.loads(out.read_text())
    assert after["messages"][1]["content"] == [{"type": "thinking", "thinking": ""}]
    assert after["messages"][3]["content"] == doc["messages"][3]["content"][1:]
    assert tool_ids(after) == ["use:toolu_1", "result:toolu_1"]
    assert without_reasoning(after) == without_reasoning(doc)
    assert out.read_text().startswith('{\n  "model": "claude-sonnet-4-5",\n  "messages": [\n')


def test_unsigned_thinking_stays_unsigned_and_unknown_fields_survive(tmp_path, capsys):
    doc = {
        "model": "m",
        "custom": {"keep": True},
        "messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "id": "msg_1", "content": [
                {"type": "thinking", "thinking": "one\n\ntwo\n\nthree", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "done"},
            ]},
        ],
    }
    src = tmp_path / "in.jsonl"
    src.write_bytes(json.dumps(doc, separators=(",", ":")).encode() + b"\n")
    [traj] = ADAPTER.load(src.read_bytes(), str(src)).trajectories
    assert traj.steps[0].reasoning[0].write_back is WriteBack.IN_PLACE
    out = tmp_path / "out.jsonl"
    code, _, _ = run_cli(capsys, "prune", str(src), "--model", "fake", "-o", str(out), "-q")
    assert code == 0
    raw = out.read_bytes()
    assert raw.endswith(b"}\n") and b'": ' not in raw  # compact style kept
    block = json.loads(raw)["messages"][1]["content"][0]
    assert block["thinking"].count(SKIP) == 2 and "signature" not in block
    assert block["cache_control"] == {"type": "ephemeral"}
    assert json.loads(raw)["custom"] == {"keep": True}


@pytest.mark.parametrize(
    "line, field",
    [
        ('{"messages":[{"role":"assistant","content":[{"thinking":"x"}]}]}', "messages[0].content[0]"),
        ('{"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":3}]}]}', "messages[0].content[0].thinking"),
        ('{"messages":[{"role":"assistant","content":7}]}', "messages[0].content"),
        ('{"messages":[{"content":"hi"}]}', None),
    ],
)
def test_malformed_content_exits_2_naming_file_line_and_field(tmp_path, capsys, line, field):
    src = tmp_path / "bad.jsonl"
    good = '{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"x","input":{}}]}]}'
    src.write_text(good + "\n" + line + "\n")
    code, _, err = run_cli(capsys, "prune", str(src), "--format", "anthropic", "--model", "fake", "-q")
    assert code == 2
    assert f"{src}:2" in err
    if field:
        assert repr(field) in err


def test_bad_json_line_exits_2_and_skip_bad_lines_keeps_it(tmp_path, capsys):
    good = json.dumps({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": [{"type": "thinking", "thinking": "a\n\nb", "signature": "s"}]}]})
    src = tmp_path / "in.jsonl"
    src.write_text(good + "\n{not json\n" + good + "\n")
    code, _, err = run_cli(capsys, "prune", str(src), "--model", "fake", "-q")
    assert code == 2 and f"{src}:2" in err
    out = tmp_path / "out.jsonl"
    code, _, _ = run_cli(capsys, "prune", str(src), "--model", "fake", "--skip-bad-lines", "-o", str(out), "-q")
    assert code == 0
    assert out.read_bytes().split(b"\n")[1] == b"{not json"


def test_sniff_does_not_claim_openai_or_plain_text_content():
    assert not ADAPTER.sniff(b'[{"role": "user", "content": [{"type": "text", "text": "hi"}]}]')
    assert not ADAPTER.sniff(b'[{"role": "assistant", "content": "say \\"type\\": \\"tool_use\\""}]')
    assert ADAPTER.sniff(b'[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"x","input":{}}]}]')
    for name in ("openai_chat.json", "openai_think_tags.jsonl"):
        assert registry.detect((SAMPLES / name).read_bytes(), name).name == "openai"


def one_step(content, **extra):
    data = json.dumps([{"role": "user", "content": "q"}, {"role": "assistant", "content": content, **extra}]).encode()
    doc = ADAPTER.load(data, "t.json")
    return doc, doc.trajectories[0].steps[0]


def test_inline_think_in_text_is_reasoning_and_the_answer_stays():
    # an open model behind an Anthropic-compatible endpoint answers with <think> in text
    doc, step = one_step([{"type": "text", "text": "<think>plan A\n\nplan B</think>The answer."}, {"type": "tool_use", "id": "t", "name": "f", "input": {}}])
    assert [(p.kind, p.text) for p in step.parts[:2]] == [("reasoning", "plan A\n\nplan B"), ("action", "The answer.")]
    out = json.loads(ADAPTER.dump(doc, [doc.trajectories[0].with_steps([step.with_reasoning([""])])]))
    assert out[1]["content"][0] == {"type": "text", "text": "<think></think>The answer."}
    # string content, and the reply whose <think> was in the prompt
    doc, step = one_step("plan</think>Answer.")
    assert [(p.kind, p.text) for p in step.parts] == [("reasoning", "plan"), ("action", "Answer.")]
    out = json.loads(ADAPTER.dump(doc, [doc.trajectories[0].with_steps([step.with_reasoning(["[SKIP]"])])]))
    assert out[1]["content"] == "[SKIP]</think>Answer."


def test_thinking_variants():
    # thinking with an empty signature is unsigned: edited in place, the empty key kept (bridges
    # to plain-text providers add it because Claude Code drops thinking blocks without one)
    doc, step = one_step([{"type": "thinking", "thinking": "a", "signature": ""}, {"type": "text", "text": "x"}])
    assert step.reasoning[0].write_back is WriteBack.IN_PLACE
    out = json.loads(ADAPTER.dump(doc, [doc.trajectories[0].with_steps([step.with_reasoning(["b"])])]))
    assert out[1]["content"][0] == {"type": "thinking", "thinking": "b", "signature": ""}
    # a "reasoning" block with text (SDK / gateway shape) is reasoning too
    doc, step = one_step([{"type": "reasoning", "text": "r1\n\nr2"}, {"type": "text", "text": "x"}])
    assert [(p.kind, p.text) for p in step.parts] == [("reasoning", "r1\n\nr2"), ("action", "x")]
    assert doc.unrecognised == []


def test_unknown_blocks_and_foreign_reasoning_fields_are_reported():
    # (reasoning_content and reasoning_details are Roo Code's and read: tests/test_formats_roo.py)
    data = b'[{"role": "user", "content": "q"},\n {"role": "assistant", "reasoning": "hidden", "content": [{"type": "mystery", "text": "?"}, {"type": "image", "source": {}}]}]'
    doc = ADAPTER.load(data, "t.json")
    assert [(u.line, u.field) for u in doc.unrecognised] == [(None, "[1].content[0]"), (None, "[1].reasoning")]
    # JSONL: the line is named
    jsonl = b'{"messages": [{"role": "user", "content": "q"}]}\n' + json.dumps({"messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}], "thinking": "t"}]}).encode() + b"\n"
    doc = ADAPTER.load(jsonl, "t.jsonl")
    assert [(u.line, u.field) for u in doc.unrecognised] == [(2, "messages[0].thinking")]
    assert doc.unrecognised[0].describe("t.jsonl") == "t.jsonl:2: field 'messages[0].thinking': assistant message field 'thinking' is not part of the Anthropic format: not scored or pruned"
