"""End to end: Claude Code and Codex (the real CLIs from npm) through ``iclr serve``.

Each CLI runs a task of three tool-calling steps and a final answer against a scripted
upstream on 127.0.0.1 (Anthropic Messages for Claude Code, OpenAI Responses for Codex) with
the proxy in between, and the test reads the request bodies the upstream received:

- each request starts with the previous one at the JSON level (Claude Code moves its one
  ``cache_control`` marker to the last message, so markers are compared apart: the proxy
  sends each exactly where the client put it), with ``system`` / ``instructions`` and
  ``tools`` unchanged;
- on a plain upstream (127.0.0.1: ``local``) every earlier step's thinking / reasoning_text is
  compressed, once: the same bytes in every later request, one scoring per step;
- tool calls and results are what the upstream returned and the CLI ran;
- on a sealed upstream (``--upstream-kind anthropic`` / ``openai``) thinking blocks, their
  signatures, ``redacted_thinking`` and encrypted reasoning items come back untouched, and
  ``/stats`` counts them as sealed.

The CLIs are looked up in ``$ICLR_AGENT_CLIS/node_modules/.bin``, then
``~/.cache/iclr/agent-clis``; when neither has them and npm is on PATH they are installed there
(``npm install @anthropic-ai/claude-code @openai/codex``, as ``scripts/agent_clis.sh`` does).
Skipped when npm or the CLIs are missing. Codex talks HTTP + SSE to a custom provider
(``supports_websockets`` is false unless set; the test sets it false explicitly and checks
every request was an HTTP POST).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from agent_cli_fixtures import agent_bin, unavailable
from doc_recipes import command, recipe
from serve_fixtures import Stream, proxy, scripted_upstream
from wire_fixtures import SIGNATURE, anthropic_reply, function_call, output_message, reasoning_item, responses_reply, text, thinking, tool_use

pytestmark = pytest.mark.server
pytest.importorskip("starlette")

STEPS = 3


def _clis() -> Path | None:
    """The ``node_modules/.bin`` folder holding ``claude`` and ``codex`` (:func:`agent_cli_fixtures.agent_bin`),
    installed by ``scripts/install_agent_clis.sh`` (every agent CLI) when missing and npm is there."""
    def found() -> Path | None:
        claude = agent_bin("claude")
        return claude.parent if claude is not None and (claude.parent / "codex").exists() else None

    if found() is None and shutil.which("npm") is not None:
        try:
            subprocess.run(["bash", str(Path(__file__).resolve().parents[1] / "scripts" / "install_agent_clis.sh")],
                           capture_output=True, timeout=1200, check=True)
        except (subprocess.SubprocessError, OSError):
            return None
    return found()


@pytest.fixture(scope="module")
def clis() -> Path:
    found = _clis()
    if found is None:
        unavailable("npm or the Claude Code / Codex CLIs are missing (set ICLR_AGENT_CLIS to a folder with node_modules/.bin/{claude,codex})")
    return found


def reasoning(step: int) -> str:
    return "\n\n".join([
        f"Step {step}: the task asks for three echoes.",
        f"I could list the folder first, but that is not needed for step {step}.",
        "Maybe check the shell works.",
        f"The command for this step is echo step {step}.",
        "After it, count the steps done.",
    ])


def _kept(sent: str, step: int) -> bool:
    """``sent`` is step ``step``'s reasoning with 4 of its 5 blocks replaced by ``[SKIP]``
    (BottomK at rho = 0.8), the kept block as generated."""
    blocks = sent.split("\n\n")
    kept = [b for b in blocks if b != "[SKIP]"]
    return len(blocks) == 5 and len(kept) == 1 and kept[0] in reasoning(step).split("\n\n")


def _strip_markers(value):
    if isinstance(value, dict):
        return {k: _strip_markers(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip_markers(v) for v in value]
    return value


def _markers(messages: list) -> list[tuple]:
    out = []
    for i, msg in enumerate(messages):
        for j, block in enumerate(msg["content"] if isinstance(msg.get("content"), list) else []):
            if isinstance(block, dict) and "cache_control" in block:
                out.append((i, j, json.dumps(block["cache_control"])))
    return out


def _assert_prefixes(bodies: list[dict], field: str, context: tuple[str, ...]) -> None:
    for before, after in zip(bodies, bodies[1:]):
        assert _strip_markers(after[field][: len(before[field])]) == _strip_markers(before[field])
        for key in context:
            assert json.dumps(after.get(key)) == json.dumps(before.get(key)), key


# -- Claude Code -----------------------------------------------------------------------------

def _claude_script(redacted: bool):
    def reply(body, index):
        turns = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
        if not body.get("tools") or turns >= STEPS:
            return anthropic_reply([text("All three steps are done.")], stream=bool(body.get("stream")))
        blocks = [thinking(reasoning(turns))]
        if redacted and turns == 1:
            blocks.append({"type": "redacted_thinking", "data": "RVhBTVBMRS1SRURBQ1RFRA=="})
        blocks.append(tool_use(f"toolu_{turns}", "Bash", {"command": f"echo step {turns}", "description": f"Echo step {turns}"}))
        return anthropic_reply(blocks, stream=bool(body.get("stream")), message_id=f"msg_{turns}")

    return [reply] * 20


def _run_claude(bins: Path, url: str, home: Path, timeout: float = 300, env: dict | None = None,
                prompt: str = "Echo step 0, step 1 and step 2, one command each.") -> subprocess.CompletedProcess:
    """``claude -p`` pointed at ``url`` as docs/serve.md's recipe says (also used by
    benchmarks/bench_serve_agents.py); ``env`` adds to or overrides its environment."""
    work = home / "work"
    work.mkdir(parents=True, exist_ok=True)
    told, argv = command("claude-code", url)
    assert argv == ["claude"] and told["ANTHROPIC_BASE_URL"] == url.removesuffix("/v1"), (told, argv)
    env = {
        "PATH": os.environ.get("PATH", ""), "HOME": str(home), **told, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1", "API_TIMEOUT_MS": str(int(timeout * 1000)), **(env or {}),
    }
    return subprocess.run([str(bins / "claude"), "-p", prompt, "--allowedTools", "Bash"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=timeout + 60)


def _main_requests(up) -> list[dict]:
    return [json.loads(raw) for raw, path in zip(up.raw, up.paths) if path.startswith("/v1/messages") and "count_tokens" not in path and json.loads(raw).get("tools")]


def test_claude_code_through_serve_plain_upstream(clis, tmp_path):
    with scripted_upstream(_claude_script(redacted=True)) as up, proxy(up.url) as (url, state):
        run = _run_claude(clis, url, tmp_path)
        stats = httpx.get(url.removesuffix("/v1") + "/stats").json()
    assert run.returncode == 0, run.stderr[-2000:]
    bodies = _main_requests(up)
    assert len(bodies) == STEPS + 1 and all(p.endswith("?beta=true") for p in up.paths if p.startswith("/v1/messages"))
    _assert_prefixes(bodies, "messages", ("system", "tools", "thinking", "context_management"))
    last, assistants = thinking_compressed_once(bodies, _claude_call)
    # redacted_thinking is never touched
    assert {"type": "redacted_thinking", "data": "RVhBTVBMRS1SRURBQ1RFRA=="} in [_strip_markers(b) for b in assistants[1]["content"]]
    results = [b for m in last if m["role"] == "user" and isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_result"]
    assert [r["tool_use_id"] for r in results] == [f"toolu_{i}" for i in range(STEPS)]
    assert all(f"step {i}" in json.dumps(r["content"]) for i, r in enumerate(results))
    # the client's one cache marker is where Claude Code puts it (its last message with blocks):
    # it moves every request, which is why prefixes are compared without markers
    for b in bodies:
        last_blocks = max(i for i, m in enumerate(b["messages"]) if isinstance(m["content"], list))
        assert [at[0] for at in _markers(b["messages"])] == [last_blocks]
    total = stats["total"]
    assert total["steps_compressed"] == STEPS and total["sealed"] == {"redacted_thinking (encrypted data, no text)": 1}
    assert total["reasoning_tokens_removed"] > 0 and stats["upstream_kind"] == "local"


def test_claude_code_through_serve_sealed_upstream(clis, tmp_path):
    with scripted_upstream(_claude_script(redacted=False)) as up, proxy(up.url, upstream_kind="anthropic") as (url, _):
        run = _run_claude(clis, url, tmp_path)
        stats = httpx.get(url.removesuffix("/v1") + "/stats").json()
    assert run.returncode == 0, run.stderr[-2000:]
    bodies = _main_requests(up)
    _assert_prefixes(bodies, "messages", ("system", "tools"))
    sent = [b for m in bodies[-1]["messages"] if m["role"] == "assistant" for b in m["content"] if b["type"] == "thinking"]
    assert [_strip_markers(b) for b in sent] == [thinking(reasoning(i)) for i in range(STEPS)]  # untouched, signatures included
    assert stats["total"]["sealed_blocks"] == STEPS and stats["total"]["reasoning_tokens_removed"] == 0


# -- Codex -----------------------------------------------------------------------------------

def _codex_script(encrypted: bool):
    def reply(body, index):
        calls = sum(1 for item in body.get("input", []) if item.get("type") == "function_call")
        if calls >= STEPS:
            return responses_reply([output_message("All three steps are done.", f"msg_{calls}")], stream=True, response_id=f"resp_{calls}")
        item = reasoning_item(reasoning(calls), f"rs_{calls}", summary=calls == 1, encrypted="gAAAAB-opaque-{}".format(calls) if encrypted else None)
        return responses_reply([item, function_call(f"call_{calls}", "exec_command", {"cmd": f"echo step {calls}"})], stream=True, response_id=f"resp_{calls}")

    return [reply] * 20


def _run_codex(bins: Path, url: str, home: Path, timeout: float = 300, idle_timeout: float | None = None,
               prompt: str = "Echo step 0, step 1 and step 2, one command each.", key: str = "sk-codex-test") -> subprocess.CompletedProcess:
    """``codex exec`` with docs/serve.md's provider recipe pointed at ``url`` (also used by
    benchmarks/bench_serve_agents.py); ``idle_timeout``: the provider's
    ``stream_idle_timeout_ms`` in seconds (default ``timeout``); ``key``: the provider's API key."""
    codex_home, work = home / "codex", home / "work"
    codex_home.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    provider = recipe("codex").replace("http://127.0.0.1:8789/v1", url)
    assert f'base_url = "{url}"' in provider and 'env_key = "OPENAI_API_KEY"' in provider, provider
    # the test's own model name first, and its idle timeout in the provider's table (the last one)
    (codex_home / "config.toml").write_text(f'model = "gpt-test"\n{provider}\nstream_idle_timeout_ms = {int((idle_timeout or timeout) * 1000)}\n')
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "CODEX_HOME": str(codex_home), "OPENAI_API_KEY": key}
    return subprocess.run([str(bins / "codex"), "exec", "--skip-git-repo-check", "-s", "danger-full-access", prompt],
                          cwd=work, env=env, capture_output=True, text=True, timeout=timeout + 60, stdin=subprocess.DEVNULL)


