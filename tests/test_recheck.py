"""Rechecking near ties: a step whose fast selection is close to changing is scored as exact
(iclr_cli.scoring.recheck; docs/scoring.md, "Speed")."""

import json
import math

import pytest

from format_helpers import summary_value

from test_profile import write_chat
from tiny_llama import tiny_dir  # noqa: F401

from iclr_cli.cli.app import main
from iclr_cli.compress import Settings, compress_step, compress_trajectories
from iclr_cli.errors import UsageError
from iclr_cli.policies import parse_variant, selection_margin
from iclr_cli.scoring.base import BlockScore, ScoreResult
from iclr_cli.scoring.fake import FakeScorer, RegexTokenizer
from iclr_cli.scoring.profile import FAST, choose
from iclr_cli.scoring.recheck import Recheck
from iclr_cli.trajectory import Part, Step, Trajectory

LONG = "".join(f"line {i}: " + "x" * 40 + "\n" for i in range(200))  # elided by the fast profile
ICLR = Settings(parse_variant("iclr"), elide=FAST.elide)


class Scripted:
    """A scorer that returns the next scripted entropies for each request, and keeps the requests."""

    name, max_tokens, overflow = "scripted", 8192, "window"

    def __init__(self, *scores):
        self.scores = list(scores)
        self.requests = []
        self.tokenizer = RegexTokenizer()
        self.recheck = None

    def score(self, requests):
        self.requests.extend(requests)
        return [ScoreResult(tuple(BlockScore(3, s) for s in self.scores.pop(0)), context_tokens=100) for _ in requests]


def step(i, reasoning):
    return Step(i, (Part("observation", LONG, label="tool_result"), Part("reasoning", reasoning, label="reasoning", ref=0),
                    Part("action", f"cat f{i}", label="tool_call:bash")))


TRAJ = Trajectory("t", (Part("prompt", "Fix the bug.", label="user"),),
                  (step(0, "A one.\n\nA two.\n\nA three."), step(1, "B one.\n\nB two.\n\nB three.")))


def test_selection_margin_is_the_lowest_kept_minus_the_highest_removed():
    assert selection_margin([1.0, 2.5, 4.0], {0, 1}) == pytest.approx(1.5)
    assert selection_margin([5.0, 2.0, 4.9], {1, 2}) == pytest.approx(0.1)
    assert selection_margin([3.0], set()) == math.inf  # nothing removed: no score can change it
    assert selection_margin([3.0, None, 1.0], {2}) == pytest.approx(2.0)  # a block without a score takes no part


def test_a_near_tie_is_rescored_on_the_whole_render_and_its_selection_is_exacts():
    # step 0: fast margin 0.2 bits (keep block 2 at 4.2 over block 1 at 4.0): rescored, and the
    # exact scores keep block 1 instead; step 1: margin 2 bits, left as the fast scorer had it
    fast = Scripted([1.0, 4.0, 4.2], [1.0, 2.0, 4.0])
    exact = Scripted([1.0, 5.0, 3.0])
    built = []
    recheck = Recheck(0.75, lambda: built.append(1) or exact)
    fast.recheck = recheck
    [result] = compress_trajectories([TRAJ], ICLR, fast, RegexTokenizer())
    first, second = result.steps
    assert first.near_tie == pytest.approx(0.2) and first.rechecked and first.recheck_changed
    assert [b.selected for b in first.blocks] == [True, False, True]
    assert [b.entropy_bits for b in first.blocks] == [1.0, 5.0, 3.0]
    assert second.near_tie is None and not second.rechecked and [b.selected for b in second.blocks] == [True, True, False]
    assert built == [1] and (recheck.rechecked, recheck.changed) == (1, 1)
    # the fast scorer saw the tool output elided, the exact one whole
    assert "characters elided" in fast.requests[0].step and "characters elided" not in exact.requests[0].step
    assert LONG in exact.requests[0].step
    # the written-back reasoning is exact's selection
    assert result.compressed.steps[0].reasoning[0].text == "[SKIP]\n\nA two.\n\n[SKIP]"


def test_the_exact_history_is_the_written_back_one_rendered_whole():
    fast = Scripted([1.0, 2.0, 4.0], [1.0, 4.0, 4.1])
    exact = Scripted([1.0, 2.0, 4.0])
    fast.recheck = Recheck(0.75, lambda: exact)
    compress_trajectories([TRAJ], ICLR, fast, RegexTokenizer())
    [request] = exact.requests
    assert len(request.history) == 1 and "[SKIP]\n\n[SKIP]\n\nA three." in request.history[0]
    assert LONG in request.history[0] and "characters elided" in fast.requests[1].history[0]


def test_no_near_tie_builds_no_exact_scorer():
    fast = Scripted([1.0, 2.0, 4.0], [1.0, 2.0, 4.0])

    def build():
        raise AssertionError("built without a near tie")

    fast.recheck = Recheck(0.75, build)
    [result] = compress_trajectories([TRAJ], ICLR, fast, RegexTokenizer())
    assert [s.near_tie for s in result.steps] == [None, None]


