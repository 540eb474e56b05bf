"""The online write-back loop with the fake scorer (METHOD.md, "Select and replace")."""

from iclr_cli.blocks import SKIP
from iclr_cli.compress import Settings, compress_step, compress_trajectories
from iclr_cli.policies import parse_variant
from iclr_cli.scoring.fake import FakeScorer
from iclr_cli.trajectory import Part, Step, Trajectory

REASONING = "Look at the failing test first.\n\nThe traceback points at parse().\n\nMaybe the regex is wrong.\n\nCheck the fixture too.\n\nThen run the suite."


def make_traj(tid="t", n_steps=3, reasoning=REASONING):
    steps = tuple(
        Step(i, (
            Part("reasoning", reasoning, label="reasoning", ref=(tid, i)),
            Part("action", f'{{"cmd": "step {i}"}}', label="tool_call:bash"),
            Part("observation", f"output {i}", label="tool_result"),
        ))
        for i in range(n_steps)
    )
    return Trajectory(tid, (Part("prompt", "Fix the bug.", label="user"),), steps)


def run(variant, trajs, **kw):
    scorer = FakeScorer(record_requests=True)
    results = compress_trajectories(trajs, Settings(parse_variant(variant), **kw), scorer, scorer.tokenizer)
    return scorer, results


def test_iclr_removes_floor_of_80_percent_per_step_and_keeps_separators():
    _, [res] = run("iclr", [make_traj()])
    for report, step in zip(res.steps, res.compressed.steps):
        assert len(report.blocks) == 5
        assert report.n_removed == 4
        tok = FakeScorer().tokenizer
        assert report.tokens_removed == sum(len(tok.token_spans(b.text)) for b in report.blocks if b.selected) > 0
        text = step.reasoning[0].text
        assert text.count(SKIP) == 4
        assert text.count("\n\n") == 4
        kept = [b.text for b in report.blocks if not b.selected]
        assert len(kept) == 1 and kept[0] in text
        # the kept block is the highest-entropy one
        assert max(report.blocks, key=lambda b: (b.entropy_bits, -b.block)).selected is False


def test_later_steps_are_scored_on_the_compressed_history():
    scorer, [res] = run("iclr", [make_traj()])
    first, second, third = scorer.requests_seen
    assert first.history == ()
    assert len(second.history) == 1 and len(third.history) == 2
    assert SKIP in second.history[0]
    assert "The traceback points at parse()." not in second.history[0] or res.steps[0].blocks[1].selected is False
    assert second.prompt == first.prompt and "Fix the bug." in first.prompt[0]


def test_actions_and_observations_are_never_changed():
    for variant in ("iclr", "step-only", "delete-all", "random-20"):
        _, [res] = run(variant, [make_traj()])
        for old, new in zip(res.original.steps, res.compressed.steps):
            assert [p for p in old.parts if p.kind != "reasoning"] == [p for p in new.parts if p.kind != "reasoning"]


def test_step_only_sees_reasoning_alone():
    scorer, _ = run("step-only", [make_traj()])
    for req in scorer.requests_seen:
        assert req.prompt == () and req.history == ()
        assert req.step.startswith("Look at the failing test first.")


def test_steps_of_all_trajectories_are_batched_per_round():
    scorer, results = run("iclr", [make_traj("a", 3), make_traj("b", 1), make_traj("c", 2)])
    assert scorer.calls == 3
    assert [len(r.steps) for r in results] == [3, 1, 2]
    assert [r.compressed.id for r in results] == ["a", "b", "c"]


def test_none_and_delete_all():
    _, [res] = run("none", [make_traj()])
    assert res.compressed == res.original
    _, [res] = run("delete-all", [make_traj()])
    assert all(s.reasoning[0].text == "" for s in res.compressed.steps)
    assert all(r.tokens_after == 0 and r.tokens_before > 0 for r in res.steps)


def test_random_r_deletes_that_share_of_tokens_deterministically():
    _, [a] = run("random-20", [make_traj()], seed=3)
    _, [b] = run("random-20", [make_traj()], seed=3)
    _, [c] = run("random-20", [make_traj()], seed=4)
    assert a.compressed == b.compressed
    assert a.compressed != c.compressed
    for report in a.steps:
        assert report.tokens_removed == round(0.2 * report.tokens_before)
        # deleting a space merges its neighbours, so the recount drops by at least as much
        assert report.tokens_before - report.tokens_after >= report.tokens_removed


def test_existing_skip_markers_are_not_candidates():
    traj = make_traj(reasoning=f"{SKIP}\n\nOnly real block.\n\nAnother one.")
    _, [res] = run("iclr", [traj])
    report = res.steps[0]
    assert [b.text for b in report.blocks] == ["Only real block.", "Another one."]
    assert report.n_removed == 1
    assert res.compressed.steps[0].reasoning[0].text.startswith(f"{SKIP}\n\n")


def test_single_block_step_is_left_alone():
    _, [res] = run("iclr", [make_traj(reasoning="Just one thought.")])
    assert res.compressed == res.original


def test_compress_step_matches_the_batched_loop():
    traj = make_traj(n_steps=3)
    scorer = FakeScorer()
    settings = Settings(parse_variant("iclr"))
    history = []
    for step in traj.steps:
        new_step, _ = compress_step(traj.id, traj.prompt, history, step, settings, scorer, scorer.tokenizer)
        history.append(new_step)
    _, [res] = run("iclr", [traj])
    assert tuple(history) == res.compressed.steps


def test_window_overflow_is_reported():
    scorer = FakeScorer(max_tokens=120)
    results = compress_trajectories([make_traj(n_steps=4)], Settings(parse_variant("iclr")), scorer, scorer.tokenizer)
    reports = results[0].steps
    assert reports[0].windowed is False
    assert any(r.windowed for r in reports[1:])
    assert all(r.context_tokens <= 120 for r in reports)


def test_skip_overflow_leaves_step_unpruned():
    scorer = FakeScorer(max_tokens=120, overflow="skip")
    [res] = compress_trajectories([make_traj(n_steps=3)], Settings(parse_variant("iclr")), scorer, scorer.tokenizer)
    skipped = [r for r in res.steps if r.skipped]
    assert skipped
    for r in skipped:
        assert r.n_removed == 0
        assert res.compressed.steps[r.step] == res.original.steps[r.step]


def test_block_span_includes_its_indent_so_bpe_leading_space_tokens_count():
    from iclr_cli.blocks import split_blocks
    from iclr_cli.context import render_for_scoring

    step = Step(0, (Part("reasoning", "First.\n\n   or\n\nLast.", label="reasoning"),))
    text = step.reasoning[0].text
    rendered = render_for_scoring(step, [split_blocks(text)])
    starts = [rendered.text[a:b] for a, b in rendered.spans]
    assert starts == ["First.", "   or", "Last."]
