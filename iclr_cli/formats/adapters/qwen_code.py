"""Qwen Code sessions (``~/.qwen/projects/<project>/chats/<session>.jsonl``).

Read after QwenLM/qwen-code ``packages/core/src/services/chatRecordingService.ts``
(``ChatRecord``, ``recordAssistantTurn``, ``recordToolResult``, ``recordChatCompression``,
``recordUiTelemetryEvent``) and ``packages/core/src/utils/transcript-records.ts`` (how the
CLI rebuilds a session on resume). One JSON record per line, each with ``uuid``,
``parentUuid``, ``sessionId``, ``timestamp``, ``cwd``, ``version`` and a ``type``:

- ``user``: ``message`` is a Gemini ``Content`` (``{"role": "user", "parts": [...]}``); a
  ``subtype`` (``notification``, ``cron``, ``mid_turn_user_message``, ...) marks user-role
  input the agent itself sent, still model-facing;
- ``assistant``: ``message`` is the model's ``Content`` (``role: "model"``: ``{text}``,
  ``{text, thought: true}`` thought parts, ``functionCall`` parts, each possibly with a
  ``thoughtSignature``), with ``model``, ``usageMetadata`` and ``contextWindowSize``;
- ``tool_result``: ``message`` holds the ``functionResponse`` parts sent back to the model,
  ``toolCallResult`` a UI copy of them (``responseParts``, ``resultDisplay``);
- ``system``: bookkeeping with a ``subtype`` and ``systemPayload`` (``ui_telemetry``,
  ``slash_command``, ``custom_title``, ``rewind``, ...), never sent to the model; a
  ``chat_compression`` record's ``systemPayload.compressedHistory`` (``Content[]``) is the
  history the model sees from then on (a summary turn, then the kept tail).

The records form a tree through ``parentUuid``; ``/rewind`` and branching leave abandoned
records in the file. The conversation is what the CLI resumes (``prepareTranscriptRecords``):
the chain from the last conversation record (any record but the artifact, sources and
managed-session ``system`` records) back through ``parentUuid``; records sharing a ``uuid``
are fragments of one message, read in file order. Records off the chain pass through byte
for byte, and the message records among them are named in a warning (not scored: the CLI does
not send them again).

Trajectory (one per file, id ``sessionId``): ``user`` / ``tool_result`` parts before the
first assistant record are P, after it observations of the latest step (``functionResponse``
parts label ``tool_result``, paired with their call by ``id``); each ``assistant`` message
(its fragments) is a step, with ``model`` per step and ``usageMetadata`` as its request's
usage. A ``chat_compression`` record on the chain adds the text of its first (summary)
content as an observation labelled ``compact_summary``; the trajectory goes on across it.

Reasoning: each ``{text, thought: true}`` part of an assistant message, read as the Gemini
adapter reads model parts (:mod:`iclr_cli.formats.adapters.gemini`; every other part goes through its
reader). Whose provider rule applies is told by the record's ``model``
(:mod:`iclr_cli.formats.sealing`): Qwen Code keeps a provider's signature of a thought in
its ``thoughtSignature`` (Gemini's, Anthropic's ``thinking.signature``, or an OpenAI
Responses ``{id, encrypted_content}`` payload: ``utils/thoughtUtils.ts``), so a signed
thought is sealed on a provider that checks signatures (Gemini's rule, as the Gemini
adapter applies it: a signed part must not change) and edited in place, signature key kept,
on a plain one. ``--signed-thinking edit`` removes the signature. A signature on a
``functionCall`` part is the call's and stays with it: only thought parts are edited. An
unsigned thought emptied in full is removed from ``parts`` unless it is the only part
(Gemini rejects empty text parts); a plain provider's stays as an empty part. The same
thought kept in a later ``chat_compression`` history (same text, a thought part) is a site
of the same part, so both are edited alike.

Write-back is the one engine's (:mod:`iclr_cli.formats.writeback`): only records holding an
edited thought are re-serialised, in their own layout; every other line is byte for byte.
"""

from __future__ import annotations

import re
from dataclasses import replace

from iclr_cli.errors import InputError
from iclr_cli.formats.base import Document
from iclr_cli.formats.adapters.gemini import _Reader as GeminiReader
from iclr_cli.formats.reading import Where, base_name, read_lines, sealed_warnings
from iclr_cli.formats.sniff import MARKER, Head, Match
from iclr_cli.formats.usage import count
from iclr_cli.formats.writeback import Draft, Path, Records, Site, WriteBackAdapter, freeze
from iclr_cli.jsonl import BAD_LINE
from iclr_cli.trajectory import Part, Request, Step, Trajectory, Usage, WriteBack