def test_codex_through_serve_plain_upstream(clis, tmp_path):
    with scripted_upstream(_codex_script(encrypted=False)) as up, proxy(up.url) as (url, _):
        run = _run_codex(clis, url, tmp_path)
        stats = httpx.get(url.removesuffix("/v1") + "/stats").json()
    assert run.returncode == 0, run.stderr[-2000:]
    assert up.paths and all(p == "/v1/responses" for p in up.paths) and not up.get_headers  # HTTP POST + SSE, no WebSocket
    bodies = [json.loads(raw) for raw in up.raw]
    assert len(bodies) == STEPS + 1 and all(b["stream"] is True and b["store"] is False for b in bodies)
    _assert_prefixes(bodies, "input", ("instructions", "tools"))
    items = bodies[-1]["input"]
    rs = [i for i in items if i["type"] == "reasoning"]
    assert [r["id"] for r in rs] == [f"rs_{i}" for i in range(STEPS)]
    for step, item in enumerate(rs):
        (content,) = item["content"]
        assert _kept(content["text"], step)
        if step == 1:  # a summary with the same text is edited with it
            assert item["summary"] == [{"type": "summary_text", "text": content["text"]}]
        first = next(b["input"] for b in bodies if any(i.get("id") == item["id"] for i in b["input"]))
        assert next(i for i in first if i.get("id") == item["id"]) == item  # compressed once, sent the same ever after
    calls = [i for i in items if i["type"] == "function_call"]
    assert [(c["id"], c["call_id"], json.loads(c["arguments"])) for c in calls] == [(f"fc_call_{i}", f"call_{i}", {"cmd": f"echo step {i}"}) for i in range(STEPS)]
    outputs = [i for i in items if i["type"] == "function_call_output"]
    assert [o["call_id"] for o in outputs] == [f"call_{i}" for i in range(STEPS)] and all(f"step {i}" in o["output"] for i, o in enumerate(outputs))
    assert stats["total"]["steps_compressed"] == STEPS and stats["total"]["reasoning_tokens_removed"] > 0


