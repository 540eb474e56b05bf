"""The one write-back engine: reasoning edits into the records they were read from.

Every adapter reads its file into :class:`Records` (JSONL lines or one JSON document) and
gives each reasoning part a :class:`TextRef` naming where its text sits. Writing an edited
trajectory back is then the same for every format (docs/FORMAT.md, METHOD.md "Provider
rules"):

- **Sites.** The same reasoning often sits in several strings (SWE-agent ``thought`` inside
  ``response`` and the history; OpenHands thoughts inside the raw model response; Codex
  summaries echoed as ``agent_reasoning`` events; OpenRouter ``reasoning`` and
  ``reasoning_details``). It is one part, scored once, and an edit goes into every
  :class:`Site`. A site says how the text sits in its string (``how``):
  ``whole`` (the string is the text), ``prefix`` (the string starts with it), ``unique`` (it
  occurs exactly once), ``think:K`` (the reasoning of the K-th ``<think>`` element, as
  :mod:`iclr_cli.formats.think` pairs them), ``think_core:K`` (the same element's reasoning
  without the whitespace around it: the ``<think>`` copy of a text a reasoning field holds
  stripped); adapters may add kinds with
  :func:`register_site_kind`. The first site is the primary copy (the one an agent sends
  back): the text reported as written is read from there.
- **Signed parts** (``WriteBack.SIGNED``): an edit also removes the ``strip_keys`` (the
  signature), so nothing replays the block as original.
- **Opaque parts** (``WriteBack.OPAQUE``, reasoning carried next to ``encrypted_content``):
  with :attr:`OpaqueEdits.DROP` an edit removes the ``drop`` paths (a whole JSONL record
  ``(rec,)`` or one list element / key) and writes the text into the sites that remain; with
  :attr:`OpaqueEdits.KEEP`, or when there is nothing to drop, nothing of the part is written.
- **Emptied parts**: a part whose new text is ``""`` and that has ``remove_when_empty`` (an
  Anthropic thinking block) is removed from its list, unless that would leave the list empty;
  the block then stays with empty text (an assistant message must have content).

- **Every copy edited, or the record refused** (docs/FORMAT.md, "Write-back"). After an edit, the
  original text of the part may survive only in strings that are sites of some reasoning
  part. A *copy* is any other string of the same record (a JSONL line; the whole document
  for a JSON file; one message for :func:`apply_edits` on a message list) that contains the
  original text, verbatim or JSON-escaped (a request stored as a JSON string), unless the
  string is, or lies inside, the text of a part read as something else (an answer that
  repeats the reasoning word for word is the answer; a tool argument is in its call's JSON)
  or of a read-only reasoning part (a sealed item has no site but is reasoning). Texts shorter
  than :data:`MIN_COPY_CHARS` characters (stripped) are not checked: they recur by chance
  ("Done."). A copy means the adapter did not register every place the reasoning sits, and
  writing one copy would leave the record half-edited: :func:`apply_edits` raises
  :class:`UnregisteredCopy` and :func:`write_back` turns it into an input error naming the
  file, line and field. Strings dropped with an opaque item do not count. The same holds
  when one reasoning part's text lies strictly inside another part of the same record (a
  thought that quotes ``reasoning_content`` in ``<think>``) and the two would be written
  differently: one reasoning must not go out as two different compressions.

Sites are found when the file is read, so at write time each still holds the original text.
Records with no edit are written back byte for byte; edited ones are re-serialised in the
input's own layout with every field kept. :func:`write_back` also returns the reasoning
**as written** (:class:`WriteResult`): a part dropped with its item counts as ``""``, an
edited part left unedited as its original text, so summaries count what the output holds
(docs/method.md, "Token counts").
"""

from __future__ import annotations

import bisect
import copy
import json
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from iclr_cli.errors import InputError
from iclr_cli.formats.base import Document, OpaqueEdits
from iclr_cli.formats.think import core_span, replace_core, replace_inner
from iclr_cli.jsonio import JsonLine, dump_lines, dumps_document_like
from iclr_cli.trajectory import Part, Trajectory, WriteBack

Path = tuple
"""``(record index, key or list index, ...)``: from the list of records to one value."""


@dataclass(frozen=True)
class Site:
    """One string that holds a reasoning text: ``path`` from the records to it, and ``how``
    (``KIND`` or ``KIND:ARG``, see the module docstring)."""

    path: Path
    how: str = "whole"


