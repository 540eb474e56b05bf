"""End to end: OpenCode, Kilo and Qwen Code (the real CLIs from npm) through ``iclr serve``.

As tests/test_serve_agents.py does for Claude Code and Codex: each CLI runs a task of three
tool-calling steps and a final answer against a scripted DeepSeek-style upstream on 127.0.0.1
with the proxy in between, and the test reads the request bodies the upstream received.

- Chat completions (OpenCode and Kilo with ``@ai-sdk/openai-compatible``, Qwen Code with
  ``--auth-type openai``): each step streams ``reasoning_content`` then one shell call, as
  DeepSeek's thinking mode does, and each CLI sends that ``reasoning_content`` back on its
  assistant message in every later request (DeepSeek requires it on tool turns).
- Anthropic Messages (OpenCode with ``@ai-sdk/anthropic``, as against DeepSeek's
  ``/anthropic``): each step streams a signed ``thinking`` block, sent back with its signature.

Asserted on every run: the requests with tools are the task's ``STEPS + 1``; each starts with
the previous one (messages compared apart from ``cache_control`` markers, every other field
equal); on a plain upstream (``local``) every completed step's reasoning is compressed
(BottomK: 4 of its 5 blocks ``[SKIP]``) once, the same bytes in every later request, one
scoring per step; tool calls are what the upstream sent (id, name, arguments) and their
results what the CLI ran. On a sealed upstream (``--upstream-kind anthropic``) the signed
thinking goes back untouched.

The session files each chat run leaves are then read back with the fake proxy model: ``score``
on the OpenCode / Kilo database (as the CLI left it, most of it in the WAL), on its ``export``
JSON and on Qwen Code's chat JSONL gives the 15 blocks of the three steps' reasoning as streamed
(the client stores it uncompressed; only the requests were compressed), 4 of each step's 5
selected; ``prune`` writes the export / JSONL back with exactly those blocks ``[SKIP]`` and
nothing else changed; ``savings`` over the CLI's data folder counts one session of
``STEPS + 1`` requests with the 100 input tokens each that the upstream's usage reported. The
Messages run's file keeps Anthropic signatures, so there the thinking is read back sealed.

The CLIs are found in ``$ICLR_AGENT_CLIS`` or ``~/.cache/iclr/agent-clis`` (see
:mod:`agent_cli_fixtures`; skipped with the install line when missing). With
``$ICLR_AGENT_SESSIONS`` set, each run's session files are copied there
(:func:`agent_cli_fixtures.keep_sessions`).
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from agent_cli_fixtures import Run, chat_stream, export_session, keep_sessions, missing, run_opencode, run_qwen, session_ids, unavailable
from format_helpers import run_cli
from serve_fixtures import proxy, scripted_upstream
from test_serve_agents import STEPS, _assert_prefixes, _kept, _strip_markers, reasoning, thinking_compressed_once
from wire_fixtures import anthropic_reply, text, thinking, tool_use

from iclr_cli.serve.budget import DEFAULT_MAX_WAIT

pytestmark = pytest.mark.server
pytest.importorskip("starlette")

PROMPT = "Echo step 0, step 1 and step 2, one command each."
SHELL = {"opencode": "bash", "kilo": "bash", "qwen": "run_shell_command"}


def _need(*names: str) -> None:
    reason = missing(*names)
    if reason:
        unavailable(reason)


def _opencode_call(step: int, call: dict) -> None:
    assert (call["id"], call["name"], call["input"]) == (f"toolu_{step}", "bash", _args(step))


def _args(step: int) -> dict:
    return {"command": f"echo step {step}", "description": f"Echo step {step}"}


def _stats(url: str) -> dict:
    return httpx.get(url.removesuffix("/v1") + "/stats").json()


# -- chat completions ------------------------------------------------------------------------

def _chat_script(shell: str):
    """Title and other tool-less requests get a short answer; a request with tools whose
    history holds ``n`` tool-calling steps gets step ``n`` (its reasoning and one shell call)
    until the ``STEPS`` are done, then the answer."""
    def reply(body, index):
        if not body.get("tools"):
            return chat_stream("Echo three steps")
        steps = sum(1 for m in body["messages"] if m.get("role") == "assistant" and m.get("tool_calls"))
        if steps >= STEPS:
            return chat_stream("All three steps are done.")
        return chat_stream(reasoning=reasoning(steps), calls=((f"call_{steps}", shell, _args(steps)),))

    return [reply] * 20


def _chat_main(up) -> list[dict]:
    assert up.paths and all(p == "/v1/chat/completions" for p in up.paths)
    return [b for b in (json.loads(raw) for raw in up.raw) if b.get("tools")]


def _assert_chat(bodies: list[dict], shell: str, stats: dict) -> None:
    assert len(bodies) == STEPS + 1 and all(b["stream"] is True for b in bodies)
    _assert_prefixes(bodies, "messages", tuple(k for k in bodies[0] if k != "messages"))
    last = bodies[-1]["messages"]
    assistants = [m for m in last if m["role"] == "assistant"]
    assert len(assistants) == STEPS
    for step, msg in enumerate(assistants):
        # the reasoning the upstream streamed, sent back by the CLI, compressed in place
        assert _kept(msg["reasoning_content"], step), msg["reasoning_content"]
        # once: the same message in every request that holds the step
        copies = [[m for m in b["messages"] if m["role"] == "assistant"][step] for b in bodies[step + 1 :]]
        assert len(copies) == STEPS - step and all(c == msg for c in copies)
        (call,) = msg["tool_calls"]
        assert (call["id"], call["type"], call["function"]["name"]) == (f"call_{step}", "function", shell)
        assert json.loads(call["function"]["arguments"]) == _args(step)
    results = [m for m in last if m["role"] == "tool"]
    assert [r["tool_call_id"] for r in results] == [f"call_{i}" for i in range(STEPS)]
    assert all(f"step {i}" in json.dumps(r["content"]) for i, r in enumerate(results))
    total = stats["total"]
    assert total["steps_compressed"] == STEPS and total["reasoning_tokens_removed"] > 0 and stats["upstream_kind"] == "local"
    # The upstream streams `content: null` and spaced arguments; the CLI sends its turn back as
    # `content: ""` (or none) with the arguments re-encoded. Each step is still the one scored
    # ahead from the reply (no miss, none late at the default budget), and the first request
    # and the next are one conversation.
    eager = stats["eager_scoring"]
    assert (eager["misses"], eager["hits"] + eager["waits"], total["steps_late"]) == (0, STEPS, 0), eager
    (main,) = [c for c in stats["conversations"].values() if c["steps_completed"]]  # OpenCode's title request is a conversation of its own
    assert main["requests"] == STEPS + 1, stats["conversations"]


@pytest.mark.parametrize("cli", ["opencode", "kilo"])
def test_opencode_and_kilo_through_serve_chat_completions(tmp_path, capsys, cli):
    _need(cli)
    with scripted_upstream(_chat_script("bash")) as up, proxy(up.url, max_wait=DEFAULT_MAX_WAIT) as (url, _):
        run = run_opencode(cli, url, tmp_path, PROMPT)
        stats = _stats(url)
    assert run.process.returncode == 0, run.process.stderr[-2000:]
    keep_sessions(cli, run, f"{cli}/chat")
    bodies = _chat_main(up)
    if cli == "opencode":  # its title request first, without tools (Kilo names the session itself)
        assert len(up.raw) == STEPS + 2 and "tools" not in json.loads(up.raw[0])
    _assert_chat(bodies, "bash", stats)
    assert "All three steps are done." in run.process.stdout
    _read_back_opencode(capsys, cli, run, tmp_path / "out")


def test_qwen_code_through_serve_chat_completions(tmp_path, capsys):
    _need("node", "qwen")
    with scripted_upstream(_chat_script("run_shell_command")) as up, proxy(up.url, max_wait=DEFAULT_MAX_WAIT) as (url, _):
        run = run_qwen(url, tmp_path, PROMPT)
        stats = _stats(url)
    assert run.process.returncode == 0, run.process.stderr[-2000:]
    keep_sessions("qwen", run, "qwen")
    bodies = _chat_main(up)
    assert len(up.raw) == STEPS + 1
    _assert_chat(bodies, "run_shell_command", stats)
    # stream-json: the answer is the last assistant event
    events = [json.loads(line) for line in run.process.stdout.splitlines() if line.startswith("{")]
    assert events[-1]["type"] == "result" and events[-1]["result"] == "All three steps are done."
    _read_back_qwen(capsys, run, tmp_path / "out")


# -- the session files the chat runs leave, read back -----------------------------------------

def _score(capsys, path: Path, trajectory: str) -> list[dict]:
    """``iclr score`` records for ``path``, checked to be the three steps' reasoning as streamed."""
    code, out, err = run_cli(capsys, "score", str(path), "--model", "fake")
    assert code == 0, err
    records = [json.loads(line) for line in out.splitlines()]
    assert [(r["trajectory"], r["step"], r["block"], r["n_blocks"]) for r in records] == [(trajectory, s, b, 5) for s in range(STEPS) for b in range(5)]
    assert ["\n\n".join(r["text"] for r in records if r["step"] == s) for s in range(STEPS)] == [reasoning(s) for s in range(STEPS)]
    assert [sum(r["selected"] for r in records if r["step"] == s) for s in range(STEPS)] == [4] * STEPS  # BottomK, rho 0.8
    return records


