"""Reasoning markup inside a reasoning text is never inside a block (iclr_cli/blocks.py): a
``[SKIP]`` or a removed block can never take a ``<think>`` / ``</think>`` tag or a harmony
token with it, in any adapter where reasoning sits inside visible text with its delimiters
(mini-swe-agent and SWE-agent thoughts, OpenHands thoughts, a lone ``<think>`` the think
parser runs to the fence)."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from format_helpers import run_cli
from iclr_cli.blocks import SKIP, is_candidate, split_blocks
from iclr_cli.formats.think import think_elements

TAG = re.compile(r"</?think>")
WORDS = st.text(st.sampled_from("abc xyz.é"), min_size=1, max_size=12).filter(lambda s: s.strip())
PIECE = st.one_of(WORDS, st.sampled_from(["<think>", "</think>", "\n", "\n\n", " ", "`</think>`", "<|channel|>analysis<|message|>", "<|end|>"]))


def tags(text: str) -> list[str]:
    """The think tags of ``text`` outside code spans, in order."""
    return [text[el.start : el.inner_start] + "|" + text[el.inner_end : el.end] for el in think_elements(text)]


@settings(max_examples=300, deadline=None)
@given(st.lists(PIECE, min_size=1, max_size=14), st.data())
def test_no_edit_of_candidate_blocks_changes_the_markup(pieces, data):
    text = "".join(pieces)
    for splitter in ("paragraph", "line", "sentence"):
        sp = split_blocks(text, splitter)
        assert sp.join() == text
        for block in sp.blocks:
            assert not re.search(r"(?<!`)</?think>(?!`)", block) or "`" in block  # a tag is never block text, unless quoted
        cands = [i for i, b in enumerate(sp.blocks) if is_candidate(b)]
        chosen = data.draw(st.lists(st.sampled_from(cands), unique=True) if cands else st.just([]))
        for how in (SKIP, None):
            new = sp.edit({i: how for i in chosen})
            assert TAG.findall(_outside_code(new)) == TAG.findall(_outside_code(text)), (text, new)
            assert re.findall(r"<\|\w+\|>", new) == re.findall(r"<\|\w+\|>", text)


def _outside_code(text: str) -> str:
    from iclr_cli.formats.think import code_spans
    spans = code_spans(text) if "`" in text else []
    return "".join(ch for i, ch in enumerate(text) if not any(s <= i < e for s, e in spans))


def test_the_tags_are_separators_and_the_blocks_are_the_words():
    text = "<think>\nRead the loader.\n\nThe cache is stale.\n</think>\n\nTHOUGHT: key it by mtime.\n\n"
    sp = split_blocks(text)
    assert sp.blocks == ("Read the loader.", "The cache is stale.", "THOUGHT: key it by mtime.")
    assert sp.edit({1: SKIP}) == "<think>\nRead the loader.\n\n[SKIP]\n</think>\n\nTHOUGHT: key it by mtime.\n\n"
    assert sp.edit({1: None}) == "<think>\nRead the loader.\n</think>\n\nTHOUGHT: key it by mtime.\n\n"
    assert sp.edit({0: None, 1: None, 2: None}) == "<think>\n\n</think>\n\n\n\n"  # the markup and the edges stay, the words go
    assert split_blocks("No markup.\n\nAt all.").edit({0: None, 1: None}) == ""  # unchanged rule without markup
    quoted = "Models write `</think>` at the end.\n\nThen the answer."
    assert split_blocks(quoted).blocks == ("Models write `</think>` at the end.", "Then the answer.")


def mini_doc(thought: str) -> dict:
    return {"trajectory_format": "mini-swe-agent-1", "messages": [
        {"role": "system", "content": "You are a helpful assistant. Reply with one mswea_bash_command block."},
        {"role": "user", "content": "Fix the stale cache."},
        {"role": "assistant", "content": thought + "```bash\ncat loader.py\n```"},
        {"role": "user", "content": "_CACHE = {}"},
        {"role": "assistant", "content": "Done.\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"},
    ]}


@pytest.mark.parametrize("thought", [
    # a <think> the template left open up to the command (the think parser runs it to the end)
    "<think>\nRead the loader before the fixtures.\n\nThe cache is keyed by the path only.\n\nA rewritten file hits the stale entry.\n\n",
    # a lone </think>: the opening tag was in the prompt
    "Read the loader before the fixtures.\n\nThe cache is keyed by the path only.\n\nA rewritten file hits the stale entry.\n</think>\n\nTHOUGHT: read it.\n\n",
])
@pytest.mark.parametrize("variant", ["iclr", "delete-all", "random-50"])
def test_a_mini_swe_agent_thought_keeps_its_tags(tmp_path, capsys, thought, variant):
    src = tmp_path / "m.traj.json"
    src.write_text(json.dumps(mini_doc(thought)))
    out = tmp_path / "o.json"
    code, _, err = run_cli(capsys, "prune", str(src), "--model", "fake", "--variant", variant, "-o", str(out), "-q")
    assert code == 0, err
    content = json.loads(out.read_text())["messages"][2]["content"]
    assert TAG.findall(content) == TAG.findall(thought) and content.endswith("```bash\ncat loader.py\n```")
    assert content != thought + "```bash\ncat loader.py\n```"
