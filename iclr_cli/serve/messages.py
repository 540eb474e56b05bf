"""OpenAI chat messages <-> :class:`Trajectory`, for the proxy.

The mapping must be the one ``replay`` uses, so that the proxy scores exactly the text that
``iclr replay`` scores (HELPERS.md, "OpenAI message-level API"). Until the message-level API of
:mod:`iclr_cli.formats.openai_chat` lands, :func:`read_messages` and :func:`write_messages`
are built on replay's own helpers (:mod:`iclr_cli.replay.provider` to bring an assistant message
into the canonical shape, :mod:`iclr_cli.replay.history` for the parts); the rest of
``iclr_cli.serve`` calls only these two functions.

P is every message before the first assistant message, plus a ``tools`` part when tools are
given, rendered as replay renders it. Step t is assistant message t and the messages that follow
it up to the next assistant message (METHOD.md, "Objects"). Reasoning is read in the shapes
replay reads: ``reasoning_content`` (DeepSeek, vLLM/SGLang), ``reasoning`` (OpenRouter, newer
vLLM) and a leading inline ``<think>`` block. Text-protocol THOUGHTs (text before a text-encoded
tool call) are not reasoning here, as in the ``openai`` file adapter.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from iclr_cli.replay.history import History, _assistant_parts, _observation
from iclr_cli.replay.provider import _LEADING_THINK, read_reply
from iclr_cli.trajectory import Step, Trajectory


@dataclass(frozen=True)
class MessageTrajectory(Trajectory):
    """A :class:`Trajectory` read from a message list (P and one step per assistant message).

    Attributes:
        step_spans: per step, ``(start, stop)`` message indices it covers: ``start`` is its
            assistant message, ``stop`` the next assistant message (or the list's end).
        styles: per step, where its reasoning was found: ``reasoning_content``, ``reasoning``,
            ``think``, or ``None`` (no reasoning).
    """

    step_spans: tuple[tuple[int, int], ...] = ()
    styles: tuple[str | None, ...] = ()


def text_of(content) -> str:
    """Message ``content`` as text: a string as is, content parts joined, ``None`` as ``""``."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return ""


def _with_text(msg: Mapping) -> dict:
    return {**msg, "content": text_of(msg.get("content"))}


def read_messages(messages: Sequence[Mapping], *, tools: Sequence[Mapping] | None = None, traj_id: str) -> MessageTrajectory:
    """Read chat messages as a trajectory (see module docstring).

    Raises:
        KeyError, TypeError: for messages without the fields of the chat format (a ``role``,
            tool calls with a ``function``); the caller forwards such requests untouched.
    """
    first = next((i for i, m in enumerate(messages) if m["role"] == "assistant"), len(messages))
    prompt = History(traj_id, [_with_text(m) for m in messages[:first]], tools, compressor=None).prompt  # type: ignore[arg-type]
    starts = [i for i in range(first, len(messages)) if messages[i]["role"] == "assistant"]
    steps, spans, styles = [], [], []
    for t, start in enumerate(starts):
        stop = starts[t + 1] if t + 1 < len(starts) else len(messages)
        canonical, style = read_reply(messages[start])
        parts = _assistant_parts(canonical) + [_observation(_with_text(m)) for m in messages[start + 1 : stop]]
        steps.append(Step(t, tuple(parts)))
        spans.append((start, stop))
        styles.append(style)
    return MessageTrajectory(traj_id, prompt, tuple(steps), {"format": "openai"}, tuple(spans), tuple(styles))


def write_messages(messages: Sequence[Mapping], original: MessageTrajectory, edited: Trajectory) -> list[dict]:
    """The messages with each edited step's reasoning written back in the shape it came in.

    ``original`` is what :func:`read_messages` returned for ``messages``; ``edited`` is it
    after compression. Messages of unedited steps are returned as they were (the same
    objects); an edited assistant message is a copy with only its reasoning changed:

    - ``reasoning_content``: the new text, ``""`` when all was deleted (DeepSeek requires the
      field on assistant turns with tool calls; METHOD.md, "Provider rules"). A ``reasoning``
      field holding the same text is edited alike.
    - ``reasoning``: the new text; ``reasoning_details`` entries of type ``reasoning.text`` are
      replaced by one entry holding the new text, without ``signature`` (an edited block is not
      the one that was signed); ``reasoning.encrypted`` entries (the old text, encrypted) go;
      other entries are kept.
    - ``think``: the text inside the leading ``<think>`` block; reasoning deleted in full sends
      no tags, as replay does.
    """
    out = list(messages)
    for t, (old, new) in enumerate(zip(original.steps, edited.steps)):
        if not old.reasoning or old.reasoning[0].text == new.reasoning[0].text:
            continue
        start = original.step_spans[t][0]
        out[start] = _write_reasoning(messages[start], original.styles[t], old.reasoning[0].text, new.reasoning[0].text)
    return out


def _write_reasoning(msg: Mapping, style: str | None, old: str, new: str) -> dict:
    m = copy.deepcopy(dict(msg))
    if style == "reasoning_content":
        m["reasoning_content"] = new
        if m.get("reasoning") == old:
            m["reasoning"] = new
    elif style == "reasoning":
        m["reasoning"] = new
        details = m.get("reasoning_details")
        if isinstance(details, list):
            m["reasoning_details"] = _edit_details(details, new)
    elif style == "think":
        content = text_of(m.get("content"))
        found = _LEADING_THINK.match(content)
        if found:
            rest = content[found.end() :]
            m["content"] = content[: found.start(1)] + new + content[found.end(1) : found.end()] + rest if new else rest
    return m


def _edit_details(details: list, new: str) -> list:
    texts = [d for d in details if isinstance(d, Mapping) and d.get("type") == "reasoning.text"]
    if not texts:
        return details
    first = {k: v for k, v in texts[0].items() if k != "signature"}
    first["text"] = new
    out, placed = [], False
    for d in details:
        if isinstance(d, Mapping) and d.get("type") == "reasoning.encrypted":
            continue
        if isinstance(d, Mapping) and d.get("type") == "reasoning.text":
            if not placed:
                out.append(first)
                placed = True
            continue
        out.append(d)
    return out
