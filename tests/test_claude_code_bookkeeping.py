"""Claude Code sessions that open with bookkeeping records, and prompts queued while the agent
worked (case ``../shared/cases/turn6/02a``).

Current Claude Code writes ``last-prompt``, ``mode``, ``permission-mode``, ``ai-title`` and
``custom-title`` lines before any turn; a session is recognised by its structure, every
bookkeeping line comes back byte for byte, and a prompt typed while the agent worked (an
``attachment`` of type ``queued_command``, which Claude Code sends to the model as a user
message) is in the scorer's context.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iclr_cli.formats import registry
from iclr_cli.formats.adapters.claude_code import ADAPTER
from format_helpers import run_cli

CASE = Path(__file__).resolve().parents[2] / "shared" / "cases" / "turn6" / "02a-claude-code-last-prompt-first.jsonl"
SAMPLE = Path(__file__).resolve().parents[1] / "sample_trajectories" / "claude_code_session.jsonl"
SID = "7c2e9b14-3d5a-4f60-8e1b-92a4c6d8f0e3"


def case_bytes() -> bytes:
    if not CASE.exists():
        pytest.skip(f"{CASE} is not beside the repository")
    return CASE.read_bytes()


def test_the_case_is_detected_pruned_and_its_bookkeeping_kept_byte_for_byte(capsys, tmp_path):
    src = tmp_path / "session.jsonl"
    src.write_bytes(case_bytes())
    assert registry.detect(src.read_bytes(), str(src)).name == "claude_code"
    code, _, err = run_cli(capsys, "prune", str(src), "--variant", "delete-all", "-o", str(tmp_path / "auto.jsonl"))
    assert code == 0, err
    code, _, err = run_cli(capsys, "prune", str(src), "--variant", "delete-all", "--format", "claude_code", "-o", str(tmp_path / "forced.jsonl"))
    assert code == 0, err
    out = (tmp_path / "auto.jsonl").read_bytes()
    assert out == (tmp_path / "forced.jsonl").read_bytes()
    before, after = src.read_bytes().splitlines(keepends=True), out.splitlines(keepends=True)
    assert len(after) == len(before) == 15
    changed = [i for i, (a, b) in enumerate(zip(before, after)) if a != b]
    assert changed == [6, 9, 12]  # the three thinking lines; the five bookkeeping lines and the rest are the same bytes
    for i in changed:
        old, new = json.loads(before[i])["message"]["content"][0], json.loads(after[i])["message"]["content"][0]
        # DeepSeek's Anthropic endpoint: plain text under the per-message model rule, its signature key kept
        assert new == {"type": "thinking", "thinking": "", "signature": old["signature"]} and old["thinking"]


def test_a_session_opening_with_bookkeeping_of_types_not_known_here_is_still_one(tmp_path):
    body = case_bytes().splitlines(keepends=True)
    future = [json.dumps({"type": f"future-{i}", "value": i, "sessionId": SID}).encode() + b"\n" for i in range(30)]
    data = b"".join(future + body)
    assert registry.detect(data, "s.jsonl").name == "claude_code"
    doc = ADAPTER.load(data, "s.jsonl")
    assert len(doc.trajectories) == 1 and doc.trajectories[0].id == SID and len(doc.trajectories[0].steps) == 3
    assert ADAPTER.dump(doc, doc.trajectories) == data


def test_typed_records_of_another_shape_are_not_taken_for_a_session():
    # typed lines with no session keys and no Claude Code turn: not a Claude Code session
    lines = [{"type": "mode", "mode": "x"}, {"type": "user", "content": "hi"}, {"type": "assistant", "content": "ok"}]
    data = b"".join(json.dumps(v).encode() + b"\n" for v in lines)
    assert ADAPTER.sniff(data) is None


def _queued(prompt, sidechain: bool = False) -> dict:
    return {"parentUuid": "u-003", "isSidechain": sidechain, "type": "attachment", "sessionId": SID, "uuid": "q-1",
            "attachment": {"type": "queued_command", "commandMode": "prompt", "origin": {"kind": "human"}, "prompt": prompt}}


@pytest.mark.parametrize("prompt", ["Also keep the old URLs working.", [{"type": "text", "text": "Also keep"}, {"type": "image", "source": {}},
                                                                         {"type": "text", "text": "the old URLs working."}]])
def test_a_prompt_queued_while_the_agent_worked_is_in_the_scorers_context(prompt):
    lines = case_bytes().splitlines(keepends=True)
    # after the second step's tool result (line 12), before the third step
    data = b"".join(lines[:12] + [json.dumps(_queued(prompt)).encode() + b"\n"] + lines[12:])
    doc = ADAPTER.load(data, "s.jsonl")
    steps = doc.trajectories[0].steps
    queued = [(i, p.kind, p.text) for i, s in enumerate(steps) for p in s.parts if p.label == "queued_command"]
    text = "Also keep the old URLs working." if isinstance(prompt, str) else "Also keep\n\nthe old URLs working."
    assert queued == [(1, "observation", text)]
    assert ADAPTER.dump(doc, doc.trajectories) == data
    # a sub-agent's queued prompt is not the main session's
    side = b"".join(lines[:12] + [json.dumps(_queued(prompt, sidechain=True)).encode() + b"\n"] + lines[12:])
    assert not [p for s in ADAPTER.load(side, "s.jsonl").trajectories[0].steps for p in s.parts if p.label == "queued_command"]


def test_a_folder_run_counts_the_files_it_did_not_read(capsys, tmp_path):
    folder = tmp_path / "sessions"
    folder.mkdir()
    (folder / "a.jsonl").write_bytes(case_bytes())
    (folder / "notes.jsonl").write_text("a note beside the sessions\n")
    code, out, err = run_cli(capsys, "prune", str(folder), "--variant", "delete-all", "-o", str(tmp_path / "out"))
    assert code == 0, err
    assert (tmp_path / "out" / "a.jsonl").exists() and not (tmp_path / "out" / "notes.jsonl").exists()
    said = out + err
    assert "total: 1 of 2 files" in said
    assert f"1 of 2 files skipped, not read as a trajectory ({folder / 'notes.jsonl'})" in said
