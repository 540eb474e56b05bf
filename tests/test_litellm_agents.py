"""Claude Code and Codex (the real CLIs) through the real LiteLLM proxy with the iclr guardrail,
against the same session through ``iclr serve`` (docs/litellm.md).

Each test runs a CLI's task (three tool-calling steps and a final answer, the scripted
upstreams of :mod:`test_serve_agents`) once through LiteLLM with the guardrail and once through
``iclr serve``, in the same HOME and working folder (emptied in between: the CLIs write their
folders into the system prompt), with the fake proxy model and no latency budget, and checks:

- what the serve tests check (compressed once, prefixes stable, tool calls and results, the
  provider rules for signed and encrypted reasoning), on the bodies LiteLLM sent upstream;
- that those bodies carry the same history and request fields as serve sent, apart from what
  the CLI itself makes new each run (Claude Code's ``metadata.user_id``; Codex's
  ``prompt_cache_key`` and the ids it mints for its own items) and what LiteLLM changes on the
  way, asserted here as it does it (litellm 1.108.7; docs/litellm.md, "What LiteLLM changes"):
  it writes the body's keys in an order of its own, sends ``/v1/messages`` without Claude
  Code's ``?beta=true``, and on ``/v1/responses`` drops Codex's ``client_metadata`` and the
  ``encrypted_content: null`` of reasoning items;
- that the guardrail's counters are in LiteLLM's log (the ``iclr.litellm`` line).

About 40 s a test: LiteLLM's start (~15 s) and the two CLI runs.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from litellm_fixtures import MASTER_KEY, config_yaml, litellm_proxy, require_litellm
from serve_fixtures import proxy, scripted_upstream
from test_serve_agents import (STEPS, _assert_prefixes, _claude_call, _claude_script, _codex_script, _kept, _markers, _run_claude,
                               _run_codex, _strip_markers, clis, reasoning, thinking_compressed_once)  # noqa: F401 (clis: the fixture)
from wire_fixtures import thinking

pytestmark = pytest.mark.slow

# A model LiteLLM's price table lists as an adaptive-thinking one: for a name it does not know,
# LiteLLM drops Claude Code's `thinking: adaptive` and `output_config` (a warning in its log).
CLAUDE_MODEL = "claude-opus-4-8"
CODEX_MODEL = "gpt-test"  # test_serve_agents._run_codex's model
ENGINE = {"proxy_model": "fake", "max_wait": float("inf")}


def _both(tmp_path: Path, script, run, kind: str, **config) -> tuple[list, list, list, list, str]:
    """Run ``run(url, home, via_litellm)`` through LiteLLM with the guardrail (upstream kind
    ``kind``), then through ``iclr serve``, each against a fresh scripted upstream of
    ``script`` in the same ``home``; returns (LiteLLM's upstream paths, its bodies, serve's
    paths, its bodies, LiteLLM's log)."""
    require_litellm()
    home = tmp_path / "home"
    with scripted_upstream(script) as up:
        with litellm_proxy(config_yaml(up.url, options={**ENGINE, "upstream_kind": kind}, **config), tmp_path) as url:
            done = run(url + "/v1", home, True)
    assert done.returncode == 0, done.stderr[-2000:]
    litellm = (list(up.paths), [json.loads(raw) for raw in up.raw])
    shutil.rmtree(home)
    with scripted_upstream(script) as up, proxy(up.url, upstream_kind=kind) as (url, _):
        done = run(url, home, False)
    assert done.returncode == 0, done.stderr[-2000:]
    return *litellm, list(up.paths), [json.loads(raw) for raw in up.raw], (tmp_path / "litellm.log").read_text()


def _counters(log: str) -> dict:
    """The totals of the guardrail's last ``iclr.litellm`` line in LiteLLM's log."""
    lines = [line for line in log.splitlines() if line.startswith("iclr.litellm: ")]
    assert lines, log[-3000:]
    return json.loads(lines[-1].split(" totals ", 1)[1])


# -- Claude Code on /v1/messages -------------------------------------------------------------

def _claude(bins: Path):
    def run(url, home, via_litellm):
        env = {"ANTHROPIC_MODEL": CLAUDE_MODEL, **({"ANTHROPIC_API_KEY": MASTER_KEY} if via_litellm else {})}
        return _run_claude(bins, url, home, env=env)
    return run


def _same_claude_requests(paths: list[str], bodies: list[dict], serve_paths: list[str], serve_bodies: list[dict]) -> None:
    # LiteLLM calls the deployment's /v1/messages without the client's ?beta=true
    assert [p for p in paths if p.startswith("/v1/messages")] == ["/v1/messages"] * len(bodies)
    assert all(p == "/v1/messages?beta=true" for p in serve_paths)
    assert len(bodies) == len(serve_bodies) == STEPS + 1
    for ours, theirs in zip(bodies, serve_bodies):
        assert sorted(ours) == sorted(theirs) and list(ours) != list(theirs)  # the same fields, in LiteLLM's order
        for key in theirs:
            if key != "metadata":  # its user_id holds the CLI's device and session ids, new each run
                assert ours[key] == theirs[key], key


def test_claude_code_through_litellm_plain_upstream_sends_what_serve_sends(clis, tmp_path):
    paths, bodies, serve_paths, serve_bodies, log = _both(tmp_path, _claude_script(redacted=True), _claude(clis), "local", anthropic_model=CLAUDE_MODEL)
    _same_claude_requests(paths, bodies, serve_paths, serve_bodies)
    bodies = [b for b in bodies if b.get("tools")]
    _assert_prefixes(bodies, "messages", ("system", "tools", "thinking", "context_management"))
    last, assistants = thinking_compressed_once(bodies, _claude_call)
    assert {"type": "redacted_thinking", "data": "RVhBTVBMRS1SRURBQ1RFRA=="} in [_strip_markers(b) for b in assistants[1]["content"]]
    results = [b for m in last if m["role"] == "user" and isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_result"]
    assert [r["tool_use_id"] for r in results] == [f"toolu_{i}" for i in range(STEPS)]
    for b in bodies:  # LiteLLM leaves the client's one cache marker where Claude Code put it
        last_blocks = max(i for i, m in enumerate(b["messages"]) if isinstance(m["content"], list))
        assert [at[0] for at in _markers(b["messages"])] == [last_blocks]
    total = _counters(log)
    assert total["steps_compressed"] == STEPS and total["sealed"] == {"redacted_thinking (encrypted data, no text)": 1}
    assert total["reasoning_tokens_removed"] > 0 and total["requests"] == STEPS and total["output_tokens"] == 30 * STEPS


def test_claude_code_through_litellm_sealed_upstream_sends_what_serve_sends(clis, tmp_path):
    paths, bodies, serve_paths, serve_bodies, log = _both(tmp_path, _claude_script(redacted=False), _claude(clis), "anthropic", anthropic_model=CLAUDE_MODEL)
    _same_claude_requests(paths, bodies, serve_paths, serve_bodies)
    _assert_prefixes(bodies, "messages", ("system", "tools"))
    sent = [b for m in bodies[-1]["messages"] if m["role"] == "assistant" for b in m["content"] if b["type"] == "thinking"]
    assert [_strip_markers(b) for b in sent] == [thinking(reasoning(i)) for i in range(STEPS)]  # untouched, signatures included
    total = _counters(log)
    assert total["sealed_blocks"] == STEPS and total["reasoning_tokens_removed"] == 0


# -- Codex on /v1/responses ------------------------------------------------------------------

def _codex(bins: Path):
    def run(url, home, via_litellm):
        return _run_codex(bins, url, home, **({"key": MASTER_KEY} if via_litellm else {}))
    return run


def _minted(items: list[dict]) -> list[dict]:
    """``items`` without what Codex makes anew each run: the ids of its own messages and tool
    outputs (``msg_<uuid>``, ``fco_<uuid>``), a tool output's ``Chunk ID`` and ``Wall time``
    lines; and without ``encrypted_content: null``."""
    out = []
    for item in items:
        item = {k: v for k, v in item.items() if not (k == "encrypted_content" and v is None)}
        if item.get("type") in ("message", "function_call_output") and item.get("role") != "assistant":
            item.pop("id", None)
        if item.get("type") == "function_call_output" and isinstance(item.get("output"), str):
            item["output"] = re.sub(r"(?m)^(Chunk ID|Wall time): .*$", r"\1: ...", item["output"])
        out.append(item)
    return out


def _same_codex_requests(paths: list[str], bodies: list[dict], serve_paths: list[str], serve_bodies: list[dict]) -> None:
    assert paths == serve_paths == ["/v1/responses"] * (STEPS + 1)
    for ours, theirs in zip(bodies, serve_bodies):
        # LiteLLM drops client_metadata (Codex's thread and turn ids) and writes its own key order
        assert sorted(ours) == sorted(set(theirs) - {"client_metadata"}) and "client_metadata" in theirs
        for key in ours:
            if key == "input":
                assert _minted(ours[key]) == _minted(theirs[key])
            elif key != "prompt_cache_key":  # Codex's thread id, new each run
                assert ours[key] == theirs[key], key
        # LiteLLM drops `encrypted_content: null` from reasoning items; serve sends them as Codex did
        ours_rs, theirs_rs = ([i for i in b["input"] if i["type"] == "reasoning"] for b in (ours, theirs))
        assert ours_rs == [{k: v for k, v in i.items() if not (k == "encrypted_content" and v is None)} for i in theirs_rs]


def test_codex_through_litellm_plain_upstream_sends_what_serve_sends(clis, tmp_path):
    paths, bodies, serve_paths, serve_bodies, log = _both(tmp_path, _codex_script(encrypted=False), _codex(clis), "local", openai_model=CODEX_MODEL)
    _same_codex_requests(paths, bodies, serve_paths, serve_bodies)
    assert all(b["stream"] is True and b["store"] is False for b in bodies)
    _assert_prefixes(bodies, "input", ("instructions", "tools"))
    items = bodies[-1]["input"]
    rs = [i for i in items if i["type"] == "reasoning"]
    assert [r["id"] for r in rs] == [f"rs_{i}" for i in range(STEPS)]
    for step, item in enumerate(rs):
        (content,) = item["content"]
        assert _kept(content["text"], step)
        if step == 1:
            assert item["summary"] == [{"type": "summary_text", "text": content["text"]}]
        first = next(b["input"] for b in bodies if any(i.get("id") == item["id"] for i in b["input"]))
        assert next(i for i in first if i.get("id") == item["id"]) == item
    calls = [i for i in items if i["type"] == "function_call"]
    assert [(c["id"], c["call_id"], json.loads(c["arguments"])) for c in calls] == [(f"fc_call_{i}", f"call_{i}", {"cmd": f"echo step {i}"}) for i in range(STEPS)]
    outputs = [i for i in items if i["type"] == "function_call_output"]
    assert [o["call_id"] for o in outputs] == [f"call_{i}" for i in range(STEPS)] and all(f"step {i}" in o["output"] for i, o in enumerate(outputs))
    total = _counters(log)
    assert total["steps_compressed"] == STEPS and total["reasoning_tokens_removed"] > 0
    # every reply recorded, though Codex hangs up at `response.completed` (the line before the
    # last request counts the three before it)
    assert total["requests"] == STEPS and total["upstream_errors"] == 0 and total["output_tokens"] == 30 * STEPS


def test_codex_through_litellm_sealed_upstream_sends_what_serve_sends(clis, tmp_path):
    paths, bodies, serve_paths, serve_bodies, log = _both(tmp_path, _codex_script(encrypted=True), _codex(clis), "openai", openai_model=CODEX_MODEL)
    _same_codex_requests(paths, bodies, serve_paths, serve_bodies)
    _assert_prefixes(bodies, "input", ("instructions", "tools"))
    rs = [i for i in bodies[-1]["input"] if i["type"] == "reasoning"]
    assert [(r["content"][0]["text"], r["encrypted_content"]) for r in rs] == [(reasoning(i), f"gAAAAB-opaque-{i}") for i in range(STEPS)]
    total = _counters(log)
    assert total["sealed_blocks"] == STEPS and total["reasoning_tokens_removed"] == 0
