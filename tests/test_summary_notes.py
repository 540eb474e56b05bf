"""Summaries that explain themselves: sessions whose steps hold one block,
and the scored-step rows that differ between ``score`` and ``prune``."""

import json
import re

import pytest

from iclr_cli.cli.app import main
from format_helpers import SAMPLES
from format_helpers import summary_value as value
from iclr_cli.block_notes import one_block_note

ONE_PARAGRAPH = "First I read the failing test. Then I check the parser. It drops the last field, so I patch it."


def run(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    return exc.value.code, capsys.readouterr().err


@pytest.fixture
def one_paragraph_session(tmp_path):
    """An OpenAI chat session of three tool steps, each thought one paragraph (as every
    SWE-agent thought in the held-out marshmallow file is)."""
    messages = [{"role": "user", "content": "fix the parser"}]
    for i in range(3):
        messages.append({"role": "assistant", "content": None, "reasoning_content": f"{ONE_PARAGRAPH} Step {i}.",
                         "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": "{\"cmd\": \"ls\"}"}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "ok"})
    path = tmp_path / "session.json"
    path.write_text(json.dumps(messages))
    return path


def test_note_only_when_most_steps_hold_one_block():
    assert one_block_note(3, 4, "paragraph").endswith("--block-split line or --block-split sentence cuts reasoning into more blocks")
    assert "their reasoning is one line" in one_block_note(3, 4, "line") and "--block-split sentence" in one_block_note(3, 4, "line")
    assert "--block-split" not in one_block_note(3, 4, "sentence")  # nothing finer to offer
    assert one_block_note(2, 4, "paragraph") is None and one_block_note(0, 0, "paragraph") is None


def test_one_block_sessions_are_named_once_before_the_run(one_paragraph_session, tmp_path, capsys):
    code, err = run(["prune", str(one_paragraph_session), "--model", "fake", "-o", str(tmp_path / "p.json")], capsys)
    assert code == 0
    note = "3 of 3 steps with reasoning hold a single block (their reasoning is one paragraph)"
    # before the run (it can be stopped and rerun with a finer split), not again under the table,
    # whose "steps with one block" row says it at the end
    assert err.count(note) == 1 and err.index(note) < err.index("iclr prune --variant iclr")
    assert value(err, "steps with one block (N = 1)") == "3" and value(err, "blocks removed") == "0"
    code, err = run(["prune", str(one_paragraph_session), "--model", "fake", "--block-split", "sentence", "-o", str(tmp_path / "s.json")], capsys)
    assert code == 0 and "single block" not in err
    assert value(err, "steps with one block (N = 1)") == "0" and int(value(err, "blocks removed")) >= 3
    # a variant that does not rank blocks gets no advice about blocks
    code, err = run(["prune", str(one_paragraph_session), "--variant", "delete-all", "--model", "fake", "-o", str(tmp_path / "d.json")], capsys)
    assert code == 0 and "single block" not in err


def test_score_and_prune_label_why_their_scored_steps_differ(capsys, tmp_path):
    sample = "sample_trajectories/mini_swe_agent.traj.json"
    _, score_err = run(["score", sample, "--model", "fake", "-o", str(tmp_path / "s.jsonl")], capsys)
    _, prune_err = run(["prune", sample, "--model", "fake", "-o", str(tmp_path / "p.json")], capsys)
    scored_all = int(value(score_err, "steps scored (every step with blocks)"))
    scored_some = int(value(prune_err, "steps scored (only where BottomK can remove a block)"))
    one_block = int(value(score_err, "steps with one block (N = 1)"))
    assert scored_all == int(value(score_err, "steps with reasoning")) and one_block >= 1
    assert scored_some == scored_all - one_block
    assert re.search(r"scored steps windowed \(over --max-tokens\)\s*│\s*0", prune_err)


def test_re_pruning_a_pruned_file_says_it_is_already_compressed(tmp_path, capsys):
    """A pruned file holds one block per step and [SKIP] markers: the note says it was
    compressed before, not that a finer --block-split would help."""
    first = tmp_path / "once.json"
    code, _ = run(["prune", str(SAMPLES / "openai_chat.json"), "--model", "fake", "-q", "-o", str(first)], capsys)
    assert code == 0
    code, err = run(["prune", str(first), "--model", "fake", "-o", str(tmp_path / "twice.json")], capsys)
    assert code == 0
    note = ("already compressed: 3 of 3 steps with reasoning hold [SKIP] markers from an earlier prune; "
            "3 keep a single block, which BottomK leaves (N = 1); prune the original file to compress it another way")
    assert err.count(note) == 1 and "--block-split" not in err  # before the run, once
    assert one_block_note(1, 4, "paragraph", compressed=3).startswith("already compressed: 3 of 4 steps")
    assert one_block_note(3, 4, "paragraph", compressed=2).endswith("cuts reasoning into more blocks")  # not most: the old note