@dataclass(frozen=True)
class TextRef:
    """The ``ref`` of a reasoning part: where its text sits and what an edit also changes.

    Attributes:
        sites: every string holding the text; the first is the primary copy.
        drop: paths removed when the part is opaque, edited, and the user chose
            :attr:`OpaqueEdits.DROP` (``(rec,)`` removes a JSONL record).
        strip_keys: ``(path to a dict, key)`` pairs removed when the part is edited
            (signatures).
        remove_when_empty: path of the list element removed when the new text is ``""``.
        also_empty: the same element in copies of its list elsewhere (:func:`merge_refs`).
        model: the model that wrote this reasoning where the record names it per message (a
            session that switched provider); ``None``: the trajectory's ``meta`` says
            (:mod:`iclr_cli.formats.sealing`).
        clear_with: strings that summarise this reasoning without being a copy of it (a
            Responses item's ``summary`` beside its ``content``): set to ``""`` once every
            part that lists the path is written ``""``, kept otherwise.
    """

    sites: tuple[Site, ...]
    drop: tuple[Path, ...] = ()
    strip_keys: tuple[tuple[Path, str], ...] = field(default=())
    remove_when_empty: Path | None = None
    also_empty: tuple[Path, ...] = ()
    model: str | None = None
    clear_with: tuple[Path, ...] = ()


def merge_refs(primary: TextRef, copy: TextRef) -> TextRef:
    """One reasoning text held in two places (a request logged twice, a message and its
    copy): ``copy``'s sites, drop paths, stripped keys and emptied element join
    ``primary``'s, so an edit goes to both alike. ``primary``'s first site stays the copy
    the text as written is read from."""
    empty = tuple(p for p in (*copy.also_empty, copy.remove_when_empty) if p is not None)
    return TextRef(
        (*primary.sites, *(s for s in copy.sites if s not in primary.sites)),
        drop=(*primary.drop, *copy.drop),
        strip_keys=(*primary.strip_keys, *copy.strip_keys),
        remove_when_empty=primary.remove_when_empty,
        also_empty=(*primary.also_empty, *empty),
        model=primary.model,
        clear_with=(*primary.clear_with, *(p for p in copy.clear_with if p not in primary.clear_with)),
    )


@dataclass
class Draft:
    """A reasoning part still being read: copies found later add sites (and drop paths)
    before :meth:`part` freezes it into a :class:`Part` with its :class:`TextRef`."""

    text: str
    sites: list[Site]
    label: str = "reasoning"
    write_back: WriteBack = WriteBack.IN_PLACE
    strip_keys: list[tuple[Path, str]] = field(default_factory=list)
    drop: list[Path] = field(default_factory=list)
    remove_when_empty: Path | None = None
    clear_with: list[Path] = field(default_factory=list)

    def add(self, site: Site) -> None:
        """Another string holding the text (ignored when known)."""
        if site not in self.sites:
            self.sites.append(site)

    def part(self) -> Part:
        """The finished part (``READ_ONLY`` ones carry no ref: they are never written)."""
        if self.write_back is WriteBack.READ_ONLY:
            return Part("reasoning", self.text, label=self.label, write_back=self.write_back)
        ref = TextRef(tuple(self.sites), drop=tuple(self.drop), strip_keys=tuple(self.strip_keys), remove_when_empty=self.remove_when_empty,
                      clear_with=tuple(self.clear_with))
        return Part("reasoning", self.text, label=self.label, ref=ref, write_back=self.write_back)


def join_think_copies(parts: Sequence[Part]) -> list[Part]:
    """``parts`` of one message with each ``<think>`` element that holds, whitespace around
    it aside, the same text as another reasoning part (a reasoning field) joined to that part
    as a ``think_core:K`` site: one reasoning stored twice (llama.cpp ``--reasoning-format
    deepseek-legacy`` writes it in ``reasoning_content`` and in ``<think>`` inside ``content``,
    ggml-org/llama.cpp PR #16394) is one part, scored once and edited alike in both places."""
    fields = [i for i, p in enumerate(parts) if _field_part(p)]
    if not fields:
        return list(parts)
    out = list(parts)
    gone: set[int] = set()
    for j, part in enumerate(parts):
        ref = part.ref
        if part.kind != "reasoning" or not isinstance(ref, TextRef) or len(ref.sites) != 1 or not ref.sites[0].how.startswith("think:"):
            continue
        start, end = core_span(part.text)
        core = part.text[start:end]
        i = next((i for i in fields if i not in gone and core and out[i].text == core), None)
        if i is None:
            continue
        site = Site(ref.sites[0].path, "think_core:" + ref.sites[0].how.split(":", 1)[1])
        held = out[i].ref
        out[i] = replace(out[i], ref=replace(held, sites=(*held.sites, site)))  # type: ignore[arg-type]
        gone.add(j)
        fields.remove(i)  # one copy per field part
    return [p for k, p in enumerate(out) if k not in gone]


