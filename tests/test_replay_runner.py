"""The matrix: atomic records, resume, torn lines, interruption, threads, saved trajectories."""

from __future__ import annotations

import json
import threading

import pytest

from replay_fixtures import call, completion, fake_openai, make_session, submit

from iclr_cli.inputs import load_file
from iclr_cli.replay.runner import ResultsLog
from iclr_cli.replay.suite import load_tasks

REASONING = "First block.\n\nSecond block.\n\nThird block."


@pytest.fixture
def tasks(tmp_path):
    for name in ("alpha", "beta"):
        folder = tmp_path / "tasks" / name
        folder.mkdir(parents=True)
        (folder / "task.toml").write_text(f'domain = "code"\ndescription = "{name}"\ninstruction = "Do {name}."\n')
        (folder / "check.py").write_text("def check(ctx):\n    return 0.5 if ctx.submission == 'yes' else 0.0\n")
    return load_tasks(tmp_path / "tasks")


def _reply(body, index):
    """Step 1: a bash call with reasoning; step 2: submit 'yes' (per conversation)."""
    if any(m["role"] == "tool" for m in body["messages"]):
        return submit("yes")
    return completion(None, [call("bash", {"command": "echo step"})], reasoning_content=REASONING)


def _records(out):
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_matrix_records_and_resume_skips_finished(tmp_path, tasks):
    with fake_openai([_reply] * 100) as srv:
        make_session(tmp_path, srv.url, tasks=tasks, variants=["none"], seeds=2).run(1)
        assert len(srv.requests) == 2 * 2 * 2
        session = make_session(tmp_path, srv.url, tasks=tasks, variants=["none", "delete-all"], seeds=2)
        assert (session.skipped, len(session.specs)) == (4, 4)
        assert {s.variant for s in session.specs} == {"delete-all"}
        session.run(2)
        assert len(srv.requests) == 16
    records = _records(tmp_path / "out")
    assert sorted((r["task"], r["variant"], r["seed"]) for r in records) == sorted(
        (t, v, s) for t in ("alpha", "beta") for v in ("none", "delete-all") for s in (0, 1)
    )
    assert all(r["reward"] == 0.5 and r["status"] == "submitted" for r in records)
    with fake_openai([]) as srv:
        assert make_session(tmp_path, srv.url, tasks=tasks, variants=["none", "delete-all"], seeds=2).run(1) == 0
        assert srv.requests == []


def test_torn_last_line_is_cut_and_its_run_redone(tmp_path, tasks):
    with fake_openai([_reply] * 100) as srv:
        make_session(tmp_path, srv.url, tasks=tasks[:1], variants=["none"]).run(1)
        path = tmp_path / "out" / "results.jsonl"
        good = path.read_bytes()
        path.write_bytes(good + b'{"task": "beta", "variant": "none", "se')  # crash mid-write
        session = make_session(tmp_path, srv.url, tasks=tasks, variants=["none"])
        assert path.read_bytes() == good
        assert [s.task.name for s in session.specs] == ["beta"]
        session.run(1)
    assert [r["task"] for r in _records(tmp_path / "out")] == ["alpha", "beta"]


def test_interrupted_runs_write_nothing_and_rerun_on_resume(tmp_path, tasks):
    from iclr_cli.replay import runner

    stop = threading.Event()

    def stopping(body, index):
        stop.set()  # Ctrl-C arrives while the first request is in flight
        return _reply(body, index)

    with fake_openai([stopping] + [_reply] * 50) as srv:
        session = make_session(tmp_path, srv.url, tasks=tasks[:1], variants=["none"])
        record = runner.run_one(session.specs[0], session.client, session.compressors["none"], session.config, stop)
        assert record is None
        assert len(srv.requests) == 1
        session.log.close()
        again = make_session(tmp_path, srv.url, tasks=tasks[:1], variants=["none"])
        assert len(again.specs) == 1
        again.run(1)
    assert [r["status"] for r in _records(tmp_path / "out")] == ["submitted"]


def test_retry_errors_reruns_error_records(tmp_path, tasks):
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.jsonl").write_text(json.dumps({"task": "alpha", "variant": "none", "seed": 0, "status": "error", "reward": 0.0}) + "\n")
    with fake_openai([_reply] * 10) as srv:
        assert make_session(tmp_path, srv.url, tasks=tasks[:1], variants=["none"]).specs == []
        session = make_session(tmp_path, srv.url, tasks=tasks[:1], variants=["none"], retry_errors=True)
        assert len(session.specs) == 1
        session.run(1)
    assert [r["status"] for r in _records(out)] == ["error", "submitted"]


def test_saved_trajectories_read_back_with_the_openai_adapter(tmp_path, tasks):
    with fake_openai([_reply] * 10) as srv:
        make_session(tmp_path, srv.url, tasks=tasks[:1], variants=["delete-all"]).run(1)
    [record] = _records(tmp_path / "out")
    adapter, doc = load_file(str(tmp_path / "out" / record["trajectory"]), None, skip_bad_lines=False)
    [traj] = doc.trajectories
    assert adapter.name == "openai"
    assert len(traj.steps) == record["steps"] == 2
    assert traj.steps[0].reasoning[0].text == ""
    _, gen = load_file(str(tmp_path / "out" / record["generated"]), None, skip_bad_lines=False)
    assert gen.trajectories[0].steps[0].reasoning[0].text == REASONING
    # P as the proxy saw it online: the tool definitions saved beside the messages are read back
    assert [p.label for p in traj.prompt] == ["system", "tools", "user"]


def test_results_log_appends_whole_lines(tmp_path):
    log = ResultsLog(tmp_path / "r.jsonl")
    threads = [threading.Thread(target=log.append, args=({"task": f"t{i}", "variant": "v", "seed": 0, "x": "y" * 5000},)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    log.close()
    lines = (tmp_path / "r.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["task"] for line in lines) == sorted(f"t{i}" for i in range(20))
