"""Find the adapter for a file: by ``--format`` name, or by sniffing its first bytes.

Adapters are listed most specific first: the first whose ``sniff`` accepts the head wins.
"""

from __future__ import annotations

import importlib

from iclr_cli.errors import InputError, UsageError
from iclr_cli.formats.base import Document, FormatAdapter
from iclr_cli.jsonio import BOM, loads, read_input

HEAD_BYTES = 64 * 1024


def adapters() -> list[FormatAdapter]:
    """Every registered adapter, in sniffing order."""
    return [importlib.import_module(f"iclr_cli.formats.{name}").ADAPTER for name in _ADAPTER_MODULES]


# Most specific first. A module listed here exposes ``ADAPTER``.
_ADAPTER_MODULES: list[str] = [
    "claude_code",
    "pi",
    "iclr_jsonl",
    "codex",
    "mini_swe_agent",
    "swe_agent",
    "openhands",
    # Gemini contents have a "role" as chat messages do, but typed "parts" and never a
    # "content" key: checked before the two message formats so they are never read as one
    "gemini",
    "openai_responses",
    # after the specific sniffs above: a Claude-run SWE-agent / OpenHands log may hold
    # Anthropic-style blocks, while those markers never occur in a Messages transcript
    "anthropic",
    "openai_chat",
]


def names() -> list[str]:
    """Names ``--format`` accepts."""
    return [a.name for a in adapters()]


def get(name: str) -> FormatAdapter:
    """The adapter called ``name``.

    Raises:
        UsageError: listing the known formats when there is none by that name.
    """
    for adapter in adapters():
        if adapter.name == name:
            return adapter
    raise UsageError(f"unknown format {name!r}; known formats: {', '.join(names())}")


def detect(data: bytes, source: str) -> FormatAdapter:
    """The first adapter whose ``sniff`` accepts the head of ``data``.

    Raises:
        InputError: when the file is empty or no adapter recognises it; the message lists
        every format tried, one per line, and says that none matched.
    """
    head = data[:HEAD_BYTES]
    if head.startswith(BOM):
        head = head[len(BOM) :]
    if not head.strip():
        raise InputError(source, "file is empty")
    head = _parseable_head(head)
    tried = adapters()
    for adapter in tried:
        if adapter.sniff(head):
            return adapter
    width = max(len(a.name) for a in tried)
    listing = "\n".join(f"  {a.name:<{width}}  {a.description}" for a in tried)
    raise InputError(source, f"not a trajectory format iclr reads: none of the {len(tried)} formats tried matched:\n{listing}\nUse --format NAME to read it as one of them.")


def _parseable_head(head: bytes) -> bytes:
    """``head`` without its complete lines that are not JSON, when it reads as JSONL (more
    of its complete lines parse as a JSON object or list than fail): one cut or corrupt
    early line must not make a JSONL file look like another format. The bad line is still
    reported (or skipped with --skip-bad-lines) when the file is read. A whole JSON document
    spread over lines is left as it is: most of its lines do not parse on their own.
    The last, possibly partial, line is kept for the sniffers that judge it."""
    if b"\n" not in head:
        return head
    *complete, tail = head.split(b"\n")
    kept: list[bytes] = []
    records = bad = 0
    for raw in complete:
        if raw.strip():
            try:
                value = loads(raw)
            except (ValueError, UnicodeDecodeError):
                bad += 1
                continue
            records += isinstance(value, (dict, list))
        kept.append(raw)
    if not bad or records <= bad:
        return head
    return b"\n".join([*kept, tail])


def require_steps(adapter: FormatAdapter, source: str, steps: int, trajectories: int) -> None:
    """A file read as ``adapter``'s format must hold at least one assistant turn.

    Raises:
        InputError: for a file that sniffed as the format but yielded no trajectory or no
        step, so that it is never taken for a pruned file (issue 9 section 1).
    """
    if steps:
        return
    what = "no trajectory" if not trajectories else "no assistant turn"
    raise InputError(source, f"read as {adapter.name} ({adapter.description}), but it holds {what}: nothing to score or prune. If it is another format, name it with --format")


def load(path: str, fmt: str | None = None, *, skip_bad_lines: bool = False, allow_empty: bool = False) -> tuple[FormatAdapter, Document]:
    """Read ``path`` (``-`` for stdin) with the named adapter or the detected one.
    ``allow_empty`` accepts a file with no step (a replay run that ended before its first
    turn); user input never gets it.

    Raises:
        InputError: for an unreadable or unknown file, a bad record, or one with no step.
    """
    data = read_input(path)
    adapter = get(fmt) if fmt else detect(data, path)
    doc = adapter.load(data, path, skip_bad_lines=skip_bad_lines)
    if not allow_empty:
        require_steps(adapter, path, sum(len(t.steps) for t in doc.trajectories), len(doc.trajectories))
    return adapter, doc
