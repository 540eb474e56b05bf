"""Bedrock Converse: untyped content blocks, signed reasoningText, read-only redactedContent,
toolUse / toolResult pairing, every accepted layout, byte-exact write-back."""

import json

import pytest

from format_helpers import SAMPLES, run_cli
from iclr_cli.errors import InputError
from iclr_cli.formats import registry
from iclr_cli.formats.adapters.bedrock import ADAPTER, REDACTED_TEXT
from iclr_cli.trajectory import WriteBack

SAMPLE = SAMPLES / "bedrock_converse.json"
THINK = "Look at the helper.\n\nThen clamp."


def converse(*messages, **extra) -> bytes:
    return json.dumps({"messages": list(messages), **extra}, indent=2).encode()


def test_sample_parts_labels_and_pairing():
    data = SAMPLE.read_bytes()
    assert registry.detect(data, str(SAMPLE)).name == "bedrock"
    doc = ADAPTER.load(data, "s.json")
    [traj] = doc.trajectories
    assert traj.meta == {"format": "bedrock", "model": "us.anthropic.claude-sonnet-4-5-20250929-v1:0"}
    assert [p.label for p in traj.prompt] == ["system", "tools", "user"]
    assert [t["toolSpec"]["name"] for t in json.loads(traj.prompt[1].text)] == ["read_file", "apply_patch"]
    shape = [[(p.kind, p.label, p.write_back, p.call_id) for p in s.parts] for s in traj.steps]
    assert shape[0] == [
        ("reasoning", "reasoning", WriteBack.SIGNED, None),
        ("action", "assistant", WriteBack.IN_PLACE, None),
        ("action", "tool_call:read_file", WriteBack.IN_PLACE, "tooluse_slug_01"),
        ("observation", "tool_result", WriteBack.IN_PLACE, "tooluse_slug_01"),
    ]
    assert [(p.write_back, p.text) for p in traj.steps[1].parts if p.kind == "reasoning"][0] == (WriteBack.READ_ONLY, REDACTED_TEXT)
    assert traj.steps[1].parts[-1].text == '{"applied": true, "lines_changed": 4}'  # a json result block
    assert len(traj.steps[1].reasoning) == 1 and traj.steps[1].reasoning[0].write_back is WriteBack.IN_PLACE
    assert any("redacted by the provider" in w for w in doc.warnings)


def test_only_block_deleted_stays_empty_and_unsigned():
    data = converse(
        {"role": "user", "content": [{"text": "hi"}]},
        {"role": "assistant", "content": [{"reasoningContent": {"reasoningText": {"text": THINK, "signature": "sig"}}}]},
    )
    doc = ADAPTER.load(data, "x.json")
    [traj] = doc.trajectories
    out = json.loads(ADAPTER.dump(doc, [traj.with_steps([traj.steps[0].with_reasoning([""])])]))
    assert out["messages"][1]["content"] == [{"reasoningContent": {"reasoningText": {"text": ""}}}]


def test_edited_unsigned_block_keeps_its_place_and_keys():
    block = {"reasoningContent": {"reasoningText": {"text": THINK}, "x_trace": "t1"}}
    data = converse({"role": "user", "content": [{"text": "hi"}]}, {"role": "assistant", "content": [block, {"text": "ok"}]})
    doc = ADAPTER.load(data, "x.json")
    [traj] = doc.trajectories
    out = json.loads(ADAPTER.dump(doc, [traj.with_steps([traj.steps[0].with_reasoning(["[SKIP]\n\nThen clamp."])])]))
    assert out["messages"][1]["content"][0] == {"reasoningContent": {"reasoningText": {"text": "[SKIP]\n\nThen clamp."}, "x_trace": "t1"}}


@pytest.mark.parametrize(
    "record",
    [
        {"output": {"message": {"role": "assistant", "content": [{"reasoningContent": {"reasoningText": {"text": THINK}}}, {"text": "ok"}]}}, "stopReason": "end_turn"},
        {"schemaType": "ModelInvocationLog", "operation": "Converse", "modelId": "m1",
         "input": {"inputBodyJson": {"messages": [{"role": "user", "content": [{"text": "hi"}]}]}},
         "output": {"outputBodyJson": {"output": {"message": {"role": "assistant", "content": [{"reasoningContent": {"reasoningText": {"text": THINK}}}]}}}}},
    ],
    ids=["response", "invocation-log"],
)
def test_reply_layouts_read_the_reply_as_the_last_step(record):
    data = (json.dumps(record) + "\n").encode()
    assert registry.detect(data, "x.jsonl").name == "bedrock"
    doc = ADAPTER.load(data, "x.jsonl")
    [traj] = doc.trajectories
    assert [p.text for p in traj.steps[-1].reasoning] == [THINK]
    assert ADAPTER.dump(doc, doc.trajectories) == data


def test_unknown_assistant_block_is_reported_and_strict_exits_2(tmp_path, capsys):
    src = tmp_path / "c.json"
    src.write_bytes(converse({"role": "user", "content": [{"text": "hi"}]}, {"role": "assistant", "content": [{"thinkingV2": {"text": "hidden plan"}}, {"text": "ok"}]}))
    doc = ADAPTER.load(src.read_bytes(), str(src))
    assert [(u.field, u.line) for u in doc.unrecognised] == [("messages[1].content[0].thinkingV2", None)]
    code, _, err = run_cli(capsys, "score", str(src), "--model", "fake", "--strict", "-q")
    assert code == 2 and "--strict" in err


def test_malformed_content_names_the_field():
    with pytest.raises(InputError) as exc:
        ADAPTER.load(converse({"role": "user", "content": "hi"}), "x.json")
    assert exc.value.field == "messages[0].content"


def test_plain_converse_converts_to_openai_losslessly(tmp_path, capsys):
    src = tmp_path / "plain.json"
    src.write_bytes(converse(
        {"role": "user", "content": [{"text": "Fix it."}]},
        {"role": "assistant", "content": [{"reasoningContent": {"reasoningText": {"text": THINK}}}, {"toolUse": {"toolUseId": "t1", "name": "read_file", "input": {"path": "a.py"}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "content": [{"text": "print(1)"}]}}]},
        {"role": "assistant", "content": [{"text": "Done."}]},
        system=[{"text": "Be brief."}],
    ))
    out = tmp_path / "out.jsonl"
    code, _, err = run_cli(capsys, "convert", str(src), "--to", "openai", "-o", str(out))
    assert code == 0, err
    messages = json.loads(out.read_text())["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert messages[2]["reasoning_content"] == THINK and messages[2]["tool_calls"][0]["id"] == "t1"
    assert messages[3]["tool_call_id"] == "t1"


def test_converse_is_not_claimed_by_openai_and_a_text_only_list_says_so():
    data = converse({"role": "user", "content": [{"text": "hi"}]}, {"role": "assistant", "content": [{"text": "hello"}]})
    found = registry.detect_why(data, "x.json")
    assert found.adapter.name == "bedrock"
    assert [a.name for a, _ in found.others] == ["openai"]
    assert "read as bedrock" in found.note("x.json") and "--format openai" in found.note("x.json")
