"""``iclr serve``: a proxy (chat completions, Anthropic Messages, OpenAI Responses) that compresses any agent's reasoning on the wire."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from iclr_cli.serve.config import option_callback
from iclr_cli import providers
from iclr_cli.cli import options as opt
from iclr_cli.serve.budget import DEFAULT_LATE, DEFAULT_MAX_WAIT, LATE_POLICIES

LogLevel = opt.choices("LogLevel", ("critical", "error", "warning", "info", "debug"))
UpstreamKind = opt.choices("UpstreamKind", providers.names())
Sealed = opt.choices("Sealed", ("keep", "drop-previous-turns"))
Late = opt.choices("Late", LATE_POLICIES)

def serve(
    ctx: typer.Context,
    upstream: Annotated[str, typer.Option("--upstream", help="The upstream's base URL, where /v1 would end: https://api.deepseek.com, http://127.0.0.1:8000/v1, https://api.anthropic.com/v1, https://api.deepseek.com/anthropic/v1.", show_default=False)],
    upstream_kind: Annotated[Optional[UpstreamKind], typer.Option("--upstream-kind", help="Which reasoning rule the upstream follows (docs/serve.md, 'Each provider's reasoning rules'); default: guessed from the URL (loopback or private address: local, plain text).", show_default=False)] = None,
    sealed: Annotated[Sealed, typer.Option("--sealed", help="Signed or encrypted reasoning of a sealed upstream: keep it all (default), or drop-previous-turns: leave out what the provider documents as legal (earlier turns' thinking / reasoning items).")] = Sealed("keep"),
    host: Annotated[str, typer.Option("--host", help="Address to bind; anything but loopback exposes the proxy to the network: with --api-key-env it then needs client keys (or --allow-anyone).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port to listen on.")] = 8788,
    variant: Annotated[str, typer.Option("--variant", "-v", help="none, iclr, iclr-ext, step-only, delete-all, random-R (e.g. random-10). iclr-ext is this project's hypothesis from the paper's externalization finding, not the paper's method: BottomK as iclr, but a block whose derived state (identifiers, paths, numbers, quoted text, code it introduced) has not yet reached an action, a written file or a tool result is never removed.")] = "iclr",
    ratio: opt.Ratio = opt.DEFAULT_RATIO_VALUE,
    seed: opt.Seed = 0,
    proxy_model: Annotated[str, typer.Option("--proxy-model", help="Proxy scorer and reasoning tokenizer: 'smollm2', 'fake' (dry runs; 'fake:N' takes the time of a proxy that runs N tokens a second), a folder, a .gguf, a HF id.")] = "smollm2",
    max_tokens: opt.MaxTokens = None,
    exact: opt.Exact = False,
    elide: opt.Elide = None,
    overflow: opt.Overflow = opt.WINDOW,
    context: opt.Context = opt.CONTEXT,
    dtype: opt.Dtype = opt.AUTO_DTYPE,
    device: opt.Device = None,
    batch_size: opt.BatchSize = 8,
    block_split: opt.BlockSplit = opt.PARAGRAPH,
    cache_tokens: Annotated[Optional[int], typer.Option("--cache-tokens", min=1, help="Key/value tokens the proxy model keeps over all live conversations' scorer state, least recently used evicted first (default: from free memory).", show_default=False)] = None,
    no_prefix_cache: Annotated[bool, typer.Option("--no-prefix-cache", help="Score every step from scratch instead of keeping each conversation's scorer state and sharing the state after P (verification, benchmarks).")] = False,
    eager_scoring: Annotated[bool, typer.Option("--eager-scoring/--no-eager-scoring", help="Score a reply's reasoning as soon as it was relayed, while the agent runs its tool, so the next request finds it done.")] = True,
    max_wait: Annotated[float, typer.Option("--max-wait", min=0, help="Seconds a request may wait for its steps' scores; a step not scored by then goes upstream as generated (late). inf: wait for every step (the paper's online rule).")] = DEFAULT_MAX_WAIT,
    late: Annotated[Late, typer.Option("--late", help="A step sent late: when-it-pays (its scoring goes on; the conversation's late steps are compressed together at one request, when the provider's prompt cache has expired, the client changed its history itself, or the tokens removed from later requests outweigh one cache rewrite at the provider's prices), as-sent (left as generated for good: the cached prefix never changes) or compress-later (at the first request that finds its scores ready, whatever the rewrite costs).")] = Late(DEFAULT_LATE),
    api_key_env: Annotated[Optional[str], typer.Option("--api-key-env", help="Environment variable holding the upstream key; it replaces the client's Authorization header (default: the client's header is forwarded).")] = None,
    client_key_env: Annotated[Optional[str], typer.Option("--client-key-env", help="Environment variable holding the keys clients must send as their API key (Authorization: Bearer KEY or x-api-key: KEY): one, or several separated by commas or newlines. Every route but the health probes answers 401 without one; the client's key is never forwarded upstream.", show_default=False)] = None,
    client_keys_file: Annotated[Optional[Path], typer.Option("--client-keys-file", dir_okay=False, help="A file of client keys, one a line (# starts a comment); with --client-key-env, both count.", show_default=False)] = None,
    allow_anyone: Annotated[bool, typer.Option("--allow-anyone", help="Listen beyond loopback with --api-key-env and no client keys: anyone who reaches the port spends your upstream key. Without it that refuses to start.")] = False,
    state_dir: Annotated[Optional[str], typer.Option("--state-dir", help="Keep conversation state in DIR/serve.sqlite3 so a restart, and every other process on this machine opening the same folder, sends the same bytes (default: memory only).")] = None,
    state: Annotated[Optional[str], typer.Option("--state", help="Keep conversation state where replicas on several machines share it: redis://[:PASSWORD@]HOST:PORT/DB or postgresql://USER:PASSWORD@HOST/DB (a folder works as --state-dir). docs/fleet.md.", show_default=False)] = None,
    state_ttl: Annotated[float, typer.Option("--state-ttl", min=1, help="Seconds a conversation's state is kept after its last request (default: a week).")] = 7 * 24 * 3600.0,
    max_conversations: Annotated[int, typer.Option("--max-conversations", min=1, help="Conversations kept (least recently used evicted).")] = 1000,
    restore_reasoning: Annotated[bool, typer.Option("--restore-reasoning", help="Re-insert the reasoning the upstream returned into assistant turns with tool calls that arrive without it, then compress it as usual: chat reasoning fields, reasoning_details and Gemini thought signatures; Anthropic thinking blocks (Claude Code drops those Anthropic did not sign) and their signatures (a client that ignores signature_delta sends an empty signature); Responses reasoning items. DeepSeek and Gemini answer 400 otherwise.")] = False,
    max_body_mb: Annotated[float, typer.Option("--max-body-mb", min=0.001, help="Request bodies over this many MiB get 413.")] = 32.0,
    request_timeout: Annotated[float, typer.Option("--request-timeout", min=1, help="Seconds to wait for the upstream to connect or send the next chunk.")] = 600.0,
    keepalive: Annotated[float, typer.Option("--keepalive", min=0, help="Seconds a relayed stream may stay silent before the client gets its API's keep-alive (Anthropic event: ping, a Responses keepalive event, an SSE comment for chat completions); 0: never. Below Claude Code's and Codex's 300 s stream watchdogs and the 60 s idle timeout of common reverse proxies.")] = 15.0,
    config: Annotated[Optional[Path], typer.Option("--config", exists=True, dir_okay=False, is_eager=True, callback=option_callback, help="A TOML file of serve options set once: keys are the flags without dashes (upstream = \"https://...\", upstream-kind = \"anthropic\", eager-scoring = false); every flag on the command line wins over it. docs/serve.md, 'Running it as a service'.", show_default=False)] = None,
    log_level: Annotated[LogLevel, typer.Option("--log-level", help="Log level of the proxy and uvicorn.")] = LogLevel("warning"),
    quiet: opt.Quiet = False,
) -> None:
    """Run a proxy in front of UPSTREAM that compresses reasoning online (chat completions,
    Anthropic Messages for Claude Code, OpenAI Responses for Codex).

    Point an agent's base URL at the printed URL. The first request of a conversation and the
    step in progress are sent as they are; each completed step's reasoning is compressed once
    (the variant, as in prune and replay) and the same compressed text goes upstream on every
    later request, so the upstream's prompt cache keeps working. GET /stats (JSON) and
    /metrics (Prometheus) say what was removed and what the upstream reported.
    """
    import logging
    import os

    from iclr_cli.cli.common import scorer_config, warn_precision
    from iclr_cli.errors import IclrError, UsageError
    from iclr_cli.render.output import Output

    output = Output(None, quiet=quiet)
    api_key = None
    if api_key_env is not None:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            raise UsageError(f"--api-key-env {api_key_env}: the environment variable is not set")
    from iclr_cli.serve import auth

    keys = []
    if client_key_env is not None:
        keys += auth.from_env(client_key_env, os.environ.get(client_key_env))
    if client_keys_file is not None:
        keys += auth.from_file(client_keys_file)
    client_keys = auth.ClientKeys(keys) if keys else None
    auth.check_exposure(host, api_key is not None, client_keys, allow_anyone)
    try:
        import httpx_sse  # noqa: F401
        import prometheus_client  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise IclrError(f"iclr serve needs its extra: pip install 'iclr-cli[serve]' ({exc})") from None
    from iclr_cli.serve.server import ServeOptions, build, listen, make_server, upstream_kind as resolve_kind, uvicorn_config
    from iclr_cli.serve.upstream import redact

    options = ServeOptions(
        upstream=upstream,
        variant=variant,
        ratio=ratio,
        seed=seed,
        split=block_split.value,
        proxy_model=proxy_model,
        max_tokens=max_tokens,
        exact=exact,
        elide=elide,
        overflow=overflow.value,
        context=context.value,
        dtype=dtype.value,
        device=device,
        batch_size=batch_size,
        api_key=api_key,
        client_keys=client_keys,
        state_dir=state_dir,
        state=state,
        state_ttl_s=state_ttl,
        max_conversations=max_conversations,
        restore_reasoning=restore_reasoning,
        max_body_bytes=int(max_body_mb * 1024 * 1024),
        request_timeout=request_timeout,
        keepalive_s=keepalive,
        prefix_cache=not no_prefix_cache,
        cache_tokens=cache_tokens,
        eager_scoring=eager_scoring,
        upstream_kind=upstream_kind.value if upstream_kind is not None else None,
        sealed=sealed.value,
        max_wait=None if max_wait == float("inf") else max_wait,
        late=late.value,
    )
    # at debug, each line with its time: the scorer's batches and the requests' waits are read as a timeline
    stamp = "%(asctime)s.%(msecs)03d " if log_level.value == "debug" else ""
    logging.basicConfig(level=getattr(logging, log_level.value.upper()), format=f"iclr serve: {stamp}%(levelname)s: %(message)s", datefmt="%H:%M:%S")
    # httpx logs every upstream request at INFO; the proxy's own line per request says more
    for name in ("httpx", "httpcore"):  # httpcore logs every connection step at DEBUG
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLogger().level))
    kind, why = resolve_kind(options)
    warn_precision(output, scorer_config(proxy_model, max_tokens, options.overflow, options.dtype, False, batch_size, device,
                                         exact=exact, elide=elide))
    sock = listen(host, port)  # before loading anything big: a busy port fails at once
    try:
        app, state = build(options)
        # The event loop shares the CPUs with the scorer's intra-op pool (docs/scoring.md, "When the machine is busy").
        from iclr_cli.scoring.threads import available_cpus, limit_torch, serve_threads

        limit_torch(serve_threads(available_cpus()))
        shown = "[" + host + "]" if ":" in host else host
        if config is not None:
            from iclr_cli.serve.config import from_file

            used, overridden = from_file(ctx)
            output.info(f"iclr serve: settings from {config}: {', '.join(used) or 'none'}" + (f" (the command line wins for {', '.join(overridden)})" if overridden else ""))
        loopback = auth.is_loopback(host)
        if loopback:
            output.info(f"iclr serve: listening on {shown} port {port}, this machine only (--host to listen elsewhere)")
        output.info(f"iclr serve: point agents at http://{shown}:{port}/v1 (upstream {redact(upstream)}, variant {variant}, proxy {state.tokenizer.name}); stats at /stats, readiness at /health/readiness")
        handled = "compressed in place" if not kind.sealed else "signed and encrypted reasoning left sealed" + (", earlier turns' dropped" if options.sealed != "keep" else "")
        output.info(f"iclr serve: upstream kind {kind.name} ({why}): {kind.reasoning} reasoning, {handled}; --upstream-kind to change")
        if client_keys is not None:
            output.info(f"iclr serve: clients must send one of {len(client_keys)} client key{'s' if len(client_keys) > 1 else ''} as their API key (health probes need none); their keys are not forwarded upstream")
        elif not loopback:
            output.warn(f"--host {host}: the proxy is reachable from the network; anyone who reaches it uses your upstream{' key (--allow-anyone)' if api_key else ''}")
        server = make_server(uvicorn_config(app, host, port, log_level.value), state.stop)
        server.run(sockets=[sock])
    finally:
        sock.close()
    if not server.started:
        raise IclrError("iclr serve: the server stopped before it started (see the log above)")
    # A started uvicorn returns only after a signal asked it to stop (Ctrl-C, SIGTERM): exit 130.
    raise KeyboardInterrupt