RECORD_TYPES = frozenset({"user", "assistant", "tool_result", "system"})
"""``ChatRecord.type`` values (chatRecordingService.ts)."""

# System subtypes that are no conversation record: never the leaf the chain starts from
# (transcript-records.ts, ``isTranscriptConversationRecord``).
_NOT_CONVERSATION = frozenset({
    "session_artifact_event", "session_artifact_snapshot", "session_sources_snapshot",
    "managed_session_header_v1", "managed_session_event_v1", "managed_session_commit_v1",
})
_SIGNATURE_KEYS = ("thoughtSignature", "thought_signature")
# A first line longer than the head: a Content message is written ``{"role", "parts"}``.
_RAW_CONTENT = re.compile(rb'"message"\s*:\s*\{\s*"role"\s*:\s*"(?:user|model)"\s*,\s*"parts"\s*:')


def gemini_content(message: object) -> bool:
    """Whether a record's ``message`` is a Gemini ``Content`` (a ``parts`` list, no
    ``content`` key): what tells a Qwen Code record from a Claude Code one, whose
    ``message`` is an Anthropic message with ``content``."""
    return isinstance(message, dict) and isinstance(message.get("parts"), list) and "content" not in message


def is_record(value: object) -> bool:
    """A Qwen Code chat record: ``uuid``, ``sessionId`` strings, a ``parentUuid`` key and a
    ``ChatRecord.type``."""
    return (isinstance(value, dict) and isinstance(value.get("uuid"), str) and isinstance(value.get("sessionId"), str)
            and "parentUuid" in value and isinstance(value.get("type"), str) and value["type"] in RECORD_TYPES)


def _check(value: object) -> tuple[str | None, str | None]:
    """``(problem, field)`` for a line this adapter cannot read, else ``(None, None)``."""
    if not isinstance(value, dict):
        return "line is not a JSON object (expected one Qwen Code chat record per line)", None
    for key in ("uuid", "type"):
        if not isinstance(value.get(key), str):
            return f"record has no string '{key}'", key
    if "parentUuid" not in value or not (value["parentUuid"] is None or isinstance(value["parentUuid"], str)):
        return "record has no 'parentUuid' (a string, or null for the first record)", "parentUuid"
    if value["type"] in ("user", "assistant", "tool_result") and "message" in value:
        message = value["message"]
        if not isinstance(message, dict):
            return "'message' is not a Gemini Content object", "message"
        if not isinstance(message.get("parts"), list):
            return "message has no 'parts' list (a Qwen Code message is a Gemini Content: role and parts)", "message.parts"
    return None, None


def _chain(values: list) -> tuple[list[int], bool]:
    """Indices of the records on the active chain, in reading order, and whether the chain
    stops at a parent that is not in the file (see module docstring)."""
    fragments: dict[str, list[int]] = {}
    parent: dict[str, object] = {}
    leaf = None
    for rec, value in enumerate(values):
        if not isinstance(value, dict) or not isinstance(value.get("type"), str) or value["type"] not in RECORD_TYPES:
            continue
        if value["type"] == "system" and value.get("subtype") in _NOT_CONVERSATION:
            continue
        uuid = value["uuid"]
        fragments.setdefault(uuid, []).append(rec)
        parent.setdefault(uuid, value.get("parentUuid"))
        leaf = uuid
    order: list[str] = []
    seen: set[str] = set()
    gap = False
    at = leaf
    while isinstance(at, str) and at not in seen:
        if at not in fragments:
            gap = True
            break
        seen.add(at)
        order.append(at)
        at = parent[at]  # type: ignore[assignment]
    return [rec for uuid in reversed(order) for rec in fragments[uuid]], gap


def _usage(meta: object) -> Usage | None:
    """A ``usageMetadata`` (Gemini ``GenerateContentResponseUsageMetadata``) as
    :class:`Usage`: ``promptTokenCount`` holds the cached part (``cachedContentTokenCount``);
    output is ``totalTokenCount - promptTokenCount`` where both are recorded, since Qwen
    Code's converters disagree on whether ``candidatesTokenCount`` counts the thoughts, else
    ``candidatesTokenCount + thoughtsTokenCount`` (Gemini's convention)."""
    if not isinstance(meta, dict) or (prompt := count(meta.get("promptTokenCount"))) is None:
        return None
    total, candidates, thoughts = (count(meta.get(k)) for k in ("totalTokenCount", "candidatesTokenCount", "thoughtsTokenCount"))
    output = total - prompt if total is not None and total >= prompt else (candidates + (thoughts or 0) if candidates is not None else None)
    cached = count(meta.get("cachedContentTokenCount"))
    return Usage(prompt, output, cached or None, None, "usageMetadata", reasoning_tokens=thoughts)


