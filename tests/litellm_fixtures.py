"""The real LiteLLM proxy (PyPI ``litellm[proxy]``) started on 127.0.0.1 with the iclr guardrail,
in front of a scripted upstream (:mod:`serve_fixtures`).

LiteLLM pins ``rich<14``, older than what iclr's own extras install (its ``huggingface-hub<2``
the model extra shares), so ``scripts/setup.sh`` installs it in a virtual environment of its own, ``.venv/litellm-proxy``
(iclr's runtime dependencies and the ``litellm`` extra); the proxy process imports this
checkout's ``iclr_cli`` through ``PYTHONPATH``. ``ICLR_LITELLM_BIN`` names another ``litellm``
executable. Without one the tests skip, saying how to get it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent
MASTER_KEY = "sk-litellm-master"


def litellm_bin() -> str | None:
    """The ``litellm`` executable the tests start (see module docstring), or ``None``."""
    named = os.environ.get("ICLR_LITELLM_BIN")
    if named:
        return named
    for venv in (Path(sys.prefix) / "litellm-proxy", ROOT / ".venv" / "litellm-proxy"):
        exe = venv / "bin" / "litellm"
        if exe.exists():
            return str(exe)
    return shutil.which("litellm")


def require_litellm() -> str:
    exe = litellm_bin()
    if exe is None:
        pytest.skip("the LiteLLM proxy is not installed (bash scripts/setup.sh puts it in .venv/litellm-proxy)")
    return exe


def proxy_python() -> str:
    """The Python of the LiteLLM proxy's environment (it imports ``litellm``)."""
    return str(Path(require_litellm()).parent / "python")


def docs_guardrail() -> tuple[list[str], dict]:
    """The ``guardrails:`` section of docs/litellm.md's example config: (its lines up to the
    options, the options it sets as text), so that a test runs LiteLLM with the lines the page
    tells users to write."""
    page = (ROOT / "docs" / "litellm.md").read_text()
    block = page.split("```yaml\n", 1)[1].split("```", 1)[0]
    section = block[block.index("guardrails:"):].splitlines()
    head, options = [], {}
    for line in section:
        key, _, value = line.strip().partition(":")
        value = value.split("#", 1)[0].strip()
        if key in ("upstream_kind", "state_dir"):
            options[key] = value
        else:
            head.append(line.split("#", 1)[0].rstrip())
    return head, options


def config_yaml(upstream_url: str, *, options: dict | None = None, guardrail: bool = True, from_docs: bool = False,
                openai_model: str = "fake-model", anthropic_model: str = "claude-x") -> str:
    """A LiteLLM config: two model names on the scripted upstream (``openai_model`` as an
    OpenAI deployment for chat completions and Responses, ``anthropic_model`` as an Anthropic
    one for /v1/messages; each sent upstream under the same name) and, with ``guardrail``, the
    iclr guardrail with ``options``. Kept in the shape docs/litellm.md shows."""
    base = upstream_url.removesuffix("/v1")
    lines = [
        "model_list:",
        f"  - model_name: {openai_model}",
        "    litellm_params:",
        f"      model: openai/{openai_model}",
        f"      api_base: {base}/v1",
        "      api_key: sk-upstream",
        f"  - model_name: {anthropic_model}",
        "    litellm_params:",
        f"      model: anthropic/{anthropic_model}",
        f"      api_base: {base}",
        "      api_key: sk-upstream",
        "general_settings:",
        f"  master_key: {MASTER_KEY}",
    ]
    if guardrail and from_docs:
        head, documented = docs_guardrail()
        lines += head + [f"      {k}: {_yaml(v)}" for k, v in {**documented, **(options or {})}.items()]
    elif guardrail:
        lines += [
            "guardrails:",
            "  - guardrail_name: iclr",
            "    litellm_params:",
            "      guardrail: iclr_cli.serve.litellm_guardrail.IclrGuardrail",
            "      mode: [pre_call, post_call]",
            "      default_on: true",
        ]
        lines += [f"      {k}: {_yaml(v)}" for k, v in (options or {}).items()]
    return "\n".join(lines) + "\n"


def _yaml(value) -> str:
    if value is True or value is False:
        return "true" if value else "false"
    if value == float("inf"):
        return ".inf"
    return str(value)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def litellm_proxy(config: str, tmp_path: Path, *, name: str = "litellm", workers: int = 1, env: dict | None = None) -> Iterator[str]:
    """Start ``litellm --config`` (``config``: the YAML text) on a free loopback port with
    ``--num_workers workers`` and ``env`` added to the environment; yields its base URL (no
    ``/v1``). The proxy's output goes to ``tmp_path/<name>.log``, shown when it fails to start.
    Stopped with SIGTERM at the end."""
    exe = require_litellm()
    path = tmp_path / f"{name}.yaml"
    path.write_text(config)
    log_path = tmp_path / f"{name}.log"
    port = _free_port()
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(ROOT), "LITELLM_LOG": "WARNING", **(env or {})}
    with open(log_path, "wb") as out:
        proc = subprocess.Popen([exe, "--config", str(path), "--host", "127.0.0.1", "--port", str(port), "--num_workers", str(workers)],
                                env=env, stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"litellm exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/health/liveliness", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise AssertionError(f"litellm did not start in 180 s:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
