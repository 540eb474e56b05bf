"""``iclr convert``: trajectories written as canonical ``iclr`` JSONL, OpenAI chat or
Anthropic Messages, only where nothing is lost (docs/FORMAT.md, "convert").

Every conversion is checked before anything is written: the output is read back by the
target's own adapter and compared part by part with the input (:mod:`.check`: kind, label,
text, ``write_back``, call ids and pairing, media). A conversion that would lose anything is
refused with exit 2, naming the trajectory, the step and the part.

- ``iclr`` carries the whole model (call ids and media included).
- ``openai`` / ``anthropic``: :mod:`.openai`, :mod:`.anthropic` say what each holds.
Tool results pair with their calls by id (:mod:`.pairing`), never by position.
"""

from __future__ import annotations

from collections.abc import Sequence


from iclr_cli.errors import UsageError
from iclr_cli.jsonio import dumps_like
from iclr_cli.formats.base import Document
from iclr_cli.formats.writeback import Records
from iclr_cli.formats.convert.anthropic import to_anthropic
from iclr_cli.formats.convert.carried import describe, first_not_carried, reading_tracked, tracked
from iclr_cli.formats.convert.check import check_same
from iclr_cli.formats.convert.openai import to_openai
from iclr_cli.trajectory import Trajectory

TARGETS = ("iclr", "openai", "anthropic")
__all__ = ["TARGETS", "convert_document", "convert_trajectories", "reading_tracked"]


def _to_iclr(traj: Trajectory) -> tuple[dict, Trajectory]:
    from iclr_cli.formats.adapters import iclr_jsonl

    return iclr_jsonl.to_record(traj), traj


_BUILDERS = {"iclr": _to_iclr, "openai": to_openai, "anthropic": to_anthropic}


def convert_trajectories(trajectories: Sequence[Trajectory], to: str) -> bytes:
    """JSONL bytes of ``trajectories`` in format ``to`` (one of :data:`TARGETS`), one record
    per trajectory.

    Raises:
        UsageError: for an unknown target, or naming the trajectory, step and part when the
        conversion would lose data.
    """
    from iclr_cli.formats import registry

    if to not in _BUILDERS:
        raise UsageError(f"--to must be one of {', '.join(TARGETS)}, not {to!r}")
    built = [_BUILDERS[to](t) for t in trajectories]
    # the jsonio writer: a lone surrogate (a string cut inside an emoji) goes back as the escape it was read from
    data = b"".join(dumps_like(record, b"{}") + b"\n" for record, _ in built)
    back = registry.get(to).load(data, f"<{to} output>").trajectories if data else []
    if len(back) != len(built):
        raise UsageError(f"cannot convert to {to} without losing data: {len(built)} trajectories would read back as {len(back)}")
    for original, (_, expected), again in zip(trajectories, built, back):
        check_same(original, expected, again, to)
    return data


def convert_document(doc: Document, to: str) -> bytes:
    """:func:`convert_trajectories` of one read file, refused when the adapter found text it
    could not read (``doc.unrecognised``) or provider signatures the model does not hold
    (``doc.signatures``, Gemini ``thoughtSignature`` on any part): neither would be carried.

    When the file was read under :func:`~.carried.reading_tracked` (``iclr convert`` does),
    the input as parsed JSON is checked too (:mod:`.carried`): a text under a key the adapter
    never read that the output does not carry refuses the conversion.

    Raises:
        UsageError: as :func:`convert_trajectories`, or naming the first unrecognised field,
        signature or text not carried (its line and field).
    """
    if doc.unrecognised:
        count = len(doc.unrecognised)
        raise UsageError(
            f"cannot convert {doc.source} to {to} without losing data: {count} text{'s' if count > 1 else ''} or field{'s' if count > 1 else ''} "
            f"the {doc.format} adapter does not read would not be carried; the first: {doc.unrecognised[0].describe(doc.source)}"
        )
    if doc.signatures:
        # No target holds a provider signature (Gemini needs a functionCall's back with the call).
        count, first = len(doc.signatures), doc.signatures[0]
        raise UsageError(
            f"cannot convert {doc.source} to {to} without losing data: {count} {doc.format} signature{'s' if count > 1 else ''} "
            f"(a provider's thought signature) would not be carried; the first: {first.describe(doc.source)}"
        )
    data = convert_trajectories(doc.trajectories, to)
    _check_carried(doc, to, data)
    return data


def _check_carried(doc: Document, to: str, data: bytes) -> None:
    from iclr_cli.formats import registry

    records = doc.state
    if not isinstance(records, Records) or not tracked(records.values):
        return
    skip = getattr(registry.get(doc.format), "not_carried", frozenset())
    lost = first_not_carried(records.values, data, skip)
    if lost is None:
        return
    rec, path, text = lost
    line = records.lines[rec].number if records.lines is not None else None
    where = doc.source if line is None else f"{doc.source}:{line}"
    preview = text if len(text) <= 60 else text[:57] + "..."
    raise UsageError(
        f"cannot convert {doc.source} to {to} without losing data: {where}: field {describe(path)!r}: "
        f"text the {doc.format} adapter does not read would not be carried ({preview!r})"
    )
