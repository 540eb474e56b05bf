"""The iclr guardrail in a LiteLLM proxy with ``--num_workers 4``: four processes, each with the
guardrail and its own scorer, sharing LiteLLM's own Redis (``state: redis``, read from
``REDIS_HOST``/``REDIS_PORT`` as LiteLLM reads them). Whichever worker the kernel hands a
request to, the upstream must get the bytes one process sends, and no prefix break.

The scorer is the paced fake (``fake:1500``, the time of a proxy model that reads 1,500 tokens
a second): a worker that had to score a step from the start of the conversation would miss the
0.25-second budget. Without the shared state the same session, tried here, sent 3 of its 8
steps late and broke the prefix once. With ``serve_url`` the workers share one ``iclr serve``
(one proxy model for the machine) instead of a store."""

from __future__ import annotations

import os
import subprocess
import time
from urllib.parse import urlsplit

import orjson
import pytest

from litellm_fixtures import MASTER_KEY, ROOT, config_yaml, litellm_proxy, proxy_python, require_litellm
from serve_fixtures import proxy, scripted_upstream
from store_servers import redis_url  # noqa: F401  (fixture)
from test_serve_eager import SYSTEM, _assemble, responder

from iclr_cli.errors import UsageError
from iclr_cli.serve.auth import ClientKeys
from iclr_cli.serve.state_url import litellm_state

openai = pytest.importorskip("openai")
STEPS = 8


def session(base_url: str, key: str) -> None:
    """One streamed agent: 8 tool steps and an answer, half a second of tool time a step, each
    request on a new connection (a kept-alive one would stay with one worker throughout)."""
    messages = [SYSTEM, {"role": "user", "content": "fix the bug"}]
    for k in range(STEPS + 1):
        sdk = openai.OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=60)
        reply = _assemble(sdk.chat.completions.create(model="fake-model", messages=messages, stream=True))
        if not reply.get("tool_calls"):
            return
        time.sleep(0.5)  # the agent's tool: the worker that relayed the reply scores its step meanwhile
        messages = [*messages, reply, {"role": "tool", "tool_call_id": reply["tool_calls"][0]["id"], "content": f"out {k}"}]


@pytest.mark.slow
def test_four_litellm_workers_on_litellms_redis_send_what_one_process_sends(tmp_path, redis_url):
    require_litellm()
    where = urlsplit(redis_url)
    options = {"proxy_model": "fake:1500", "upstream_kind": "local", "max_wait": 0.25, "late": "as-sent", "state": "redis"}
    env = {"REDIS_HOST": where.hostname, "REDIS_PORT": str(where.port)}
    with scripted_upstream(responder(STEPS)) as up, litellm_proxy(config_yaml(up.url, options=options), tmp_path, workers=4, env=env) as url:
        session(url + "/v1", MASTER_KEY)
    _same_as_one_process([orjson.loads(b)["messages"] for b in up.raw])


def _same_as_one_process(four: list[list[dict]]) -> None:
    """``four`` (what the upstream got through LiteLLM's workers) is what one ``iclr serve``
    sends for the same session: no prefix break, every step compressed."""
    with scripted_upstream(responder(STEPS)) as up, proxy(up.url, upstream_kind="local") as (url, _):
        session(url, "sk")
    one = [orjson.loads(b)["messages"] for b in up.raw]
    assert len(four) == STEPS + 1
    assert four == one
    assert all(now[: len(before)] == before for before, now in zip(four, four[1:]))
    assert [m["reasoning_content"].count("[SKIP]") > 0 for m in four[-1] if m["role"] == "assistant"] == [True] * STEPS


def test_the_guardrail_reads_litellms_own_store_settings():
    env = {"REDIS_HOST": "cache", "REDIS_PORT": "6380", "REDIS_PASSWORD": "p@ss", "DATABASE_URL": "postgresql://u:p@db/litellm"}
    assert litellm_state("redis", env) == "redis://:p%40ss@cache:6380"
    assert litellm_state("redis", {**env, "REDIS_USERNAME": "iclr", "REDIS_SSL": "True"}) == "rediss://iclr:p%40ss@cache:6380"
    assert litellm_state("redis", {"REDIS_URL": "redis://r:1/2", **env}) == "redis://r:1/2"
    assert litellm_state("database", env) == "postgresql://u:p@db/litellm"
    assert litellm_state("os.environ/MY_STATE", {"MY_STATE": "/var/lib/iclr"}) == "/var/lib/iclr"
    assert litellm_state("/var/lib/iclr", {}) == "/var/lib/iclr"
    with pytest.raises(UsageError, match="state: redis reads REDIS_HOST, which is not set"):
        litellm_state("redis", {})
    with pytest.raises(UsageError, match="DATABASE_URL"):
        litellm_state("database", {})


@pytest.mark.slow
def test_four_litellm_workers_share_one_serve_and_its_one_proxy_model(tmp_path):
    """``serve_url``: the four workers send their hooks to one ``iclr serve`` (one proxy
    model, one batcher, one kept scorer state), with no store at all; the upstream gets the
    bytes one serve sends, every step is compressed, and no worker loads a scorer."""
    require_litellm()
    with scripted_upstream(responder(STEPS)) as up:
        with proxy(up.url, upstream_kind="local", proxy_model="fake:1500", max_wait=0.25, late="as-sent", client_keys=ClientKeys(["sk-iclr"])) as (serve_url, state):
            options = {"serve_url": serve_url.removesuffix("/v1"), "serve_key": "os.environ/ICLR_SERVE_KEY"}
            with litellm_proxy(config_yaml(up.url, options=options), tmp_path, workers=4, env={"ICLR_SERVE_KEY": "sk-iclr"}) as url:
                session(url + "/v1", MASTER_KEY)
            total = state.stats.total
    _same_as_one_process([orjson.loads(b)["messages"] for b in up.raw])
    assert (total.requests, total.steps_completed, total.steps_late) == (STEPS + 1, STEPS, 0)


def test_with_serve_url_a_worker_loads_no_model_and_a_down_serve_passes_requests_as_sent():
    """The guardrail with ``serve_url`` builds no engine (no scorer, no serve state in the
    worker: ``iclr_cli.pipeline`` is never imported), refuses a
    scoring option beside it, and forwards a request unchanged when the serve is down."""
    require_litellm()
    code = """
import asyncio, sys, time
from iclr_cli.serve.litellm_guardrail import IclrGuardrail
try:
    IclrGuardrail(serve_url="http://127.0.0.1:9", ratio=0.5)
except Exception as e:
    print(type(e).__name__, e)
g = IclrGuardrail(serve_url="http://127.0.0.1:9", serve_timeout=1, guardrail_name="iclr")
data = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "litellm_call_id": "c1"}
start = time.monotonic()
out = asyncio.run(g.async_pre_call_hook(None, None, dict(data), "acompletion"))
print(out == data, time.monotonic() - start < 1.5, g.engine, "iclr_cli.pipeline" in sys.modules, g.hooks.errors)
"""
    out = subprocess.run([proxy_python(), "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert out.returncode == 0, out.stderr[-2000:]
    refused, passed = out.stdout.splitlines()[-2:]
    assert refused == "UsageError iclr guardrail: ratio beside serve_url: the iclr serve at http://127.0.0.1:9 decides them (its own flags)"
    assert passed == "True True None False 1"
