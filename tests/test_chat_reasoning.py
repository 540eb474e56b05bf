"""Reasoning on LiteLLM-style assistant messages inside agent logs (formats/chat_reasoning.py),
through the three adapters that read it: mini-swe-agent, SWE-agent history, OpenHands V1."""

import json

from iclr_cli.compress import Settings, compress_trajectories
from iclr_cli.formats.base import OpaqueEdits
from iclr_cli.formats.adapters.mini_swe_agent import ADAPTER as MINI
from iclr_cli.formats.adapters.openhands import ADAPTER as OPENHANDS
from iclr_cli.formats.adapters.swe_agent import ADAPTER as SWE
from iclr_cli.policies import parse_variant
from iclr_cli.scoring.fake import RegexTokenizer
from iclr_cli.trajectory import WriteBack

SIGNED = {"type": "thinking", "thinking": "plan\n\ncheck", "signature": "SIG"}


def delete_all(adapter, doc, opaque=OpaqueEdits.DROP):
    results = compress_trajectories(doc.trajectories, Settings(parse_variant("delete-all")), None, RegexTokenizer())
    return adapter.write(doc, [r.compressed for r in results], opaque=opaque)


def mini(assistant: dict) -> bytes:
    raw = {"role": "assistant", **{k: v for k, v in assistant.items() if k != "extra"}}
    msg = {**assistant, "extra": {"response": {"choices": [{"message": raw}]}}}
    doc = {"trajectory_format": "mini-swe-agent-1.1", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}, msg]}
    return json.dumps(doc, indent=2).encode()


def test_litellm_thinking_blocks_and_reasoning_content_are_one_part_edited_everywhere():
    data = mini({"role": "assistant", "content": None, "reasoning_content": "plan\n\ncheck", "thinking_blocks": [SIGNED], "tool_calls": []})
    doc = MINI.load(data, "m.json")
    [part] = doc.trajectories[0].steps[0].reasoning
    assert part.write_back is WriteBack.SIGNED
    # the message field, the block, and both in the raw response copy
    assert len(part.ref.sites) == 4 and doc.unrecognised == []
    out = json.loads(delete_all(MINI, doc).data)["messages"][2]
    for msg in (out, out["extra"]["response"]["choices"][0]["message"]):
        # DeepSeek needs the field: "" not missing; the last block stays, emptied and unsigned
        assert msg["reasoning_content"] == "" and msg["thinking_blocks"] == [{"type": "thinking", "thinking": ""}]


def test_gpt_oss_thinking_field_is_reasoning():
    data = mini({"role": "assistant", "content": "```bash\nls\n```", "thinking": "look around first"})
    doc = MINI.load(data, "m.json")
    assert [(p.kind, p.text) for p in doc.trajectories[0].steps[0].parts[:2]] == [("reasoning", "look around first"), ("action", "```bash\nls\n```")]
    out = json.loads(delete_all(MINI, doc).data)["messages"][2]
    assert out["thinking"] == "" and out["extra"]["response"]["choices"][0]["message"]["thinking"] == ""


def test_reasoning_details_leave_the_message_unpruned_and_are_reported():
    data = mini({"role": "assistant", "content": None, "reasoning": "r", "reasoning_details": [{"type": "reasoning.encrypted", "data": "X"}]})
    doc = MINI.load(data, "m.json")
    assert doc.trajectories[0].steps[0].reasoning == ()
    [note] = doc.unrecognised
    assert note.field == "messages[2].reasoning_details"
    assert delete_all(MINI, doc).data == data


def test_harmony_markup_in_content_is_reported():
    data = mini({"role": "assistant", "content": "<|channel|>analysis<|message|>hmm<|end|>\n```bash\nls\n```"})
    [note] = MINI.load(data, "m.json").unrecognised
    assert note.field == "messages[2].content" and "harmony" in note.what