def _field_part(part: Part) -> bool:
    return (part.kind == "reasoning" and isinstance(part.ref, TextRef) and bool(part.ref.sites)
            and not part.ref.sites[0].how.startswith(("think:", "think_core:")))


def freeze(items: Sequence[Draft | Part]) -> tuple[Part, ...]:
    """Parts of a step read as a mix of drafts and finished parts."""
    return tuple(item.part() if isinstance(item, Draft) else item for item in items)


Splicer = Callable[[str, str, str, str], "str | None"]
"""``splice(value, arg, old, new)``: ``value`` with ``old`` (sitting there as the site kind
says) replaced by ``new``, or None when ``value`` does not hold ``old`` that way."""


def _whole(value: str, _arg: str, old: str, new: str) -> str | None:
    return new if value == old else None


def _prefix(value: str, _arg: str, old: str, new: str) -> str | None:
    return new + value[len(old) :] if value.startswith(old) else None


def _unique(value: str, _arg: str, old: str, new: str) -> str | None:
    return value.replace(old, new, 1) if old and value.count(old) == 1 else None


def _think(value: str, arg: str, old: str, new: str) -> str | None:
    return replace_inner(value, int(arg), old, new)


def _think_core(value: str, arg: str, old: str, new: str) -> str | None:
    return replace_core(value, int(arg), old, new)


_SITE_KINDS: dict[str, Splicer] = {"whole": _whole, "prefix": _prefix, "unique": _unique, "think": _think, "think_core": _think_core}


def register_site_kind(kind: str, splicer: Splicer) -> None:
    """Add a site kind (``Site(path, "KIND:ARG")``) for markup only one adapter reads.

    Raises:
        ValueError: when ``kind`` exists already with another splicer.
    """
    if _SITE_KINDS.get(kind, splicer) is not splicer:
        raise ValueError(f"site kind {kind!r} is registered already")
    _SITE_KINDS[kind] = splicer


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
        ValueError: for an unknown kind, or when ``value`` no longer holds ``old`` as
        described (a bug: sites are checked on read).
    """
    kind, _, arg = how.partition(":")
    splicer = _SITE_KINDS.get(kind)
    if splicer is None:
        raise ValueError(f"unknown site kind {how!r}")
    out = splicer(value, arg, old, new) if isinstance(value, str) else None
    if out is None:
        raise ValueError(f"site {how!r} no longer holds the original text")
    return out


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


MIN_COPY_CHARS = 20
"""Shortest reasoning text (stripped, in characters) whose unregistered copies are refused."""


class UnregisteredCopy(ValueError):
    """An edited reasoning text still sits, unedited, in a string of its record that is no
    reasoning part's site (see the module docstring). ``path`` is that string's path,
    ``site`` the part's primary site."""

    def __init__(self, path: Path, site: Site):
        self.path, self.site = path, site
        super().__init__(f"{path} holds a copy of the reasoning at {site.path} that is not edited with it")


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
    _refuse_copies(edited, plans, _site_paths(originals), gone, _Read(_read_texts(originals) | _siteless_texts(originals)))
    _refuse_nested(originals, plans, gone)
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


