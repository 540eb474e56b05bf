"""Inline ``<think>...</think>`` reasoning markup, paired as the model emitted it.

Rules (METHOD.md, "Objects": inline ``<think>`` is reasoning; every adapter that reads ``<think>`` uses this one parser):

- Tags inside a Markdown code span or fenced block (```` `</think>` ````) are mentions, not
  markup: a literal ``</think>`` quoted in the reasoning does not end it early.
- Tags nest: a ``<think>`` inside an open element opens a level that its own ``</think>``
  closes, so a mention of the pair in plain text stays inside the reasoning.
- A reply whose opening ``<think>`` was part of the prompt (chat templates that end the
  generation prompt with ``<think>``) holds ``reasoning</think>answer``: when the first tag
  is a ``</think>``, the text before it is an element.
- An element never closed runs to the end of the text (a reply cut off while thinking),
  unless a ``</think>`` that the rules above set aside follows it: then the last one closes
  it (an unpaired backtick or a lone ``<think>`` mention must not swallow the answer).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from iclr_cli.model_syntax import code_spans  # noqa: F401  (mentions: the rule lives beside the other syntax rules)

OPEN = "<think>"
CLOSE = "</think>"
_TAG = re.compile(r"</?think>")


@dataclass(frozen=True)
class ThinkElement:
    """One ``<think>`` element of a text: ``start:end`` is the whole element (tags included;
    ``start`` is 0 for a leading lone ``</think>``), ``inner_start:inner_end`` the reasoning."""

    start: int
    inner_start: int
    inner_end: int
    end: int

    def inner(self, text: str) -> str:
        return text[self.inner_start : self.inner_end]


def think_elements(text: str) -> list[ThinkElement]:
    """The ``<think>`` elements of ``text`` in order (see the module docstring for the rules)."""
    if "think>" not in text:
        return []
    spans = code_spans(text) if "`" in text else []
    tags = [m for m in _TAG.finditer(text) if not any(s <= m.start() < e for s, e in spans)]
    elements: list[ThinkElement] = []
    depth, opened = 0, None
    for k, m in enumerate(tags):
        if m.group() == OPEN:
            if depth == 0:
                opened = m
            depth += 1
        elif depth:
            depth -= 1
            if depth == 0:
                elements.append(ThinkElement(opened.start(), opened.end(), m.start(), m.end()))  # type: ignore[union-attr]
        elif k == 0:  # leading lone close: the opening tag was in the prompt
            elements.append(ThinkElement(0, 0, m.start(), m.end()))
    if depth and opened is not None:
        last = text.rfind(CLOSE)
        if last >= opened.end():
            elements.append(ThinkElement(opened.start(), opened.end(), last, last + len(CLOSE)))
        else:
            elements.append(ThinkElement(opened.start(), opened.end(), len(text), len(text)))
    return elements


def outside_think(text: str, elements: list[ThinkElement] | None = None) -> str:
    """``text`` with its ``<think>`` elements (tags and reasoning) removed: the visible answer."""
    elements = think_elements(text) if elements is None else elements
    pieces, pos = [], 0
    for el in elements:
        pieces.append(text[pos : el.start])
        pos = el.end
    pieces.append(text[pos:])
    return "".join(pieces)


def replace_inner(text: str, k: int, old: str, new: str) -> str | None:
    """``text`` with the reasoning of its ``k``-th element replaced by ``new``, or None when
    that element does not hold ``old``."""
    elements = think_elements(text)
    if k >= len(elements) or elements[k].inner(text) != old:
        return None
    el = elements[k]
    return text[: el.inner_start] + new + text[el.inner_end :]


def core_span(inner: str) -> tuple[int, int]:
    """``(start, end)`` of ``inner`` without the whitespace around it: templates write
    ``<think>\\n...\\n</think>`` around the text a reasoning parser returns stripped."""
    start = len(inner) - len(inner.lstrip())
    return start, max(start, len(inner.rstrip()))


def replace_core(text: str, k: int, old: str, new: str) -> str | None:
    """``text`` with the reasoning of its ``k``-th element, whitespace around it aside,
    replaced by ``new`` (the padding is kept), or None when that element's stripped
    reasoning is not ``old``: the ``<think>`` copy of a reasoning also held in a field
    (llama.cpp ``--reasoning-format deepseek-legacy``, ggml-org/llama.cpp PR #16394)."""
    elements = think_elements(text)
    if k >= len(elements):
        return None
    el = elements[k]
    inner = el.inner(text)
    start, end = core_span(inner)
    if inner[start:end] != old:
        return None
    return text[: el.inner_start + start] + new + text[el.inner_start + end :]


def visible_pieces(text: str, elements: list[ThinkElement] | None = None) -> list[tuple[int, int]]:
    """``(start, end)`` of the text outside the ``<think>`` elements: piece K lies before
    element K (the last piece after the last element), so there is one piece more than
    elements."""
    elements = think_elements(text) if elements is None else elements
    starts = [0, *(el.end for el in elements)]
    ends = [*(el.start for el in elements), len(text)]
    return list(zip(starts, ends))


def replace_outside(text: str, k: int, old: str, new: str) -> str | None:
    """``text`` with ``old``, held in its ``k``-th visible piece (:func:`visible_pieces`) as
    that piece's start or exactly once, replaced by ``new``; None when it is not there: the
    visible words of a thought that also holds ``<think>`` elements (mini-swe-agent THOUGHT,
    SWE-agent ``thought``), located whatever the elements around them say."""
    pieces = visible_pieces(text)
    if k >= len(pieces) or not old:
        return None
    a, b = pieces[k]
    piece = text[a:b]
    if piece.startswith(old):
        at = a
    elif piece.count(old) == 1:
        at = a + piece.index(old)
    else:
        return None
    return text[:at] + new + text[at + len(old) :]


def copy_kept_alike(outer: str, inner: str, outer_new: str, inner_new: str) -> bool:
    """True when ``outer_new`` still says exactly what ``inner_new`` says wherever ``outer``
    held ``inner``: one reasoning stored twice, one copy inside another text (a thought that
    quotes ``reasoning_content`` in ``<think>``), written as one compression.

    Where ``outer`` holds ``inner`` as the reasoning of ``<think>`` elements (whitespace around
    it aside) and nowhere else, each such element of ``outer_new`` (same count, same order)
    must hold ``inner_new``; the rest of ``outer`` may have been edited on its own. Elsewhere
    the copy has no markup to find it by, so ``outer_new`` must be ``outer`` with each copy
    replaced by ``inner_new`` and nothing else changed, or hold each copy intact when
    ``inner`` is unchanged, or both must be empty. Anything else (an edited text that
    happens to contain the new inner text somewhere) is not one compression."""
    if outer_new == "" and inner_new == "":
        return True
    elements = think_elements(outer)
    held = [k for k, el in enumerate(elements) if el.inner(outer).strip() == inner.strip()]
    if held and outer.count(inner.strip()) == len(held):
        after = think_elements(outer_new)
        return len(after) == len(elements) and all(after[k].inner(outer_new).strip() == inner_new.strip() for k in held)
    if inner_new == inner:
        return outer_new.count(inner) == outer.count(inner)
    return outer_new == outer.replace(inner, inner_new)
