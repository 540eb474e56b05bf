"""A conversation as JSONL with one chat message per line (``--format chat-lines``).

Each line is one OpenAI chat-completions message (``{"role": ..., "content": ...}``, with
``tool_calls``, ``role: "tool"`` results and any reasoning field or inline ``<think>`` the
``openai`` format reads); the whole file is one conversation, in line order. Chat loggers
and fine-tuning exports write this shape (a message appended per line as the conversation
goes); a file of one *conversation* per line (``{"messages": [...]}`` or a list per line) is
the ``openai`` format instead.

Messages are read by :mod:`iclr_cli.formats.openai_messages` (the same reader as the
``openai`` format, ``replay`` and ``serve``), each message's errors and reports naming its
own line. Write-back is the one engine's (:mod:`iclr_cli.formats.writeback`): only lines
holding edited reasoning are re-serialised, in their own style; every other line, blank
lines and line ends included, comes back byte for byte. The trajectory id is ``FILE#0``.
"""

from __future__ import annotations

from iclr_cli.errors import InputError
from iclr_cli.formats.base import Document
from iclr_cli.formats.openai_messages import read_at
from iclr_cli.formats.reading import base_name, read_lines, sealed_warnings
from iclr_cli.formats.sniff import STRUCTURE, Head, Match
from iclr_cli.formats.writeback import WriteBackAdapter
from iclr_cli.jsonl import BAD_LINE

_SNIFF_LINES = 8
_MESSAGE_KEYS = frozenset({"content", "tool_calls", "tool_call_id", "reasoning_content", "reasoning", "name", "function_call", "refusal"})


def _is_message(value: object) -> bool:
    return isinstance(value, dict) and isinstance(value.get("role"), str) and bool(_MESSAGE_KEYS & value.keys())


class ChatLinesAdapter(WriteBackAdapter):
    """JSONL of one chat message per line, the file one conversation (see module docstring)."""

    name = "chat-lines"
    description = "chat messages, one per JSONL line, the file one conversation ({role, content} per line)"

    def sniff(self, head: Head | bytes) -> Match | None:
        """A match for JSONL whose first lines are chat messages (an object with a string
        ``role`` and ``content`` or ``tool_calls``): the first line and at least three in four
        of them, two or more, one with role ``assistant``. A line that is not one (a message
        that lost its ``role``) is then named by :meth:`load`, instead of the file matching no
        format at all; a file whose lines are all messages matches more surely. Agent logs that
        wrap their messages (``type``, ``message``) have no top-level ``role`` and do not match."""
        head = Head.of(head)
        if not head.lines:
            return None
        first = [r for r in head.records[:_SNIFF_LINES] if r is not None]
        messages = [r for r in first if _is_message(r)]
        if len(messages) < 2 or not _is_message(first[0]) or 4 * len(messages) < 3 * len(first):
            return None
        if not any(r["role"] == "assistant" for r in messages):
            return None
        sure = len(messages) == len(first)
        return Match(STRUCTURE + sure, "one chat message per JSONL line ('role' and 'content' on each line)")

    def load(self, data: bytes, source: str, *, skip_bad_lines: bool = False) -> Document:
        """The file as one trajectory (see the module docstring).

        Raises:
            InputError: for an empty file, or a line that is not a chat message (naming the
                line and field; with ``skip_bad_lines`` such a line is passed through
                unscored and named in a warning).
        """
        warnings: list[str] = []
        records = read_lines(data, source, skip_bad_lines=skip_bad_lines, warnings=warnings)
        lines = records.lines or []
        kept: list[int] = []
        for rec, line in enumerate(lines):
            value = line.value
            if value is None or value is BAD_LINE:
                continue
            if not isinstance(value, dict) or not isinstance(value.get("role"), str):
                problem = "line is not a chat message (an object with a string 'role')"
                if not skip_bad_lines:
                    raise InputError(source, problem, line=line.number, field=None if not isinstance(value, dict) else "role")
                warnings.append(f"{source}:{line.number}: passed through unscored: {problem}")
                records.values[rec] = BAD_LINE
                continue
            kept.append(rec)
        traj = read_at([records.values[rec] for rec in kept], None, f"{base_name(source)}#0", [() for _ in kept],
                       source=source, line=None, meta={"format": self.name}, refs=[(rec,) for rec in kept],
                       lines=[lines[rec].number for rec in kept])
        warnings += sealed_warnings(source, list(traj.sealed))
        return Document(self.name, source, [traj], records, warnings, unrecognised=list(traj.unrecognised))


ADAPTER = ChatLinesAdapter()
