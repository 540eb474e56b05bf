"""Every OpenAI-side reasoning shape on inputs of our own: found, edited where it
was read, both copies of structured reasoning kept consistent, and what is not understood
reported as unrecognised instead of passing silently as an answer."""

from __future__ import annotations

import json

import pytest

from format_helpers import run_cli
from iclr_cli.blocks import SKIP
from iclr_cli.formats.base import OpaqueEdits, Unrecognised
from iclr_cli.formats.adapters.openai_chat import ADAPTER
from iclr_cli.formats.openai_messages import read_messages, write_messages
from iclr_cli.trajectory import WriteBack

R = "Alpha step one.\n\nBeta step two.\n\nGamma step three."


def load(value, source="in.json"):
    data = (json.dumps(value) + "\n").encode() if not isinstance(value, bytes) else value
    return data, ADAPTER.load(data, source)


def convo(*assistants, tools=None):
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
    for a in assistants:
        msgs += [{"role": "assistant", **a}, {"role": "user", "content": "next"}]
    return {"messages": msgs, **({"tools": tools} if tools is not None else {})}


def reasoning_of(doc):
    return [[p.text for p in s.reasoning] for t in doc.trajectories for s in t.steps]


def emptied(doc, opaque=OpaqueEdits.DROP):
    new = [t.with_steps([s.with_reasoning([""] * len(s.reasoning)) for s in t.steps]) for t in doc.trajectories]
    return json.loads(ADAPTER.dump(doc, new, opaque=opaque))


def skipped_first_block(doc):
    new = [t.with_steps([s.with_reasoning([p.text.replace("Alpha step one.", SKIP) for p in s.reasoning]) for s in t.steps]) for t in doc.trajectories]
    return json.loads(ADAPTER.dump(doc, new))


# --- inline <think> ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "reasoning", "visible"),
    [
        ("<think>Use `</think>` to close.\n\nThen answer.</think>\n\nDone.", "Use `</think>` to close.\n\nThen answer.", "\n\nDone."),
        ("<think>```xml\n</think>\n```\n\nok</think>Done.", "```xml\n</think>\n```\n\nok", "Done."),
        ("<think>The template writes <think> and </think> itself.\n\nFine.</think>Done.", "The template writes <think> and </think> itself.\n\nFine.", "Done."),
        ("Plan it.\n\nCheck it.\n</think>\n\nDone.", "Plan it.\n\nCheck it.\n", "\n\nDone."),
        ("<think>one `stray tick</think>Done.", "one `stray tick", "Done."),
    ],
)
def test_think_tags_paired_as_emitted(content, reasoning, visible):
    _, doc = load(convo({"content": content}))
    [step] = doc.trajectories[0].steps
    assert [p.text for p in step.reasoning] == [reasoning]
    assert [p.text for p in step.parts if p.label == "assistant"] == [visible]
    out = emptied(doc)["messages"][2]["content"]
    assert out == content.replace(reasoning, "", 1)
    assert doc.unrecognised == []


def test_interleaved_think_elements_are_parts_in_order():
    content = "<think>" + R + "</think>Calling.<think>After.\n\nMore.</think>Final."
    _, doc = load(convo({"content": content}))
    [step] = doc.trajectories[0].steps
    assert [(p.kind, p.text) for p in step.parts[:4]] == [("reasoning", R), ("action", "Calling."), ("reasoning", "After.\n\nMore."), ("action", "Final.")]
    out = skipped_first_block(doc)["messages"][2]["content"]
    assert out == content.replace("Alpha step one.", SKIP)


# --- gpt-oss -------------------------------------------------------------------------------


def test_harmony_analysis_commentary_call_and_final():
    content = (
        "<|channel|>analysis<|message|>" + R + "<|end|>"
        '<|start|>assistant<|channel|>commentary to=functions.read_file <|constrain|>json<|message|>{"path": "a"}<|call|>'
        "<|start|>assistant<|channel|>analysis<|message|>Second look.<|end|>"
        "<|start|>assistant<|channel|>final<|message|>All done.<|return|>"
    )
    _, doc = load(convo({"content": content}))
    [step] = doc.trajectories[0].steps
    assert [(p.kind, p.label, p.text) for p in step.parts[:4]] == [
        ("reasoning", "reasoning", R), ("action", "tool_call:read_file", '{"path": "a"}'),
        ("reasoning", "reasoning", "Second look."), ("action", "assistant", "All done."),
    ]
    out = emptied(doc)["messages"][2]["content"]
    assert out == content.replace(R, "").replace("Second look.", "")


def test_unknown_harmony_channel_is_reported():
    _, doc = load(convo({"content": "<|channel|>scratch<|message|>hmm<|end|><|start|>assistant<|channel|>final<|message|>ok<|return|>"}))
    assert doc.unrecognised == [Unrecognised(None, "messages[2].content", "harmony channel 'scratch': kept as an action, never scored or pruned")]


# --- reasoning fields and their structured copies ------------------------------------------


def test_same_text_in_two_fields_is_one_part_edited_in_both():
    _, doc = load(convo({"content": "a", "reasoning_content": R, "reasoning": R}))
    assert reasoning_of(doc) == [[R]]
    msg = emptied(doc)["messages"][2]
    assert (msg["reasoning_content"], msg["reasoning"]) == ("", "")


