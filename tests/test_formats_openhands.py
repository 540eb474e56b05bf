"""OpenHands event-stream adapter: V0 real counts, thoughts mirrored into the raw model
response of every event of the same call, V1 <think> + reasoning_content scored once and
edited in both places, signed thinking blocks losing their signature."""

import json

import pytest

from format_helpers import REALDATA, SAMPLES, realdata, realdata_ids, run_cli
from iclr_cli.blocks import split_blocks
from iclr_cli.errors import InputError
from iclr_cli.formats import registry
from iclr_cli.formats.adapters.openhands import ADAPTER
from iclr_cli.trajectory import WriteBack

SAMPLE = SAMPLES / "openhands_events.json"
FOLDER = REALDATA / "openhands_events"
REAL = FOLDER / "basic_gui_mode.json"
MSG = ("tool_call_metadata", "model_response", "choices", 0, "message")

V1_EVENTS = [
    {"kind": "SystemPromptEvent", "id": "e0", "source": "agent", "system_prompt": {"type": "text", "text": "You are OpenHands agent."}, "tools": []},
    {"kind": "MessageEvent", "id": "e1", "source": "user", "llm_message": {"role": "user", "content": [{"type": "text", "text": "Make `make test` pass."}]}},
    {"kind": "ActionEvent", "id": "e2", "source": "agent", "thought": [{"type": "text", "text": "<think>The Makefile may call pytest.\n\nList files first.</think>\n\nLet me look around."}],
     "reasoning_content": "The Makefile may call pytest.\n\nList files first.", "thinking_blocks": [], "tool_name": "terminal",
     "tool_call_id": "call_1", "tool_call": {"id": "call_1", "name": "terminal", "arguments": "{\"command\": \"ls\"}", "origin": "completion"},
     "llm_response_id": "resp-1", "action": {"kind": "TerminalAction", "command": "ls"}},
    {"kind": "ObservationEvent", "id": "e3", "source": "environment", "tool_name": "terminal", "tool_call_id": "call_1", "action_id": "e2",
     "observation": {"kind": "TerminalObservation", "content": [{"type": "text", "text": "Makefile\ntests/"}]}},
    {"kind": "ActionEvent", "id": "e4", "source": "agent", "thought": [{"type": "text", "text": "Reading the Makefile."}], "reasoning_content": None,
     "thinking_blocks": [{"type": "thinking", "thinking": "Check the test target.\n\nIt might use an old flag.", "signature": "c2lnbmF0dXJl"},
                         {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}],
     "tool_name": "terminal", "tool_call_id": "call_2", "tool_call": {"id": "call_2", "name": "terminal", "arguments": "{\"command\": \"cat Makefile\"}", "origin": "completion"},
     "llm_response_id": "resp-2", "action": {"kind": "TerminalAction", "command": "cat Makefile"}},
    {"kind": "AgentErrorEvent", "id": "e5", "source": "agent", "tool_name": "terminal", "tool_call_id": "call_2", "error": "timeout after 30s"},
    {"kind": "ConversationStateUpdateEvent", "id": "e6", "source": "environment", "key": "execution_status", "value": "finished"},
    {"kind": "MessageEvent", "id": "e7", "source": "agent", "llm_message": {"role": "assistant", "content": [{"type": "text", "text": "The test target needs Python 3.11."}], "reasoning_content": "Answer briefly."}},
]


def path_of(name):
    return SAMPLE if name == "SAMPLE" else FOLDER / name


def v1_doc():
    data = json.dumps(V1_EVENTS, indent=2).encode()
    return data, ADAPTER.load(data, "v1.json")


@pytest.mark.parametrize("name", realdata_ids("openhands_events") + ["SAMPLE", "V1"])
def test_round_trip_is_byte_identical(name):
    data = json.dumps(V1_EVENTS, indent=2).encode() if name == "V1" else path_of(name).read_bytes()
    assert registry.detect(data, name).name == "openhands"
    doc = ADAPTER.load(data, name)
    assert ADAPTER.dump(doc, doc.trajectories) == data


def test_real_counts_match_sources_md():
    realdata("openhands_events")
    [traj] = ADAPTER.load(REAL.read_bytes(), str(REAL)).trajectories
    # SOURCES.md: 18 events, 5 agent actions, visible thought only (350 chars).
    assert len(traj.steps) == 5
    reasoning = [p for s in traj.steps for p in s.reasoning]
    assert len(reasoning) == 4  # the final message action has no thought
    assert sum(len(p.text) for p in reasoning) == 350
    assert sum(len(split_blocks(p.text).blocks) for p in reasoning) == 5
    assert [p.label for p in traj.prompt] == ["user"]
    assert [p.label for p in traj.steps[-1].parts] == ["assistant"]


def test_sample_parallel_calls_and_think_copy_are_one_part_each():
    [traj] = ADAPTER.load(SAMPLE.read_bytes(), str(SAMPLE)).trajectories
    assert [p.label for p in traj.prompt] == ["system", "user"]
    kinds = [[p.kind[0] for p in s.parts] for s in traj.steps]
    # run; one model call (hidden reasoning + thought) with two parallel calls, an edit and a
    # run without thought, and their two results: one step; think-tag run; answer
    assert kinds == [["r", "a", "o"], ["r", "r", "a", "a", "o", "o"], ["r", "a", "a", "o"], ["a"]]
    hidden = traj.steps[1].reasoning[0]
    assert len(hidden.ref.sites) == 4  # reasoning_content in the 4 events of that model call
    think = traj.steps[2].reasoning[0]
    assert sorted(s.how for s in think.ref.sites) == ["think:0", "think:0", "think:0", "whole", "whole"]


