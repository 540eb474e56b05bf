"""The conversation state in Redis (``--state redis://...``), shared by replicas on many machines.

The Redis a LiteLLM deployment already runs for routing and rate limits is enough: iclr's keys
live under their own prefix (``iclr:serve:`` by default, ``?prefix=`` in the URL to change it)
and never collide with LiteLLM's. Per conversation ``C``:

- ``PREFIX c:C:steps``: hash, step key -> :func:`~iclr_cli.serve.store.step_record`;
  first writer wins by ``HSETNX``; the compare-and-set of a pending step is a Lua script, so it
  is atomic on the server (https://redis.io/docs/latest/develop/interact/programmability/eval-intro/).
- ``PREFIX c:C:offers``: hash, step key -> a record, or ``""`` while it is being scored.
- ``PREFIX c:C:reasoning``: hash, tool-call id -> ``[field, text]``.

Every key of a conversation gets Redis's own expiry (``EXPIRE``, ``ttl`` seconds) at each use,
so retention needs no sweep. The settings are ``PREFIX settings``, written once (``SET NX``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import orjson

from iclr_cli.errors import UsageError
from iclr_cli.serve.store import (DEFAULT_TTL_S, LoadedConversation, MemoryStore, StoredStep, check_settings, redact,
                                  settings_bytes, step_from_record, step_record)

# KEYS[1] the steps hash; ARGV: field, the old record, the new record (set when none is stored too).
_REPLACE = """
local now = redis.call('HGET', KEYS[1], ARGV[1])
if (not now) or now == ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
  return ARGV[3]
end
return now
"""


class RedisStore(MemoryStore):
    """The state in Redis at ``url`` (module docstring). Connections come from redis-py's pool,
    one per thread at a time; a command that gets no answer in 2 seconds raises, so a Redis
    that hangs holds a request that long at most.

    Raises:
        UsageError: redis-py is not installed, the server cannot be reached, or it holds
            steps written with other ``settings``.
    """

    kind = "redis"
    shared = True

    def __init__(self, url: str, settings: Mapping[str, object], ttl_s: float = DEFAULT_TTL_S):
        super().__init__(ttl_s)
        try:
            import redis
        except ImportError:
            raise UsageError("--state redis://...: the redis client is not installed: pip install 'iclr[fleet]' (or pip install redis)") from None
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        self.prefix = query.pop("prefix", "iclr:serve:")
        self._url = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), parts.fragment))
        self._where = redact(url)
        try:
            self._redis = redis.Redis.from_url(self._url, socket_timeout=2.0, socket_connect_timeout=2.0)
            wanted = settings_bytes(settings)
            self._redis.set(self.prefix + "settings", wanted, nx=True)
            before = self._redis.get(self.prefix + "settings")
        except redis.RedisError as exc:
            raise UsageError(f"--state {self._where}: cannot reach Redis: {exc}") from None
        check_settings(f"--state {self._where}", orjson.loads(before) if before else None, orjson.loads(wanted))
        self._replace = self._redis.register_script(_REPLACE)
        self._ttl = max(1, int(ttl_s))

    @property
    def where(self) -> str:
        return self._where

    def _key(self, conv: str, what: str) -> str:
        return f"{self.prefix}c:{conv}:{what}"

    def conversation(self, conv: str) -> LoadedConversation | None:
        pipe = self._redis.pipeline(transaction=False)
        pipe.hgetall(self._key(conv, "steps"))
        pipe.hgetall(self._key(conv, "reasoning"))
        pipe.get(self._key(conv, "used"))
        steps, reasoning, used = pipe.execute()
        if used is None and not steps:
            return None
        loaded = LoadedConversation(conv, float(used or 0))
        loaded.steps = {k.decode(): step_from_record(v) for k, v in steps.items()}
        loaded.reasoning = {k.decode(): tuple(orjson.loads(v)) for k, v in reasoning.items()}
        return loaded

    def step(self, conv: str, key: str) -> StoredStep | None:
        raw = self._redis.hget(self._key(conv, "steps"), key)
        return step_from_record(raw) if raw is not None else None

    def claim(self, conv: str, key: str, step: StoredStep) -> StoredStep:
        pipe = self._redis.pipeline(transaction=True)
        pipe.hsetnx(self._key(conv, "steps"), key, step_record(step))
        pipe.hget(self._key(conv, "steps"), key)
        pipe.hdel(self._key(conv, "offers"), key)
        pipe.expire(self._key(conv, "steps"), self._ttl)
        _, stored, *_ = pipe.execute()
        return step_from_record(stored)

    def replace(self, conv: str, key: str, old: StoredStep, new: StoredStep) -> StoredStep:
        stored = self._replace(keys=[self._key(conv, "steps")], args=[key, step_record(old), step_record(new)])
        return step_from_record(stored)

    def offer(self, conv: str, key: str, step: StoredStep | None) -> None:
        pipe = self._redis.pipeline(transaction=False)
        pipe.hset(self._key(conv, "offers"), key, step_record(step) if step is not None else b"")
        pipe.expire(self._key(conv, "offers"), self._ttl)
        pipe.execute()

    def offered(self, conv: str, key: str) -> tuple[bool, StoredStep | None]:
        raw = self._redis.hget(self._key(conv, "offers"), key)
        if raw is None:
            return False, None
        return True, step_from_record(raw) if raw else None

    def reasoning(self, conv: str) -> dict[str, tuple[str, str]]:
        return {k.decode(): tuple(orjson.loads(v)) for k, v in self._redis.hgetall(self._key(conv, "reasoning")).items()}

    def save_reasoning(self, conv: str, call_id: str, field_name: str, text: str) -> None:
        pipe = self._redis.pipeline(transaction=False)
        pipe.hset(self._key(conv, "reasoning"), call_id, orjson.dumps([field_name, text]))
        pipe.expire(self._key(conv, "reasoning"), self._ttl)
        pipe.execute()

    def touch(self, conv: str) -> None:
        pipe = self._redis.pipeline(transaction=False)
        pipe.set(self._key(conv, "used"), repr(time.time()), ex=self._ttl)
        for what in ("steps", "offers", "reasoning"):
            pipe.expire(self._key(conv, what), self._ttl)
        pipe.execute()

    def expire(self, now: float | None = None) -> int:
        return 0  # Redis expires the keys itself (EXPIRE at each use)

    def ping(self) -> None:
        self._redis.ping()

    def close(self) -> None:
        self._redis.close()
