"""Find the adapter for a file: by ``--format`` name, or by its structure.

Every adapter's ``sniff`` judges the same parsed head (:class:`iclr_cli.formats.sniff.Head`)
and answers with a scored :class:`~iclr_cli.formats.sniff.Match`; the highest score wins and
ties go to the adapter listed first. Adding a format is one line in ``_ADAPTER_MODULES`` plus
the module's own ``ADAPTER`` with its ``sniff`` (docs/FORMAT.md, "How a file's format is chosen").
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from iclr_cli.errors import InputError, UsageError
from iclr_cli.formats import database
from iclr_cli.formats.base import FormatAdapter
from iclr_cli.formats.sniff import HEAD_BYTES, Head, Match
from iclr_cli.jsonio import BOM, loads


def adapters() -> list[FormatAdapter]:
    """Every registered adapter, in sniffing order."""
    return [importlib.import_module(f"iclr_cli.formats.adapters.{name}").ADAPTER for name in _ADAPTER_MODULES]


# A module listed here exposes ``ADAPTER``. The order breaks ties between equal scores only
# (and is the order ``iclr formats`` lists): the specific agent logs first, then the chat
# message families, OpenAI chat last.
_ADAPTER_MODULES: list[str] = [
    "claude_code",
    "qwen_code",
    "pi",
    "goose",
    "opencode",
    "kilo",
    "iclr_jsonl",
    "codex",
    "mini_swe_agent",
    "swe_agent",
    "openhands",
    "gemini_cli",
    "pydantic_ai",
    "ai_sdk",
    "litellm_spend",
    "sharegpt",
    "langchain",
    "gemini",
    "openai_responses",
    "bedrock",
    "anthropic",
    "chat_lines",
    "openai_chat",
]


def names() -> list[str]:
    """Names ``--format`` accepts."""
    return [a.name for a in adapters()]


def get(name: str) -> FormatAdapter:
    """The adapter called ``name`` (``_`` and ``-`` alike: format names mix both).

    Raises:
        UsageError: listing the known formats when there is none by that name.
    """
    wanted = name.replace("_", "-").lower()  # claude_code or claude-code, ai-sdk or ai_sdk
    for adapter in adapters():
        if adapter.name.replace("_", "-") == wanted:
            return adapter
    raise UsageError(f"unknown format {name!r}; known formats: {', '.join(names())}")


@dataclass(frozen=True)
class Detection:
    """The adapter chosen for a file, with its :class:`Match`, and the other adapters whose
    sniff matched too (best first)."""

    adapter: FormatAdapter
    match: Match
    others: tuple[tuple[FormatAdapter, Match], ...] = ()

    def note(self, source: str) -> str | None:
        """One line for the summary when another adapter could read the file: which was
        chosen and why, what else matched, and how to choose it; None otherwise."""
        if not self.others:
            return None
        also = "; ".join(f"{a.name} ({m.reason})" for a, m in self.others)
        first = self.others[0][0].name
        return f"{source}: read as {self.adapter.name} ({self.match.reason}); also readable as {also}. Use --format {first} to read it that way"


def detect(data: bytes, source: str) -> FormatAdapter:
    """The adapter for ``data`` (see :func:`detect_why`)."""
    return detect_why(data, source).adapter


def detect_why(data: bytes, source: str) -> Detection:
    """The adapter whose ``sniff`` gives the head of ``data`` the highest score (the first
    listed on a tie), with every other match.

    Raises:
        InputError: when the file is empty or no adapter recognises it; the message lists
        every format tried, one per line, and says that none matched.
    """
    head = data[:HEAD_BYTES]
    if head.startswith(BOM):
        head = head[len(BOM) :]
    if not head.strip():
        raise InputError(source, "file is empty")
    if database.is_database(data):
        return _detect_database(data, source)
    head = _parseable_head(head)  # a JSONL file with a corrupt line is still text
    if _holds_nul(head):
        wide = _wide_without_bom(head)
        if wide is not None:
            raise InputError(source, f"looks like {wide} text without a byte order mark; save it as UTF-8, or with a byte order mark (iclr reads UTF-16 and UTF-32 with one)")
        at = data.find(NUL)
        raise InputError(source, f"not a text file (byte {at} is NUL: binary data, or compressed other than with gzip or zstd, which iclr reads); iclr reads trajectories as JSON or JSONL text")
    if (problem := _not_json(head)) is not None:
        raise InputError(source, f"not JSON or JSONL: {problem}; iclr reads trajectories as JSON or JSONL text")
    tried = adapters()
    found: list = []
    for size in _HEADS:
        # a first record larger than the head (a 100 KB system prompt first) is judged again on a
        # larger head before "no format matched" is said
        bigger = data[:size][len(BOM):] if data.startswith(BOM) else data[:size]
        parsed = Head.of(head if size == HEAD_BYTES else _parseable_head(bigger))
        found = [(adapter, m) for adapter in tried if (m := _sniff(adapter, parsed))]
        if found or len(data) <= size:
            break
    if found:
        best = max(range(len(found)), key=lambda k: (found[k][1].score, -k))
        adapter, match = found[best]
        others = sorted((f for k, f in enumerate(found) if k != best), key=lambda f: -f[1].score)
        return Detection(adapter, match, tuple(others))
    from iclr_cli.formats.reading import document_error, spread_document, try_document

    if spread_document(data) and try_document(data) is None:
        raise document_error(data, source)  # a cut document: say so, not "no format matched"
    width = max(len(a.name) for a in tried)
    listing = "\n".join(f"  {a.name:<{width}}  {a.description}" for a in tried)
    raise InputError(source, f"not a trajectory format iclr reads: none of the {len(tried)} formats tried matched:\n{listing}\nUse --format NAME to read it as one of them.")


_HEADS = (HEAD_BYTES, 1 << 20, 16 << 20)
"""Head sizes detection tries in turn: the first suffices unless a single field fills it."""


def _sniff(adapter: FormatAdapter, head: Head):
    """``adapter``'s match for ``head``; none when a value of an unforeseen shape trips its
    sniffer: a damaged record rules that format out, it never ends the run."""
    from iclr_cli.formats.reading import UNEXPECTED

    try:
        return adapter.sniff(head)
    except UNEXPECTED:
        return None


def _detect_database(data: bytes, source: str) -> Detection:
    """The adapter of a session database (:mod:`iclr_cli.formats.database`)."""
    head = database.head(data, source)
    found = [(a, m) for a in adapters() if hasattr(a, "sniff_database") and (m := a.sniff_database(head))]
    if not found:
        readers = [a for a in adapters() if getattr(a, "tables", ())]
        known = "; ".join(f"{a.name} (tables {', '.join(a.tables)})" for a in readers)
        tables = ", ".join(sorted(head.tables)[:12]) or "none"
        raise InputError(source, f"an SQLite database whose tables ({tables}) are not a session database iclr reads: {known}")
    found.sort(key=lambda f: -f[1].score)
    return Detection(found[0][0], found[0][1], tuple(found[1:]))


# UTF-32 and UTF-16 byte order marks (longest first): text whose code units hold NUL bytes.
NUL = b"\x00"
_WIDE_BOMS = (b"\x00\x00\xfe\xff", b"\xff\xfe\x00\x00", b"\xfe\xff", b"\xff\xfe")


def _wide_without_bom(head: bytes) -> str | None:
    """``UTF-16 (little-endian)`` etc. when ``head`` has the NUL pattern of ASCII text in
    16- or 32-bit code units (every second or three of every four bytes NUL, always at the
    same offsets), else None: JSON written as UTF-16 by a Windows tool that left out the BOM."""
    sample = head[:1024]
    for width, name in ((4, "UTF-32"), (2, "UTF-16")):
        units = len(sample) // width
        if units < 4:
            continue
        nul = [sum(sample[k] == 0 for k in range(offset, units * width, width)) / units for offset in range(width)]
        text = [k for k in range(width) if nul[k] < 0.1]
        if len(text) == 1 and all(nul[k] > 0.9 for k in range(width) if k != text[0]):
            order = "little" if text[0] == 0 else "big" if text[0] == width - 1 else None
            if order is not None:
                return f"{name} ({order}-endian)"
    return None


def _first_text_line(head: bytes) -> tuple[int, bytes]:
    """The 1-based number and bytes of the head's first non-blank line."""
    for number, raw in enumerate(head.split(b"\n"), 1):
        if raw.strip():
            return number, raw.strip()
    return 1, b""