def test_reasoning_details_only_are_read_and_edited():
    details = [{"type": "reasoning.text", "text": R, "signature": "s1"}, {"type": "reasoning.text", "text": "Tail.\n\nEnd."}]
    _, doc = load(convo({"content": "a", "reasoning_details": details}))
    assert reasoning_of(doc) == [[R, "Tail.\n\nEnd."]]
    assert [p.write_back for p in doc.trajectories[0].steps[0].reasoning] == [WriteBack.SIGNED, WriteBack.IN_PLACE]
    out = skipped_first_block(doc)["messages"][2]["reasoning_details"]
    assert out == [{"type": "reasoning.text", "text": R.replace("Alpha step one.", SKIP)}, details[1]]


def test_several_detail_entries_joined_in_reasoning_are_edited_in_both():
    details = [{"type": "reasoning.text", "text": R}, {"type": "reasoning.text", "text": "Tail.\n\nEnd."}]
    _, doc = load(convo({"content": "a", "reasoning": R + "\n\n" + "Tail.\n\nEnd.", "reasoning_details": details}))
    assert reasoning_of(doc) == [[R, "Tail.\n\nEnd."]]
    msg = emptied(doc)["messages"][2]
    assert msg["reasoning"] == "\n\n" and [d["text"] for d in msg["reasoning_details"]] == ["", ""]


def test_copies_that_differ_are_left_alone_and_reported(tmp_path, capsys):
    details = [{"type": "reasoning.text", "text": "Something else entirely."}]
    value = convo({"content": "a", "reasoning": R, "reasoning_details": details})
    data, doc = load(value)
    [part] = doc.trajectories[0].steps[0].parts[:1]
    assert (part.text, part.write_back) == (R, WriteBack.READ_ONLY)
    assert doc.unrecognised == [Unrecognised(None, "messages[2]", "reasoning and reasoning_details hold different text: neither is edited")]
    src = tmp_path / "in.json"
    src.write_bytes(data)
    out = tmp_path / "out.json"
    code, _, _ = run_cli(capsys, "prune", str(src), "--model", "fake", "--variant", "delete-all", "-o", str(out), "-q")
    assert code == 0 and out.read_bytes() == data


def test_litellm_thinking_blocks_signed_and_redacted():
    blocks = [{"type": "thinking", "thinking": R, "signature": "sig"}, {"type": "redacted_thinking", "data": "opaque"}]
    _, doc = load(convo({"content": "a", "reasoning_content": R, "thinking_blocks": blocks}))
    assert reasoning_of(doc) == [[R]]
    msg = emptied(doc)["messages"][2]  # an emptied block leaves its list, as in Anthropic logs
    assert msg["reasoning_content"] == "" and msg["thinking_blocks"] == [blocks[1]]
    msg = skipped_first_block(doc)["messages"][2]
    edited = R.replace("Alpha step one.", SKIP)
    assert msg["reasoning_content"] == edited and msg["thinking_blocks"] == [{"type": "thinking", "thinking": edited}, blocks[1]]


def test_encrypted_only_beside_plain_reasoning_is_opaque():
    details = [{"type": "reasoning.encrypted", "data": "enc"}]
    _, doc = load(convo({"content": "a", "reasoning": R, "reasoning_details": details}))
    assert doc.trajectories[0].steps[0].reasoning[0].write_back is WriteBack.OPAQUE
    assert emptied(doc)["messages"][2]["reasoning_details"] == []
    assert emptied(doc, OpaqueEdits.KEEP)["messages"][2] == {"role": "assistant", "content": "a", "reasoning": R, "reasoning_details": details}


def test_mistral_thinking_content_part():
    content = [{"type": "thinking", "thinking": [{"type": "text", "text": R}]}, {"type": "text", "text": "Answer."}]
    _, doc = load(convo({"content": content}))
    assert reasoning_of(doc) == [[R]]
    assert emptied(doc)["messages"][2]["content"] == [{"type": "thinking", "thinking": [{"type": "text", "text": ""}]}, content[1]]


# --- unrecognised ----------------------------------------------------------------------


def test_unrecognised_text_is_reported_with_line_and_field():
    lines = [
        convo({"content": "ok", "thoughts": "I pondered."}),
        convo({"content": "<thinking>hidden</thinking>Answer", "reasoning": {"summary": "x"}}),
        convo({"content": [{"type": "reasoning", "summary": "s"}], "reasoning_details": [{"type": "reasoning.weird", "text": "t"}]}),
        convo({"content": "Explain `<thinking>` tags in code: fine."}),
    ]
    data = b"".join(json.dumps(v).encode() + b"\n" for v in lines)
    doc = ADAPTER.load(data, "in.jsonl")
    assert [(u.line, u.field) for u in doc.unrecognised] == [
        (1, "messages[2].thoughts"),
        (2, "messages[2].reasoning"),
        (2, "messages[2].content"),
        (3, "messages[2].reasoning_details[0]"),
        (3, "messages[2].content[0]"),
    ]
    assert "<thinking>" in doc.unrecognised[2].what
    assert ADAPTER.dump(doc, doc.trajectories) == data