def test_codex_through_serve_sealed_upstream(clis, tmp_path):
    with scripted_upstream(_codex_script(encrypted=True)) as up, proxy(up.url, upstream_kind="openai") as (url, _):
        run = _run_codex(clis, url, tmp_path)
        stats = httpx.get(url.removesuffix("/v1") + "/stats").json()
    assert run.returncode == 0, run.stderr[-2000:]
    bodies = [json.loads(raw) for raw in up.raw]
    _assert_prefixes(bodies, "input", ("instructions", "tools"))
    rs = [i for i in bodies[-1]["input"] if i["type"] == "reasoning"]
    assert [(r["content"][0]["text"], r["encrypted_content"]) for r in rs] == [(reasoning(i), f"gAAAAB-opaque-{i}") for i in range(STEPS)]
    assert stats["total"]["sealed_blocks"] == STEPS  # step 1's summary holds its text: one block
    assert stats["total"]["reasoning_tokens_removed"] == 0


# -- the real proxy, under the latency budget ------------------------------------------------

def _paced(script):
    """``script`` with every streamed reply sent at a provider's pace: its first event, a
    second before the rest (time to the first token), then an event every 20 ms, the
    reasoning in many deltas (a few words each)."""
    from wire_fixtures import anthropic_events, responses_events

    def paced(body, index):
        reply = script[0](body, index)
        if not isinstance(reply, Stream):
            return reply
        first = reply.events[0]
        if first.get("type") == "message_start":
            done = {**first["message"], "content": _blocks(reply.events), "usage": first["message"]["usage"]}
            events = anthropic_events(done, pieces=12)
        else:
            final = next(e["response"] for e in reply.events if e.get("type") == "response.completed")
            events = responses_events(final, pieces=12)
        return Stream(events, named=True, pause_s=1.0, interval_s=0.02)

    return [paced] * len(script)