def _not_json(head: bytes) -> str | None:
    """Why ``head`` is neither a JSON document nor JSONL (its first non-blank line opens no
    JSON object or list), or None: said before any format is tried, so plain text is not
    answered with the list of every format."""
    number, raw = _first_text_line(head)
    if raw[:1] in (b"{", b"["):
        return None
    try:
        value = loads(raw)
    except (ValueError, UnicodeDecodeError):
        preview = raw[:40].decode("utf-8", errors="replace")
        return f"line {number} is text ({preview!r}{'...' if len(raw) > 40 else ''}), not a JSON object or list"
    kind = {str: "string", bool: "boolean", int: "number", float: "number"}.get(type(value), "null")
    return f"line {number} is a JSON {kind}, not a JSON object or list"


def sniffed_head(data: bytes) -> Head:
    """The :class:`Head` an adapter's sniff is given for ``data`` (its first bytes, BOM off,
    complete lines that are not JSON left out)."""
    head = data[:HEAD_BYTES]
    return Head.of(_parseable_head(head[len(BOM) :] if head.startswith(BOM) else head))


def looks_like(found: Detection) -> str:
    """What a file named with the wrong ``--format`` looks like, and how to read it so."""
    name = found.adapter.name
    return f"it looks like {name} ({found.match.reason}): use --format {name}, or leave --format out"


