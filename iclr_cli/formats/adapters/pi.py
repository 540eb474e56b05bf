"""pi coding-agent sessions (``~/.pi/agent/sessions/--<cwd>--/<time>_<uuid>.jsonl``).

One entry per line with a ``type``: the ``session`` header (``id``, ``version``, ``cwd``), then
``message`` (an ``AgentMessage`` in ``message``), ``compaction``, ``branch_summary``,
``custom_message``, and bookkeeping (``model_change``, ``thinking_level_change``, ``label``,
``session_info``, ``custom``). Format reference: pi-mono ``packages/coding-agent/docs/session.md``
and the message types of ``packages/ai/src/types.ts``.

One file is one trajectory, id the header's ``id`` (fallback ``FILE#0``). Since version 2
entries form a tree through ``id`` / ``parentId``; like pi on resume, the trajectory is the
path from the last entry back to the root. Entries on other branches are passed through
byte for byte and named in a warning. Version 1 files are a single path in file order.

Steps (docs/FORMAT.md): one step per assistant message. Its content blocks, in order:
``thinking`` is reasoning, ``text`` an action ``assistant``, ``toolCall`` an action
``tool_call:NAME`` (``arguments`` as JSON, its ``id`` kept). Other entries on the path:
- ``toolResult`` messages: observations ``tool_result`` paired by ``toolCallId`` (images in
  them are media parts); ``user`` messages: ``user`` (P before the first step);
- ``bashExecution`` (the user's ``!`` commands): ``bash_execution``, unless
  ``excludeFromContext``; ``custom`` messages and ``custom_message`` entries: ``custom``;
- ``compaction`` entries: an observation ``compaction_summary`` (the summary text); the
  trajectory goes on across it, as for Claude Code, so the scorer may see history the agent
  no longer saw; ``branch_summary`` entries and summary messages likewise.
Assistant messages with ``stopReason`` ``aborted`` or ``error`` (a cancelled or failed call,
often with a half-written tool call and no result) are left out of the steps: pi never sends
them to a model again. They are passed through untouched and named in a warning.

Thinking blocks and their ``thinkingSignature`` (its meaning depends on the message's
``api``; METHOD.md, "Provider rules"):
- no or empty signature, or ``api: openai-completions`` (where it names the reasoning field):
  plain text, edited in place;
- ``anthropic-messages``, ``bedrock-converse-stream`` and any other api: a provider signature,
  :attr:`WriteBack.SIGNED`, as Anthropic's signed thinking: an edited block loses its
  ``thinkingSignature`` (pi then sends it as plain text);
- ``openai-responses`` / ``openai-codex-responses`` / ``azure-openai-responses``: the signature
  is the whole reasoning item (with ``encrypted_content``) that pi sends instead of the text,
  so the block is :attr:`WriteBack.OPAQUE`: an edited one is removed from ``content``
  (``--encrypted-reasoning drop``) or left as it is (``keep``); no line is ever removed;
- ``google-*``: a Gemini thought signature: :attr:`WriteBack.READ_ONLY`, as in the Gemini
  adapter (a signed part is never edited);
- ``redacted: true``: :attr:`WriteBack.READ_ONLY` (the payload is the signature).
Read-only blocks holding text are named in a warning (how many, the first one's line and
field): the reasoning is there, but no variant touches it.
A thinking block deleted in full stays as ``"thinking": ""`` (pi skips empty thinking).

Recorded usage (``iclr savings``): each assistant message is one request, with its ``usage``
(:func:`~iclr_cli.formats.usage.pi_usage`), ``model`` and ``provider``; an aborted or failed
one that recorded usage is a request whose answer is no step (billed all the same).
Only lines with an edited block are re-serialised; every other line is byte-identical.
"""

from __future__ import annotations

import json

from iclr_cli.errors import InputError
from iclr_cli.formats import media
from iclr_cli.formats.base import Document, Unrecognised
from iclr_cli.formats.sniff import MARKER, Head, Match
from iclr_cli.formats.usage import pi_usage
from iclr_cli.formats.reading import Where, base_name, read_lines, sealed_warnings
from iclr_cli.formats.writeback import Site, TextRef, WriteBackAdapter
from iclr_cli.jsonio import loads
from iclr_cli.jsonl import BAD_LINE
from iclr_cli.trajectory import Part, PartKind, Request, Step, Trajectory, WriteBack

