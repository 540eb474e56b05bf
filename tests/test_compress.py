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
        # [SKIP] is 3 fake tokens ("[", "SKIP", "]"); the text around the blocks is unchanged
        removed = sum(len(tok.token_spans(b.text)) for b in report.blocks if b.selected)
        assert report.tokens.markers == 4 and report.tokens.marker_tokens == 12
        assert report.tokens.deleted == removed > 0
        assert report.tokens.generated == report.tokens.kept + report.tokens.deleted
        assert report.tokens.written == report.tokens.kept + report.tokens.marker_tokens
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
    tok = FakeScorer().tokenizer
    for report, step in zip(a.steps, a.compressed.steps):
        old = REASONING
        new = step.reasoning[0].text
        # round(20% of 54 tokens) = 11 word tokens drawn; whitespace tokens never go
        assert report.tokens.generated == 54
        words = lambda t: [t[s:e] for s, e in tok.token_spans(t) if t[s:e].strip()]  # noqa: E731
        assert len(words(old)) - len(words(new)) == 11
        assert new.count("\n\n") == old.count("\n\n") == 4  # separators kept
        # the recount of the written text: the gone words plus the space runs they merged
        assert report.tokens.written == len(tok.token_spans(new))
        assert report.tokens.deleted == 54 - report.tokens.written
        assert 11 <= report.tokens.deleted <= 22
        assert report.tokens.kept == report.tokens.written and report.tokens.markers == 0


def test_random_r_never_edits_a_block_quoting_a_reasoning_delimiter():
    # A partial edit could drop the backtick after a quoted `</think>` and end the reasoning
    # there when the content is read back; such a block stays whole (or goes whole).
    quoted = "The template closes with `</think>` and `<|end|>` here."
    text = "First block with several words in it.\n\n" + quoted
    for seed in range(20):
        _, [res] = run("random-40", [make_traj(reasoning=text)], seed=seed)
        for step in res.compressed.steps:
            new = step.reasoning[0].text
            assert new.endswith(quoted)
            assert new != text  # the other block did lose words


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


# -- tests that fail if a rule of the method breaks (docs/method.md) -----------------------------

SEVEN = "\n\n".join(
    [
        "Read the traceback from the last run.",
        "The assertion compares a rounded float with an exact one.",
        "Rounding happens in format_total, line 42.",
        "Python rounds half to even, the test expects half up.",
        "A Decimal with ROUND_HALF_UP would match the fixture.",
        "Check other callers of format_total before changing it.",
        "Then rerun the whole suite, not only this test.",
    ]
)


def test_only_the_just_completed_step_is_compressed_and_only_once():
    """7 blocks per step: one compression replaces floor(0.8 * 7) = 5 with [SKIP] and leaves 2
    candidates; a second one would replace floor(0.8 * 2) = 1 more, so any re-compression of
    an earlier step shows. Every earlier step must be byte-identical from request to request."""
    from iclr_cli.context import render_step

    scorer, [res] = run("iclr", [make_traj(n_steps=5, reasoning=SEVEN)])
    requests = scorer.requests_seen
    assert len(requests) == 5
    for t, req in enumerate(requests):
        assert len(req.history) == t
        for i in range(t):
            assert req.history[i] == render_step(res.compressed.steps[i])  # as written back, byte for byte
            assert req.history[i].count(SKIP) == 5
    for step, report in zip(res.compressed.steps, res.steps):
        assert step.reasoning[0].text.count(SKIP) == 5 and report.n_removed == 5
    # the history a later request sees is exactly the one an earlier request saw, plus one step
    for earlier, later in zip(requests, requests[1:]):
        assert later.history[: len(earlier.history)] == earlier.history


def test_each_step_is_scored_uncompressed_with_p_and_the_compressed_history():
    """What the scorer was sent: step t with every one of its own blocks as generated (a step
    is compressed only after it is scored), after P and steps < t as written back."""
    scorer, [res] = run("iclr", [make_traj(n_steps=3, reasoning=SEVEN)])
    first = scorer.requests_seen[0]
    assert first.prompt == ("[user]\nFix the bug.\n\n",)
    assert first.history == ()
    assert first.step == "[reasoning]\n" + SEVEN  # cut after the last reasoning block
    for req in scorer.requests_seen:
        assert SKIP not in req.step
        assert [req.step[a:b] for a, b in req.spans] == SEVEN.split("\n\n")
