"""Real Redis and PostgreSQL servers for the shared-state tests, started on 127.0.0.1.

Debian's ``redis-server`` and ``postgresql`` (scripts/setup.sh installs them when it runs as
root): each fixture starts a private server on a free port with its data in a temporary
folder, once per test session, and stops it at the end. A machine without them skips these
tests, unless ``ICLR_REQUIRE_STORE_SERVERS=1`` (which ``.ci/run`` sets): then they fail, so CI
never passes by skipping them.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

REQUIRED = os.environ.get("ICLR_REQUIRE_STORE_SERVERS") == "1"


def _missing(what: str):
    if REQUIRED:
        pytest.fail(f"{what} (ICLR_REQUIRE_STORE_SERVERS=1: scripts/setup.sh installs it when run as root)")
    pytest.skip(what)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(check, what: str, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}: {proc.stdout.read().decode(errors='replace')[-2000:]}")
        try:
            if check():
                return
        except Exception:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not start in {timeout} s")


@pytest.fixture(scope="session")
def redis_url():
    """``redis://127.0.0.1:PORT/0`` of a fresh redis-server (no persistence)."""
    exe = shutil.which("redis-server")
    if exe is None:
        _missing("redis-server is not installed (apt-get install redis-server)")
    try:
        import redis
    except ImportError:
        _missing("the redis client is not installed (pip install -e '.[fleet]')")
    port = _free_port()
    folder = tempfile.mkdtemp(prefix="iclr-redis-")
    proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", folder],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        _wait(lambda: redis.Redis.from_url(url).ping(), "redis-server", proc)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(folder, ignore_errors=True)


def _pg_bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


@pytest.fixture(scope="session")
def postgres_url():
    """``postgresql://iclr@127.0.0.1:PORT/postgres`` of a fresh cluster (trust auth on loopback,
    fsync off). PostgreSQL refuses to run as root, so as root it runs as Debian's ``postgres``."""
    initdb, postgres = _pg_bin("initdb"), _pg_bin("postgres")
    if initdb is None or postgres is None:
        _missing("PostgreSQL's server is not installed (apt-get install postgresql)")
    try:
        import psycopg
    except ImportError:
        _missing("psycopg is not installed (pip install -e '.[fleet]')")
    as_user: list[str] = []
    folder = tempfile.mkdtemp(prefix="iclr-pg-")
    if os.geteuid() == 0:
        as_user = ["runuser", "-u", "postgres", "--"]
        shutil.chown(folder, "postgres", "postgres")
    data = os.path.join(folder, "data")
    subprocess.run([*as_user, initdb, "-D", data, "-A", "trust", "-U", "iclr", "--no-sync"], check=True, capture_output=True)
    port = _free_port()
    proc = subprocess.Popen([*as_user, postgres, "-D", data, "-p", str(port), "-h", "127.0.0.1", "-k", folder,
                             "-c", "fsync=off", "-c", "max_connections=200"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"postgresql://iclr@127.0.0.1:{port}/postgres"
    try:
        _wait(lambda: psycopg.connect(url, connect_timeout=1).close() is None, "postgres", proc)
        yield url
    finally:
        proc.terminate()
        proc.wait(20)
        shutil.rmtree(folder, ignore_errors=True)
