"""``iclr serve`` replicas behind a round-robin balancer, with and without a shared state store.

Run from the repository root::

    python benchmarks/bench_replicas.py                               # SmolLM2; rows: 1 replica, 2 without, 2 on SQLite
    python benchmarks/bench_replicas.py --stores none sqlite redis postgres \
        --redis redis://127.0.0.1:6379/0 --postgres postgresql://iclr@127.0.0.1:5432/postgres
    python benchmarks/bench_replicas.py --proxy-model fake:400        # a paced fake (no model)
    python benchmarks/bench_replicas.py --busy 2                      # two CPU-bound processes beside

The sessions are :mod:`bench_serve_budget`'s Claude-Code-shaped ones (Anthropic SDK, streamed,
a ~20K-token P with a cache marker, ~400-token tool results) at a provider's pace (1.5-3 s to
the first token, then 60 tokens a second), ``--sessions`` of them at once, each request on a
new connection. Each row starts ``--replicas`` ``iclr serve`` processes (the real proxy model,
``--max-wait`` 0.5 s, ``--late as-sent``) and a balancer on 127.0.0.1 that sends every request
to the next replica in turn, as a round-robin load balancer does. A row reports the steps
compressed (summed over the replicas' ``/stats``; and as the upstream received them), the
steps sent late, the prefix breaks as the provider saw them (requests of a conversation that
do not extend its previous request), each replica's resident memory at the end, and the
slowest session's wall time.
"""

from __future__ import annotations

import argparse
import http.server
import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_serve_budget import _busy, _by_task, _cpu, _free_port, _p, _start_upstream, session, wait_until_up  # noqa: E402


class _Balancer(http.server.BaseHTTPRequestHandler):
    """Round robin over ``backends``, one request at a time, the answer streamed through."""

    backends: list[str] = []
    turn = itertools.count()
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        import httpx

        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        backend = self.backends[next(self.turn) % len(self.backends)]
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length", "connection")}
        with httpx.stream("POST", backend + self.path, content=body, headers=headers, timeout=900) as answer:
            self.send_response(answer.status_code)
            for k, v in answer.headers.items():
                if k.lower() not in ("content-length", "transfer-encoding", "connection", "content-encoding"):
                    self.send_header(k, v)
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            for chunk in answer.iter_raw():
                self.wfile.write(chunk)
                self.wfile.flush()


def _balancer(backends: list[str]):
    handler = type("Balancer", (_Balancer,), {"backends": backends, "turn": itertools.count()})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"


def _replica(upstream: str, args, state: str | None):
    port = _free_port()
    cmd = [sys.executable, "-m", "iclr_cli", "serve", "--upstream", upstream + "/v1", "--port", str(port), "--proxy-model", args.proxy_model,
           "--max-wait", str(args.max_wait), "--late", "as-sent", "--quiet", *(["--state", state] if state else [])]
    env = {**os.environ, "PYTHONPATH": str(REPO), **dict(kv.split("=", 1) for kv in args.env)}
    proc = subprocess.Popen(cmd, env=env, cwd=REPO, stderr=subprocess.PIPE, text=True)
    wait_until_up(proc, f"http://127.0.0.1:{port}/health/readiness", f"iclr serve ({' '.join(cmd)})", proc.stderr.read)
    return proc, f"http://127.0.0.1:{port}"


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _unmarked(value):
    """``value`` without cache markers (the client moves its marker to the last message every
    request; the provider's cached prefix is the content, not the marker)."""
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


def _breaks(bodies: list[dict]) -> int:
    """Prefix breaks the provider saw, at most per conversation."""
    worst = 0
    for conv in _by_task(bodies):
        items = [_unmarked(b["messages"]) for b in conv]
        worst = max(worst, sum(now[: len(before)] != before for before, now in zip(items, items[1:])))
    return worst