def _pruned(records: list[dict]) -> list[str]:
    """Each step's reasoning as prune writes it: the selected blocks ``[SKIP]``."""
    return ["\n\n".join("[SKIP]" if r["selected"] else r["text"] for r in records if r["step"] == s) for s in range(STEPS)]


def _savings(capsys, folder: Path, fmt: str) -> None:
    code, out, err = run_cli(capsys, "savings", str(folder), "--model", "fake", "--no-cache", "--json")
    assert code == 0, err
    (row,) = json.loads(out)["data"]
    assert (row["format"], row["requests"], row["recorded_requests"], row["input_tokens"]) == (fmt, STEPS + 1, STEPS + 1, 100 * (STEPS + 1))
    assert 0 < row["input_tokens_with_writeback"] < row["input_tokens"] and row["reasoning_tokens_resent"] > 0 and row["sealed_tokens"] == 0


def _read_back_opencode(capsys, cli: str, run: Run, out: Path) -> None:
    (sid,) = session_ids(run.process.stdout)
    db = run.data / cli / f"{cli}.db"
    records = _score(capsys, db, sid)
    exported = export_session(cli, run, sid)
    assert exported.returncode == 0, exported.stderr[-2000:]
    out.mkdir()
    export = out / "export.json"
    export.write_text(exported.stdout)
    assert [(r["entropy_bits"], r["selected"]) for r in _score(capsys, export, sid)] == [(r["entropy_bits"], r["selected"]) for r in records]
    code, _, err = run_cli(capsys, "prune", str(export), "--model", "fake", "-o", str(out / "pruned.json"))
    assert code == 0, err
    before, after = json.loads(exported.stdout), json.loads((out / "pruned.json").read_text())
    parts = [p for m in after["messages"] for p in m["parts"] if p["type"] == "reasoning"]
    assert [p["text"] for p in parts] == _pruned(records)
    for p in parts:  # nothing else changed
        p["text"] = None
    for p in (p for m in before["messages"] for p in m["parts"] if p["type"] == "reasoning"):
        p["text"] = None
    assert after == before
    _savings(capsys, db.parent, cli)


