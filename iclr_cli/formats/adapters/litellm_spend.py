"""LiteLLM proxy spend logs: one row per model call, the request stored twice beside its reply.

Shapes accepted: JSONL with one ``LiteLLM_SpendLogs`` row per line, the JSON list that the
proxy's ``GET /spend/logs`` returns, and ``{"data": [rows]}`` (its paginated form). A row is
recognised by ``request_id`` with ``call_type``. With ``store_prompts_in_spend_logs`` on, a
row holds the chat request in ``messages``, again in ``proxy_server_request.messages`` (the
request body as the client sent it, with its ``tools``), and the model's reply in
``response.choices[0].message`` (litellm ``proxy/spend_tracking/spend_tracking_utils.py``).

Each row is one trajectory (id: its ``request_id``): the request's messages, read as OpenAI
chat messages by :mod:`iclr_cli.formats.openai_messages` (every reasoning shape there), plus
the reply as the last step. The request's second copy is the same conversation: its reasoning
parts are the same parts, with a site in each copy (:func:`~iclr_cli.formats.writeback.merge_refs`),
so an edit is written to both alike and the row is never half-edited; a row whose copies hold
different reasoning is refused (exit 2), naming the row and step. A row with no stored
conversation (prompts not stored, or not a chat call) holds no trajectory: it passes through
byte for byte and a warning counts such rows. A body stored as a JSON string (instead of an
object) is refused, naming the field: editing inside it would re-encode the whole string.

Recorded usage (``iclr savings``): a row is the one request it logged, answered by its last
step (the reply; the earlier assistant turns are history sent by earlier rows' requests), with
``response.usage`` as LiteLLM returned it (OpenAI's names: ``prompt_tokens`` includes the
cached part), else the row's own ``prompt_tokens`` / ``completion_tokens``; the cache read is
the usage's, else ``metadata.additional_usage_values.cache_read_input_tokens`` (where LiteLLM
keeps the provider's extra counts). The row's dates are ``startTime`` / ``endTime``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from iclr_cli.formats.base import Document
from iclr_cli.formats.openai_messages import MessageTrajectory, read_at
from iclr_cli.formats.reading import Where, dig, field_name, load_chunks
from iclr_cli.formats.sniff import MARKER, Head, Match
from iclr_cli.formats.usage import count, openai_usage
from iclr_cli.formats.writeback import Path, TextRef, WriteBackAdapter, merge_refs
from iclr_cli.trajectory import Request, Trajectory, Usage

_NOT_FOUND = "no LiteLLM spend-log row found (expected objects with 'request_id' and 'call_type', a list of them, or {'data': [...]})"
_REQUESTS: tuple[Path, ...] = (("messages",), ("proxy_server_request", "messages"))
_REPLY: Path = ("response", "choices", 0, "message")


def is_row(value: object) -> bool:
    """True for a spend-log row: an object with a string ``request_id`` and ``call_type``."""
    return isinstance(value, dict) and isinstance(value.get("request_id"), str) and isinstance(value.get("call_type"), str)


def _rows(value: object) -> list[tuple[Path, dict]] | None:
    if is_row(value):
        return [((), value)]
    rows = value.get("data") if isinstance(value, dict) else value
    prefix: Path = ("data",) if isinstance(value, dict) else ()
    if isinstance(rows, list) and rows and all(is_row(r) for r in rows):
        return [((*prefix, k), r) for k, r in enumerate(rows)]
    return None


def _is_list(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(m, dict) for m in value)


def _check_bodies(row: dict, at: Path, where: Where) -> None:
    for key in ("messages", "response", "proxy_server_request"):
        if isinstance(row.get(key), str) and row[key].strip()[:1] in ("{", "["):
            raise where.error(f"{key} holds the body as a JSON string; iclr reads spend logs whose bodies are stored as JSON objects", field_name((*at, key)))


def _read_row(row: dict, at: Path, where: Where) -> Trajectory | None:
    _check_bodies(row, at, where)
    requests = [p for p in _REQUESTS if _is_list(dig(row, *p))]
    reply = _REPLY if isinstance(dig(row, *_REPLY), dict) else None
    if not requests and reply is None:
        return None
    primary = requests[0] if requests else None
    meta: dict[str, object] = {"format": "litellm-spend"}
    if isinstance(row.get("model"), str):
        meta["model"] = row["model"]
    if isinstance(row.get("custom_llm_provider"), str):
        meta["provider"] = row["custom_llm_provider"]  # whose reasoning rule applies (iclr savings)
    tools = dig(row, "proxy_server_request", "tools")
    tools = tools if isinstance(tools, list) and all(isinstance(t, dict) for t in tools) else None
    paths = [(*primary, i) for i in range(len(dig(row, *primary)))] if primary else []
    paths += [reply] if reply else []
    traj = _read_list(row, at, paths, tools, row["request_id"], where, meta)
    for copy in requests[1:]:
        other = _read_list(row, at, [(*copy, i) for i in range(len(dig(row, *copy)))], tools, row["request_id"], Where(where.source, where.rec, where.line), meta)
        traj = _merge(traj, other, where, (*at, *copy))
    where.unrecognised.extend(traj.unrecognised)
    where.sealed.extend(traj.sealed)
    where.signatures.extend(traj.signatures)
    return replace(traj, requests=(Request(len(traj.steps) - (reply is not None), _row_usage(row)),))


def _row_usage(row: dict) -> Usage | None:
    """The usage a row recorded (see the module docstring), or ``None``."""
    usage = openai_usage(dig(row, "response", "usage"), "response.usage") or openai_usage(row, "prompt_tokens")
    extra = dig(row, "metadata", "additional_usage_values")
    if usage is not None and usage.cache_read_tokens is None and isinstance(extra, dict):
        read = count(extra.get("cache_read_input_tokens"))
        write = usage.cache_write_tokens if usage.cache_write_tokens is not None else count(extra.get("cache_creation_input_tokens"))
        usage = replace(usage, cache_read_tokens=read, cache_write_tokens=write)
    return usage


def _read_list(row: dict, at: Path, paths: list[Path], tools, traj_id: str, where: Where, meta: dict) -> MessageTrajectory:
    return read_at(
        [dig(row, *p) for p in paths], tools, traj_id, [(*at, *p) for p in paths],
        source=where.source, line=where.line, meta=meta, refs=[(where.rec, *at, *p) for p in paths],
    )


def _merge(traj: MessageTrajectory, copy: MessageTrajectory, where: Where, field: Path) -> MessageTrajectory:
    """``traj`` with the reasoning parts of ``copy`` (the request's other copy: the same
    steps, maybe without the reply) as extra sites of its own.

    Raises:
        InputError: when the copy's reasoning differs from ``traj``'s (naming the step).
    """
    steps = list(traj.steps)
    for k, step in enumerate(copy.steps):
        mine = steps[k].reasoning if k < len(steps) else ()
        theirs = step.reasoning
        if [(p.text, p.write_back) for p in mine] != [(p.text, p.write_back) for p in theirs]:
            raise where.error(f"this copy of the request differs from the first in the reasoning of step {k}: the copies cannot be edited alike", field_name(field))
        if not theirs:
            continue
        others = iter(theirs)
        parts = []
        for part in steps[k].parts:
            if part.is_scorable_reasoning:
                other = next(others)
                if isinstance(part.ref, TextRef) and isinstance(other.ref, TextRef):
                    part = replace(part, ref=merge_refs(part.ref, other.ref))
            parts.append(part)
        steps[k] = replace(steps[k], parts=tuple(parts))
    return replace(traj, steps=tuple(steps))


class _Counter:
    """A record reader that also counts the rows holding no conversation."""

    def __init__(self) -> None:
        self.empty = 0

    def __call__(self, value: object, where: Where) -> list[Trajectory] | None:
        rows = _rows(value)
        if rows is None:
            if where.line is None:
                raise where.error(_NOT_FOUND)
            return None
        out = []
        for at, row in rows:
            traj = _read_row(row, at, Where(where.source, where.rec, where.line, where.first_index + len(out), where.unrecognised, where.sealed, where.signatures))
            if traj is None:
                self.empty += 1
            else:
                out.append(traj)
        return out


class LiteLLMSpendAdapter(WriteBackAdapter):
    """LiteLLM spend-log rows (see module docstring); write-back is the one engine's."""

    name = "litellm-spend"
    description = "LiteLLM proxy spend logs (JSONL rows or the GET /spend/logs list)"

    def sniff(self, head: Head | bytes) -> Match | None:
        """A match for records that are spend-log rows (``request_id`` with ``call_type``)."""
        rows = [r for r in Head.of(head).objects if is_row(r)]
        rows += [r for rec in Head.of(head).objects if isinstance(rec.get("data"), list) for r in rec["data"] if is_row(r)]
        if not rows:
            return None
        stored = any(isinstance(r.get("messages"), list) or isinstance(dig(r, *_REPLY), dict) for r in rows)
        return Match(MARKER, "LiteLLM spend-log rows (request_id, call_type" + (", messages, response)" if stored else ")"))

    def load(self, data: bytes, source: str, *, skip_bad_lines: bool = False) -> Document:
        [doc] = self.load_chunks(data, source, skip_bad_lines=skip_bad_lines, chunk_size=None)
        return doc

    def load_chunks(self, data: bytes, source: str, *, skip_bad_lines: bool = False, chunk_size: int | None = 256) -> Iterator[Document]:
        """One Document for a JSON file; chunks of at most ``chunk_size`` rows for JSONL
        (:func:`iclr_cli.formats.reading.load_chunks`). Each document warns how many of its
        rows hold no stored conversation.

        Raises:
            InputError: for an empty file, a line that is not a row (unless
            ``skip_bad_lines``), a body stored as a JSON string, or copies of a request that
            differ in their reasoning.
        """
        read = _Counter()
        for doc in load_chunks(data, source, self.name, read, not_found=_NOT_FOUND, skip_bad_lines=skip_bad_lines, chunk_size=chunk_size):
            if read.empty:
                doc.warnings.append(f"{source}: {read.empty} spend-log row{'s hold' if read.empty != 1 else ' holds'} no stored conversation (store_prompts_in_spend_logs off, or not a chat call): passed through unscored")
                read.empty = 0
            yield doc


ADAPTER = LiteLLMSpendAdapter()
