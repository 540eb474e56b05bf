"""mini-swe-agent adapter: v1 detected before plain OpenAI, THOUGHT = text before the command
block, v2 with hidden reasoning gives 0 blocks, and edits touch only the THOUGHT."""

import json

import pytest

from format_helpers import REALDATA, SAMPLES, realdata, realdata_ids, run_cli
from iclr_cli.blocks import split_blocks
from iclr_cli.errors import InputError
from iclr_cli.formats import registry
from iclr_cli.formats.adapters.mini_swe_agent import ADAPTER, thought_end

SAMPLE = SAMPLES / "mini_swe_agent.traj.json"
FOLDER = REALDATA / "mini_swe_agent"
V1 = FOLDER / "github_issue.traj.json"
V2 = FOLDER / "liveswe_gpt-5-mini_django__django-11133.traj.json"


def path_of(name):
    return SAMPLE if name == "SAMPLE" else FOLDER / name


@pytest.mark.parametrize("name", realdata_ids("mini_swe_agent") + ["SAMPLE"])
def test_round_trip_and_detection_before_openai(name):
    data = path_of(name).read_bytes()
    assert registry.get("openai").sniff(data[:65536])  # a plain message list to the OpenAI adapter too
    assert registry.detect(data, name).name == "mini-swe-agent"
    doc = ADAPTER.load(data, name)
    assert ADAPTER.dump(doc, doc.trajectories) == data


def test_v1_real_file_counts():
    realdata("mini_swe_agent")
    [traj] = ADAPTER.load(V1.read_bytes(), str(V1)).trajectories
    # SOURCES.md: 22 messages, 10 assistant; every assistant message is THOUGHT + one block.
    assert len(traj.steps) == 10
    assert [len(s.reasoning) for s in traj.steps] == [1] * 10
    assert sum(len(split_blocks(p.text).blocks) for s in traj.steps for p in s.reasoning) == 13
    first = traj.steps[0]
    assert first.reasoning[0].text == "I'll help you solve this issue. Let me first examine the content of the file that's causing the syntax error.\n\n"
    assert first.parts[1].text.startswith("```mswea_bash_command\ncat ")


def test_v2_real_file_has_no_visible_reasoning():
    realdata("mini_swe_agent")
    [traj] = ADAPTER.load(V2.read_bytes(), str(V2)).trajectories
    # SOURCES.md: 30 messages, 12 assistant with content null (hidden reasoning), 11 tool results.
    assert traj.id == "django__django-11133"
    assert traj.meta["trajectory_format"] == "mini-swe-agent-1.1"
    assert len(traj.steps) == 12
    assert sum(len(s.reasoning) for s in traj.steps) == 0
    labels = [p.label for s in traj.steps for p in s.parts]
    assert labels.count("tool_call:bash") == 12 and labels.count("tool_result") == 11 and labels.count("exit") == 1


def test_thought_ends_at_the_command_fence_not_an_earlier_code_block():
    text = "THOUGHT: try\n\n```python\nprint(1)\n```\n\nthen run it.\n\n```bash\npython x.py\n```"
    assert text[: thought_end(text)].endswith("then run it.\n\n")
    assert thought_end("no block at all") is None
    [traj] = ADAPTER.load(SAMPLE.read_bytes(), str(SAMPLE)).trajectories
    assert "```python" in traj.steps[1].reasoning[0].text
    assert traj.steps[1].parts[1].text.startswith("```mswea_bash_command\n")


def test_v2_reasoning_fields_and_their_raw_copies_are_one_part():
    msg = {"role": "assistant", "content": "THOUGHT: list files first.\n\nThen read the config.", "reasoning_content": "hidden plan\n\nstep two",
           "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}}],
           "extra": {"response": {"choices": [{"message": {"content": "THOUGHT: list files first.\n\nThen read the config.", "reasoning_content": "hidden plan\n\nstep two"}}]}}}
    doc_json = {"trajectory_format": "mini-swe-agent-1.1", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}, msg,
                {"role": "tool", "content": "a.txt", "tool_call_id": "c1"}]}
    data = json.dumps(doc_json, indent=2).encode()
    doc = ADAPTER.load(data, "v2.json")
    [traj] = doc.trajectories
    assert [(p.kind, p.label) for p in traj.steps[0].parts] == [("reasoning", "reasoning"), ("reasoning", "reasoning"), ("action", "tool_call:bash"), ("observation", "tool_result")]
    new = traj.with_steps([traj.steps[0].with_reasoning(["R", "C"])])
    out = json.loads(ADAPTER.dump(doc, [new]))["messages"][2]
    assert (out["reasoning_content"], out["content"]) == ("R", "C")
    raw = out["extra"]["response"]["choices"][0]["message"]
    assert (raw["reasoning_content"], raw["content"]) == ("R", "C")
    assert out["tool_calls"] == msg["tool_calls"]


