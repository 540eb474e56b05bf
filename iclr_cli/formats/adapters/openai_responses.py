"""OpenAI Responses item lists and request/response logs in files (``openai-responses``).

Shapes accepted (one trajectory per record; a JSON document or JSONL with one record a line):

- an input item list: what ``to_input_list()`` of the OpenAI Agents SDK returns, and what the
  Vercel AI SDK and Continue send as ``input``: ``{"role", "content"}`` messages, ``reasoning``,
  ``function_call``, ``function_call_output`` ... items;
- a request log: an object with ``input`` (a list, or a string) and optionally
  ``instructions`` and ``tools`` (P);
- a response log: a ``response`` object (``"object": "response"``) with its ``output`` items;
- a request/response pair: ``{"request": {...input}, "response": {...output}}``: the request's
  items followed by the items the response returned.

Items are read by :mod:`iclr_cli.formats.responses_items` (the same reading as ``iclr serve``'s
``/v1/responses``): ``reasoning`` items' ``reasoning_text`` content and ``summary_text``
entries are reasoning (a summary holding the content's text is edited with it); an item with
``encrypted_content`` is opaque: ``--encrypted-reasoning drop`` (default) removes the whole item
when its text is edited, and with it the ``id`` of the other model items of the same model
turn (the API rejects an ``fc_`` item whose ``rs_`` item is missing; the ``call_id`` still
pairs each call with its output); ``keep`` leaves it as it was. A record that continues a
conversation with ``previous_response_id`` (or ``conversation``) holds only the new items: the
rest of its history is on the server, so it is not read, not pruned, and a warning says so.
Write-back goes through the one engine (:mod:`iclr_cli.formats.writeback`): unedited records
come back byte for byte.

Recorded usage (``iclr savings``): a request/response pair records one request, the logged one;
its answer is the response's model items and its usage the response's ``usage``
(``input_tokens`` includes ``input_tokens_details.cached_tokens``). A record whose history is on
the server records none: its prompt is not in the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from iclr_cli.formats.openai_messages import render_tools
from iclr_cli.formats.reading import Where, base_name, load_chunks, text_of
from iclr_cli.formats.responses_items import MODEL_ITEMS, OUTPUT_ITEMS, is_model_item, item_type, read_items
from iclr_cli.formats.sniff import STRUCTURE, Head, Match, describe
from iclr_cli.formats.usage import openai_usage
from iclr_cli.formats.writeback import WriteBackAdapter
from iclr_cli.trajectory import Part, Request, Trajectory

NOT_FOUND = "no Responses items found (expected an item list, a request with 'input', a response with 'output', or {request, response})"
_TYPED = MODEL_ITEMS | OUTPUT_ITEMS | {"item_reference"}
"""Item types only a Responses item list holds (elements with a ``type`` and no ``role``)."""
_PARTS = frozenset({"input_text", "output_text"})
"""Content-part types only Responses messages have (chat uses ``text``)."""


def _is_item_list(value: object) -> bool:
    """A list of objects that are Responses items, at least one of them typed as only a
    Responses item is (a plain ``{"role", "content"}`` list is chat messages)."""
    if not (isinstance(value, list) and value and all(isinstance(i, dict) for i in value)):
        return False
    kinds = [item_type(i) for i in value]
    if any(k is None for k in kinds):
        return False
    typed = any(k in _TYPED for k in kinds)
    parts = any(isinstance(p, dict) and p.get("type") in ("input_text", "output_text") for i in value if isinstance(i.get("content"), list) for p in i["content"])
    return typed or parts


def _locate(value: object) -> tuple[list[tuple], Mapping | None] | None:
    """``(item paths, the object holding instructions/tools/model)`` of one record, or None."""
    if _is_item_list(value):
        return [(i,) for i in range(len(value))], None  # type: ignore[arg-type]
    if not isinstance(value, dict):
        return None
    request, response = value.get("request"), value.get("response")
    if isinstance(request, dict) and isinstance(response, dict) and "input" in request and isinstance(response.get("output"), list):
        paths = [("request", "input", i) for i in range(len(request["input"]))] if isinstance(request["input"], list) else []
        return paths + [("response", "output", i) for i in range(len(response["output"]))], request
    if "input" in value and isinstance(value["input"], list) and (_is_item_list(value["input"]) or "instructions" in value or "model" in value):
        return [("input", i) for i in range(len(value["input"]))], value
    if value.get("object") == "response" and isinstance(value.get("output"), list):
        return [("output", i) for i in range(len(value["output"]))], value
    return None


def _get(value, path: tuple):
    for key in path:
        value = value[key]
    return value


def _field(path: tuple) -> str:
    return "".join(f"[{k}]" if isinstance(k, int) else (f".{k}" if i else str(k)) for i, k in enumerate(path))


def _prompt(holder: Mapping | None, where: Where, prefix: tuple) -> list[Part]:
    if holder is None:
        return []
    out = []
    if holder.get("instructions"):
        out.append(Part("prompt", text_of(holder["instructions"]), label="system"))
    tools = holder.get("tools")
    if tools is not None:
        if not (isinstance(tools, list) and all(isinstance(t, dict) for t in tools)):
            raise where.error("must be a list of tool definitions (objects) or null", _field((*prefix, "tools")))
        if tools:
            out.append(Part("prompt", render_tools(tools), label="tools"))
    return out


def _read(value: object, where: Where) -> list[Trajectory] | None:
    """The trajectory of one record (a reader for :func:`reading.load_chunks`)."""
    found = _locate(value)
    if found is None:
        return None
    paths, holder = found
    prefix = ("request",) if isinstance(value, dict) and holder is value.get("request") else ()
    meta: dict = {"format": "openai-responses"}
    if holder is not None and isinstance(holder.get("model"), str):
        meta["model"] = holder["model"]
    for key in ("previous_response_id", "conversation"):
        if holder is not None and holder.get(key):
            meta["server_history"] = f"{key} {holder[key]}" if isinstance(holder[key], str) else key
    items = [_get(value, p) for p in paths]
    if holder is not None and isinstance(holder.get("input"), str):  # a string input is one user message (P)
        first = [Part("prompt", holder["input"], label="user")]
    else:
        first = []
    read = read_items(
        items,
        traj_id=f"{base_name(where.source)}#{where.first_index}",
        where=[_field(p) for p in paths],
        refs=[(where.rec, *p) for p in paths],
        prompt=[*_prompt(holder, where, prefix), *first],
        encrypted="opaque",
        line=where.line,
        source=where.source,
        meta=meta,
    )
    where.unrecognised.extend(read.unrecognised)
    where.sealed.extend(read.sealed_at)
    traj = read.trajectory
    if prefix and "server_history" not in meta:  # a logged pair: the one request it records
        answered = any(p[0] == "response" and is_model_item(_get(value, p)) for p in paths)
        usage = openai_usage(value["response"].get("usage"), "response.usage")
        traj = replace(traj, requests=(Request(len(traj.steps) - answered, usage),))
    return [traj]


class OpenAIResponsesAdapter(WriteBackAdapter):
    """OpenAI Responses items and logs in a JSON file or JSONL (see module docstring)."""

    name = "openai-responses"
    description = "OpenAI Responses items: to_input_list(), request input, response output, request/response logs"

    def sniff(self, head: Head | bytes) -> Match | None:
        """A match for item lists (a record, a request's ``input``, a response's ``output``)
        holding item types or content parts only the Responses API has, one point per kind
        seen and per log shape (request, response)."""
        types: set[str] = set()
        parts: set[str] = set()
        shapes: list[str] = []
        for rec in Head.of(head).records:
            lists = [rec] if isinstance(rec, list) else []
            if isinstance(rec, dict):
                for holder, key, shape in ((rec, "input", "a request's 'input'"), (rec, "output", "a response's 'output'"), (rec.get("request"), "input", "request/response pairs"), (rec.get("response"), "output", "request/response pairs")):
                    if isinstance(holder, dict) and isinstance(holder.get(key), list) and (key == "input" or holder.get("object") == "response" or holder is rec.get("response")):
                        lists.append(holder[key])
                        if shape not in shapes:
                            shapes.append(shape)
            for item in (item for items in lists for item in items if isinstance(item, dict)):
                if "role" not in item and item_type(item) in _TYPED:
                    types.add(item["type"])
                content = item.get("content")
                if isinstance(content, list):
                    parts.update(p["type"] for p in content if isinstance(p, dict) and isinstance(p.get("type"), str) and p["type"] in _PARTS)
        if not types and not parts:
            return None
        seen = ([f"Responses items {describe(types)}"] if types else []) + ([f"content parts {describe(parts)}"] if parts else [])
        return Match(STRUCTURE + len(types) + len(parts) + len(shapes), "; ".join(seen + [f"in {s}" for s in shapes]))

    def load(self, data: bytes, source: str, *, skip_bad_lines: bool = False):
        return next(iter(self.load_chunks(data, source, skip_bad_lines=skip_bad_lines, chunk_size=None)))

    def load_chunks(self, data: bytes, source: str, *, skip_bad_lines: bool = False, chunk_size: int | None = 256):
        """Documents of at most ``chunk_size`` JSONL lines each (one for a JSON file); a
        record whose history is on the server adds a warning."""
        for doc in load_chunks(data, source, self.name, _read, not_found=NOT_FOUND, skip_bad_lines=skip_bad_lines, chunk_size=chunk_size):
            held = [t for t in doc.trajectories if t.meta.get("server_history")]
            if held:
                doc.warnings.append(
                    f"{source}: {len(held)} record{'s' if len(held) != 1 else ''} continue{'s' if len(held) == 1 else ''} a conversation held by the server "
                    f"({held[0].meta['server_history']}, in {held[0].id}): only the items in the file are read and pruned; the history on the server is not"
                )
            yield doc


ADAPTER = OpenAIResponsesAdapter()
