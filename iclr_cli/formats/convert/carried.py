"""The input side of the lossless check: every text of the input, as parsed JSON, is carried.

The part-by-part check (:mod:`.check`) compares what the adapter read with what the target
reads back, so a field the adapter never read is invisible to it (docs/FORMAT.md, "Compared with the input as parsed JSON"; a
Bedrock Converse request read as OpenAI chat lost its system prompt, signed reasoning and
tool call, and ``convert`` said nothing). This check looks at the input itself:

- ``convert`` parses its input with :class:`AskedDict` objects (:func:`reading_tracked`), which
  record every key the adapter asked for (``obj[key]``, ``obj.get(key)``, ``pop``,
  ``setdefault``). A key never asked for is **unread**, and so is everything under it.
  Iterating an object (``items()``) is not asking: an adapter that scans keys to report the
  ones it does not know has not read them.
- Every **text** under an unread key must be **carried**: found in the output (equal to one
  of its strings, or inside one, verbatim or JSON-escaped, as tool arguments are; a JSON object
  or list by an equal JSON value, as an object or a string). A text is a
  string with whitespace between words (prose, code, a tool output); ids, timestamps, hashes,
  enum values, numbers and booleans are format data the model does not hold
  (docs/FORMAT.md, "convert").
- Key paths an adapter declares in ``not_carried`` (format data that holds text but is no
  part of the conversation: a structured duplicate of a tool result, run configuration, UI
  summaries) are skipped; fields the adapter
  reported as unrecognised refuse the conversion on their own (:func:`~iclr_cli.formats.convert.convert_document`).

The first text not carried refuses the conversion with exit 2, naming the line and field.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Hashable, Iterator, Sequence

import orjson

from iclr_cli.formats.writeback import field_name
from iclr_cli.jsonio import loads, objects_as

_TEXT = re.compile(r"\S\s+\S")


class AskedDict(dict):
    """A parsed JSON object that records the keys asked for (``asked``)."""

    __slots__ = ("asked",)

    def __init__(self, pairs=()):
        super().__init__(pairs)
        self.asked: set = set()

    def __getitem__(self, key):
        self.asked.add(key)
        return dict.__getitem__(self, key)

    def get(self, key, default=None):
        self.asked.add(key)
        return dict.get(self, key, default)

    def pop(self, key, *default):
        self.asked.add(key)
        return dict.pop(self, key, *default)

    def setdefault(self, key, default=None):
        self.asked.add(key)
        return dict.setdefault(self, key, default)


@contextlib.contextmanager
def reading_tracked() -> Iterator[None]:
    """Parse JSON read inside the block into :class:`AskedDict` objects (module docstring)."""
    with objects_as(AskedDict):
        yield


def is_text(value: object) -> bool:
    """True for a string with whitespace between two words: text, not an id or a number."""
    return isinstance(value, str) and _TEXT.search(value) is not None


def unread_texts(value: object, path: tuple, skip: frozenset[tuple[str, ...]], unread: bool = False, keys: tuple = ()) -> Iterator[tuple[tuple, str]]:
    """``(path, text)`` of every text under a key the adapter never asked for, in document
    order. ``skip`` holds key paths from the record, list indices left out
    (``("trajectory", "state")`` is every ``trajectory[i].state``): what lies under them is
    left out."""
    if isinstance(value, str):
        if unread and is_text(value):
            yield path, value
    elif isinstance(value, dict):
        asked = value.asked if isinstance(value, AskedDict) else set()
        for key, item in dict.items(value):
            inner = (*keys, key)
            if inner not in skip:
                yield from unread_texts(item, (*path, key), skip, unread or key not in asked, inner)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from unread_texts(item, (*path, i), skip, unread, keys)


def tracked(values: Sequence[object]) -> bool:
    """True when ``values`` were parsed under :func:`reading_tracked` (objects know what was asked)."""
    return any(isinstance(v, AskedDict) or (isinstance(v, list) and v and isinstance(v[0], AskedDict)) for v in values)


class Output:
    """The strings of a conversion's JSONL output, for "is this text carried?"; and its
    objects and lists, for a text that is a JSON document (tool-call arguments)."""

    def __init__(self, data: bytes):
        self._records = [loads(line) for line in data.splitlines() if line.strip()]
        leaves: list[str] = []
        for record in self._records:
            _strings(record, leaves)
        self._set = set(leaves)
        self._joined = "\0".join(leaves)
        self._values: set[bytes] | None = None  # made when a JSON text first needs them

    def carries(self, text: str) -> bool:
        """True when ``text`` is one of the output's strings or inside one (verbatim or
        JSON-escaped), or when it is a JSON object or list that the output holds as a value
        (or as a string holding that JSON):
        tool-call arguments are a string in OpenAI chat and an object (``input``) in
        Anthropic Messages, and are compared as JSON values (docs/FORMAT.md, "convert")."""
        if text in self._set or text in self._joined:
            return True
        escaped = json.dumps(text, ensure_ascii=False)[1:-1]
        if escaped != text and escaped in self._joined:
            return True
        if (key := _json_key(text)) is None:
            return False
        if self._values is None:
            self._values = set()
            for record in self._records:
                _values(record, self._values)
        return key in self._values


def _json_key(text: str) -> bytes | None:
    """The canonical bytes of ``text`` parsed as a JSON object or list, else None."""
    if not text.lstrip().startswith(("{", "[")):
        return None
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return _canonical(value) if isinstance(value, (dict, list)) else None


def _canonical(value: object) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def _strings(value: object, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, (dict, list)):
        for item in value.values() if isinstance(value, dict) else value:
            _strings(item, out)


def _values(value: object, out: set[bytes]) -> None:
    """The canonical bytes of every object and list in ``value``, and of every string that is
    a JSON object or list (OpenAI tool-call ``arguments``)."""
    if isinstance(value, str):
        if (key := _json_key(value)) is not None:
            out.add(key)
    elif isinstance(value, (dict, list)):
        out.add(_canonical(value))
        for item in value.values() if isinstance(value, dict) else value:
            _values(item, out)


def first_not_carried(values: Sequence[object], output: bytes, skip: frozenset[tuple[str, ...]]) -> tuple[int, tuple[Hashable, ...], str] | None:
    """``(record index, path inside it, text)`` of the first unread text of ``values`` that
    ``output`` does not carry, or None."""
    out: Output | None = None
    for rec, value in enumerate(values):
        for path, text in unread_texts(value, (), skip):
            out = out or Output(output)
            if not out.carries(text):
                return rec, path, text
    return None


def describe(path: tuple) -> str:
    """The field name of ``path`` (``system[0].text``)."""
    return field_name(path)
