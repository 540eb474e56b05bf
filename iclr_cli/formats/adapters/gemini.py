"""Gemini native conversations: ``contents`` of ``role: user|model`` with typed ``parts``.

Shapes accepted (one trajectory per conversation):
- a JSON object with ``contents`` (a ``generateContent`` request body, or a conversation saved
  in that shape), optionally with ``systemInstruction`` and ``tools``;
- a JSON list of ``Content`` objects (a chat history: ``[{"role": "user", "parts": [...]}]``);
- an API traffic record ``{"request": {"contents": ...}, "response": {"candidates": [...]}}``:
  the request's contents plus the first candidate's ``content``;
- JSONL with one of these per line.
REST camelCase keys and the Python SDK's snake_case keys (``thought_signature``,
``function_call``, ``system_instruction``, ...) are both read; files keep their own spelling.

Steps (docs/FORMAT.md): one step per ``role: "model"`` content (one model call). Contents of
any other role (``user``; ``function`` / ``tool`` in older logs) after the first model content
are observations of the step before them; those before it, ``systemInstruction`` (label
``system``) and ``tools`` (label ``tools``, the JSON as replay renders it) form P.

Parts of a model content:
- ``{"text", "thought": true}``: reasoning. A part carrying a (non-empty) ``thoughtSignature`` is
  :attr:`WriteBack.READ_ONLY`: never scored, never edited, written back byte for byte (the
  API checks signatures, and a signed part must not be changed, merged or moved).
- ``text``: action ``assistant``; ``functionCall``: action ``tool_call:NAME`` with its
  ``args`` as JSON; ``executableCode``: action ``executable_code``;
  ``codeExecutionResult``: observation ``code_execution_result``; ``inlineData`` /
  ``fileData``: a media part.
- A part with an empty text and only a signature carries nothing; a part with a key this
  adapter does not know is reported as unrecognised.
Signed thoughts are named in a warning (how many, and the first one's field): reasoning is
there, but no variant touches it. Every signature, on any part (a thought, a
``functionCall``, an empty text, ...), is listed in :attr:`Document.signatures`: ``iclr convert`` refuses it,
since no target holds a Gemini signature (Gemini needs it back with the call).
``functionResponse`` parts are observations ``tool_result`` (``response`` as JSON, nested
media parts after it). Calls and responses pair by ``id``; where the API gave none, by name in
call order within the step, and the pair gets the id ``call_<step>_<k>`` (k: the call's index
in its step) so conversion keeps the pairing.

Write-back: only records holding an edited thought are re-serialised, in their own layout;
everything else comes back byte for byte. A thought deleted in full is removed from ``parts``
(the API rejects empty text parts), unless it is the content's only part.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import orjson

from iclr_cli.errors import InputError
from iclr_cli.formats import media
from iclr_cli.formats.base import Document
from iclr_cli.formats.reading import Where, base_name, load_chunks
from iclr_cli.formats.sniff import STRUCTURE, Head, Match
from iclr_cli.formats.writeback import Path, Site, TextRef, WriteBackAdapter, get
from iclr_cli.trajectory import Part, PartKind, Step, Trajectory, WriteBack

_PARTS = re.compile(rb'"parts"\s*:\s*\[')
_GEMINI = re.compile(
    rb'"(?:contents|systemInstruction|system_instruction|thoughtSignature|thought_signature|functionCall|function_call'
    rb'|functionResponse|function_response|inlineData|inline_data)"\s*:|"role"\s*:\s*"model"'
)
_OPENAI_CONTENT = re.compile(rb'"content"\s*:')

# Part keys that modify a part rather than hold content of their own.
_MODIFIERS = {"thought", "thoughtSignature", "thought_signature", "videoMetadata", "video_metadata", "mediaResolution", "media_resolution", "partMetadata", "part_metadata"}
_MODEL_ROLES = ("model",)
_OTHER_ROLES = ("user", "function", "tool", "system")  # Gemini's user; function / tool in older logs; a system turn in some
_NOT_FOUND = "no Gemini conversation found (expected 'contents', a list of contents with 'parts', or request/response)"


def _key(value: dict, camel: str, snake: str):
    """``value[camel]``, or ``value[snake]`` (the Python SDK spelling) when absent."""
    return value[camel] if camel in value else value.get(snake)


def _json_text(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def _conversation(value: object) -> tuple[Path, dict | None, Path | None] | None:
    """``(path to the contents list, request object or None, path to the reply content or None)``
    for one JSON value, or None when it holds no Gemini conversation."""

    def is_contents(x) -> bool:  # the contents themselves are checked, with their field, when read
        return isinstance(x, list) and any(isinstance(c, dict) and isinstance(c.get("parts"), list) for c in x)

    if is_contents(value):
        return (), None, None
    if isinstance(value, dict):
        if is_contents(value.get("contents")):
            return ("contents",), value, None
        req, resp = value.get("request"), value.get("response")
        if isinstance(req, dict) and is_contents(req.get("contents")):
            reply = None
            candidates = resp.get("candidates") if isinstance(resp, dict) else None
            if isinstance(candidates, list) and candidates and isinstance(candidates[0], dict) and isinstance(candidates[0].get("content"), dict):
                reply = ("response", "candidates", 0, "content")
            return ("request", "contents"), req, reply
    return None


class _Reader:
    """Builds one trajectory from one record (see module docstring)."""

    def __init__(self, where: Where):
        self.where = where
        self.prompt: list[Part] = []
        self.steps: list[list[Part]] = []
        self.open_calls: list[tuple[str, str]] = []  # (name, call_id) of the latest step, unanswered

    def error(self, problem: str, path: Path) -> InputError:
        return self.where.error(problem, path)

    def system(self, value: object, path: Path) -> None:
        if isinstance(value, str):
            self.prompt.append(Part("prompt", value, label="system"))
            return
        parts = value.get("parts") if isinstance(value, dict) else None
        if not isinstance(parts, list):
            raise self.error("must be a string or a Content object with 'parts'", path)
        for i, part in enumerate(parts):
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                self.prompt.append(Part("prompt", part["text"], label="system"))
            else:
                raise self.error("system instruction parts must be text parts", (*path, "parts", i))

    def content(self, value: object, path: Path) -> None:
        if not isinstance(value, dict):
            raise self.error("content is not a JSON object", path)
        role = value.get("role", "user")
        if not isinstance(role, str):
            raise self.error("must be a string", (*path, "role"))
        parts = value.get("parts")
        if not isinstance(parts, list):
            raise self.error("content has no 'parts' list", (*path, "parts"))
        model_only = any(isinstance(p, dict) and (p.get("thought") is True or "functionCall" in p or "function_call" in p) for p in parts)
        if role not in (*_MODEL_ROLES, *_OTHER_ROLES) or (model_only and role not in _MODEL_ROLES):
            # a model turn under another role (or none: the API's default is user) would be read as input: said
            self.where.note((*path, "role"), f"role {value.get('role')!r} with {'model-only parts (thoughts, function calls)' if model_only else 'content'}: "
                                             "read as input, not as a model turn (Gemini's roles: user, model)")
        if role in _MODEL_ROLES:
            self.open_calls = []
            self.steps.append([])
            for i, part in enumerate(parts):
                self.steps[-1].extend(self.model_part(part, (*path, "parts", i)))
            return
        kind: PartKind = "observation" if self.steps else "prompt"
        target = self.steps[-1] if self.steps else self.prompt
        for i, part in enumerate(parts):
            target.extend(self.other_part(part, (*path, "parts", i), kind))

    def model_part(self, part: object, path: Path) -> list[Part]:
        if not isinstance(part, dict):
            raise self.error("part is not a JSON object", path)
        step = len(self.steps) - 1
        text = part.get("text")
        if text is not None and not isinstance(text, str):
            raise self.error("must be a string", (*path, "text"))
        signature = "thoughtSignature" if "thoughtSignature" in part else "thought_signature"
        signed = part.get(signature) not in (None, "")  # an empty signature is no signature
        thought = part.get("thought") is True and text is not None
        if signed:
            what = f"step {step}: {'thought' if thought else next((k for k in part if k not in _MODIFIERS), 'empty')} part"
            self.where.signatures.append(self.where.at((*path, signature), what))
        if thought:
            if signed:
                if text and text.strip():
                    self.where.sealed.append(self.where.at(path, "signed by Gemini (thoughtSignature; a signed part must not change)"))
                return [Part("reasoning", text, label="reasoning", ref=None, write_back=WriteBack.READ_ONLY)]
            rec_path = (self.where.rec, *path)
            ref = TextRef((Site((*rec_path, "text")),), remove_when_empty=rec_path)
            return [Part("reasoning", text, label="reasoning", ref=ref)]
        call = _key(part, "functionCall", "function_call")
        if isinstance(call, dict):
            name = call.get("name", "?")
            call_id = call.get("id") if isinstance(call.get("id"), str) else f"call_{step}_{len(self.open_calls)}"
            self.open_calls.append((str(name), call_id))
            return [Part("action", _json_text(call.get("args", {})), label=f"tool_call:{name}", call_id=call_id)]
        code = _key(part, "executableCode", "executable_code")
        if isinstance(code, dict):
            return [Part("action", str(code.get("code", "")), label="executable_code")]
        result = _key(part, "codeExecutionResult", "code_execution_result")
        if isinstance(result, dict):
            return [Part("observation", str(result.get("output", "")), label="code_execution_result")]
        found = media.gemini_media(part)
        if found is not None:
            return [Part("action", "", label="assistant", media=found)]
        if text is not None:
            return [Part("action", text, label="assistant")] if text.strip() else []
        unknown = sorted(k for k in part if k not in _MODIFIERS)
        if unknown:
            self.where.note((*path, unknown[0]), f"model part with {', '.join(unknown)}: not scored or pruned")
        return []

    def other_part(self, part: object, path: Path, kind: PartKind) -> list[Part]:
        if not isinstance(part, dict):
            raise self.error("part is not a JSON object", path)
        response = _key(part, "functionResponse", "function_response")
        if isinstance(response, dict):
            call_id = response.get("id") if isinstance(response.get("id"), str) else self.pair(str(response.get("name", "?")))
            out = [Part(kind, _json_text(response.get("response", {})), label="tool_result", call_id=call_id)]
            for nested in response.get("parts") or []:
                found = media.gemini_media(nested) if isinstance(nested, dict) else None
                if found is None:
                    raise self.error("function response parts must be inlineData or fileData", (*path, "functionResponse", "parts"))
                out.append(Part(kind, "", label="tool_result", call_id=call_id, media=found))
            return out
        if isinstance(part.get("text"), str):
            return [Part(kind, part["text"], label="user")]
        found = media.gemini_media(part)
        if found is not None:
            return [Part(kind, "", label="user", media=found)]
        body = {k: v for k, v in part.items() if k not in _MODIFIERS}
        label = next(iter(body), "part")
        return [Part(kind, _json_text(body.get(label, body)), label=label)]

    def pair(self, name: str) -> str | None:
        """The id of the first unanswered call of the latest step named ``name``."""
        for i, (call_name, call_id) in enumerate(self.open_calls):
            if call_name == name:
                del self.open_calls[i]
                return call_id
        return None


def _read(value: object, where: Where) -> list[Trajectory] | None:
    """The trajectory of one record (a whole file or one JSONL line), or None when the line
    holds no conversation.

    Raises:
        InputError: for a malformed conversation, or a whole JSON file that holds none.
    """
    found = _conversation(value)
    if found is None:
        if where.line is None:  # a whole JSON file: say what was expected, not that JSONL failed
            raise where.error(_NOT_FOUND)
        return None
    contents_path, request, reply = found
    reader = _Reader(where)
    if request is not None:
        prefix = contents_path[:-1]
        system = _key(request, "systemInstruction", "system_instruction")
        if system is not None:
            reader.system(system, (*prefix, "systemInstruction" if "systemInstruction" in request else "system_instruction"))
        tools = request.get("tools")
        if tools:
            reader.prompt.append(Part("prompt", orjson.dumps(tools).decode(), label="tools"))
    for i, content in enumerate(get(value, contents_path)):
        reader.content(content, (*contents_path, i))
    if reply is not None:
        reader.content(get(value, reply), reply)
    meta: dict[str, object] = {"format": "gemini"}
    model = request.get("model") if request is not None else None
    if isinstance(value, dict) and isinstance(value.get("response"), dict):
        model = model or value["response"].get("modelVersion")
    if isinstance(model, str):
        meta["model"] = model
    steps = tuple(Step(i, tuple(p)) for i, p in enumerate(reader.steps))
    return [Trajectory(f"{base_name(where.source)}#{where.first_index}", tuple(reader.prompt), steps, meta=meta)]


class GeminiAdapter(WriteBackAdapter):
    """Gemini ``contents`` conversations (see module docstring); write-back is the one engine's
    (:mod:`iclr_cli.formats.writeback`). ``--encrypted-reasoning`` does not apply: signed
    thoughts are read-only, and nothing else is encrypted."""

    name = "gemini"
    description = "Gemini native contents (generateContent requests, chat histories, request/response logs; JSON or JSONL)"

    def sniff(self, head: Head | bytes) -> Match | None:
        """A match for a JSON document or JSONL holding contents with ``"parts"`` lists (where
        this adapter reads them) and either Gemini-only keys (``contents``, ``thoughtSignature``, ``functionCall``, ``role: "model"``, ...;
        one point each) or no ``content`` key at all (OpenAI and Anthropic messages always
        have one)."""
        head = Head.of(head)
        raw = head.raw
        if raw.lstrip()[:1] not in (b"[", b"{") or not _PARTS.search(raw):
            return None
        if head.records and not any(_conversation(rec) is not None for rec in head.records):
            return None  # "parts" lists, but not where a Gemini conversation keeps them
        keys = {re.sub(r"\s*:\s*$", "", m.group(0).decode()) for m in _GEMINI.finditer(raw)}
        if keys:
            return Match(STRUCTURE + len(keys), f"contents with typed 'parts' and {', '.join(sorted(keys))}")
        if _OPENAI_CONTENT.search(raw) is None:
            return Match(STRUCTURE, "contents with typed 'parts' and no 'content' key")
        return None

    def load(self, data: bytes, source: str, *, skip_bad_lines: bool = False) -> Document:
        [doc] = self.load_chunks(data, source, skip_bad_lines=skip_bad_lines, chunk_size=None)
        return doc

    def load_chunks(self, data: bytes, source: str, *, skip_bad_lines: bool = False, chunk_size: int | None = 256) -> Iterator[Document]:
        """One Document for a JSON file; chunks of at most ``chunk_size`` lines for JSONL
        (see :func:`iclr_cli.formats.reading.load_chunks`).

        Raises:
            InputError: for an empty file, a JSON file or line holding no conversation (unless
            ``skip_bad_lines``), or a malformed one (naming line and field).
        """
        return load_chunks(data, source, self.name, _read, not_found=_NOT_FOUND, skip_bad_lines=skip_bad_lines, chunk_size=chunk_size)


ADAPTER = GeminiAdapter()