ENTRY_TYPES = frozenset(
    {"session", "message", "compaction", "branch_summary", "custom_message", "custom", "model_change", "thinking_level_change", "label", "session_info"}
)
"""Top-level ``type`` values of pi session lines."""

_RESPONSES_APIS = frozenset({"openai-responses", "openai-codex-responses", "azure-openai-responses"})
_SKIPPED_STOPS = frozenset({"aborted", "error"})
_SNIFF_LINES = 5


def _json_text(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def _thinking_mode(block: dict, api: object) -> WriteBack:
    """How an edited thinking block may be written back (see module docstring)."""
    if block.get("redacted") is True:
        return WriteBack.READ_ONLY
    signature = block.get("thinkingSignature")
    if not isinstance(signature, str) or not signature.strip() or api == "openai-completions":
        return WriteBack.IN_PLACE
    if api in _RESPONSES_APIS:
        return WriteBack.OPAQUE
    if isinstance(api, str) and api.startswith("google"):
        return WriteBack.READ_ONLY
    return WriteBack.SIGNED


class _Reader:
    """Builds the trajectory from the entries on the path (see module docstring)."""

    def __init__(self, source: str, unrecognised: list[Unrecognised]):
        self.source = source
        self.unrecognised = unrecognised
        self.sealed: list[Unrecognised] = []  # read-only thinking with text: named in a warning
        self.prompt: list[Part] = []
        self.steps: list[list[Part]] = []
        self.model: str | None = None
        self.requests: list[Request] = []

    def add(self, text: str, label: str, **kw) -> None:
        kind: PartKind = "observation" if self.steps else "prompt"
        (self.steps[-1] if self.steps else self.prompt).append(Part(kind, text, label=label, **kw))

    def content(self, content: object, label: str, line: int, where: str, call_id: str | None = None) -> None:
        """A user / tool-result / custom ``content``: a string, or text and image blocks
        (consecutive text blocks joined by a newline, as pi sends them to Gemini)."""
        if isinstance(content, str):
            self.add(content, label, call_id=call_id)
            return
        if not isinstance(content, list):
            raise InputError(self.source, "must be a string or a list of content blocks", line=line, field=where)
        texts: list[str] = []
        emitted = False
        for i, block in enumerate(content):
            if not isinstance(block, dict):
                raise InputError(self.source, "content block is not an object", line=line, field=f"{where}[{i}]")
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
                continue
            if texts:
                self.add("\n".join(texts), label, call_id=call_id)
                texts, emitted = [], True
            found = media.pi_image(block) if block.get("type") == "image" else None
            if found is not None:
                self.add("", label, call_id=call_id, media=found)
            else:
                self.add(_json_text(block), str(block.get("type", "block")), call_id=call_id)
            emitted = True
        if texts or not emitted:
            self.add("\n".join(texts), label, call_id=call_id)

    def assistant(self, message: dict, rec: int, line: int) -> None:
        content = message.get("content")
        if not isinstance(content, list):
            raise InputError(self.source, "assistant content must be a list of blocks", line=line, field="message.content")
        if isinstance(message.get("model"), str):
            self.model = message["model"]
        api = message.get("api")
        parts: list[Part] = []
        for i, block in enumerate(content):
            where = f"message.content[{i}]"
            if not isinstance(block, dict):
                raise InputError(self.source, "content block is not an object", line=line, field=where)
            kind = block.get("type")
            if kind == "thinking":
                if not isinstance(block.get("thinking"), str):
                    raise InputError(self.source, "thinking block has no string 'thinking'", line=line, field=f"{where}.thinking")
                path = (rec, "message", "content", i)
                mode = _thinking_mode(block, api)
                ref = TextRef(
                    (Site((*path, "thinking")),),
                    strip_keys=((path, "thinkingSignature"),) if mode is WriteBack.SIGNED else (),
                    drop=(path,) if mode is WriteBack.OPAQUE else (),
                    # pi switches models mid-session: whose signature rule applies is this message's (sealing.py)
                    model=message["model"] if isinstance(message.get("model"), str) else None,
                )
                parts.append(Part("reasoning", block["thinking"], label="reasoning", ref=ref, write_back=mode))
                if mode is WriteBack.READ_ONLY and block["thinking"].strip():
                    why = "marked redacted" if block.get("redacted") is True else f"signed by {api} (a Gemini thought signature; a signed part must not change)"
                    self.sealed.append(Unrecognised(line, where, why))
            elif kind == "text" and isinstance(block.get("text"), str):
                if block["text"].strip():
                    parts.append(Part("action", block["text"], label="assistant"))
            elif kind == "toolCall":
                call_id = block.get("id") if isinstance(block.get("id"), str) else None
                parts.append(Part("action", _json_text(block.get("arguments", {})), label=f"tool_call:{block.get('name', '?')}", call_id=call_id))
            elif kind == "image" and media.pi_image(block) is not None:
                parts.append(Part("action", "", label="assistant", media=media.pi_image(block)))
            else:
                self.unrecognised.append(Unrecognised(line, where, f"assistant content block of type {kind!r}"))
        self.steps.append(parts)

    def message(self, message: object, rec: int, line: int) -> str | None:
        """Read one ``message`` entry; returns why it was left out, or None."""
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise InputError(self.source, "message entry has no 'message' object with a string 'role'", line=line, field="message")
        role = message["role"]
        if role == "assistant":
            usage = pi_usage(message.get("usage"), message.get("api"), "message.usage")
            model, provider = message.get("model"), message.get("provider")
            request = Request(len(self.steps), usage, model if isinstance(model, str) else None, provider if isinstance(provider, str) else None)
            if message.get("stopReason") in _SKIPPED_STOPS:
                if usage is not None:  # billed all the same: a request whose answer is no step
                    self.requests.append(request)
                return str(message["stopReason"])
            self.requests.append(request)
            self.assistant(message, rec, line)
        elif role == "user":
            self.content(message.get("content", ""), "user", line, "message.content")
        elif role == "toolResult":
            call_id = message.get("toolCallId") if isinstance(message.get("toolCallId"), str) else None
            self.content(message.get("content", []), "tool_result", line, "message.content", call_id=call_id)
        elif role == "bashExecution":
            if not message.get("excludeFromContext"):
                code = message.get("exitCode")
                tail = f"\n(exit code {code})" if isinstance(code, int) and code != 0 else ""
                self.add(f"$ {message.get('command', '')}\n{message.get('output', '')}{tail}", "bash_execution")
        elif role in ("custom", "hookMessage"):
            self.content(message.get("content", ""), "custom", line, "message.content")
        elif role in ("compactionSummary", "branchSummary"):
            label = "compaction_summary" if role == "compactionSummary" else "branch_summary"
            self.add(str(message.get("summary", "")), label)
        else:
            self.add(_json_text(message), role)
        return None


def _path(values: list[object]) -> tuple[list[int], int]:
    """Record indices of the entries pi would resume with, in order, and how many entries
    (not the header) are on other branches."""
    entries = [rec for rec, v in enumerate(values) if isinstance(v, dict) and v.get("type") != "session"]
    header = next((v for v in values if isinstance(v, dict) and v.get("type") == "session"), {})
    version = header.get("version", 1) if isinstance(header, dict) else 1
    if not isinstance(version, int) or version < 2 or not entries:
        return entries, 0
    by_id = {values[rec]["id"]: rec for rec in entries if isinstance(values[rec].get("id"), str)}  # type: ignore[index]
    path: list[int] = []
    seen: set[int] = set()
    rec: int | None = next((r for r in reversed(entries) if isinstance(values[r].get("id"), str)), entries[-1])  # type: ignore[union-attr]
    while rec is not None and rec not in seen:
        seen.add(rec)
        path.append(rec)
        parent = values[rec].get("parentId")  # type: ignore[union-attr]
        rec = by_id.get(parent) if isinstance(parent, str) else None
    path.reverse()
    return path, len(entries) - len(path)


class PiAdapter(WriteBackAdapter):
    """pi coding-agent session JSONL (see module docstring); write-back is the one engine's
    (:mod:`iclr_cli.formats.writeback`): ``--encrypted-reasoning`` decides what happens to
    edited OpenAI Responses thinking (removed with ``drop``, untouched with ``keep``)."""

    name = "pi"
    description = "pi coding-agent session JSONL (~/.pi/agent/sessions/*/*.jsonl; session, message, compaction entries)"

    def sniff(self, head: Head | bytes) -> Match | None:
        """A match when the first JSON line is a pi ``session`` header (``type: "session"`` with
        ``cwd`` or ``version``), or the first lines are pi entries holding a ``message``
        whose role is a pi role (``toolResult``, ``bashExecution``) or an assistant with
        ``stopReason``."""
        if self._looks(Head.of(head).raw):
            return Match(MARKER, "pi session entries (a 'session' header, or messages with pi roles)")
        return None

    @staticmethod
    def _looks(head: bytes) -> bool:
        parsed = []
        for raw in head.split(b"\n")[:-1] if b"\n" in head else [head]:
            if not raw.strip():
                continue
            try:
                parsed.append(loads(raw))
            except (ValueError, UnicodeDecodeError):
                break
            if len(parsed) == _SNIFF_LINES:
                break
        if not parsed:
            return head.lstrip().startswith(b'{"type":"session"') and b'"cwd"' in head
        first = parsed[0]
        if isinstance(first, dict) and first.get("type") == "session" and ("cwd" in first or "version" in first):
            return True
        for v in parsed:
            msg = v.get("message") if isinstance(v, dict) and v.get("type") == "message" else None
            if isinstance(msg, dict) and (msg.get("role") in ("toolResult", "bashExecution") or (msg.get("role") == "assistant" and "stopReason" in msg)):
                return True
        return False

    def load(self, data: bytes, source: str, *, skip_bad_lines: bool = False) -> Document:
        """The session as one trajectory (see the module docstring).

        Raises:
            InputError: for an empty file, a line that is not a pi entry (unless
            ``skip_bad_lines``), or a malformed message (naming line and field).
        """
        warnings: list[str] = []
        records = read_lines(data, source, skip_bad_lines=skip_bad_lines, warnings=warnings)
        lines, values = records.lines or [], records.values
        for rec, line in enumerate(lines):
            value = line.value
            if value is None or value is BAD_LINE:
                continue
            if not isinstance(value, dict) or not isinstance(value.get("type"), str):
                problem = "line is not a pi session entry (an object with a string 'type')"
                if not skip_bad_lines:
                    raise InputError(source, problem, line=line.number)
                warnings.append(f"{source}:{line.number}: passed through unscored: {problem}")
                values[rec] = BAD_LINE
        path, off_path = _path(values)
        unrecognised: list[Unrecognised] = []
        reader = _Reader(source, unrecognised)
        left_out: list[str] = []
        for rec in path:
            value: dict = values[rec]  # type: ignore[assignment]
            number = lines[rec].number
            kind = value["type"]
            if kind == "message":
                why = reader.message(value.get("message"), rec, number)
                if why:
                    left_out.append(f"{number} ({why})")
            elif kind == "compaction":
                reader.add(str(value.get("summary", "")), "compaction_summary")
            elif kind == "branch_summary" and value.get("summary"):
                reader.add(str(value["summary"]), "branch_summary")
            elif kind == "custom_message":
                reader.content(value.get("content", ""), "custom", number, "content")
            elif isinstance(value.get("message"), dict) and isinstance(value["message"].get("role"), str):
                # a conversation message under another entry type: reported, never dropped unseen
                Where(source, rec, number, unrecognised=unrecognised).note(
                    "type", f"entry holds a {value['message']['role']!r} message but its type is {kind!r}, not 'message'")
        if left_out:
            shown = ", ".join(left_out[:10]) + (f" and {len(left_out) - 10} more" if len(left_out) > 10 else "")
            plural = "s" if len(left_out) > 1 else ""
            warnings.append(f"{source}: not scored, left as written (pi never sends aborted or failed turns again): assistant turn{plural} at line{plural} {shown}")
        if not reader.steps and not reader.prompt:
            warnings.append(f"{source}: no messages on the session's current branch; nothing to score")
        if off_path:
            warnings.append(f"{source}: {off_path} {'entry' if off_path == 1 else 'entries'} on other branches of the session tree passed through unscored")
        warnings += sealed_warnings(source, reader.sealed)
        header = next((v for v in values if isinstance(v, dict) and v.get("type") == "session"), None)
        traj_id = header["id"] if isinstance(header, dict) and isinstance(header.get("id"), str) and header["id"] else f"{base_name(source)}#0"
        meta: dict[str, object] = {"format": self.name}
        model = reader.model or (header.get("modelId") if isinstance(header, dict) else None)
        if isinstance(model, str):
            meta["model"] = model
        steps = tuple(Step(i, tuple(p)) for i, p in enumerate(reader.steps))
        trajectory = Trajectory(traj_id, tuple(reader.prompt), steps, meta=meta, requests=tuple(reader.requests))
        return Document(self.name, source, [trajectory], records, warnings, unrecognised)


ADAPTER = PiAdapter()
