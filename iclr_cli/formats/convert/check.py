"""The lossless check: the output, read back by the target's own adapter, has the same structure.

Compared for P and every step, part by part in order: kind, label, ``write_back``, text (tool
call arguments and tool definitions as JSON values: their whitespace is not data), the call id
that pairs calls and results, and the media payload (kind, media type, base64 data or URL,
detail). Trajectory ids and ``meta`` are written as fields of each record but not compared.
"""

from __future__ import annotations

import json

from iclr_cli.formats.convert.pairing import describe, refuse
from iclr_cli.trajectory import Part, Trajectory


def _same_text(a: Part, b: Part) -> bool:
    if a.text == b.text:
        return True
    if (a.kind == "action" and a.label.startswith("tool_call:")) or (a.kind == "prompt" and a.label == "tools"):
        try:
            return json.loads(a.text) == json.loads(b.text)
        except ValueError:
            return False
    return False


def difference(a: Part, b: Part, source_id: str | None = None) -> str | None:
    """What differs between ``a`` (expected) and ``b`` (read back), or None. ``source_id``
    is the call id the input itself gave the part, if any: the output must keep it."""
    if (a.kind, a.label) != (b.kind, b.label):
        return f"would read back as {b.kind} {b.label!r}"
    if a.write_back is not b.write_back:
        return f"would read back as {b.write_back.value} reasoning"
    if not _same_text(a, b):
        return "would read back with other text"
    want = source_id if source_id is not None else a.call_id
    if want != b.call_id:
        return f"would read back paired with call {b.call_id!r} instead of {want!r}"
    if a.media != b.media:
        return "would read back with other media" if b.media is not None else "would lose its media"
    return None


def check_same(original: Trajectory, expected: Trajectory, again: Trajectory, to: str) -> None:
    """Raise unless ``again`` (the output read back) has the structure of ``expected``
    (``original`` with the call ids the conversion generated where the input had none; an id
    the input gave is checked against the input itself).

    Raises:
        UsageError: naming the place and the first difference found.
    """
    if len(expected.steps) != len(again.steps):
        raise refuse(original, "steps", f"{len(expected.steps)} steps would read back as {len(again.steps)}", to)
    triples = [("prompt", original.prompt, expected.prompt, again.prompt)]
    triples += [(f"step {s.index}", o.parts, s.parts, t.parts) for o, s, t in zip(original.steps, expected.steps, again.steps)]
    for where, source, before, after in triples:
        for i in range(max(len(before), len(after))):
            a = before[i] if i < len(before) else None
            b = after[i] if i < len(after) else None
            if a is None or b is None:
                raise refuse(original, where, f"{describe(i, a or b)} would be {'lost' if b is None else 'added'}", to)  # type: ignore[arg-type]
            problem = difference(a, b, source[i].call_id if i < len(source) else None)
            if problem:
                raise refuse(original, where, f"{describe(i, a)} {problem}", to)