# --- P: tool definitions -------------------------------------------------------------------

TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]


def test_tools_beside_messages_and_in_traffic_logs_are_part_of_p():
    _, doc = load(convo({"content": "a", "reasoning_content": R}, tools=TOOLS))
    assert [p.label for p in doc.trajectories[0].prompt] == ["system", "tools", "user"]
    log = {"request": {"model": "m", "messages": convo()["messages"], "tools": TOOLS}, "response": {"choices": [{"message": {"role": "assistant", "content": "x", "reasoning_content": R}}]}}
    data = (json.dumps(log) + "\n").encode()
    doc = ADAPTER.load(data, "log.jsonl")
    [traj] = doc.trajectories
    assert [p.label for p in traj.prompt] == ["system", "tools", "user"] and traj.meta["model"] == "m"
    assert traj.prompt == read_messages([*log["request"]["messages"], log["response"]["choices"][0]["message"]], tools=TOOLS, traj_id="x").prompt


def test_tools_of_the_wrong_type_exit_2_naming_the_field(tmp_path, capsys):
    src = tmp_path / "bad.json"
    src.write_text(json.dumps(convo({"content": "a"}, tools={"bash": {}})))
    code, _, err = run_cli(capsys, "score", str(src), "--model", "fake", "-q")
    assert code == 2 and "'tools'" in err


def test_file_adapter_and_message_api_write_the_same():
    value = convo({"content": "<think>" + R + "</think>ok", "reasoning": R, "reasoning_details": [{"type": "reasoning.summary", "summary": R}]})
    _, doc = load(value)
    by_file = skipped_first_block(doc)["messages"]
    traj = read_messages(value["messages"], traj_id="t")
    edited = traj.with_steps([s.with_reasoning([p.text.replace("Alpha step one.", SKIP) for p in s.reasoning]) for s in traj.steps])
    assert write_messages(value["messages"], traj, edited) == by_file


# --- the sample of these shapes --------------------------------------------------------------


def test_sample_of_shapes_round_trips_and_delete_all_empties_every_copy(tmp_path, capsys):
    from format_helpers import SAMPLES
    from iclr_cli.formats import registry

    src = SAMPLES / "openai_reasoning_shapes.jsonl"
    data = src.read_bytes()
    assert registry.detect(data, str(src)).name == "openai"
    doc = ADAPTER.load(data, str(src))
    assert [len(s.reasoning) for t in doc.trajectories for s in t.steps] == [1, 1, 1, 1, 1, 1]
    assert doc.unrecognised == []
    out = tmp_path / "out.jsonl"
    for variant in ("none", "delete-all"):
        # the first line is anthropic/claude-* through OpenRouter: its signed and encrypted entries are edited on request only
        code, _, err = run_cli(capsys, "prune", str(src), "--model", "fake", "--variant", variant, "--signed-thinking", "edit",
                               "--encrypted-reasoning", "drop", "-o", str(out), "-q")
        assert code == 0, err
        if variant == "none":
            assert out.read_bytes() == data
    router, oss, qwen = (json.loads(line)["messages"] for line in out.read_bytes().splitlines())
    assert router[2]["reasoning"] == router[2]["reasoning_details"][0]["text"] == "" and "signature" not in router[2]["reasoning_details"][0]
    assert router[4]["reasoning"] == "" and router[4]["reasoning_details"] == [{"type": "reasoning.summary", "summary": "", "format": "openai-responses-v1", "index": 0}]
    assert oss[2]["thinking"] == "" and oss[4]["content"].startswith("<|channel|>analysis<|message|><|end|>")
    assert qwen[2]["content"] == "</think>\n\nI will read parse.py first."
    assert qwen[4]["content"] == "<think></think>\n\nparse() indexes lines[0]; guard the empty case."


def test_convert_to_openai_carries_the_tool_definitions(tmp_path, capsys):
    src = tmp_path / "run.json"
    src.write_text(json.dumps(convo({"content": "a", "reasoning_content": R}, tools=TOOLS)))
    out = tmp_path / "out.jsonl"
    code, _, err = run_cli(capsys, "convert", str(src), "--to", "openai", "-o", str(out))
    assert code == 0, err
    [record] = map(json.loads, out.read_text().splitlines())
    assert record["tools"] == TOOLS and [m["role"] for m in record["messages"]][:2] == ["system", "user"]


def test_unrecognised_warned_per_item_and_strict_exits_2(tmp_path, capsys):
    src = tmp_path / "u.json"
    src.write_text(json.dumps(convo({"content": "<thinking>x</thinking>Answer.", "thoughts": "hmm"})))
    code, stdout, err = run_cli(capsys, "score", str(src), "--model", "fake")
    assert code == 0 and f"{src}: field 'messages[2].thoughts'" in err and f"{src}: field 'messages[2].content': <thinking> markup" in err
    code, stdout, err = run_cli(capsys, "score", str(src), "--model", "fake", "--strict")
    assert code == 2 and stdout == "" and "2 texts or fields" in err
