"""Liveness and readiness of ``iclr serve``, apart, as LiteLLM's proxy names them.

- ``GET /health/liveliness`` (and ``/health/liveness``, the Kubernetes spelling LiteLLM also
  answers): the process answers HTTP. Always 200 with the JSON string ``"I'm alive!"``
  (LiteLLM's body), whatever the scorer is doing: a supervisor restarts on this one.
- ``GET /health/readiness``: ready for agents' traffic. 200 with ``{"status": "healthy", ...}``
  once the proxy model is loaded and P is warm; 503 with ``{"status": "unhealthy",
  "detail": "Service Unhealthy (...)", ...}`` before that (LiteLLM answers 503 with a
  ``detail`` of that form). A load balancer or a wrapper script waits for this one.
- ``GET /healthz`` (older, kept): ``{"status": "ok"}`` whenever the process answers.

"Loaded" and "warm", concretely: ``iclr serve`` loads the proxy model before it opens its
port, so a port that answers has the model in memory (a variant that does not score needs
none). "P warm" means the scorer holds what it reuses across conversations (the keys and values
of a shared prompt prefix, P, read from its on-disk cache when it keeps one): the scorer says
so through an optional ``is_warm() -> bool`` method (called on the event loop: it must answer
at once, never wait for the cache); a scorer without that method keeps no
such state and is warm once loaded. Readiness reads the scorer behind the serve wrappers
(:class:`~iclr_cli.serve.eager.EagerScorer` and :class:`~iclr_cli.serve.batching.BatchingScorer`
keep it as ``inner``). Nothing here contacts the upstream (LiteLLM keeps that for ``/health``).

With a shared state store (``--state``, ``--state-dir``: :mod:`iclr_cli.serve.store`), readiness
also pings it: a store that does not answer makes the replica unready (``"state": "error"`` and
the reason in ``detail``), so a balancer sends its conversations to a replica that can read
them; the replica itself goes on serving what it holds.

All three answer ``HEAD`` too (Starlette adds it to every ``GET`` route).
"""

from __future__ import annotations

from iclr_cli import __version__

ALIVE = "I'm alive!"


def proxy_scorer(serving: object | None) -> object | None:
    """The scorer behind the serve wrappers (each keeps the one it wraps as ``inner``)."""
    scorer = serving
    while scorer is not None and getattr(scorer, "inner", None) is not None:
        scorer = scorer.inner
    return scorer


def readiness(serving: object | None, upstream: str, store=None) -> tuple[int, dict]:
    """(HTTP status, JSON body) of ``/health/readiness`` for the serving scorer (``None``: the
    variant scores nothing) in front of ``upstream`` (already redacted), with ``store``
    (the state store; ``None`` or one that is not shared: nothing to ping). Blocks for the
    store's ping (at most its 2-second timeout): call it off the event loop.

    The body always has ``status`` (``healthy`` or ``unhealthy``), ``proxy_model`` (the
    scorer's name, ``None`` without one), ``p_cache`` (``warm``, ``warming``, or ``not kept``
    for a scorer without shared-prefix state), ``upstream`` and ``iclr_version``; with a
    shared store, ``state`` (``ok`` or ``error``), ``state_store`` and ``state_ms`` (the
    ping's time); an unhealthy answer adds ``detail``.
    """
    import time

    scorer = proxy_scorer(serving)
    body: dict = {"status": "healthy", "proxy_model": getattr(scorer, "name", None), "p_cache": "not kept",
                  "upstream": upstream, "iclr_version": __version__}
    if store is not None and getattr(store, "shared", False):
        began = time.perf_counter()
        try:
            store.ping()
        except Exception as exc:
            return 503, {**body, "status": "unhealthy", "state": "error", "state_store": store.where,
                         "detail": f"Service Unhealthy (state store {store.where}: {type(exc).__name__}: {exc})"}
        body.update(state="ok", state_store=store.where, state_ms=round((time.perf_counter() - began) * 1000, 3))
    is_warm = getattr(scorer, "is_warm", None)
    if is_warm is None:
        return 200, body
    try:
        warm = bool(is_warm())
    except Exception as exc:  # a broken cache is not ready: say why, as LiteLLM does
        return 503, {**body, "status": "unhealthy", "p_cache": "error", "detail": f"Service Unhealthy (P cache: {type(exc).__name__}: {exc})"}
    if warm:
        return 200, {**body, "p_cache": "warm"}
    return 503, {**body, "status": "unhealthy", "p_cache": "warming", "detail": "Service Unhealthy (P cache not warm yet)"}


def routes(state, upstream: str) -> list:
    """The three health routes for ``state`` (a :class:`~iclr_cli.serve.state.ServeState`)."""
    import orjson
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    async def alive(request):
        return JSONResponse(ALIVE)

    async def ready(request):
        from starlette.concurrency import run_in_threadpool

        status, body = await run_in_threadpool(readiness, state.scorer, upstream, state.store)
        return Response(orjson.dumps(body), status_code=status, media_type="application/json")

    async def healthz(request):
        return JSONResponse({"status": "ok"})

    return [
        Route("/health/liveliness", alive, methods=["GET"]),
        Route("/health/liveness", alive, methods=["GET"]),
        Route("/health/readiness", ready, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
    ]
