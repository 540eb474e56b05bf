"""The state store's added latency per request, with many conversations at once.

Run from the repository root (Redis and PostgreSQL are optional; give their URLs)::

    python benchmarks/bench_store.py                                  # SQLite only, 128 conversations
    python benchmarks/bench_store.py --redis redis://127.0.0.1:6379/0 \
        --postgres postgresql://iclr@127.0.0.1:5432/postgres --conversations 128 --requests 20

Each conversation is a thread that makes ``--requests`` requests, ``--interval`` seconds apart
(an agent's turn; 0: back to back, what the store sustains at most), each doing the
store calls one request of ``iclr serve`` makes with ``--state`` (:mod:`iclr_cli.serve.shared`,
:mod:`iclr_cli.serve.state`): look up the step it has not seen (read-through), claim the step
it decided (first writer wins), offer the next step as being scored and then scored (what the
replica that relayed the reply writes), take that offer (what the next replica reads), and
mark the conversation used. The table gives that request's time in the store, p50 / p95 / max
in milliseconds, over every request of every conversation; SQLite is the one-machine baseline.
Two processes open each store, as two replicas would, and the conversations alternate between
them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_replicas import _fresh_database  # noqa: E402
from bench_serve_budget import _cpu  # noqa: E402

from iclr_cli.serve.state_url import open_store  # noqa: E402
from iclr_cli.serve.store import StoredStep  # noqa: E402

SETTINGS = {"variant": "iclr", "ratio": 0.8, "bench": "store"}
# a step's reasoning as sent: five paragraphs, four of them [SKIP]
TEXT = ("Read the failing test and the parser it exercises. " * 8 + "\n\n[SKIP]" * 4,)


def _request(store, conv: str, k: int) -> float:
    start = time.perf_counter()
    key, ahead = f"{conv}:{k}", f"{conv}:{k + 1}"
    if store.step(conv, key) is None:
        store.claim(conv, key, StoredStep(TEXT, 120, 96))
    store.offer(conv, ahead, None)
    store.offer(conv, ahead, StoredStep(TEXT, 120, 96))
    store.offered(conv, ahead)
    store.touch(conv)
    return time.perf_counter() - start


def run(location: str, conversations: int, requests: int, interval_s: float) -> dict:
    stores = [open_store(location, SETTINGS), open_store(location, SETTINGS)]
    times: list[float] = []
    lock = threading.Lock()
    prefix = f"b{int(time.time() * 1000)}"

    def conversation(c: int) -> None:
        time.sleep(interval_s * c / conversations)  # spread the starts over one interval
        mine = []
        for k in range(requests):
            mine.append(_request(stores[(c + k) % 2], f"{prefix}-{c}", k))
            time.sleep(interval_s)
        with lock:
            times.extend(mine)

    threads = [threading.Thread(target=conversation, args=(c,)) for c in range(conversations)]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - began
    for store in stores:
        store.close()
    ms = sorted(1000 * t for t in times)
    return {"requests": len(ms), "p50_ms": round(statistics.median(ms), 2), "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 2),
            "max_ms": round(ms[-1], 2), "requests_per_s": round(len(ms) / wall)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=128)
    parser.add_argument("--requests", type=int, default=20, help="requests per conversation")
    parser.add_argument("--redis", default=None)
    parser.add_argument("--postgres", default=None)
    parser.add_argument("--interval", type=float, nargs="+", default=[1.0, 0.0],
                        help="seconds between a conversation's requests (its agent's turn); 0: back to back, the store's ceiling")
    args = parser.parse_args()
    print(json.dumps({"cpu": _cpu(), "load": os.getloadavg(), "conversations": args.conversations, "requests": args.requests}), flush=True)
    rows = [("SQLite", tempfile.mkdtemp(prefix="iclr-bench-store-"))]
    if args.redis:
        rows.append(("Redis", args.redis + ("&" if "?" in args.redis else "?") + f"prefix=bench{int(time.time())}:"))
    if args.postgres:
        rows.append(("PostgreSQL", _fresh_database(args.postgres)))
    print("| store | interval s | requests | store time per request ms p50 / p95 / max | requests/s |")
    print("|---|---|---|---|---|")
    for interval in args.interval:
        for name, location in rows:
            got = run(location, args.conversations, args.requests, interval)
            print(f"| {name} | {interval:g} | {got['requests']} | {got['p50_ms']} / {got['p95_ms']} / {got['max_ms']} | {got['requests_per_s']} |", flush=True)
    print(json.dumps({"load_after": os.getloadavg()}))


if __name__ == "__main__":
    main()
