"""Reading reasoning from replies and sending it back per provider (METHOD.md, provider rules)."""

from __future__ import annotations

import pytest

from iclr_cli.replay.provider import read_reply, to_wire

CALL = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}


def test_reasoning_content_is_read_and_tool_calls_cleaned():
    msg, style = read_reply({"role": "assistant", "content": None, "reasoning_content": "think", "tool_calls": [{**CALL, "index": 0}], "refusal": None})
    assert style == "reasoning_content"
    assert msg == {"role": "assistant", "content": None, "tool_calls": [CALL], "reasoning_content": "think"}


def test_reasoning_field_and_precedence():
    assert read_reply({"content": "x", "reasoning": "r"})[1] == "reasoning"
    msg, style = read_reply({"content": "x", "reasoning": "r2", "reasoning_content": "r1"})
    assert (style, msg["reasoning_content"]) == ("reasoning_content", "r1")


def test_inline_think_round_trips_exactly():
    content = "<think>plan A\n\nplan B</think>\n\nHere is the answer."
    msg, style = read_reply({"content": content})
    assert style == "think"
    assert msg["reasoning_content"] == "plan A\n\nplan B"
    assert msg["content"] == "\n\nHere is the answer."
    assert to_wire([msg], "think")[0]["content"] == content


def test_think_fully_deleted_sends_no_tags():
    wire = to_wire([{"role": "assistant", "content": "answer", "reasoning_content": ""}], "think")
    assert wire[0] == {"role": "assistant", "content": "answer"}


def test_deepseek_rule_empty_string_not_missing():
    history = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [CALL], "reasoning_content": ""},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},  # no reasoning at all
        {"role": "assistant", "content": "done"},  # no tool calls, no reasoning
    ]
    wire = to_wire(history, "reasoning_content")
    assert wire[1]["reasoning_content"] == ""
    assert wire[3]["reasoning_content"] == ""
    assert "reasoning_content" not in wire[4]
    assert history[3] == {"role": "assistant", "content": None, "tool_calls": [CALL]}  # input untouched


def test_reasoning_style_and_omit():
    msg = {"role": "assistant", "content": "x", "reasoning_content": "[SKIP]\n\nkeep"}
    assert to_wire([msg], "reasoning")[0] == {"role": "assistant", "content": "x", "reasoning": "[SKIP]\n\nkeep"}
    assert to_wire([msg], "omit")[0] == {"role": "assistant", "content": "x"}
    assert to_wire([msg], None)[0] == {"role": "assistant", "content": "x"}
    with pytest.raises(ValueError, match="unknown reasoning style"):
        to_wire([msg], "thoughts")


def test_non_string_arguments_become_json():
    msg, _ = read_reply({"content": None, "tool_calls": [{"id": "a", "function": {"name": "bash", "arguments": {"command": "ls"}}}]})
    assert msg["tool_calls"][0]["function"]["arguments"] == '{"command":"ls"}'


def test_thought_style_is_a_plain_prefix():
    msg = {"role": "assistant", "content": "```bash\nls\n```", "reasoning_content": "Look.\n\n"}
    assert to_wire([msg], "thought")[0] == {"role": "assistant", "content": "Look.\n\n```bash\nls\n```"}
    assert to_wire([{**msg, "reasoning_content": ""}], "thought")[0]["content"] == "```bash\nls\n```"


def test_thinking_field_is_read_and_sent_back_there():
    msg, style = read_reply({"content": "", "thinking": "plan\n\ncheck", "tool_calls": [CALL]})
    assert (style, msg["reasoning_content"]) == ("thinking", "plan\n\ncheck")
    assert to_wire([{**msg, "reasoning_content": "[SKIP]\n\ncheck"}], "thinking")[0] == {"role": "assistant", "content": "", "tool_calls": [CALL], "thinking": "[SKIP]\n\ncheck"}


def test_other_inline_shapes_stay_in_content():
    lone = "plan\n\ncheck\n</think>\n\nanswer"
    msg, style = read_reply({"content": lone})
    assert (style, msg["content"]) == (None, lone) and "reasoning_content" not in msg
