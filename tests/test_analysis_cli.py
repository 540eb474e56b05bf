"""``iclr analyze`` on replay output folders and folders of files, and ``probe`` end to end."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from format_helpers import run_cli
from replay_fixtures import REPO, call, completion, fake_openai, submit
from tiny_llama import make_trajs, tiny_dir  # noqa: F401

from iclr_cli.analysis.inputs import read_paths


def _reply(body, index):
    done = sum(m["role"] == "tool" for m in body["messages"])
    if done >= 3:
        return submit("149.99")
    return completion(None, [call("bash", {"command": f"echo step{done}"})],
                      reasoning_content=f"The price cap is cap_{done}x7 for now.\n\nCheck page {done}.\n\nThen answer.")


@pytest.fixture(scope="module")
def replay_dir(tmp_path_factory):
    """A replay of one task with the none and iclr-ext variants against the scripted server."""
    out = tmp_path_factory.mktemp("replay") / "out"
    with fake_openai([_reply] * 40) as srv:
        proc = subprocess.run([sys.executable, "-m", "iclr_cli", "replay", "--task", "web-product-price", "--variant", "none",
                               "--variant", "iclr-ext", "--model", "m", "--proxy-model", "fake", "--out", str(out),
                               "--max-retries", "0", "--base-url", srv.url], capture_output=True, text=True, cwd=REPO, timeout=180)
    assert proc.returncode == 0, proc.stderr
    return out


def test_replay_iclr_ext_keeps_the_unexternalized_block(replay_dir):
    saved = json.loads((replay_dir / "runs/web-product-price/iclr-ext/seed0/trajectory.json").read_text())
    messages = saved["messages"] if isinstance(saved, dict) else saved
    reasoning = [m.get("reasoning_content") for m in messages if m.get("role") == "assistant" and m.get("reasoning_content") is not None]
    assert len(reasoning) >= 3
    # each step: block 0 coins cap_Nx7 (never externalized) and stays; blocks 1-2 may go (floor(0.8 * 3) = 2)
    for text in reasoning[:3]:
        assert "cap_" in text and text.count("[SKIP]") == 2


def test_a_replay_folder_reads_each_runs_trajectory(replay_dir):
    read = read_paths([str(replay_dir)])
    assert sorted(s.trajectory.id for s in read.sources) == ["web-product-price/iclr-ext/seed0", "web-product-price/none/seed0"]
    assert {s.task for s in read.sources} == {"web-product-price"} and read.passed_over == []
    assert read.sources[0].group("auto") == "web-product-price"


def test_externalization_and_patch_on_a_replay_folder(replay_dir, tiny_dir, tmp_path, capsys):  # noqa: F811
    code, out, err = run_cli(capsys, "analyze", "externalization", str(replay_dir), "--label", "heuristic")
    assert code == 0, err
    records = [json.loads(line) for line in out.splitlines()]
    none = [r for r in records if r["trajectory"] == "web-product-price/none/seed0"]
    assert none[0]["G"] == 1 and {"kind": "identifier", "text": "cap_0x7", "step": 0} in none[0]["outstanding_items"]
    assert "web-product-price" in err and "future-behaviour rate by G" in err
    code, out, err = run_cli(capsys, "analyze", "patch", str(replay_dir), "--model", str(tiny_dir), "--max-tokens", "512", "--layers", "-1")
    assert code == 0, err
    patched = [json.loads(line) for line in out.splitlines()]
    assert {r["trajectory"] for r in patched} == {"web-product-price/none/seed0", "web-product-price/iclr-ext/seed0"}
    assert all(r["repair"] == pytest.approx(1.0, abs=1e-6) for r in patched if r["layer"] is not None)


def test_a_folder_passes_over_other_files_with_a_warning(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("not a trajectory")
    (tmp_path / "a.iclr.jsonl").write_text((REPO / "sample_trajectories/canonical.iclr.jsonl").read_text())
    code, out, err = run_cli(capsys, "analyze", "externalization", str(tmp_path))
    assert code == 0, err
    assert "passed over 1 file(s)" in err and "notes.txt" in err and out.strip()
    assert "notes.txt (not JSON or JSONL: line 1 is text ('not a trajectory'), not a JSON object or list" in " ".join(err.split())


def test_probe_end_to_end_with_a_labels_file(tiny_dir, tmp_path, capsys):  # noqa: F811
    pytest.importorskip("sklearn")
    files = []
    for i, traj in enumerate(make_trajs(n_traj=4, n_steps=5, seed=11)):
        path = tmp_path / f"task{i}.iclr.jsonl"
        path.write_text(json.dumps({
            "schema": "iclr.trajectory/1", "id": traj.id,
            "prompt": [{"kind": p.kind, "label": p.label, "text": p.text} for p in traj.prompt],
            "steps": [{"index": s.index, "parts": [{"kind": p.kind, "label": p.label, "text": p.text} for p in s.parts]} for s in traj.steps],
        }) + "\n")
        files.append(str(path))
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"trajectory": f"traj-{i}", "step": s, "label": (s + i) % 2}) + "\n" for i in range(4) for s in range(4)))
    out = tmp_path / "probe.json"
    code, _, err = run_cli(capsys, "analyze", "probe", *files, "--labels", str(labels), "--model", str(tiny_dir),
                           "--max-tokens", "512", "--outer-folds", "4", "--inner-folds", "2", "-o", str(out))
    assert code == 0, err
    report = json.loads(out.read_text())
    assert (report["n_boundaries"], report["n_tasks"], report["n_positives"]) == (16, 4, 8)
    assert report["label_source"] == f"file {labels}" and len(report["folds"]) == 4
    for fold in report["folds"]:
        assert len(fold["held_out"]) == 1 and fold["selected"]["pooling"] in ("boundary", "reasoning", "last64")
    assert {p["fold"] for p in report["predictions"]} == {0, 1, 2, 3}
    assert 0.0 <= report["metrics"]["auroc"]["value"] <= 1.0
    assert "what each outer fold selected" in err and "16 boundaries from 4 tasks" in err
    # the title fits on one line; which line it is depends on how many progress lines the timer
    # printed before it (one every 30 s, so a loaded machine prints some first)
    assert any("probe on held-out tasks" in line for line in err.splitlines())
    # 4 tasks: the estimate is said to be too weak to mean much, in the report and on stderr
    assert report["caveats"][0].startswith("only 4 tasks: too few for the estimate to mean much")
    assert "warning: only 4 tasks: too few" in " ".join(err.split())
    layers = {fold["selected"]["layer"] for fold in report["folds"]}
    assert any(c.startswith("the chosen layer changed between outer folds") for c in report["caveats"]) == (len(layers) > 1)
    assert f"labels: file {labels};" in " ".join(err.split())


def test_probe_help_says_what_its_seed_seeds(capsys):
    code, out, _ = run_cli(capsys, "analyze", "probe", "--help")
    text = " ".join(out.split())
    assert code == 0 and "Seed of the bootstrap intervals and of PCA's randomized solver" in text
    assert "random-R" not in text


def _messages(i):
    msgs = [{"role": "user", "content": "Find the price."}]
    for s in range(3):
        msgs.append({"role": "assistant", "content": None, "reasoning_content": f"Guess rate_{i}_{s} first.\n\nThen look.",
                     "tool_calls": [{"id": f"c{s}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": f"ls {s}"})}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{s}", "content": f"out {s}"})
    msgs.append({"role": "assistant", "content": "done"})
    return msgs


def test_externalization_reads_a_dataset_with_its_task_column(tmp_path, capsys):
    pytest.importorskip("datasets")
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"id": f"r{i}", "task": f"T{i % 2}", "messages": _messages(i)}) + "\n" for i in range(4)))
    code, out, err = run_cli(capsys, "analyze", "externalization", "--dataset", str(data), "--task-column", "task", "--label", "heuristic")
    assert code == 0, err
    records = [json.loads(line) for line in out.splitlines()]
    assert sorted({r["trajectory"] for r in records}) == ["0:r0", "1:r1", "2:r2", "3:r3"]
    assert all(r["G"] == 1 for r in records if r["step"] < 3)  # rate_i_s never leaves the reasoning
    assert "T0" in err and "T1" in err
    code, _, err = run_cli(capsys, "analyze", "externalization", "--dataset", str(data), "--task-column", "nope")
    assert code == 2 and "no column 'nope'" in err
