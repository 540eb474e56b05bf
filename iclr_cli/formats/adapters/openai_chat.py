"""OpenAI chat-completions messages in files (``role``, ``content``, ``tool_calls``, ``role: "tool"``).

Shapes accepted (one trajectory per message list):
- a JSON list of messages, or an object with ``messages`` (and optionally ``tools``, the
  request's tool definitions; ``iclr replay`` saves its runs this way);
- JSONL with one such list or object per line;
- a list of benchmark results, each with a ``traj`` message list (tau-bench);
- API traffic logs, one ``{"request": {"messages": [...], "tools": [...]}, "response":
  {"choices": [...]}}`` per line: a trajectory is the request's messages plus the message its
  response returned. It records one model request, the logged one (``iclr savings``): its
  answer is the last step (the earlier assistant turns are history, sent by earlier requests)
  and its usage is the response's ``usage``.

Messages are read and written back by :mod:`iclr_cli.formats.openai_messages` (every
OpenAI-side reasoning shape, the ``tools`` part of P, unrecognised text), the same code
``replay`` and ``serve`` use, so a saved file scores exactly as it did online. Write-back goes
through the one engine (:mod:`iclr_cli.formats.writeback`): only edited records are
re-serialised (in the input's own layout), every other record comes back byte for byte.
"""

from __future__ import annotations

from dataclasses import replace

from iclr_cli.formats.openai_messages import read_at
from iclr_cli.formats.reading import Where, base_name, dig, field_name, load_chunks
from iclr_cli.formats.sniff import PLAIN, STRUCTURE, Head, Match, census, chat_lists, is_messages, openai_evidence
from iclr_cli.formats.usage import openai_usage
from iclr_cli.formats.writeback import WriteBackAdapter, get
from iclr_cli.trajectory import Request, Trajectory

Path = tuple  # keys from a record's root to one message
NOT_FOUND = "no message list found (expected a list of messages, 'messages', 'traj', or request/response)"


def _is_messages(x) -> bool:
    """A list of objects, one of them at least with a string ``role``: a message without one
    is then an error naming it (``[2].role``), not "no message list found"."""
    return isinstance(x, list) and bool(x) and all(isinstance(m, dict) for m in x) and any(isinstance(m.get("role"), str) for m in x)


def _message_lists(value) -> list[tuple[list[Path], Path | None]] | None:
    """``(message paths, tools path)`` of each message list inside one JSON value, or None
    when it holds none."""
    if _is_messages(value):
        return [([(i,) for i in range(len(value))], None)]
    if isinstance(value, dict):
        req, resp = value.get("request"), value.get("response")
        if isinstance(req, dict) and isinstance(req.get("messages"), list):
            paths = [("request", "messages", i) for i in range(len(req["messages"]))]
            choices = resp.get("choices") if isinstance(resp, dict) else None
            if isinstance(choices, list) and choices and isinstance(choices[0], dict) and isinstance(choices[0].get("message"), dict):
                paths.append(("response", "choices", 0, "message"))
            return [(paths, ("request", "tools") if "tools" in req else None)]
        for key in ("messages", "traj"):
            if isinstance(value.get(key), list):
                tools = ("tools",) if key == "messages" and "tools" in value else None
                return [([(key, i) for i in range(len(value[key]))], tools)]
    if isinstance(value, list) and value and all(isinstance(r, dict) and isinstance(r.get("traj"), list) for r in value):
        return [([(k, "traj", i) for i in range(len(r["traj"]))], None) for k, r in enumerate(value)]
    return None


def _model(value) -> str | None:
    if isinstance(value, dict):
        for holder in (value, value.get("request")):
            if isinstance(holder, dict) and isinstance(holder.get("model"), str):
                return holder["model"]
    return None


def _read(value, where: Where) -> list[Trajectory] | None:
    """The trajectories of one record (a reader for :func:`reading.load_chunks`)."""
    found = _message_lists(value)
    if found is None:
        return None
    meta = {"format": "openai"}
    if (model := _model(value)) is not None:
        meta["model"] = model
    out = []
    for paths, tools_path in found:
        tools = None
        if tools_path is not None:
            tools = get(value, tools_path)
            if tools is not None and not (isinstance(tools, list) and all(isinstance(t, dict) for t in tools)):
                raise where.error("must be a list of tool definitions (objects) or null", field_name(tools_path))
        tid = f"{base_name(where.source)}#{where.first_index + len(out)}"
        traj = read_at(
            [get(value, p) for p in paths], tools, tid, paths,
            source=where.source, line=where.line, meta=meta, refs=[(where.rec, *p) for p in paths],
        )
        where.unrecognised.extend(traj.unrecognised)
        where.sealed.extend(traj.sealed)
        where.signatures.extend(traj.signatures)
        if paths and paths[0][0] == "request":  # a logged exchange: the one request it records
            answered = paths[-1][0] == "response"
            usage = openai_usage(value["response"].get("usage"), "response.usage") if answered else None
            traj = replace(traj, requests=(Request(len(traj.steps) - answered, usage),))
        out.append(traj)
    return out


class OpenAIChatAdapter(WriteBackAdapter):
    """OpenAI chat messages in a JSON file or JSONL (see module docstring)."""

    name = "openai"
    description = "OpenAI chat messages (JSON list, {messages, tools}, JSONL, tau-bench traj, request/response logs)"
    # Dataset fields beside the conversation that no conversion carries
    # (formats/convert/carried.py): tau-bench's ``info`` (the task given to the simulated user).
    not_carried = frozenset({("info",)})

    def sniff(self, head: Head | bytes) -> Match | None:
        """A match for message lists where this adapter reads them, scored by what only
        OpenAI-compatible messages have (``tool_calls``, role ``tool``, reasoning fields,
        ``image_url`` parts, Mistral thinking chunks) against what they never have
        (Anthropic or Converse blocks, Gemini ``parts``); plain messages match at
        :data:`~iclr_cli.formats.sniff.PLAIN`."""
        head = Head.of(head)
        lists = chat_lists(head)
        for rec in head.objects:
            if is_messages(rec.get("traj")):
                lists.append(rec["traj"])
            if isinstance(reply := dig(rec, "response", "choices", 0, "message"), dict):
                lists.append([reply])
        if not lists:
            return None
        pro, con = openai_evidence(census(lists))
        if not pro and not con:
            return Match(PLAIN, "chat messages with 'role' and 'content'")
        if not pro or len(con) >= len(pro):
            return None
        return Match(STRUCTURE + len(pro) - len(con), "; ".join(pro))

    def load(self, data: bytes, source: str, *, skip_bad_lines: bool = False):
        return next(iter(self.load_chunks(data, source, skip_bad_lines=skip_bad_lines, chunk_size=None)))

    def load_chunks(self, data: bytes, source: str, *, skip_bad_lines: bool = False, chunk_size: int | None = 256):
        """Documents of at most ``chunk_size`` JSONL lines each (one for a JSON file, and one
        for the whole file when ``chunk_size`` is None), so a file of one trajectory per line
        is processed with flat memory (:func:`iclr_cli.formats.reading.load_chunks`)."""
        return load_chunks(data, source, self.name, _read, not_found=NOT_FOUND, skip_bad_lines=skip_bad_lines, chunk_size=chunk_size)


ADAPTER = OpenAIChatAdapter()
