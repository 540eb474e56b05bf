"""State externalization: G per step, the join with labels, and the command."""

from __future__ import annotations

import json

import pytest

from format_helpers import run_cli
from replay_fixtures import completion, fake_openai

from iclr_cli.analysis.externalization import join, trace
from iclr_cli.analysis.labels import Label
from iclr_cli.trajectory import Part, Step, Trajectory


def step(i, reasoning, action, observation="ok"):
    return Step(i, (Part("reasoning", reasoning, label="reasoning"), Part("action", action, label="tool_call:bash"),
                    Part("observation", observation, label="tool_result")))


def make(tid="t"):
    return Trajectory(tid, (Part("prompt", "Fix the parser.", label="user"),), (
        step(0, "The offset must be 4096 bytes.", '{"command": "ls"}'),              # 4096 stays in reasoning
        step(1, "Look at the header.", '{"command": "cat header.txt"}'),             # nothing new
        step(2, "Write it.", '{"command": "echo 4096 > conf"}'),                     # 4096 reaches an action
        step(3, "Use retry_limit next time.", '{"command": "ls"}', "retry_limit=3"), # carried by its own result
    ))


def test_trace_tracks_where_derived_state_lives():
    records = trace(make(), "f")
    assert [r["G"] for r in records] == [1, 1, 0, 0]
    assert [r["outstanding"] for r in records] == [1, 1, 0, 0]
    first = records[0]["blocks"][0]["items"]
    assert first == [{"kind": "number", "text": "4096", "carried_step": 2, "carrier": "action"}]
    assert records[2]["externalized"] == {"action": 1}
    assert records[3]["blocks"][0]["items"][0]["carrier"] == "tool_result" and records[3]["G"] == 0
    assert records[0]["outstanding_items"] == [{"kind": "number", "text": "4096", "step": 0}]


def test_join_rates_by_g_per_task_and_overall():
    records = [{"trajectory": t, "step": s, "G": g} for t, s, g in
               [("a", 0, 1), ("a", 1, 1), ("a", 2, 0), ("a", 3, 0), ("b", 0, 1), ("b", 1, 0), ("b", 2, 0)]]
    labels = {("a", 0): Label(1), ("a", 1): Label(1), ("a", 2): Label(0), ("a", 3): Label(1),
              ("b", 0): Label(0), ("b", 1): Label(0)}  # ("b", 2) unlabelled
    joined = join(records, labels, {"a": "A", "b": "B"}, probe_scores={("a", 0): 0.9, ("a", 2): 0.3, ("b", 1): 0.1})
    a, b = joined.tasks
    assert (a.group, a.n, a.positives, a.rate) == ("A", (2, 2), (1, 2), (0.5, 1.0))
    assert (b.n, b.rate, b.diff) == ((1, 1), (0.0, 0.0), 0.0)
    assert joined.overall.n == (3, 3) and joined.overall.rate == (pytest.approx(1 / 3), pytest.approx(2 / 3))
    assert joined.overall.diff == pytest.approx(1 / 3) and joined.overall.diff_ci is not None
    assert joined.within_task == pytest.approx((0.5 + 0.0) / 2) and joined.within_tasks == 2
    low, high = joined.overall.ci[1]
    assert 0 < low < 2 / 3 < high <= 1
    assert joined.probe == (pytest.approx(0.2), pytest.approx(0.9))


def _write(tmp_path, traj):
    path = tmp_path / f"{traj.id}.iclr.jsonl"
    path.write_text(json.dumps({
        "schema": "iclr.trajectory/1", "id": traj.id,
        "prompt": [{"kind": p.kind, "label": p.label, "text": p.text} for p in traj.prompt],
        "steps": [{"index": s.index, "parts": [{"kind": p.kind, "label": p.label, "text": p.text} for p in s.parts]} for s in traj.steps],
    }) + "\n")
    return path


def test_cli_records_and_rate_table(tmp_path, capsys):
    files = [_write(tmp_path, make(t)) for t in ("t1", "t2")]
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"trajectory": t, "step": s, "label": int(s == 0)}) + "\n" for t in ("t1", "t2") for s in range(3)))
    out = tmp_path / "ext.jsonl"
    code, _, err = run_cli(capsys, "analyze", "externalization", *map(str, files), "--labels", str(labels), "-o", str(out))
    assert code == 0, err
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["G"] for r in records] == [1, 1, 0, 0] * 2 and records[0]["source"] == str(files[0])
    assert "future-behaviour rate by G" in err
    overall = next(line for line in err.splitlines() if line.strip("│ ").startswith("all"))
    # G = 1 after steps 0 and 1 (labels 1, 0), G = 0 after step 2 (label 0), in both files
    assert "2 / 4" in overall and "50.0%" in overall and "0.0%" in overall and "+50.0 pts" in overall
    assert "within-task difference" in err


def test_cli_names_a_bad_labels_line(tmp_path, capsys):
    f = _write(tmp_path, make("t1"))
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"trajectory": "t1", "step": 0, "label": 1}\n{"trajectory": "t1", "step": "x", "label": 1}\n')
    code, _, err = run_cli(capsys, "analyze", "externalization", str(f), "--labels", str(labels))
    assert code == 2 and f"{labels}:2" in err and "'step'" in err


def test_cli_needs_one_label_source(tmp_path, capsys):
    f = _write(tmp_path, make("t1"))
    code, _, err = run_cli(capsys, "analyze", "probe", str(f), "--model", "fake")
    assert code == 2 and "--labels FILE.jsonl, --label heuristic or --label judge" in err


def test_cli_judge_counts_and_names_an_unparsed_answer(tmp_path, capsys):
    f = _write(tmp_path, make("t1"))
    cache = tmp_path / "judge.sqlite3"
    long = "I am not sure what the agent needs here, " * 5
    script = [completion("<think>yes.</think>\n\nYES"), completion(long), completion("NO"), completion("YES")]
    with fake_openai(script) as server:
        args = ("analyze", "externalization", str(f), "--label", "judge", "--judge-model", "qwen3",
                "--judge-base-url", server.url, "--judge-cache", str(cache), "-o", str(tmp_path / "ext.jsonl"))
        code, _, err = run_cli(capsys, *args)
        assert code == 0, err
        err = " ".join(err.split())  # rich wraps long lines
        assert "judge qwen3: 3 question(s), all sent to the judge" in err
        assert "1 of 3 judge answer(s) were neither YES nor NO" in err and "a rerun asks again" in err
        assert "e.g. t1 step 1: 'I am not sure what the agent needs here, I am not sure what the agent needs h...'" in err  # 80 characters
        code, _, err = run_cli(capsys, *args)
        assert code == 0 and "judge qwen3: 3 question(s): 1 sent to the judge, 2 answered from the cache" in " ".join(err.split())
        assert "neither YES nor NO" not in err
        code, _, err = run_cli(capsys, *args)
        assert "judge qwen3: 3 question(s), all answered from the cache" in " ".join(err.split())
    assert len(server.requests) == 4
