"""OpenAI chat messages <-> :class:`Trajectory`, on plain message dicts (no bytes).

The one reading and the one write-back of OpenAI chat messages, shared by the ``openai`` file
adapter, ``iclr replay`` and ``iclr serve``: the proxy therefore scores the same text online
and offline, and an edit is written back the same way everywhere.

Trajectory (METHOD.md, "Objects"): P is every message before the first assistant message,
plus a ``tools`` part (the tool definitions as compact JSON, :func:`render_tools`) after the
leading system/developer messages when tools are given. Each step is one assistant message and
the tool/user messages that follow it; :class:`MessageTrajectory` says which messages each
step covers. Tool calls keep their ``id`` and tool messages their ``tool_call_id`` as the
parts' ``call_id``; a non-assistant message whose ``content`` is a list of parts gives one part
per run of text parts and one media part per image (:func:`iclr_cli.formats.media.mixed_parts`).

Reasoning of an assistant message, in this order (docs/FORMAT.md, "OpenAI chat messages";
the fields and their copies are read by :mod:`iclr_cli.formats.reasoning_fields`):

- the string fields ``reasoning_content`` (DeepSeek, vLLM, SGLang), ``reasoning`` (OpenRouter,
  vLLM, LM Studio) and ``thinking`` (gpt-oss on Ollama); fields holding the same text are one
  part, and an edit is written to each of them;
- the structured copies ``reasoning_details`` (OpenRouter: ``reasoning.text`` with an optional
  ``signature``, ``reasoning.summary``, ``reasoning.encrypted``) and ``thinking_blocks``
  (LiteLLM: ``thinking`` with ``signature``, ``redacted_thinking``). A structured entry and the
  plain field that holds the same text are one part, edited together: an edited signed entry
  loses its ``signature``, an emptied ``thinking`` block leaves its list (unless it is the
  last one); the entries of one streamed block kept per delta (``"signature": ""`` fragments
  and a signature-only entry, :mod:`iclr_cli.formats.fragments`) are one reasoning, sealed by
  a signature anywhere in the group; ``reasoning.encrypted`` entries are never edited, and the part is
  :attr:`WriteBack.OPAQUE`: with :attr:`OpaqueEdits.DROP` the edit is written and the
  encrypted entries are removed, with ``KEEP`` the message is left as it was. When the plain
  field and the structured copy hold different text, neither is edited (the parts are
  ``READ_ONLY``) and the message is reported as unrecognised;
- a ``reasoning.encrypted`` entry whose ``id`` is the id of one of the message's tool calls is
  no copy of the text: it is that call's thought signature (Gemini 3 through OpenRouter), which
  the provider requires back exactly as received while the call is in the history
  (https://openrouter.ai/docs/use-cases/reasoning-tokens#preserving-reasoning-blocks,
  https://ai.google.dev/gemini-api/docs/thought-signatures). It stays value-equal, whatever
  happens to the text, and does not make the text opaque. So does Gemini's own
  OpenAI-compatible ``extra_content.google.thought_signature`` on a tool call (or on the
  message). Both are listed in :attr:`MessageTrajectory.signatures` (``iclr convert`` refuses
  them: no target carries them);
- in ``content`` (a string, or the text parts of a list): ``<think>`` elements and a lone
  leading ``</think>`` (:mod:`iclr_cli.formats.think`), harmony ``analysis`` channels
  (:mod:`iclr_cli.formats.markup`), and Mistral ``{"type": "thinking"}`` parts. A ``<think>``
  element that holds the text of a reasoning field (whitespace around it aside) is that
  reasoning stored twice (llama.cpp ``--reasoning-format deepseek-legacy``): one part, edited
  in both places (:func:`~iclr_cli.formats.writeback.join_think_copies`).

Everything else is an action (visible text, ``refusal``, ``tool_calls``, ``function_call``,
harmony tool calls) or an observation. Text that looks like reasoning but is read as neither
(a reasoning field holding an object, an unknown ``*reason*``/``*think*``/``*thought*`` field,
``<thinking>`` or other foreign markup, an unknown harmony channel) is reported in
``unrecognised``, and so is any message field this format does not have (``_KNOWN_FIELDS``).
A fully deleted reasoning field is written as ``""``, never removed
(DeepSeek thinking mode requires it on assistant turns with tool calls).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import orjson

from iclr_cli.errors import InputError
from iclr_cli.formats import markup, media
from iclr_cli.formats.base import OpaqueEdits, Unrecognised
from iclr_cli.formats.reading import field_name, text_of
from iclr_cli.formats.reasoning_fields import REASONING_FIELDS, STRUCTURED, field_reasoning, json_kind
from iclr_cli.formats.writeback import Site, TextRef, UnregisteredCopy, apply_edits, copy_error, join_think_copies
from iclr_cli.trajectory import Part, PartKind, Step, Trajectory

# Message fields this format has, any role: the Chat Completions API's request and response
# messages (platform.openai.com/docs/api-reference/chat: role, content, name, tool_calls,
# function_call, refusal, audio, annotations, tool_call_id), ``weight`` of OpenAI's fine-tuning
# files, provider extras kept beside them (DeepSeek and Moonshot ``prefix`` / ``partial``,
# Anthropic-compatible ``cache_control``, LiteLLM ``provider_specific_fields``, OpenRouter
# ``images``, Gemini's ``extra_content`` (its thought signature), a streamed reply's ``id`` /
# ``index`` / ``logprobs``) and the reasoning fields
# above. Any other field is reported: prune keeps it in place, convert would drop it.
_KNOWN_FIELDS = {
    "role", "content", "name", "tool_calls", "function_call", "refusal", "audio", "annotations",
    "tool_call_id", "weight", "id", "index", "logprobs", "prefix", "partial", "cache_control",
    "provider_specific_fields", "images", "extra_content", *REASONING_FIELDS, *STRUCTURED,
}
_REASONING_NAME = re.compile(r"reason|think|thought|analysis|chain.of|(?:^|_)cot(?:_|$)", re.IGNORECASE)
_NON_TEXT_PARTS = {"image_url", "image", "input_image", "input_audio", "audio", "file", "input_file", "video_url"}
_LEADING = {"system", "developer"}


@dataclass(frozen=True)
class MessageTrajectory(Trajectory):
    """A :class:`Trajectory` read from a message list, with where each piece came from.

    Attributes:
        prompt_span: ``(start, stop)`` message indices of P.
        step_spans: ``(start, stop)`` message indices of each step (the assistant message and
            the observations after it), one per step.
        unrecognised: text read neither as reasoning nor as action (``line`` as given to the
            reader, ``field`` a path such as ``messages[4].thoughts``).
        sealed: reasoning present only in a form never edited (a message whose only reasoning
            is ``reasoning.encrypted`` entries; ``redacted_thinking`` blocks), for the warning
            of :func:`iclr_cli.formats.reading.sealed_warnings`.
        signatures: thought signatures bound to a tool call or message (module docstring):
            kept value-equal, and no conversion carries them.
    """

    prompt_span: tuple[int, int] = (0, 0)
    step_spans: tuple[tuple[int, int], ...] = ()
    unrecognised: tuple[Unrecognised, ...] = ()
    sealed: tuple[Unrecognised, ...] = ()
    signatures: tuple[Unrecognised, ...] = ()

    def step_messages(self, index: int) -> range:
        """Indices of the messages of step ``index``."""
        return range(*self.step_spans[index])


def render_tools(tools: Sequence[Mapping]) -> str:
    """Tool definitions as the proxy sees them in P: compact JSON, keys in their given order."""
    return orjson.dumps(list(tools)).decode()


def read_messages(messages: Sequence[Mapping], *, tools: Sequence[Mapping] | None = None, traj_id: str, meta: Mapping | None = None) -> MessageTrajectory:
    """Read a chat message list (and the request's ``tools``) as a trajectory.

    Parts carry refs that :func:`write_messages` resolves against the same list, by index.
    ``meta`` defaults to ``{"format": "openai"}``.

    Raises:
        InputError: (source ``messages``) for a message that is not an object, has no string
            ``role``, or has a field of the wrong type; the field is named
            (``messages[3].content``).
    """
    where = [("messages", i) for i in range(len(messages))]
    return read_at(messages, tools, traj_id, where, source="messages", line=None, meta=meta, refs=[(i,) for i in range(len(messages))])


def write_messages(messages: Sequence[Mapping], original: Trajectory, edited: Trajectory, *, opaque: OpaqueEdits = OpaqueEdits.DROP) -> list[dict]:
    """``messages`` with the reasoning edits of ``edited`` written back.

    ``original`` is what :func:`read_messages` returned for ``messages``; ``edited`` is it
    after compression (same steps and parts, reasoning text changed). Each shape is written
    where it was read (module docstring). ``messages`` is not modified; the result is a new
    list in which edited messages are new dicts and the others are the given ones.

    Raises:
        ValueError: when a part's text is no longer where it was read (``messages`` is not
        the list ``original`` was read from).
        InputError: (source ``messages``) when a message holds a copy of an edited reasoning
            text that is not read as one of its sites (the write-back engine's copy rule).
    """
    values = list(messages)
    try:
        changed = apply_edits(values, [original], [edited], opaque).edited
    except UnregisteredCopy as exc:
        raise copy_error("messages", exc, None, record=("messages",)) from None
    return [changed.get(i, m) for i, m in enumerate(values)]


class _Reader:
    """One message list being read: where its messages are, and what was not understood."""

    def __init__(self, source: str, line: int | None, where: Sequence[tuple], refs: Sequence[tuple], lines: Sequence[int] | None = None):
        self.source, self.line, self.where, self.refs, self.lines = source, line, where, refs, lines
        self.unrecognised: list[Unrecognised] = []
        self.sealed: list[Unrecognised] = []
        self.signatures: list[Unrecognised] = []

    def line_of(self, i: int) -> int | None:
        """The line message ``i`` is on (its own line in a file of one message per line)."""
        return self.lines[i] if self.lines is not None else self.line

    def seal(self, i: int, keys: tuple, what: str) -> None:
        self.sealed.append(Unrecognised(self.line_of(i), field_name((*self.where[i], *keys)), what))

    def sign(self, i: int, keys: tuple, what: str) -> None:
        self.signatures.append(Unrecognised(self.line, field_name((*self.where[i], *keys)), what))

    def report(self, i: int, keys: tuple, what: str) -> None:
        self.unrecognised.append(Unrecognised(self.line_of(i), field_name((*self.where[i], *keys)), what))

    def error(self, i: int, keys: tuple, problem: str) -> InputError:
        return InputError(self.source, problem, line=self.line_of(i), field=field_name((*self.where[i], *keys)) or None)

    def site(self, i: int, keys: tuple, how: str = "whole") -> Site:
        return Site((*self.refs[i], *keys), how)


def read_at(
    messages: Sequence[Mapping],
    tools: Sequence[Mapping] | None,
    traj_id: str,
    where: Sequence[tuple],
    *,
    source: str,
    line: int | None,
    meta: Mapping | None = None,
    refs: Sequence[tuple],
    lines: Sequence[int] | None = None,
) -> MessageTrajectory:
    """:func:`read_messages` for messages that sit inside a larger document: ``where[i]`` is
    message i's JSON path for messages (``messages[3]``), ``refs[i]`` the path its part refs
    start with (for the file adapter: record index, then the keys to the message);
    ``lines[i]``, where given, the line message i is on (else ``line`` for all)."""
    reader = _Reader(source, line, where, refs, lines)
    prompt: list[Part] = []
    steps: list[list[Part]] = []
    starts: list[int] = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, Mapping):
            raise reader.error(i, (), "message is not a JSON object")
        role = msg.get("role")
        if not isinstance(role, str):
            raise reader.error(i, ("role",), "message has no string 'role'")
        _check_types(msg, i, reader)
        if role == "assistant":
            starts.append(i)
            steps.append(_assistant(msg, i, reader))
            _check_fields(msg, i, role, reader)
            continue
        if role not in _KNOWN_ROLES:
            reader.report(i, ("role",), f"role {role!r} is not an OpenAI chat role; read as a message labelled {role!r}")
        label = "tool_result" if role in _TOOL_ROLES else role
        kind: PartKind = "observation" if steps else "prompt"
        call_id = msg.get("tool_call_id") if isinstance(msg.get("tool_call_id"), str) else None
        content = msg.get("content")
        if isinstance(content, list):  # text and image parts, in order (images are kept for convert)
            _check_parts(content, i, role, reader)
            found = media.mixed_parts(content, kind, label, read_media=media.openai_media, call_id=call_id)
        else:
            found = [Part(kind, text_of(content), label=label, call_id=call_id)]
        (steps[-1] if steps else prompt).extend(found)
        _check_fields(msg, i, role, reader)
    if tools:
        at = next((k for k, p in enumerate(prompt) if p.label not in _LEADING), len(prompt))
        prompt.insert(at, Part("prompt", render_tools(tools), label="tools"))
    ends = [*starts[1:], len(messages)]
    return MessageTrajectory(
        traj_id,
        tuple(prompt),
        tuple(Step(k, tuple(parts)) for k, parts in enumerate(steps)),
        meta=dict(meta) if meta is not None else {"format": "openai"},
        prompt_span=(0, starts[0] if starts else len(messages)),
        step_spans=tuple(zip(starts, ends)),
        unrecognised=tuple(reader.unrecognised),
        sealed=tuple(reader.sealed),
        signatures=tuple(reader.signatures),
    )


_INPUT_PARTS = {"text", "input_text", "output_text", *_NON_TEXT_PARTS}
# Roles of the Chat Completions API (platform.openai.com/docs/api-reference/chat/create), and
# ``ipython``: the tool-output role of Llama 3.1+ chat templates, which vLLM and llama.cpp pass through.
_TOOL_ROLES = ("tool", "function", "ipython")
_KNOWN_ROLES = frozenset({"system", "developer", "user", "assistant", *_TOOL_ROLES})


def _check_parts(content: list, i: int, role: str, reader: _Reader) -> None:
    """Report content parts of a user, system or tool message that are no OpenAI chat part
    (an Anthropic ``tool_result`` block, a Converse ``{"toolResult"}``): they are kept as JSON
    text, not read as what they are."""
    for k, item in enumerate(content):
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind in _INPUT_PARTS or (kind is None and set(item) == {"text"}):
            continue
        what = f"of type {kind!r}" if kind is not None else f"without a 'type' (keys {', '.join(sorted(map(str, item)))})"
        reader.report(i, ("content", k), f"{role} content part {what}: not an OpenAI chat content part; kept as JSON text")


def _check_types(msg: Mapping, i: int, reader: _Reader) -> None:
    """Fields this module reads must have the types the chat format gives them."""
    content = msg.get("content")
    if content is not None and not isinstance(content, (str, list)):
        raise reader.error(i, ("content",), f"must be a string, a list of parts or null, not {type(content).__name__}")
    for name in REASONING_FIELDS:
        value = msg.get(name)
        if value is not None and not isinstance(value, (str, dict, list)):
            # A number or boolean is no provider's shape; a list or object may be one
            # (structured reasoning): those are reported and kept in place (field_reasoning).
            raise reader.error(i, (name,), f"must be a string (a list or object is reported as unrecognised and kept as it is), not {json_kind(value)}")
    calls = msg.get("tool_calls")
    if calls is not None and not (isinstance(calls, list) and all(isinstance(c, dict) for c in calls)):
        raise reader.error(i, ("tool_calls",), "must be a list of tool-call objects or null")


def _assistant(msg: Mapping, i: int, reader: _Reader) -> list[Part]:
    parts = field_reasoning(msg, i, reader)
    content = msg.get("content")
    if isinstance(content, str):
        parts += _content(content, i, ("content",), reader)
    elif isinstance(content, list):
        for k, item in enumerate(content):
            parts += _content_item(item, i, ("content", k), reader)
    if isinstance(msg.get("refusal"), str) and msg["refusal"].strip():
        parts.append(Part("action", msg["refusal"], label="refusal"))
    if _thought_signature(msg) is not None:
        reader.sign(i, ("extra_content", "google", "thought_signature"), "Gemini thought signature of the message (kept as received)")
    for k, call in enumerate(msg.get("tool_calls") or []):
        if _thought_signature(call) is not None:
            reader.sign(i, ("tool_calls", k, "extra_content", "google", "thought_signature"), f"Gemini thought signature of tool call {call.get('id')!r} (kept with its call)")
        fn = call.get("function")
        if isinstance(fn, dict):
            args = fn.get("arguments")
            _check_arguments(args, i, ("tool_calls", k, "function", "arguments"), reader)
            call_id = call.get("id") if isinstance(call.get("id"), str) else None
            parts.append(Part("action", args if isinstance(args, str) else str(args), label=f"tool_call:{fn.get('name', '?')}", call_id=call_id))
    fc = msg.get("function_call")
    if isinstance(fc, dict):
        _check_arguments(fc.get("arguments"), i, ("function_call", "arguments"), reader)
        parts.append(Part("action", str(fc.get("arguments", "")), label=f"tool_call:{fc.get('name', '?')}"))
    return join_think_copies(parts)


def _check_arguments(args: object, i: int, path: tuple, reader: _Reader) -> None:
    """A call's ``arguments`` are JSON text (OpenAI's chat API: "The arguments to call the
    function with, as generated by the model in JSON format"); an object (Ollama, some logs)
    is read as its JSON. A number, boolean or list is a malformed call.

    Raises:
        InputError: naming the message and field.
    """
    if args is not None and not isinstance(args, (str, dict)):
        raise reader.error(i, path, f"must be the arguments as a JSON string (or an object), not a {json_kind(args)}")


def _check_fields(msg: Mapping, i: int, role: str, reader: _Reader) -> None:
    """Report each field of message ``i`` this format does not have (``_KNOWN_FIELDS``),
    whatever its value but null (docs/FORMAT.md, "OpenAI chat messages"): it is not read, prune keeps it where it
    is, and ``convert`` refuses a file that holds one (no target would carry it)."""
    for key, value in msg.items():
        if key in _KNOWN_FIELDS or value is None:
            continue
        scored = "not scored or pruned; " if role == "assistant" and _REASONING_NAME.search(str(key)) else ""
        reader.report(i, (key,), f"{role} message field {key!r} ({json_kind(value)}) is not part of the OpenAI chat format: {scored}not read; kept in place by prune")


def _content(text: str, i: int, keys: tuple, reader: _Reader) -> list[Part]:
    parts: list[Part] = []
    for piece in markup.read(text):
        if piece.kind == "reasoning":
            parts.append(Part("reasoning", piece.text, label="reasoning", ref=TextRef((reader.site(i, keys, piece.how),))))
        elif piece.kind == "unknown":
            parts.append(Part("action", piece.text, label=f"channel:{piece.label}"))
            reader.report(i, keys, f"harmony channel {piece.label!r}: kept as an action, never scored or pruned")
        else:
            parts.append(Part("action", piece.text, label=piece.label))
            if piece.kind == "visible":
                for note in markup.foreign_notes(piece.text):
                    reader.report(i, keys, note)
    return parts


def _content_item(item, i: int, keys: tuple, reader: _Reader) -> list[Part]:
    if not isinstance(item, dict):
        return []
    kind = item.get("type")
    if isinstance(item.get("text"), str) and kind in (None, "text", "output_text"):
        return _content(item["text"], i, (*keys, "text"), reader)
    if kind == "thinking":  # Mistral (Magistral): {"type": "thinking", "thinking": [{"type": "text", "text"}]}
        inner = item.get("thinking")
        if isinstance(inner, str):
            return [Part("reasoning", inner, label="reasoning", ref=TextRef((reader.site(i, (*keys, "thinking")),)))]
        if isinstance(inner, list):
            return [
                Part("reasoning", t["text"], label="reasoning", ref=TextRef((reader.site(i, (*keys, "thinking", j, "text")),)))
                for j, t in enumerate(inner)
                if isinstance(t, dict) and isinstance(t.get("text"), str)
            ]
    if kind == "refusal" and isinstance(item.get("refusal"), str):
        return [Part("action", item["refusal"], label="refusal")]
    if kind not in _NON_TEXT_PARTS and any(v not in (None, "", [], {}) for k, v in item.items() if k != "type"):
        what = f"of type {kind!r}" if kind is not None else f"without a 'type' (keys {', '.join(sorted(map(str, item)))})"
        reader.report(i, keys, f"assistant content part {what}: not an OpenAI chat content part; not scored or pruned")
    return []


def _thought_signature(holder: Mapping) -> str | None:
    """Gemini's ``extra_content.google.thought_signature`` on a tool call or message
    (https://ai.google.dev/gemini-api/docs/openai), or None."""
    extra = holder.get("extra_content")
    google = extra.get("google") if isinstance(extra, Mapping) else None
    value = google.get("thought_signature") if isinstance(google, Mapping) else None
    return value if isinstance(value, str) else None
