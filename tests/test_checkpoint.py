"""Ctrl-C on a long single-file ``score`` or ``prune`` loses nothing: every scored step is kept
in a checkpoint and the same command resumes from it; a changed input or setting starts over
and says why; a finished run leaves no checkpoint."""

import json

import pytest

from format_helpers import run_cli
from iclr_cli import pipeline
from iclr_cli.checkpoint import report_from, report_json
from iclr_cli.compress import BlockReport, StepReport
from iclr_cli.token_accounting import ReasoningTokens


def chat(steps=8, tag=""):
    msgs = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": f"Fix the bug{tag}."}]
    for k in range(steps):
        thought = "\n\n".join(f"Step {k} idea {i}: check module_{k}_{i} for the off-by-one in loop {i * k}." for i in range(4))
        msgs += [{"role": "assistant", "reasoning_content": thought, "content": "",
                  "tool_calls": [{"id": f"c{k}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"cmd": f"ls {k}"})}}]},
                 {"role": "tool", "tool_call_id": f"c{k}", "content": f"file_{k}.py"}]
    return msgs


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    """This test's checkpoint folder ($ICLR_CHECKPOINT_DIR; the default is the user cache's
    ``checkpoints``)."""
    folder = tmp_path / "checkpoints"
    monkeypatch.setenv("ICLR_CHECKPOINT_DIR", str(folder))
    return folder


class Counting:
    """The fake scorer, counting steps scored, that raises KeyboardInterrupt (as Ctrl-C does)
    on its ``stop_at``-th call."""

    def __init__(self, scorer, stop_at=None):
        self.scorer, self.stop_at, self.calls, self.steps = scorer, stop_at, 0, 0

    def __getattr__(self, name):
        return getattr(self.scorer, name)

    def score(self, requests):
        self.calls += 1
        if self.stop_at is not None and self.calls == self.stop_at:
            raise KeyboardInterrupt
        self.steps += len(requests)
        return self.scorer.score(requests)


@pytest.fixture
def scorer(monkeypatch):
    """Patches the engines every command builds; returns a function setting the next run's
    interrupt (``None``: run to the end) and giving the scorer of the last run."""
    built = []
    real = pipeline.build_engines
    plan = {"stop_at": None}

    def build(variant, config):
        s, tokenizer = real(variant, config)
        wrapped = Counting(s, plan["stop_at"]) if s is not None else None
        built.append(wrapped)
        return wrapped, tokenizer

    monkeypatch.setattr(pipeline, "build_engines", build)

    def next_run(stop_at=None):
        plan["stop_at"] = stop_at
        return built

    return next_run


def checkpoints(folder):
    return sorted(p.name for p in folder.glob("*.sqlite3")) if folder.is_dir() else []


@pytest.mark.parametrize("command", ["score", "prune"])
def test_an_interrupted_run_resumes_with_the_same_command_and_writes_the_same_output(tmp_path, capsys, scorer, cache_dir, command):
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(chat()))
    built = scorer(None)
    code, _, err = run_cli(capsys, command, str(path), "--model", "fake", "-o", str(tmp_path / "reference"))
    assert code == 0, err
    assert built[-1].steps == 8 and checkpoints(cache_dir) == []  # a finished run keeps no checkpoint
    out = tmp_path / "out"
    scorer(stop_at=4)  # Ctrl-C while the 4th step is scored: 3 steps are finished
    code, _, err = run_cli(capsys, command, str(path), "--model", "fake", "-o", str(out))
    assert code == 130 and not out.exists()
    assert "; 3 scored steps kept: the same command resumes from them" in err.strip().splitlines()[-1]
    assert len(checkpoints(cache_dir)) == 1
    scorer(None)
    code, _, err = run_cli(capsys, command, str(path), "--model", "fake", "-o", str(out))
    assert code == 0, err
    assert "resuming: 3 steps already scored by the unfinished run" in err
    assert built[-1].steps == 5  # only the steps the interrupted run had not finished
    assert out.read_bytes() == (tmp_path / "reference").read_bytes()
    assert checkpoints(cache_dir) == []


def test_a_changed_input_or_setting_starts_over_and_says_why(tmp_path, capsys, scorer, cache_dir):
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(chat()))
    out = str(tmp_path / "scores.jsonl")
    scorer(stop_at=3)
    assert run_cli(capsys, "score", str(path), "--model", "fake", "-o", out)[0] == 130
    built = scorer(None)
    code, _, err = run_cli(capsys, "score", str(path), "--model", "fake", "--ratio", "0.3", "-o", out)
    assert code == 0 and "the settings changed since the unfinished run (ratio): starting over" in err
    assert built[-1].steps == 8
    scorer(stop_at=3)
    assert run_cli(capsys, "score", str(path), "--model", "fake", "-o", out)[0] == 130
    path.write_text(json.dumps(chat(tag=" now")))  # the input edited in between
    scorer(None)
    code, _, err = run_cli(capsys, "score", str(path), "--model", "fake", "-o", out)
    assert code == 0 and "the input changed since the unfinished run: starting over" in err
    assert built[-1].steps == 8 and checkpoints(cache_dir) == []


def test_a_run_that_fails_before_scoring_a_step_keeps_no_checkpoint(tmp_path, capsys, scorer, cache_dir):
    """Nothing to resume: the next run must not hear of an interrupted one."""
    scorer(stop_at=1)  # interrupted while the first step is scored: no step finished
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(chat()))
    assert run_cli(capsys, "score", str(path), "--model", "fake", "-o", str(tmp_path / "s.jsonl"))[0] == 130
    assert checkpoints(cache_dir) == []
    scorer(None)
    bad = tmp_path / "bad.json"  # the first message is read, the second fails: an input error mid-read
    bad.write_text(json.dumps([{"role": "user", "content": "q"}, {"content": "", "reasoning_content": 5}]))
    code, _, err = run_cli(capsys, "score", str(bad), "--model", "fake", "-o", str(tmp_path / "b.jsonl"))
    assert code == 2 and checkpoints(cache_dir) == []
    code, _, err = run_cli(capsys, "score", str(path), "--model", "fake", "-o", str(tmp_path / "s.jsonl"))
    assert code == 0 and "unfinished run" not in err


