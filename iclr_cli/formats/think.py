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

OPEN = "<think>"
CLOSE = "</think>"
_TAG = re.compile(r"</?think>")
_TICKS = re.compile(r"`+")


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


def code_spans(text: str) -> list[tuple[int, int]]:
    """Offsets of the Markdown code spans in ``text``: a run of N backticks up to the next run
    of exactly N. Spans of one or two backticks stop at a blank line (a paragraph break);
    runs of three or more (fences) do not. An unmatched run is literal text."""
    spans: list[tuple[int, int]] = []
    runs = list(_TICKS.finditer(text))
    i = 0
    while i < len(runs):
        run = runs[i]
        n = len(run.group())
        close = None
        for j in range(i + 1, len(runs)):
            if n < 3 and "\n\n" in text[run.end() : runs[j].start()]:
                break
            if len(runs[j].group()) == n:
                close = j
                break
        if close is None:
            i += 1
            continue
        spans.append((run.start(), runs[close].end()))
        i = close + 1
    return spans


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
