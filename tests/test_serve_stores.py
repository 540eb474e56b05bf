"""The state stores' contract (iclr_cli/serve/store.py), the same for SQLite, Redis and
PostgreSQL, against real servers (tests/store_servers.py): first writer wins, compare-and-set
of a pending step, offers, retention, settings, and several processes claiming at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid

import pytest

from store_servers import postgres_url, redis_url  # noqa: F401  (fixtures)

from iclr_cli.errors import UsageError
from iclr_cli.serve.state_url import open_store
from iclr_cli.serve.store import Guarded, StoredStep, redact

SETTINGS = {"variant": "iclr", "ratio": 0.8}
KINDS = ["sqlite", "redis", "postgres"]


@pytest.fixture
def location(request, tmp_path):
    """A fresh, empty place of each kind: a folder, a Redis key prefix, a PostgreSQL database."""
    kind = request.param
    if kind == "sqlite":
        return str(tmp_path / "state")
    if kind == "redis":
        return request.getfixturevalue("redis_url") + f"?prefix=t{uuid.uuid4().hex[:8]}:"
    import psycopg

    base = request.getfixturevalue("postgres_url")
    name = f"t{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return base.rsplit("/", 1)[0] + "/" + name


def stores(indirect=True):
    return pytest.mark.parametrize("location", KINDS, indirect=indirect)


@stores()
def test_first_writer_wins_and_removes_the_offer(location):
    a, b = open_store(location, SETTINGS), open_store(location, SETTINGS)
    mine, theirs = StoredStep(("[SKIP]",), 10, 8), StoredStep(("as generated",), 10, 0, late=True)
    a.offer("c", "k1", None)
    assert b.offered("c", "k1") == (True, None)  # being scored elsewhere
    a.offer("c", "k1", mine)
    assert b.offered("c", "k1") == (True, mine)
    assert b.claim("c", "k1", theirs) == theirs  # the first decision, whatever was offered
    assert a.claim("c", "k1", mine) == theirs  # the loser gets the winner's
    assert a.step("c", "k1") == theirs and b.step("c", "k1") == theirs
    assert a.offered("c", "k1") == (False, None)
    assert a.step("c", "other") is None
    a.close(), b.close()


@stores()
def test_compare_and_set_settles_a_pending_step_once(location):
    a, b = open_store(location, SETTINGS), open_store(location, SETTINGS)
    pending = StoredStep(("as generated",), 10, 0, late=True, pending=True)
    assert a.claim("c", "k", pending) == pending
    first, second = StoredStep(("[SKIP] a",), 10, 6, late=True), StoredStep(("[SKIP] b",), 10, 7, late=True)
    assert a.replace("c", "k", pending, first) == first
    assert b.replace("c", "k", pending, second) == first  # stale: the other process settled it
    assert b.step("c", "k") == first
    assert b.replace("c", "new", pending, second) == second  # none stored: written
    a.close(), b.close()


@stores()
def test_a_conversation_reads_back_with_its_steps_and_reasoning(location):
    a = open_store(location, SETTINGS)
    assert a.conversation("c") is None
    a.touch("c")
    a.claim("c", "k1", StoredStep(("x",), 3, 1, failure=None))
    a.claim("c", "k2", StoredStep(("y", "z"), 4, 0, failure="ValueError: no", late=True))
    a.save_reasoning("c", "call_1", "reasoning_content", "because")
    b = open_store(location, SETTINGS)
    loaded = b.conversation("c")
    assert loaded.steps == {"k1": StoredStep(("x",), 3, 1), "k2": StoredStep(("y", "z"), 4, 0, "ValueError: no", True)}
    assert loaded.reasoning == {"call_1": ("reasoning_content", "because")} == b.reasoning("c")
    assert abs(loaded.last_used - time.time()) < 60
    b.ping()
    a.close(), b.close()


@stores()
def test_other_settings_are_refused(location):
    open_store(location, SETTINGS).close()
    with pytest.raises(UsageError, match=r"other settings: ratio=0\.8 \(now 0\.5\)"):
        open_store(location, {**SETTINGS, "ratio": 0.5})


@stores()
def test_conversations_expire_after_the_ttl(location):
    store = open_store(location, SETTINGS, ttl_s=1)
    store.touch("old")
    store.claim("old", "k", StoredStep(("x",),))
    store.save_reasoning("old", "call", "reasoning", "r")
    if store.kind == "redis":  # Redis's own expiry
        time.sleep(2.2)
    else:
        assert store.expire(time.time() + 0.5) == 0
        assert store.expire(time.time() + 2) == 1
    assert store.conversation("old") is None and store.step("old", "k") is None and store.reasoning("old") == {}
    store.close()


CLAIMER = """
import json, sys
from iclr_cli.serve.state_url import open_store
from iclr_cli.serve.store import StoredStep
store = open_store(sys.argv[1], json.loads(sys.argv[2]))
me = sys.argv[3]
sys.stdin.readline()  # start together
won = [store.claim("c", f"k{i}", StoredStep((me,), i, 0)).texts[0] for i in range(40)]
print(json.dumps(won))
"""


@stores()
def test_processes_claiming_the_same_steps_at_once_agree_on_every_winner(location):
    open_store(location, SETTINGS).close()  # tables and settings first
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [subprocess.Popen([sys.executable, "-c", CLAIMER, location, json.dumps(SETTINGS), f"p{n}"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, env=env, text=True) for n in range(4)]
    time.sleep(1.0)  # every interpreter up and its store open
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    results = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert all(r == results[0] for r in results)  # every process sends the same winner
    stored = open_store(location, SETTINGS)
    assert [stored.step("c", f"k{i}").texts[0] for i in range(40)] == results[0]
    assert set(results[0]) <= {"p0", "p1", "p2", "p3"}


def test_an_unreachable_store_is_a_usage_error_that_names_it_without_the_password():
    with pytest.raises(UsageError, match=r"redis://:\*\*\*@127\.0\.0\.1:1/0: cannot reach Redis"):
        open_store("redis://:hunter2@127.0.0.1:1/0", SETTINGS)
    with pytest.raises(UsageError, match=r"postgresql://u:\*\*\*@127\.0\.0\.1:1/db: cannot use PostgreSQL"):
        open_store("postgresql://u:hunter2@127.0.0.1:1/db", SETTINGS)
    assert redact("redis://user:pw@h:6379/0") == "redis://user:***@h:6379/0"
    assert redact("redis://h:6379/0") == "redis://h:6379/0"


@pytest.mark.parametrize("location", ["redis"], indirect=True)
def test_a_store_that_goes_away_is_answered_as_memory_and_counted(location):
    from iclr_cli.serve.stats import Metrics

    metrics = Metrics()
    inner = open_store(location, SETTINGS)
    guarded = Guarded(inner, metrics)
    step = StoredStep(("x",), 1, 0)
    assert guarded.claim("c", "k", step) == step
    inner._redis.connection_pool.disconnect()
    inner._redis = type(inner._redis).from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.2)  # gone
    other = StoredStep(("y",), 1, 0)
    assert guarded.step("c", "k") is None and guarded.claim("c", "k", other) == other  # this process's own decision
    assert guarded.errors == 2 and "ConnectionError" in guarded.last_error
    assert metrics.store_errors.labels("claim")._value.get() == 1
    with pytest.raises(Exception):
        guarded.ping()
