"""Derived state: what a reasoning block introduces that nothing before it held, and where it went.

The paper's state-externalization analysis (section 3.4, "State externalization"; section 4.4)
asks whether task-relevant state a reasoning block derived still lives only in reasoning
(``G = 1``) or has already been materialised in an external carrier: code, files, tool
output. The paper does not publish its extractor; this module is this project's, and both
``iclr analyze externalization`` and the ``iclr-ext`` variant use it, so the analysis and the
policy agree on what "externalized" means.

An **item** is a piece of text of one of these kinds, found by the regular expressions below:

- ``path``: a file path (``src/app.py``, ``./x/y``, ``/etc/hosts``) or a file name with a
  known extension (``setup.cfg``);
- ``identifier``: a code-like name: ``snake_case``, ``camelCase``/``PascalCase`` with an
  inner capital, ``dotted.names``, letters mixed with digits (``sha256``), a name directly
  followed by ``(``; at least 4 characters, so prose words and ``e.g`` are not items;
- ``number``: a number with at least two digits or a decimal point (``42``, ``3.5``,
  ``0x1f``); single digits are too common to mean anything;
- ``quoted``: text in double or single quotes, 2-80 characters on one line;
- ``code``: a backtick span, or a line (at least 4 characters) of a fenced code block.

A block's **derived state** is its items that occur in no earlier text (P, every earlier step
as the history holds it, the parts of the same step before the block, and the earlier blocks
of the same reasoning). An item **occurs** in a text when the text holds it with no word
character glued to either end (so ``12`` does not occur in ``2012``). An item has reached an
**external carrier** once it occurs in an action (visible text or a tool call's arguments;
``file`` when the call writes a file) or an observation (a tool result, the environment's or
the user's answer) that comes after the block.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from iclr_cli.blocks import Split, is_candidate
from iclr_cli.trajectory import Part, Step

KINDS = ("path", "identifier", "number", "quoted", "code")
CARRIERS = ("action", "file", "tool_result")

_EXT = r"(?:py|pyi|js|jsx|ts|tsx|json|jsonl|md|rst|txt|ya?ml|toml|cfg|ini|sh|bash|c|h|cc|cpp|hpp|rs|go|java|kt|rb|php|html|css|sql|csv|xml|lock|env|ipynb|dcm|log)"
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("code", re.compile(r"`([^`\n]{1,120})`")),
    ("quoted", re.compile(r"\"([^\"\n]{2,80})\"|(?<![\w'])'([^'\n]{2,80})'(?![\w'])")),
    ("path", re.compile(r"(?<![\w/.~-])((?:~|\.{1,2})?/?(?:[\w.-]+/)+[\w.-]*\w|[\w-]+(?:\.[\w-]+)*\." + _EXT + r")(?![\w/])")),
    ("number", re.compile(r"(?<![\w.])(0x[0-9a-fA-F]+|-?\d+\.\d+|-?\d{2,})(?!\w|\.\w)")),
    ("identifier", re.compile(
        r"(?<![\w.])("
        r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+"  # dotted.names
        r"|[A-Za-z_][A-Za-z0-9]*_\w+"  # snake_case
        r"|_+[A-Za-z]\w*"  # _private
        r"|[a-z]+[A-Z]\w*"  # camelCase
        r"|[A-Z][a-z0-9]+[A-Z]\w*"  # PascalCase with an inner capital
        r"|[A-Za-z]+\d\w*"  # letters then digits (sha256, v2)
        r")(?![\w])"
        r"|(?<![\w.])([A-Za-z_]\w{3,})(?=\()"  # a name called: name(
    )),
)
_FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.S)
_WRITES = re.compile(r"write|edit|create|str_replace|apply_patch|patch|insert", re.I)
_FILE_ARGS = re.compile(r"\"(?:content|file_text|new_str|new_string|patch|text)\"\s*:")


@dataclass(frozen=True, order=True)
class Item:
    """One piece of derived state: ``kind`` (one of :data:`KINDS`) and its ``text``."""

    kind: str
    text: str


def items(text: str) -> tuple[Item, ...]:
    """The items of ``text`` (module docstring), each once, in order of first appearance.

    A span claimed by an earlier kind in :data:`KINDS`' order of precedence (code, quoted,
    path, number, identifier) is not read again as a later kind, so ``"src/app.py"`` in
    quotes is one quoted item, not also a path and an identifier.
    """
    found: dict[Item, int] = {}
    taken: list[tuple[int, int]] = []

    def add(kind: str, start: int, end: int, value: str) -> None:
        value = value.strip()
        if not value or any(a < end and start < b for a, b in taken):
            return
        if kind == "identifier" and len(value) < 4:
            return
        taken.append((start, end))
        found.setdefault(Item(kind, value), start)

    for m in _FENCE.finditer(text):
        pos = m.start(1)
        for line in m.group(1).split("\n"):
            if len(line.strip()) >= 4:
                add("code", pos, pos + len(line), line)
            pos += len(line) + 1
        taken.append((m.start(), m.end()))
    for kind, pattern in _PATTERNS:
        for m in pattern.finditer(text):
            group = next(g for g in range(1, (m.lastindex or 0) + 1) if m.group(g) is not None)
            add(kind, m.start(group), m.end(group), m.group(group))
    return tuple(sorted(found, key=found.__getitem__))


def occurs(item: Item | str, text: str) -> bool:
    """True when ``text`` holds the item with no word character glued to either end."""
    needle = item.text if isinstance(item, Item) else item
    if not needle or needle not in text:
        return False
    head = r"(?<!\w)" if needle[0].isalnum() or needle[0] == "_" else ""
    tail = r"(?!\w)" if needle[-1].isalnum() or needle[-1] == "_" else ""
    if not head and not tail:
        return True
    return re.search(head + re.escape(needle) + tail, text) is not None


def derived(text: str, earlier: Iterable[str]) -> tuple[Item, ...]:
    """Items of ``text`` that occur in none of the ``earlier`` texts (its derived state)."""
    before = list(earlier)
    return tuple(i for i in items(text) if not any(occurs(i, t) for t in before))


def carrier_kind(part: Part) -> str | None:
    """``file``, ``action`` or ``tool_result`` for a part that is an external carrier, else
    ``None`` (reasoning, prompt). A tool call is ``file`` when its name or arguments say it
    writes a file (``write_file``, ``str_replace_editor``, a ``content`` / ``file_text``
    argument...)."""
    if part.kind == "observation":
        return "tool_result"
    if part.kind != "action":
        return None
    label = part.label or ""
    if label.startswith("tool_call") and (_WRITES.search(label) or _FILE_ARGS.search(part.text)):
        return "file"
    return "action"


@dataclass(frozen=True)
class BlockState:
    """The derived state of one reasoning block of a step.

    ``part`` is the index of the reasoning part among the step's scorable reasoning parts,
    ``block`` the block's index in that part's :class:`~iclr_cli.blocks.Split`, ``candidate``
    whether a variant may remove it (:func:`~iclr_cli.blocks.is_candidate`). ``carried``
    maps each item that reached an external carrier within the same step to that carrier's
    kind (:data:`CARRIERS`).
    """

    part: int
    block: int
    candidate: bool
    items: tuple[Item, ...]
    carried: dict[Item, str]

    @property
    def outstanding(self) -> tuple[Item, ...]:
        """Derived items not yet in an external carrier (the block's share of ``U``)."""
        return tuple(i for i in self.items if i not in self.carried)


def step_state(earlier: Sequence[str], step: Step, splits: Sequence[Split]) -> list[BlockState]:
    """The derived state of every block of ``step`` and what its own actions and observations
    carried out (module docstring).

    Args:
        earlier: texts before the step (P and the history, as the agent's context holds them;
            rendered segments are fine: labels are not items).
        step: the completed step.
        splits: one :class:`~iclr_cli.blocks.Split` per scorable reasoning part of ``step``.
    """
    seen = list(earlier)
    out: list[BlockState] = []
    reasoning = 0
    for index, part in enumerate(step.parts):
        if not part.is_scorable_reasoning:
            seen.append(part.text)
            continue
        split = splits[reasoning]
        carriers = [(carrier_kind(p), p.text) for p in step.parts[index + 1 :]]
        carriers = [(k, t) for k, t in carriers if k is not None]
        for bi, block in enumerate(split.blocks):
            new = derived(block, seen)
            out.append(BlockState(reasoning, bi, is_candidate(block), new, first_carriers(new, carriers)))
            seen.append(block)
        reasoning += 1
    return out


def first_carriers(found: Iterable[Item], carriers: Sequence[tuple[str, str]]) -> dict[Item, str]:
    """For each item that occurs in one of ``carriers`` (``(kind, text)`` in order), the kind
    of the first that holds it."""
    out: dict[Item, str] = {}
    for item in found:
        for kind, text in carriers:
            if occurs(item, text):
                out[item] = kind
                break
    return out


def unexternalized(earlier: Sequence[str], step: Step, splits: Sequence[Split]) -> frozenset[tuple[int, int]]:
    """``(part, block)`` of the candidate blocks of ``step`` whose derived state has not all
    reached an external carrier by the end of the step: the blocks ``iclr-ext`` never removes
    (docs/analyze.md)."""
    return frozenset((b.part, b.block) for b in step_state(earlier, step, splits) if b.candidate and b.outstanding)