def _read_back_qwen(capsys, run: Run, out: Path) -> None:
    (chat,) = (run.home / ".qwen" / "projects").glob("*/chats/*.jsonl")
    records = _score(capsys, chat, chat.stem)
    out.mkdir()
    code, _, err = run_cli(capsys, "prune", str(chat), "--model", "fake", "-o", str(out / "pruned.jsonl"))
    assert code == 0, err
    before = [json.loads(line) for line in chat.read_text().splitlines()]
    after = [json.loads(line) for line in (out / "pruned.jsonl").read_text().splitlines()]
    thoughts = [p for r in after if r["type"] == "assistant" for p in r["message"]["parts"] if p.get("thought")]
    assert [p["text"] for p in thoughts] == _pruned(records)
    for p in thoughts + [p for r in before if r["type"] == "assistant" for p in r["message"]["parts"] if p.get("thought")]:
        p["text"] = None
    assert after == before
    _savings(capsys, run.home / ".qwen" / "projects", "qwen_code")


# -- Anthropic Messages (OpenCode with @ai-sdk/anthropic) ------------------------------------

def _messages_script():
    def reply(body, index):
        stream = bool(body.get("stream"))
        if not body.get("tools"):
            return anthropic_reply([text("Echo three steps")], stream=stream)
        turns = sum(1 for m in body["messages"] if m.get("role") == "assistant")
        if turns >= STEPS:
            return anthropic_reply([text("All three steps are done.")], stream=stream, message_id=f"msg_{turns}")
        return anthropic_reply([thinking(reasoning(turns)), tool_use(f"toolu_{turns}", "bash", _args(turns))], stream=stream, message_id=f"msg_{turns}")

    return [reply] * 20


