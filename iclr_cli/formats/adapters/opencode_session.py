"""One OpenCode (or Kilo) session, as message infos and their parts, read into a trajectory.

The shapes are OpenCode's ``MessageV2`` (``packages/opencode/src/session/message-v2.ts``): a
message ``info`` has ``role`` ``user`` or ``assistant`` (an assistant's ``modelID``,
``providerID``, ``error``, ``tokens``); its ``parts`` each have a ``type``. The export file and
the session database hold the same objects (:mod:`iclr_cli.formats.adapters.opencode`); this module
reads them with no knowledge of where they came from: each part arrives with its path in the
records (:mod:`iclr_cli.formats.writeback`) and a function that names a field for errors.

Trajectory (docs/FORMAT.md, "OpenCode and Kilo"): the user messages before the first
assistant turn are P. Each model call is a step: an assistant message, split at its
``step-start`` parts (one message may hold several calls). In a step: ``reasoning`` parts are
reasoning; ``text`` an action ``assistant``; ``tool`` an action ``tool_call:TOOL`` (``state.input``
as JSON, ``callID`` kept) followed by its result, an observation ``tool_result``
(``state.output``; ``state.error`` for a failed call; OpenCode's own
``[Tool execution was interrupted]`` for a pending or running one, as ``toModelMessages``
sends it). Later user messages are observations ``user``. ``step-finish`` parts are the
requests, with their ``tokens`` (:func:`step_usage`). Bookkeeping parts (``snapshot``,
``patch``, ``retry``, ``agent``...) carry no model text and are skipped; an assistant part of
a type this reader does not know is reported as unrecognised.

Assistant messages with an ``error`` are left out of the steps, as ``toModelMessages`` leaves
them out of every later request, unless the error is ``MessageAbortedError`` and the message
holds more than ``step-start`` and reasoning parts (OpenCode sends those again).

Reasoning parts and their provider metadata (``part.metadata``, the AI SDK's
``providerMetadata``, sent back with the part while the model stays the same):

- ``anthropic.signature`` / ``bedrock.signature``: Anthropic's signed thinking,
  :attr:`WriteBack.SIGNED` (an edit removes the signature);
- ``openai.reasoningEncryptedContent`` or ``openai.itemId``: a Responses reasoning item,
  encrypted or held by id (https://platform.openai.com/docs/guides/reasoning):
  :attr:`WriteBack.OPAQUE`, the whole part removed by ``--encrypted-reasoning drop``;
- ``google.thoughtSignature`` / ``vertex.thoughtSignature``: a Gemini thought signature, bound
  to the text (https://ai.google.dev/gemini-api/docs/thought-signatures): read-only, as in the
  ``gemini`` adapter; so are ``redactedData`` parts (the payload is the signature);
- ``openrouter.reasoning_details`` (https://openrouter.ai/docs/use-cases/reasoning-tokens): a
  ``reasoning.text`` or ``reasoning.summary`` entry holding the part's text is a site of the
  same part, edited alike (a signed one makes the part ``SIGNED`` and loses its
  ``signature``); a ``reasoning.encrypted`` entry makes the part ``OPAQUE`` and goes when an
  edit is written with ``drop``. An entry holding other text (the OpenRouter AI SDK provider
  has stored only the last streamed chunk) is what goes upstream instead of the text, so
  neither is edited: the part is read-only and the entry reported.

Which rule applies (sealed or edited) is the provider table's (:mod:`iclr_cli.formats.sealing`),
from the message's ``modelID`` (and the session's ``providerID``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

from iclr_cli.formats.base import Unrecognised
from iclr_cli.formats.usage import count
from iclr_cli.formats.writeback import Path, Site, TextRef, locate
from iclr_cli.providers import for_model
from iclr_cli.trajectory import Part, PartKind, Request, Step, Trajectory, Usage, WriteBack

INTERRUPTED = "[Tool execution was interrupted]"
"""What OpenCode sends as the result of a tool call still pending or running."""

_BOOKKEEPING = frozenset({"snapshot", "patch", "retry", "agent", "compaction", "subtask"})


class PartError(ValueError):
    """A part or message of the wrong shape: ``keys`` inside it, and the ``problem``; the
    caller names the file and record (:mod:`iclr_cli.formats.adapters.opencode`)."""

    def __init__(self, index: int, keys: tuple, problem: str):
        super().__init__(problem)
        self.index, self.keys, self.problem = index, keys, problem
        self.message = -1  # the message's place in the session, set by read_session


@dataclass
class Message:
    """One message: its ``info``, its ``parts`` with the path of each in the records
    (``paths``), and ``name(k, keys)``: the name of field ``keys`` of part ``k`` (``k == -1``:
    of the info) for notes."""

    info: dict
    parts: list[dict]
    paths: list[Path]
    name: Callable[[int, tuple], str]


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def step_usage(tokens: object, source: str) -> Usage | None:
    """The usage of one request from OpenCode's ``tokens`` (``input``, ``output``,
    ``reasoning``, ``cache.read``, ``cache.write``), or None when it records nothing.

    OpenCode's ``Session.getUsage`` stores the uncached prompt as ``input`` (the AI SDK's input
    less cache reads and writes) and the output less the reasoning as ``output``, so the prompt
    is ``input + cache.read + cache.write`` and the output ``output + reasoning``."""
    if not isinstance(tokens, dict):
        return None
    fresh = count(tokens.get("input"))
    cache = tokens.get("cache") if isinstance(tokens.get("cache"), dict) else {}
    read, write = count(cache.get("read")), count(cache.get("write"))
    output, reasoning = count(tokens.get("output")), count(tokens.get("reasoning"))
    if fresh is None or not any((fresh, read, write, output, reasoning)):
        return None
    total_out = None if output is None else output + (reasoning or 0)
    return Usage(fresh + (read or 0) + (write or 0), total_out, read, write, source, reasoning_tokens=reasoning)


@dataclass
class SessionReader:
    """Builds one trajectory from a session's messages (module docstring)."""

    source: str
    unrecognised: list[Unrecognised] = field(default_factory=list)
    sealed: list[Unrecognised] = field(default_factory=list)
    prompt: list[Part] = field(default_factory=list)
    steps: list[list[Part]] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    model: str | None = None
    provider: str | None = None
    _open: bool = False

    def trajectory(self, traj_id: str, meta: dict) -> Trajectory:
        """The trajectory read so far (``meta`` gets ``model`` and ``provider``)."""
        meta = dict(meta)
        if self.model:
            meta["model"] = self.model
        if self.provider:
            meta["provider"] = self.provider
        steps = tuple(Step(i, tuple(p)) for i, p in enumerate(self.steps))
        return Trajectory(traj_id, tuple(self.prompt), steps, meta=meta, requests=tuple(self.requests))

    def add(self, text: str, label: str, **kw) -> None:
        kind: PartKind = "observation" if self.steps else "prompt"
        (self.steps[-1] if self.steps else self.prompt).append(Part(kind, text, label=label, **kw))

    def message(self, msg: Message, index: int) -> None:
        """Read one message (``index``: its place, for errors).

        Raises:
            PartError: for a message or part of the wrong shape.
        """
        role = msg.info.get("role")
        if role == "user":
            self._open = False
            for k, part in enumerate(msg.parts):
                self._user_part(part, k)
        elif role == "assistant":
            self._assistant(msg, index)
        else:
            raise PartError(-1, ("role",), f"message role must be 'user' or 'assistant', not {role!r}")

    def _user_part(self, part: dict, k: int) -> None:
        kind = part.get("type")
        if kind == "text":
            if not part.get("ignored"):
                self.add(_text(part, k, "text"), "user")
        elif kind == "file":
            self.add(str(part.get("filename") or part.get("mime") or ""), "file")
        elif kind == "compaction":
            self.add("What did we do so far?", "compaction")  # what OpenCode sends in its place
        elif kind == "subtask":
            self.add(str(part.get("prompt", "")), "subtask")
        elif kind == "agent":
            self.add(str(part.get("name", "")), "agent")
        elif kind not in ("step-start", "step-finish", "snapshot", "patch"):
            self.add(_json(part), str(kind))

    def _assistant(self, msg: Message, index: int) -> None:
        info = msg.info
        model = info.get("modelID") if isinstance(info.get("modelID"), str) else None
        provider = info.get("providerID") if isinstance(info.get("providerID"), str) else None
        self.model, self.provider = model or self.model, provider or self.provider
        error = info.get("error")
        kinds = {kind for p in msg.parts if isinstance(kind := p.get("type"), str)}
        aborted = isinstance(error, dict) and error.get("name") == "MessageAbortedError"
        left_out = error is not None and not (aborted and kinds - {"step-start", "reasoning"})
        finished = False
        self._open = False
        for k, part in enumerate(msg.parts):
            kind = part.get("type")
            kind = kind if isinstance(kind, str) else repr(kind)  # a damaged part: reported below as an unknown type
            if kind == "step-finish":
                finished = True
                self.requests.append(Request(self._answered(), step_usage(part.get("tokens"), "step-finish tokens"), model, provider))
                self._open = False
            elif left_out or kind in _BOOKKEEPING:
                continue
            elif kind == "step-start":
                self._open = False
            elif kind == "reasoning":
                self._put(self._reasoning(msg, k, model))
            elif kind == "text":
                text = _text(part, k, "text")
                if text.strip() and not part.get("ignored"):
                    self._put(Part("action", text, label="assistant"))
            elif kind == "tool":
                for item in _tool(part, k):
                    self._put(item)
            elif kind == "file":
                self._put(Part("action", str(part.get("filename") or part.get("mime") or ""), label="file"))
            else:
                self.unrecognised.append(Unrecognised(None, msg.name(k, ()), f"assistant part of type {kind!r}: not scored or pruned"))
        if not finished:
            usage = step_usage(info.get("tokens"), "message tokens")
            if usage is not None:
                self.requests.append(Request(self._answered(), usage, model, provider))
        if left_out:
            name = error.get("name") if isinstance(error, dict) else None
            self.skipped.append(f"{msg.name(-1, ())} ({name or 'error'})")
        self._open = False

    def _put(self, part: Part | None) -> None:
        """Add an assistant-side part to the open step (opening one)."""
        if part is None:
            return
        if not self._open:
            self.steps.append([])
            self._open = True
        self.steps[-1].append(part)

    def _answered(self) -> int:
        """The step the request now finishing answered with (``len(steps)``: none in the file)."""
        return len(self.steps) - 1 if self._open else len(self.steps)

    def _reasoning(self, msg: Message, k: int, model: str | None) -> Part | None:
        """The part for reasoning part ``k`` (module docstring), or None when it holds no text."""
        data = msg.parts[k]
        text = _text(data, k, "text")
        if not text:
            return None
        path = msg.paths[k]
        meta = data.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        sites = [Site((*path, "text"))]
        strip: list[tuple[Path, str]] = []
        drop: list[Path] = []
        opaque = False
        read_only: str | None = None
        for name in ("anthropic", "bedrock"):
            holder = meta.get(name)
            if isinstance(holder, dict):
                if _filled(holder.get("signature")):
                    strip.append(((*path, "metadata", name), "signature"))
                if _filled(holder.get("redactedData")):
                    read_only = "redacted (the payload is the signature)"
        openai = meta.get("openai")
        if isinstance(openai, dict) and (_filled(openai.get("reasoningEncryptedContent")) or _filled(openai.get("itemId"))):
            opaque, drop = True, [path]  # the Responses item goes whole
        for name in ("google", "vertex"):
            holder = meta.get(name)
            if isinstance(holder, dict) and _filled(holder.get("thoughtSignature")):
                read_only = "signed by a Gemini thought signature (a signed part must not change)"
        details = meta.get("openrouter", {}).get("reasoning_details") if isinstance(meta.get("openrouter"), dict) else None
        if details is not None:
            if not isinstance(details, list):
                self.unrecognised.append(Unrecognised(None, msg.name(k, ("metadata", "openrouter", "reasoning_details")), "reasoning_details is not a list: not scored or pruned"))
                read_only = read_only or "beside a reasoning_details value iclr cannot read"
                details = []
            for n, entry in enumerate(details):
                keys = ("metadata", "openrouter", "reasoning_details", n)
                kind = entry.get("type") if isinstance(entry, dict) else None
                if kind == "reasoning.encrypted":
                    opaque = True
                    if path not in drop:
                        drop.append((*path, *keys))
                    continue
                key = {"reasoning.text": "text", "reasoning.summary": "summary"}.get(kind) if isinstance(kind, str) else None
                if key is None:
                    self.unrecognised.append(Unrecognised(None, msg.name(k, keys), f"reasoning_details entry of type {kind!r}: not scored or pruned"))
                    read_only = read_only or "beside a reasoning_details entry iclr cannot read"
                    continue
                if _filled(entry.get("signature")):
                    strip.append(((*path, *keys), "signature"))
                copy = entry.get(key)
                if copy in (None, ""):
                    continue
                how = locate(copy, text)
                if how not in ("whole", "prefix"):
                    self.unrecognised.append(Unrecognised(None, msg.name(k, (*keys, key)), "holds other text than the reasoning part (sent upstream instead of it): neither is edited"))
                    read_only = read_only or "whose reasoning_details copy holds other text"
                    continue
                sites.append(Site((*path, *keys, key), how))
        if read_only is not None:
            self.sealed.append(Unrecognised(None, msg.name(k, ("text",)), read_only))
            return Part("reasoning", text, label="reasoning", write_back=WriteBack.READ_ONLY)
        mode = WriteBack.OPAQUE if opaque else WriteBack.SIGNED if strip else WriteBack.IN_PLACE
        # the rule of this message's model where the table knows it (a session may switch models); else the session's
        ref = TextRef(tuple(sites), drop=tuple(drop) if opaque else (), strip_keys=tuple(strip),
                      model=model if model and for_model(model) is not None else None)
        return Part("reasoning", text, label="reasoning", ref=ref, write_back=mode)


