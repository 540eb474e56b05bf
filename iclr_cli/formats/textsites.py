"""Shared write-back machinery for adapters whose reasoning text lives in several places.

Agent logs often hold the same reasoning more than once (SWE-agent ``thought`` inside
``response`` and the history; OpenHands ``thought`` inside the raw model response; Codex
summaries echoed as ``agent_reasoning`` events). Such text is one reasoning part, scored once;
its :class:`TextRef` lists every :class:`Site` that holds it, and an edit is written into all
of them. A site says how the text sits in its string:

- ``whole``: the string is exactly the text;
- ``prefix``: the string starts with the text (SWE-agent ``response`` = thought + action);
- ``unique``: the text occurs exactly once somewhere in the string;
- ``think:K``: the text is the inside of the K-th ``<think>...</think>`` element.

Sites are found when the file is read, so at write time every one of them still holds the
original text. Records not edited are written back byte for byte.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from iclr_cli.formats.base import Document, OpaqueEdits
from iclr_cli.jsonio import JsonLine, dump_lines, dumps_document_like
from iclr_cli.trajectory import Trajectory, WriteBack

THINK = re.compile(r"<think>(.*?)(?:</think>|\Z)", re.DOTALL)

Path = tuple  # (record index, key, key, ...) from the list of records to one string


@dataclass(frozen=True)
class Site:
    """One string that holds a reasoning text: ``path`` from the records to it, and ``how``."""

    path: Path
    how: str = "whole"


@dataclass(frozen=True)
class TextRef:
    """The ``ref`` of a reasoning part: every site holding its text.

    ``drop`` lists records removed as a whole when the part is opaque (Codex
    ``encrypted_content``), edited, and the user chose :attr:`OpaqueEdits.DROP`.
    """

    sites: tuple[Site, ...]
    drop: tuple[int, ...] = ()
    strip_keys: tuple[tuple[Path, str], ...] = field(default=())  # (dict path, key) removed on edit (signatures)


def get(root, path: Sequence[Hashable]):
    """The value at ``path`` (keys and list indices) inside ``root``."""
    for key in path:
        root = root[key]
    return root


def locate(value: object, text: str) -> str | None:
    """How ``text`` sits in the string ``value`` (``whole``, ``prefix``, ``unique``), or None."""
    if not isinstance(value, str) or not text:
        return None
    if value == text:
        return "whole"
    if value.startswith(text):
        return "prefix"
    if value.count(text) == 1:
        return "unique"
    return None


def splice(value: str, how: str, old: str, new: str) -> str:
    """``value`` with ``old`` (sitting there as ``how`` says) replaced by ``new``.

    Raises:
        ValueError: when ``value`` no longer holds ``old`` as described (a bug: sites are
        checked on read).
    """
    if how == "whole" and value == old:
        return new
    if how == "prefix" and value.startswith(old):
        return new + value[len(old) :]
    if how == "unique" and value.count(old) == 1:
        return value.replace(old, new, 1)
    if how.startswith("think:"):
        matches = list(THINK.finditer(value))
        k = int(how.split(":", 1)[1])
        if k < len(matches) and matches[k].group(1) == old:
            m = matches[k]
            return value[: m.start(1)] + new + value[m.end(1) :]
    raise ValueError(f"site {how!r} no longer holds the original text")


@dataclass
class Records:
    """The raw input of one file: JSONL lines, or one JSON document (``lines`` is None)."""

    original: bytes
    lines: list[JsonLine] | None
    values: list[object]

    def dump(self, edited: dict[int, object], drops: set[int] = frozenset()) -> bytes:
        """The file with ``edited`` records re-serialised in their own layout, ``drops``
        removed (JSONL only) and every other record byte for byte."""
        if self.lines is None:
            return dumps_document_like(edited[0], self.original) if 0 in edited else self.original
        return dump_lines(self.lines, edited, drops)


def write_back(records: Records, doc: Document, trajectories: Sequence[Trajectory], opaque: OpaqueEdits) -> bytes:
    """Write the reasoning edits of ``trajectories`` (parts carrying :class:`TextRef` refs)
    into ``records`` and serialise them.

    Opaque parts (METHOD.md, "Provider rules"): with ``DROP`` the records in ``ref.drop``
    are removed, with ``KEEP`` nothing is written. Other parts are spliced into every site.
    """
    edited: dict[int, object] = {}
    drops: set[int] = set()
    for original, new in zip(doc.trajectories, trajectories):
        for ref, (part, text) in original.reasoning_edits(new).items():
            if part.write_back is WriteBack.OPAQUE:
                if opaque is OpaqueEdits.DROP:
                    drops.update(ref.drop)
                continue
            for site in ref.sites:
                rec, *keys = site.path
                root = edited.setdefault(rec, copy.deepcopy(records.values[rec]))
                holder = get(root, keys[:-1])
                holder[keys[-1]] = splice(holder[keys[-1]], site.how, part.text, text)
            for (rec, *keys), key in ref.strip_keys:
                root = edited.setdefault(rec, copy.deepcopy(records.values[rec]))
                get(root, keys).pop(key, None)
    return records.dump({k: v for k, v in edited.items() if k not in drops}, drops)


def field_name(path: Sequence[Hashable]) -> str:
    """``trajectory[3].thought`` style name of a JSON path (for error messages)."""
    return "".join(f"[{k}]" if isinstance(k, int) else (f".{k}" if i else str(k)) for i, k in enumerate(path))


def text_of(content) -> str:
    """The text of a chat ``content`` value: a string, or the ``text`` of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""