def test_variants_that_score_nothing_keep_no_checkpoint(tmp_path, capsys, scorer, cache_dir):
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(chat(2)))
    code, _, _ = run_cli(capsys, "prune", str(path), "--model", "fake", "--variant", "delete-all", "-o", str(tmp_path / "o.json"))
    assert code == 0 and not cache_dir.exists()


def test_a_step_report_round_trips_exactly():
    report = StepReport("t", 3, (BlockReport(0, 0, "a", True, 12, 3.141592653589793), BlockReport(1, 0, "b", False, 7, 0.1 + 0.2)),
                        ReasoningTokens(19, 12, 7, 12, 1, 3), None, True, 2, 4096, "sliding", 128)
    assert report_from(json.loads(json.dumps(report_json(report)))) == report


def test_the_checkpoint_folder_defaults_to_the_user_cache(tmp_path, monkeypatch):
    from iclr_cli.checkpoint import Checkpoint

    monkeypatch.delenv("ICLR_CHECKPOINT_DIR")
    monkeypatch.setenv("ICLR_CACHE_DIR", str(tmp_path / "cache"))
    checkpoint = Checkpoint.open("score", ["a.json"], None, [b"{}"], {"ratio": 0.5})
    assert checkpoint.path.parent == tmp_path / "cache" / "checkpoints"
    checkpoint.close(finished=True)
    assert list((tmp_path / "cache" / "checkpoints").iterdir()) == []


def test_a_step_with_a_lone_surrogate_is_kept_and_given_back(tmp_path):
    """A transcript can hold a lone surrogate (tests/test_faults.py); the checkpoint keeps it."""
    from iclr_cli.checkpoint import Checkpoint

    checkpoint = Checkpoint.open("score", ["a.json"], None, [b"{}"], {"ratio": 0.5}, root=tmp_path)
    report = StepReport("t", 0, (BlockReport(0, 0, "odd \ud800 text", True, 3, 2.5),), ReasoningTokens(3, 0, 0, 3, 0, 0))
    checkpoint.put("a.json", "t", 0, ["odd \ud800 text"], report)
    assert checkpoint.get("a.json", "t", 0) == (["odd \ud800 text"], report)
    checkpoint.close(finished=True)
