"""``iclr serve``'s added latency against conversation length.

Run from the repository root::

    python benchmarks/bench_serve_length.py                   # steps 1..20, SmolLM2: from scratch vs kept state
    python benchmarks/bench_serve_length.py --quick           # steps 1..6, a smoke run
    python benchmarks/bench_serve_length.py --mode scratch --mode kept --mode ahead --tool-s 2
    python benchmarks/bench_serve_length.py --mode main --repo /path/to/a/checkout/of/main

One agent at a time talks to ``iclr serve`` (its own process, ``--proxy-model``, SmolLM2 by
default) in front of the scripted upstream of ``bench_serve.py`` (instant replies: a tool call
and reasoning of five paragraphs), appending every reply and a tool result, for ``--steps``
steps; ``--repeat`` such conversations one after another. Request k + 1 compresses step k;
for each k the table gives the median over the conversations of

- the latency the proxy added to that request (receipt to upstream send, the proxy's own
  measure: the growth of ``iclr_serve_added_latency_seconds_sum`` in ``/metrics``), and
- the CPU time the proxy process spent meanwhile (``/proc/PID/stat``: less distorted by other
  load than wall clock, but threads that spin while waiting count too), and
- the proxy tokens the scorer ran through the model for it (``forward_tokens`` in ``/stats``;
  not reported by proxies without kept scorer state) and the length of its scorer input.

Modes (each a proxy started with these options): ``scratch`` (``--no-prefix-cache
--no-eager-scoring``: every step scored from scratch, as ``main`` did before kept scorer state),
``kept`` (``--no-eager-scoring``: each conversation's scorer state kept between requests),
``ahead`` (the defaults: kept state, and each reply's step scored while the agent runs its
tool, ``--tool-s`` seconds), and ``main`` (no options, for ``--repo``: an older checkout).
``--tool-s`` applies to every mode. Latencies are wall clock: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_serve import REPO, _start_proxy, _start_upstream  # noqa: E402

MODES = {"scratch": ["--no-prefix-cache", "--no-eager-scoring"], "kept": ["--no-eager-scoring"], "ahead": [], "main": []}
TOOL_RESULT = "main.py  parser.py  tests/\n" * 12


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise SystemExit(f"/metrics has no {name}")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _snapshot(client, base: str, pid: int) -> tuple[float, int | None, int | None, float]:
    """(added seconds so far, tokens forwarded so far, tokens reused so far, CPU seconds so far)."""
    added = _metric(client.get(base + "/metrics").text, "iclr_serve_added_latency_seconds_sum")
    state = client.get(base + "/stats").json().get("scorer_state") or {}
    return added, state.get("forward_tokens"), state.get("reused_tokens"), _cpu_s(pid)


def conversation(client, base: str, pid: int, conv: int, steps: int, tool_s: float) -> list[dict]:
    """One agent, ``steps`` steps compressed; per step: added ms, CPU s, forwarded and input tokens."""
    messages = [{"role": "system", "content": "You are a coding agent. Use bash."}, {"role": "user", "content": f"Fix the parser in task {conv}"}]
    rows = []
    for k in range(steps + 1):
        before = _snapshot(client, base, pid)
        resp = client.post(base + "/v1/chat/completions", json={"model": "scripted", "messages": messages})
        resp.raise_for_status()
        after = _snapshot(client, base, pid)
        if k:
            forwarded = None if after[1] is None else after[1] - before[1]
            seen = None if after[1] is None else forwarded + after[2] - before[2]
            rows.append({"step": k, "added_ms": (after[0] - before[0]) * 1000, "cpu_s": after[3] - before[3],
                         "forward_tokens": forwarded, "input_tokens": seen})
        msg = resp.json()["choices"][0]["message"]
        messages = messages + [msg, {"role": "tool", "tool_call_id": msg["tool_calls"][0]["id"], "content": f"step{k}/\n" + TOOL_RESULT}]
        if tool_s:
            time.sleep(tool_s)  # the agent runs its tool
    return rows


def run(mode: str, model: str, steps: int, repeat: int, tool_s: float, repo: Path, upstream: str) -> list[dict]:
    """Per step, the median over ``repeat`` conversations (see module docstring)."""
    import httpx

    proc, base = _start_proxy(upstream, model, 1000, MODES[mode], repo)
    try:
        with httpx.Client(timeout=3600) as client:
            runs = [conversation(client, base, proc.pid, c, steps, tool_s) for c in range(repeat)]
            stats = client.get(base + "/stats").json()
    finally:
        proc.terminate()
        proc.wait(30)
    if stats["total"]["scorer_failures"]:
        raise SystemExit(f"{mode}: {stats['total']['scorer_failures']} scorer failures")
    out = []
    for k in range(steps):
        col = [r[k] for r in runs]
        med = lambda key: None if col[0][key] is None else statistics.median(c[key] for c in col)  # noqa: E731
        out.append({"mode": mode, "step": k + 1, "added_ms": round(med("added_ms"), 1), "cpu_s": round(med("cpu_s"), 2),
                    "forward_tokens": med("forward_tokens"), "input_tokens": med("input_tokens")})
    return out


def table(rows: list[dict], modes: list[str]) -> str:
    """Markdown: one line per step, added latency, CPU time and forwarded tokens per mode."""
    by = {(r["mode"], r["step"]): r for r in rows}
    steps = sorted({r["step"] for r in rows})
    head = "| step | scorer input tokens | " + " | ".join(f"{m}: added ms | {m}: CPU s | {m}: tokens run" for m in modes) + " |"
    out = [head, "| " + " | ".join(["---:"] * (2 + 3 * len(modes))) + " |"]
    for k in steps:
        inp = next((by[m, k]["input_tokens"] for m in modes if by[m, k]["input_tokens"] is not None), None)
        cells = [str(k), "n/a" if inp is None else f"{inp:.0f}"]
        for m in modes:
            r = by[m, k]
            cells += [f"{r['added_ms']:.0f}", f"{r['cpu_s']:.2f}", "n/a" if r["forward_tokens"] is None else f"{r['forward_tokens']:.0f}"]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--proxy-model", default="smollm2")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3, help="conversations per mode (the table shows medians)")
    parser.add_argument("--mode", action="append", choices=sorted(MODES), help="repeatable; default: scratch and kept")
    parser.add_argument("--tool-s", type=float, default=0.0, help="seconds the agent's tool takes after each reply")
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout whose iclr serve runs (for --mode main)")
    parser.add_argument("--quick", action="store_true", help="steps 1..6, one conversation per mode")
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.repeat = 6, 1
    modes = args.mode or ["scratch", "kept"]
    httpd, upstream = _start_upstream()
    try:
        rows = []
        for mode in modes:
            rows += run(mode, args.proxy_model, args.steps, args.repeat, args.tool_s, args.repo if mode == "main" else REPO, upstream)
            print(json.dumps(rows[-args.steps:]), flush=True)
    finally:
        httpd.shutdown()
    print(table(rows, modes))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
