"""The iclr guardrail inside the real LiteLLM proxy (docs/litellm.md): the anthropic and openai
SDKs through LiteLLM to a scripted upstream, against the same session through ``iclr serve``.

Each test starts ``litellm --config`` (:mod:`litellm_fixtures`; about 15 s) with the fake
proxy model and no latency budget (every step waits for its scores), so the bytes sent never
depend on this machine's speed.
"""

from __future__ import annotations

import os
import subprocess

import orjson
import pytest

from litellm_fixtures import MASTER_KEY, ROOT, config_yaml, litellm_proxy, proxy_python, require_litellm
from replay_fixtures import call, completion
from serve_fixtures import proxy, scripted_upstream, stream_of
from wire_fixtures import SIGNATURE, anthropic_reply, function_call, output_message, reasoning_item, responses_reply, text, thinking, tool_use

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")
pytestmark = pytest.mark.slow

REASONING = "Read the task.\n\nList the files.\n\nThe bug is in parse().\n\nRun the tests after."
SYSTEM = [{"type": "text", "text": "You are an agent.", "cache_control": {"type": "ephemeral"}}]
TOOLS = [{"name": "Bash", "description": "Run a command", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]
USER = {"role": "user", "content": "Fix the bug."}
# no latency budget and the fake scorer: what is sent never depends on how fast this machine is
ENGINE = {"proxy_model": "fake", "max_wait": float("inf"), "upstream_kind": "local"}


def _anthropic_script(streamed: bool) -> list:
    steps = [anthropic_reply([thinking(REASONING), tool_use(f"toolu_{i}", "Bash", {"command": f"ls {i}"})], stream=streamed) for i in range(3)]
    return steps + [anthropic_reply([thinking(REASONING), text("Fixed.")], stream=streamed)]


def anthropic_session(base_url: str, key: str, streamed: bool) -> list[list[dict]]:
    """Four turns of an agent through ``base_url`` (the anthropic SDK); the content blocks
    the client got back each turn."""
    client = anthropic.Anthropic(base_url=base_url, api_key=key, max_retries=0, timeout=60)
    messages, got = [USER], []
    for i in range(4):
        kw = dict(model="claude-x", max_tokens=1000, system=SYSTEM, tools=TOOLS, messages=messages)
        if streamed:
            with client.messages.stream(**kw) as stream:
                out = stream.get_final_message()
        else:
            out = client.messages.create(**kw)
        blocks = [b.model_dump(exclude_none=True, exclude={"caller", "toolset_name"}) for b in out.content]
        got.append(blocks)
        messages = messages + [{"role": "assistant", "content": blocks},
                               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"out {i}"}]}]
    return got


def _sent(up) -> list[dict]:
    """The request bodies the upstream got, without ``stream: false`` (LiteLLM writes the
    default the client left out; it changes nothing the upstream does)."""
    bodies = []
    for raw in up.raw:
        body = orjson.loads(raw)
        if body.get("stream") is False:
            del body["stream"]
        bodies.append(body)
    return bodies


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_anthropic_sdk_through_litellm_sends_what_serve_sends(tmp_path, streamed):
    require_litellm()
    with scripted_upstream(_anthropic_script(streamed)) as up, litellm_proxy(config_yaml(up.url, options=ENGINE), tmp_path) as url:
        got = anthropic_session(url, MASTER_KEY, streamed)
    through_litellm = _sent(up)
    with scripted_upstream(_anthropic_script(streamed)) as up, proxy(up.url, upstream_kind="local") as (url, _):
        anthropic_session(url.removesuffix("/v1"), "sk-client", streamed)
    through_serve = _sent(up)

    assert all(blocks[0] == thinking(REASONING) for blocks in got)  # the client gets each reply unchanged
    assert through_litellm == through_serve
    for before, after in zip(through_litellm, through_litellm[1:]):  # each request extends the last one as sent
        assert after["messages"][: len(before["messages"])] == before["messages"]
        assert after["system"] == SYSTEM and after["tools"] == TOOLS
    last = through_litellm[-1]["messages"]
    sent = [m["content"][0] for m in last if m["role"] == "assistant"]
    # a plain upstream (local): each completed step's thinking compressed once, its signature kept
    assert [b["thinking"].count("[SKIP]") for b in sent] == [3, 3, 3]
    assert all(b["signature"] == SIGNATURE for b in sent)
    assert [m["content"][1] for m in last if m["role"] == "assistant"] == [tool_use(f"toolu_{i}", "Bash", {"command": f"ls {i}"}) for i in range(3)]


