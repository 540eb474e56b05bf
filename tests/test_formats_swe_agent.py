"""SWE-agent .traj adapter: real step counts, one part per thought, and an edit written into
every place that holds the thought (trajectory thought/response, history thought/content)."""

import json

import pytest

from format_helpers import REALDATA, SAMPLES, realdata, realdata_ids, run_cli
from iclr_cli.blocks import split_blocks
from iclr_cli.errors import InputError
from iclr_cli.formats import registry
from iclr_cli.formats.adapters.swe_agent import ADAPTER

SAMPLE = SAMPLES / "swe_agent.traj"
FOLDER = REALDATA / "swe_agent"


def path_of(name):
    return SAMPLE if name == "SAMPLE" else FOLDER / name


def load(path):
    return ADAPTER.load(path.read_bytes(), str(path))


@pytest.mark.parametrize("name", realdata_ids("swe_agent") + ["SAMPLE"])
def test_round_trip_is_byte_identical(name):
    data = path_of(name).read_bytes()
    assert registry.detect(data, name).name == "swe-agent"
    doc = ADAPTER.load(data, name)
    assert ADAPTER.dump(doc, doc.trajectories) == data


def test_real_counts_match_sources_md():
    realdata("swe_agent")
    # SOURCES.md: pydicom 12 steps / 26 history messages; marshmallow 11 steps / 24 messages.
    # Thought text: "3.3k" and "2.4k" chars.
    for name, steps, chars, blocks, prompt in [
        ("gpt4_pydicom-1458.traj", 12, 3302, 17, ["system", "user", "user"]),
        ("marshmallow-1867_function_calling.traj", 11, 2375, 11, ["system", "user"]),
    ]:
        [traj] = load(FOLDER / name).trajectories
        reasoning = [p for s in traj.steps for p in s.reasoning]
        assert len(traj.steps) == steps
        assert len(reasoning) == steps  # one thought per step, not one per copy
        assert sum(len(p.text) for p in reasoning) == chars
        assert chars == sum(len(t["thought"]) for t in json.loads((FOLDER / name).read_bytes())["trajectory"])
        assert sum(len(split_blocks(p.text).blocks) for p in reasoning) == blocks
        assert [p.label for p in traj.prompt] == prompt


def test_function_calling_variant_keeps_tool_calls_and_results():
    realdata("swe_agent")
    [traj] = load(FOLDER / "marshmallow-1867_function_calling.traj").trajectories
    labels = [[p.label for p in s.parts] for s in traj.steps]
    assert labels[0] == ["reasoning", "tool_call:create", "tool_result"]
    assert all(sum(x.startswith("tool_call:") for x in ls) == 1 and ls.count("tool_result") == 1 for ls in labels)


def test_last_step_observation_comes_from_trajectory_when_history_ends():
    realdata("swe_agent")
    [traj] = load(FOLDER / "gpt4_pydicom-1458.traj").trajectories
    last = traj.steps[-1].parts[-1]
    assert last.kind == "observation" and last.text.startswith("\ndiff --git a/pydicom/pixel_data_handlers/numpy_handler.py")


def edit_all(doc, fn):
    [traj] = doc.trajectories
    new = traj.with_steps([s.with_reasoning([fn(p.text) for p in s.reasoning]) for s in traj.steps])
    return json.loads(ADAPTER.dump(doc, [new]))


@pytest.mark.parametrize("name", realdata_ids("swe_agent") + ["SAMPLE"])
def test_edit_is_written_into_every_copy(name):
    path = path_of(name)
    before = json.loads(path.read_bytes())
    after = edit_all(load(path), lambda t: "EDITED " + t.upper())
    assert set(after) == set(before)
    for key in after:
        if key not in ("trajectory", "history"):
            assert after[key] == before[key]
    for old, new in zip(before["trajectory"], after["trajectory"]):
        assert new["thought"] == "EDITED " + old["thought"].upper()
        assert new["response"] == new["thought"] + old["response"][len(old["thought"]) :]
        assert {k: v for k, v in new.items() if k not in ("thought", "response")} == {k: v for k, v in old.items() if k not in ("thought", "response")}
    for old, new in zip(before["history"], after["history"]):
        if old["role"] == "assistant":
            assert new["thought"] == "EDITED " + old["thought"].upper()
            assert new["content"] == new["thought"] + old["content"][len(old["thought"]) :]
            old, new = {k: v for k, v in old.items() if k not in ("thought", "content")}, {k: v for k, v in new.items() if k not in ("thought", "content")}
        assert new == old  # actions, tool_calls, observations untouched


