"""Summaries that say what was removed, on the real Codex rollout and Claude Code session.

- ``prune --encrypted-reasoning drop``: an edited Codex reasoning item goes out whole (its text
  sits beside ``encrypted_content``, docs/FORMAT.md); ``prune``'s summary and ``diff`` of its
  output count the same blocks removed and both say why a whole item went.
- The static "input tokens re-sent" row counts what the output holds: text removed under
  ``--signed-thinking edit`` or ``--encrypted-reasoning drop`` comes off; reasoning is counted
  apart as sealed only where it was left sealed (``--encrypted-reasoning keep``).
- ``score``, ``prune`` and ``diff`` count the blocks of sealed reasoning alike: apart from the
  candidates (formats/sealing.py: sealed reasoning is read as context, never a candidate).

Numbers are those of the fake scorer (``--model fake``, regex-words tokens; ``diff`` counts
with the embedded tokenizer). Sessions: ../shared/realdata (skipped when absent).
"""

import json

import pytest

from format_helpers import REALDATA, run_cli
from format_helpers import summary_value as value

CODEX = REALDATA / "codex_rollout" / "agentcmd_rollout-2025-09-24T20-12-23.jsonl"
CLAUDE = REALDATA / "claude_code" / "spotter_258c7280_main_session_slice.jsonl"
WHY = "encrypted reasoning can't be edited"


def needs(path):
    if not path.is_file():
        pytest.skip(f"real session not available at {path}")
    return path


def prune(capsys, path, out, *args):
    code, _, err = run_cli(capsys, "prune", str(path), "--model", "fake", "-o", str(out), *args)
    assert code == 0, err
    return err


def diff_text(capsys, a, b, *args):
    code, out, err = run_cli(capsys, "diff", str(a), str(b), "--model", "fake", "--width", "250", "--no-pager", *args)
    assert code == 0, err
    return out


def test_codex_drop_summary_and_diff_agree_on_blocks_removed_and_say_why(tmp_path, capsys):
    path = needs(CODEX)
    out = tmp_path / "pruned.jsonl"
    err = prune(capsys, path, out, "--encrypted-reasoning", "drop", "--block-split", "sentence")
    # BottomK chose 2 of step 11's 3 blocks and 1 of step 16's 2; their items went whole
    assert value(err, "reasoning blocks") == "20"
    assert value(err, "blocks removed") == f"5 (5 in 2 items dropped whole: {WHY}; --variant iclr chose 3 of them)"
    assert f"with encrypted_content ({WHY}): --encrypted-reasoning drop removed their items whole" in err
    # the dropped items are off the input re-sent (before: "149,449 -> 149,449 (0%); sealed reasoning not counted: 613")
    assert value(err, "input tokens re-sent, static") == "149,449 -> 148,624 (-0.6%)"

    text = diff_text(capsys, path, out, "--block-split", "sentence")
    assert f"step 11 · 3/3 blocks removed (item dropped whole: {WHY})" in text
    assert f"step 16 · 2/2 blocks removed (item dropped whole: {WHY})" in text
    assert "step 12 · 0/1 blocks removed · " in text  # a one-block step: a candidate BottomK kept, not sealed
    assert value(text, "reasoning blocks") == "20"
    assert value(text, "blocks removed") == f"5 (5 in 2 items dropped whole: {WHY})"

    code, js, _ = run_cli(capsys, "diff", str(path), str(out), "--model", "fake", "--block-split", "sentence", "--json")
    summary = json.loads(js)["summary"]
    assert code == 0
    assert (summary["blocks"], summary["removed"], summary["dropped_whole"], summary["dropped_whole_blocks"], summary["sealed_blocks"]) == (20, 5, 2, 5, 0)


def test_codex_keep_counts_the_asked_deletions_apart_as_sealed(tmp_path, capsys):
    err = prune(capsys, needs(CODEX), tmp_path / "kept.jsonl", "--encrypted-reasoning", "keep", "--block-split", "sentence")
    # nothing was written edited: the deletions BottomK asked for are what sealing costs
    assert value(err, "blocks removed") == "0"
    assert value(err, "input tokens re-sent, static") == "149,449 -> 149,449 (0%); sealed reasoning not counted: 613"


def test_codex_sealed_blocks_are_counted_alike_by_score_prune_and_diff(tmp_path, capsys):
    path = needs(CODEX)
    sealed = "0 (+17 sealed by the provider rule, not candidates)"
    code, _, err = run_cli(capsys, "score", str(path), "--model", "fake", "-o", str(tmp_path / "s.jsonl"))
    assert code == 0 and value(err, "reasoning blocks") == sealed  # before: "0"
    assert "all 17 are sealed by the provider rule" in err
    err = prune(capsys, path, tmp_path / "p.jsonl")
    assert value(err, "reasoning blocks") == sealed
    assert value(diff_text(capsys, path, tmp_path / "p.jsonl"), "reasoning blocks") == sealed  # before: "17"


def test_claude_code_signed_edit_is_taken_off_the_static_estimate(tmp_path, capsys):
    path = needs(CLAUDE)
    err = prune(capsys, path, tmp_path / "sealed.jsonl")
    # all 14 thinking parts sealed: nothing off, and the sealed reasoning re-sent is named apart
    assert value(err, "input tokens re-sent, static") == "12,187,060 -> 12,187,060 (0%); sealed reasoning not counted: 120,982"
    assert value(err, "reasoning blocks") == "0 (+26 sealed by the provider rule, not candidates)"
    assert value(diff_text(capsys, path, tmp_path / "sealed.jsonl"), "reasoning blocks") == "0 (+26 sealed by the provider rule, not candidates)"

    edited = tmp_path / "edited.jsonl"
    err = prune(capsys, path, edited, "--signed-thinking", "edit")
    # before: "12,187,060 -> 12,187,060 (0%); sealed reasoning not counted: 41,392"
    assert value(err, "input tokens re-sent, static") == "12,187,060 -> 12,145,668 (-0.3%)"
    assert (value(err, "reasoning blocks"), value(err, "blocks removed")) == ("26", "12")
    text = diff_text(capsys, path, edited)
    assert (value(text, "reasoning blocks"), value(text, "blocks removed")) == ("26", "12")


def test_diff_of_score_output_numbers_sealed_reasoning_as_score_did(tmp_path, capsys):
    path = needs(CLAUDE)
    scores = tmp_path / "edit.jsonl"
    code, _, err = run_cli(capsys, "score", str(path), "--model", "fake", "--signed-thinking", "edit", "-o", str(scores))
    assert code == 0 and value(err, "reasoning blocks") == "26" and value(err, "blocks selected") == "12"
    # scored with the signed thinking edited: the records number it, so diff reads it as candidates
    text = diff_text(capsys, scores, path)
    assert (value(text, "reasoning blocks"), value(text, "blocks removed")) == ("26", "12")
