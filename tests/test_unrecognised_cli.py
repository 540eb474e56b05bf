"""``score`` / ``prune`` on input with assistant text no adapter reads: warned per item with
file, line and field, counted as ``unrecognised``, and an input error with ``--strict``
(docs/FORMAT.md, "How a file's format is chosen")."""

import json
import re

import pytest

from format_helpers import run_cli

LINES = [
    {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": [{"type": "thinking", "thinking": "a\n\nb"}, {"type": "tool_use", "id": "t", "name": "f", "input": {}}]}]},
    {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "reasoning": "hidden", "content": [{"type": "mystery", "text": "?"}]}]},
]


@pytest.fixture
def messages(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_bytes(b"".join(json.dumps(x).encode() + b"\n" for x in LINES))
    return path


@pytest.mark.parametrize("command", ["score", "prune"])
def test_warned_with_line_and_field_and_counted(capsys, messages, tmp_path, command):
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, command, str(messages), "--model", "fake", "-o", str(out))
    assert code == 0, err
    warnings = [line for line in err.splitlines() if line.startswith("warning:") and "not read as reasoning" in line]
    assert len(warnings) == 2
    assert f"{messages}:2: field 'messages[1].content[0]'" in warnings[0] and "'mystery'" in warnings[0]
    assert f"{messages}:2: field 'messages[1].reasoning'" in warnings[1]
    assert re.search(r"unrecognised\s*│\s*2\b", err)


@pytest.mark.parametrize("command", ["score", "prune"])
def test_strict_is_an_input_error_and_writes_nothing(capsys, messages, tmp_path, command):
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, command, str(messages), "--model", "fake", "--strict", "-o", str(out))
    assert code == 2
    assert "2 texts or fields not read as reasoning or action (--strict)" in err
    assert not out.exists()


def test_strict_passes_a_file_read_in_full(capsys, tmp_path):
    path = tmp_path / "ok.jsonl"
    path.write_bytes(json.dumps(LINES[0]).encode() + b"\n")
    code, _, err = run_cli(capsys, "prune", str(path), "--model", "fake", "--strict", "--variant", "delete-all", "-o", str(tmp_path / "o"))
    assert code == 0, err
    assert re.search(r"unrecognised\s*│\s*0\b", err)


def test_a_file_that_sniffs_but_holds_no_step_is_an_input_error(capsys, tmp_path):
    path = tmp_path / "rollout.jsonl"
    path.write_bytes(b'{"type": "session_meta", "payload": {"id": "s"}}\n')
    code, _, err = run_cli(capsys, "score", str(path), "--model", "fake")
    assert code == 2 and "read as codex" in err and "holds no assistant turn" in err


