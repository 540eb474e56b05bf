"""The agent's tools: workspace confinement, time limit, output cap, minimal environment."""

from __future__ import annotations

import os
import time

import pytest

from iclr_cli.replay.tools import ToolLimits, Workspace, cap, parse_text_calls


def test_paths_outside_the_workspace_are_refused(tmp_path):
    ws = Workspace(tmp_path / "ws")
    (tmp_path / "ws").mkdir()
    (tmp_path / "secret.txt").write_text("s")
    os.symlink(tmp_path / "secret.txt", tmp_path / "ws" / "link.txt")
    for path in ("../secret.txt", str(tmp_path / "secret.txt"), "link.txt", "sub/../../secret.txt"):
        assert "outside the workspace" in ws.call("read_file", {"path": path}).text
    assert "outside the workspace" in ws.call("write_file", {"path": "../x.txt", "content": "x"}).text
    assert not (tmp_path / "x.txt").exists()


def test_write_then_read_inside(tmp_path):
    ws = Workspace(tmp_path)
    assert ws.call("write_file", {"path": "a/b.txt", "content": "hello"}).text == "wrote 5 characters to a/b.txt"
    assert ws.call("read_file", {"path": "a/b.txt"}).text == "hello"
    assert ws.call("read_file", {"path": "missing.txt"}).text.startswith("error:")


def test_bash_time_limit_kills_the_process_group(tmp_path):
    """A background child of the command is killed with it: had it survived, it would have
    written late.txt two seconds in (and the call would have waited for it)."""
    ws = Workspace(tmp_path, ToolLimits(timeout_s=1))
    out = ws.bash("(sleep 2; touch late.txt) & sleep 30; echo never")
    assert out.startswith("command timed out after 1 s")
    assert "never" not in out
    assert not (tmp_path / "late.txt").exists()
    time.sleep(2.5)  # past the moment a surviving child would have written it
    assert not (tmp_path / "late.txt").exists()


def test_bash_output_is_capped_head_and_tail(tmp_path):
    ws = Workspace(tmp_path, ToolLimits(output_cap=1000))
    out = ws.bash("echo START; seq 1 200000; echo END")
    assert len(out) < 1200
    assert "START" in out and "END" in out and "bytes cut" in out


def test_bash_environment_is_minimal(tmp_path, monkeypatch):
    monkeypatch.setenv("SECRET_TOKEN", "xyz")
    out = Workspace(tmp_path).bash("env | sort; pwd")
    assert "SECRET_TOKEN" not in out
    assert f"HOME={tmp_path.resolve()}" in out
    assert out.rstrip().endswith(str(tmp_path.resolve()))


def test_submit_and_unknown_tool(tmp_path):
    ws = Workspace(tmp_path)
    assert ws.call("submit", {"answer": "42"}).submitted == "42"
    assert ws.call("submit", "").submitted == ""
    assert "unknown tool 'rm'" in ws.call("rm", {}).text
    assert "missing argument 'command'" in ws.call("bash", {}).text


def test_cap():
    assert cap("abc", 10) == "abc"
    assert cap("a" * 50 + "b" * 50, 20) == "a" * 10 + "\n[... 80 characters cut ...]\n" + "b" * 10


@pytest.mark.parametrize(
    "content, start, expected",
    [
        ('<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>', 0, [("bash", {"command": "ls"})]),
        ('  {"name": "submit", "arguments": {"answer": "1"}}', 2, [("submit", {"answer": "1"})]),
        ("Run this:\n```bash\nls -la\n```\nthen more", 10, [("bash", {"command": "ls -la\n"})]),
        ("I think.\n\n```python\nprint(1)\n```", 10, [("bash", {"command": "python3 - <<'ICLR_PY_EOF'\nprint(1)\n\nICLR_PY_EOF\n"})]),
        ('Plan.\n<tool_call>{"name": "read_file", "parameters": {"path": "a"}}</tool_call><tool_call>{"name": "submit"}</tool_call>', 6, [("read_file", {"path": "a"}), ("submit", {})]),
        ("Just chatting.", 14, []),
        ("<tool_call>not json</tool_call>", 31, []),
        (None, 0, []),
    ],
)
def test_text_calls(content, start, expected):
    found = parse_text_calls(content)
    assert (found.start, found.calls) == (start, expected)


def test_python_fence_runs(tmp_path):
    [(name, args)] = parse_text_calls("```python\nprint(6 * 7)\n```").calls
    assert Workspace(tmp_path).call(name, args).text == "exit code: 0\n42\n"