def _filled(value: object) -> bool:
    return isinstance(value, str) and bool(value)


def _text(part: dict, k: int, key: str) -> str:
    value = part.get(key)
    if not isinstance(value, str):
        raise PartError(k, (key,), f"{part.get('type')} part has no string {key!r}")
    return value


def _tool(part: dict, k: int) -> list[Part]:
    """The call and its result (module docstring)."""
    state = part.get("state")
    if not isinstance(state, dict):
        raise PartError(k, ("state",), "tool part has no 'state' object")
    call_id = part.get("callID") if isinstance(part.get("callID"), str) else None
    call = Part("action", _json(state.get("input", {})), label=f"tool_call:{part.get('tool', '?')}", call_id=call_id)
    status = state.get("status")
    if status == "completed":
        output = state.get("output")
        if not isinstance(output, str):
            raise PartError(k, ("state", "output"), "completed tool part has no string 'output'")
    elif status == "error":
        output = str(state.get("error", ""))
    else:
        output = INTERRUPTED
    return [call, Part("observation", output, label="tool_result", call_id=call_id)]


def read_session(messages: Sequence[Message], source: str, traj_id: str, meta: dict) -> tuple[Trajectory, SessionReader]:
    """The trajectory of one session, and the reader (its notes, sealed parts and the
    messages left out).

    Raises:
        PartError: for a message or part of the wrong shape (``index`` the part, -1 the info).
    """
    reader = SessionReader(source)
    for i, msg in enumerate(messages):
        try:
            reader.message(msg, i)
        except PartError as exc:
            exc.message = i
            raise
    return reader.trajectory(traj_id, meta), reader


def field_of(keys: Sequence[Hashable]) -> str:
    """``a.b[2].c`` of ``keys``."""
    return "".join(f"[{k}]" if isinstance(k, int) else (f".{k}" if i else str(k)) for i, k in enumerate(keys))
