"""What the iclr guardrail costs the LiteLLM proxy: added latency per request, with and without it.

Run from the repository root (after ``bash scripts/setup.sh``, which puts the LiteLLM proxy in
``.venv/litellm-proxy``)::

    python benchmarks/bench_litellm.py                         # 6 tool steps, provider pace, fake:400 scorer
    python benchmarks/bench_litellm.py --steps 10 --proxy-model fake
    python benchmarks/bench_litellm.py --litellm /path/to/bin/litellm
    python benchmarks/bench_litellm.py --workers 4             # four LiteLLM workers; the last row shares one serve (SmolLM2)

The session is :mod:`bench_serve_budget`'s Claude-Code-style one (the anthropic SDK, a system
prompt and tool definitions of about ``--p-tokens`` tokens with a cache marker, ``--steps``
tool steps of plain thinking and a command, tool results of pages, ``--tool-s`` seconds of
tool time), against its scripted Anthropic upstream at a provider's pace (``--pace provider``:
1.5-3 s to the first token, then 60 tokens a second; the same draws for every row). Three rows:

- ``direct``: the session straight to the upstream;
- ``litellm``: through the LiteLLM proxy (``litellm --config``, an ``anthropic/`` deployment);
- ``litellm+iclr``: the same proxy with the iclr guardrail (``upstream_kind: local``: the
  thinking is compressed, so every write-back path runs), ``--max-wait`` as in serve;
- ``litellm+serve``: the guardrail with ``serve_url``: every LiteLLM worker sends its hooks to
  one ``iclr serve`` started from iclr's own environment with ``--serve-model`` (the real
  SmolLM2 by default; docs/fleet.md), so this row runs the real proxy model.

``--workers`` sets LiteLLM's ``--num_workers``. Each row also reports the resident memory of
LiteLLM's process tree and of the shared serve, and the steps the engine compressed.

Per request, the time to the first streamed event and to the end of the answer are measured at
the client; the latency a row adds is each request's time to the first event minus the direct
run's for the same request (the upstream's own wait is the same draw in every row). The table
gives its p50 / p95 / max in milliseconds, and the session's wall time.

The guardrail runs inside LiteLLM's environment, which here has no torch (LiteLLM pins an older
``rich`` than iclr's own environment): the scorer is the paced fake
(``fake:N``, N tokens a second, the time a real proxy model takes, with no model loaded). What
the real proxy model costs per step is serve's and is measured by ``bench_serve_budget.py``;
this benchmark measures what LiteLLM adds, and what the guardrail adds around the scorer.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_serve_budget as budget  # noqa: E402

MASTER_KEY = "sk-bench-master"


def _config(upstream: str, guardrail: dict | None) -> str:
    lines = ["model_list:", "  - model_name: claude-bench", "    litellm_params:", "      model: anthropic/claude-bench",
             f"      api_base: {upstream}", "      api_key: sk-upstream", "general_settings:", f"  master_key: {MASTER_KEY}"]
    if guardrail is not None:
        lines += ["guardrails:", "  - guardrail_name: iclr", "    litellm_params:",
                  "      guardrail: iclr_cli.serve.litellm_guardrail.IclrGuardrail", "      mode: [pre_call, post_call]", "      default_on: true"]
        lines += [f"      {k}: {v}" for k, v in guardrail.items()]
    return "\n".join(lines) + "\n"


def _tree_rss_mib(pid: int) -> float:
    """Resident memory of ``pid`` and every process below it (LiteLLM's workers)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        todo += children.get(current, [])
        try:
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
        except OSError:
            pass
    return round(total, 1)


def _serve(args, upstream: str, workdir: Path) -> tuple[subprocess.Popen, str]:
    """``iclr serve`` from iclr's environment for the guardrail's ``serve_url``."""
    port = budget._free_port()
    log = open(workdir / "serve.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "iclr_cli", "serve", "--upstream", upstream, "--upstream-kind", "local", "--port", str(port),
                             "--proxy-model", args.serve_model, "--max-wait", str(args.max_wait), "--quiet"], stdout=log, stderr=subprocess.STDOUT)
    budget.wait_until_up(proc, f"http://127.0.0.1:{port}/health/readiness", "iclr serve", workdir / "serve.log")
    return proc, f"http://127.0.0.1:{port}"


