"""What a ``--state`` value (or a LiteLLM guardrail's ``state``) names, and opening it.

Kept apart from :mod:`iclr_cli.serve.store` (the contract every store implements) so the
stores import the contract and only this module imports the stores (docs/fleet.md).
"""

from __future__ import annotations

from collections.abc import Mapping

from iclr_cli.errors import UsageError
from iclr_cli.serve.store import DEFAULT_TTL_S, MemoryStore


def open_store(state: str | None, settings: Mapping[str, object], ttl_s: float = DEFAULT_TTL_S) -> MemoryStore:
    """The store ``state`` names: ``None`` for none, ``redis://`` or ``rediss://`` for Redis,
    ``postgresql://`` or ``postgres://`` for PostgreSQL, ``sqlite:///PATH`` or any other value
    for a folder holding the SQLite file (``--state-dir``).

    Raises:
        UsageError: a store written with other settings, one that cannot be reached, or a
            missing client library (named with its pip install).
    """
    if not state:
        return MemoryStore(ttl_s)
    if not ttl_s > 0:
        raise UsageError(f"--state-ttl {ttl_s}: seconds, more than 0")
    if state.startswith(("redis://", "rediss://", "unix://")):
        from iclr_cli.serve.store_redis import RedisStore

        return RedisStore(state, settings, ttl_s)
    if state.startswith(("postgresql://", "postgres://")):
        from iclr_cli.serve.store_postgres import PostgresStore

        return PostgresStore(state, settings, ttl_s)
    from iclr_cli.serve.store_sqlite import SqliteStore

    folder = state[len("sqlite://"):] if state.startswith("sqlite://") else state
    return SqliteStore(folder, settings, ttl_s)


def litellm_state(value: str, environ=None) -> str:
    """The ``state`` a guardrail names, read from LiteLLM's own settings where it says so, so
    every worker and pod shares the stores the gateway already runs (docs/fleet.md):

    - ``redis``: LiteLLM's Redis, from the variables its router and caches read
      (``litellm/_redis.py``): ``REDIS_URL``, else ``REDIS_HOST`` and ``REDIS_PORT`` with
      ``REDIS_USERNAME``, ``REDIS_PASSWORD`` and ``REDIS_SSL``;
    - ``database``: LiteLLM's PostgreSQL, ``DATABASE_URL`` (its keys and spend);
    - ``os.environ/NAME``: the variable ``NAME``, as LiteLLM's config spells a secret;
    - anything else as it is (a URL or a folder).

    Raises:
        UsageError: naming the variable that is not set.
    """
    import os
    from urllib.parse import quote

    env = os.environ if environ is None else environ

    def need(name: str) -> str:
        if not env.get(name):
            raise UsageError(f"iclr guardrail: state: {value} reads {name}, which is not set")
        return env[name]

    if value.startswith("os.environ/"):
        return need(value[len("os.environ/"):])
    if value == "database":
        return need("DATABASE_URL")
    if value != "redis":
        return value
    if env.get("REDIS_URL"):
        return env["REDIS_URL"]
    host, port = need("REDIS_HOST"), need("REDIS_PORT")
    scheme = "rediss" if env.get("REDIS_SSL", "").lower() == "true" else "redis"
    auth = ""
    if env.get("REDIS_PASSWORD"):
        auth = f"{quote(env.get('REDIS_USERNAME', ''), safe='')}:{quote(env['REDIS_PASSWORD'], safe='')}@"
    return f"{scheme}://{auth}{host}:{port}"
