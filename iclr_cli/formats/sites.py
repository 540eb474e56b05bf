"""Where a reasoning text sits in the records it was read from: sites, the refs that collect
them, and how an edit is spliced into each string (docs/FORMAT.md, "Write-back").

The same reasoning often sits in several strings (SWE-agent ``thought`` inside ``response``
and the history; OpenHands thoughts inside the raw model response; Codex summaries echoed as
``agent_reasoning`` events; OpenRouter ``reasoning`` and ``reasoning_details``). It is one
part, scored once, and an edit goes into every :class:`Site`. A site says how the text sits in
its string (``how``): ``whole`` (the string is the text), ``prefix`` (the string starts with
it), ``unique`` (it occurs exactly once), ``think:K`` (the reasoning of the K-th ``<think>``
element, as :mod:`iclr_cli.formats.think` pairs them), ``think_core:K`` (the same element's
reasoning without the whitespace around it: the ``<think>`` copy of a text a reasoning field
holds stripped), ``outside_think:K`` (in the K-th stretch of text outside the ``<think>``
elements, as its start or exactly once: the visible words of a thought that holds
``<think>``, :mod:`iclr_cli.formats.thoughts`), ``core`` (the string, whitespace around it
aside: a copy padded with blank lines); adapters may add kinds with
:func:`register_site_kind`. The first site is the primary copy (the one an agent sends back):
the text reported as written is read from there. The engine that writes edits into the sites
is :mod:`iclr_cli.formats.writeback`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from iclr_cli.formats.think import core_span, replace_core, replace_inner, replace_outside
from iclr_cli.trajectory import Part, WriteBack

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
        watch: records (JSONL lines), besides those of the sites, that may echo this
            reasoning (a Codex ``event_msg`` beside its reasoning item): the copy check
            searches them too, so an echo the adapter could not match is never left holding
            the text of an edited part.
    """

    sites: tuple[Site, ...]
    drop: tuple[Path, ...] = ()
    strip_keys: tuple[tuple[Path, str], ...] = field(default=())
    remove_when_empty: Path | None = None
    also_empty: tuple[Path, ...] = ()
    model: str | None = None
    clear_with: tuple[Path, ...] = ()
    watch: tuple[int, ...] = ()


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
        watch=(*primary.watch, *(r for r in copy.watch if r not in primary.watch)),
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
    watch: list[int] = field(default_factory=list)

    def add(self, site: Site) -> None:
        """Another string holding the text (ignored when known)."""
        if site not in self.sites:
            self.sites.append(site)

    def part(self) -> Part:
        """The finished part (``READ_ONLY`` ones carry no ref: they are never written)."""
        if self.write_back is WriteBack.READ_ONLY:
            return Part("reasoning", self.text, label=self.label, write_back=self.write_back)
        ref = TextRef(tuple(self.sites), drop=tuple(self.drop), strip_keys=tuple(self.strip_keys), remove_when_empty=self.remove_when_empty,
                      clear_with=tuple(self.clear_with), watch=tuple(self.watch))
        return Part("reasoning", self.text, label=self.label, ref=ref, write_back=self.write_back)


def join_think_copies(parts: Sequence[Part]) -> list[Part]:
    """``parts`` of one message with each ``<think>`` element that holds, whitespace around
    it aside, the same text as another reasoning part (a reasoning field) joined to that part
    as a ``think_core:K`` site: one reasoning stored twice (llama.cpp ``--reasoning-format
    deepseek-legacy`` writes it in ``reasoning_content`` and in ``<think>`` inside ``content``,
    ggml-org/llama.cpp PR #16394) is one part, scored once and edited alike in both places.
    A ``<think>`` part may have several sites (the same element in copies of the message):
    each becomes a ``think_core`` site."""
    fields = [i for i, p in enumerate(parts) if _field_part(p)]
    if not fields:
        return list(parts)
    out = list(parts)
    gone: set[int] = set()
    for j, part in enumerate(parts):
        ref = part.ref
        if part.kind != "reasoning" or not isinstance(ref, TextRef) or not ref.sites or not all(s.how.startswith("think:") for s in ref.sites):
            continue
        start, end = core_span(part.text)
        core = part.text[start:end]
        i = next((i for i in fields if i not in gone and core and out[i].text == core), None)
        if i is None:
            continue
        sites = tuple(Site(s.path, "think_core:" + s.how.split(":", 1)[1]) for s in ref.sites)
        held = out[i].ref
        out[i] = replace(out[i], ref=replace(held, sites=(*held.sites, *(s for s in sites if s not in held.sites))))  # type: ignore[arg-type]
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


def _outside_think(value: str, arg: str, old: str, new: str) -> str | None:
    return replace_outside(value, int(arg), old, new)


def _core(value: str, _arg: str, old: str, new: str) -> str | None:
    start, end = core_span(value)
    return value[:start] + new + value[end:] if old and value[start:end] == old else None


_SITE_KINDS: dict[str, Splicer] = {"whole": _whole, "prefix": _prefix, "unique": _unique, "think": _think, "think_core": _think_core,
                                   "outside_think": _outside_think, "core": _core}


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
