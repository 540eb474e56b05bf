"""The two checks that keep one reasoning from going out half-edited (docs/FORMAT.md,
"Write-back" and "One reasoning, counted once"), run by :func:`iclr_cli.formats.writeback.apply_edits`
once the edits are applied:

- **Every copy edited, or the record refused.** After an edit, the original text of the part
  may survive only in strings that are sites of some reasoning part. A *copy* is any other
  string of the same record (a JSONL line; the whole document for a JSON file; one message
  for the message-level write-back), or of a record the part watches (``TextRef.watch``: a
  Codex echo event), that contains the original text, verbatim or JSON-escaped (a request
  stored as a JSON string), unless the string is, or lies inside, the text of a part read as
  something else (an answer that repeats the reasoning word for word is the answer; a tool
  argument is in its call's JSON) or of a read-only reasoning part (a sealed item has no site
  but is reasoning). Texts shorter than :data:`MIN_COPY_CHARS` characters (stripped) are not
  checked: they recur by chance ("Done."). Strings dropped with an opaque item do not count.
- **One reasoning, one compression.** When one reasoning part's text lies strictly inside
  another part of the same step and record (a thought that quotes ``reasoning_content`` in
  ``<think>``, where the adapter could not join them), the outer part, as written, must hold
  exactly the inner part as written where it held its old text
  (:func:`iclr_cli.formats.think.copy_kept_alike`).

Either failure raises :class:`UnregisteredCopy`, which :func:`iclr_cli.formats.writeback.write_back`
turns into an input error naming the file, line and both fields.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Iterator, Sequence

from iclr_cli.formats.sites import Path, Site, TextRef
from iclr_cli.formats.think import copy_kept_alike
from iclr_cli.trajectory import Trajectory

MIN_COPY_CHARS = 20
"""Shortest reasoning text (stripped, in characters) whose unregistered copies are refused."""


class UnregisteredCopy(ValueError):
    """An edited reasoning text still sits, unedited, in a string of its record that is no
    reasoning part's site (see the module docstring). ``path`` is that string's path,
    ``site`` the part's primary site."""

    def __init__(self, path: Path, site: Site):
        self.path, self.site = path, site
        super().__init__(f"{path} holds a copy of the reasoning at {site.path} that is not edited with it")


def refuse_half_edits(values: Sequence[object], edited: dict[int, object], originals: Sequence[Trajectory],
                      plans: Sequence[tuple[TextRef, str, str]], gone: Callable[[Path], bool]) -> None:
    """Run both checks (module docstring) on ``edited`` (the changed copies of ``values``, by
    index) for the edits ``plans`` (``(ref, old text, new text)``) of ``originals``; ``gone``
    says whether a path was dropped with an opaque item.

    Raises:
        UnregisteredCopy: naming the string that still holds a copy and the part's site.
    """
    _refuse_copies(values, edited, plans, _site_paths(originals), gone, _Read(_read_texts(originals) | _siteless_texts(originals)))
    _refuse_nested(originals, plans, gone)


def _refuse_nested(originals: Sequence[Trajectory], plans: Sequence[tuple[TextRef, str, str]], gone: Callable[[Path], bool]) -> None:
    """Raise :class:`UnregisteredCopy` (the outer part's field, the inner part's site) when one
    reasoning part's text lies, strictly inside, in another reasoning part of the same step
    and record, and the two are not written as one compression: one reasoning read twice
    (``reasoning_content`` and a thought that quotes it in ``<think>``, where the adapter
    could not join them). The rule is exact (:func:`iclr_cli.formats.think.copy_kept_alike`):
    the outer text as written must say what the inner one says where the copy was, not merely
    contain it somewhere. (Parts of different steps saying the same words are two
    reasonings, and so are two parts of one step whose texts differ only in whitespace, as
    two equal texts are.)"""
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
                    if big.strip() == text.strip():
                        continue  # the same words twice, whitespace aside: two parts, as two equal texts are
                    a_new, b_new = new_of.get(inner, text), new_of.get(outer, big)
                    if (a_new != text or b_new != big) and not copy_kept_alike(big, text, b_new, a_new):
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


def _refuse_copies(values: Sequence[object], edited: dict[int, object], plans: Sequence[tuple[TextRef, str, str]], registered: set[Path],
                   gone: Callable[[Path], bool], read: _Read) -> None:
    """Raise :class:`UnregisteredCopy` for the first edited text still found in a string of
    its record (or of a record the part watches) that is no part's site and not read into
    another part (``read``: actions,
    observations, prompts, and read-only reasoning, which has no site: a sealed item that
    says the same words). Each record's other strings are joined once and searched once per
    text, so the cost is one pass per edited part."""
    needles: dict[int, list[tuple[str, Site]]] = {}
    for ref, old, new in plans:
        if old == new or len(old.strip()) < MIN_COPY_CHARS:
            continue
        forms = dict.fromkeys((old, json.dumps(old, ensure_ascii=False)[1:-1]))
        for rec in dict.fromkeys([*(site.path[0] for site in ref.sites if not gone(site.path)), *ref.watch]):
            if not gone((rec,)):
                needles.setdefault(rec, []).extend((form, ref.sites[0]) for form in forms)
    for rec, wanted in needles.items():
        found = [(p, s) for p, s in _strings(edited.get(rec, values[rec]), (rec,))
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