class _Reader:
    """Builds the trajectory from the records of the chain (module docstring)."""

    def __init__(self, records: Records, where: Where):
        self.records, self.where = records, where
        self.gemini = GeminiReader(where)  # the Gemini part reader: calls, responses, media, signatures
        self.prompt: list[Part] = []
        self.steps: list[list[Draft | Part]] = []
        self.models: list[str | None] = []
        self.usage: dict[int, Usage] = {}
        self.step_uuid: str | None = None
        self.thoughts: dict[str, Draft] = {}  # unsigned thought text -> its part, for compression copies

    def read(self, rec: int, value: dict) -> None:
        self.where.rec, self.where.line = rec, self.records.lines[rec].number  # type: ignore[index]
        kind, message = value["type"], value.get("message")
        if kind == "assistant":
            if value["uuid"] != self.step_uuid:
                self.step_uuid = value["uuid"]
                self.steps.append([])
                self.models.append(value["model"] if isinstance(value.get("model"), str) and value["model"] else None)
                self.gemini.steps.append([])  # keeps the Gemini reader's step index (call ids) in step
                self.gemini.open_calls = []
            if (usage := _usage(value.get("usageMetadata"))) is not None:
                self.usage[len(self.steps) - 1] = usage
            for i, part in enumerate(message["parts"] if message is not None else []):
                self.steps[-1].extend(self.model_part(part, ("message", "parts", i)))
        elif kind in ("user", "tool_result") and message is not None:
            self.step_uuid = None
            part_kind = "observation" if self.steps else "prompt"
            target = self.steps[-1] if self.steps else self.prompt
            for i, part in enumerate(message["parts"]):
                target.extend(self.gemini.other_part(part, ("message", "parts", i), part_kind))
        elif kind == "system" and value.get("subtype") == "chat_compression":
            self.step_uuid = None
            self.compression(rec, value)

    def model_part(self, part: object, path: Path) -> list[Draft | Part]:
        if not (isinstance(part, dict) and part.get("thought") is True and isinstance(part.get("text"), str)):
            return self.gemini.model_part(part, path)  # type: ignore[return-value]
        rec_path = (self.where.rec, *path)
        key = next((k for k in _SIGNATURE_KEYS if part.get(k)), None)
        if key is not None:
            self.where.signatures.append(self.where.at((*path, key), f"step {len(self.steps) - 1}: thought part"))
        if not part["text"].strip():
            return []
        site = Site((*rec_path, "text"))
        if key is not None:
            return [Draft(part["text"], [site], write_back=WriteBack.SIGNED, strip_keys=[(rec_path, key)], remove_when_empty=rec_path)]
        draft = Draft(part["text"], [site], remove_when_empty=rec_path)
        self.thoughts.setdefault(part["text"], draft)
        return [draft]

    def compression(self, rec: int, value: dict) -> None:
        """The summary of a ``chat_compression`` record as an observation, and its kept
        thought parts as sites of the thoughts they copy."""
        history = (value.get("systemPayload") or {}).get("compressedHistory") if isinstance(value.get("systemPayload"), dict) else None
        if not isinstance(history, list):
            return
        base = (rec, "systemPayload", "compressedHistory")
        for k, content in enumerate(history):
            parts = content.get("parts") if isinstance(content, dict) else None
            for j, part in enumerate(parts if isinstance(parts, list) else []):
                if isinstance(part, dict) and part.get("thought") is True and not any(part.get(s) for s in _SIGNATURE_KEYS):
                    draft = self.thoughts.get(part.get("text"))  # type: ignore[arg-type]
                    if draft is not None:
                        draft.add(Site((*base, k, "parts", j, "text")))
        first = history[0] if history else None
        if isinstance(first, dict) and first.get("role") == "user" and isinstance(first.get("parts"), list):
            text = "\n".join(p["text"] for p in first["parts"] if isinstance(p, dict) and isinstance(p.get("text"), str) and not p.get("thought"))
            if text.strip():
                (self.steps[-1] if self.steps else self.prompt).append(Part("observation" if self.steps else "prompt", text, label="compact_summary"))

    def trajectory(self, traj_id: str) -> Trajectory:
        steps = []
        for i, items in enumerate(self.steps):
            parts = list(freeze(items))
            model = self.models[i]
            for k, p in enumerate(parts):
                if p.kind != "reasoning" or p.ref is None:
                    continue
                ref = p.ref
                copies = tuple(site.path[:-1] for site in ref.sites[1:])  # an emptied copy goes with its original
                parts[k] = replace(p, ref=replace(ref, model=model, also_empty=(*ref.also_empty, *copies) if ref.remove_when_empty else ref.also_empty))
            steps.append(Step(i, tuple(parts)))
        model = next((m for m in self.models if m), None)
        meta: dict[str, object] = {"format": ADAPTER.name, **({"model": model} if model else {})}
        requests = tuple(Request(i, self.usage.get(i), self.models[i]) for i in range(len(steps)))
        return Trajectory(traj_id, tuple(self.prompt), tuple(steps), meta=meta, requests=requests)


