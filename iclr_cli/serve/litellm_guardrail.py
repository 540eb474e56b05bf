"""``iclr serve``'s online write-back inside the LiteLLM proxy, as a guardrail (docs/litellm.md).

Enabled in LiteLLM's ``config.yaml``::

    guardrails:
      - guardrail_name: iclr
        litellm_params:
          guardrail: iclr_cli.serve.litellm_guardrail.IclrGuardrail
          mode: [pre_call, post_call]
          default_on: true        # clients (Claude Code, Codex) send no `guardrails` field
          upstream_kind: anthropic
          state: redis            # LiteLLM's own Redis (REDIS_HOST...), shared by every worker and pod

Every other key under ``litellm_params`` that names an ``iclr serve`` option
(:class:`~iclr_cli.serve.server.ServeOptions`: ``variant``, ``ratio``, ``max_wait``, ``late``,
``upstream_kind``, ``sealed``, ``restore_reasoning``, ``state``, ``proxy_model``...) sets
it; LiteLLM passes the keys of ``litellm_params`` to the class as keyword arguments
(``litellm/proxy/guardrails/guardrail_registry.py``, ``initialize_custom_guardrail``), its own
defaults among them, which are left to :class:`CustomGuardrail`. The options that belong to
serve's HTTP side (``upstream``, ``api_key``, timeouts, keep-alives, body limit) are
LiteLLM's business here and are refused.

The class is a front end of the same engine as ``iclr serve``
(:func:`~iclr_cli.serve.server.build_engine`, :mod:`iclr_cli.serve.exchange`): the three
LiteLLM routes that carry agent conversations map to serve's dialects (call types from
``litellm/types/utils.py`` ``CallTypes``):

- ``/v1/chat/completions`` (``completion`` / ``acompletion``): chat completions;
- ``/v1/messages`` (``anthropic_messages``): Anthropic Messages;
- ``/v1/responses`` (``responses`` / ``aresponses``): OpenAI Responses.

Hooks (``litellm/integrations/custom_logger.py``):

- ``async_pre_call_hook`` gets the request as LiteLLM parsed it, the client's body fields
  beside LiteLLM's own keys (``litellm_metadata``, ``proxy_server_request``...). The client's
  fields (those of ``proxy_server_request.body``) are the body the engine rewrites
  (:meth:`~iclr_cli.serve.state.ServeState.rewrite`, in a worker thread: scoring never blocks
  LiteLLM's event loop); the fields it changed are put back into the request, nothing else is
  touched (LiteLLM's retries, fallbacks, spend logs and ``cache_control`` handling run on the
  rewritten request as on any other).
- ``async_post_call_streaming_iterator_hook`` sees a streamed reply: raw SSE bytes on
  ``/v1/messages`` whose chunk boundaries do not follow events, LiteLLM's chunk objects on the
  other routes (written back as SSE events). Every chunk is passed on as it comes, and the
  bytes so far feed the scorer along the stream (:class:`~iclr_cli.serve.along.Feeder`); at
  the end the reply is recorded and its step scored ahead, as serve does.
- ``async_post_call_success_hook`` records a whole (non-streamed) reply.

With ``serve_url`` the guardrail builds no engine: the hooks go to one ``iclr serve`` that
every worker shares (:mod:`iclr_cli.serve.hooks_http`, docs/fleet.md), one proxy model per
machine instead of one per worker.

A failure of the write-back never fails the request: it is logged and the request goes on as
the client sent it (serve does the same).
"""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import logging
from concurrent.futures import ThreadPoolExecutor

import orjson
from litellm.integrations.custom_guardrail import CustomGuardrail

from iclr_cli.errors import UsageError
from iclr_cli.serve.hooks import Hooks
from iclr_cli.serve.fingerprint import HEADER
from iclr_cli.serve.server import ServeOptions, build_engine
from iclr_cli.serve.state_url import litellm_state

