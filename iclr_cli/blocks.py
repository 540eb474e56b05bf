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

Reasoning markup is separator, never block text: a ``<think>`` / ``</think>`` tag or a harmony
header or token (:data:`iclr_cli.model_syntax.READ_MARKUP`) outside a Markdown code span is
structure that a format's parser pairs (:mod:`iclr_cli.formats.think`), wherever it sits in a
reasoning text: the tags of a visible thought that holds ``<think>`` (mini-swe-agent,
SWE-agent, OpenHands), or a pair quoted inside a ``<think>`` element, which the parser nests.
A ``[SKIP]`` or a removed block therefore never takes a tag with it, and a separator holding
markup stays even when every block around it goes. A tag inside a code span is a mention and
stays in its block (:func:`holds_delimiter`), and so does markup in a piece that holds a
text-encoded tool call (a harmony call is its header and arguments together): that piece is
one protected block.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from iclr_cli.model_syntax import ANY_REASONING, READ_MARKUP, code_spans, holds_tool_call

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
        layout between the blocks that stay is unchanged), except a separator holding markup
        (module docstring): that one stays, and the blocks on each side of it are edited as
        two runs. When no block is left the result is ``""`` (a reasoning deleted in full is
        empty, not a run of blank lines), or, where separators hold markup, the first
        separator, those, and the last.

        Raises:
            ValueError: when ``changes`` names a block that is not a candidate (a ``[SKIP]``
                marker or a text-encoded tool call: the one block rule), or no block at all.
        """
        for i in changes:
            if not 0 <= i < len(self.blocks):
                raise ValueError(f"no block {i} (the text has {len(self.blocks)})")
            if not is_candidate(self.blocks[i]):
                raise ValueError(f"block {i} is not a candidate for removal ({self.blocks[i][:40]!r})")
        news = [changes.get(i, block) for i, block in enumerate(self.blocks)]
        n = len(self.blocks)
        if n == 0:
            return self.seps[0]
        if all(new is None for new in news) and not any(READ_MARKUP.search(sep) for sep in self.seps):
            return ""
        anchors = [k for k in range(1, n) if READ_MARKUP.search(self.seps[k])]
        out = [self.seps[0]]
        for lo, hi in zip([0, *anchors], [*anchors, n]):
            # blocks lo..hi-1 lie between two separators that stay (seps[lo], seps[hi])
            kept = [(i, news[i]) for i in range(lo, hi) if news[i] is not None]
            for m, (i, text) in enumerate(kept):
                out.append(text)
                # The separator after a kept block, unless the blocks after it in this run
                # were removed: then the run ends on its own closing separator.
                if m + 1 < len(kept):
                    out.append(self.seps[i + 1])
            out.append(self.seps[hi])
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
    seps_found = [(m.start(), m.end()) for m in pattern.finditer(text)]
    bounds = _merged(seps_found, _markup(text, seps_found) + _glued(text)) + [(len(text), len(text))]
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
    return _join_headings(text, Split(tuple(seps), tuple(blocks), tuple(starts)))


# METHOD.md, "Blocks": a paragraph that is only a heading (a Markdown ``#`` line, or one line
# wholly in bold, as OpenAI reasoning summaries open each part with ``**Title**``) belongs to
# the block it introduces; alone it is a few tokens that BottomK keeps while it removes the
# paragraphs it heads.
_HEADING = re.compile(r"(?:#{1,6}[^\S\n][^\n]*|\*\*[^*\n]+\*\*:?)")
# A bold title glued to the end of the previous part (``...that information!**Gathering
# booking details**``, logs that concatenate summary parts) starts a block there; so does, and
# ends one, an ``[SKIP]`` glued to text, so that a compressed text splits into the same blocks.
_GLUED = re.compile(r"(?<=[.!?:;)\]])(?=\*\*[^*\n]+\*\*(?:\r?\n|$))|(?<=\S)(?=\[SKIP\])|(?<=\[SKIP\])(?=\S)")


def is_heading(block: str) -> bool:
    """Whether ``block`` is only a heading: one Markdown ``#`` line, or one line wholly in
    ``**bold**`` (METHOD.md, "Blocks")."""
    return _HEADING.fullmatch(block) is not None


def _glued(text: str) -> list[tuple[int, int]]:
    """Zero-width boundaries before glued bold titles and around glued ``[SKIP]`` markers."""
    if "**" not in text and SKIP not in text:
        return []
    return [m.span() for m in _GLUED.finditer(text)]


def _join_headings(text: str, split: Split) -> Split:
    """``split`` with each heading-only block joined to the block after it (the separator
    between them becomes block text), so ``join`` still gives ``text`` exactly. A heading
    with no block after it, or one before a block that is not a candidate (a tool call, a
    ``[SKIP]``), stays a block of its own."""
    if not any(is_heading(b) for b in split.blocks[:-1]):
        return split
    seps, blocks, starts = [split.seps[0]], [], []
    k, n = 0, len(split.blocks)
    while k < n:
        start = split.starts[k]
        while k + 1 < n and is_heading(split.blocks[k]) and is_candidate(split.blocks[k + 1]) and not split.seps[k + 1].strip():
            k += 1
        blocks.append(text[start : split.starts[k] + len(split.blocks[k])])
        starts.append(start)
        seps.append(split.seps[k + 1])
        k += 1
    return Split(tuple(seps), tuple(blocks), tuple(starts))


def _markup(text: str, seps: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Spans of the reasoning markup of ``text`` outside code spans (module docstring), except
    markup inside a piece (between the separators ``seps``) that holds a text-encoded tool
    call: that piece stays one protected block, its markup with it (a harmony tool call is
    markup and arguments together)."""
    if "think>" not in text and "<|" not in text:
        return []
    found = [m.span() for m in READ_MARKUP.finditer(text)]
    if found and "`" in text:
        code = code_spans(text)  # the think parser's rule for mentions (iclr_cli.formats.think)
        found = [(a, b) for a, b in found if not any(s <= a < e for s, e in code)]
    if found:
        ends = [0, *(e for _, e in seps)]
        starts = [*(s for s, _ in seps), len(text)]
        calls = [(a, b) for a, b in zip(ends, starts) if a < b and holds_tool_call(text[a:b])]
        found = [(a, b) for a, b in found if not any(ca <= a < cb for ca, cb in calls)]
    return found


def _merged(seps: list[tuple[int, int]], markup: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Separator spans and markup spans in order, overlapping or touching ones joined."""
    if not markup:
        return seps
    out: list[tuple[int, int]] = []
    for a, b in sorted(seps + markup):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


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
