"""A visible thought that holds ``<think>`` markup, read as one part per reasoning it holds.

Agents that keep the model's text before its command as the "thought" (mini-swe-agent's
THOUGHT, SWE-agent's ``thought``, stored again inside ``response`` and the history) keep any
``<think>`` element the model wrote there too: a model served with llama.cpp's
``--reasoning-format deepseek-legacy`` writes its reasoning in ``<think>`` inside the content
and in ``reasoning_content`` (ggml-org/llama.cpp PR #16394), and the agent stores both.

Read whole, such a thought is a part whose text holds the reasoning of the field, so one
reasoning would count its blocks twice. :func:`thought_parts` reads it as the think parser
pairs it (:mod:`iclr_cli.formats.think`): each element's reasoning is a part located by a
``think:K`` site in every string that holds the thought, and each stretch of visible words
between the elements a part located by an ``outside_think:K`` site; the adapter then joins an
element that holds a reasoning field's text to that field's part
(:func:`iclr_cli.formats.writeback.join_think_copies`), so it is scored once and both stay
equal. When an element of the thought is not the same element in every string that holds
the thought (a ``<think>`` left open up to the command, which the parser runs to the end of
the whole message), the thought stays one part: its tags are separators, never block text
(:mod:`iclr_cli.blocks`), and the write-back engine refuses a write in which it and a field
it quotes would say different things.
"""

from __future__ import annotations

from collections.abc import Sequence

from iclr_cli.formats.sites import Site, TextRef
from iclr_cli.formats.think import ThinkElement, think_elements, visible_pieces
from iclr_cli.trajectory import Part


def thought_parts(thought: str, holders: Sequence[tuple[Site, object]], label: str = "reasoning") -> list[Part]:
    """The reasoning parts of the visible thought ``thought``, in reading order.

    ``holders`` are the strings that hold it, each as ``(site, value)``: the site that
    locates the whole thought there (``whole``, ``prefix`` or ``unique``; the first is the
    primary copy) and the string's value. Without ``<think>`` markup, or when the markup
    cannot be found alike in every holder, the result is one part with those sites.
    """
    if not thought.strip():
        return []
    whole = [Part("reasoning", thought, label=label, ref=TextRef(tuple(site for site, _ in holders)))]
    elements = think_elements(thought)
    if not elements or not holders:
        return whole
    mapped = [_map(thought, elements, site, value) for site, value in holders]
    if any(m is None for m in mapped):
        return whole
    parts: list[tuple[int, Part]] = []
    for k, el in enumerate(elements):
        if el.inner(thought).strip():
            sites = tuple(Site(site.path, f"think:{ks[k]}") for (site, _), ks in zip(holders, mapped))  # type: ignore[index]
            parts.append((el.inner_start, Part("reasoning", el.inner(thought), label=label, ref=TextRef(sites))))
    for j, (a, b) in enumerate(visible_pieces(thought, elements)):
        words = thought[a:b]
        if words.strip():
            # piece j of the thought is piece (index of element j) of each holder, or the
            # piece after the holder's copy of the last element
            sites = tuple(Site(site.path, f"outside_think:{ks[j] if j < len(ks) else ks[-1] + 1}") for (site, _), ks in zip(holders, mapped))  # type: ignore[index, arg-type]
            parts.append((a, Part("reasoning", words, label=label, ref=TextRef(sites))))
    return [p for _, p in sorted(parts, key=lambda x: x[0])]


def _map(thought: str, elements: list[ThinkElement], site: Site, value: object) -> list[int] | None:
    """For each element of ``thought``, the index of the same element in ``value`` (the
    string ``site`` locates the thought in), or None when one is not there alike."""
    if not isinstance(value, str):
        return None
    if site.how in ("whole", "prefix"):
        offset = 0
    elif site.how == "unique" and value.count(thought) == 1:
        offset = value.index(thought)
    else:
        return None
    held = think_elements(value)
    theirs = {(el.start, el.inner_start, el.inner_end, el.end): k for k, el in enumerate(held)}
    out = []
    for el in elements:
        k = theirs.get((el.start + offset, el.inner_start + offset, el.inner_end + offset, el.end + offset))
        if k is None:
            return None
        out.append(k)
    # no other element of the holder within the thought: the pieces between them are the same
    inside = [k for k, el in enumerate(held) if offset <= el.start < offset + len(thought)]
    return out if inside == out else None