def test_swe_agent_history_thinking_blocks():
    history = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "I will look.\n\n```\nls\n```", "thought": "I will look.\n\n", "action": "ls", "thinking_blocks": [SIGNED]},
        {"role": "user", "content": "a.py"},
    ]
    traj = [{"thought": "I will look.\n\n", "action": "ls", "observation": "a.py", "response": "I will look.\n\n```\nls\n```"}]
    data = json.dumps({"trajectory": traj, "history": history}).encode()
    doc = SWE.load(data, "x.traj")
    [step] = doc.trajectories[0].steps
    assert [(p.label, p.write_back) for p in step.reasoning] == [("thinking", WriteBack.SIGNED), ("reasoning", WriteBack.IN_PLACE)]
    out = json.loads(delete_all(SWE, doc).data)
    assert out["history"][2]["thinking_blocks"] == [{"type": "thinking", "thinking": ""}]
    assert out["history"][2]["content"] == "```\nls\n```" and out["trajectory"][0]["action"] == "ls"


def openhands_v1(item: dict) -> bytes:
    events = [
        {"kind": "SystemPromptEvent", "source": "agent", "system_prompt": {"type": "text", "text": "sys"}},
        {"kind": "MessageEvent", "source": "user", "llm_message": {"role": "user", "content": [{"type": "text", "text": "go"}]}},
        {"kind": "ActionEvent", "source": "agent", "thought": [], "responses_reasoning_item": item, "tool_name": "bash", "tool_call": {"name": "bash", "arguments": "{}"}, "llm_response_id": "r1"},
        {"kind": "ActionEvent", "source": "agent", "thought": [], "tool_name": "bash", "tool_call": {"name": "bash", "arguments": "{\"x\": 1}"}, "llm_response_id": "r1"},
        {"kind": "ObservationEvent", "source": "environment", "observation": {"content": [{"type": "text", "text": "ok"}]}},
    ]
    return b"".join(json.dumps(e).encode() + b"\n" for e in events)


def test_openhands_responses_reasoning_item_encrypted_is_dropped_or_kept_whole():
    item = {"id": "rs_1", "summary": ["first", "second"], "content": None, "encrypted_content": "ENC"}
    data = openhands_v1(item)
    doc = OPENHANDS.load(data, "e.jsonl")
    [step] = doc.trajectories[0].steps  # two parallel calls of response r1: one step
    assert [(p.text, p.write_back) for p in step.reasoning] == [("first", WriteBack.OPAQUE), ("second", WriteBack.OPAQUE)]
    assert [p.label for p in step.parts if p.kind == "action"] == ["tool_call:bash", "tool_call:bash"]
    dropped = delete_all(OPENHANDS, doc)
    assert "responses_reasoning_item" not in json.loads(dropped.data.splitlines()[2])
    assert [p.text for p in dropped.written[0].steps[0].reasoning] == ["", ""]
    kept = delete_all(OPENHANDS, doc, OpaqueEdits.KEEP)
    assert kept.data == data and [p.text for p in kept.written[0].steps[0].reasoning] == ["first", "second"]
    # without encrypted_content the summaries are plain text, edited in place
    plain = OPENHANDS.load(openhands_v1({"summary": ["first"]}), "e.jsonl")
    out = json.loads(delete_all(OPENHANDS, plain).data.splitlines()[2])
    assert out["responses_reasoning_item"] == {"summary": [""]}


def test_an_agent_log_edits_litellms_provider_specific_copies_alike():
    text = "Read the key function first.\n\nThen change the handler.\n\nThen add a test."
    blocks = [{"type": "thinking", "thinking": text, "signature": "sig"}]
    data = mini({"role": "assistant", "content": None, "reasoning_content": text, "thinking_blocks": blocks, "tool_calls": [],
                 "provider_specific_fields": {"reasoning_content": text, "thinking_blocks": blocks}})
    doc = MINI.load(data, "m.json")
    [part] = doc.trajectories[0].steps[0].reasoning
    assert sum("provider_specific_fields" in s.path for s in part.ref.sites) == 4  # two fields, in the message and its raw copy
    out = json.loads(delete_all(MINI, doc).data)["messages"][2]
    for msg in (out, out["extra"]["response"]["choices"][0]["message"]):
        copies = msg["provider_specific_fields"]
        assert msg["reasoning_content"] == copies["reasoning_content"] == "" and copies["thinking_blocks"] == msg["thinking_blocks"]
