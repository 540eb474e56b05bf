"""Progress of long runs: done / total and the time left, on a timer off a terminal."""

import threading
import time

import pytest

from iclr_cli.inputs import load_file
from iclr_cli.render.output import Output
from iclr_cli.render.progress import Count, Ticker, Timer, Tracker, Work, duration, held_left, progress_line, seconds_left


def test_line_gives_done_of_total_and_the_time_left():
    counts = [Count("steps", 47, 120), Count("tokens", 12_345, 40_000)]
    assert progress_line("scoring", counts, 673.4, 1495.0) == \
        "scoring: 47/120 steps, 12,345/40,000 tokens, 11 min 13 s, about 24 min 55 s left"
    # totals of the input read so far are marked, and there is no estimate without one
    assert progress_line("scoring", [Count("steps", 3, 10, growing=True), Count("runs", 2)], 5, None) == \
        "scoring: 3/10+ steps, 2 runs, 5 s"
    assert duration(7384) == "2 h 3 min"


def test_time_left_is_the_average_rate_so_far():
    # 100 of 400 tokens in 30 s: 300 more at the same rate
    assert seconds_left(Count("tokens", 100, 400), 30.0) == pytest.approx(90.0)
    # a dataset knows the tokens of the rows it started (5 of 20): stretched to every row
    assert seconds_left(Count("tokens", 100, 400), 30.0, scale=4.0) == pytest.approx(450.0)
    for pace in (Count("tokens", 0, 400), Count("tokens", 100), Count("tokens", 100, 400, growing=True)):
        assert seconds_left(pace, 30.0) is None


def test_dataset_work_scales_by_rows_and_knows_when_it_cannot():
    work = Work(steps=2, steps_total=8, tokens=100, tokens_total=400, rows=0, rows_planned=5, rows_total=20)
    assert work.left(30.0) == pytest.approx(450.0) and work.fraction() == pytest.approx(100 / 1600)
    assert Work(tokens=100, tokens_total=400, rows_planned=5).left(30.0) is None  # rows not counted
    assert [c.shown() for c in work.counts(rows=True)] == ["2/8 steps", "100/400 tokens", "0/20 rows"]
    remote = Work(steps=1, steps_total=3, tokens=50, tokens_total=90, rows_planned=2)
    merged = work.plus(remote)
    assert (merged.steps, merged.steps_total, merged.tokens, merged.tokens_total, merged.rows_planned) == (3, 11, 150, 490, 7)


def test_timer_prints_while_no_step_completes_and_ends_on_the_final_counts():
    # The bug: lines came only when a step completed, so one long step left the log silent.
    tracker = Tracker("scoring")
    tracker.plan(4, 1000)
    tracker.step(250)
    lines: list[str] = []
    seen = threading.Event()

    def emit(line: str) -> None:
        lines.append(line)
        if len(lines) >= 2:
            seen.set()

    timer = Timer(tracker, emit, 0.02).start()
    assert seen.wait(10), "the timer printed nothing while no step completed"
    tracker.step(750)
    timer.stop()
    assert lines[0].startswith("scoring: 1/4 steps, 250/1,000 tokens, ") and lines[1].startswith("scoring: 1/4 steps")
    assert lines[-1].startswith("scoring: 2/4 steps, 1,000/1,000 tokens, ")
    assert lines[-1].endswith("about 0 s left")


def test_timer_that_never_printed_adds_no_final_line():
    lines: list[str] = []
    timer = Timer(Ticker("replay", 3, "runs"), lines.append, 3600).start()
    timer.stop()
    assert lines == []


