"""End to end: the real Codex CLI compressing its request bodies with zstd, through ``iclr serve``.

Codex compresses ``/responses`` bodies (``Content-Encoding: zstd``) when it talks to the
ChatGPT backend with ChatGPT sign-in and its ``enable_request_compression`` feature; pointed at
a proxy by base URL it sends the proxy those bodies. The test signs Codex in with a ChatGPT
token of its own making (``auth.json``; nothing leaves 127.0.0.1) and checks that serve decodes
every body, compresses the earlier steps' reasoning as for a plain body, and sends the upstream
plain JSON with no ``Content-Encoding`` (serve/encoding.py says why). Skipped when npm or the
CLI is missing (tests/test_serve_agents.py).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time

import httpx
import pytest

from serve_fixtures import proxy, scripted_upstream
from test_serve_agents import STEPS, _codex_script, _kept, clis  # noqa: F401 (clis is a fixture)

pytestmark = pytest.mark.server
pytest.importorskip("zstandard")


def _b64(value: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def _chatgpt_sign_in(codex_home) -> None:
    """An ``auth.json`` as ``codex login`` writes it for a ChatGPT plan (an unsigned token: the
    proxy and the scripted upstream never check it)."""
    now = int(time.time())
    claims = {"email": "dev@example.com", "iat": now, "exp": now + 30 * 86400,
              "https://api.openai.com/auth": {"chatgpt_account_id": "acc-1", "chatgpt_plan_type": "pro", "chatgpt_user_id": "u-1"}}
    token = f"{_b64({'alg': 'RS256', 'typ': 'JWT'})}.{_b64(claims)}.c2ln"
    (codex_home / "auth.json").write_text(json.dumps({
        "auth_mode": "chatgpt", "OPENAI_API_KEY": None, "last_refresh": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tokens": {"id_token": token, "access_token": token, "refresh_token": "rt-1", "account_id": "acc-1"}}))


def test_codex_zstd_bodies_are_decoded_compressed_and_sent_plain(clis, tmp_path):
    codex_home, work = tmp_path / "codex", tmp_path / "work"
    codex_home.mkdir()
    work.mkdir()
    _chatgpt_sign_in(codex_home)
    with scripted_upstream(_codex_script(encrypted=False)) as up, proxy(up.url) as (url, _):
        (codex_home / "config.toml").write_text(f'model = "gpt-test"\nchatgpt_base_url = "{url}"\nopenai_base_url = "{url}"\n\n[features]\nenable_request_compression = true\n')
        run = subprocess.run(
            [str(clis / "codex"), "exec", "--skip-git-repo-check", "-s", "danger-full-access", "Echo step 0, step 1 and step 2, one command each."],
            cwd=work, env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "CODEX_HOME": str(codex_home), "OPENAI_BASE_URL": url},
            capture_output=True, text=True, timeout=360, stdin=subprocess.DEVNULL)
        stats = httpx.get(url.removesuffix("/v1") + "/stats").json()
    assert run.returncode == 0, run.stderr[-2000:]
    # every /responses body came zstd-compressed and was read (the other posts are Codex's own
    # telemetry and plugin calls, passed through)
    assert stats["request_bodies"] == {"zstd": {"decoded": STEPS + 1}}
    sent = [(raw, headers) for raw, path, headers in zip(up.raw, up.paths, up.headers) if path == "/v1/responses"]
    assert len(sent) == STEPS + 1 and all("content-encoding" not in headers for _, headers in sent)
    bodies = [json.loads(raw) for raw, _ in sent]
    rs = [i for i in bodies[-1]["input"] if i["type"] == "reasoning"]
    assert [r["id"] for r in rs] == [f"rs_{i}" for i in range(STEPS)]
    assert all(_kept(item["content"][0]["text"], step) for step, item in enumerate(rs))
    assert stats["total"]["steps_compressed"] == STEPS
