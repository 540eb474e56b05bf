"""Gemini CLI chat recordings (``~/.gemini/tmp/<project>/chats/session-*.json[l]``).

Read after gemini-cli's ``chatRecordingService.ts`` / ``chatRecordingTypes.ts``:

- the whole-file ``.json`` (older releases): ``{"sessionId", "projectHash", "startTime",
  "lastUpdated", "messages": [...]}``;
- the append-only ``.jsonl``: a metadata line (``sessionId``, ``projectHash``, ...), then one
  line per message record, written again whole on each update with the same ``id`` (tokens
  added, tool calls added, results filled in), ``{"$set": {...}}`` metadata patches (a
  ``$set`` holding ``messages`` is a checkpoint that replaces the conversation), and
  ``{"$rewindTo": ID}`` (the message ``ID`` and everything after it are gone). The
  conversation is what gemini-cli's loader rebuilds: for each id the last record written, at
  the place its id first appeared.

A message record has ``id``, ``timestamp``, ``type`` (``user``, ``gemini``, or ``info`` /
``error`` / ``warning``, which are never sent to the model and are not parts) and
``content`` (a string, a part, or a list of Gemini parts). A ``gemini`` record adds
``thoughts`` (``{subject, description, timestamp}``: the model's thought summaries),
``toolCalls`` (``id``, ``name``, ``args``, ``result``: the response parts, ``status``) and
``tokens``.

Trajectory: user messages before the first ``gemini`` message are P; each ``gemini`` message
is a step: reasoning, its text (``assistant``), each tool call (``tool_call:NAME``, ``args``
as JSON, its ``id``) and then each call's result (``tool_result``), then the user messages up
to the next ``gemini`` one (a user message that only repeats tool responses already read from
``toolCalls`` is not read twice).

Reasoning: each thought's ``description`` (the ``subject`` is its heading and stays); thought
parts in ``content`` (``{"text", "thought": true}``, written by checkpoints) as in the
``gemini`` adapter: one carrying a ``thoughtSignature`` is read-only, others in place, and a
thought entry holding the same summary is the same part. Every copy of a message's thought
(each line that re-wrote the message, each checkpoint: the same thought entry or content
thought part, same text) is a site of the same part, so an edit changes them all alike; a
copy that says the same words elsewhere is not edited, and the write-back engine refuses the
file (exit 2, naming both) rather than leave it full. Lines of rewound messages are copies
of nothing read and pass through.
"""

from __future__ import annotations

import json

from iclr_cli.errors import InputError
from iclr_cli.formats import media
from iclr_cli.formats.base import Document
from iclr_cli.formats.reading import Where, base_name, dig, field_name, parse_document, read_lines, sealed_warnings, spread_document, try_document, whole
from iclr_cli.formats.sniff import MARKER, Head, Match
from iclr_cli.formats.writeback import Draft, Path, Records, Site, WriteBackAdapter, freeze, get
from iclr_cli.jsonl import BAD_LINE
from iclr_cli.trajectory import Part, PartKind, Step, Trajectory, WriteBack

_HIDDEN = {"info", "error", "warning"}
_MESSAGE_TYPES = {"user", "gemini", *_HIDDEN}


def parse_thought(text: str) -> tuple[str, str]:
    """``(subject, description)`` of a raw thought as gemini-cli's ``parseThought`` splits it:
    the first ``**...**`` is the subject, the rest (trimmed) the description."""
    start = text.find("**")
    end = text.find("**", start + 2) if start != -1 else -1
    if start == -1 or end == -1:
        return "", text.strip()
    return text[start + 2 : end].strip(), (text[:start] + text[end + 2 :]).strip()


def _is_message(value: object) -> bool:
    return isinstance(value, dict) and isinstance(value.get("id"), str)


def _is_meta(value: object) -> bool:
    return isinstance(value, dict) and isinstance(value.get("sessionId"), str) and isinstance(value.get("projectHash"), str)


