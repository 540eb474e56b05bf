"""``iclr prune`` scores only steps whose selection depends on the scores (docs/scoring.md, "Batching and memory")."""

from iclr_cli.compress import Settings, compress_trajectories
from iclr_cli.policies import parse_variant
from iclr_cli.scoring.fake import FakeScorer
from iclr_cli.trajectory import Part, Step, Trajectory


def trajectory():
    texts = ["One block only.", "First idea.\n\nSecond idea.\n\nThird idea.", "", "Alone again.",
             "Plan A.\n\nPlan B."]
    steps = []
    for i, text in enumerate(texts):
        parts = ([Part("reasoning", text, label="reasoning", ref=i)] if text else []) + [
            Part("action", f"run {i}", label="tool_call:bash"), Part("observation", f"out {i}", label="tool_result")]
        steps.append(Step(i, tuple(parts)))
    return Trajectory("t", (Part("prompt", "Do it.", label="user"),), tuple(steps))


def run(score_all, ratio=0.8):
    scorer = FakeScorer(record_requests=True)
    settings = Settings(parse_variant("iclr"), ratio=ratio, score_all=score_all)
    [res] = compress_trajectories([trajectory()], settings, scorer, scorer.tokenizer)
    return res, [r.step for r in scorer.requests_seen]  # the rendered steps sent to the scorer


def test_steps_that_cannot_change_are_not_scored_and_the_output_is_the_same():
    every, every_steps = run(True)
    needed, needed_steps = run(False)
    assert len(every_steps) == 4  # steps 0, 1, 3, 4 have blocks
    # only the steps with N >= 2 (floor(0.8 * N) >= 1)
    assert len(needed_steps) == 2 and "First idea" in needed_steps[0] and "Plan A" in needed_steps[1]
    assert needed.compressed == every.compressed
    assert [b.selected for r in needed.steps for b in r.blocks] == [b.selected for r in every.steps for b in r.blocks]
    by_step = {r.step: r for r in needed.steps}
    assert by_step[0].blocks[0].entropy_bits is None and by_step[3].blocks[0].entropy_bits is None
    for r in every.steps:
        if len(r.blocks) >= 2:
            assert [b.entropy_bits for b in by_step[r.step].blocks] == [b.entropy_bits for b in r.blocks]
    # a ratio whose floor is 0 for N = 2 as well leaves only the 3-block step to score
    [only] = run(False, ratio=0.4)[1]
    assert "First idea" in only
