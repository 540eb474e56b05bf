"""``iclr savings`` hands the scorer only steps whose selection depends on the scores: never
sealed reasoning (signed or encrypted, which no variant may edit), never a step of one block;
its first lines say the sealed share, the upper bound and the steps to score, and its progress
total is final from the start."""

import json

import pytest

from format_helpers import run_cli
from iclr_cli.inputs import load_file
from iclr_cli.compress import Settings, prepare_step, will_score
from iclr_cli.pipeline import ScorerConfig
from iclr_cli.policies import parse_variant
from iclr_cli.savings.cache import SavingsCache
from iclr_cli.savings.run import Options, SavingsRun
from iclr_cli.scoring.fake import FakeScorer

# regex tokens (--model fake): "one two\n\nthree four\n\nfive six\n\nseven eight" is 15 tokens
# (8 words, 4 spaces, 3 blank lines), 4 paragraph blocks; "one two\n\nthree four" 7, 2 blocks.
FOUR = "one two\n\nthree four\n\nfive six\n\nseven eight"
TWO = "one two\n\nthree four"


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ICLR_CACHE_DIR", str(tmp_path / "cache"))


def claude(session, signatures):
    """A Claude Code session: one assistant message per signature (``""``: unsigned thinking),
    each with thinking :data:`FOUR` (the sealed step 0 of ``mixed`` says SEALED) and a tool call."""
    def line(kind, uuid, parent, message):
        return {"type": kind, "sessionId": session, "uuid": uuid, "parentUuid": parent, "timestamp": "2025-05-01T10:00:00Z", "message": message}

    lines = [line("user", "u0", None, {"role": "user", "content": "Fix the bug"})]
    for k, sig in enumerate(signatures):
        text = FOUR.replace("one", "SEALED") if sig else FOUR
        lines.append(line("assistant", f"a{k}", f"u{k}", {
            "id": f"msg_{k}", "role": "assistant", "model": "claude-test",
            "content": [{"type": "thinking", "thinking": text, "signature": sig},
                        {"type": "tool_use", "id": f"t{k}", "name": "Bash", "input": {"command": "ls"}}],
            "usage": {"input_tokens": 100 * (k + 1), "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 9}}))
        lines.append(line("user", f"u{k + 1}", f"a{k}", {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{k}", "content": "a.py"}]}))
    return "".join(json.dumps(v) + "\n" for v in lines)


PLAIN = [
    {"role": "system", "content": "Sys"},
    {"role": "user", "content": "Task"},
    {"role": "assistant", "reasoning_content": TWO, "content": "A0"},
    {"role": "user", "content": "ok"},
    {"role": "assistant", "reasoning_content": TWO, "content": "A1"},
    {"role": "user", "content": "ok"},
    {"role": "assistant", "reasoning_content": "zeta", "content": "A2"},
]


@pytest.fixture
def folder(tmp_path):
    """``sealed.jsonl``: 3 steps, all signed (sealed); ``mixed.jsonl``: step 0 signed, steps 1-2
    unsigned (scored); ``plain.json``: steps 0-1 of two blocks (scored), step 2 of one."""
    root = tmp_path / "f"
    root.mkdir()
    (root / "mixed.jsonl").write_text(claude("mixed", ["c2ln", "", ""]))
    (root / "plain.json").write_text(json.dumps(PLAIN))
    (root / "sealed.jsonl").write_text(claude("sealed", ["c2ln"] * 3))
    return root


@pytest.fixture
def counting(monkeypatch):
    """The fake scorer, keeping every request it is handed."""
    import iclr_cli.savings.run as run

    scorer = FakeScorer(record_requests=True)
    monkeypatch.setattr(run, "build_engines", lambda variant, config: (scorer, scorer.tokenizer))
    return scorer


def test_sealed_reasoning_and_one_block_steps_are_never_scored(folder, counting, capsys):
    code, out, err = run_cli(capsys, "savings", str(folder), "--model", "fake", "--json", "--no-cache")
    assert code == 0, err
    seen = [(r.stream, r.step.count("[reasoning]")) for r in counting.requests_seen]
    # mixed steps 1 and 2, plain steps 0 and 1: nothing of the sealed session, no one-block step
    assert sorted(r.stream for r in counting.requests_seen) == ["mixed", "mixed", "plain.json#0", "plain.json#0"]
    assert all(n == 1 for _, n in seen)
    # the sealed step 0 of mixed is still read as context of the steps scored after it
    mixed = [r for r in counting.requests_seen if r.stream == "mixed"]
    assert all("SEALED two" in "".join(r.history) for r in mixed)
    assert not any("SEALED" in r.step for r in counting.requests_seen)
    report = json.loads(out)
    assert report["scoring"] == {"files": 3, "steps": 9, "scored": 4, "tokens": report["scoring"]["tokens"], "sealed": 4,
                                 "one_block": 1, "compressed": 0, "files_cached": 0}
    # the sealed column is every sealed token re-sent, whatever the variant: the same as delete-all's
    sealed = {s["session"]: s["sealed_tokens"] for s in report["data"]}
    # sealed: request k re-sends steps 0..k-1, 15 tokens each: 0 + 15 + 30; mixed: step 0's 15 twice
    assert sealed == {"mixed": 30, "plain.json#0": 0, "sealed": 45}
    assert report["reasoning"] == {"reasoning_tokens": 105, "sealed_tokens": 60, "sealed_by_kind": {"anthropic": 60},
                                   "sealed_percent": pytest.approx(100 * 60 / 105)}


def test_first_lines_say_the_sealed_share_the_upper_bound_and_the_steps_to_score(folder, counting, capsys):
    code, out, err = run_cli(capsys, "savings", str(folder), "--model", "fake", "--no-cache")
    assert code == 0, err
    lines = err.splitlines()
    assert lines[0] == (
        "reasoning: 105 proxy tokens in 3 sessions, sealed by the provider rule: 60 (57.1%) (anthropic signed thinking 60): "
        "its provider takes it back only as generated (signature / encrypted_content), so no variant may edit it; it is not "
        "scored, only read as context, and the notes give each provider's rule")
    # the upper bound is delete-all's estimate, said before anything is scored
    code, bound_out, _ = run_cli(capsys, "savings", str(folder), "--model", "fake", "--no-cache", "--json", "--variant", "delete-all")
    bound = json.loads(bound_out)["summary"]
    before, after = bound["input_tokens"], bound["input_tokens_with_writeback"]
    assert before > after
    assert lines[1].startswith("upper bound (--variant delete-all: every editable reasoning block removed; tokenizer only, ")
    assert lines[1].endswith(f" to read and count every file): input {before:,} -> {after:,} ({-100 * (before - after) / before:.1f}%) tokens")
    assert lines[2].startswith("scoring 4 of 9 steps in 3 files (")
    assert lines[2].endswith(" proxy tokens to read); not scored: 4 whose reasoning is all sealed, 1 whose selection cannot "
                             "depend on the scores (one block: BottomK removes none)")
    # a second run serves all three files and the bound from the cache, and says so
    code, _, err = run_cli(capsys, "savings", str(folder), "--model", "fake")
    code, _, err = run_cli(capsys, "savings", str(folder), "--model", "fake")
    assert err.splitlines()[2] == ("nothing to score in 0 files (0 steps); not scored: 0 whose reasoning is all sealed, 0 whose "
                                   "selection cannot depend on the scores (one block: BottomK removes none); 3 files from the cache")


class Recorder:
    """A progress that records the calls it gets, in order."""

    def __init__(self):
        self.calls = []

    def plan(self, steps, tokens, rows=0):
        self.calls.append(("plan", steps, tokens))

    def step(self, tokens):
        self.calls.append(("step", tokens))

    def growing(self, value):
        self.calls.append(("growing", value))


def test_progress_total_is_final_from_the_start(folder, counting):
    run = SavingsRun(Options(Settings(parse_variant("iclr"), score_all=False), ScorerConfig(model="fake")), SavingsCache(None))
    run.prepare(run.discover([str(folder)]))
    assert (run.plan.scored, run.plan.steps) == (4, 9)
    assert counting.requests_seen == []  # nothing is scored before the plan is known
    run.progress = recorder = Recorder()
    run.score()
    # told once, before the first step: four steps of the planned tokens, which never grow
    assert recorder.calls[:2] == [("growing", False), ("plan", 4, run.plan.tokens)]
    steps = recorder.calls[2:]
    assert [c[0] for c in steps] == ["step"] * 4 == ["step"] * len(counting.requests_seen)
    assert sum(c[1] for c in steps) == run.plan.tokens > 0
    # the sessions come out in discovery order (the sealed file was estimated first)
    assert [s.id for s in run.sessions] == ["mixed", "plain.json#0", "sealed"]


def test_time_left_is_shown_from_the_first_scored_step(folder, counting):
    from iclr_cli.render.progress import Tracker

    now = [0.0]
    run = SavingsRun(Options(Settings(parse_variant("iclr"), score_all=False), ScorerConfig(model="fake")), SavingsCache(None))
    run.prepare(run.discover([str(folder)]))
    tracker = Tracker("savings (iclr): scoring", clock=lambda: now[0])
    lines = []
    real_step = tracker.step

    def step(tokens):
        now[0] += 10.0
        real_step(tokens)
        lines.append(tracker.line())

    tracker.step = step
    run.progress = tracker
    run.score()
    total = run.plan.tokens
    assert lines[0].startswith("savings (iclr): scoring: 1/4 steps, ")
    assert all(f"/{total:,} tokens" in line and "+" not in line for line in lines)
    assert " left" in lines[0] and lines[-1].endswith("about 0 s left")


def test_nothing_to_score_loads_no_model(tmp_path, monkeypatch, capsys):
    import iclr_cli.savings.run as run

    def no_model(*_a, **_k):
        raise AssertionError("the model was loaded with nothing to score")

    monkeypatch.setattr(run, "build_engines", no_model)
    (tmp_path / "sealed.jsonl").write_text(claude("sealed", ["c2ln"] * 3))
    code, out, err = run_cli(capsys, "savings", str(tmp_path / "sealed.jsonl"), "--model", "fake", "--json", "--no-cache")
    assert code == 0, err
    assert "nothing to score in 1 file (3 steps); not scored: 3 whose reasoning is all sealed" in err
    [s] = json.loads(out)["data"]
    assert s["sealed_tokens"] == 45 and s["input_tokens_with_writeback"] == s["input_tokens"]


def test_will_score_is_what_the_online_loop_sends(folder):
    from iclr_cli.savings.measure import seal_for_estimate

    settings = Settings(parse_variant("iclr"), score_all=False)
    got = {}
    for name in ("mixed.jsonl", "plain.json", "sealed.jsonl"):
        _, doc = load_file(str(folder / name))
        [traj] = [seal_for_estimate(t) for t in doc.trajectories]
        for k, step in enumerate(traj.steps):
            sent = prepare_step(traj.id, traj.prompt, traj.steps[:k], step, settings).request is not None
            assert will_score(step, settings) == sent
            got[(name, k)] = sent
    assert [k for k, v in got.items() if v] == [("mixed.jsonl", 1), ("mixed.jsonl", 2), ("plain.json", 0), ("plain.json", 1)]
