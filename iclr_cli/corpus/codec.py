"""One dataset cell <-> one :class:`~iclr_cli.formats.base.Document`, and back.

A cell holds one trajectory in one of two shapes:

- a message list (``list<struct>`` as ``datasets`` stores OpenAI messages, absent fields as
  null; or ``list<json>``): read by the OpenAI chat adapter (``--format`` picks another), on
  the JSON bytes of the list, so a row reads exactly as the same list in a file would;
- a JSON document (``string``, ``binary`` or ``json``): the text of a file in any format
  ``iclr`` reads, sniffed by the format registry (or named by ``--format``).

Write-back returns the cell in its own Arrow type. Only values that the adapter changed are
rebuilt; everything else is the original value, so nulls that ``datasets`` added stay null and
no field that the column's type lacks is ever created (that is an error, never a silent drop).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from iclr_cli.corpus.source import DatasetSpec
from iclr_cli.errors import InputError, UsageError
from iclr_cli.formats.base import Document, FormatAdapter, OpaqueEdits
from iclr_cli.trajectory import Trajectory

MESSAGES = "messages"
DOCUMENT = "document"


@dataclass
class Cell:
    """One read cell: its stored value, the bytes the adapter read and what it made of them."""

    stored: object
    data: bytes
    adapter: FormatAdapter
    doc: Document


class CellCodec:
    """Reads and writes the cells of one column of Arrow type ``arrow_type``.

    Raises:
        UsageError: the column's type holds neither a message list nor a JSON document.
    """

    def __init__(self, spec: DatasetSpec, arrow_type, *, fmt: str | None = None, skip_bad_lines: bool = False):
        import pyarrow as pa

        self.spec = spec
        self.type = arrow_type
        self.fmt = fmt
        self.skip_bad_lines = skip_bad_lines
        base = arrow_type.storage_type if _is_json(arrow_type) else arrow_type
        if _is_json(arrow_type) or pa.types.is_string(base) or pa.types.is_large_string(base) or pa.types.is_binary(base) or pa.types.is_large_binary(base):
            self.kind = DOCUMENT
        elif pa.types.is_list(base) or pa.types.is_large_list(base):
            self.kind = MESSAGES
        else:
            raise UsageError(f"{spec.where()}: column {spec.column!r} has type {arrow_type}; expected a message list or a JSON string")

    def read(self, stored, row: int) -> Cell:
        """Parse one cell.

        Raises:
            InputError: ``SRC [split] row N: field 'column...': problem`` for a null cell, a
            value that is not a trajectory, or any problem the format adapter reports.
        """
        from iclr_cli.formats import registry

        where = self.spec.where(row)
        column = self.spec.column
        if stored is None:
            raise InputError(where, "is null, not a trajectory", field=column)
        if self.kind == MESSAGES:
            try:
                data = orjson.dumps(plain(stored, self.type))
            except (TypeError, ValueError) as exc:
                raise InputError(where, f"cannot be read as JSON: {exc}", field=column) from exc
            adapter = registry.get(self.fmt or "openai")
        else:
            data = stored.encode("utf-8") if isinstance(stored, str) else bytes(stored)
            adapter = registry.get(self.fmt) if self.fmt else None
        try:
            adapter = adapter or registry.detect(data, where)
            doc = adapter.load(data, where, skip_bad_lines=self.skip_bad_lines)
        except InputError as exc:
            raise InputError(where, exc.problem, line=exc.line, field=_join(column, exc.field, self.kind)) from exc
        return Cell(stored, data, adapter, doc)

    def write(self, cell: Cell, compressed: Sequence[Trajectory], opaque: OpaqueEdits, row: int):
        """The cell with the reasoning of ``compressed`` written back, in the stored shape,
        and the trajectories as written (:class:`~iclr_cli.formats.writeback.WriteResult`).

        Raises:
            InputError: the write-back would need a field the column's type does not have.
        """
        from iclr_cli.formats.writeback import write_document

        wrote = write_document(cell.adapter, cell.doc, compressed, opaque=opaque)
        out = wrote.data
        if out == cell.data:
            return cell.stored, wrote.written
        if self.kind == DOCUMENT:
            return (out if isinstance(cell.stored, (bytes, bytearray)) else out.decode("utf-8")), wrote.written
        try:
            return rebuild(orjson.loads(out), cell.stored, plain(cell.stored, self.type), self.type, self.spec.column), wrote.written
        except ValueError as exc:
            raise InputError(self.spec.where(row), str(exc), field=self.spec.column) from exc

    def array(self, values: Sequence[object]):
        """An Arrow array of the column's own type from stored values."""
        import pyarrow as pa

        plain_type = storage_type(self.type)
        array = pa.array(values, type=plain_type)
        # Only cast when there is an extension type to restore: casting a struct with a
        # null-typed child to its own type yields an invalid array (pyarrow 26).
        return array if plain_type == self.type else array.cast(self.type)