def test_output_progress_off_a_terminal_and_quiet(capsys):
    out = Output(None)
    shown = out.info
    one_done = threading.Event()

    def info(line: str) -> None:
        shown(line)
        if line.startswith("replay: 1/4 runs, "):
            one_done.set()

    out.info = info  # the timer prints through it
    with out.progress("replay", 4, unit="runs", every_s=0.02) as advance:
        advance()
        # wait for the line rather than sleep: on a loaded machine the timer may not have run
        # in any fixed time (and may have printed "0/4" before advance() ran)
        assert one_done.wait(30)
        advance(3)
    lines = capsys.readouterr().err.splitlines()
    assert any(line.startswith("replay: 1/4 runs, ") for line in lines)
    assert lines[-1].startswith("replay: 4/4 runs, ")
    with Output(None, quiet=True).tracker("x", every_s=0.02) as tracker:
        tracker.plan(1, 10)
        time.sleep(0.1)
        tracker.step(10)
    assert capsys.readouterr().err == ""


def trackers(monkeypatch) -> list[Tracker]:
    """Every Tracker the commands open, kept for inspection after the run."""
    import contextlib

    seen: list[Tracker] = []
    original = Output.tracker

    @contextlib.contextmanager
    def tracker(self, *args, **kwargs):
        with original(self, *args, **kwargs) as t:
            seen.append(t)
            yield t

    monkeypatch.setattr(Output, "tracker", tracker)
    return seen


def test_score_and_prune_count_every_step_and_token_of_the_file(monkeypatch, tmp_path):
    from iclr_cli.cli.app import main
    from iclr_cli.pipeline import step_tokens
    from iclr_cli.scoring.fake import RegexTokenizer

    seen = trackers(monkeypatch)
    sample = "sample_trajectories/openai_chat.json"
    for command in (["score", sample, "-o", str(tmp_path / "s.jsonl")], ["prune", sample, "-o", str(tmp_path / "p.json")]):
        with pytest.raises(SystemExit) as exc:
            main([*command, "--model", "fake", "-q"])
        assert exc.value.code == 0
    _, doc = load_file(sample)
    weights = step_tokens(doc.trajectories, RegexTokenizer())
    assert len(seen) == 2 and len(weights) == 3
    for tracker in seen:
        work = tracker.snapshot()
        assert (work.steps, work.steps_total) == (3, 3) and not work.growing
        assert work.tokens == work.tokens_total == sum(weights.values()) > 100


def test_dataset_run_counts_rows_steps_and_tokens_inside_shards(monkeypatch, tmp_path):
    from corpus_data import real_rows, write_parquet

    from iclr_cli.cli.app import main

    seen = trackers(monkeypatch)
    src = write_parquet(tmp_path / "pq", real_rows())
    with pytest.raises(SystemExit) as exc:
        main(["score", "--dataset", str(src), "--model", "fake", "--shard-rows", "3", "-q", "-o", str(tmp_path / "s.jsonl")])
    assert exc.value.code == 0
    work = seen[0].snapshot()
    assert (work.rows, work.rows_total, work.rows_planned) == (7, 7, 7)
    assert work.steps == work.steps_total > 7 and work.tokens == work.tokens_total > 1000


def test_terminal_bar_draws_the_same_counts():
    import io

    from rich.console import Console

    from iclr_cli.render.progress import Bar

    tracker = Tracker("scoring")
    tracker.plan(4, 1000)
    tracker.step(500)
    console = Console(file=io.StringIO(), force_terminal=True, width=200, color_system=None)
    console.print(Bar(tracker))
    drawn = console.file.getvalue()
    assert "scoring: 1/4 steps, 500/1,000 tokens" in drawn and "━" in drawn
    assert tracker.fraction() == 0.5 and Ticker("replay", None, "runs").fraction() is None


def test_documents_are_read_one_ahead_so_the_last_is_known():
    from iclr_cli.inputs import with_last

    assert list(with_last(iter("abc"))) == [("a", False), ("b", False), ("c", True)]
    assert list(with_last(iter(()))) == []