def test_a_near_tie_where_exact_slides_keeps_its_fast_scores_and_is_reported():
    """Rescoring in the sliding window would read the session up to the step (about all of
    --exact's work): the near tie is reported, not rescored."""

    class Sliding(Scripted):
        def plan_contexts(self, previews):
            self.planned = {stream: len(requests) for stream, requests in previews.items()}
            return {stream: "sliding" for stream in previews}

        def mode(self, stream):
            return "sliding"

    fast = Scripted([1.0, 4.0, 4.2], [1.0, 2.0, 4.0])
    exact = Sliding()
    fast.recheck = Recheck(0.75, lambda: exact)
    [result] = compress_trajectories([TRAJ], ICLR, fast, RegexTokenizer())
    first = result.steps[0]
    assert first.near_tie == pytest.approx(0.2) and not first.rechecked and [b.entropy_bits for b in first.blocks] == [1.0, 4.0, 4.2]
    assert exact.requests == [] and exact.planned == {"t": 2}  # planned on every step of the recorded history
    assert (fast.recheck.rechecked, fast.recheck.left) == (0, 1)


def test_replay_does_not_recheck():
    fast = Scripted([1.0, 4.0, 4.2])
    fast.recheck = Recheck(0.75, lambda: pytest.fail("replay built an exact scorer"))
    new, report = compress_step("t", TRAJ.prompt, [], TRAJ.steps[0], ICLR, fast, RegexTokenizer())
    assert report.near_tie is None and new.reasoning[0].text == "[SKIP]\n\n[SKIP]\n\nA three."  # the fast selection


def test_choose_takes_the_threshold_and_refuses_it_with_exact():
    assert FAST.recheck_below == 0.75 and choose().recheck_below == 0.75
    assert choose(recheck_below=0).recheck_below is None and choose(recheck_below=1.5).recheck_below == 1.5
    assert choose(exact=True).recheck_below is None
    with pytest.raises(UsageError, match="--exact scores every step as exact already"):
        choose(exact=True, recheck_below=0.5)


def run(capsys, *args):
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    captured = capsys.readouterr()
    return exc.value.code, captured.out, captured.err


def test_the_cli_marks_rescored_steps_and_counts_them(tmp_path, capsys):
    chat = tmp_path / "chat.json"
    write_chat(chat, LONG)
    code, out, err = run(capsys, "score", str(chat), "--model", "fake", "--recheck-below", "100")
    assert code == 0, err
    records = [json.loads(line) for line in out.splitlines()]
    assert len(records) == 9 and {r["profile"] for r in records} == {"exact"} and {r["precision"] for r in records} == {"float32"}
    assert all(r["fast_margin_bits"] < 100 for r in records)
    assert "near ties (margin under 100 bits) rescored as exact" in summary_value(err, "scorer profile")
    assert summary_value(err, "near ties (recheck)").startswith("3, rescored as exact 3 (")
    code, out, err = run(capsys, "score", str(chat), "--model", "fake", "--recheck-below", "0")
    assert code == 0 and not any("fast_margin_bits" in json.loads(line) for line in out.splitlines())
    assert "near ties (recheck) │ 0, rescored as exact 0 (0 selections changed)" in " ".join(err.split())


def test_recheck_below_with_exact_or_negative_is_a_usage_error(tmp_path, capsys):
    chat = tmp_path / "chat.json"
    write_chat(chat, LONG)
    code, out, err = run(capsys, "prune", str(chat), "--model", "fake", "--exact", "--recheck-below", "0.5")
    assert code == 2 and out == "" and "--exact scores every step as exact already" in err
    code, out, err = run(capsys, "prune", str(chat), "--model", "fake", "--recheck-below", "-1")
    assert code == 2 and "--recheck-below" in err


def test_a_rescored_step_scores_as_exact_does(tiny_dir, tmp_path, capsys):
    """With a threshold no margin reaches, every step is rescored: its records are those of
    --exact (the same context mode chosen, the same window and render), to float rounding."""
    chat = tmp_path / "chat.json"
    write_chat(chat, LONG)
    code, out, err = run(capsys, "score", str(chat), "--model", str(tiny_dir), "--dtype", "float32", "--recheck-below", "1000")
    assert code == 0, err
    rechecked = [json.loads(line) for line in out.splitlines()]
    code, out, err = run(capsys, "score", str(chat), "--model", str(tiny_dir), "--exact")
    assert code == 0, err
    exact = [json.loads(line) for line in out.splitlines()]
    assert len(rechecked) == len(exact) == 9
    for a, b in zip(rechecked, exact):
        assert (a["step"], a["block"], a["selected"], a["context_tokens"], a["context"]) == \
            (b["step"], b["block"], b["selected"], b["context_tokens"], b["context"])
        assert a["entropy_bits"] == pytest.approx(b["entropy_bits"], abs=1e-4)


def test_the_exact_scorer_shares_float32_weights(tiny_dir):
    from iclr_cli.pipeline import ScorerConfig, build_engines

    config = ScorerConfig(model=str(tiny_dir), dtype="float32")
    scorer, _ = build_engines(parse_variant("iclr"), config)
    exact = scorer.recheck.scorer
    assert exact.model is scorer.model and exact.context == "auto" and exact.max_tokens == scorer.max_tokens == 512
    assert FakeScorer().recheck is None