def _join(column: str, field: str | None, kind: str) -> str:
    if not field:
        return column
    if kind == MESSAGES and field.startswith("["):
        return column + field
    return f"{column}: {field}"


def _is_json(t) -> bool:
    import pyarrow as pa

    return isinstance(t, pa.BaseExtensionType) and t.extension_name == "arrow.json"


def storage_type(t):
    """``t`` with every extension type replaced by its storage type (Arrow builds arrays
    from Python values only for plain types; the result is cast back to ``t``)."""
    import pyarrow as pa

    if isinstance(t, pa.BaseExtensionType):
        return storage_type(t.storage_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        field = t.value_field.with_type(storage_type(t.value_type))
        if pa.types.is_large_list(t):
            return pa.large_list(field)
        return pa.list_(field, t.list_size) if pa.types.is_fixed_size_list(t) else pa.list_(field)
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(storage_type(t.field(i).type)) for i in range(t.num_fields)])
    return t


def plain(stored, t):
    """A stored cell value (``to_pylist`` form) as the JSON value it stands for: ``json``
    cells parsed, structs as dicts with every field of the type (absent ones ``None``)."""
    import pyarrow as pa

    if stored is None:
        return None
    if _is_json(t):
        return orjson.loads(stored)
    if isinstance(t, pa.BaseExtensionType):
        return plain(stored, t.storage_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return [plain(v, t.value_type) for v in stored]
    if pa.types.is_struct(t):
        return {t.field(i).name: plain(stored.get(t.field(i).name), t.field(i).type) for i in range(t.num_fields)}
    return stored


def rebuild(new, stored, old, t, where: str):
    """The stored form of ``new`` (a JSON value), reusing ``stored`` wherever ``new`` equals
    ``old`` (= ``plain(stored, t)``), so untouched values keep their exact bytes and nulls.

    Raises:
        ValueError: ``new`` has an object field the struct type ``t`` has not.
    """
    import pyarrow as pa

    if new == old:
        return stored
    if _is_json(t):
        return orjson.dumps(new).decode("utf-8")
    if isinstance(t, pa.BaseExtensionType):
        return rebuild(new, stored, old, t.storage_type, where)
    if (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)) and isinstance(new, list):
        stored_l = stored if isinstance(stored, list) else []
        old_l = old if isinstance(old, list) else []
        return [
            rebuild(v, stored_l[i] if i < len(stored_l) else None, old_l[i] if i < len(old_l) else None, t.value_type, f"{where}[{i}]")
            for i, v in enumerate(new)
        ]
    if pa.types.is_struct(t) and isinstance(new, dict):
        names = [t.field(i).name for i in range(t.num_fields)]
        extra = sorted(set(new) - set(names))
        if extra:
            raise ValueError(f"write-back needs field(s) {', '.join(extra)} in {where}, which the column's type does not have")
        stored_d = stored if isinstance(stored, dict) else {}
        old_d = old if isinstance(old, dict) else {}
        return {n: rebuild(new.get(n), stored_d.get(n), old_d.get(n), t.field(n).type, f"{where}.{n}") for n in names}
    return new