def _messages_main(up) -> list[dict]:
    assert up.paths and all(p == "/v1/messages" for p in up.paths)
    return [b for b in (json.loads(raw) for raw in up.raw) if b.get("tools")]


def test_opencode_through_serve_messages_plain_upstream(tmp_path, capsys):
    _need("opencode")
    with scripted_upstream(_messages_script()) as up, proxy(up.url) as (url, _):
        run = run_opencode("opencode", url, tmp_path, PROMPT, wire="messages", model="claude-sonnet-4-5")
        stats = _stats(url)
    assert run.process.returncode == 0, run.process.stderr[-2000:]
    keep_sessions("opencode", run, "opencode/messages")
    bodies = _messages_main(up)
    assert len(bodies) == STEPS + 1
    _assert_prefixes(bodies, "messages", tuple(k for k in bodies[0] if k != "messages"))
    last, _ = thinking_compressed_once(bodies, _opencode_call)
    results = [b for m in last if m["role"] == "user" and isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_result"]
    assert [r["tool_use_id"] for r in results] == [f"toolu_{i}" for i in range(STEPS)]
    assert all(f"step {i}" in json.dumps(r["content"]) for i, r in enumerate(results))
    assert stats["total"]["steps_compressed"] == STEPS and stats["total"]["reasoning_tokens_removed"] > 0
    # the session file keeps each step's thinking with its Anthropic signature: read back,
    # the provider rule seals it (docs/FORMAT.md); prune writes the export back byte for byte
    (sid,) = session_ids(run.process.stdout)
    exported = export_session("opencode", run, sid)
    export = tmp_path / "export.json"
    export.write_text(exported.stdout)
    code, _, err = run_cli(capsys, "prune", str(export), "--model", "fake", "-o", str(tmp_path / "pruned.json"))
    assert code == 0 and (tmp_path / "pruned.json").read_bytes() == export.read_bytes()
    assert f"{export}: 3 reasoning parts signed for anthropic left sealed" in err
    code, out, err = run_cli(capsys, "savings", str(run.data / "opencode"), "--model", "fake", "--no-cache", "--json")
    (row,) = json.loads(out)["data"]
    assert (row["requests"], row["sealed"], row["input_tokens_with_writeback"]) == (STEPS + 1, ["anthropic"], row["input_tokens"]) and row["sealed_tokens"] > 0


def test_opencode_through_serve_messages_sealed_upstream(tmp_path):
    _need("opencode")
    with scripted_upstream(_messages_script()) as up, proxy(up.url, upstream_kind="anthropic") as (url, _):
        run = run_opencode("opencode", url, tmp_path, PROMPT, wire="messages", model="claude-sonnet-4-5")
        stats = _stats(url)
    assert run.process.returncode == 0, run.process.stderr[-2000:]
    bodies = _messages_main(up)
    assert len(bodies) == STEPS + 1
    _assert_prefixes(bodies, "messages", tuple(k for k in bodies[0] if k != "messages"))
    sent = [b for m in bodies[-1]["messages"] if m["role"] == "assistant" for b in m["content"] if b["type"] == "thinking"]
    assert [_strip_markers(b) for b in sent] == [thinking(reasoning(i)) for i in range(STEPS)]  # untouched, signatures included
    assert stats["total"]["sealed_blocks"] == STEPS and stats["total"]["reasoning_tokens_removed"] == 0
