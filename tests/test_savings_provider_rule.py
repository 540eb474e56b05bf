"""One provider rule in every command: ``iclr savings`` seals what ``prune`` seals.

A Claude Code session run on DeepSeek's Anthropic endpoint (case
``../shared/cases/turn6/02a``) holds signed thinking whose provider does not check the
signature: ``prune`` edits it under the per-message model rule, so ``savings`` must count it as
editable, not as Anthropic's sealed reasoning; a message of the same session answered by Claude
stays sealed in both.
"""

from __future__ import annotations

import json

import pytest

from format_helpers import run_cli
from test_claude_code_bookkeeping import case_bytes


def _session(tmp_path, claude_messages: set[str]):
    """The case with the messages ``claude_messages`` (by ``message.id``) answered by Claude."""
    out = []
    for line in case_bytes().splitlines(keepends=True):
        value = json.loads(line)
        if value.get("type") == "assistant" and value["message"]["id"] in claude_messages:
            value["message"]["model"] = "claude-opus-4-8"
            line = json.dumps(value).encode() + b"\n"
        out.append(line)
    path = tmp_path / "session.jsonl"
    path.write_bytes(b"".join(out))
    return path


def _savings(capsys, path) -> dict:
    code, out, err = run_cli(capsys, "savings", str(path), "--variant", "delete-all", "--json", "--no-cache")
    assert code == 0, err
    (row,) = json.loads(out)["data"]
    return row


@pytest.mark.parametrize("claude", [set(), {"msg_01A"}, {"msg_01A", "msg_02B", "msg_03C"}])
def test_savings_seals_exactly_what_prune_leaves_sealed(capsys, tmp_path, claude):
    path = _session(tmp_path, claude)
    row = _savings(capsys, path)
    code, _, err = run_cli(capsys, "prune", str(path), "--variant", "delete-all", "-o", str(tmp_path / "out.jsonl"))
    assert code == 0, err
    kept = [json.loads(line)["message"]["id"] for line in (tmp_path / "out.jsonl").read_bytes().splitlines()
            if b'"thinking"' in line and json.loads(line)["message"]["content"][0]["thinking"]]
    assert sorted(kept) == sorted(claude)  # prune empties every thinking block but Claude's
    if not claude:
        assert row["sealed_tokens"] == 0 and row["sealed"] == []
        assert row["input_tokens_with_writeback"] < row["input_tokens"]
    elif len(claude) == 3:
        assert row["sealed_tokens"] == row["reasoning_tokens_resent"] > 0
        assert row["input_tokens_with_writeback"] == row["input_tokens"]
    else:
        assert 0 < row["sealed_tokens"] < row["reasoning_tokens_resent"]
        assert row["input_tokens_with_writeback"] < row["input_tokens"]
