"""The agent's tools: bash, read_file, write_file and submit, bound to one task workspace.

Isolation (docs/replay.md, "Tools and the text protocol"): this is NOT a sandbox. What it does:

- ``bash`` runs ``bash -c COMMAND`` with the workspace as working folder, a minimal
  environment (``PATH`` = the Python running iclr, then /usr/local/bin, /usr/bin, /bin;
  ``HOME`` and ``TMPDIR`` inside the workspace; no API keys or other variables of the
  caller), in its own process group that is killed at the time limit, and with its output cut
  to a cap (head and tail kept) while it is read, so a runaway command cannot fill memory.
- ``read_file`` / ``write_file`` resolve the path (symlinks included) and refuse anything
  outside the workspace.

What it does not do: the command runs as the calling user with that user's full file
system, network and process rights. It can read or delete anything the user can, reach the
internet, start daemons that outlive the time limit by leaving the process group, and use
all CPU and memory. Run untrusted models or tasks inside a container or VM.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import orjson

SUBMIT = "submit"

TOOL_SPECS: list[dict] = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a bash command in the task workspace (the current folder). Returns exit code and output.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string", "description": "The command to run."}}, "required": ["command"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a text file inside the workspace.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string", "description": "Path relative to the workspace."}}, "required": ["path"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": "Create or overwrite a text file inside the workspace.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "Path relative to the workspace."}, "content": {"type": "string", "description": "The whole new file content."}},
                "required": ["path", "content"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": SUBMIT,
            "description": "Finish the task. Call this once the work is done; give the final answer if the task asks for one.",
            "parameters": {"type": "object", "properties": {"answer": {"type": "string", "description": "Final answer (may be empty)."}}, "required": []},
        },
    },
]


@dataclass(frozen=True)
class ToolLimits:
    """Per-call limits: ``timeout_s`` seconds of wall time for bash, ``output_cap`` characters
    of any tool output (head and tail kept)."""

    timeout_s: float = 30.0
    output_cap: int = 10_000


@dataclass(frozen=True)
class ToolResult:
    """What a tool call produced: the observation text, and the answer when it was ``submit``."""

    text: str
    submitted: str | None = None


def cap(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, keeping the head and the tail."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


class Workspace:
    """The task's working folder and the tools bound to it (see module docstring)."""

    def __init__(self, root: Path, limits: ToolLimits = ToolLimits()):
        self.root = Path(root).resolve()
        self.limits = limits

    def resolve(self, path: str) -> Path:
        """``path`` (relative to the workspace, or absolute) resolved; must lie inside.

        Raises:
            PermissionError: when the resolved path is outside the workspace.
        """
        target = (self.root / path).resolve()
        if target != self.root and self.root not in target.parents:
            raise PermissionError(f"path {path!r} is outside the workspace; only paths inside it are allowed")
        return target

    def env(self) -> dict[str, str]:
        tmp = self.root / ".tmp"
        tmp.mkdir(exist_ok=True)
        path = os.pathsep.join(dict.fromkeys([os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"]))
        return {"PATH": path, "HOME": str(self.root), "TMPDIR": str(tmp), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TERM": "dumb", "PYTHONDONTWRITEBYTECODE": "1"}

    def bash(self, command: str) -> str:
        """Run ``command``; returns ``exit code: N`` and the merged stdout/stderr, capped."""
        proc = subprocess.Popen(
            ["bash", "-c", command],
            cwd=self.root,
            env=self.env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        reader = _CappedReader(proc.stdout, self.limits.output_cap)
        reader.start()
        try:
            code = proc.wait(timeout=self.limits.timeout_s)
            status = f"exit code: {code}"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            status = f"command timed out after {self.limits.timeout_s:g} s and was killed"
        reader.join(timeout=5)
        return f"{status}\n{reader.text()}"

    def read_file(self, path: str) -> str:
        target = self.resolve(path)
        with open(target, "rb") as f:
            data = f.read(self.limits.output_cap * 4 + 1)
        return cap(data.decode("utf-8", errors="replace"), self.limits.output_cap)

    def write_file(self, path: str, content: str) -> str:
        target = self.resolve(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        return f"wrote {len(content)} characters to {target.relative_to(self.root)}"

    def call(self, name: str, arguments: str | dict) -> ToolResult:
        """Run tool ``name`` with JSON ``arguments``; problems come back as observation text
        (the agent sees them and may correct itself), never as exceptions."""
        if isinstance(arguments, str):
            try:
                args = orjson.loads(arguments) if arguments.strip() else {}
            except orjson.JSONDecodeError as exc:
                return ToolResult(f"error: arguments are not valid JSON ({exc}); send a JSON object")
        else:
            args = arguments
        if not isinstance(args, dict):
            return ToolResult("error: arguments must be a JSON object")
        try:
            if name == "bash":
                return ToolResult(self.bash(str(args["command"])))
            if name == "read_file":
                return ToolResult(self.read_file(str(args["path"])))
            if name == "write_file":
                return ToolResult(self.write_file(str(args["path"]), str(args.get("content", ""))))
            if name == SUBMIT:
                answer = args.get("answer", "")
                return ToolResult("submitted", submitted=answer if isinstance(answer, str) else orjson.dumps(answer).decode())
        except KeyError as exc:
            return ToolResult(f"error: missing argument {exc.args[0]!r} for tool {name}")
        except OSError as exc:
            return ToolResult(f"error: {exc}")
        known = ", ".join(s["function"]["name"] for s in TOOL_SPECS)
        return ToolResult(f"error: unknown tool {name!r}; available tools: {known}")


class _CappedReader(threading.Thread):
    """Drains a pipe, keeping the first and last ``limit // 2`` bytes only."""

    def __init__(self, pipe, limit: int):
        super().__init__(daemon=True)
        self.pipe, self.half = pipe, max(1, limit // 2)
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_len = 0
        self.total = 0

    def run(self) -> None:
        for chunk in iter(lambda: self.pipe.read1(65536), b""):
            self.total += len(chunk)
            room = self.half - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            if chunk:
                self.tail.append(chunk)
                self.tail_len += len(chunk)
                while self.tail_len - len(self.tail[0]) >= self.half:
                    self.tail_len -= len(self.tail.popleft())
        self.pipe.close()

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        tail = b"".join(self.tail)
        if self.total <= 2 * self.half:
            return head + tail.decode("utf-8", errors="replace")
        tail = tail[-self.half :]
        return f"{head}\n[... {self.total - len(self.head) - len(tail)} bytes cut ...]\n{tail.decode('utf-8', errors='replace')}"


# Text protocol, for models whose server cannot do native tool calls (docs/replay.md).
_TOOL_CALL_TAG = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.DOTALL)
_FENCE = re.compile(r"```(bash|sh|shell|python|python3|py)[^\S\n]*\n(.*?)```", re.DOTALL)

TEXT_PROTOCOL = """\
To use a tool, first say briefly what you think, then write one tool call, in this form:
<tool_call>{"name": "TOOL", "arguments": {...}}</tool_call>
Tools: bash {"command": str}, read_file {"path": str}, write_file {"path": str, "content": str}, submit {"answer": str}.
A fenced ```bash block is also run as a bash command, and a fenced ```python block with python.
Call submit when you are done."""


@dataclass(frozen=True)
class TextCalls:
    """Tool calls found in a reply's text.

    ``start`` is the offset where the first call begins: the text before it is the model's
    THOUGHT (SWE-agent / mini-swe-agent style), the rest is the action. ``calls`` holds
    ``(name, arguments)`` pairs in order; empty (and ``start`` = len(text)) when none.
    """

    start: int
    calls: list[tuple[str, dict | str]]


def parse_text_calls(content: str | None) -> TextCalls:
    """``<tool_call>{"name", "arguments"}</tool_call>`` tags, else a reply that is one bare JSON
    call, else the first fenced bash or python block (python runs as ``python3 -``)."""
    if not content:
        return TextCalls(0, [])
    calls: list[tuple[str, dict | str]] = []
    tags = list(_TOOL_CALL_TAG.finditer(content))
    bodies = [(m.start(), m.group(1)) for m in tags] or [(len(content) - len(content.lstrip()), content.strip())]
    start = None
    for offset, body in bodies:
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("name"), str):
            args = obj.get("arguments", obj.get("parameters", {}))
            calls.append((obj["name"], args if isinstance(args, (dict, str)) else {}))
            start = offset if start is None else start
    if not calls:
        m = _FENCE.search(content)
        if m:
            code = m.group(2)
            if m.group(1).startswith("py"):
                code = f"python3 - <<'ICLR_PY_EOF'\n{code}\nICLR_PY_EOF\n"
            calls.append(("bash", {"command": code}))
            start = m.start()
    return TextCalls(len(content) if start is None else start, calls)