class QwenCodeAdapter(WriteBackAdapter):
    """Qwen Code session JSONL (see module docstring); write-back is the one engine's."""

    name = "qwen_code"
    description = "Qwen Code sessions (~/.qwen/projects/*/chats/*.jsonl: records with Gemini Content messages)"
    # ``toolCallResult`` repeats the response parts for the UI; ``systemPayload`` holds
    # display text, telemetry and compression checkpoints (``iclr convert``, formats/convert/carried.py).
    not_carried = frozenset({("toolCallResult",), ("systemPayload",)})

    def sniff(self, head: Head | bytes) -> Match | None:
        """A match for a chat record (``uuid``, ``parentUuid``, ``sessionId``, a
        ``ChatRecord.type``) whose ``message`` is a Gemini ``Content``; a first line longer
        than the head is judged by its ``parentUuid`` and a ``message`` opening with
        ``role`` and ``parts``."""
        head = Head.of(head)
        for rec in head.objects:
            if is_record(rec) and gemini_content(rec.get("message")):
                return Match(MARKER, "Qwen Code chat records (uuid/parentUuid with a Gemini Content message)")
        if not head.lines and head.start == b"{" and b'"parentUuid"' in head.raw and _RAW_CONTENT.search(head.raw):
            return Match(MARKER, "a Qwen Code chat record (parentUuid, a message with role and parts)")
        return None

    def load(self, data: bytes, source: str, *, skip_bad_lines: bool = False) -> Document:
        """Read a session (module docstring).

        Raises:
            InputError: naming the file, line and field of a record that is not a Qwen Code
            chat record (unless ``skip_bad_lines``: it is then passed through unread), and for
            a file whose chain holds no user or assistant message.
        """
        warnings: list[str] = []
        records = read_lines(data, source, skip_bad_lines=skip_bad_lines, warnings=warnings)
        where = Where(source)
        for rec, line in enumerate(records.lines):  # type: ignore[arg-type]
            if line.value is None or line.value is BAD_LINE:
                continue
            problem, field = _check(line.value)
            if problem:
                if not skip_bad_lines:
                    raise InputError(source, problem, line=line.number, field=field)
                warnings.append(f"{source}:{line.number}: passed through unscored: {problem}")
                records.values[rec] = BAD_LINE
            elif line.value["type"] not in RECORD_TYPES:
                where.line = line.number
                where.note("type", f"record type {line.value['type']!r} is not a Qwen Code record type: passed through, not read")
        chain, gap = _chain(records.values)
        if not any(records.values[rec]["type"] in ("user", "assistant") and "message" in records.values[rec] for rec in chain):
            raise InputError(source, "read as a Qwen Code session, but it holds no user or assistant message: nothing to score")
        if gap:
            first = records.values[chain[0]]
            warnings.append(f"{source}:{records.lines[chain[0]].number}: the conversation starts at a record whose parent "  # type: ignore[index]
                            f"{first['parentUuid']!r} is not in the file: earlier history is not read")
        on_chain = set(chain)
        off = [rec for rec, v in enumerate(records.values) if rec not in on_chain and isinstance(v, dict)
               and v.get("type") in ("user", "assistant", "tool_result") and "message" in v]
        if off:  # what the CLI does not resume is not scored, and is said (a new root, /rewind, a branch)
            lines = ", ".join(str(records.lines[rec].number) for rec in off[:10]) + (f" and {len(off) - 10} more" if len(off) > 10 else "")  # type: ignore[index]
            warnings.append(f"{source}: {len(off)} message record(s) off the conversation Qwen Code resumes (the chain back from the last "
                            f"record through parentUuid) passed through unscored: line(s) {lines}")
        reader = _Reader(records, where)
        for rec in chain:
            reader.read(rec, records.values[rec])  # type: ignore[arg-type]
        session = records.values[chain[0]].get("sessionId")  # type: ignore[union-attr]
        traj = reader.trajectory(session if isinstance(session, str) and session else f"{base_name(source)}#0")
        warnings += sealed_warnings(source, where.sealed)
        return Document(self.name, source, [traj], records, warnings, unrecognised=where.unrecognised, signatures=where.signatures)


ADAPTER = QwenCodeAdapter()