def test_foreign_parts_and_text_fields_in_openai_messages_are_reported(capsys, tmp_path):
    """A Converse or Anthropic block read with --format openai, and an
    assistant field carrying text, are named with line and field; --strict refuses."""
    record = {"messages": [
        {"role": "user", "content": [{"text": "q"}, {"type": "tool_result", "tool_use_id": "t", "content": "r"}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t", "name": "f", "input": {}}}], "x_plan": {"steps": ["look", "fix"]}, "x_latency_ms": 12},
    ]}
    path = tmp_path / "m.jsonl"
    path.write_bytes(json.dumps(LINES[0]).encode() + b"\n" + json.dumps(record).encode() + b"\n")
    code, _, err = run_cli(capsys, "score", str(path), "--format", "openai", "--model", "fake", "-o", str(tmp_path / "o"))
    assert code == 0, err
    fields = re.findall(r"m\.jsonl:2: field '([^']+)'", err)
    assert fields == ["messages[0].content[1]", "messages[1].content[0]", "messages[1].x_plan", "messages[1].x_latency_ms"]
    code, _, err = run_cli(capsys, "score", str(path), "--format", "openai", "--model", "fake", "--strict", "-o", str(tmp_path / "o"), "--force")
    assert code == 2 and "--strict" in err


def test_an_unknown_message_role_is_reported_and_strict_refuses_it(capsys, tmp_path):
    path = tmp_path / "robot.json"
    msgs = [{"role": "user", "content": "q"},
            {"role": "assistant", "reasoning_content": "think\n\nmore", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "robot", "tool_call_id": "c1", "content": "out"},
            {"role": "ipython", "content": "tool output in Llama 3 style"}]
    path.write_text(json.dumps({"messages": msgs}))
    code, _, err = run_cli(capsys, "score", str(path), "--model", "fake", "-o", str(tmp_path / "s.jsonl"))
    assert code == 0, err
    warned = [line for line in err.splitlines() if "messages[2].role" in line]
    assert len(warned) == 1 and "'robot'" in warned[0] and str(path) in warned[0]
    assert "messages[3]" not in err  # ipython: Llama 3's tool-output role is known
    code, _, err = run_cli(capsys, "score", str(path), "--model", "fake", "--strict", "-o", str(tmp_path / "t.jsonl"))
    assert code == 2 and not (tmp_path / "t.jsonl").exists()


CUSTOM = [
    {"role": "system", "content": "be brief", "x_custom": "abc"},
    {"role": "user", "content": "q", "name": "ann"},
    {"role": "assistant", "reasoning_content": "think\n\nmore", "weird_field": 42, "refusal": None,
     "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "out", "x_custom": {"a": 1}},
    {"role": "assistant", "content": "done", "weight": 0, "x_flag": True},
]


@pytest.fixture
def custom(tmp_path):
    path = tmp_path / "custom.jsonl"
    path.write_bytes(json.dumps({"messages": CUSTOM}).encode() + b"\n")
    return path


def test_unknown_message_fields_of_any_role_and_type_are_reported(capsys, custom, tmp_path):
    """A message field the OpenAI chat format does not have (any role, any
    JSON type but null) is named with line and field; --strict refuses; prune keeps it in place."""
    out = tmp_path / "o.jsonl"
    code, _, err = run_cli(capsys, "prune", str(custom), "--model", "fake", "--variant", "delete-all", "-o", str(out))
    assert code == 0, err
    fields = re.findall(r"custom\.jsonl: field '([^']+)'", err)
    assert fields == ["messages[0].x_custom", "messages[2].weird_field", "messages[3].x_custom", "messages[4].x_flag"]
    assert "tool message field 'x_custom' (object)" in err and "kept in place by prune" in err
    written = json.loads(out.read_bytes())["messages"]
    assert written[2]["reasoning_content"] == "" and written[2]["weird_field"] == 42
    assert written[0]["x_custom"] == "abc" and written[3]["x_custom"] == {"a": 1} and written[4]["x_flag"] is True
    code, _, err = run_cli(capsys, "prune", str(custom), "--model", "fake", "--strict", "-o", str(tmp_path / "s.jsonl"))
    assert code == 2 and "4 texts or fields not read" in err and not (tmp_path / "s.jsonl").exists()


@pytest.mark.parametrize("to", ["openai", "anthropic", "iclr"])
def test_convert_refuses_to_drop_an_unknown_message_field(capsys, custom, tmp_path, to):
    """No target carries ``x_custom``: refused with exit 2, naming it."""
    out = tmp_path / "c.jsonl"
    code, _, err = run_cli(capsys, "convert", str(custom), "--to", to, "-o", str(out))
    assert code == 2 and not out.exists()
    assert "without losing data: 4 texts or fields" in err and "field 'messages[0].x_custom'" in err
    known = {"messages": [{k: v for k, v in m.items() if k not in ("x_custom", "weird_field", "x_flag", "weight")} for m in CUSTOM]}
    custom.write_bytes(json.dumps(known).encode() + b"\n")
    code, _, err = run_cli(capsys, "convert", str(custom), "--to", to, "-o", str(out))
    assert code == 0, err
