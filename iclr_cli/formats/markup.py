"""Reasoning written inline in a chat ``content`` string, found and edited in place.

Shapes read (METHOD.md, "Objects": inline ``<think>`` is reasoning):

- ``<think>...</think>`` elements and a lone leading ``</think>`` (the template put
  ``<think>`` in the prompt), paired as the model emitted them by the one think parser,
  :mod:`iclr_cli.formats.think`; located as ``think:K`` sites of the write-back engine;
- harmony channels (gpt-oss raw output): ``<|channel|>analysis<|message|>...<|end|>`` is
  reasoning, ``final`` is the answer, ``commentary`` is a preamble or, with ``to=NAME``, a
  tool call whose arguments are the message. An ``analysis`` message is located as a
  ``harmony:K`` site (the K-th ``analysis`` message), a site kind this module registers with
  :mod:`iclr_cli.formats.writeback`.

Everything outside the reasoning pieces is kept byte for byte on write-back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from iclr_cli.formats.think import code_spans, think_elements
from iclr_cli.formats.writeback import register_site_kind
from iclr_cli.model_syntax import FOREIGN_REASONING, delimiter_of

_HARMONY = re.compile(
    r"(?:<\|start\|>(?P<role>[^<]*))?<\|channel\|>(?P<header>[^<]*?)(?:<\|constrain\|>[^<]*)?<\|message\|>"
    r"(?P<body>.*?)(?:<\|end\|>|<\|return\|>|<\|call\|>|(?=<\|start\|>)|\Z)",
    re.DOTALL,
)
_RECIPIENT = re.compile(r"\bto=([^\s<]+)")
# Reasoning markup of other model families that this project does not read as reasoning (every
# start and end of iclr_cli.model_syntax.REASONING_DELIMITERS not marked ``read``), harmony
# channel tokens outside a harmony message, and think tags left unpaired: found in visible text
# (outside code), they are reported, never silently taken for the answer. Case is ignored for
# tags: ``<THINK>`` is not read as reasoning (the pairing rules of :mod:`iclr_cli.formats.think`
# are for the lower-case tags models emit), but it is reported.
_FOREIGN = re.compile(FOREIGN_REASONING.pattern + r"|(?i:<\|channel\|>|</?think>)")


@dataclass(frozen=True)
class Piece:
    """One piece of a content string, in order.

    ``kind`` is ``reasoning``, ``visible`` (text the user sees), ``call`` (a harmony tool call;
    ``label`` is ``tool_call:NAME``) or ``unknown`` (a harmony channel this module does not
    know; ``label`` is its name). ``how`` is a reasoning piece's write-back site kind
    (``think:K`` or ``harmony:K``).
    """

    kind: str
    text: str
    label: str = ""
    how: str | None = None


def _harmony(text: str) -> list[re.Match]:
    return list(_HARMONY.finditer(text)) if "<|channel|>" in text and "<|message|>" in text else []


def read(text: str) -> list[Piece]:
    """The pieces of a content string: reasoning, visible text, harmony calls, in order.

    Whitespace-only visible text between pieces is left out; reasoning pieces are kept even
    when empty (a reasoning emptied by an earlier prune is still the same slot).
    """
    pieces: list[Piece] = []

    def visible(a: int, b: int) -> None:
        if text[a:b].strip():
            pieces.append(Piece("visible", text[a:b], label="assistant"))

    messages = _harmony(text)
    if messages:
        pos, k = 0, 0
        for m in messages:
            visible(pos, m.start())
            header = m.group("header").strip()
            channel = header.split()[0] if header else ""
            recipient = _RECIPIENT.search(f"{m.group('role') or ''} {header}")
            body = m.group("body")
            if channel == "analysis":
                pieces.append(Piece("reasoning", body, label="reasoning", how=f"harmony:{k}"))
                k += 1
            elif recipient is not None:
                name = recipient.group(1).removeprefix("functions.")
                pieces.append(Piece("call", body, label=f"tool_call:{name}"))
            elif channel in ("final", "commentary"):
                if body.strip():
                    pieces.append(Piece("visible", body, label="assistant"))
            else:
                pieces.append(Piece("unknown", body, label=channel or "?"))
            pos = m.end()
        visible(pos, len(text))
        return pieces
    pos = 0
    for k, el in enumerate(think_elements(text)):
        visible(pos, el.start)
        pieces.append(Piece("reasoning", el.inner(text), label="reasoning", how=f"think:{k}"))
        pos = el.end
    visible(pos, len(text))
    return pieces


def foreign_markup(text: str) -> list[str]:
    """Reasoning-like tags in visible ``text`` outside code spans, in order of first
    appearance, one per delimiter (``<thinking>...</thinking>`` gives ``<thinking>``): markup
    the reader did not take as reasoning."""
    found = list(_FOREIGN.finditer(text))
    if found and "`" in text:
        spans = code_spans(text)
        found = [m for m in found if not any(s <= m.start() < e for s, e in spans)]
    first: dict[object, str] = {}
    for m in found:
        tag = m.group(0)
        row = delimiter_of(tag)
        # Unpaired tags of a syntax this project reads (a stray </think>) are named one by one.
        first.setdefault(row if row is not None and not row.read else tag.lower(), tag)
    return list(first.values())


def foreign_notes(text: str) -> list[str]:
    """One unrecognised-note text per reasoning tag that :func:`foreign_markup` finds in the
    visible ``text`` (the same wording in every adapter that reads visible text)."""
    return [f"{tag} markup in the visible text: kept as the answer, not scored or pruned" for tag in foreign_markup(text)]


def _splice_harmony(value: str, arg: str, old: str, new: str) -> str | None:
    """``value`` with the ``arg``-th ``analysis`` message (which holds ``old``) replaced by
    ``new``, or None when it is not there (a write-back engine site kind)."""
    spans = [m.span("body") for m in _harmony(value) if (m.group("header").split() or [""])[0] == "analysis"]
    k = int(arg)
    if k >= len(spans) or value[spans[k][0] : spans[k][1]] != old:
        return None
    a, b = spans[k]
    return value[:a] + new + value[b:]


register_site_kind("harmony", _splice_harmony)
