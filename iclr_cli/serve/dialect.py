"""The wire dialects ``iclr serve`` speaks, behind one small interface.

The conversation core (:class:`iclr_cli.serve.state.ServeState`: fingerprints, step keys, the
store, compress-once, stats) knows nothing of a dialect's JSON. A dialect turns one request
body into what the core needs and back, and reads what the upstream answered:

- :meth:`Dialect.parse`: the body as a :class:`Request`: its history **items** in order (chat
  or Anthropic messages, Responses input items) and its **context** (tools, a top-level
  ``system`` or ``instructions``: the parts of P that are not items), or ``None`` for a body
  that is not a request of this API (forwarded as sent).
- :meth:`Dialect.identity` / :meth:`Dialect.step_item`: an item reduced to what a client keeps
  when it sends it back (for the conversation id), and normalised for the step keys
  (:mod:`iclr_cli.serve.fingerprint`).
- :meth:`Dialect.read`: the request as a :class:`Transcript` (P and the steps, with where each
  step's model output ends).
- :meth:`Dialect.write`: the request body with the compressed reasoning of an edited
  trajectory written back in place (``None`` when nothing changed, so the client's own bytes
  go upstream).
- :meth:`Dialect.read_reply`: what the upstream returned (a whole body or the relayed SSE
  bytes) as a :class:`Reply`: the items the client will append to its history (the assistant
  step: its reasoning and actions) and the usage. :meth:`Dialect.continued` appends them to
  the request, so reading the continued request gives the reply's step as the last one.

``chat`` (:mod:`~iclr_cli.serve.chat`), ``messages`` (:mod:`~iclr_cli.serve.messages`) and
``responses`` (:mod:`~iclr_cli.serve.responses`) implement it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import orjson

from iclr_cli.formats.base import Unrecognised
from iclr_cli.replay.accounting import Usage
from iclr_cli.trajectory import Trajectory


@dataclass(frozen=True)
class Request:
    """One request body as the core sees it.

    Attributes:
        body: the parsed JSON body (never modified).
        items: the history items, in order (``messages`` or ``input``).
        context: a JSON value hashed in front of every fingerprint: the tool definitions and
            any top-level P (``system``, ``instructions``), as the dialect reduces them.
        held: why part of the history lives on the server and not in the request
            (``previous_response_id``...): such a request is forwarded as sent and counted.
    """

    body: Mapping
    items: Sequence[Mapping]
    context: object = None
    held: str | None = None


@dataclass(frozen=True)
class Transcript:
    """A request read as a trajectory.

    Attributes:
        trajectory: P and the steps; reasoning parts carry refs :meth:`Dialect.write` resolves.
        ends: per step, the index after the step's last model item: the step key covers
            ``items[:end]`` and a step with nothing after ``end`` is still in progress.
        unrecognised: per step, text read neither as reasoning nor as action.
        sealed: per step, one reason per reasoning block left sealed (never scored or
            edited: a signature or encrypted content the upstream verifies; redacted data).
        state: dialect-private (what :meth:`Dialect.write` needs).
    """

    trajectory: Trajectory
    ends: tuple[int, ...]
    unrecognised: tuple[tuple[Unrecognised, ...], ...] = ()
    sealed: tuple[tuple[str, ...], ...] = ()
    state: object = None

    def unrecognised_of(self, t: int) -> tuple[Unrecognised, ...]:
        return self.unrecognised[t] if t < len(self.unrecognised) else ()

    def sealed_of(self, t: int) -> tuple[str, ...]:
        return self.sealed[t] if t < len(self.sealed) else ()


@dataclass(frozen=True)
class Reply:
    """What the upstream answered, as the client keeps it.

    ``items``: the history items the client appends (one assistant message, or the Responses
    output items); empty when the answer could not be read. ``usage``: the upstream's token
    counts (``None`` when it reported none).
    """

    items: tuple[Mapping, ...] = ()
    usage: Usage | None = None


class Dialect:
    """Base of the wire dialects (see module docstring); subclasses override the readers.

    ``name`` labels the dialect in logs and ``/stats``; ``items_field`` names the body field
    that holds the items (warnings name ``messages[3].thoughts``).
    """

    name = "chat"
    items_field = "messages"

    def parse(self, body: Mapping) -> Request | None:
        raise NotImplementedError

    def identity(self, item: Mapping) -> object:
        """What of ``item`` a client keeps when it sends it back; ``None``: nothing (an item
        some clients drop, left out of the conversation id)."""
        raise NotImplementedError

    def step_item(self, item: Mapping) -> object:
        """``item`` as it enters the step keys: by default the item without ``None`` fields
        (some SDKs add them)."""
        return {k: v for k, v in item.items() if v is not None}

    def first_model_item(self, items: Sequence[Mapping]) -> int | None:
        """Index of the first item the model wrote (the conversation id covers items up to it)."""
        return next((i for i, m in enumerate(items) if m.get("role") == "assistant"), None)

    def read(self, request: Request, traj_id: str) -> Transcript:
        """Raises: IclrError, KeyError, TypeError, AttributeError, ValueError for a body
        whose items cannot be read (the request is then forwarded as sent)."""
        raise NotImplementedError

    def write(self, request: Request, transcript: Transcript, edited: Trajectory) -> dict | None:
        raise NotImplementedError

    def read_reply(self, content: bytes | None, streamed: bool) -> Reply:
        """The reply in ``content`` (the whole body, or the relayed SSE bytes when
        ``streamed``); an empty :class:`Reply` when it cannot be read."""
        raise NotImplementedError

    def read_partial(self, content: bytes) -> Reply:
        """The reply as far as it has streamed (``content``: the SSE bytes relayed so far), for
        scoring along the stream (:mod:`iclr_cli.serve.along`); by default :meth:`read_reply`,
        whose assembly of deltas reads a stream cut anywhere."""
        return self.read_reply(content, True)

    def error_body(self, status: int, message: str, kind: str, code: str | None = None) -> bytes:
        """An error the proxy answers itself (413, 502, 504) in this API's error shape
        (OpenAI's by default)."""
        return orjson.dumps({"error": {"message": message, "type": kind, "code": code}})

    def continued(self, request: Request, reply: Reply) -> Request:
        """The request as the client continues it: its items followed by the reply's."""
        return Request(request.body, [*request.items, *reply.items], request.context)

    def restore(self, request: Request, memory: Mapping[str, tuple[str, str]]) -> Request:
        """``--restore-reasoning``: the request with stored reasoning put back into turns
        that arrive without it (``memory``: tool-call id -> (field, text), as
        :meth:`remember` returned them), with ``body`` holding the restored items. Every
        dialect does it (chat: the reasoning fields and thought signatures; messages: the
        thinking blocks; responses: the reasoning items); ``request`` itself when nothing
        was missing."""
        return request

    def remember(self, reply: Reply) -> list[tuple[str, str, str]]:
        """``(tool-call id, field, text)`` of the reasoning a reply carried, for :meth:`restore`."""
        return []


def by_step(items: Sequence, spans: Sequence[tuple[int, int]], index_of) -> tuple[tuple, ...]:
    """``items`` grouped by the step whose item range (``spans``) holds ``index_of(item)``
    (``None``: in no step)."""
    out: list[list] = [[] for _ in spans]
    for item in items:
        at = index_of(item)
        if at is None:
            continue
        for t, (start, stop) in enumerate(spans):
            if start <= at < stop:
                out[t].append(item)
                break
    return tuple(tuple(x) for x in out)