log = logging.getLogger("iclr.serve")
# The counters serve shows on /stats, one line per request that decided steps: LiteLLM has no
# route of a guardrail's own, so its log is where an operator reads them.
counters_log = logging.getLogger("iclr.litellm")

# LiteLLM call type -> serve's route (the dialect's key in Engine.dialects).
ROUTES = {
    "completion": "chat/completions",
    "acompletion": "chat/completions",
    "anthropic_messages": "messages",
    "responses": "responses",
    "aresponses": "responses",
}
# serve options that belong to its HTTP side: LiteLLM does that job here.
HTTP_SIDE = frozenset({"upstream", "api_key", "max_body_bytes", "request_timeout", "keepalive_s"})
OPTIONS = frozenset(f.name for f in dataclasses.fields(ServeOptions)) - HTTP_SIDE
# Stands for serve's upstream URL, which the engine reads only to guess the upstream kind:
# LiteLLM routes each request to a deployment of its own, so the kind is an option here.
NO_UPSTREAM = "litellm://"
# Keys LiteLLM adds to a request's data (never the client's history).
LITELLM_PREFIXES = ("litellm_", "proxy_server_", "user_api_key", "_")
LITELLM_KEYS = frozenset({"metadata", "secret_fields", "provider_specific_header", "standard_logging_object"})
# The guardrail's own keys for an engine shared by every worker (remote_from).
REMOTE_OPTIONS = frozenset({"serve_url", "serve_key", "serve_timeout"})


def options_from(params: dict) -> ServeOptions:
    """The :class:`ServeOptions` set by ``params`` (the guardrail's ``litellm_params``; keys
    spelled with ``_`` or ``-``); keys that are no serve option are ignored (LiteLLM passes its
    own). ``upstream_kind`` defaults to ``unknown`` (signed and encrypted reasoning sealed).

    Raises:
        UsageError: for a serve option of the HTTP side, which LiteLLM's config sets instead.
    """
    chosen = {}
    for key, value in params.items():
        name = key.replace("-", "_")
        if name in HTTP_SIDE:
            raise UsageError(f"iclr guardrail: '{key}' is not an option here: LiteLLM's model_list says where requests go and with which key")
        if name in OPTIONS:
            chosen[name] = float(value) if name == "max_wait" and isinstance(value, str) else value
    if isinstance(chosen.get("state"), str):
        chosen["state"] = litellm_state(chosen["state"])
    chosen.setdefault("upstream_kind", "unknown")
    return ServeOptions(upstream=NO_UPSTREAM, **chosen)


def remote_from(params: dict):
    """A :class:`~iclr_cli.serve.hooks_http.RemoteHooks` when ``params`` names ``serve_url``
    (the ``iclr serve`` every worker of the machine, or of the fleet, shares: docs/fleet.md),
    else ``None``. ``serve_key`` (one of that serve's client keys; ``os.environ/NAME`` reads
    the variable) and ``serve_timeout`` (seconds a request may wait on it, 5 by default;
    ``.inf``: no limit) go with it.

    Raises:
        UsageError: for a scoring option beside ``serve_url`` (the shared serve's own flags
            decide them), a key variable that is not set, or a bad timeout.
    """
    import os

    chosen = {key.replace("-", "_"): value for key, value in params.items()}
    if not chosen.get("serve_url"):
        stray = sorted(REMOTE_OPTIONS & chosen.keys())
        if stray:
            raise UsageError(f"iclr guardrail: {', '.join(stray)} without serve_url")
        return None
    named = sorted((OPTIONS | HTTP_SIDE) & chosen.keys())
    if named:
        raise UsageError(f"iclr guardrail: {', '.join(named)} beside serve_url: the iclr serve at {chosen['serve_url']} decides them (its own flags)")
    key = chosen.get("serve_key")
    if isinstance(key, str) and key.startswith("os.environ/"):
        name = key[len("os.environ/"):]
        if not os.environ.get(name):
            raise UsageError(f"iclr guardrail: serve_key reads {name}, which is not set")
        key = os.environ[name]
    try:
        timeout = float(chosen.get("serve_timeout", 5.0))
    except (TypeError, ValueError):
        timeout = -1.0
    if not timeout > 0:
        raise UsageError(f"iclr guardrail: serve_timeout {chosen.get('serve_timeout')!r}: seconds, more than 0 (.inf: no limit)")
    from iclr_cli.serve.hooks_http import RemoteHooks

    return RemoteHooks(str(chosen["serve_url"]), key, timeout)