def test_chunked_file_totals_are_final_once_its_last_chunk_is_read(monkeypatch, tmp_path):
    import json

    from iclr_cli.cli.app import main

    seen = trackers(monkeypatch)
    growing: list[bool] = []
    monkeypatch.setattr(Tracker, "growing", lambda self, value: growing.append(value))
    chat = json.loads(open("sample_trajectories/openai_chat.json").read())
    path = tmp_path / "many.jsonl"
    path.write_text("".join(json.dumps({"messages": chat}) + "\n" for _ in range(300)))  # 2 chunks of 256 lines
    with pytest.raises(SystemExit) as exc:
        main(["prune", str(path), "--model", "fake", "-q", "-o", str(tmp_path / "out.jsonl")])
    assert exc.value.code == 0 and growing == [True, False]
    work = seen[0].snapshot()
    assert work.steps == work.steps_total == 900


def test_a_step_weighs_at_most_the_scorer_limit_and_a_huge_text_is_not_tokenized():
    from iclr_cli.pipeline import step_tokens
    from iclr_cli.scoring.fake import RegexTokenizer
    from iclr_cli.trajectory import Part, Step, Trajectory

    class Guarded(RegexTokenizer):
        def token_spans(self, text):
            assert len(text) < 100_000, "a text longer than the window was tokenized"
            return super().token_spans(text)

    huge = "x " * 500_000  # 1 MB of tool output
    traj = Trajectory("t", (Part("prompt", "Fix the bug.", label="user"),), (
        Step(0, (Part("reasoning", "look at the logs first", label="reasoning"), Part("observation", huge, label="tool_result"))),
        Step(1, (Part("reasoning", "the error is in parse", label="reasoning"),)),
    ))
    capped = step_tokens([traj], Guarded(), limit=2048)
    from iclr_cli.context import render_prompt

    p_tokens = sum(len(RegexTokenizer().token_spans(seg)) for seg in render_prompt(traj.prompt))
    assert p_tokens > 0 and capped[("t", 0)] == p_tokens + 2048
    small = step_tokens([traj], RegexTokenizer(), limit=None)[("t", 1)]
    assert capped[("t", 1)] == small < 2048


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _left(line: str) -> float | None:
    """Seconds in the line's "about ... left", or None."""
    if "about " not in line:
        return None
    text = line.split("about ")[1].removesuffix(" left")
    seconds = 0
    for amount, unit in zip(text.split()[::2], text.split()[1::2]):
        seconds += int(amount) * {"h": 3600, "min": 60, "s": 1}[unit]
    return seconds


def test_held_left_counts_down_to_the_steps_after_the_running_one_and_never_up():
    assert held_left(300.0, 0.0, 4) == 300.0
    assert held_left(300.0, 50.0, 4) == 250.0
    assert held_left(300.0, 1000.0, 4) == pytest.approx(225.0)  # the 3 steps after the running one
    assert held_left(300.0, 1000.0, 1) is None  # the last step outlasted its share: no estimate
    assert held_left(0.0, 5.0, 0) == 0.0  # done
    assert held_left(None, 5.0, 3) is None


def test_time_left_does_not_grow_while_one_long_step_runs():
    # The bug: elapsed x left / done grows with the clock while nothing finishes, so the
    # estimate rose from 4 min to 12 min while one long step was scored.
    clock = Clock()
    tracker = Tracker("scoring", clock=clock)
    tracker.plan(4, 4000)
    clock.now += 60
    tracker.step(1000)  # 1,000 of 4,000 tokens in 60 s: 3,000 more is 180 s
    estimates = []
    for _ in range(12):
        estimates.append(_left(tracker.line()))
        clock.now += 30
    assert estimates[0] == 180
    assert all(a is None or b is None or b <= a for a, b in zip(estimates, estimates[1:]))
    assert estimates[-1] == 120  # held at the two steps after the running one (2/3 of 180 s)
    tracker.step(1000)  # finished late: 2,000 in 420 s, the average rate sets the new estimate
    assert _left(tracker.line()) == 420


def test_time_left_of_runs_is_held_too():
    clock = Clock()
    ticker = Ticker("replay", 3, "runs", clock=clock)
    clock.now += 100
    ticker.advance()
    first = _left(ticker.line())
    clock.now += 500
    assert first == 200 and _left(ticker.line()) == 100
