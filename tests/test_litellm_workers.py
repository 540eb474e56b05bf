"""The iclr guardrail in a LiteLLM proxy with ``--num_workers 4``: four processes, each with the
guardrail and its own scorer, sharing LiteLLM's own Redis (``state: redis``, read from
``REDIS_HOST``/``REDIS_PORT`` as LiteLLM reads them). Whichever worker the kernel hands a
request to, the upstream must get the bytes one process sends, and no prefix break.

The scorer is the paced fake (``fake:1500``, the time of a proxy model that reads 1,500 tokens
a second): a worker that had to score a step from the start of the conversation would miss the
0.25-second budget. Without the shared state the same session, tried here, sent 3 of its 8
steps late and broke the prefix once."""

from __future__ import annotations

import time
from urllib.parse import urlsplit

import orjson
import pytest

from litellm_fixtures import MASTER_KEY, config_yaml, litellm_proxy, require_litellm
from serve_fixtures import proxy, scripted_upstream
from store_servers import redis_url  # noqa: F401  (fixture)
from test_serve_eager import SYSTEM, _assemble, responder

from iclr_cli.errors import UsageError
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
    four = [orjson.loads(b)["messages"] for b in up.raw]
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