CHAT_SYSTEM = {"role": "system", "content": "You are an agent."}
CHAT_TOOLS = [{"type": "function", "function": {"name": "bash", "description": "Run a command", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}]


def _chat_script(streamed: bool) -> list:
    if not streamed:
        return [completion(None, [call("bash", {"command": f"ls {i}"}, call_id=f"call_{i}")], reasoning_content=REASONING) for i in range(3)] + [completion("done")]
    return [stream_of(f"Step {i} done.", reasoning=REASONING) for i in range(3)] + [stream_of("done")]


def chat_session(base_url: str, key: str, streamed: bool) -> list[str]:
    """Four turns through ``base_url`` with the openai SDK's chat completions (a tool step
    each, or a text step each when ``streamed``); the reasoning the client got each turn."""
    client = openai.OpenAI(base_url=base_url + "/v1", api_key=key, max_retries=0, timeout=60)
    messages, got = [CHAT_SYSTEM, {"role": "user", "content": "Fix the bug."}], []
    for i in range(4):
        if streamed:
            chunks = list(client.chat.completions.create(model="fake-model", messages=messages, tools=CHAT_TOOLS, stream=True))
            deltas = [c.choices[0].delta for c in chunks if c.choices]
            reasoning = "".join((d.model_extra or {}).get("reasoning_content") or "" for d in deltas)
            message = {"role": "assistant", "content": "".join(d.content or "" for d in deltas), "reasoning_content": reasoning}
            follow = {"role": "user", "content": f"Go on ({i})."}
        else:
            out = client.chat.completions.create(model="fake-model", messages=messages, tools=CHAT_TOOLS)
            message = out.choices[0].message.model_dump(exclude_none=True)
            reasoning = message.get("reasoning_content") or (out.choices[0].message.model_extra or {}).get("reasoning_content")
            follow = {"role": "tool", "tool_call_id": f"call_{i}", "content": f"out {i}"}
        got.append(reasoning)
        messages = messages + [message, follow]
    return got


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_openai_chat_through_litellm_sends_what_serve_sends(tmp_path, streamed):
    require_litellm()
    with scripted_upstream(_chat_script(streamed)) as up, litellm_proxy(config_yaml(up.url, options=ENGINE), tmp_path) as url:
        got = chat_session(url, MASTER_KEY, streamed)
    through_litellm = _sent(up)
    with scripted_upstream(_chat_script(streamed)) as up, proxy(up.url, upstream_kind="local") as (url, _):
        chat_session(url.removesuffix("/v1"), "sk-client", streamed)
    through_serve = _sent(up)

    assert got[:3] == [REASONING] * 3  # the client gets each reply unchanged
    assert [b["messages"] for b in through_litellm] == [b["messages"] for b in through_serve]
    for before, after in zip(through_litellm, through_litellm[1:]):
        assert after["messages"][: len(before["messages"])] == before["messages"]
    sent = [m for m in through_litellm[-1]["messages"] if m["role"] == "assistant"]
    assert [m["reasoning_content"].count("[SKIP]") for m in sent] == [3, 3, 3]
    if not streamed:
        assert [m["tool_calls"][0]["id"] for m in sent] == ["call_0", "call_1", "call_2"]


def _responses_script(streamed: bool) -> list:
    steps = [responses_reply([reasoning_item(REASONING, f"rs_{i}"), function_call(f"call_{i}", "shell", {"cmd": f"ls {i}"})],
                             stream=streamed, response_id=f"resp_{i}") for i in range(3)]
    steps.append(responses_reply([output_message("Fixed.")], stream=streamed))
    for reply in steps:  # OpenAI sends created_at, and LiteLLM requires it of a whole response
        if not streamed:
            reply.body["created_at"] = 1700000000
    return steps


def responses_session(base_url: str, key: str, streamed: bool) -> list[list[dict]]:
    client = openai.OpenAI(base_url=base_url + "/v1", api_key=key, max_retries=0, timeout=60)
    items, got = [{"role": "user", "content": "Fix the bug."}], []
    tools = [{"type": "function", "name": "shell", "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}]
    for i in range(4):
        kw = dict(model="fake-model", input=items, instructions="You are an agent.", tools=tools, store=False)
        if streamed:
            out = [e for e in client.responses.create(stream=True, **kw) if e.type == "response.completed"][0].response
        else:
            out = client.responses.create(**kw)
        output = [o.model_dump(exclude_none=True) for o in out.output]
        got.append(output)
        items = items + output + [{"type": "function_call_output", "call_id": f"call_{i}", "output": f"out {i}"}]
    return got


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_openai_responses_through_litellm_sends_what_serve_sends(tmp_path, streamed):
    require_litellm()
    with scripted_upstream(_responses_script(streamed)) as up, litellm_proxy(config_yaml(up.url, options=ENGINE), tmp_path) as url:
        got = responses_session(url, MASTER_KEY, streamed)
    through_litellm = _sent(up)
    with scripted_upstream(_responses_script(streamed)) as up, proxy(up.url, upstream_kind="local") as (url, _):
        responses_session(url.removesuffix("/v1"), "sk-client", streamed)
    through_serve = _sent(up)

    assert [out[0]["content"][0]["text"] for out in got[:3]] == [REASONING] * 3
    assert [b["input"] for b in through_litellm] == [b["input"] for b in through_serve]
    reasoning = [i for i in through_litellm[-1]["input"] if i.get("type") == "reasoning"]
    assert [r["content"][0]["text"].count("[SKIP]") for r in reasoning] == [3, 3, 3]
    calls = [i for i in through_litellm[-1]["input"] if i.get("type") == "function_call"]
    assert [c["call_id"] for c in calls] == ["call_0", "call_1", "call_2"]


def test_decisions_survive_a_litellm_restart(tmp_path):
    """Steps decided before a restart come back from the state folder, and so does the step
    the first proxy scored ahead after relaying its reply (an offer): the restarted proxy
    waits for no scores at all (``max_wait: 0``: a step it had to score itself would go as
    generated), yet sends every earlier step compressed, the decided one byte for byte."""
    require_litellm()
    state_dir = tmp_path / "state"
    script = _anthropic_script(False)
    with scripted_upstream(script[:2]) as up:
        with litellm_proxy(config_yaml(up.url, options={**ENGINE, "state_dir": state_dir}), tmp_path, name="first") as url:
            client = anthropic.Anthropic(base_url=url, api_key=MASTER_KEY, max_retries=0, timeout=60)
            messages = [USER]
            for i in range(2):
                out = client.messages.create(model="claude-x", max_tokens=1000, system=SYSTEM, tools=TOOLS, messages=messages)
                blocks = [b.model_dump(exclude_none=True, exclude={"caller", "toolset_name"}) for b in out.content]
                messages = messages + [{"role": "assistant", "content": blocks},
                                       {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"out {i}"}]}]
            _wait_for_offers(state_dir / "serve.sqlite3", 1)
    before = _sent(up)
    restarted = {**ENGINE, "state_dir": state_dir, "max_wait": 0, "late": "as-sent"}
    with scripted_upstream(script[2:3]) as up, litellm_proxy(config_yaml(up.url, options=restarted), tmp_path, name="second") as url:
        anthropic.Anthropic(base_url=url, api_key=MASTER_KEY, max_retries=0, timeout=60).messages.create(
            model="claude-x", max_tokens=1000, system=SYSTEM, tools=TOOLS, messages=messages)
    after = _sent(up)[0]["messages"]
    # step 0 was decided before the restart; step 1 was offered (scored ahead) before it
    assert after[: len(before[1]["messages"])] == before[1]["messages"]
    assert after[1]["content"][0]["thinking"].count("[SKIP]") == 3
    assert after[3]["content"][0]["thinking"].count("[SKIP]") == 3


def _wait_for_offers(db, count: int, timeout_s: float = 60.0) -> None:
    """Until ``count`` steps scored ahead are written to the SQLite state ``db`` (the scorer
    publishes them after the reply, off the request path)."""
    import sqlite3
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with sqlite3.connect(db) as conn:
            if conn.execute("SELECT count(*) FROM offers WHERE step IS NOT NULL").fetchone()[0] >= count:
                return
        time.sleep(0.05)
    raise AssertionError(f"{db}: fewer than {count} offers after {timeout_s} s")


def test_a_serve_option_of_the_http_side_is_refused_and_named():
    code = ("from iclr_cli.serve.litellm_guardrail import options_from\n"
            "print(options_from({'variant': 'iclr', 'ratio': 0.5, 'max-wait': 'inf', 'late': 'compress-later', 'mask': False}))\n"
            "try:\n    options_from({'upstream': 'http://x'})\nexcept Exception as e:\n    print(type(e).__name__, e)\n")
    out = subprocess.run([proxy_python(), "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert out.returncode == 0, out.stderr[-2000:]
    first, second = out.stdout.splitlines()[-2:]
    assert "variant='iclr'" in first and "ratio=0.5" in first and "max_wait=inf" in first and "late='compress-later'" in first
    assert "upstream_kind='unknown'" in first
    assert second == "UsageError iclr guardrail: 'upstream' is not an option here: LiteLLM's model_list says where requests go and with which key"


def test_the_documented_config_keeps_claude_signed_thinking_as_generated(tmp_path):
    """docs/litellm.md's guardrail lines as written (``upstream_kind: anthropic``; only the
    state folder and the scorer are the test's): Claude's signed thinking is never edited, so
    the upstream gets each request's history as the client sent it, and what serve sends."""
    require_litellm()
    from litellm_fixtures import docs_guardrail

    head, documented = docs_guardrail()
    assert head[:6] == ["guardrails:", "  - guardrail_name: iclr", "    litellm_params:",
                        "      guardrail: iclr_cli.serve.litellm_guardrail.IclrGuardrail", "      mode: [pre_call, post_call]", "      default_on: true"]
    assert documented["upstream_kind"] == "anthropic"
    options = {"state_dir": tmp_path / "state", "proxy_model": "fake", "max_wait": float("inf")}
    with scripted_upstream(_anthropic_script(True)) as up, litellm_proxy(config_yaml(up.url, options=options, from_docs=True), tmp_path) as url:
        got = anthropic_session(url, MASTER_KEY, True)
    through_litellm = _sent(up)
    with scripted_upstream(_anthropic_script(True)) as up, proxy(up.url, upstream_kind="anthropic") as (url, _):
        anthropic_session(url.removesuffix("/v1"), "sk-client", True)
    assert through_litellm == _sent(up)
    sent = [m["content"] for m in through_litellm[-1]["messages"] if m["role"] == "assistant"]
    assert sent == got[:3]  # thinking and signature as generated, tool calls as the client sent them
    assert (tmp_path / "state").is_dir()
