"""One block rule for every variant (docs/method.md, "Blocks"; iclr_cli/blocks.py).

A block holding a text-encoded tool call is never removed or edited, by any variant; a
``[SKIP]`` left by an earlier compression is not a candidate either. Every variant edits
reasoning only through ``Split.edit``, which refuses anything else; random-R deletes only
word tokens inside candidate blocks, never separators, block edges or line breaks.
"""

from __future__ import annotations

import json
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from format_helpers import SHARED, run_cli, summary_value
from iclr_cli.blocks import SKIP, split_blocks
from iclr_cli.compress import Settings, compress_trajectories
from iclr_cli.policies import parse_variant
from iclr_cli.scoring.fake import FakeScorer
from iclr_cli.trajectory import Part, Step, Trajectory

CASE = SHARED / "cases" / "turn2" / "05-tool-call-inside-think.json"
CALL_BLOCK = 'Drafting the call: <tool_call>\n{"name": "bash", "arguments": {"command": "pytest -x tests/test_loader.py"}}\n</tool_call>'
ACTION = '\n\n<tool_call>\n{"name": "bash", "arguments": {"command": "pytest -x tests/test_loader.py"}}\n</tool_call>'
VARIANTS = ["iclr", "iclr-ext", "step-only", "delete-all", "random-10", "random-40", "random-100"]


@pytest.fixture
def case():
    if not CASE.is_file():
        pytest.skip(f"field case not available at {CASE}")
    return json.loads(CASE.read_text(encoding="utf-8"))


def _prune(capsys, tmp_path, variant):
    out = tmp_path / f"{variant}.json"
    code, _, err = run_cli(capsys, "prune", str(CASE), "--variant", variant, "--model", "fake", "-o", str(out))
    assert code == 0, err
    return json.loads(out.read_text(encoding="utf-8")), err


def test_case_05_delete_all_keeps_the_tool_call_block_and_only_it(case, capsys, tmp_path):
    pruned, err = _prune(capsys, tmp_path, "delete-all")
    assert pruned[2]["content"] == f"<think>\n{CALL_BLOCK}\n</think>{ACTION}"
    assert pruned[4]["content"] == "<think></think>\n\nThe fixture reuses the cache file; I will switch it to tmp_path."
    assert [m for i, m in enumerate(pruned) if i not in (2, 4)] == [m for i, m in enumerate(case) if i not in (2, 4)]
    # 4 + 3 candidate blocks removed; the tool-call block is not a candidate and not counted
    assert summary_value(err, "reasoning blocks") == "7"
    assert summary_value(err, "blocks removed") == "7"


def test_case_05_iclr_keeps_the_tool_call_block_and_removes_floor_of_rho_n_others(case, capsys, tmp_path):
    pruned, err = _prune(capsys, tmp_path, "iclr")
    think = pruned[2]["content"].split("</think>")[0]
    blocks = split_blocks(think.removeprefix("<think>")).blocks
    assert blocks[1] == CALL_BLOCK
    # step 0: N = 4 candidates (the call block is not one), floor(0.8 * 4) = 3 replaced
    assert blocks.count(SKIP) == 3 and len(blocks) == 5
    assert pruned[2]["content"].endswith(ACTION)
    second = split_blocks(pruned[4]["content"].split("</think>")[0].removeprefix("<think>")).blocks
    assert second.count(SKIP) == 2 and len(second) == 3  # N = 3, floor(2.4) = 2
    assert summary_value(err, "blocks removed") == "5"


@pytest.mark.parametrize("variant", VARIANTS)
def test_case_05_no_variant_touches_the_tool_call_block(case, capsys, tmp_path, variant):
    pruned, _ = _prune(capsys, tmp_path, variant)
    assert CALL_BLOCK in pruned[2]["content"]
    assert pruned[2]["content"].endswith(ACTION)


def test_split_edit_refuses_protected_and_skip_blocks():
    split = split_blocks(f"Think.\n\n{CALL_BLOCK}\n\n{SKIP}\n\nMore.")
    assert split.edit({0: None, 3: SKIP}) == f"{CALL_BLOCK}\n\n{SKIP}\n\n{SKIP}"
    with pytest.raises(ValueError, match="not a candidate"):
        split.edit({1: None})
    with pytest.raises(ValueError, match="not a candidate"):
        split.edit({2: "x"})
    with pytest.raises(ValueError, match="no block 4"):
        split.edit({4: None})


def test_split_edit_removal_keeps_the_layout_of_what_stays():
    split = split_blocks("\nA\n\nB\n\n\nC\n")
    assert split.edit({1: None}) == "\nA\n\nC\n"
    assert split.edit({0: None}) == "\nB\n\n\nC\n"
    assert split.edit({2: None}) == "\nA\n\nB\n"
    assert split.edit({0: None, 1: None, 2: None}) == ""
    assert split.edit({1: SKIP}) == f"\nA\n\n{SKIP}\n\n\nC\n"


def _traj(reasoning: str, n_steps: int = 2) -> Trajectory:
    steps = tuple(
        Step(i, (Part("reasoning", reasoning, label="reasoning", ref=i), Part("action", "{}", label="tool_call:bash"), Part("observation", "ok", label="tool_result")))
        for i in range(n_steps)
    )
    return Trajectory("t", (Part("prompt", "Go.", label="user"),), steps)


WORDS = st.text(st.sampled_from("abcdefgh .,:`-_()"), min_size=1, max_size=40).filter(lambda s: s.strip())
CALLS = st.sampled_from([
    '<tool_call>{"name": "bash"}</tool_call>',
    "<function=execute_bash>\n<parameter=command>ls</parameter>\n</function>",
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>bash",
])


@st.composite
def reasoning_with_calls(draw):
    blocks = draw(st.lists(st.one_of(WORDS, WORDS.map(lambda w: w + "\nmore " + w), CALLS), min_size=1, max_size=8))
    seps = [draw(st.sampled_from(["\n\n", "\n \n", "\n\n\n"])) for _ in blocks[1:]]
    text = blocks[0] + "".join(s + b for s, b in zip(seps, blocks[1:]))
    return draw(st.sampled_from(["", "\n"])) + text + draw(st.sampled_from(["", "\n\n"]))


@settings(max_examples=150, deadline=None)
@given(text=reasoning_with_calls(), variant=st.sampled_from(VARIANTS), seed=st.integers(0, 5))
def test_every_variant_leaves_tool_call_blocks_and_separators(text, variant, seed):
    scorer = FakeScorer()
    [res] = compress_trajectories([_traj(text)], Settings(parse_variant(variant), seed=seed), scorer, scorer.tokenizer)
    old = split_blocks(text)
    protected = [b for b in old.blocks if "<tool_call>" in b or "<function=" in b or "tool▁call" in b]
    for step, report in zip(res.compressed.steps, res.steps):
        new_text = step.reasoning[0].text
        new = split_blocks(new_text)
        assert [b for b in new.blocks if b in protected] == protected  # all there, in order, unedited
        assert report.tokens.generated == report.tokens.kept + report.tokens.deleted
        assert report.tokens.written == report.tokens.kept + report.tokens.marker_tokens
        if variant in ("iclr", "iclr-ext", "step-only"):
            assert new.seps == old.seps  # [SKIP] replaces a block's words, never its layout
        elif variant.startswith("random") and len(new.blocks) == len(old.blocks):
            # nothing removed whole: the edges and every line break are as generated
            assert new_text.startswith(old.seps[0]) and new_text.endswith(old.seps[-1])
            assert new_text.count("\n") == text.count("\n")
        if not protected and variant == "delete-all":
            assert new_text == ""
