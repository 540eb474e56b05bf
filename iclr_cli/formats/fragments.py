"""One streamed thinking block kept as one ``thinking_blocks`` entry per delta.

LiteLLM streams Claude's and MiniMax's thinking as ``thinking_blocks`` chunks, and a client
that accumulates the stream keeps the whole list: one entry per delta (``"signature": ""``,
cut mid-word), then the signature alone in a last entry (``{"thinking": "", "signature":
...}``), as Anthropic's stream sends ``signature_delta`` after the block's ``thinking_delta``
events (https://docs.anthropic.com/en/docs/build-with-claude/streaming, "Thinking delta").
Those entries are one reasoning: their texts joined are the block, the signature covers the
joined text, and ``[SKIP]`` must replace whole paragraphs of it, never words of a fragment.

:func:`streamed_blocks` finds such groups in a list; the readers
(:mod:`iclr_cli.formats.openai_messages`, :mod:`iclr_cli.formats.chat_reasoning`) read each
group as one part whose sites are the fragments (site kind ``fragment:J``): an edit writes the
whole new text into the first fragment and empties the others, so the fragments still join to
the text as written (and to ``reasoning_content``, edited alike), and the entries, the
signature entry among them, stay where they were.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from iclr_cli.formats.sites import register_site_kind


@dataclass(frozen=True)
class Fragments:
    """One streamed block in a ``thinking_blocks`` list.

    Attributes:
        pieces: list indices of the entries that hold text, in order.
        members: every index of the group (the pieces and a signature-only entry).
        text: the pieces' texts joined: the block as the model streamed it.
        signed: index of the entry whose non-empty ``signature`` covers the group, or None.
    """

    pieces: tuple[int, ...]
    members: tuple[int, ...]
    text: str
    signed: int | None


def _signature(entry: dict) -> str | None:
    value = entry.get("signature")
    return value if isinstance(value, str) and value else None


def streamed_blocks(blocks: Sequence[object]) -> list[Fragments]:
    """The groups of ``blocks`` (a ``thinking_blocks`` list) that are one streamed block.

    A run is a stretch of consecutive ``thinking`` entries with string text, closed by an
    entry with a non-empty signature (a signature ends its block, module docstring). A run is a
    streamed group when it has two entries or more and either ends with a signature-only entry
    (text ``""``) or every entry of it but the signed one has ``"signature": ""``, LiteLLM's
    delta shape. Entries that each carry their own signature (blocks returned whole) are no
    group.
    """
    runs: list[list[int]] = []
    run: list[int] = []
    for k, entry in enumerate(blocks):
        if not (isinstance(entry, dict) and entry.get("type") == "thinking" and isinstance(entry.get("thinking"), str)):
            if run:
                runs.append(run)
            run = []
            continue
        run.append(k)
        if _signature(entry) is not None:
            runs.append(run)
            run = []
    if run:
        runs.append(run)
    groups = []
    for run in runs:
        if len(run) < 2:
            continue
        last = blocks[run[-1]]
        signed = run[-1] if _signature(last) is not None else None  # type: ignore[arg-type]
        signature_only = signed is not None and last["thinking"] == ""  # type: ignore[index]
        deltas = all(blocks[k].get("signature") == "" for k in run if k != signed)  # type: ignore[union-attr]
        if not (signature_only or deltas):
            continue
        pieces = tuple(k for k in run if blocks[k]["thinking"])  # type: ignore[index]
        if pieces:
            groups.append(Fragments(pieces, tuple(run), "".join(blocks[k]["thinking"] for k in pieces), signed))  # type: ignore[index]
    return groups


def _splice_fragment(value: str, arg: str, old: str, new: str) -> str | None:
    """The first fragment takes the whole new text, the others become ``""``; each must still
    hold its piece of ``old`` (a bug otherwise: sites are checked on read)."""
    if arg == "0":
        return new if old.startswith(value) else None
    return "" if value and value in old else None


register_site_kind("fragment", _splice_fragment)
