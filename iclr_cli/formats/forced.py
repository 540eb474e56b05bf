"""A file named with ``--format NAME`` that the detected format reads better.

Many adapters read more than their own files: the chat-message families overlap (an OpenAI
reader takes an Anthropic list, an Anthropic reader an AI SDK list), so reading another
agent's file as NAME often succeeds, finds no reasoning or a part of it, and exits as if the
file had nothing to score. :func:`registry.forced_error` covers the reads that fail; this
module covers the ones that succeed but see less than the format the file was detected as
(docs/FORMAT.md, "How a file's format is chosen"):

- :func:`check_unlike`, before the read: when NAME's sniff does not match the file and the
  detected format's reading is better (:class:`Reading`), the file does not look like NAME.
  Only this rare case reads the file three times (NAME, the detected format, then the read).
- :func:`check_nothing`, after the read: when NAME's sniff matches but its reading holds no
  reasoning part and the detected format's does, the user is told so and where the reasoning
  is, instead of "nothing to score".
"""

from __future__ import annotations

from dataclasses import dataclass

from iclr_cli.errors import InputError
from iclr_cli.formats import registry
from iclr_cli.formats.base import Document, FormatAdapter


@dataclass(frozen=True)
class Reading:
    """What an adapter read from a file: its scorable reasoning parts, the assistant-turn
    parts it could not read, and the characters of every part (prompt included; a reader
    that passes over tool calls sees fewer)."""

    reasoning: int
    unrecognised: int
    chars: int

    @staticmethod
    def of(docs: list[Document]) -> Reading:
        trajectories = [t for d in docs for t in d.trajectories]
        parts = [p for t in trajectories for p in (*t.prompt, *(q for s in t.steps for q in s.parts))]
        reasoning = sum(p.is_scorable_reasoning for p in parts)
        return Reading(reasoning, sum(len(d.unrecognised) for d in docs), sum(len(p.text) for p in parts))

    def worse_than(self, other: Reading) -> bool:
        """More reasoning wins, then fewer unread parts, then more text seen."""
        return (self.reasoning, -self.unrecognised, self.chars) < (other.reasoning, -other.unrecognised, other.chars)

    def shortfall(self, other: Reading, name: str) -> str:
        """What this reading misses that ``other`` (``name``'s) has, in words."""
        if self.reasoning < other.reasoning:
            return f"{self.reasoning} reasoning part(s), where {name} reads {other.reasoning}"
        if self.unrecognised > other.unrecognised:
            theirs = f"only {other.unrecognised}" if other.unrecognised else "none"
            return f"{self.unrecognised} part(s) or field(s) left unread, where {name} leaves {theirs} unread"
        return f"{self.chars} characters of the conversation, where {name} reads {other.chars} (tool calls or results passed over)"


def reading(adapter: FormatAdapter, data: bytes, source: str, skip_bad_lines: bool) -> Reading | None:
    """The adapter's :class:`Reading` of the file, or None when it cannot read it."""
    try:
        return Reading.of([adapter.load(data, source, skip_bad_lines=skip_bad_lines)])
    except InputError:
        return None


def sniffs(adapter: FormatAdapter, data: bytes) -> bool:
    """Whether ``adapter``'s sniff matches the head of ``data``."""
    try:
        return bool(adapter.sniff(registry.sniffed_head(data)))
    except Exception:  # a sniffer that cannot judge this head: as in registry.forced_error
        return True


def _detected(adapter: FormatAdapter, data: bytes, source: str) -> registry.Detection | None:
    """The format ``data`` is detected as, when that is not ``adapter``'s."""
    try:
        found = registry.detect_why(data, source)
    except InputError:
        return None
    return None if found.adapter.name == adapter.name else found


def check_unlike(adapter: FormatAdapter, data: bytes, source: str, *, skip_bad_lines: bool = False) -> None:
    """Refuse a file that does not look like ``adapter``'s format when the format it is
    detected as reads it better (module docstring). A file ``adapter`` cannot read at all is
    left to the read's own error and :func:`registry.forced_error`.

    Raises:
        InputError: saying what the file looks like, how to read it so, and what reading it
        as ``adapter`` would miss.
    """
    if sniffs(adapter, data) or (found := _detected(adapter, data, source)) is None:
        return
    ours = reading(adapter, data, source, skip_bad_lines)
    theirs = reading(found.adapter, data, source, skip_bad_lines)
    if ours is None or theirs is None or not ours.worse_than(theirs):
        return  # the same reading (or a better one): nothing is lost by the user's choice
    raise InputError(source, f"does not look like {adapter.name} ({adapter.description}); {registry.looks_like(found)}. Read as {adapter.name}: {ours.shortfall(theirs, found.adapter.name)}")


def check_nothing(adapter: FormatAdapter, data: bytes, source: str, reasoning: int, *, skip_bad_lines: bool = False) -> None:
    """Refuse a read that found no reasoning part in a file whose detected format finds some.

    Raises:
        InputError: saying where the reasoning is and how to read it.
    """
    if reasoning or (found := _detected(adapter, data, source)) is None:
        return
    theirs = reading(found.adapter, data, source, skip_bad_lines)
    if theirs is None or not theirs.reasoning:
        return
    raise InputError(source, f"read as {adapter.name} ({adapter.description}), but it holds no reasoning part: nothing to score or prune; {registry.looks_like(found)} ({theirs.reasoning} reasoning part(s) read so)")
