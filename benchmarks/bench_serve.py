"""Load test of ``iclr serve`` on loopback: concurrent conversations against a scripted upstream.

Run from the repository root::

    python benchmarks/bench_serve.py                      # 20 conversations x 10 steps, fake and smollm2
    python benchmarks/bench_serve.py --proxy-model fake   # one proxy model only
    python benchmarks/bench_serve.py --quick              # 5 x 4, a smoke run
    python benchmarks/bench_serve.py --tool-s 0 2 10      # scoring ahead, against a simulated tool time

For each proxy model it starts ``iclr serve --variant iclr`` as its own process in front of a
scripted OpenAI-compatible upstream (threads in this process, instant replies with a tool call
and reasoning of several blocks), runs ``--conversations`` agent-like clients at once (asyncio +
httpx), each ``--steps`` requests long, appending every reply and a tool result, and reports:

- errors (any non-200 answer, any request whose reasoning came back uncompressed);
- the latency the proxy added (its own ``/stats``: receipt to upstream send, compression and
  scoring included), p50/p95, and the client-side latency through the proxy against the same
  load sent to the upstream directly;
- the proxy's resident memory (``VmRSS``/``VmHWM`` of its process) after the run; then a second
  proxy with ``--max-conversations`` set low serves ``--churn`` short conversations, and the
  held conversations and memory are read again (state stays bounded).

Latencies are wall clock on whatever machine runs this; on a shared machine say so. With
``smollm2`` on a CPU every step of every conversation goes through one proxy model, so the
added latency is mostly queueing behind the scorer: on 2 shared, overloaded cores a 20 x 10 run
took over 20 minutes (use ``--conversations 4`` there); on a GPU or a quiet machine run the full one.

``--tool-s T ...`` measures scoring ahead instead: each client waits ``T`` seconds after every
reply (its tool running) before it sends the next request, and for each ``T`` the proxy runs
with ``--no-eager-scoring`` and with scoring ahead (the default). With ``T`` above the scoring
time, the next request finds its step scored and the added latency is the proxy's own.
``--serve-arg`` passes options to ``iclr serve``; ``--repo`` runs another checkout's proxy.
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORDS = ("the parser reads each line and splits the fields then checks the header before it writes the rows "
         "so a missing column or a stray quote shows up as an error on the line where it happens").split()


def _reasoning(conv: int, step: int, blocks: int = 5, words: int = 24) -> str:
    out = []
    for b in range(blocks):
        start = (conv * 7 + step * 3 + b * 5) % len(WORDS)
        out.append(" ".join(WORDS[(start + k) % len(WORDS)] for k in range(words)) + f" ({conv}.{step}.{b})")
    return "\n\n".join(out)


def _reply(body: dict) -> dict:
    msgs = body.get("messages") or []
    conv = int(msgs[1]["content"].split()[-1]) if len(msgs) > 1 else 0
    step = sum(m.get("role") == "assistant" for m in msgs)
    message = {
        "role": "assistant",
        "content": None,
        "reasoning_content": _reasoning(conv, step),
        "tool_calls": [{"id": f"call_{conv}_{step}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": f"ls step{step}"})}}],
    }
    prompt = sum(len(json.dumps(m)) for m in msgs) // 4
    return {"id": f"chatcmpl-{conv}-{step}", "object": "chat.completion", "created": 0, "model": "scripted",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": 80, "total_tokens": prompt + 80}}


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # headers and body go out in separate writes: without this, Nagle + delayed ACK add 40 ms
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        data = json.dumps(_reply(body)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(http.server.ThreadingHTTPServer):
    request_queue_size = 256  # socketserver's default backlog of 5 resets concurrent connects


def _start_upstream() -> tuple[http.server.ThreadingHTTPServer, str]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}/v1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_proxy(upstream: str, model: str, max_conversations: int, extra: list[str] = (), repo: Path = REPO) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    # Every step waits for its scores (--max-wait inf): this measures what scoring adds, as the
    # tables before the latency budget did; bench_serve_budget.py measures the budget.
    budget = ["--max-wait", "inf"] if (repo / "iclr_cli" / "serve" / "budget.py").exists() else []
    cmd = [sys.executable, "-m", "iclr_cli", "serve", "--upstream", upstream, "--port", str(port), "--proxy-model", model,
           "--max-conversations", str(max_conversations), "--quiet", *budget, *extra]
    proc = subprocess.Popen(cmd, env={**os.environ, "PYTHONPATH": str(repo)}, stderr=subprocess.PIPE, text=True)
    import httpx

    deadline = time.monotonic() + 300  # loading the real proxy model takes a while under load
    while True:
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
            return proc, f"http://127.0.0.1:{port}"
        except httpx.HTTPError:
            if proc.poll() is not None:
                raise SystemExit(f"iclr serve exited: {proc.stderr.read()}")
            if time.monotonic() > deadline:
                proc.kill()
                raise SystemExit("iclr serve did not start within 300 s")
            time.sleep(0.5)


def _memory_kib(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key = line.split(":")[0]
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(line.split()[1])
    return out


async def _conversation(client, base: str, conv: int, steps: int, latencies: list[float], errors: list[str], tool_s: float = 0.0) -> None:
    import httpx

    messages = [{"role": "system", "content": "You are a coding agent. Use bash."}, {"role": "user", "content": f"Fix the parser in task {conv}"}]
    for step in range(steps):
        start = time.perf_counter()
        try:
            resp = await client.post(base + "/v1/chat/completions", json={"model": "scripted", "messages": messages})
        except httpx.HTTPError as exc:
            errors.append(f"conversation {conv} step {step}: {type(exc).__name__}: {exc}")
            return
        latencies.append(time.perf_counter() - start)
        if resp.status_code != 200:
            errors.append(f"conversation {conv} step {step}: HTTP {resp.status_code} {resp.text[:200]}")
            return
        msg = resp.json()["choices"][0]["message"]
        messages = messages + [msg, {"role": "tool", "tool_call_id": msg["tool_calls"][0]["id"], "content": f"step{step}/\n" + "main.py  parser.py  tests/\n" * 12}]
        if tool_s and step + 1 < steps:
            await asyncio.sleep(tool_s)  # the agent runs its tool


async def _load(base: str, conversations: int, steps: int, tool_s: float = 0.0) -> tuple[list[float], list[str], float]:
    import httpx

    latencies: list[float] = []
    errors: list[str] = []
    start = time.perf_counter()
    limits = httpx.Limits(max_connections=conversations * 2)
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        await asyncio.gather(*(_conversation(client, base, c, steps, latencies, errors, tool_s) for c in range(conversations)))
    return latencies, errors, time.perf_counter() - start


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, int(-(-q * len(ordered) // 1)) - 1)] if ordered else float("nan")


def run(model: str, conversations: int, steps: int, churn: int, churn_cap: int, extra: list[str] = (), repo: Path = REPO) -> dict:
    import httpx

    httpd, upstream = _start_upstream()
    direct, direct_errors, _ = asyncio.run(_load(upstream.removesuffix("/v1"), conversations, steps))
    proc, base = _start_proxy(upstream, model, max(1000, conversations), extra, repo)
    try:
        before = _memory_kib(proc.pid)
        through, errors, wall = asyncio.run(_load(base, conversations, steps))
        stats = httpx.get(base + "/stats").json()
        after = _memory_kib(proc.pid)
    finally:
        proc.terminate()
        proc.wait(30)
    total = stats["total"]
    if total["steps_compressed"] != conversations * (steps - 1):
        errors.append(f"{total['steps_compressed']} steps compressed, expected {conversations * (steps - 1)}")
    if total["scorer_failures"]:
        errors.append(f"{total['scorer_failures']} scorer failures")
    result = {
        "proxy_model": stats["proxy_model"],
        "conversations": conversations,
        "steps": steps,
        "requests": total["requests"],
        "errors": errors,
        "direct_errors": direct_errors,  # the scripted upstream's own failures, without the proxy
        "wall_s": round(wall, 2),
        "added_ms_p50": total["added_latency_ms"]["p50"],
        "added_ms_p95": total["added_latency_ms"]["p95"],
        "client_ms_p50_proxy": round(_pct(through, 0.5) * 1000, 2),
        "client_ms_p95_proxy": round(_pct(through, 0.95) * 1000, 2),
        "client_ms_p50_direct": round(_pct(direct, 0.5) * 1000, 2),
        "client_ms_p95_direct": round(_pct(direct, 0.95) * 1000, 2),
        "scorer_batches": stats["scorer_batches"],
        "largest_scorer_batch": stats["largest_scorer_batch"],
        "reasoning_tokens_removed": total["reasoning_tokens_removed"],
        "reasoning_tokens_generated": total["reasoning_tokens_generated"],
        "rss_mib_start": round(before.get("VmRSS", 0) / 1024, 1),
        "rss_mib_end": round(after.get("VmRSS", 0) / 1024, 1),
        "peak_rss_mib": round(after.get("VmHWM", 0) / 1024, 1),
    }
    if churn:
        proc, base = _start_proxy(upstream, model, churn_cap, extra, repo)
        try:
            _, churn_errors, _ = asyncio.run(_load(base, churn // 2, 3))
            mid = _memory_kib(proc.pid)
            _, more_errors, _ = asyncio.run(_load(base, churn - churn // 2, 3))
            stats = httpx.get(base + "/stats").json()
            end = _memory_kib(proc.pid)
        finally:
            proc.terminate()
            proc.wait(30)
        result["churn"] = {
            "conversations": churn,
            "max_conversations": churn_cap,
            "held_after": stats["conversations_held"],
            "errors": churn_errors + more_errors,
            "rss_mib_half": round(mid.get("VmRSS", 0) / 1024, 1),
            "rss_mib_end": round(end.get("VmRSS", 0) / 1024, 1),
        }
    httpd.shutdown()
    return result


def run_tool_times(model: str, conversations: int, steps: int, tool_times: list[float], extra: list[str], repo: Path) -> list[dict]:
    """Added latency with scoring ahead off and on, for each simulated tool time (seconds)."""
    import httpx

    httpd, upstream = _start_upstream()
    rows = []
    try:
        for tool_s in tool_times:
            for ahead in (False, True):
                proc, base = _start_proxy(upstream, model, max(1000, conversations), [*extra, "--eager-scoring" if ahead else "--no-eager-scoring"], repo)
                try:
                    _, errors, wall = asyncio.run(_load(base, conversations, steps, tool_s))
                    stats = httpx.get(base + "/stats").json()
                finally:
                    proc.terminate()
                    proc.wait(30)
                total = stats["total"]
                if total["steps_compressed"] != conversations * (steps - 1):
                    errors.append(f"{total['steps_compressed']} steps compressed, expected {conversations * (steps - 1)}")
                row = {
                    "proxy_model": stats["proxy_model"], "tool_s": tool_s, "eager_scoring": ahead,
                    "conversations": conversations, "steps": steps, "errors": errors, "wall_s": round(wall, 2),
                    "added_ms_p50": total["added_latency_ms"]["p50"], "added_ms_p95": total["added_latency_ms"]["p95"],
                    "eager": stats.get("eager_scoring"),
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        httpd.shutdown()
    return rows


def tool_table(rows: list[dict]) -> str:
    """Markdown: one line per (proxy model, tool time), added latency off and on."""
    out = ["| proxy model | tool s | added p50 / p95, scored at the request | added p50 / p95, scored ahead | hits / waits / misses |",
           "| --- | ---: | ---: | ---: | ---: |"]
    for off, on in zip(rows[::2], rows[1::2]):
        e = on.get("eager") or {}
        out.append(f"| {on['proxy_model']} | {on['tool_s']:g} | {off['added_ms_p50']:.0f} / {off['added_ms_p95']:.0f} ms | "
                   f"{on['added_ms_p50']:.0f} / {on['added_ms_p95']:.0f} ms | {e.get('hits')} / {e.get('waits')} / {e.get('misses')} |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--proxy-model", action="append", help="fake, smollm2, ... (repeatable; default both)")
    parser.add_argument("--conversations", type=int, default=20)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--churn", type=int, default=200, help="short conversations served by a proxy with a low --max-conversations")
    parser.add_argument("--churn-cap", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="5 conversations x 4 steps, churn 20")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--tool-s", type=float, nargs="+", help="simulated tool times (s): measure scoring ahead off and on instead")
    parser.add_argument("--serve-arg", action="append", default=[], help="an option for iclr serve (repeatable), e.g. --serve-arg=--no-prefix-cache")
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout whose iclr serve runs (default: this one)")
    args = parser.parse_args()
    if args.quick:
        args.conversations, args.steps, args.churn, args.churn_cap = 5, 4, 20, 5
    if args.tool_s:
        rows = [r for model in args.proxy_model or ["fake", "smollm2"]
                for r in run_tool_times(model, args.conversations, args.steps, args.tool_s, args.serve_arg, args.repo)]
        print(tool_table(rows))
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
        if any(r["errors"] for r in rows):
            raise SystemExit(1)
        return
    results = []
    for model in args.proxy_model or ["fake", "smollm2"]:
        result = run(model, args.conversations, args.steps, args.churn if model == "fake" else 0, args.churn_cap, args.serve_arg, args.repo)
        results.append(result)
        print(json.dumps(result), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    if any(r["errors"] or (r.get("churn") or {}).get("errors") for r in results):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
