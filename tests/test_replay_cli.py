"""``iclr replay`` from the command line (a subprocess against the scripted server)."""

from __future__ import annotations

import json
import subprocess
import sys

from replay_fixtures import REPO, call, completion, fake_openai, submit


def iclr(*args, env=None):
    return subprocess.run([sys.executable, "-m", "iclr_cli", *args], capture_output=True, text=True, cwd=REPO, env=env, timeout=120)


def test_list_tasks_one_per_line_name_domain_description():
    proc = iclr("replay", "--list-tasks")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) >= 12
    name, domain, *desc = lines[0].split()
    assert (name, domain) == ("code-median", "code") and desc
    assert {line.split()[1] for line in lines} == {"code", "office", "security", "web"}


def test_usage_errors_exit_2():
    proc = iclr("replay", "--task", "code-median", "--out", "/tmp/x")
    assert proc.returncode == 2 and "missing --variant, --model, --base-url" in proc.stderr
    proc = iclr("replay", "--task", "nope", "--variant", "none", "--model", "m", "--base-url", "http://127.0.0.1:9", "--out", "/tmp/x")
    assert proc.returncode == 2 and "unknown task 'nope'" in proc.stderr
    proc = iclr("replay", "--task", "code-median", "--variant", "random-x", "--model", "m", "--base-url", "http://127.0.0.1:9", "--out", "/tmp/x", "--proxy-model", "fake")
    assert proc.returncode == 2 and "unknown variant 'random-x'" in proc.stderr


def _reply(body, index):
    if any(m["role"] == "tool" for m in body["messages"]):
        return submit("149.99")
    return completion(None, [call("bash", {"command": "echo looking"})], reasoning_content="Look.\n\nThen answer.")


def test_run_then_resume_then_summary(tmp_path):
    out = tmp_path / "out"
    args = ["replay", "--task", "web-product-price", "--variant", "none", "--variant", "delete-all", "--model", "m",
            "--proxy-model", "fake", "--out", str(out), "--max-retries", "0"]
    with fake_openai([_reply] * 20) as srv:
        proc = iclr(*args, "--base-url", srv.url)
        assert proc.returncode == 0, proc.stderr
        assert len(srv.requests) == 4
        again = iclr(*args, "--base-url", srv.url)
        assert again.returncode == 0 and "2 finished run(s)" in again.stderr
        assert len(srv.requests) == 4
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["variant"] for r in records) == ["delete-all", "none"]
    assert all(r["reward"] == 1.0 for r in records)
    summary = json.loads((out / "summary.json").read_text())
    assert [row["variant"] for row in summary] == ["none", "delete-all"]
    assert summary[1]["ties"] == 1
    import os

    proc = iclr("replay", "--summary", "--out", str(out), env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    row = next(line for line in proc.stderr.splitlines() if "delete-all" in line)
    assert "amplification" in proc.stderr and "0/1/0" in row
    legend = " ".join(proc.stderr.split())
    assert "amplification: change in total API tokens (input + output) against 'none' / reasoning tokens removed (proxy tokens)" in legend
    assert "--proxy-model fake counts whitespace runs as tokens" in legend


def test_a_resume_with_another_ratio_or_block_split_is_warned(tmp_path):
    from iclr_cli.replay.session import _note_settings

    warnings = []
    output = type("Out", (), {"warn": lambda self, m: warnings.append(m)})()
    first = {"model": "m", "proxy_model": "fake", "ratio": 0.8, "block_split": "paragraph"}
    _note_settings(output, tmp_path, first)
    _note_settings(output, tmp_path, dict(first))
    assert warnings == []
    _note_settings(output, tmp_path, {**first, "ratio": 0.5, "block_split": "line"})
    assert len(warnings) == 1 and "block_split='paragraph'" in warnings[0] and "ratio=0.8" in warnings[0]
