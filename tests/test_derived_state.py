"""Derived state (iclr_cli.derived_state) and the iclr-ext variant that uses it."""

import pytest

from iclr_cli.blocks import SKIP, split_blocks
from iclr_cli.compress import Settings, compress_trajectories
from iclr_cli.derived_state import Item, carrier_kind, derived, items, occurs, step_state, unexternalized
from iclr_cli.policies import bottom_k, bottom_k_protected, parse_variant
from iclr_cli.scoring.fake import FakeScorer
from iclr_cli.trajectory import Part, Step, Trajectory


def test_items_finds_each_kind_once_and_leaves_prose_alone():
    text = ('The bug is in src/app.py where parse_header returns 42 or 3.5; loadConfig() and sha256 too. '
            'See `x = foo(1)` and "hello world", e.g. the test, and os.path.join.\n'
            "```python\ndef fix(x):\n    return x\n```\n")
    found = items(text)
    assert Item("path", "src/app.py") in found
    assert Item("identifier", "parse_header") in found
    assert Item("number", "42") in found and Item("number", "3.5") in found
    assert Item("identifier", "loadConfig") in found and Item("identifier", "sha256") in found
    assert Item("code", "x = foo(1)") in found and Item("quoted", "hello world") in found
    assert Item("identifier", "os.path.join") in found
    assert Item("code", "def fix(x):") in found and Item("code", "return x") in found
    texts = {i.text for i in found}
    assert not texts & {"The", "bug", "test", "e.g", "the", "foo"}  # prose and pieces of code spans
    assert len(found) == len(set(found))


def test_a_quoted_path_is_one_quoted_item():
    assert items('open "src/app.py" now') == (Item("quoted", "src/app.py"),)


def test_occurs_needs_no_word_character_glued_on():
    assert occurs("12", "run 12 times") and not occurs("12", "in 2012")
    assert occurs("src/app.py", "cat src/app.py")
    assert not occurs("parse", "parse_header")
    assert occurs("x = foo(1)", "y; x = foo(1);")


def test_derived_is_what_no_earlier_text_holds():
    assert derived("use parse_header and retry_count", ["we saw parse_header before"]) == (Item("identifier", "retry_count"),)


def _step(reasoning, *rest, index=0):
    return Step(index, (Part("reasoning", reasoning, label="reasoning"), *rest))


def test_step_state_marks_what_the_step_carried_out():
    step = _step("First compute max_retries = 17.\n\nThen fix parse_header in src/app.py.",
                 Part("action", '{"path": "src/app.py", "content": "max_retries = 17"}', label="tool_call:write_file"),
                 Part("observation", "wrote src/app.py", label="tool_result"))
    states = step_state(["[user]\nFix parse_header.\n\n"], step, [split_blocks(p.text) for p in step.reasoning])
    first, second = states
    assert set(first.items) == {Item("identifier", "max_retries"), Item("number", "17")}
    assert first.carried == {Item("identifier", "max_retries"): "file", Item("number", "17"): "file"}
    assert first.outstanding == ()
    assert second.items == (Item("path", "src/app.py"),)  # parse_header was in P
    assert carrier_kind(step.parts[2]) == "tool_result" and carrier_kind(step.parts[0]) is None


def test_unexternalized_lists_blocks_whose_state_lives_only_in_reasoning():
    step = _step("The limit is 4096 tokens.\n\nSo call reset_cache() before run_all.\n\nNothing new here.",
                 Part("action", '{"command": "python -c \'reset_cache()\'"}', label="tool_call:bash"),
                 Part("observation", "ok", label="tool_result"))
    splits = [split_blocks(p.text) for p in step.reasoning]
    # block 0: 4096 never leaves reasoning; block 1: run_all does not either; block 2: nothing derived
    assert unexternalized([], step, splits) == {(0, 0), (0, 1)}
    carried = Step(0, (*step.parts[:2], Part("observation", "limit 4096, run_all done", label="tool_result")))
    assert unexternalized([], carried, splits) == frozenset()


def test_bottom_k_protected_keeps_protected_blocks_and_counts_them_in_n():
    scores = [0.1, 0.2, 0.3, 0.4, 0.5]
    assert bottom_k(scores) == {0, 1, 2, 3}
    # floor(0.8 * 5) = 4 removals, spent on the lowest unprotected blocks
    assert bottom_k_protected(scores, {0}) == {1, 2, 3, 4}
    assert bottom_k_protected(scores, {0, 1, 2}) == {3, 4}
    assert bottom_k_protected([0.1], set()) == frozenset()


def _traj():
    # Step 0: block 0 derives an identifier that only the reasoning holds; blocks 1-4 derive
    # nothing or what the action writes out.
    reasoning = ("Keep the secret token_budget_x9 in mind.\n\nCheck the file.\n\nWrite parse_fix now.\n\n"
                 "Run the suite.\n\nThen submit.")
    steps = tuple(Step(i, (
        Part("reasoning", reasoning if i == 0 else "Look again.\n\nStill fine.\n\nDone here.", label="reasoning", ref=(i,)),
        Part("action", '{"content": "def parse_fix(): pass", "path": "fix.py"}', label="tool_call:write_file"),
        Part("observation", "ok", label="tool_result"),
    )) for i in range(2))
    return Trajectory("t", (Part("prompt", "Fix it.", label="user"),), steps)


@pytest.mark.parametrize("variant", ["iclr", "iclr-ext"])
def test_iclr_ext_never_removes_an_unexternalized_block(variant):
    scorer = FakeScorer()
    [res] = compress_trajectories([_traj()], Settings(parse_variant(variant)), scorer, scorer.tokenizer)
    report = res.steps[0]
    assert len(report.blocks) == 5 and report.n_removed == 4  # same budget: floor(0.8 * 5)
    first = report.blocks[0]
    if variant == "iclr-ext":
        assert first.protected and not first.selected
        assert "token_budget_x9" in res.compressed.steps[0].reasoning[0].text
        assert sum(b.protected for b in report.blocks) == 1
    else:
        assert not first.protected
    assert res.compressed.steps[0].reasoning[0].text.count(SKIP) == 4


def test_iclr_ext_parses_and_scores_like_iclr():
    v = parse_variant("iclr-ext")
    assert v.needs_scores and v.edits_reasoning and v.conditions_on_history
    assert not parse_variant("step-only").conditions_on_history
