"""The one write-back engine: reasoning edits into the records they were read from.

Every adapter reads its file into :class:`Records` (JSONL lines or one JSON document) and
gives each reasoning part a :class:`~iclr_cli.formats.sites.TextRef` naming where its text
sits (:mod:`iclr_cli.formats.sites`: sites, their kinds, how an edit is spliced in). Writing
an edited trajectory back is then the same for every format (docs/FORMAT.md, METHOD.md
"Provider rules"):

- **Sites.** An edit goes into every site of its part.
- **Signed parts** (``WriteBack.SIGNED``): an edit also removes the ``strip_keys`` (the
  signature), so nothing replays the block as original.
- **Opaque parts** (``WriteBack.OPAQUE``, reasoning carried next to ``encrypted_content``):
  with :attr:`OpaqueEdits.DROP` an edit removes the ``drop`` paths (a whole JSONL record
  ``(rec,)`` or one list element / key) and writes the text into the sites that remain; with
  :attr:`OpaqueEdits.KEEP`, or when there is nothing to drop, nothing of the part is written.
- **Emptied parts**: a part whose new text is ``""`` and that has ``remove_when_empty`` (an
  Anthropic thinking block) is removed from its list, unless that would leave the list empty;
  the block then stays with empty text (an assistant message must have content).
- **Every copy edited, or the record refused**, and **one reasoning, one compression**: the
  checks of :mod:`iclr_cli.formats.copies` run once the edits are applied and raise
  :class:`UnregisteredCopy`; :func:`write_back` turns it into an input error naming the file,
  line and field.

Sites are found when the file is read, so at write time each still holds the original text.
Records with no edit are written back byte for byte; edited ones are re-serialised in the
input's own layout with every field kept. :func:`write_back` also returns the reasoning
**as written** (:class:`WriteResult`): a part dropped with its item counts as ``""``, an
edited part left unedited as its original text, so summaries count what the output holds
(docs/method.md, "Token counts").
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from iclr_cli.errors import InputError
from iclr_cli.formats.base import Document, OpaqueEdits
from iclr_cli.formats.copies import MIN_COPY_CHARS, UnregisteredCopy, refuse_half_edits  # noqa: F401 (MIN_COPY_CHARS re-exported)
# The site vocabulary lives in formats/sites.py; adapters import it from here as well.
from iclr_cli.formats.sites import (  # noqa: F401
    Draft, Path, Site, Splicer, TextRef, freeze, join_think_copies, locate, merge_refs, register_site_kind, splice,
)
from iclr_cli.jsonio import dumps_document_like
from iclr_cli.jsonl import JsonLine, dump_lines
from iclr_cli.trajectory import Trajectory, WriteBack

def field_name(path: Sequence[Hashable]) -> str:
    """``trajectory[3].thought`` style name of a JSON path (for messages)."""
    return "".join(f"[{k}]" if isinstance(k, int) else (f".{k}" if i else str(k)) for i, k in enumerate(path))


def get(root: object, path: Sequence[Hashable]) -> object:
    """The value at ``path`` (keys and list indices) inside ``root``.

    Raises:
        KeyError, IndexError, TypeError: when the path does not exist.
    """
    for key in path:
        root = root[key]  # type: ignore[index]
    return root


@dataclass
class Records:
    """The raw input of one file: JSONL ``lines`` with one parsed value each, or one JSON
    document (``lines`` None, ``values == [document]``)."""

    original: bytes
    lines: list[JsonLine] | None
    values: list[object]

    def dump(self, edited: dict[int, object], drops: set[int] = frozenset()) -> bytes:  # type: ignore[assignment]
        """The file with ``edited`` records re-serialised in their own layout, ``drops``
        removed (JSONL only) and every other record byte for byte."""
        if self.lines is None:
            return dumps_document_like(edited[0], self.original) if 0 in edited else self.original
        return dump_lines(self.lines, edited, drops)


class WriteResult:
    """What write-back produced: the output ``data``, and ``written``: the trajectories with
    each reasoning part's text as it went to the output (same shape as the input).

    ``data`` may be given as a function that makes the bytes: they are made on first use,
    so a caller that needs only ``written`` (``score``'s summary) never builds a copy of the
    whole file (a 100 MB session).
    """

    __slots__ = ("_data", "written")

    def __init__(self, data: bytes | Callable[[], bytes], written: tuple[Trajectory, ...]):
        self._data = data
        self.written = written

    @property
    def data(self) -> bytes:
        if callable(self._data):
            self._data = self._data()
        return self._data


@dataclass(frozen=True)
class Applied:
    """Edits applied to a list of values (records, or the messages of one conversation).

    ``edited``: deep copies of the values that changed, by index; ``dropped``: indices of
    values removed whole; ``written``: the trajectories with each reasoning part's text as
    it went to the output (see :func:`write_back`).
    """

    edited: dict[int, object]
    dropped: set[int]
    written: tuple[Trajectory, ...]



def apply_edits(values: Sequence[object], originals: Sequence[Trajectory], trajectories: Sequence[Trajectory], opaque: OpaqueEdits = OpaqueEdits.DROP) -> Applied:
    """Write the reasoning edits of ``trajectories`` (``originals`` after compression, parts
    carrying :class:`TextRef` refs whose paths start with an index into ``values``) into
    copies of ``values`` (see the module docstring); ``values`` is not modified. The engine
    behind :func:`write_back` and the OpenAI message-level write-back, which has no bytes.

    Raises:
        TypeError: when an edited part has no :class:`TextRef` (an adapter bug).
        ValueError: when a site no longer holds its text (an adapter bug).
        UnregisteredCopy: when an edited text survives in a string of its record that is no
            part's site (the record would be half-edited).
    """
    plans: list[tuple[TextRef, str, str]] = []
    drops: set[Path] = set()
    kept: set[TextRef] = set()
    for original, new in zip(originals, trajectories, strict=True):
        for ref, (part, text) in original.reasoning_edits(new).items():
            if not isinstance(ref, TextRef):
                raise TypeError(f"reasoning part of {original.id} has no TextRef")
            if part.write_back is WriteBack.OPAQUE:
                if opaque is not OpaqueEdits.DROP or not ref.drop:
                    kept.add(ref)
                    continue
                drops.update(ref.drop)
            plans.append((ref, part.text, text))

    def gone(path: Path) -> bool:
        return any(path[:k] in drops for k in range(1, len(path) + 1))

    edited: dict[int, object] = {}

    def root(rec: int) -> object:
        if rec not in edited:
            edited[rec] = copy.deepcopy(values[rec])
        return edited[rec]

    removals: dict[Path, tuple[set, set]] = {}  # parent path -> (dropped keys, emptied keys)
    for ref, old, new in plans:
        for site in ref.sites:
            if gone(site.path):
                continue
            rec, *keys = site.path
            holder = get(root(rec), keys[:-1])
            holder[keys[-1]] = splice(holder[keys[-1]], site.how, old, new)  # type: ignore[index]
        for (rec, *keys), key in ref.strip_keys:
            if not gone((rec, *keys)):
                get(root(rec), keys).pop(key, None)  # type: ignore[union-attr]
        for element in (ref.remove_when_empty, *ref.also_empty) if new == "" else ():
            if element is not None and not gone(element):
                removals.setdefault(element[:-1], (set(), set()))[1].add(element[-1])
    for path in _cleared(originals, plans):
        if not gone(path):
            rec, *keys = path
            get(root(rec), keys[:-1])[keys[-1]] = ""  # type: ignore[index]
    for path in drops:
        if len(path) > 1 and not gone(path[:-1]):
            removals.setdefault(path[:-1], (set(), set()))[0].add(path[-1])
    refuse_half_edits(values, edited, originals, plans, gone)
    for (rec, *keys), (dropped, emptied) in removals.items():
        container = get(root(rec), keys)
        if isinstance(container, list) and emptied and len(dropped | emptied) >= len(container):
            emptied = emptied - {min(emptied)}  # keep one block: the list must not end up empty
        for key in sorted(dropped | emptied, reverse=True):
            del container[key]  # type: ignore[union-attr]
    whole_drops = {path[0] for path in drops if len(path) == 1}
    written = tuple(_as_written(originals, trajectories, gone, kept))
    return Applied({rec: v for rec, v in edited.items() if rec not in whole_drops}, whole_drops, written)


def _cleared(originals: Sequence[Trajectory], plans: Sequence[tuple[TextRef, str, str]]) -> list[Path]:
    """Paths in some part's ``clear_with`` whose parts are all written ``""``."""
    emptied = {ref for ref, _, new in plans if new == ""}
    holders: dict[Path, list] = {}
    for traj in originals:
        for step in traj.steps:
            for part in step.reasoning:
                if isinstance(part.ref, TextRef):
                    for path in part.ref.clear_with:
                        holders.setdefault(path, []).append(part.ref)
    return [path for path, refs in holders.items() if all(ref in emptied for ref in refs)]



def write_back(records: Records, doc: Document, trajectories: Sequence[Trajectory], opaque: OpaqueEdits = OpaqueEdits.DROP) -> WriteResult:
    """Write the reasoning edits of ``trajectories`` (``doc.trajectories`` after compression,
    parts carrying :class:`TextRef` refs) into ``records`` (see the module docstring and
    :func:`apply_edits`).

    Raises:
        TypeError: when an edited part has no :class:`TextRef` (an adapter bug).
        ValueError: when a site no longer holds its text, or a whole JSON document would be
        dropped (adapter bugs).
        InputError: when an edited text has a copy in its record that the adapter did not
            register (:class:`UnregisteredCopy`), naming the file, line and field.
    """
    try:
        applied = apply_edits(records.values, doc.trajectories, trajectories, opaque)
    except UnregisteredCopy as exc:
        raise copy_error(doc.source, exc, records.lines[exc.path[0]].number if records.lines is not None else None) from None
    if records.lines is None and 0 in applied.dropped:
        raise ValueError("cannot drop the whole JSON document")
    return WriteResult(lambda: records.dump(applied.edited, applied.dropped), applied.written)


def copy_error(source: str, exc: UnregisteredCopy, line: int | None, *, record: tuple = ()) -> InputError:
    """The input error for an :class:`UnregisteredCopy` found in ``source`` at ``line``.

    Fields are named from inside the record (a JSONL line, a document), or, with ``record``
    (e.g. ``("messages",)``), from that prefix and the record index (``messages[3].content``).
    """
    def name(path: Path) -> str:
        return field_name((*record, *path) if record else path[1:])

    return InputError(
        source,
        f"holds a copy of the reasoning at '{name(exc.site.path)}' that this format's adapter does not edit "
        "with it; writing one copy would leave the record half-edited, so nothing is written. Read the file with "
        "another --format, or remove the copy",
        line=line, field=name(exc.path),
    )


def _as_written(originals: Sequence[Trajectory], trajectories: Sequence[Trajectory], gone: Callable[[Path], bool], kept: set) -> list[Trajectory]:
    out = []
    for original, new in zip(originals, trajectories):
        steps = []
        for old_step, new_step in zip(original.steps, new.steps):
            texts = []
            for old, part in zip(old_step.reasoning, new_step.reasoning):
                ref = old.ref
                if isinstance(ref, TextRef) and ref.sites and gone(ref.sites[0].path):
                    texts.append("")
                elif ref in kept:
                    texts.append(old.text)
                else:
                    texts.append(part.text)
            same = texts == [p.text for p in new_step.reasoning]
            steps.append(new_step if same else new_step.with_reasoning(texts))
        out.append(new.with_steps(steps))
    return out


class WriteBackAdapter:
    """Base of adapters whose ``Document.state`` is :class:`Records` and whose reasoning
    parts carry :class:`TextRef` refs: ``write`` and ``dump`` come from the engine."""

    def write(self, doc: Document, trajectories: Sequence[Trajectory], *, opaque: OpaqueEdits = OpaqueEdits.DROP) -> WriteResult:
        """Write ``doc`` back with the reasoning of ``trajectories``; see :func:`write_back`."""
        return write_back(doc.state, doc, trajectories, opaque)  # type: ignore[arg-type]

    def dump(self, doc: Document, trajectories: Sequence[Trajectory], *, opaque: OpaqueEdits = OpaqueEdits.DROP) -> bytes:
        """The bytes of :meth:`write`."""
        return self.write(doc, trajectories, opaque=opaque).data


def write_document(adapter: object, doc: Document, trajectories: Sequence[Trajectory], *, opaque: OpaqueEdits = OpaqueEdits.DROP) -> WriteResult:
    """``adapter.write`` where the adapter has one; otherwise its ``dump``, with the
    trajectories as given reported as written."""
    write = getattr(adapter, "write", None)
    if write is not None:
        return write(doc, trajectories, opaque=opaque)
    return WriteResult(adapter.dump(doc, trajectories, opaque=opaque), tuple(trajectories))  # type: ignore[attr-defined]