@pytest.mark.parametrize("variant", ["iclr", "delete-all"])
@pytest.mark.parametrize("name", realdata_ids("swe_agent") + ["SAMPLE"])
def test_cli_prune_changes_only_thoughts(capsys, tmp_path, name, variant):
    path = path_of(name)
    out = tmp_path / "out.traj"
    code, _, err = run_cli(capsys, "prune", str(path), "--model", "fake", "--variant", variant, "-o", str(out))
    assert code == 0, err
    before, after = json.loads(path.read_bytes()), json.loads(out.read_bytes())
    changed = 0
    multi = sum(len(split_blocks(t["thought"]).blocks) >= 2 for t in before["trajectory"])
    for old, new in zip(before["trajectory"], after["trajectory"]):
        assert new["response"] == new["thought"] + old["response"][len(old["thought"]) :]
        assert new["action"] == old["action"] and new["observation"] == old["observation"]
        changed += new["thought"] != old["thought"]
        if variant == "delete-all":
            assert new["thought"] == ""
    # BottomK removes floor(0.8 N) >= 1 block exactly when N >= 2
    assert changed == (len(before["trajectory"]) if variant == "delete-all" else multi)
    strip = lambda h: [{k: v for k, v in m.items() if k not in ("thought", "content")} if m["role"] == "assistant" else m for m in h]  # noqa: E731
    assert strip(after["history"]) == strip(before["history"])
    assert [m["thought"] for m in after["history"] if m["role"] == "assistant"] == [t["thought"] for t in after["trajectory"]]


def test_one_edited_thought_changes_only_its_four_lines_in_the_same_layout():
    realdata("swe_agent")
    path = FOLDER / "gpt4_pydicom-1458.traj"
    data = path.read_bytes()
    out = ADAPTER.dump(load(path), [skip_first_thought(load(path))])
    # only the 4 lines holding step 0's thought change (trajectory thought/response, history)
    diff = [(a, b) for a, b in zip(data.splitlines(), out.splitlines()) if a != b]
    assert len(data.splitlines()) == len(out.splitlines())
    assert len(diff) == 4


def skip_first_thought(doc):
    [traj] = doc.trajectories
    first = traj.steps[0]
    return traj.with_steps([first.with_reasoning(["[SKIP]\n\n"])] + list(traj.steps[1:]))


def test_bad_thought_names_the_field():
    with pytest.raises(InputError) as exc:
        ADAPTER.load(b'{"trajectory": [{"thought": 3, "action": "ls"}], "history": []}', "t.traj")
    assert str(exc.value) == "t.traj: field 'trajectory[0].thought': must be a string, not int"
    with pytest.raises(InputError, match="field 'history\\[1\\]'"):
        ADAPTER.load(b'{"trajectory": [], "history": [{"role": "system", "content": ""}, 7]}', "t.traj")


@pytest.mark.parametrize("name", realdata_ids("swe_agent"))
def test_cli_score_real_file_gives_one_record_per_block(capsys, tmp_path, name):
    out = tmp_path / "scores.jsonl"
    code, _, err = run_cli(capsys, "score", str(FOLDER / name), "--model", "fake", "-o", str(out))
    assert code == 0, err
    rows = [json.loads(line) for line in out.read_bytes().splitlines()]
    [traj] = ADAPTER.load((FOLDER / name).read_bytes(), name).trajectories
    assert len(rows) == sum(len(split_blocks(p.text).blocks) for s in traj.steps for p in s.reasoning)
    assert all(isinstance(r["entropy_bits"], float) and r["n_tokens"] > 0 for r in rows)
