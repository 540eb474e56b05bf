"""Reasoning text <-> blocks, with an exact round trip (METHOD.md, "Blocks").

``R_t`` is split at blank lines (one or more lines holding only whitespace). Whitespace-only
pieces are not blocks, and whitespace at the edges of a block belongs to the separators: both
are folded into ``seps`` so that ``join(split(text)) == text`` for every string.

One block rule for every variant (this project's decision: docs/method.md, "Blocks"). Two
kinds of block are never candidates: a block whose whole
text is the literal ``[SKIP]`` (removed by an earlier compression), and a block holding a
text-encoded tool call in any syntax of :data:`iclr_cli.model_syntax.TOOL_CALLS` (the tool
parsers of vLLM and SGLang: ``<tool_call>``, ``<function=...>``, ``[TOOL_CALLS]``, Kimi's
``<|tool_calls_section_begin|>``, DeepSeek's ``<｜tool▁calls▁begin｜>``, JSON and pythonic
calls, ...), because agent frameworks parse the call out of the reasoning and removing it
would remove an action. Every variant (``iclr``, ``step-only``, ``delete-all``,
``random-R``) edits reasoning only through :meth:`Split.edit`, which refuses to touch anything
but a candidate block, so the rule lives here and nowhere else. Separators (the blank lines and
the whitespace at block edges that format parsers rely on, e.g. the blank line between a
mini-swe-agent THOUGHT and its fenced command) are never edited either.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from iclr_cli.model_syntax import ANY_REASONING, holds_tool_call

SKIP = "[SKIP]"

# A separator is a line break followed by one or more whitespace-only lines. ``[^\S\n]`` is
# "whitespace but not a newline", so "\r\n" line ends are separators too.
_SPLITTERS: dict[str, re.Pattern[str]] = {
    "paragraph": re.compile(r"\n(?:[^\S\n]*\n)+"),
    "line": re.compile(r"\n+"),
    "sentence": re.compile(r"(?<=[.!?])\s+|\n(?:[^\S\n]*\n)*"),
}
SPLITTERS = tuple(_SPLITTERS)


@dataclass(frozen=True)
class Split:
    """A reasoning text cut into blocks.

    ``seps`` has one more item than ``blocks``; the text is
    ``seps[0] + blocks[0] + seps[1] + ... + blocks[-1] + seps[-1]``. ``starts[i]`` is the
    character offset of ``blocks[i]`` in the text.
    """

    seps: tuple[str, ...]
    blocks: tuple[str, ...]
    starts: tuple[int, ...]

    def join(self, blocks: Sequence[str] | None = None) -> str:
        """Rebuild the text, optionally with replacement ``blocks`` (same count)."""
        blocks = self.blocks if blocks is None else blocks
        if len(blocks) != len(self.blocks):
            raise ValueError(f"expected {len(self.blocks)} blocks, got {len(blocks)}")
        out = [self.seps[0]]
        for block, sep in zip(blocks, self.seps[1:]):
            out.append(block)
            out.append(sep)
        return "".join(out)

    def edit(self, changes: Mapping[int, str | None]) -> str:
        """The text with candidate blocks changed: ``changes[i]`` is block i's new text, or
        ``None`` to remove the block.

        Separators are never edited. A removed block takes the separator after it along (the
        layout between the blocks that stay is unchanged); when no block is left at all the
        result is ``""`` (a reasoning deleted in full is empty, not a run of blank lines).

        Raises:
            ValueError: when ``changes`` names a block that is not a candidate (a ``[SKIP]``
                marker or a text-encoded tool call: the one block rule), or no block at all.
        """
        for i in changes:
            if not 0 <= i < len(self.blocks):
                raise ValueError(f"no block {i} (the text has {len(self.blocks)})")
            if not is_candidate(self.blocks[i]):
                raise ValueError(f"block {i} is not a candidate for removal ({self.blocks[i][:40]!r})")
        kept: list[tuple[int, str]] = []
        for i, block in enumerate(self.blocks):
            new = changes.get(i, block)
            if new is not None:
                kept.append((i, new))
        if not kept:
            return ""
        out = [self.seps[0]]
        for n, (i, text) in enumerate(kept):
            out.append(text)
            # The separator after a kept block, unless blocks after it were removed up to
            # the end: then the text keeps its own trailing separator.
            out.append(self.seps[i + 1] if n + 1 < len(kept) else self.seps[-1])
        return "".join(out)

    @property
    def spans(self) -> tuple[tuple[int, int], ...]:
        """``(start, end)`` character offsets of each block in the text."""
        return tuple((s, s + len(b)) for s, b in zip(self.starts, self.blocks))


def split_blocks(text: str, splitter: str = "paragraph") -> Split:
    """Split ``text`` into blocks at blank lines (or by ``splitter``: line, sentence).

    Raises:
        ValueError: for an unknown splitter name.
    """
    try:
        pattern = _SPLITTERS[splitter]
    except KeyError:
        raise ValueError(f"unknown splitter {splitter!r}; choose one of {', '.join(SPLITTERS)}") from None
    seps: list[str] = []
    blocks: list[str] = []
    starts: list[int] = []
    pending = ""  # separator text accumulated since the last block
    pos = 0
    bounds = [(m.start(), m.end()) for m in pattern.finditer(text)] + [(len(text), len(text))]
    for sep_start, sep_end in bounds:
        piece = text[pos:sep_start]
        core = piece.strip()
        if core:
            # Whitespace at a block's edges belongs to the separators, so "[SKIP]" replaces
            # only the words and the layout around it survives.
            lead = len(piece) - len(piece.lstrip())
            seps.append(pending + piece[:lead])
            blocks.append(core)
            starts.append(pos + lead)
            pending = piece[lead + len(core) :] + text[sep_start:sep_end]
        else:
            pending += piece + text[sep_start:sep_end]
        pos = sep_end
    seps.append(pending)
    return Split(tuple(seps), tuple(blocks), tuple(starts))


def is_protected(block: str) -> bool:
    """True when ``block`` holds a text-encoded tool call (a syntax of
    :data:`iclr_cli.model_syntax.TOOL_CALLS`) and must never be removed."""
    return holds_tool_call(block)


def is_candidate(block: str) -> bool:
    """True when ``block`` may be scored, counted in N and removed or edited by a variant
    (neither ``[SKIP]`` nor a text-encoded tool call). The one block rule (module docstring)."""
    return not is_skip(block) and not is_protected(block)


def candidates(splits: Sequence[Split]) -> list[tuple[int, int]]:
    """``(part, block)`` of every candidate block of a step's reasoning parts, in order: the
    blocks that are scored, numbered (``block`` of ``iclr score``) and counted in N."""
    return [(pi, bi) for pi, sp in enumerate(splits) for bi, b in enumerate(sp.blocks) if is_candidate(b)]


def holds_delimiter(block: str) -> bool:
    """True when ``block`` mentions a reasoning delimiter (say `` `</think>` `` in backticks):
    any start or end of :data:`iclr_cli.model_syntax.REASONING_DELIMITERS`, or a harmony token.

    Such a block is removed whole or left whole, never edited token by token (random-R):
    deleting the backtick after a quoted ``</think>`` turns it into the real closing tag, and
    the rest of the reasoning would read back as the answer.
    """
    return ANY_REASONING.search(block) is not None


def is_skip(block: str) -> bool:
    """True when ``block`` is a ``[SKIP]`` marker left by an earlier compression."""
    return block.strip() == SKIP