def forced_error(adapter: FormatAdapter, data: bytes, source: str, exc: InputError) -> InputError:
    """The error to show when reading ``data`` as ``adapter`` (named with ``--format``) failed
    with ``exc``: ``exc`` itself when the file is detected as that format (a bad record in it);
    when its sniff matches but another format's matches better, ``exc`` with what the file
    looks like (an OpenAI reader fails on a LiteLLM spend-log row); else that the file does not
    look like it and what it looks like instead, from the sniffers."""
    if database.is_database(data):
        try:
            if hasattr(adapter, "sniff_database") and adapter.sniff_database(database.head(data, source)):
                return exc
        except InputError:
            return exc
    try:
        alike = adapter.sniff(sniffed_head(data))
    except Exception:  # a sniffer that cannot judge this head: keep the reader's own error
        return exc
    try:
        found = detect_why(data, source)
        looks = looks_like(found)
    except InputError as other:
        if alike or other.problem.startswith(("not a trajectory format", "file is empty", "truncated JSON document", "not a valid JSON document")):
            return exc  # no other reading to offer (a JSON syntax error, say): the reader's error says more
        looks = other.problem
    if alike and found.adapter.name == adapter.name:
        return exc  # a bad record of a file of this format
    where = (f"line {exc.line}: " if exc.line is not None else "") + (f"field {exc.field!r}: " if exc.field else "")
    problem = exc.problem.split(" (use --skip-bad-lines")[0]  # skipping lines would not help here
    empty = f"read as {adapter.name} ({adapter.description}), but "  # require_steps: said once above
    if problem.startswith(empty):
        problem = problem[len(empty):].split(". If it is another format")[0]
    if alike:  # readable as this format too (the detection note says so), but a record is not
        return InputError(source, f"read as {adapter.name} ({adapter.description}), but {where}{problem}; {looks}")
    return InputError(source, f"does not look like {adapter.name} ({adapter.description}); {looks}. Read as {adapter.name}: {where}{problem}")


def _holds_nul(head: bytes) -> bool:
    """Whether a head that is not UTF-16/32 text with a byte order mark holds a NUL byte:
    UTF-8 text (JSON included) never does, binary files nearly always do early on."""
    return not head.startswith(_WIDE_BOMS) and NUL in head


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
    if records and (NUL in tail or any(NUL in raw for raw in complete)):
        # NUL padding where a writer crashed (a preallocated or torn file) among JSONL records
        # is line damage, not a binary file: the reader names each such line and
        # --skip-bad-lines skips it, wherever in the file it sits
        return b"\n".join([*(raw for raw in kept if NUL not in raw), b"" if NUL in tail else tail])
    if not bad or records <= bad:
        return head
    return b"\n".join([*kept, tail])


def require_steps(adapter: FormatAdapter, source: str, steps: int, trajectories: int, held: str | None = None) -> None:
    """A file read as ``adapter``'s format must hold at least one assistant turn.

    ``held``: why the file's history is on the server (a Responses request continuing with
    ``previous_response_id``), said instead of a guess at another format.

    Raises:
        InputError: for a file that sniffed as the format but yielded no trajectory or no
        step, so that it is never taken for a pruned file.
    """
    if steps:
        return
    if held:
        raise InputError(source, f"continues a conversation whose history is held by the server ({held}): the file holds only the new items, no assistant turn, so there is nothing to score or prune. Save the whole conversation (the full input list, store: false) to prune it")
    what = "no trajectory" if not trajectories else "no assistant turn"
    raise InputError(source, f"read as {adapter.name} ({adapter.description}), but it holds {what}: nothing to score or prune. If it is another format, name it with --format")