@pytest.mark.parametrize("variant", ["iclr", "delete-all"])
@pytest.mark.parametrize("name", realdata_ids("openhands_events") + ["SAMPLE"])
def test_cli_prune_changes_only_reasoning(capsys, tmp_path, name, variant):
    path = path_of(name)
    out = tmp_path / "out.json"
    code, _, err = run_cli(capsys, "prune", str(path), "--model", "fake", "--variant", variant, "-o", str(out))
    assert code == 0, err
    before, after = json.loads(path.read_bytes()), json.loads(out.read_bytes())
    assert len(after) == len(before)

    def strip(e):
        e = json.loads(json.dumps(e))
        e.get("args", {}).pop("thought", None)
        msg = e.get("tool_call_metadata", {}).get("model_response", {}).get("choices", [{}])[0].get("message", {})
        msg.pop("content", None)
        msg.pop("reasoning_content", None)
        return e

    changed = 0
    for old, new in zip(before, after):
        assert strip(new) == strip(old)  # actions, tool calls and their ids, observations
        thought = new.get("args", {}).get("thought")
        msg = new.get("tool_call_metadata", {}).get("model_response", {}).get("choices", [{}])[0].get("message", {})
        if thought and "<think>" not in thought:
            assert msg["content"] == thought  # the raw copy follows the edit
        changed += new != old
    assert changed > 0


def test_v1_think_and_reasoning_content_are_one_part_edited_in_both():
    data, doc = v1_doc()
    [traj] = doc.trajectories
    assert [p.label for p in traj.prompt] == ["system", "user"]
    first = traj.steps[0]
    assert [(p.kind, p.label) for p in first.parts] == [("reasoning", "reasoning"), ("action", "assistant"), ("action", "tool_call:terminal"), ("observation", "tool_result")]
    new = traj.with_steps([first.with_reasoning(["[SKIP]\n\nList files first."])] + list(traj.steps[1:]))
    out = json.loads(ADAPTER.dump(doc, [new]))
    assert out[2]["reasoning_content"] == "[SKIP]\n\nList files first."
    assert out[2]["thought"][0]["text"] == "<think>[SKIP]\n\nList files first.</think>\n\nLet me look around."
    assert out[:2] == V1_EVENTS[:2] and out[3:] == V1_EVENTS[3:]


def test_v1_signed_thinking_loses_signature_and_redacted_is_kept():
    _, doc = v1_doc()
    [traj] = doc.trajectories
    step = traj.steps[1]
    assert [p.write_back for p in step.reasoning] == [WriteBack.SIGNED, WriteBack.IN_PLACE]
    assert [p.label for p in step.parts if p.kind == "observation"] == ["tool_result"]
    new = traj.with_steps([traj.steps[0], step.with_reasoning(["Check the test target.", step.reasoning[1].text]), traj.steps[2]])
    out = json.loads(ADAPTER.dump(doc, [new]))
    blocks = out[4]["thinking_blocks"]
    assert blocks[0] == {"type": "thinking", "thinking": "Check the test target."}
    assert blocks[1] == V1_EVENTS[4]["thinking_blocks"][1]
    assert out[5:] == V1_EVENTS[5:]
    last = traj.steps[2]
    assert [(p.kind, p.text) for p in last.parts] == [("reasoning", "Answer briefly."), ("action", "The test target needs Python 3.11.")]


def test_bad_events_name_the_field():
    with pytest.raises(InputError) as exc:
        ADAPTER.load(b'[{"source": "user", "action": "message", "args": {}}, 3]', "e.json")
    assert str(exc.value) == "e.json: field '[1]': event must be a JSON object"
    with pytest.raises(InputError, match=r"field '\[0\].args.thought': must be a string"):
        ADAPTER.load(b'[{"source": "agent", "action": "run", "args": {"thought": 1}}]', "e.json")


@pytest.mark.parametrize("name", realdata_ids("openhands_events"))
def test_cli_score_real_file_gives_one_record_per_block(capsys, tmp_path, name):
    out = tmp_path / "scores.jsonl"
    code, _, err = run_cli(capsys, "score", str(FOLDER / name), "--model", "fake", "-o", str(out))
    assert code == 0, err
    rows = [json.loads(line) for line in out.read_bytes().splitlines()]
    [traj] = ADAPTER.load((FOLDER / name).read_bytes(), name).trajectories
    assert len(rows) == sum(len(split_blocks(p.text).blocks) for s in traj.steps for p in s.reasoning)
    assert all(isinstance(r["entropy_bits"], float) and r["n_tokens"] > 0 for r in rows)


def test_each_request_names_the_model_its_raw_response_names():
    """V0 events carry the raw model response: its ``model`` prices the request in savings
    (it was read as no model, every request unpriced)."""
    if not REAL.exists():
        pytest.skip(f"{REAL} is not beside the repository")
    doc = ADAPTER.load(REAL.read_bytes(), str(REAL))
    (traj,) = doc.trajectories
    assert traj.meta["model"] == "claude-3-5-sonnet-20241022"
    # the last step records no model response (no tool_call_metadata)
    assert [r.model for r in traj.requests] == ["claude-3-5-sonnet-20241022"] * 4 + [None]