def _client_body(data: dict) -> dict:
    """The request fields of LiteLLM's ``data`` without LiteLLM's own keys (its metadata, the
    logging object, the snapshot of the request: ``litellm/proxy/litellm_pre_call_utils.py``
    ``add_litellm_data_to_request``). The dialects read the history fields only (``messages``,
    ``system``, ``tools``, ``input``, ``instructions``...); what is left out here is never
    rewritten and stays in ``data`` as it is."""
    return {k: v for k, v in data.items() if not k.startswith(LITELLM_PREFIXES) and k not in LITELLM_KEYS}


def _header(data: dict) -> str | None:
    headers = (data.get("proxy_server_request") or {}).get("headers") or {}
    return next((v for k, v in headers.items() if k.lower() == HEADER), None)


def sse_bytes(chunk, route: str) -> bytes:
    """One streamed chunk as the SSE bytes the upstream sent for it: bytes as they are (the
    ``/v1/messages`` pass-through), a LiteLLM chunk object as a ``data:`` event (chat) or a
    named event (Responses: ``event: TYPE``)."""
    if isinstance(chunk, (bytes, bytearray)):
        return bytes(chunk)
    if isinstance(chunk, str):
        return chunk.encode()
    dump = getattr(chunk, "model_dump_json", None)
    data = dump(exclude_none=True).encode() if dump is not None else orjson.dumps(chunk)
    if route == "responses":
        kind = getattr(chunk, "type", None) or (chunk.get("type") if isinstance(chunk, dict) else None)
        kind = getattr(kind, "value", kind)
        return f"event: {kind}\n".encode() + b"data: " + data + b"\n\n"
    return b"data: " + data + b"\n\n"


def body_bytes(response) -> bytes:
    """A whole reply (LiteLLM's response object, or the dict of ``/v1/messages``) as JSON."""
    dump = getattr(response, "model_dump_json", None)
    return dump(exclude_none=True).encode() if dump is not None else orjson.dumps(response)


