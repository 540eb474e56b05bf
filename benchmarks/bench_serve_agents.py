"""Claude Code and Codex through an ``iclr serve`` process: the latency the proxy adds per request.

Run from the repository root::

    python benchmarks/bench_serve_agents.py                    # SmolLM2 proxy, both CLIs
    python benchmarks/bench_serve_agents.py --quick            # --proxy-model fake: a smoke run
    python benchmarks/bench_serve_agents.py --max-tokens 8000  # a shorter scoring window

Each CLI (found or installed as ``tests/test_serve_agents.py`` does: ``$ICLR_AGENT_CLIS`` or
``~/.cache/iclr/agent-clis``) runs the same task as that test, three tool-calling steps and an
answer, against a scripted upstream on 127.0.0.1, through ``iclr serve`` started as its own
process (``--proxy-model``, ``--max-tokens``). Reported per CLI: exit code, wall time, the
size of P (system / instructions and tool definitions, in characters: what the proxy scores
every step against), requests, steps compressed, reasoning tokens removed, and the proxy's
added latency (``/stats``: receipt to upstream send, scoring included) p50 / p95, and the steps
sent late (``--max-wait``: serve's latency budget; ``inf`` waits for every step as before it).

Claude Code and Codex send a large P (tens of KB of tool definitions), so with a CPU proxy
model the first compressed step of a conversation prefills all of it: on 2 shared, overloaded
cores one such step took 851 s. Run it on a quiet machine (or a GPU: ``--device cuda``).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(upstream: str, args: argparse.Namespace) -> tuple[subprocess.Popen, str]:
    import httpx

    port = _free_port()
    cmd = [sys.executable, "-m", "iclr_cli", "serve", "--upstream", upstream, "--port", str(port), "--proxy-model", args.proxy_model, "--max-tokens", str(args.max_tokens)]
    if args.device:
        cmd += ["--device", args.device]
    if args.max_wait is not None:
        cmd += ["--max-wait", args.max_wait]
    proc = subprocess.Popen(cmd, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 600
    while True:
        try:
            httpx.get(base + "/healthz", timeout=2)
            return proc, base
        except httpx.HTTPError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"iclr serve did not start: {' '.join(cmd)}")
            time.sleep(0.5)


def _p_chars(body: dict) -> int:
    context = {k: body.get(k) for k in ("system", "instructions", "tools")}
    developer = [i for i in body.get("input") or [] if isinstance(i, dict) and i.get("role") == "developer"]
    return len(json.dumps(context)) + len(json.dumps(developer))


def run(name: str, args: argparse.Namespace, bins: Path) -> dict:
    import httpx
    import test_serve_agents as agents
    from serve_fixtures import scripted_upstream

    script, runner = (agents._claude_script(redacted=False), agents._run_claude) if name == "claude" else (agents._codex_script(encrypted=False), agents._run_codex)
    with scripted_upstream(script) as up, tempfile.TemporaryDirectory() as home:
        proc, base = _serve(up.url, args)
        try:
            start = time.monotonic()
            result = runner(bins, base + "/v1", Path(home), timeout=args.timeout)
            wall = time.monotonic() - start
            stats = httpx.get(base + "/stats", timeout=30).json()
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    total = stats["total"]
    first = json.loads(up.raw[0]) if up.raw else {}
    return {
        "cli": name, "proxy_model": args.proxy_model, "exit_code": result.returncode, "wall_s": round(wall, 1),
        "p_chars": _p_chars(first), "requests": total["requests"], "steps_completed": total["steps_completed"],
        "steps_compressed": total["steps_compressed"], "steps_late": total["steps_late"], "steps_late_compressed": total["steps_late_compressed"],
        "reasoning_tokens_generated": total["reasoning_tokens_generated"], "reasoning_tokens_removed": total["reasoning_tokens_removed"],
        "added_latency_ms": total["added_latency_ms"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proxy-model", default="smollm2")
    parser.add_argument("--max-tokens", type=int, default=42_000)
    parser.add_argument("--device", default=None)
    parser.add_argument("--max-wait", default=None, help="iclr serve --max-wait (default: serve's own; inf: every step waits for its scores)")
    parser.add_argument("--cli", choices=("claude", "codex", "both"), default="both")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds a CLI (and each of its requests) may take")
    parser.add_argument("--quick", action="store_true", help="--proxy-model fake")
    args = parser.parse_args()
    if args.quick:
        args.proxy_model = "fake"
    import test_serve_agents as agents

    bins = agents._clis()
    if bins is None:
        raise SystemExit("npm or the Claude Code / Codex CLIs are missing (set ICLR_AGENT_CLIS)")
    for name in ("claude", "codex") if args.cli == "both" else (args.cli,):
        print(json.dumps(run(name, args, bins)), flush=True)


if __name__ == "__main__":
    main()
