"""LangChain / LangGraph messages: the three message encodings, reasoning kept equal where it
is held twice, signed and encrypted reasoning under the provider rules, unknown blocks reported."""

import json

from format_helpers import SAMPLES, run_cli
from iclr_cli.formats import registry
from iclr_cli.formats.base import OpaqueEdits
from iclr_cli.formats.adapters.langchain import ADAPTER
from iclr_cli.trajectory import WriteBack

SAMPLE = SAMPLES / "langchain_messages.json"
THINK = "Check the schema.\n\nThen query."


def lc(cls, **kwargs):
    return {"lc": 1, "type": "constructor", "id": ["langchain_core", "messages", cls], "kwargs": kwargs}


def human(text="Count the rows."):
    return {"type": "human", "data": {"content": text, "additional_kwargs": {}, "response_metadata": {}, "type": "human"}}


def ai(**fields):
    return {"type": "ai", "data": {"content": "", "additional_kwargs": {}, "response_metadata": {}, "type": "ai", "tool_calls": [], **fields}}


def load(messages):
    data = json.dumps(messages, indent=2).encode()
    return data, ADAPTER.load(data, "m.json")


def edit(doc, texts):
    [traj] = doc.trajectories
    return json.loads(ADAPTER.dump(doc, [traj.with_steps([traj.steps[0].with_reasoning(texts)])]))


def test_sample_steps_signed_thinking_and_tool_pairing():
    data = SAMPLE.read_bytes()
    assert registry.detect(data, str(SAMPLE)).name == "langchain"
    [traj] = ADAPTER.load(data, "s.json").trajectories
    assert [p.label for p in traj.prompt] == ["system", "user"]
    assert [[(p.kind, p.label, p.call_id) for p in s.parts] for s in traj.steps] == [
        [("reasoning", "reasoning", None), ("action", "assistant", None), ("action", "tool_call:list_metrics", "toolu_01Lx"), ("observation", "tool_result", "toolu_01Lx")],
        [("reasoning", "reasoning", None), ("action", "assistant", None)],
    ]
    assert all(s.reasoning[0].write_back is WriteBack.SIGNED for s in traj.steps)


def test_reasoning_content_and_reasoning_block_are_one_part_edited_alike():
    msg = lc("AIMessage", content=[{"type": "reasoning", "reasoning": THINK}, {"type": "text", "text": "ok"}], additional_kwargs={"reasoning_content": THINK}, type="ai")
    _, doc = load([lc("HumanMessage", content="hi", type="human"), msg])
    assert len(doc.trajectories[0].steps[0].reasoning) == 1
    out = edit(doc, ["[SKIP]\n\nThen query."])[1]["kwargs"]
    assert out["content"][0]["reasoning"] == out["additional_kwargs"]["reasoning_content"] == "[SKIP]\n\nThen query."


def test_copies_that_differ_are_reported_and_left_alone():
    msg = ai(content=[{"type": "reasoning", "reasoning": THINK}], additional_kwargs={"reasoning_content": "Another text."})
    _, doc = load([human(), msg])
    assert [u.field for u in doc.unrecognised] == ["[1].data.additional_kwargs"]
    assert doc.trajectories[0].steps[0].reasoning == ()


def test_signed_thinking_block_loses_its_signature_when_edited():
    msg = ai(content=[{"type": "thinking", "thinking": THINK, "signature": "EqQB"}, {"type": "text", "text": "ok"}])
    _, doc = load([human(), msg])
    out = edit(doc, ["Check the schema."])[1]["data"]["content"]
    assert out[0] == {"type": "thinking", "thinking": "Check the schema."}


def test_encrypted_responses_reasoning_is_dropped_whole_or_kept():
    item = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": THINK}], "encrypted_content": "gAAAA"}
    data, doc = load([human(), ai(content=[item, {"type": "text", "text": "42"}], tool_calls=[])])
    [traj] = doc.trajectories
    assert traj.steps[0].reasoning[0].write_back is WriteBack.OPAQUE
    new = [traj.with_steps([traj.steps[0].with_reasoning(["[SKIP]"])])]
    assert json.loads(ADAPTER.dump(doc, new))[1]["data"]["content"] == [{"type": "text", "text": "42"}]
    assert ADAPTER.dump(doc, new, opaque=OpaqueEdits.KEEP) == data


def test_langgraph_state_dicts_and_think_tags(tmp_path, capsys):
    state = {"values": {"messages": [
        {"content": "hi", "additional_kwargs": {}, "response_metadata": {}, "type": "human"},
        {"content": f"<think>{THINK}</think>Answer: 3", "additional_kwargs": {}, "response_metadata": {"model_name": "qwen3"}, "type": "ai", "tool_calls": []},
    ]}}
    data, doc = load(state)
    [traj] = doc.trajectories
    assert traj.meta["model"] == "qwen3"
    assert [p.text for p in traj.steps[0].parts] == [THINK, "Answer: 3"]
    assert edit(doc, [""])["values"]["messages"][1]["content"] == "<think></think>Answer: 3"


def test_unknown_ai_block_is_reported_and_strict_exits_2(tmp_path, capsys):
    src = tmp_path / "m.json"
    src.write_text(json.dumps([human(), ai(content=[{"type": "planning", "plan": "secret steps"}, {"type": "text", "text": "ok"}])]))
    code, _, err = run_cli(capsys, "prune", str(src), "--model", "fake", "--strict", "-o", str(tmp_path / "o.json"))
    assert code == 2 and "content block of type 'planning'" in err