def _compressed_sent(bodies: list[dict]) -> int:
    """Steps whose thinking reached the upstream compressed, over every conversation's last request."""
    total = 0
    for conv in _by_task(bodies):
        for message in conv[-1]["messages"]:
            if message["role"] == "assistant" and isinstance(message["content"], list):
                total += any("[SKIP]" in (b.get("thinking") or "") for b in message["content"])
    return total


def _fresh_database(url: str) -> str:
    """``url`` with a new, empty database of its own (created here), so a row never finds the
    steps an earlier row decided (the conversations of every row are the same)."""
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    name = f"iclr_bench_{int(time.time() * 1000)}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def row(args, replicas: int, store: str, p) -> dict:
    import httpx

    state = {"none": None, "sqlite": tempfile.mkdtemp(prefix="iclr-bench-state-"), "redis": args.redis, "postgres": args.postgres}[store]
    if store == "redis" and state:  # a row of its own: nothing decided by an earlier row
        state += ("&" if "?" in state else "?") + f"prefix=bench{int(time.time())}:"
    if store == "postgres" and state:
        state = _fresh_database(state)
    httpd, handler, upstream = _start_upstream(args.steps, 1.0, "provider")
    procs = []
    try:
        bases = []
        for _ in range(replicas):
            proc, base = _replica(upstream, args, state)
            procs.append(proc)
            bases.append(base)
        balancer, front = _balancer(bases)
        system, tools = p
        walls: list[float] = []
        threads = [threading.Thread(target=lambda k=k: walls.append(session(front, 10 + k, system, tools, args.tool_s))) for k in range(args.sessions)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        totals = [httpx.get(b + "/stats", timeout=60).json()["total"] for b in bases]
        balancer.shutdown()
        return {"replicas": replicas, "store": store, "sessions": args.sessions, "steps": args.steps * args.sessions,
                "steps_compressed": sum(t["steps_compressed"] for t in totals), "compressed_as_sent": _compressed_sent(handler.bodies),
                "steps_late": sum(t["steps_late"] for t in totals), "late_by_cause": [t["steps_late_by_cause"] for t in totals],
                "breaks_seen_by_provider": _breaks(handler.bodies), "breaks_counted": sum(t["prefix_breaks"] for t in totals),
                "rss_mib": [_rss_mib(p.pid) for p in procs], "slowest_wall_s": round(max(walls), 1)}
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(60)
        httpd.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proxy-model", default="smollm2")
    parser.add_argument("--p-tokens", type=int, default=20_000)
    parser.add_argument("--steps", type=int, default=5, help="tool steps a session")
    parser.add_argument("--sessions", type=int, default=2, help="sessions at once")
    parser.add_argument("--tool-s", type=float, default=0.3)
    parser.add_argument("--max-wait", type=float, default=0.5)
    parser.add_argument("--stores", nargs="+", default=["none", "sqlite"], choices=["none", "sqlite", "redis", "postgres"])
    parser.add_argument("--redis", default=None)
    parser.add_argument("--postgres", default=None)
    parser.add_argument("--env", action="append", default=[], metavar="K=V")
    parser.add_argument("--no-single", action="store_true", help="skip the one-replica row")
    parser.add_argument("--busy", type=int, default=0, help="CPU-bound processes running beside the replicas throughout")
    args = parser.parse_args()
    from iclr_cli.scoring.factory import load_tokenizer

    p = _p(args.p_tokens, load_tokenizer("smollm2"))
    caps = [f"{k}={os.environ[k]}" for k in ("MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY") if k in os.environ]
    print(json.dumps({"load": os.getloadavg(), "cpu": _cpu(), "proxy_model": args.proxy_model, "env": args.env + caps, "busy": args.busy}), flush=True)
    busy = _busy(args.busy)
    try:
        if not args.no_single:
            print(json.dumps(row(args, 1, "none", p)), flush=True)
        for store in args.stores:
            print(json.dumps(row(args, 2, store, p)), flush=True)
    finally:
        for b in busy:
            b.kill()
    print(json.dumps({"load_after": os.getloadavg()}), flush=True)


if __name__ == "__main__":
    main()