def _parts(content: object) -> list[tuple[Path, object]]:
    """``(path inside content, part)`` of a PartListUnion (a string is one text part)."""
    if isinstance(content, list):
        return [((k,), p) for k, p in enumerate(content)]
    return [((), content)] if content is not None else []


class _Conversation:
    """The messages of a recording as gemini-cli's loader rebuilds them, and every copy of
    each message id (module docstring)."""

    def __init__(self) -> None:
        self.live: dict[str, Path] = {}
        self.copies: dict[str, list[Path]] = {}
        self.session: str | None = None

    def put(self, msg: dict, path: Path) -> None:
        self.live[msg["id"]] = path  # an existing id keeps its place, as a JS Map does
        self.copies.setdefault(msg["id"], []).append(path)

    def record(self, value: object, path: Path) -> bool:
        """Take one record; False when it is none the CLI writes (the caller reports it)."""
        if isinstance(value, dict) and isinstance(value.get("$rewindTo"), str):
            ids = list(self.live)
            at = ids.index(value["$rewindTo"]) if value["$rewindTo"] in ids else 0
            for gone in ids[at:]:
                del self.live[gone]
        elif _is_message(value):
            self.put(value, path)
        elif isinstance(value, dict) and isinstance(value.get("$set"), dict):
            if isinstance(value["$set"].get("messages"), list):
                self.live.clear()
                self.batch(value["$set"]["messages"], (*path, "$set", "messages"))
            self.session = self.session or _str(value["$set"].get("sessionId"))
        elif _is_meta(value):
            self.session = self.session or value["sessionId"]
            if isinstance(value.get("messages"), list):
                self.batch(value["messages"], (*path, "messages"))
        else:
            return False
        return True

    def batch(self, messages: list, path: Path) -> None:
        for i, msg in enumerate(messages):
            if _is_message(msg):
                self.put(msg, (*path, i))


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _json_text(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


class _Reader:
    """Builds the trajectory from the live messages (module docstring)."""

    def __init__(self, records: Records, convo: _Conversation, where: Where):
        self.records, self.convo, self.where = records, convo, where
        self.prompt: list[Part] = []
        self.steps: list[list[Part]] = []
        self.answered: set[str] = set()
        self.model: str | None = None

    def msg_at(self, path: Path) -> dict:
        return get(self.records.values, path)  # type: ignore[return-value]

    def read(self) -> None:
        for msg_id, path in self.convo.live.items():
            msg = self.msg_at(path)
            self.where.line = self.records.lines[path[0]].number if self.records.lines else None
            kind = msg.get("type")
            if kind not in _MESSAGE_TYPES:
                self.where.note(_name(path, "type"), f"message type {kind!r} is not a Gemini CLI message type: not read")
                continue
            if kind in _HIDDEN:
                continue
            if kind == "gemini":
                self.steps.append(self.gemini(msg, path, msg_id))
                self.model = self.model or _str(msg.get("model"))
            else:
                self.user(msg, path)

    def user(self, msg: dict, path: Path) -> None:
        kind: PartKind = "observation" if self.steps else "prompt"
        out: list[Part] = []
        responses = []
        for inner, part in _parts(msg.get("content")):
            response = dig(part, "functionResponse")
            if isinstance(response, dict):
                responses.append(response.get("id"))
            out += self.user_part(part, kind)
        if responses and all(r in self.answered for r in responses) and len(responses) == len(_parts(msg.get("content"))):
            return  # the tool responses of the step, already read from its toolCalls
        (self.steps[-1] if self.steps else self.prompt).extend(out)

    def user_part(self, part: object, kind: PartKind, label: str = "user", call_id: str | None = None) -> list[Part]:
        if isinstance(part, str):
            return [Part(kind, part, label=label, call_id=call_id)]
        if not isinstance(part, dict):
            return []
        if isinstance(part.get("text"), str):
            return [Part(kind, part["text"], label=label, call_id=call_id)]
        response = part.get("functionResponse")
        if isinstance(response, dict):
            rid = response.get("id") if isinstance(response.get("id"), str) else call_id
            return [Part(kind, _json_text(response.get("response", {})), label="tool_result", call_id=rid)]
        found = media.gemini_media(part)
        if found is not None:
            return [Part(kind, "", label=label, call_id=call_id, media=found)]
        key = next(iter(part), label)
        return [Part(kind, _json_text(part.get(key)), label=key, call_id=call_id)]

    def gemini(self, msg: dict, path: Path, msg_id: str) -> list[Part]:
        drafts: list[Draft | Part] = []
        actions: list[Part] = []
        content_calls = []
        for inner, part in _parts(msg.get("content")):
            where = (*path, "content", *inner)
            if isinstance(part, str):
                if part.strip():
                    actions.append(Part("action", part, label="assistant"))
            elif isinstance(part, dict) and part.get("thought") is True and isinstance(part.get("text"), str):
                drafts.append(self.content_thought(part, where, msg_id, inner))
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                if part["text"].strip():
                    actions.append(Part("action", part["text"], label="assistant"))
            elif isinstance(part, dict) and isinstance(part.get("functionCall"), dict):
                content_calls.append(part["functionCall"])
            elif isinstance(part, dict) and set(part) - {"thoughtSignature"}:
                self.where.note(_name(where), f"gemini content part with {', '.join(sorted(part))}: not scored or pruned")
        self.thoughts(msg, path, msg_id, drafts)
        watched = list(dict.fromkeys(p[0] for p in self.convo.copies[msg_id]))
        for draft in drafts:
            if isinstance(draft, Draft):
                draft.watch.extend(watched)  # an unregistered copy in another line: refused, never left full
        calls = msg.get("toolCalls") if isinstance(msg.get("toolCalls"), list) else []
        observations: list[Part] = []
        for call in calls or content_calls:
            if not isinstance(call, dict):
                continue
            call_id = _str(call.get("id"))
            actions.append(Part("action", _json_text(call.get("args", {})), label=f"tool_call:{call.get('name', '?')}", call_id=call_id))
            result = call.get("result")
            if result is not None and "result" in call:
                if call_id:
                    self.answered.add(call_id)
                for _inner, part in _parts(result):
                    observations += self.user_part(part, "observation", "tool_result", call_id)
        return [*freeze(drafts), *actions, *observations]

    def content_thought(self, part: dict, path: Path, msg_id: str, inner: Path) -> Draft | Part:
        """A thought part of the content at ``path`` (``inner`` inside the content): the same
        part in the other records of the message (same place, same text) is a site too."""
        text = part["text"]
        if part.get("thoughtSignature"):
            if text.strip():
                self.where.sealed.append(self.where.at(path, "signed by Gemini (thoughtSignature; a signed part must not change)"))
            return Part("reasoning", text, label="reasoning", write_back=WriteBack.READ_ONLY)
        draft = Draft(text, [Site((*path, "text"))], remove_when_empty=path)
        live = path[: len(path) - len(inner) - 1]
        for copy in self.convo.copies[msg_id]:
            other = dig(self.msg_at(copy), "content", *inner) if copy != live else None
            if isinstance(other, dict) and other.get("thought") is True and other.get("text") == text and not other.get("thoughtSignature"):
                draft.add(Site((*copy, "content", *inner, "text")))
        return draft

    def thoughts(self, msg: dict, path: Path, msg_id: str, drafts: list) -> None:
        """Each thought summary: a site of the content thought it parses from, else a part
        of its own; every other record of the same message id holding the same summary at
        the same place is a site too."""
        for k, thought in enumerate(msg.get("thoughts") or []):
            if not isinstance(thought, dict) or not isinstance(thought.get("description"), str) or not thought["description"].strip():
                continue
            text, subject = thought["description"], thought.get("subject")
            # the live record first: the copy gemini-cli resumes from
            copies = [path, *(p for p in self.convo.copies[msg_id] if p != path)]
            sites = [Site((*p, "thoughts", k, "description")) for p in copies if self._same(p, k, subject, text)]
            twin = None
            for j, d in enumerate(drafts):
                if isinstance(d, (Draft, Part)) and parse_thought(d.text) == (subject or "", text.strip()):
                    twin = j
                    break
            if twin is None:
                drafts.append(Draft(text, sites))
                continue
            content = drafts[twin]
            if isinstance(content, Part):
                continue  # a signed content thought: read-only, and so is its summary
            if content.text.count(text) == 1:
                # the summary is the part: found once in the content thought, whole in each entry
                drafts[twin] = Draft(text, [*(Site(site.path, "unique") for site in content.sites), *sites])
            else:
                self.where.note(_name(content.sites[0].path), "thought summary not found once in its content thought: neither is edited")
                drafts[twin] = Part("reasoning", content.text, label="reasoning", write_back=WriteBack.READ_ONLY)

    def _same(self, path: Path, k: int, subject: object, text: str) -> bool:
        other = dig(self.msg_at(path), "thoughts", k)
        return isinstance(other, dict) and other.get("description") == text and other.get("subject") == subject


def _name(path: Path, *more: str) -> str:
    """The field name of ``path`` (record index first) inside its record."""
    return field_name((*path[1:], *more)) if path else ".".join(more)


class GeminiCliAdapter(WriteBackAdapter):
    """Gemini CLI chat recordings (see module docstring); write-back is the one engine's."""

    name = "gemini-cli"
    description = "Gemini CLI chat recordings (chats/session-*.json and the append-only .jsonl)"

    def sniff(self, head: Head | bytes) -> Match | None:
        """A match for a session record (``sessionId`` with ``projectHash``), ``$rewindTo`` /
        ``$set`` lines, or message records typed ``gemini``."""
        for rec in Head.of(head).objects:
            if _is_meta(rec):
                return Match(MARKER, "a Gemini CLI session record (sessionId, projectHash)")
            if "$rewindTo" in rec or isinstance(rec.get("$set"), dict):
                return Match(MARKER, "Gemini CLI $set / $rewindTo lines")
            if _is_message(rec) and rec.get("type") == "gemini" and "timestamp" in rec:
                return Match(MARKER, "Gemini CLI message records (type 'gemini')")
        return None

    def load(self, data: bytes, source: str, *, skip_bad_lines: bool = False) -> Document:
        """Read a recording (module docstring).

        Raises:
            InputError: for a file that is no recording, or a message with the wrong shape.
        """
        warnings: list[str] = []
        doc = try_document(data)
        if isinstance(doc, dict) and ("messages" in doc or _is_meta(doc)):
            records = whole(data, doc)
        elif doc is None and spread_document(data):
            parse_document(data, source)  # raises the located syntax error
            raise InputError(source, "not a Gemini CLI recording")
        else:
            records = read_lines(data, source, skip_bad_lines=skip_bad_lines, warnings=warnings)
        convo = _Conversation()
        where = Where(source, line=None)
        for rec, value in enumerate(records.values):
            if value is None or value is BAD_LINE:
                continue
            if not convo.record(value, (rec,)) and records.lines:  # a line of a JSONL recording that is none of its records
                where.line = records.lines[rec].number
                where.note("", "line is not a Gemini CLI record (a message with an id, $set, $rewindTo or the session's metadata): not read")
        where.line = None
        if not convo.live and convo.session is None:
            raise InputError(source, "no Gemini CLI session record or message found")
        for msg_id, path in convo.live.items():
            msg = get(records.values, path)
            if not isinstance(msg.get("type"), str):
                line = records.lines[path[0]].number if records.lines else None
                raise InputError(source, "message record has no string 'type'", line=line, field=_name(path, "type") or "type")
        reader = _Reader(records, convo, where)
        reader.read()
        steps = tuple(Step(i, tuple(p)) for i, p in enumerate(reader.steps))
        meta: dict[str, object] = {"format": self.name, **({"model": reader.model} if reader.model else {})}
        traj = Trajectory(convo.session or f"{base_name(source)}#0", tuple(reader.prompt), steps, meta=meta)
        warnings += sealed_warnings(source, where.sealed)
        return Document(self.name, source, [traj], records, warnings, unrecognised=where.unrecognised)


ADAPTER = GeminiCliAdapter()