def _blocks(events: list[dict]) -> list[dict]:
    """The content blocks a scripted Anthropic stream spells out (its own events, reassembled)."""
    blocks: dict[int, dict] = {}
    for e in events:
        if e.get("type") == "content_block_start":
            blocks[e["index"]] = dict(e["content_block"])
        elif e.get("type") == "content_block_delta":
            d, b = e["delta"], blocks[e["index"]]
            for key in ("thinking", "text", "signature"):
                if d.get("type") == f"{key}_delta":
                    b[key] = b.get(key, "") + d[key]
            if d.get("type") == "input_json_delta":
                b["_json"] = b.get("_json", "") + d["partial_json"]
    for b in blocks.values():
        if "_json" in b:
            b["input"] = json.loads(b.pop("_json"))
    return [blocks[i] for i in sorted(blocks)]


@pytest.mark.model
@pytest.mark.parametrize("cli", ["claude", "codex"])
def test_the_real_clis_through_serve_with_the_real_proxy_finish_without_a_stall(clis, tmp_path, cli):
    """SmolLM2 behind ``iclr serve`` with its default budget: the first scored step of a
    conversation prefills all of P (tens of KB of tool definitions; minutes on a CPU), and the
    CLI must not wait for it. Each step is either compressed in time or sent late, and every
    request goes upstream once (no CLI retry, no resent copy)."""
    pytest.importorskip("torch")
    from iclr_cli.serve.budget import DEFAULT_LATE, DEFAULT_MAX_WAIT

    script, runner = (_claude_script(redacted=False), _run_claude) if cli == "claude" else (_codex_script(encrypted=False), _run_codex)
    with scripted_upstream(_paced(script)) as up, proxy(up.url, proxy_model="smollm2", max_wait=DEFAULT_MAX_WAIT, late=DEFAULT_LATE) as (url, _):
        run = runner(clis, url, tmp_path)
        stats = httpx.get(url.removesuffix("/v1") + "/stats").json()
    assert run.returncode == 0, run.stderr[-2000:]
    total = stats["total"]
    # scored along the stream: each request's P and history while the upstream worked, each
    # reply's reasoning while it streamed (docs/serve.md, "Scoring along the stream")
    eager = stats["eager_scoring"]
    assert eager["fed_context"] >= STEPS and eager["fed_reasoning"] >= STEPS, eager
    print(f"{cli}: {total['steps_compressed']} of {total['steps_completed']} steps compressed, {total['steps_late']} late; {eager}")
    main = _main_requests(up) if cli == "claude" else [json.loads(raw) for raw in up.raw]
    assert len(main) == STEPS + 1 and total["upstream_errors"] == 0 and total["client_gone"] == 0
    assert total["steps_completed"] == STEPS
    assert total["steps_compressed"] - total["steps_late_compressed"] + total["steps_late"] == STEPS  # each in time or late
    assert stats["max_wait_s"] == DEFAULT_MAX_WAIT
    # whatever went late, every request's prefix is the one before it (a step compressed
    # later rewrites from that step on, never before it)
    field, context = ("messages", ("system", "tools")) if cli == "claude" else ("input", ("instructions", "tools"))
    for before, after in zip(main, main[1:]):
        for key in context:
            assert json.dumps(after.get(key)) == json.dumps(before.get(key)), key
        assert len(after[field]) > len(before[field])


