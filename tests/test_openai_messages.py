"""The OpenAI message-level API (read_messages / write_messages): P with tools, step spans,
and write-back of every reasoning shape on plain message dicts."""

import copy
import json

import pytest

from iclr_cli.blocks import SKIP
from iclr_cli.errors import InputError
from iclr_cli.formats.base import OpaqueEdits
from iclr_cli.formats.openai_messages import MessageTrajectory, read_messages, render_tools, write_messages
from iclr_cli.trajectory import WriteBack

TOOLS = [{"type": "function", "function": {"name": "bash", "description": "run", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}]
R1 = "First look.\n\nThen act."


def conversation():
    return [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": None, "reasoning_content": R1, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
        {"role": "user", "content": "go on"},
        {"role": "assistant", "content": "<think>Read it.\n\nDone.</think>\n\nAll good."},
    ]


def edit_all(traj, fn):
    return traj.with_steps([s.with_reasoning([fn(p.text) for p in s.reasoning]) for s in traj.steps])


def test_prompt_has_tools_after_system_and_steps_cover_their_messages():
    traj = read_messages(conversation(), tools=TOOLS, traj_id="t")
    assert isinstance(traj, MessageTrajectory)
    assert [(p.label, p.text) for p in traj.prompt] == [("system", "sys"), ("tools", render_tools(TOOLS)), ("user", "task")]
    assert render_tools(TOOLS) == json.dumps(TOOLS, separators=(",", ":"))
    assert traj.prompt_span == (0, 2) and traj.step_spans == ((2, 5), (5, 6))
    assert list(traj.step_messages(0)) == [2, 3, 4]
    assert [[(p.kind, p.label) for p in s.parts] for s in traj.steps] == [
        [("reasoning", "reasoning"), ("action", "tool_call:bash"), ("observation", "tool_result"), ("observation", "user")],
        [("reasoning", "reasoning"), ("action", "assistant")],
    ]
    assert read_messages(conversation(), traj_id="t").prompt[1].label == "user"  # no tools, no part


def test_write_messages_edits_each_shape_and_leaves_the_input_alone():
    msgs = conversation()
    before = copy.deepcopy(msgs)
    traj = read_messages(msgs, traj_id="t")
    out = write_messages(msgs, traj, edit_all(traj, lambda t: SKIP))
    assert msgs == before
    assert out[2]["reasoning_content"] == SKIP and out[5]["content"] == f"<think>{SKIP}</think>\n\nAll good."
    assert out[0] is msgs[0] and out[3] is msgs[3]  # unedited messages are passed through
    emptied = write_messages(msgs, traj, edit_all(traj, lambda t: ""))
    assert emptied[2]["reasoning_content"] == ""  # DeepSeek rule: present, empty


def test_reading_the_written_messages_gives_the_edited_trajectory():
    msgs = conversation()
    traj = read_messages(msgs, tools=TOOLS, traj_id="t")
    edited = edit_all(traj, lambda t: t.replace("First look.", SKIP))
    again = read_messages(write_messages(msgs, traj, edited), tools=TOOLS, traj_id="t")
    assert [[p.text for p in s.parts] for s in again.steps] == [[p.text for p in s.parts] for s in edited.steps]
    assert again.prompt == traj.prompt


def test_openrouter_details_edited_with_the_plain_copy():
    details = [{"type": "reasoning.text", "text": R1, "signature": "sig", "format": "anthropic-claude-v1", "index": 0}]
    msgs = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "reasoning": R1, "reasoning_details": details}]
    traj = read_messages(msgs, traj_id="t")
    [part] = traj.steps[0].reasoning
    assert part.write_back is WriteBack.SIGNED
    out = write_messages(msgs, traj, edit_all(traj, lambda t: SKIP))
    assert out[1]["reasoning"] == SKIP
    assert out[1]["reasoning_details"] == [{"type": "reasoning.text", "text": SKIP, "format": "anthropic-claude-v1", "index": 0}]
    assert msgs[1]["reasoning_details"][0]["signature"] == "sig"


@pytest.mark.parametrize("opaque", [OpaqueEdits.DROP, OpaqueEdits.KEEP])
def test_encrypted_entry_never_edited(opaque):
    details = [{"type": "reasoning.summary", "summary": R1}, {"type": "reasoning.encrypted", "data": "xyz", "id": "rs_1"}]
    msgs = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "reasoning": R1, "reasoning_details": details}]
    traj = read_messages(msgs, traj_id="t")
    assert traj.steps[0].reasoning[0].write_back is WriteBack.OPAQUE
    out = write_messages(msgs, traj, edit_all(traj, lambda t: ""), opaque=opaque)
    if opaque is OpaqueEdits.KEEP:
        assert out == msgs
    else:
        assert out[1]["reasoning"] == "" and out[1]["reasoning_details"] == [{"type": "reasoning.summary", "summary": ""}]


def test_bad_message_names_the_field():
    with pytest.raises(InputError, match=r"messages\[1\]\.content"):
        read_messages([{"role": "user", "content": "q"}, {"role": "assistant", "content": 5}], traj_id="t")
