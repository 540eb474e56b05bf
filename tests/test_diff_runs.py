"""``iclr diff RUN_A RUN_B``: two replays of one task aligned step by step."""

from __future__ import annotations

import json

import orjson
import pytest

from goldens import assert_golden
from goldens.rundir import RUNS, write_run
from iclr_cli.cli.app import main
from iclr_cli.render import rundiff, runs


def run_cli(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    captured = capsys.readouterr()
    return exc.value.code, captured.out, captured.err


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES"):
        monkeypatch.delenv(name, raising=False)
    return write_run(tmp_path)


def test_first_divergence_and_running_difference(run_dir):
    a = runs.load_record(str(run_dir), task="fix-bug", variant="none")
    b = runs.load_record(str(run_dir / "runs" / "fix-bug" / "iclr" / "seed0" / "trajectory.json"))
    diff = rundiff.align_runs(a, b)
    assert diff.first_divergence == 2
    assert [r.same for r in diff.rows] == [True, True, False, False, False]
    assert diff.rows[2].action_a == 'bash: {"command": "write parser.py"}'
    assert diff.rows[2].action_b == 'bash: {"command": "grep -n regex parser.py"}'
    _, in_a, out_a, _, _ = RUNS[("fix-bug", "none", 0)]
    _, in_b, out_b, _, _ = RUNS[("fix-bug", "iclr", 0)]
    running = 0
    for t, row in enumerate(diff.rows):
        running += (in_b[t] + out_b[t]) - ((in_a[t] + out_a[t]) if t < len(in_a) else 0)
        assert row.running_diff == running
    assert diff.rows[-1].action_a is None and diff.rows[-1].input_a is None
    assert diff.rows[-1].running_diff == (sum(in_b) + sum(out_b)) - (sum(in_a) + sum(out_a))


def test_cli_golden_plain(run_dir, capsys):
    code, out, err = run_cli(["diff", "run@none", "run@iclr", "--task", "fix-bug", "--width", "120"], capsys)
    assert code == 0, err
    assert "first divergent action: step 2" in out
    assert_golden("rundiff_plain.txt", out)


def test_cli_json_from_trajectory_files(run_dir, capsys):
    code, out, _ = run_cli(["diff", "run/runs/csv-sum/none/seed0/trajectory.json", "run/runs/csv-sum/iclr/seed0", "--json"], capsys)
    assert code == 0
    doc = orjson.loads(out)
    assert doc["first_divergence"] is None and doc["same_task"] is True
    assert [s["running_diff"] for s in doc["steps"]] == [0, -90]
    assert doc["a"]["variant"] == "none" and doc["b"]["variant"] == "iclr"


def test_ambiguous_run_folder_names_the_matches(run_dir, capsys):
    code, _, err = run_cli(["diff", "run", "run@iclr", "--task", "fix-bug"], capsys)
    assert code == 2
    assert "3 replay records match (fix-bug/none/0, fix-bug/iclr/0, fix-bug/delete-all/0)" in err


def test_bad_results_record_names_line_and_field(run_dir, capsys):
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    rec = json.loads(lines[1])
    rec["input_tokens"] = "many"
    lines[1] = json.dumps(rec)
    (run_dir / "results.jsonl").write_text("\n".join(lines) + "\n")
    code, _, err = run_cli(["report", "run"], capsys)
    assert code == 2
    assert "results.jsonl:2: field 'input_tokens': expected a number or null, got str" in err


def test_bad_request_log_names_line_and_field(run_dir, capsys):
    (run_dir / "runs" / "csv-sum" / "iclr" / "seed0" / "requests.jsonl").write_text('{"step": 0, "input_tokens": 1, "output_tokens": 2}\n{"step": 1, "input_tokens": 1.5}\n')
    code, _, err = run_cli(["diff", "run@none", "run@iclr", "--task", "csv-sum"], capsys)
    assert code == 2
    assert "requests.jsonl:2: field 'input_tokens': expected an integer or null, got float" in err


def test_long_first_divergent_action_is_clipped_in_the_header_only():
    from iclr_cli.render import rundiff_view

    side = rundiff.RunSide("t/none/seed 0", "t", "none", 0, 0.0, "submitted", 1, 10, 5)
    row = rundiff.RunStepRow(0, "bash: " + "x" * 500, "bash: y", False, 10, 5, 10, 5, 0)
    diff = rundiff.RunDiff(side, side, True, 0, (row,))
    console = rundiff_view.Console(width=100, file=__import__("io").StringIO())
    with console.capture() as cap:
        console.print(rundiff_view.render(diff))
    header = cap.get().split("step ┃")[0]
    assert "x" * 233 + "\u2026" in header.replace("\n", "") and "x" * 235 not in header.replace("\n", "")
    assert rundiff.to_json(diff)["steps"][0]["action_a"] == "bash: " + "x" * 500