class IclrGuardrail(CustomGuardrail):
    """The LiteLLM guardrail (module docstring).

    Args:
        **params: LiteLLM's guardrail arguments (``guardrail_name``, ``event_hook``,
            ``default_on``...) and either the ``iclr serve`` options (:func:`options_from`:
            the engine runs in this worker) or ``serve_url`` (the engine of an ``iclr serve``
            that every worker shares, :func:`remote_from`).
        engine: an :class:`~iclr_cli.serve.server.Engine` to use instead of building one
            (tests).

    Raises:
        UsageError: for a bad option (:func:`options_from`, :func:`remote_from`,
            :func:`build_engine`).
        IclrError: when the proxy model cannot be loaded.
    """

    def __init__(self, engine=None, **params):
        remote = remote_from(params)
        options = options_from(params) if remote is None else None
        own = {k: v for k, v in params.items() if k.replace("-", "_") not in OPTIONS | REMOTE_OPTIONS}
        super().__init__(**own)
        self.options = options
        self._pool = ThreadPoolExecutor(max_workers=64, thread_name_prefix="iclr-litellm")
        if remote is not None:
            self.engine = self.state = None
            self.hooks = remote
        else:
            self.engine = engine or build_engine(options)
            self.state = self.engine.state
            self.hooks = Hooks(self.state, self.engine.dialects, self._in_thread, options.max_body_bytes)
        self._tasks: set[asyncio.Task] = set()
        if counters_log.level == logging.NOTSET:  # Python's default (WARNING) would hide them
            counters_log.setLevel(logging.INFO)
        if not counters_log.hasHandlers():
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
            counters_log.addHandler(handler)
        atexit.register(self.close)

    def close(self) -> None:
        """Stop the scorer and close the store (at exit)."""
        if self._pool is None:
            return
        if self.state is not None:
            self.state.stop()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = None
        if self.engine is not None:
            self.engine.shutdown()

    async def _in_thread(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def _hold(self, coro) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)  # held: the event loop keeps only weak references
        task.add_done_callback(self._tasks.discard)
        return task

    # -- the request ----------------------------------------------------------------------

    async def async_pre_call_hook(self, user_api_key_dict, cache, data: dict, call_type):
        """Rewrite ``data``'s history as ``iclr serve`` would (module docstring); returns it."""
        route = ROUTES.get(getattr(call_type, "value", call_type))
        if route is None or self._pool is None:
            return data
        body = _client_body(data)
        decided = self.state.stats.total.steps_completed if self.state is not None else 0
        try:
            edited = await self.hooks.before(data.get("litellm_call_id"), route, body, _header(data))
        except Exception as exc:  # scoring stopped, the shared serve is down, or a bug: as sent
            if self.state is not None:  # RemoteHooks says why itself, once a minute
                log.warning("request forwarded unchanged: the write-back failed (%s: %s)", type(exc).__name__, exc)
            return data
        if self.state is not None:
            self._log_counters(decided)
        if edited is not None:
            for key in body.keys() - edited.keys():
                data.pop(key, None)
            for key, value in edited.items():
                if body.get(key) != value:
                    data[key] = value
        return data

    def _log_counters(self, decided: int) -> None:
        """One INFO line on the ``iclr.litellm`` logger with the totals of serve's ``/stats``
        (:meth:`~iclr_cli.serve.stats.Counts.to_record`, as JSON) when this request decided
        steps (``decided``: the completed steps before it). With ``serve_url`` the shared
        serve's ``/stats`` has them instead."""
        total = self.state.stats.total
        if total.steps_completed != decided:
            with self.state.stats.lock:
                record = total.to_record()
            counters_log.info("%d step(s) decided; totals %s", total.steps_completed - decided, orjson.dumps(record).decode())

    # -- the reply --------------------------------------------------------------------------

    @staticmethod
    def _call_id(request_data: dict) -> str:
        return (request_data or {}).get("litellm_call_id") or ""

    async def async_post_call_success_hook(self, data: dict, user_api_key_dict, response):
        """Record a whole reply and score its step ahead."""
        call_id = self._call_id(data)
        if self.hooks.route_of(call_id) is not None:
            try:
                content = body_bytes(response)
            except Exception:
                content = None
            await self.hooks.reply(call_id, content, False, "ok")
        return response

    async def async_post_call_failure_hook(self, request_data: dict, original_exception, user_api_key_dict, traceback_str=None):
        """The upstream failed: a first request's provisional scorer state goes."""
        call_id = self._call_id(request_data)
        if self.hooks.route_of(call_id) is not None:
            await self.hooks.reply(call_id, None, False, "upstream_error")

    async def async_post_call_streaming_iterator_hook(self, user_api_key_dict, response, request_data: dict):
        """Pass every chunk on as it comes; feed its bytes to the scorer; at the end, record
        the reply and score its step ahead."""
        call_id = self._call_id(request_data)
        route = self.hooks.route_of(call_id)
        if route is None:
            async for chunk in response:
                yield chunk
            return
        outcome = "upstream_dropped"
        try:
            async for chunk in response:
                yield chunk
                try:
                    piece = sse_bytes(chunk, route)
                except Exception:  # a chunk of a shape not known here: the reply is not read
                    piece = None
                self.hooks.feed(call_id, piece)
            outcome = "ok"
        finally:
            task = self._hold(self.hooks.reply(call_id, None, True, outcome))
            if outcome == "ok":
                # Codex hangs up at `response.completed`, and the server then cancels this
                # request's task while it records the reply: shielded, the record completes
                # all the same (awaited otherwise, so the next request finds it).
                await asyncio.shield(task)
