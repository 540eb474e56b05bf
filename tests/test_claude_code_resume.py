"""End to end: the real Claude Code CLI resumes a session that ``iclr prune`` wrote back.

Claude Code (from npm) runs three tool-calling steps against a scripted Anthropic upstream
whose replies name DeepSeek's model (plain-text thinking under the per-message model rule);
its own session file is then made to open with the bookkeeping records current releases write
before any turn (``last-prompt``, ``mode``, ``permission-mode``, ``ai-title``), pruned in place
with no ``--format``, and resumed with ``claude --resume``. The resumed request must carry
each earlier step's thinking exactly as iclr wrote it, and every bookkeeping line must come
back byte for byte. Skipped when npm or the CLI is missing (tests/test_serve_agents.py).
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from format_helpers import run_cli
from serve_fixtures import scripted_upstream
from test_serve_agents import _run_claude, clis, reasoning  # noqa: F401 (clis is a fixture)
from wire_fixtures import anthropic_reply, text, thinking, tool_use

pytestmark = pytest.mark.server
MODEL = "deepseek-v4-pro"


def _script(steps: int):
    def reply(body, index):
        turns = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
        asked = json.dumps(body.get("messages", [])[-1:])
        if not body.get("tools") or (turns >= steps and "step 3" not in asked):
            return anthropic_reply([text("Done.")], stream=bool(body.get("stream")), model=MODEL)
        blocks = [thinking(reasoning(turns)), tool_use(f"toolu_{turns}", "Bash", {"command": f"echo step {turns}", "description": "Echo"})]
        return anthropic_reply(blocks, stream=bool(body.get("stream")), message_id=f"msg_{turns}", model=MODEL)

    return [reply] * 20


def test_claude_code_resumes_a_pruned_session_that_opens_with_bookkeeping(clis, tmp_path, capsys):
    env = {"ANTHROPIC_MODEL": MODEL}
    with scripted_upstream(_script(3)) as up:
        run = _run_claude(clis, up.url, tmp_path, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    session = next((tmp_path / ".claude" / "projects").rglob("*.jsonl"))
    sid = session.stem
    lines = session.read_bytes().splitlines(keepends=True)
    trailing = [line for line in lines if json.loads(line)["type"] not in ("user", "assistant", "attachment", "queue-operation", "system")]
    turns = [line for line in lines if line not in trailing]
    opening = trailing + [json.dumps(v, separators=(",", ":")).encode() + b"\n" for v in (
        {"type": "mode", "mode": "default", "sessionId": sid},
        {"type": "permission-mode", "permissionMode": "default", "sessionId": sid},
        {"type": "ai-title", "aiTitle": "Echo three steps", "sessionId": sid})]
    session.write_bytes(b"".join(opening + turns))
    assert json.loads(opening[0])["type"] == "last-prompt"  # what this release wrote, moved first

    code, _, err = run_cli(capsys, "prune", str(session), "--model", "fake", "-i")
    assert code == 0, err
    pruned = session.read_bytes().splitlines(keepends=True)
    assert pruned[: len(opening)] == opening and len(pruned) == len(opening) + len(turns)
    written = {}
    for line in pruned:
        value = json.loads(line)
        for block in value.get("message", {}).get("content", []) if value["type"] == "assistant" else []:
            if block.get("type") == "thinking":
                written[value["message"]["id"]] = block["thinking"]
    assert sorted(written) == ["msg_0", "msg_1", "msg_2"]
    assert all(t.split("\n\n").count("[SKIP]") == 4 for t in written.values())  # BottomK at rho = 0.8 of 5 blocks

    with scripted_upstream(_script(3)) as up:
        resumed = subprocess.run(
            [str(clis / "claude"), "--resume", sid, "-p", "Now echo step 3.", "--allowedTools", "Bash"],
            cwd=tmp_path / "work", capture_output=True, text=True, timeout=360,
            env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "ANTHROPIC_BASE_URL": up.url.removesuffix("/v1"),
                 "ANTHROPIC_API_KEY": "sk-ant-test", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1", **env})
        bodies = [json.loads(raw) for raw, path in zip(up.raw, up.paths) if path.startswith("/v1/messages") and "count_tokens" not in path]
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    first = next(b for b in bodies if b.get("tools"))
    sent = [block["thinking"] for m in first["messages"] if m["role"] == "assistant" for block in m["content"] if block.get("type") == "thinking"]
    assert sent == [written[f"msg_{i}"] for i in range(3)]
