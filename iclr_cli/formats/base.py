"""What every format adapter provides, and the document it returns.

An adapter reads the bytes of one file into a :class:`Document` (the trajectories plus its
own private record of the raw input) and writes a compressed version back in the same format:
records it did not edit come out byte for byte, edited ones keep every field the tool does
not understand.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from iclr_cli.formats.sniff import Head, Match
from iclr_cli.trajectory import Trajectory


class OpaqueEdits(enum.Enum):
    """What to do with reasoning whose original is encrypted (a Codex/Responses item with
    ``encrypted_content``, an encrypted ``reasoning_details`` entry of the same text).

    METHOD.md: an edited item is not replayable. ``SEAL`` (``prune``'s and ``score``'s
    default, as ``iclr serve`` does on every upstream: :mod:`iclr_cli.formats.sealing`): the
    item is left as generated and no variant scores or edits its text; ``DROP``: an edit
    removes the whole item; ``KEEP``: the item is left untouched and the edit is reported
    but not written. The write-back engine treats ``SEAL`` like ``KEEP`` (a sealed part
    has no edit to write).
    """

    SEAL = "seal"
    DROP = "drop"
    KEEP = "keep"


@dataclass(frozen=True)
class Unrecognised:
    """Text in an assistant turn that the adapter reads neither as reasoning nor as action
    (a field or markup it does not know), so it is neither scored nor pruned.

    ``line`` is the 1-based line (None for a whole JSON document), ``field`` the JSON path
    (``messages[3].thinking``), ``what`` a short description.
    """

    line: int | None
    field: str
    what: str

    def describe(self, source: str) -> str:
        """``FILE:LINE: field F: what`` for a warning (no field part for a whole line)."""
        where = source if self.line is None else f"{source}:{self.line}"
        return f"{where}: field {self.field!r}: {self.what}" if self.field else f"{where}: {self.what}"


@dataclass
class Document:
    """One parsed input file.

    Attributes:
        format: the adapter name that read it.
        source: the file name as given by the user (``-`` for stdin), used in messages.
        trajectories: every trajectory found, in file order.
        state: adapter-private data needed to write the file back (raw records, line ends).
        warnings: problems that did not stop the read (skipped bad lines), one line each.
        unrecognised: assistant-turn text the adapter could not read as reasoning or action.
        signatures: provider signatures the model does not hold (Gemini ``thoughtSignature``
            on any part): write-back keeps them byte for byte, but no conversion can carry
            them, so ``iclr convert`` refuses the file (docs/FORMAT.md, "convert").
    """

    format: str
    source: str
    trajectories: list[Trajectory]
    state: object = None
    warnings: list[str] = field(default_factory=list)
    unrecognised: list[Unrecognised] = field(default_factory=list)
    signatures: list[Unrecognised] = field(default_factory=list)


class FormatAdapter(Protocol):
    """One on-disk transcript format.

    ``name`` is what ``--format`` takes; ``description`` one line for help and errors.
    """

    name: str
    description: str

    def sniff(self, head: Head | bytes) -> Match | None:
        """What in ``head`` (the first 64 KiB of a file, parsed once: :class:`Head`; raw bytes
        are parsed on the spot) shows this format, as a scored :class:`Match`, or None
        (:mod:`iclr_cli.formats.sniff`)."""
        ...

    def load(self, data: bytes, source: str, *, skip_bad_lines: bool = False) -> Document:
        """Parse a whole file.

        Raises:
            InputError: naming ``source``, the line (for line formats) and the field.
        """
        ...

    def dump(self, doc: Document, trajectories: Sequence[Trajectory], *, opaque: OpaqueEdits = OpaqueEdits.DROP) -> bytes:
        """Write ``doc`` back with the reasoning of ``trajectories`` (same ids and order as
        ``doc.trajectories``, reasoning text possibly edited). Unedited input must come back
        byte for byte."""
        ...

    # Adapters on the write-back engine also have ``write(doc, trajectories, *, opaque)``
    # returning :class:`iclr_cli.formats.writeback.WriteResult` (bytes and the reasoning as
    # written); :func:`iclr_cli.formats.writeback.write_document` calls either.