def _litellm(exe: str, config: str, workdir: Path, workers: int = 1) -> tuple[subprocess.Popen, str]:
    path = workdir / "config.yaml"
    path.write_text(config)
    port = budget._free_port()
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(REPO), "LITELLM_LOG": "ERROR"}
    log = open(workdir / "litellm.log", "wb")
    proc = subprocess.Popen([exe, "--config", str(path), "--host", "127.0.0.1", "--port", str(port), "--num_workers", str(workers)],
                            env=env, stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
    budget.wait_until_up(proc, f"http://127.0.0.1:{port}/health/liveliness", "litellm", workdir / "litellm.log", timeout_s=300)
    return proc, f"http://127.0.0.1:{port}"


def session(base: str, key: str, system: list[dict], tools: list[dict], tool_s) -> tuple[float, list[float], list[float]]:
    """One Claude-Code-style session (bench_serve_budget's) against ``base``: (wall seconds,
    seconds to the first streamed event per request, seconds to the end per request)."""
    import anthropic

    sdk = anthropic.Anthropic(base_url=base, api_key=key, max_retries=0, timeout=900)
    messages: list[dict] = [{"role": "user", "content": [{"type": "text", "text": "Fix the failing test in task 1"}]}]
    start = time.monotonic()
    first, whole = [], []
    while True:
        sent = [dict(m) for m in messages]
        last = sent[-1]
        last["content"] = [*last["content"][:-1], {**last["content"][-1], "cache_control": {"type": "ephemeral"}}]
        t0 = time.monotonic()
        with sdk.messages.stream(model="claude-bench", max_tokens=4096, system=system, tools=tools, messages=sent,
                                 thinking={"type": "enabled", "budget_tokens": 2048}) as stream:
            seen = None
            for _ in stream:
                if seen is None:
                    seen = time.monotonic() - t0
            reply = stream.get_final_message()
        first.append(seen)
        whole.append(time.monotonic() - t0)
        blocks = [b.model_dump(exclude_none=True, exclude={"caller", "toolset_name"}) for b in reply.content]
        calls = [b for b in blocks if b["type"] == "tool_use"]
        if not calls:
            return time.monotonic() - start, first, whole
        turn = sum(m["role"] == "assistant" for m in messages)
        time.sleep(budget.tool_time(1, turn, tool_s))
        _, _, output = budget._step(1, turn)
        messages += [{"role": "assistant", "content": blocks},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": calls[0]["id"], "content": output}]}]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def run(args, label: str, exe: str | None, guardrail: dict | None, p) -> dict:
    import httpx

    httpd, handler, upstream = budget._start_upstream(args.steps, 1.0, args.pace)
    proc = served = None
    try:
        base, key = upstream, "sk-direct"
        workdir = Path(tempfile.mkdtemp(prefix=f"iclr-bench-{label.replace('+', '-')}-"))
        if guardrail is not None and "serve_url" in guardrail:
            served, guardrail["serve_url"] = _serve(args, upstream, workdir)
        if exe is not None:
            proc, base = _litellm(exe, _config(upstream, guardrail), workdir, args.workers)
            key = MASTER_KEY
        wall, first, whole = session(base, key, *p, args.tool_s)
        skips = sum(json.dumps(b).count("[SKIP]") for b in handler.bodies[-1:])
        memory = {"litellm_rss_mib": _tree_rss_mib(proc.pid) if proc else None, "serve_rss_mib": _tree_rss_mib(served.pid) if served else None}
        if served is not None:
            total = httpx.get(guardrail["serve_url"] + "/stats", timeout=60).json()["total"]
            memory["serve_steps"] = {k: total[k] for k in ("requests", "steps_completed", "steps_compressed", "steps_late")}
        return {"row": label, "wall_s": round(wall, 1), "requests": len(first), "first_s": first, "whole_s": whole,
                "skip_markers_last_request": skips, **memory}
    finally:
        for running in (proc, served):
            if running is not None:
                running.terminate()
                running.wait(60)
        httpd.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--litellm", default=None, help="the litellm executable (default: .venv/litellm-proxy/bin/litellm)")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--p-tokens", type=int, default=20_000)
    parser.add_argument("--tool-s", type=float, default=0.5)
    parser.add_argument("--pace", choices=("instant", "provider"), default="provider")
    parser.add_argument("--proxy-model", default="fake:400", help="the guardrail's scorer (fake or fake:N in LiteLLM's environment)")
    parser.add_argument("--max-wait", default="0.5")
    parser.add_argument("--workers", type=int, default=1, help="LiteLLM's --num_workers")
    parser.add_argument("--serve-model", default="smollm2", help="the shared serve's proxy model (litellm+serve row); 'none' skips the row")
    args = parser.parse_args()
    exe = args.litellm or str(Path(sys.prefix) / "litellm-proxy" / "bin" / "litellm")
    if not Path(exe).exists():
        raise SystemExit(f"no LiteLLM proxy at {exe}: run bash scripts/setup.sh, or pass --litellm")
    from iclr_cli.scoring.factory import load_tokenizer

    p = budget._p(args.p_tokens, load_tokenizer("fake"))
    print(json.dumps({"cpu": budget._cpu(), "load": os.getloadavg(), "steps": args.steps, "pace": args.pace, "tool_s": args.tool_s,
                      "proxy_model": args.proxy_model, "max_wait": args.max_wait}), flush=True)
    guard = {"proxy_model": args.proxy_model, "upstream_kind": "local", "max_wait": args.max_wait}
    rows = [run(args, "direct", None, None, p), run(args, "litellm", exe, None, p), run(args, "litellm+iclr", exe, guard, p)]
    if args.serve_model != "none":
        rows.append(run(args, "litellm+serve", exe, {"serve_url": None}, p))
    direct = rows[0]
    # The first request of a fresh LiteLLM pays its own warm-up (routes, clients): shown apart.
    print("| row | wall s | requests | first request: added ms | later requests: added to first event ms p50 / p95 / max | added to end ms p50 / p95 | [SKIP] in last request |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        added = [1000 * (a - b) for a, b in zip(row["first_s"], direct["first_s"])]
        added_end = [1000 * (a - b) for a, b in zip(row["whole_s"], direct["whole_s"])]
        later, later_end = added[1:], added_end[1:]
        cells = ["-", "-", "-"] if row is direct else [
            f"{added[0]:.0f}", f"{statistics.median(later):.0f} / {_pct(later, 0.95):.0f} / {max(later):.0f}",
            f"{statistics.median(later_end):.0f} / {_pct(later_end, 0.95):.0f}"]
        print(f"| {row['row']} | {row['wall_s']} | {row['requests']} | {' | '.join(cells)} | {row['skip_markers_last_request']} |", flush=True)
    for row in rows[1:]:
        print(json.dumps({k: row.get(k) for k in ("row", "litellm_rss_mib", "serve_rss_mib", "serve_steps")}), flush=True)
    print(json.dumps({"load_after": os.getloadavg(), "workers": args.workers}))


if __name__ == "__main__":
    main()
