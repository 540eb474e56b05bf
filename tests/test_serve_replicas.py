"""Two ``iclr serve`` replicas behind a round-robin balancer, sharing one state store
(docs/fleet.md): the upstream must receive the same bytes as from one process, with no prefix
break, the steps compressed counted once over both, a step scored ahead by the replica that
relayed its reply taken by the other, and a replica killed mid-session losing nothing.

The balancer is the client itself, sending each request of a conversation to the next
replica in turn. Each replica has its own scorer, as on two machines."""

from __future__ import annotations

import contextlib
import time

import orjson
import pytest

from serve_fixtures import proxy, scripted_upstream
from store_servers import postgres_url, redis_url  # noqa: F401  (fixtures)
from test_serve_eager import SYSTEM, _assemble, responder, scored

pytest.importorskip("starlette")
openai = pytest.importorskip("openai")

STEPS = 6


@pytest.fixture
def shared(request, tmp_path):
    kind = request.param
    if kind == "sqlite":
        return str(tmp_path / "state")
    if kind == "redis":
        import uuid

        return request.getfixturevalue("redis_url") + f"?prefix=r{uuid.uuid4().hex[:8]}:"
    import uuid

    import psycopg

    base = request.getfixturevalue("postgres_url")
    name = f"r{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return base.rsplit("/", 1)[0] + "/" + name


def offered(state, n: int) -> None:
    """Wait (not a timed assertion) until ``state`` has offered ``n`` steps to the others."""
    deadline = time.monotonic() + 60
    while state.stats.metrics.offers.labels("offered")._value.get() < n and time.monotonic() < deadline:
        time.sleep(0.005)


def run(replicas: int, location: str | None, *, kill_first_after: int | None = None, **options):
    """One streamed agent conversation through ``replicas`` proxies sharing ``location``;
    request k goes to the next live replica in turn, and is sent once the replica that relayed
    the previous reply has scored its step ahead (as when the agent's tool outlasts the
    scoring). With ``kill_first_after``, the first replica is shut down after that many
    requests. Returns (the upstream's request bodies, each replica's /stats record)."""
    with scripted_upstream(responder(STEPS)) as up, contextlib.ExitStack() as others, contextlib.ExitStack() as first:
        urls, states = [], []
        for n in range(replicas):
            url, state = (first if n == 0 else others).enter_context(proxy(up.url, state=location, **options))
            urls.append(url)
            states.append(state)
        relayed = [0] * replicas
        live = list(range(replicas))
        messages = [SYSTEM, {"role": "user", "content": "fix the bug"}]
        for k in range(STEPS + 1):
            if k == kill_first_after:
                first.close()
                live = live[1:]
            r = live[k % len(live)]
            sdk = openai.OpenAI(base_url=urls[r], api_key="sk", max_retries=0, timeout=60)
            reply = _assemble(sdk.chat.completions.create(model="fake-model", messages=messages, stream=True))
            if not reply.get("tool_calls"):
                break
            relayed[r] += 1
            scored(states[r], relayed[r])
            if location is not None:
                offered(states[r], relayed[r])
            messages = [*messages, reply, {"role": "tool", "tool_call_id": reply["tool_calls"][0]["id"], "content": f"out {k}"}]
        return list(up.raw), [{**s.stats.total.to_record(), "eager": s.stats.eager.to_record()} for s in states], [s.stats.metrics for s in states]


def breaks(bodies: list[bytes]) -> int:
    """Prefix breaks as the provider sees them: requests whose messages do not start with the
    previous request's. (Each replica counts only against the requests it sent itself.)"""
    messages = [orjson.loads(b)["messages"] for b in bodies]
    return sum(now[: len(before)] != before for before, now in zip(messages, messages[1:]))


def total(records, name: str) -> int:
    return sum(r[name] for r in records)


@pytest.mark.parametrize("shared", ["sqlite", "redis", "postgres"], indirect=True)
def test_two_replicas_send_the_bytes_of_one_process(shared):
    # no time to wait for scores: a step is compressed only if its scores are ready on arrival
    alone, one, _ = run(1, None, max_wait=0.0)
    both, two, metrics = run(2, shared, max_wait=0.0)
    assert len(alone) == STEPS + 1
    assert both == alone  # byte for byte, request by request
    assert sum(b"[SKIP]" in body for body in both) == STEPS  # every completed step compressed from request 2 on
    assert total(two, "steps_compressed") == total(one, "steps_compressed") == STEPS  # counted once over both
    assert total(two, "steps_late") == 0 and total(two, "prefix_breaks") == 0 and breaks(both) == 0
    # every step relayed by one replica was decided by the other from its offer, not scored again
    assert sum(m.offers.labels("taken")._value.get() for m in metrics) == STEPS
    assert sum(r["eager"]["misses"] for r in two) == 0


@pytest.mark.parametrize("shared", ["sqlite"], indirect=True)
def test_a_replica_killed_mid_session_loses_nothing(shared):
    alone, _, _ = run(1, None, max_wait=0.0)
    both, two, _ = run(2, shared, kill_first_after=3, max_wait=0.0)
    assert both == alone
    assert total(two, "prefix_breaks") == 0 and total(two, "steps_late") == 0


@pytest.mark.parametrize("shared", ["sqlite"], indirect=True)
def test_without_a_shared_store_replicas_break_the_prefix(shared):
    """What the shared store is for: two replicas each with their own memory (as before it)
    send the step the other scored ahead late, as generated, and the other then sends it
    compressed: a prefix break at every request from the third on."""
    alone, _, _ = run(1, None, max_wait=0.0)
    both, two, _ = run(2, None, max_wait=0.0)
    assert both != alone
    # each step: late where the next request landed, compressed (again) where the one after did
    assert total(two, "steps_late") == STEPS and total(two, "steps_compressed") == STEPS - 1
    assert breaks(both) == STEPS - 1 and breaks(alone) == 0
