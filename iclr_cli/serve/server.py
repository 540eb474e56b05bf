"""Putting the proxy together (engines, state, store, app) and running it on uvicorn.

:func:`build` is what ``iclr serve`` runs; tests and ``benchmarks/bench_serve.py`` use it too,
with :func:`running` to serve the app on a free loopback port from a background thread.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from iclr_cli.errors import IclrError, UsageError
from iclr_cli.policies import DEFAULT_RATIO, parse_variant
from iclr_cli.serve.auth import ClientKeys
from iclr_cli.serve.budget import DEFAULT_LATE, DEFAULT_MAX_WAIT, LATE_POLICIES, Budget
from iclr_cli.serve.store import DEFAULT_TTL_S


@dataclass(frozen=True)
class ServeOptions:
    """Everything ``iclr serve`` is configured with (CLI options of the same names).

    ``api_key`` is the value of ``--api-key-env`` (never shown: ``repr`` leaves it out).
    ``client_keys``: the keys clients must present (``--client-key-env``,
    ``--client-keys-file``; :mod:`iclr_cli.serve.auth`), never forwarded upstream; ``None``:
    no check, and the client's key goes upstream unless ``api_key`` replaces it.
    ``batch_wait_ms`` is how long the scorer thread waits for more steps once one is queued.
    ``keepalive_s``: seconds of silence on a relayed stream before the client gets its API's
    keep-alive (:mod:`iclr_cli.serve.keepalive`); 0 turns them off.
    ``prefix_cache``: keep each live conversation's scorer state (keys and values) between
    requests, within ``cache_tokens`` over all conversations (``None``: from free memory),
    and share the state after P across conversations (:mod:`iclr_cli.scoring.prefix`).
    ``eager_scoring``: score a reply's step once it was relayed, while the agent runs its tool
    (:mod:`iclr_cli.serve.eager`).
    ``context``: what the proxy model sees of a conversation over ``max_tokens`` (``auto``:
    ``sliding`` in serve, where no conversation's future is known; ``fresh`` bounds every
    step's forward pass by ``max_tokens``, P included: docs/serve.md, "The first step of a conversation reads all of P").
    ``upstream_kind`` names a row of :data:`iclr_cli.providers.KINDS` (``None``: guessed from
    the upstream URL); ``sealed`` is ``keep`` or ``drop-previous-turns`` (what that row's
    provider documents as legal to leave out).
    ``max_wait``: seconds a request may wait for scores (``None``: no limit) and ``late``: what
    happens to a step whose scores were not ready by then (:mod:`iclr_cli.serve.budget`).
    ``state``: where conversation state is kept and shared by every process serving the same
    conversations (:func:`~iclr_cli.serve.state_url.open_store`: ``redis://``, ``postgresql://``,
    or a folder, as ``state_dir`` is); conversations unused for ``state_ttl_s`` seconds expire.
    ``exact``, ``max_tokens`` and ``elide`` choose what the proxy sees (the fast default or
    ``--exact``; ``None``: the profile's: :func:`iclr_cli.scoring.profile.choose`).
    """

    upstream: str
    variant: str = "iclr"
    ratio: float = DEFAULT_RATIO
    seed: int = 0
    split: str = "paragraph"
    proxy_model: str = "smollm2"
    max_tokens: int | None = None
    exact: bool = False
    elide: int | None = None
    overflow: str = "window"
    context: str = "auto"
    dtype: str = "auto"
    device: str | None = None
    batch_size: int = 8
    api_key: str | None = field(default=None, repr=False)
    client_keys: ClientKeys | None = field(default=None, repr=False)
    state_dir: str | None = None
    state: str | None = None
    state_ttl_s: float = DEFAULT_TTL_S
    max_conversations: int = 1000
    restore_reasoning: bool = False
    max_body_bytes: int = 32 * 1024 * 1024
    request_timeout: float = 600.0
    keepalive_s: float = 15.0
    batch_wait_ms: float = 2.0
    prefix_cache: bool = True
    cache_tokens: int | None = None
    eager_scoring: bool = True
    upstream_kind: str | None = None
    sealed: str = "keep"
    max_wait: float | None = DEFAULT_MAX_WAIT
    late: str = DEFAULT_LATE


SEALED_CHOICES = ("keep", "drop-previous-turns")


def upstream_kind(options: ServeOptions):
    """(:class:`~iclr_cli.providers.UpstreamKind`, why) for ``options``: the named kind, or
    the one guessed from the upstream URL.

    Raises:
        UsageError: for an unknown kind, an unknown ``sealed`` value, or
        ``drop-previous-turns`` with a kind whose provider documents no such drop.
    """
    from iclr_cli import providers

    if options.upstream_kind is None:
        kind, why = providers.guess(options.upstream)
    else:
        try:
            kind, why = providers.get(options.upstream_kind), "--upstream-kind"
        except KeyError:
            raise UsageError(f"--upstream-kind {options.upstream_kind!r}: choose one of {', '.join(providers.names())}") from None
    if options.sealed not in SEALED_CHOICES:
        raise UsageError(f"--sealed {options.sealed!r}: choose one of {', '.join(SEALED_CHOICES)}")
    if options.sealed != "keep" and kind.legal_drop is None:
        raise UsageError(f"--sealed {options.sealed}: the upstream kind {kind.name} documents nothing that may be left out (only anthropic and openai do)")
    return kind, why


def _settings_record(options: ServeOptions, config, scorer_name: str, kind: str) -> dict:
    """What decides the bytes of a compressed step (stored with ``--state-dir``; ``config``
    is the :class:`~iclr_cli.pipeline.ScorerConfig` built from ``options``)."""
    return {
        "upstream_kind": kind,
        "variant": options.variant,
        "ratio": options.ratio,
        "seed": options.seed,
        "split": options.split,
        "proxy_model": scorer_name,
        "max_tokens": config.max_tokens,
        "overflow": options.overflow,
        "dtype": config.precision if parse_variant(options.variant).needs_scores else options.dtype,
        "profile": config.profile,
        "elide": config.elide,
        # only when set: state folders written before --context existed stay valid (auto was sliding)
        **({"context": options.context} if options.context != "auto" else {}),
    }


@dataclass(frozen=True)
class Engine:
    """The write-back engine both front ends run: ``iclr serve``'s HTTP app (:func:`build`)
    and the LiteLLM proxy guardrail (:mod:`iclr_cli.serve.litellm_guardrail`).

    Attributes:
        state: the conversations, the scorer, the store and the stats.
        dialects: upstream path (``chat/completions``, ``messages``, ``responses``) -> the
            dialect of that route, built for the upstream kind's rules.
        describe: settings as ``/stats`` shows them.
        shutdown: stops the batching scorer and closes the store (call once, at exit).
    """

    state: object
    dialects: dict
    describe: tuple[tuple[str, object], ...]
    shutdown: Callable[[], None]


def build(options: ServeOptions, *, scorer=None, tokenizer=None, transport=None):
    """The ASGI app and its :class:`~iclr_cli.serve.state.ServeState`.

    ``scorer``/``tokenizer`` replace the ones ``--proxy-model`` would load (tests);
    ``transport`` is an httpx transport for the upstream (tests).

    Raises:
        UsageError: for a bad variant or option, or a ``--state-dir`` written with other settings.
        IclrError: when the proxy model cannot be loaded.
    """
    from iclr_cli.serve.app import AppConfig, create_app
    from iclr_cli.serve.upstream import UpstreamConfig

    if not options.upstream.startswith(("http://", "https://")):
        raise UsageError(f"--upstream must be an http:// or https:// URL, not {options.upstream!r}")
    engine = build_engine(options, scorer=scorer, tokenizer=tokenizer)
    app_config = AppConfig(
        UpstreamConfig(options.upstream, options.api_key, options.request_timeout, forward_client_key=options.client_keys is None),
        max_body_bytes=options.max_body_bytes,
        client_keys=options.client_keys,
        keepalive_s=options.keepalive_s,
        describe=engine.describe,
        shutdown_grace_s=SHUTDOWN_GRACE_S,
    )
    return create_app(app_config, engine.state, dialects=engine.dialects, transport=transport, on_shutdown=engine.shutdown), engine.state


def build_engine(options: ServeOptions, *, scorer=None, tokenizer=None) -> Engine:
    """The :class:`Engine` for ``options`` (everything but the HTTP side: ``upstream`` is read
    only to guess the upstream kind when ``upstream_kind`` is not set).

    Raises:
        UsageError: for a bad variant or option, or a ``state_dir`` written with other settings.
        IclrError: when the proxy model cannot be loaded.
    """
    from iclr_cli.pipeline import ScorerConfig, build_engines, check_splitter
    from iclr_cli.serve.batching import BatchingScorer
    from iclr_cli.serve.eager import EagerScorer
    from iclr_cli.serve.messages import MessagesDialect
    from iclr_cli.serve.responses import ResponsesDialect
    from iclr_cli.serve.state import ServeState
    from iclr_cli.serve.stats import Stats
    from iclr_cli.serve.state_url import open_store

    variant = parse_variant(options.variant)
    if variant.kind == "sliding-window":
        raise UsageError("sliding-window-K drops whole steps, so every request would change its prefix; it exists only in 'iclr replay'")
    check_splitter(options.split)
    if options.late not in LATE_POLICIES:
        raise UsageError(f"--late {options.late!r}: choose one of {', '.join(LATE_POLICIES)}")
    if options.max_wait is not None and not options.max_wait >= 0:
        raise UsageError(f"--max-wait {options.max_wait}: seconds, 0 or more (inf: wait for every step)")
    kind, _ = upstream_kind(options)
    # No recheck: a step is scored once, within the latency budget (docs/serve.md).
    config = ScorerConfig.chosen(options.exact, options.max_tokens, options.elide, 0, model=options.proxy_model,
                                      overflow=options.overflow, dtype=options.dtype, prefix_cache=options.prefix_cache,
                                      batch_size=options.batch_size, device=options.device, context=options.context,
                                      cache_tokens=options.cache_tokens)
    if tokenizer is None:
        built, tokenizer = build_engines(variant, config)
        scorer = scorer if scorer is not None else built
    batching = None
    if variant.needs_scores:
        if scorer is None:
            raise UsageError(f"variant {variant.name} needs a proxy scorer")
        batching = BatchingScorer(scorer, max_batch=max(options.batch_size, 1) * 4, wait_s=options.batch_wait_ms / 1000)
    stats = Stats()
    serving = batching
    if batching is not None:
        batching.on_batch = stats.metrics.batch.observe
        stats.metrics.watch_scorer(batching.cache_info)
        stats.metrics.watch_queue(batching.queue_info)
        if options.eager_scoring:
            serving = EagerScorer(batching, stats, max_pending=options.max_conversations)
    if getattr(scorer, "device_type", None) is not None:  # serve feeds short pieces onto a long kept past
        from iclr_cli.scoring.attention import grouped_attention_on_cpu

        grouped_attention_on_cpu(scorer.device_type)
    scorer_name = scorer.name if scorer is not None else tokenizer.name
    if options.state and options.state_dir:
        raise UsageError("--state and --state-dir name the same thing: give one")
    store = open_store(options.state or options.state_dir, _settings_record(options, config, scorer_name, kind.name), options.state_ttl_s)
    state = ServeState(
        # score_all=False: a step whose selection cannot depend on its scores (one block) is
        # decided at once, never waits and never goes late; the text sent is the same.
        config.settings(variant, ratio=options.ratio, seed=options.seed, splitter=options.split, score_all=False),
        serving,
        tokenizer,
        store=store,
        stats=stats,
        max_conversations=options.max_conversations,
        restore_reasoning=options.restore_reasoning,
        budget=Budget(None if options.max_wait == float("inf") else options.max_wait, options.late, kind.name),
    )

    def shutdown() -> None:
        if batching is not None:
            batching.close()
        store.close()

    describe = (
        ("upstream_kind", kind.name),
        ("upstream_reasoning", kind.reasoning),
        ("sealed", options.sealed),
        ("variant", variant.name),
        ("ratio", options.ratio),
        ("proxy_model", scorer_name),
        ("reasoning_tokenizer", tokenizer.name),
        ("state", store.where),
        ("state_store", store.kind),
        ("state_ttl_s", options.state_ttl_s if store.shared else None),
        ("max_conversations", options.max_conversations),
        ("context", options.context),
        ("scorer_profile", config.describe()),
        ("max_tokens", config.max_tokens),
        ("prefix_cache", options.prefix_cache),
        ("eager_scoring", options.eager_scoring and serving is not batching),
        ("max_wait_s", None if options.max_wait in (None, float("inf")) else options.max_wait),
        ("late", options.late),
    )
    from iclr_cli.serve.chat import CHAT

    drop = options.sealed == "drop-previous-turns"
    dialects = {
        "messages": MessagesDialect(sealed=kind.sealed, drop_previous_turns=drop),
        "responses": ResponsesDialect(sealed=kind.sealed, drop_previous_turns=drop),
    }
    return Engine(state, {"chat/completions": CHAT, **dialects}, describe, shutdown)


def listen(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (the first address ``host`` resolves to), for
    uvicorn to listen on (``port`` 0: a free one).

    Raises:
        UsageError: when ``host`` does not resolve.
        IclrError: when the address cannot be bound (port in use, not allowed).
    """
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as exc:
        raise UsageError(f"--host {host}: {exc.strerror}") from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
    except OSError as exc:
        sock.close()
        raise IclrError(f"cannot listen on {host} port {port}: {exc.strerror or exc}") from None
    return sock


# Seconds a stopping proxy gives the answers still in flight (upstream replies being relayed)
# before it closes their connections: uvicorn's default is to wait for them however long.
SHUTDOWN_GRACE_S = 5


def uvicorn_config(app, host: str, port: int, log_level: str = "warning"):
    """A uvicorn config for ``app``: no access log (request lines carry nothing the stats do
    not), no ``Server`` header of uvicorn's own, :data:`SHUTDOWN_GRACE_S` for the answers in
    flight at shutdown."""
    import uvicorn

    return uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False, server_header=False, lifespan="on",
                          timeout_graceful_shutdown=SHUTDOWN_GRACE_S)


def make_server(config, on_exit: Callable[[], None] | None = None):
    """A ``uvicorn.Server`` for ``config`` that calls ``on_exit`` as soon as it starts to shut
    down (Ctrl-C, SIGTERM), before it waits for the connections in flight:
    :meth:`ServeState.stop <iclr_cli.serve.state.ServeState.stop>` there cancels the scoring
    those connections (or nobody) wait for, which would otherwise hold the exit for as long
    as a prefill takes. ``on_exit`` runs on the event loop: it must not block."""
    import uvicorn

    class Server(uvicorn.Server):
        async def shutdown(self, sockets=None) -> None:
            if on_exit is not None:
                on_exit()
            await super().shutdown(sockets)

    return Server(config)


@contextlib.contextmanager
def running(app, host: str = "127.0.0.1", *, on_exit: Callable[[], None] | None = None) -> Iterator[str]:
    """Serve ``app`` on a free port of ``host`` from a background thread; yields the base URL
    (ending in ``/v1``). The server shuts down (lifespan included) when the block ends, calling
    ``on_exit`` first (:func:`make_server`)."""
    sock = listen(host, 0)
    server = make_server(uvicorn_config(app, host, sock.getsockname()[1]), on_exit)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("iclr serve: the server thread stopped before it started")
            threading.Event().wait(0.01)
        yield f"http://{host}:{sock.getsockname()[1]}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