def _refuse_nested(originals: Sequence[Trajectory], plans: Sequence[tuple[TextRef, str, str]], gone: Callable[[Path], bool]) -> None:
    """Raise :class:`UnregisteredCopy` when one reasoning part's text lies, strictly inside,
    in another reasoning part of the same step and record, and the two would be written
    differently: one reasoning read twice (``reasoning_content`` and a thought that quotes it
    in ``<think>``, where the adapter could not join them) would go out as two different
    compressions. The pair is consistent when the outer part, as written, holds the inner
    one as written and no longer holds its old text once that changed. (Parts of different
    steps saying the same words are two reasonings.)"""
    new_of = {ref: new for ref, old, new in plans if old != new}
    if not new_of:
        return
    for traj in originals:
        for step in traj.steps:
            parts = [(p.ref, p.text) for p in step.reasoning
                     if isinstance(p.ref, TextRef) and p.ref.sites and p.text and not gone(p.ref.sites[0].path)]
            if len(parts) < 2 or not any(ref in new_of for ref, _ in parts):
                continue
            for inner, text in parts:
                if len(text.strip()) < MIN_COPY_CHARS:
                    continue
                for outer, big in parts:
                    if outer is inner or len(big) <= len(text) or outer.sites[0].path[0] != inner.sites[0].path[0] or text not in big:
                        continue
                    a_new, b_new = new_of.get(inner, text), new_of.get(outer, big)
                    if a_new == text and b_new == big:
                        continue
                    if a_new not in b_new or (a_new != text and text in b_new):
                        raise UnregisteredCopy(outer.sites[0].path, inner.sites[0])


def _site_paths(originals: Sequence[Trajectory]) -> set[Path]:
    """Paths of every string that holds some reasoning part (its sites)."""
    return {site.path for traj in originals for step in traj.steps for part in step.reasoning
            if isinstance(part.ref, TextRef) for site in part.ref.sites}


def _read_texts(originals: Sequence[Trajectory]) -> set[str]:
    """Texts the adapter read as something other than reasoning (prompts, actions,
    observations): a string equal to one of them is that part's source, not a copy (an
    answer that happens to repeat the reasoning word for word)."""
    return {part.text for traj in originals for part in traj.prompt if part.text} | {
        part.text for traj in originals for step in traj.steps for part in step.parts if part.kind != "reasoning" and part.text}


def _siteless_texts(originals: Sequence[Trajectory]) -> set[str]:
    """Texts of reasoning parts that have no sites (read-only parts: sealed, redacted)."""
    return {part.text for traj in originals for step in traj.steps for part in step.parts
            if part.kind == "reasoning" and part.text and not isinstance(part.ref, TextRef)}


def _strings(value: object, path: Path) -> Iterator[tuple[Path, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, (*path, i))


class _Read:
    """Texts read as other parts (actions, observations, prompts, read-only reasoning)."""

    def __init__(self, texts: set[str]):
        self.texts = texts
        self._joined: str | None = None

    def within(self, value: str) -> bool:
        """True when ``value`` is, or is inside, one of the texts (verbatim or JSON-escaped)."""
        if value in self.texts:
            return True
        if self._joined is None:  # built on the first match only: matches are rare
            self._joined = "\0".join(self.texts)
        return value in self._joined or json.dumps(value, ensure_ascii=False)[1:-1] in self._joined


def _refuse_copies(edited: dict[int, object], plans: Sequence[tuple[TextRef, str, str]], registered: set[Path],
                   gone: Callable[[Path], bool], read: _Read) -> None:
    """Raise :class:`UnregisteredCopy` for the first edited text still found in a string of
    its record that is no part's site and not read into another part (``read``: actions,
    observations, prompts, and read-only reasoning, which has no site: a sealed item that
    says the same words). Each record's other strings are joined once and searched once per
    text, so the cost is one pass per edited part."""
    needles: dict[int, list[tuple[str, Site]]] = {}
    for ref, old, new in plans:
        if old == new or len(old.strip()) < MIN_COPY_CHARS:
            continue
        forms = dict.fromkeys((old, json.dumps(old, ensure_ascii=False)[1:-1]))
        for rec in dict.fromkeys(site.path[0] for site in ref.sites if not gone(site.path)):
            needles.setdefault(rec, []).extend((form, ref.sites[0]) for form in forms)
    for rec, wanted in needles.items():
        found = [(p, s) for p, s in _strings(edited[rec], (rec,))
                 if len(s) >= MIN_COPY_CHARS and p not in registered and not gone(p) and s not in read.texts]
        if not found:
            continue
        starts, pos = [], 0
        for _, s in found:
            starts.append(pos)
            pos += len(s) + 1
        joined = "\0".join(s for _, s in found)
        for needle, site in wanted:
            at = joined.find(needle)
            while at >= 0:
                i = bisect.bisect_right(starts, at) - 1
                text = found[i][1]
                # Not across two strings, and not a value read into another part's text (a tool
                # call's argument that says the same words is in that call's JSON).
                if at + len(needle) <= starts[i] + len(text) and not read.within(text):
                    raise UnregisteredCopy(found[i][0], site)
                at = joined.find(needle, at + 1)


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
