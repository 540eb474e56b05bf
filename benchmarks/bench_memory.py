"""Peak memory of ``iclr score`` on a long Claude Code session with one huge tool output.

A field report: one 18 MB JSONL line (a 9 MB minified tool output, stored twice, as Claude
Code stores every tool result: in ``message.content`` and again in ``toolUseResult``) made
``score`` peak at 3.98 GB. Goal: a ~100 MB session with a 50 MB tool output scored in under
1.5 GiB with the real proxy.

This script writes such a session (``--output-mb`` for the huge output, default 50; a few
reasoning steps before and after it) and runs ``iclr score`` on it in a fresh Python process per
configuration, the CLI in-process, reading the process's peak RSS (``VmHWM``)::

    python benchmarks/bench_memory.py                        # full: 50 MB output, fake and smollm2
    python benchmarks/bench_memory.py --quick                # 5 MB output, --max-tokens 2048
    python benchmarks/bench_memory.py --tree /path/to/other/checkout   # the same runs on another tree

``--models`` picks the proxies (``fake``, ``smollm2``; default both) and ``--contexts`` the
context modes (default ``auto``; ``auto`` takes ``fresh`` on this session). The load average
is printed with every row: the machine may be shared.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = str(Path(__file__).resolve().parent / "measure_child.py")  # see its docstring

WORDS = ("the", "parser", "fails", "when", "header", "is", "missing", "so", "check", "config", "loader", "path",
         "month", "helper", "clamp", "date", "report", "test", "value", "returns", "None", "first", "then")


def _line(record: dict) -> bytes:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def _minified_json(rng: random.Random, size: int) -> str:
    """About ``size`` characters of minified JSON, the shape of a large API or log dump."""
    items, total = [], 2
    while total < size:
        item = json.dumps({"id": rng.randrange(10**9), "name": " ".join(rng.choices(WORDS, k=3)), "ok": rng.random() < 0.9,
                           "tags": rng.choices(WORDS, k=2), "score": round(rng.random() * 100, 3)}, separators=(",", ":"))
        items.append(item)
        total += len(item) + 1
    return "[" + ",".join(items) + "]"


def write_session(path: Path, output_mb: float, steps: int = 8, huge_at: int = 3, seed: int = 0) -> int:
    """A Claude Code session JSONL at ``path``: ``steps`` assistant turns, each with thinking
    and a Bash call; the result of turn ``huge_at`` is ``output_mb`` MB, stored twice. Returns
    the file size in bytes."""
    rng = random.Random(seed)
    session, parent = "5e55-10n", None
    n = 0

    def event(kind: str, message: dict, **extra) -> bytes:
        nonlocal parent, n
        n += 1
        uid = f"u-{n:04d}"
        rec = {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/home/user/project",
               "sessionId": session, "version": "2.1.39", "type": kind, "message": message, "uuid": uid,
               "timestamp": f"2026-05-02T09:{n // 60:02d}:{n % 60:02d}.000Z", **extra}
        parent = uid
        return _line(rec)

    with path.open("wb") as out:
        out.write(event("user", {"role": "user", "content": "The monthly report crashes on the 31st. Find the cause and fix it."}))
        for i in range(steps):
            thinking = "\n\n".join(" ".join(rng.choices(WORDS, k=rng.randint(8, 20))).capitalize() + "." for _ in range(4))
            call = f"toolu_{i:03d}"
            out.write(event("assistant", {"model": "claude-opus-4-6", "id": f"msg_{i}", "type": "message", "role": "assistant",
                                          "content": [{"type": "thinking", "thinking": thinking, "signature": "c2lnbmF0dXJl"},
                                                      {"type": "tool_use", "id": call, "name": "Bash",
                                                       "input": {"command": f"cat data/dump_{i}.json"}}]}))
            output = _minified_json(rng, int(output_mb * 1e6)) if i == huge_at else _minified_json(rng, 2000)
            out.write(event("user", {"role": "user", "content": [{"tool_use_id": call, "type": "tool_result", "content": output, "is_error": False}]},
                            toolUseResult={"stdout": output, "stderr": "", "interrupted": False, "isImage": False}))
    return path.stat().st_size


def run_one(tree: Path, args: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        load = os.getloadavg()[0]
        env = {**os.environ, "PYTHONPATH": str(tree)}
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, CHILD, json.dumps({"args": [*args, "-q", "-o", str(Path(tmp) / "scores.jsonl")], "out": str(out)})],
                              cwd=tree, env=env, capture_output=True, text=True)
        if not out.is_file():
            return {"error": (proc.stderr or proc.stdout)[-400:], "load_start": load}
        res = json.loads(out.read_text())
        if res["code"]:
            res["error"] = proc.stderr[-400:]
        res.update(load_start=load, load_end=os.getloadavg()[0], process_s=time.perf_counter() - t)
        return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a 5 MB output and --max-tokens 2048 (a check that the script runs)")
    ap.add_argument("--output-mb", type=float, help="size of the huge tool output in MB (default 50; 5 with --quick)")
    ap.add_argument("--max-tokens", type=int, help="proxy input limit (default the CLI's; 2048 with --quick)")
    ap.add_argument("--models", nargs="+", default=["fake", "smollm2"])
    ap.add_argument("--contexts", nargs="+", default=["auto"], choices=["auto", "fresh", "sliding"])
    ap.add_argument("--tree", type=Path, default=ROOT, help="checkout whose iclr_cli is measured (default this one)")
    ap.add_argument("--keep", type=Path, help="write the session here and keep it")
    ap.add_argument("--json", help="also write every number to this file")
    args = ap.parse_args(argv)
    output_mb = args.output_mb if args.output_mb is not None else (5.0 if args.quick else 50.0)
    max_tokens = args.max_tokens if args.max_tokens is not None else (2048 if args.quick else None)
    with tempfile.TemporaryDirectory() as tmp:
        session = args.keep or Path(tmp) / "session.jsonl"
        size = write_session(session, output_mb)
        print(f"session: {session} ({size / 1e6:.1f} MB; one tool output of {output_mb:g} MB, stored twice); tree: {args.tree}")
        print(f"{'model':<9} {'context':<8} {'wall s':>8} {'cpu s':>8} {'peak MiB':>9} {'load':>9}")
        results = []
        for model in args.models:
            for context in args.contexts:
                cli = ["score", str(session), "--model", model, "--context", context]
                if max_tokens is not None:
                    cli += ["--max-tokens", str(max_tokens)]
                res = run_one(args.tree, cli)
                res.update(model=model, context=context, session_mb=size / 1e6, output_mb=output_mb)
                results.append(res)
                if "error" in res:
                    print(f"{model:<9} {context:<8} failed: {res['error']}")
                else:
                    print(f"{model:<9} {context:<8} {res['wall']:8.1f} {res['cpu']:8.1f} {res['peak_mib']:9.0f} "
                          f"{res['load_start']:4.1f}/{res['load_end']:<4.1f}", flush=True)
                if args.json:
                    Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
