"""Provider quirks as pure ``messages -> messages`` transforms at the API edge.

Inside replay every assistant message has one canonical shape::

    {"role": "assistant", "content": str | None, "tool_calls": [...], "reasoning_content": str}

(``tool_calls`` and ``reasoning_content`` only when present). This is also the shape of the
saved trajectories, which the ``openai`` format adapter reads. :func:`read_reply` brings a
provider's reply into it; :func:`to_wire` turns the history back into what the provider
expects (METHOD.md, "Provider rules for writing reasoning back"):

- ``reasoning_content`` (DeepSeek, vLLM/SGLang reasoning parsers): the field is sent back.
  DeepSeek thinking mode requires it on every assistant turn with tool calls, so there it is
  always present: reasoning deleted in full is sent as ``""``, never left out.
- ``reasoning`` (OpenRouter, newer vLLM): the ``reasoning`` field is sent back when present.
- ``thinking`` (gpt-oss and other thinking models on Ollama): the ``thinking`` field is sent
  back when present.
- ``think`` (models that answer ``<think>...</think>`` inline in ``content``): the reasoning
  goes back inline in front of the visible text; reasoning deleted in full sends no tags.
- ``thought`` (text-protocol agents: the THOUGHT before a text-encoded tool call, see
  :mod:`iclr_cli.replay.agent`): the reasoning goes back as the plain prefix of ``content``.
- ``omit``: reasoning is never sent back (providers that reject the field).

The style is what the provider used in its replies (``auto``) unless the user names one.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence

STYLES = ("reasoning_content", "reasoning", "thinking", "think", "thought", "omit")

# A leading think block; anything before it is whitespace only. Text after it stays visible.
_LEADING_THINK = re.compile(r"\A\s*<think>(.*?)(?:</think>|\Z)", re.DOTALL)


def read_reply(message: Mapping) -> tuple[dict, str | None]:
    """A provider's ``choices[0].message`` -> (canonical assistant message, reasoning style).

    The style is ``reasoning_content``, ``reasoning``, ``thinking`` or ``think`` when the reply
    carried reasoning that way, else ``None``. When several fields are present the first of
    ``reasoning_content``, ``reasoning``, ``thinking`` wins. Other inline shapes (a lone
    leading ``</think>``, harmony channels) stay in ``content``, where the message-level API
    reads and edits them. Only a leading ``<think>`` block counts as inline reasoning; the visible text after
    ``</think>`` is kept exactly, so writing an unedited reply back inline restores it.
    Tool calls keep ``id``, ``type`` and ``function`` (name, arguments as a string).
    """
    out: dict = {"role": "assistant", "content": None}
    content = message.get("content")
    if isinstance(content, list):  # content parts: keep the text
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    reasoning, style = None, None
    for name in ("reasoning_content", "reasoning", "thinking"):
        value = message.get(name)
        if isinstance(value, str) and value:
            reasoning, style = value, name
            break
    if style is None and isinstance(content, str):
        m = _LEADING_THINK.match(content)
        if m:
            reasoning, style = m.group(1), "think"
            content = content[m.end() :]
    out["content"] = content if isinstance(content, str) else None
    calls = [_clean_call(c, i) for i, c in enumerate(message.get("tool_calls") or []) if isinstance(c, Mapping)]
    if calls:
        out["tool_calls"] = calls
    if reasoning is not None:
        out["reasoning_content"] = reasoning
    return out, style


def _clean_call(call: Mapping, index: int) -> dict:
    fn = call.get("function") if isinstance(call.get("function"), Mapping) else {}
    args = fn.get("arguments", "")
    if not isinstance(args, str):
        import orjson

        args = orjson.dumps(args).decode()
    return {
        "id": str(call.get("id") or f"call_{index}"),
        "type": "function",
        "function": {"name": str(fn.get("name", "")), "arguments": args},
    }


def to_wire(messages: Sequence[Mapping], style: str | None) -> list[dict]:
    """Canonical history -> request messages for a provider with reasoning ``style``.

    ``style`` is one of :data:`STYLES` or ``None`` (no reasoning seen yet: same as ``omit``).
    The input is not modified.

    Raises:
        ValueError: for an unknown style.
    """
    if style is not None and style not in STYLES:
        raise ValueError(f"unknown reasoning style {style!r}; choose one of {', '.join(STYLES)}")
    out = []
    for msg in messages:
        if msg.get("role") != "assistant":
            out.append(dict(msg))
            continue
        m = copy.deepcopy(dict(msg))
        reasoning = m.pop("reasoning_content", None)
        if style == "reasoning_content":
            if m.get("tool_calls"):
                m["reasoning_content"] = reasoning or ""
            elif reasoning is not None:
                m["reasoning_content"] = reasoning
        elif style in ("reasoning", "thinking"):
            if reasoning is not None:
                m[style] = reasoning
        elif style == "think":
            if reasoning:
                m["content"] = f"<think>{reasoning}</think>{m.get('content') or ''}"
        elif style == "thought":
            if reasoning:
                m["content"] = reasoning + (m.get("content") or "")
        out.append(m)
    return out
