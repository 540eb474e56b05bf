"""``iclr serve`` as a process: options, the printed URL, ``--api-key-env``, no key in its logs."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from replay_fixtures import REPO
from serve_fixtures import scripted_upstream

pytest.importorskip("starlette")


def _env(**extra) -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO), **extra}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("args, message", [
    (["--upstream", "http://127.0.0.1:9/v1", "--api-key-env", "ICLR_TEST_UNSET_KEY"], "ICLR_TEST_UNSET_KEY"),
    (["--upstream", "http://127.0.0.1:9/v1", "--variant", "sliding-window-3"], "sliding-window"),
    (["--upstream", "127.0.0.1:9"], "--upstream"),
    (["--upstream", "http://127.0.0.1:9/v1", "--variant", "nope"], "unknown variant"),
    # the enums prune uses: a wrong value is refused before anything runs, the choices listed
    (["--upstream", "http://127.0.0.1:9/v1", "--overflow", "truncate"], "'window', 'skip'"),
    (["--upstream", "http://127.0.0.1:9/v1", "--dtype", "int8"], "'float32'"),
    (["--upstream", "http://127.0.0.1:9/v1", "--block-split", "words"], "'paragraph'"),
    (["--upstream", "http://127.0.0.1:9/v1", "--log-level", "loud"], "'warning'"),
    (["--upstream", "http://127.0.0.1:9/v1", "--upstream-kind", "nope"], "'anthropic'"),
    # only a provider that documents what may be left out offers the drop
    (["--upstream", "http://127.0.0.1:9/v1", "--sealed", "drop-previous-turns"], "documents nothing that may be left out"),
])
def test_usage_errors_exit_2(args, message):
    env = _env()
    env.pop("ICLR_TEST_UNSET_KEY", None)
    proc = subprocess.run([sys.executable, "-m", "iclr_cli", "serve", "--proxy-model", "fake", *args], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 2 and message in proc.stderr


def test_serve_process_prints_url_uses_env_key_and_logs_no_key(tmp_path):
    secret = "sk-ENV-SECRET-789"
    port = _free_port()
    with scripted_upstream() as up:
        cmd = [sys.executable, "-m", "iclr_cli", "serve", "--upstream", up.url, "--port", str(port), "--proxy-model", "fake",
               "--api-key-env", "ICLR_TEST_KEY", "--state-dir", str(tmp_path), "--log-level", "debug"]
        proc = subprocess.Popen(cmd, env=_env(ICLR_TEST_KEY=secret), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    httpx.get(base + "/healthz", timeout=2)
                    break
                except httpx.HTTPError:
                    assert proc.poll() is None, proc.stderr.read()
                    assert time.monotonic() < deadline, "iclr serve did not start"
                    time.sleep(0.2)
            resp = httpx.post(base + "/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                              headers={"Authorization": "Bearer sk-client-other"}, timeout=20)
            assert resp.status_code == 200
        finally:
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
    assert up.headers[0]["authorization"] == f"Bearer {secret}"
    assert f"point agents at http://127.0.0.1:{port}/v1" in err
    assert "upstream kind local (127.0.0.1 is a loopback or private address): plain reasoning, compressed in place" in err
    assert secret not in out + err and "sk-client-other" not in out + err
    assert proc.returncode == 130 and "iclr: interrupted" in err  # Ctrl-C is how a server stops


def test_busy_port_fails_before_printing_a_url():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "iclr_cli", "serve", "--upstream", "http://127.0.0.1:9/v1", "--proxy-model", "fake", "--port", str(port)],
                              capture_output=True, text=True, env=_env(), timeout=60)
    assert proc.returncode == 1 and f"cannot listen on 127.0.0.1 port {port}" in proc.stderr
    assert "point agents at" not in proc.stderr


def test_serve_imports_nothing_from_cli():
    """The proxy is a library (tests and benchmarks build it): only ``iclr_cli/cli/serve.py`` is CLI."""
    import ast

    for path in sorted((REPO / "iclr_cli" / "serve").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names] if isinstance(node, ast.Import) else []
            assert not any(n == "iclr_cli.cli" or n.startswith("iclr_cli.cli.") for n in names), f"{path.name} imports {names}"