@pytest.mark.parametrize("variant", ["iclr", "delete-all"])
@pytest.mark.parametrize("name", realdata_ids("mini_swe_agent") + ["SAMPLE"])
def test_cli_prune_changes_only_thoughts(capsys, tmp_path, name, variant):
    path = path_of(name)
    out = tmp_path / "out.json"
    code, _, err = run_cli(capsys, "prune", str(path), "--model", "fake", "--variant", variant, "-o", str(out))
    assert code == 0, err
    before, after = json.loads(path.read_bytes()), json.loads(out.read_bytes())
    msgs_b = before if isinstance(before, list) else before["messages"]
    msgs_a = after if isinstance(after, list) else after["messages"]
    assert len(msgs_a) == len(msgs_b)
    for old, new in zip(msgs_b, msgs_a):
        if old["role"] != "assistant" or not isinstance(old.get("content"), str):
            assert new == old
            continue
        end = thought_end(old["content"])
        action = old["content"][end:]
        assert new["content"].endswith(action)  # the command block is untouched
        if variant == "delete-all":
            assert new["content"] == action
        assert {k: v for k, v in new.items() if k != "content"} == {k: v for k, v in old.items() if k != "content"}
    if not isinstance(before, list):
        assert {k: v for k, v in after.items() if k != "messages"} == {k: v for k, v in before.items() if k != "messages"}


def test_v2_prune_is_identity_because_there_is_nothing_to_prune(capsys, tmp_path):
    realdata("mini_swe_agent")
    out = tmp_path / "out.json"
    code, _, err = run_cli(capsys, "prune", str(V2), "--model", "fake", "--variant", "delete-all", "-o", str(out))
    assert code == 0, err
    assert out.read_bytes() == V2.read_bytes()


def test_bad_message_names_the_field():
    with pytest.raises(InputError) as exc:
        ADAPTER.load(b'{"trajectory_format": "mini-swe-agent-1.1", "messages": [{"role": "system", "content": ""}, {"content": "x"}]}', "m.json")
    assert str(exc.value) == "m.json: field 'messages[1]': message must be an object with a string 'role'"
    with pytest.raises(InputError, match=r"field 'messages\[0\].content'"):
        ADAPTER.load(b'{"trajectory_format": "mini-swe-agent-1.1", "messages": [{"role": "assistant", "content": 5}]}', "m.json")
    # a user or tool message's content too: a number is never read as an empty observation
    with pytest.raises(InputError, match=r"field 'messages\[1\].content': must be a string, a list of parts or null"):
        ADAPTER.load(b'{"trajectory_format": "mini-swe-agent-1.1", "messages": [{"role": "system", "content": ""}, {"role": "user", "content": 12345}]}', "m.json")


@pytest.mark.parametrize("name", realdata_ids("mini_swe_agent"))
def test_cli_score_real_file_gives_one_record_per_block(capsys, tmp_path, name):
    out = tmp_path / "scores.jsonl"
    code, _, err = run_cli(capsys, "score", str(FOLDER / name), "--model", "fake", "-o", str(out))
    assert code == 0, err
    rows = [json.loads(line) for line in out.read_bytes().splitlines()]
    [traj] = ADAPTER.load((FOLDER / name).read_bytes(), name).trajectories
    assert len(rows) == sum(len(split_blocks(p.text).blocks) for s in traj.steps for p in s.reasoning)
    assert all(isinstance(r["entropy_bits"], float) and r["n_tokens"] > 0 for r in rows)


def test_v2_hidden_reasoning_is_said_not_silent():
    realdata("mini_swe_agent")
    doc = ADAPTER.load(V2.read_bytes(), "v2.json")
    # 12 assistant messages with content null; 9 of them report reasoning_tokens > 0
    # (64, 0, 0, 1792, 2240, 128, 960, 448, 0, 64, 448, 704)
    assert doc.warnings == ["v2.json: 9 assistant messages report reasoning_tokens but hold no reasoning text (the provider hid it): nothing there to score or prune"]
    assert ADAPTER.load(V1.read_bytes(), "v1.json").warnings == []