def _claude_call(step: int, call: dict) -> None:
    assert call["id"] == f"toolu_{step}" and call["input"] == {"command": f"echo step {step}", "description": f"Echo step {step}"}


def thinking_compressed_once(bodies: list[dict], check_call) -> tuple[list, list]:
    """Assert what every Messages-wire agent test asserts of the upstream's request ``bodies``:
    each of the ``STEPS`` steps' thinking compressed in place with its signature kept as sent
    (a plain upstream does not check it), compressed once (the same bytes in every later
    request), and its ``tool_use`` as ``check_call(step, block)`` wants it. Returns the last
    request's messages and their assistant turns."""
    last = bodies[-1]["messages"]
    assistants = [m for m in last if m["role"] == "assistant"]
    assert len(assistants) == STEPS
    for step, msg in enumerate(assistants):
        (block,) = [b for b in msg["content"] if b["type"] == "thinking"]
        assert _kept(block["thinking"], step) and block["signature"] == SIGNATURE
        copies = [[m for m in b["messages"] if m["role"] == "assistant"][step] for b in bodies[step + 1 :]]
        assert len(copies) == STEPS - step and all(_strip_markers(c) == _strip_markers(msg) for c in copies)
        (call,) = [b for b in msg["content"] if b["type"] == "tool_use"]
        check_call(step, call)
    return last, assistants
