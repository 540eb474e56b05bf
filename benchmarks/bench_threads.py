"""Scoring beside other work (docs/scoring.md, "When the machine is busy"): wall time with 0, 1 and 3 competing scorer processes,
before and after the thread policy, for ``iclr score``, ``iclr serve`` and Ray.

Run from the repository root, on a machine nobody else is using (the competition is part of
the measurement, so any other load distorts it)::

    python benchmarks/bench_threads.py --out bench-threads          # everything (see --help for the time)
    python benchmarks/bench_threads.py --quick --out /tmp/bt-quick  # a few minutes: the sample file, 0 and 1 competitor

``before`` runs the tree of commit ``--before`` (default ``94868b9``, main before the thread policy)
from a temporary ``git worktree``; ``after`` runs this checkout. Every measured run and every
competitor is a fresh process with ``OMP_WAIT_POLICY``, ``GOMP_SPINCOUNT``, ``KMP_BLOCKTIME``
and ``OMP_NUM_THREADS`` removed from its environment, so each side runs with its own defaults.

- **spin**: the mechanism alone. A process runs 2,000 small parallel matmuls, each followed by
  0.5 ms of sleep (the Python between two ops), with libgomp's default wait and with
  ``OMP_WAIT_POLICY=PASSIVE``; CPU seconds over wall seconds show the spinning.
- **score**: ``iclr score FILE -o OUT`` (default proxy, float32) on the held-out tau-bench file
  and the Codex rollout, while ``k`` competitors (0, 1, 3) each score the tau-bench file in a
  loop with the same side's code (scorer built once, its caches reset between passes). The
  competitors are started and have loaded their model before the measured run starts. Wall
  and CPU seconds of the measured process; its output must be byte for byte the same on both
  sides.
- **serve**: ``iclr serve`` in front of a scripted upstream on loopback (the one of
  ``bench_serve.py``): one agent-like conversation of ``--serve-steps`` requests, each step's
  reasoning scored by SmolLM2; the added latency is the proxy's own ``/stats`` p50 / p95.
- **ray**: ``iclr score --dataset`` over 2 rows (the tau-bench trajectory twice, shards of one
  row) with ``--engine ray --workers 2`` on a local cluster the command starts itself.

Results are written after every run to ``OUT/results.json`` and ``OUT/results.md`` (the table
for BENCHMARKS.md), so an interrupted run keeps what it measured. ``fair`` is the wall time
over ``(k + 1) x`` the quiet wall time of the same side: 1.0 is a fair share of the CPUs
(the goal for one competitor: at most 1.3); ``after / before`` below 1 is faster.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
REALDATA = next((p for p in (ROOT.parent / "shared/realdata", Path("/work/shared/realdata")) if p.is_dir()), ROOT.parent / "shared/realdata")
FILES = {
    "tau": REALDATA / "openai_chat_reasoning/taubench_airline_gpt5_wiki_random.json",
    "codex": REALDATA / "codex_rollout/agentcmd_rollout-2025-09-24T20-12-23.jsonl",
    "sample": ROOT / "sample_trajectories/openai_chat.json",
}
CLEARED = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME", "OMP_NUM_THREADS", "MKL_NUM_THREADS")

# A competitor: builds the scorer once, then scores argv[2] again and again until killed.
COMPETITOR = r"""
import sys
from iclr_cli.inputs import load_file
from iclr_cli.compress import Settings
from iclr_cli.pipeline import ScorerConfig, build_engines, compress_document
from iclr_cli.policies import parse_variant
variant = parse_variant("iclr")
scorer, tokenizer = build_engines(variant, ScorerConfig(sys.argv[1]))
_, doc = load_file(sys.argv[2])
print("ready", flush=True)
while True:
    compress_document(doc, Settings(variant), scorer, tokenizer)
    getattr(scorer, "reset", lambda: None)()
"""

# The mechanism: small parallel regions with Python in between (argv[1]: default or PASSIVE).
SPIN = r"""
import os, resource, sys, time
if sys.argv[1] != "default":
    os.environ["OMP_WAIT_POLICY"] = sys.argv[1]
import torch
a, b = torch.randn(256, 256), torch.randn(256, 256)
for _ in range(50):
    a @ b
r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
for _ in range(2000):
    a @ b
    time.sleep(0.0005)
wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
print(f'{{"wall_s": {wall:.3f}, "cpu_s": {cpu:.3f}}}')
"""


def clean_env(tree: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env.update(PYTHONPATH=str(tree), HF_HUB_OFFLINE="1", RAY_USAGE_STATS_ENABLED="0")
    return env


class Competitors:
    """``k`` competing scorer processes of ``tree``'s code, started and loaded on enter."""

    def __init__(self, tree: Path, k: int, model: str, path: Path):
        self.tree, self.k, self.model, self.path = tree, k, model, path
        self.procs: list[subprocess.Popen] = []

    def __enter__(self):
        for _ in range(self.k):
            self.procs.append(subprocess.Popen([sys.executable, "-c", COMPETITOR, self.model, str(self.path)], cwd=self.tree,
                                               env=clean_env(self.tree), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                               text=True, start_new_session=True))
        for proc in self.procs:
            if proc.stdout.readline().strip() != "ready":
                self.__exit__()
                raise SystemExit(f"a competitor failed to start (exit {proc.wait()})")
        return self

    def __exit__(self, *exc):
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            proc.wait()
        self.procs = []


def timed_process(cmd: list[str], tree: Path, env: dict | None = None) -> dict:
    """Run ``cmd`` in ``tree``; wall and CPU seconds (its own and its children's: Ray's workers
    run under their raylet, not under the command, so theirs are not counted)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=tree, env=env or clean_env(tree), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    result = {"wall_s": round(wall, 2), "cpu_s": round(usage.ru_utime + usage.ru_stime, 2), "exit": code}
    if code:
        result["error"] = err[-600:]
    return result


def run_score(tree: Path, model: str, path: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "scores.jsonl"
        result = timed_process([sys.executable, "-m", "iclr_cli", "score", str(path), "--model", model, "-q", "-o", str(out)], tree)
        if out.is_file():
            result["output_sha256"] = hashlib.sha256(out.read_bytes()).hexdigest()[:16]
    return result


def run_serve(tree: Path, model: str, steps: int) -> dict:
    import httpx

    from bench_serve import _conversation, _free_port, _start_upstream

    httpd, upstream = _start_upstream()
    port = _free_port()
    budget = ["--max-wait", "inf"] if (Path(tree) / "iclr_cli" / "serve" / "budget.py").exists() else []  # every step scored, as before the budget
    proc = subprocess.Popen([sys.executable, "-m", "iclr_cli", "serve", "--upstream", upstream, "--port", str(port),
                             "--proxy-model", model, "--quiet", *budget], cwd=tree, env=clean_env(tree),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 600
        while True:
            try:
                httpx.get(base + "/healthz", timeout=2)
                break
            except httpx.HTTPError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    return {"error": f"iclr serve did not start (exit {proc.poll()})"}
                time.sleep(0.5)
        latencies: list[float] = []
        errors: list[str] = []

        async def one() -> None:
            async with httpx.AsyncClient(timeout=900) as client:
                await _conversation(client, base, 0, steps, latencies, errors)

        start = time.perf_counter()
        asyncio.run(one())
        wall = time.perf_counter() - start
        total = httpx.get(base + "/stats", timeout=30).json()["total"]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)
        httpd.shutdown()
    result = {"wall_s": round(wall, 2), "added_ms_p50": total["added_latency_ms"]["p50"],
              "added_ms_p95": total["added_latency_ms"]["p95"], "steps_compressed": total["steps_compressed"]}
    if errors:
        result["error"] = "; ".join(errors)[:600]
    return result


def build_dataset(folder: Path, rows: int) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    messages = json.loads(FILES["tau"].read_text())[0]["traj"]
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist([{"id": f"tau-{i}", "messages": messages} for i in range(rows)]), folder / "train.parquet")
    return folder


def run_ray(tree: Path, model: str, dataset: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "scores.jsonl"
        env = clean_env(tree)
        env.pop("RAY_ADDRESS", None)
        result = timed_process([sys.executable, "-m", "iclr_cli", "score", "--dataset", str(dataset), "--model", model, "--engine", "ray",
                                "--workers", "2", "--shard-rows", "1", "-q", "-o", str(out)], tree, env)
        if out.is_file():
            result["output_sha256"] = hashlib.sha256(out.read_bytes()).hexdigest()[:16]
    return result


def run_spin(tree: Path, policy: str) -> dict:
    done = subprocess.run([sys.executable, "-c", SPIN, policy], cwd=tree, env=clean_env(tree), capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def plan(args) -> list[dict]:
    """Every measurement, before and after interleaved for each configuration."""
    sides = ["before", "after"]
    jobs = [{"case": "spin", "file": "-", "k": 0, "side": s, "policy": s == "after" and "PASSIVE" or "default"} for s in sides]
    for name in args.files:
        for k in args.competitors:
            jobs += [{"case": "score", "file": name, "k": k, "side": s} for s in sides]
    for k in args.competitors if args.serve_steps else []:
        jobs += [{"case": "serve", "file": f"{args.serve_steps} steps", "k": k, "side": s} for s in sides]
    for k in args.ray_competitors:
        jobs += [{"case": "ray", "file": "2 rows", "k": k, "side": s} for s in sides]
    return [dict(job, repeat=r) for job in jobs for r in range(args.repeat)]


def markdown(results: list[dict]) -> str:
    """The table of BENCHMARKS.md: one row per (case, input, competitors), medians of repeats."""
    def median(values):
        values = sorted(v for v in values if v is not None)
        return values[len(values) // 2] if values else None

    def cell(case, file, k, side, key):
        return median([r.get(key) for r in results if (r["case"], r["file"], r["k"], r["side"]) == (case, file, k, side) and "error" not in r])

    def fmt(value, digits=1):
        return "-" if value is None else f"{value:,.{digits}f}"

    lines = ["| case | input | competitors | before wall s | after wall s | after / before | before fair | after fair | before cpu s | after cpu s | same output |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    keys = list(dict.fromkeys((r["case"], r["file"], r["k"]) for r in results if r["case"] != "serve"))
    for case, file, k in keys:
        b, a = cell(case, file, k, "before", "wall_s"), cell(case, file, k, "after", "wall_s")
        quiet_b, quiet_a = cell(case, file, 0, "before", "wall_s"), cell(case, file, 0, "after", "wall_s")
        fair_b = b / ((k + 1) * quiet_b) if b and quiet_b and case != "spin" else None
        fair_a = a / ((k + 1) * quiet_a) if a and quiet_a and case != "spin" else None
        hashes = {r.get("output_sha256") for r in results if (r["case"], r["file"], r["k"]) == (case, file, k) and r.get("output_sha256")}
        same = "-" if not hashes else ("yes" if len(hashes) == 1 else "NO")
        lines.append(f"| {case} | {file} | {k} | {fmt(b)} | {fmt(a)} | {fmt(a / b if a and b else None, 2)} | {fmt(fair_b, 2)} | "
                     f"{fmt(fair_a, 2)} | {fmt(cell(case, file, k, 'before', 'cpu_s'))} | {fmt(cell(case, file, k, 'after', 'cpu_s'))} | {same} |")
    serve = list(dict.fromkeys((r["file"], r["k"]) for r in results if r["case"] == "serve"))
    if serve:
        lines += ["", "| serve | competitors | before added p50 / p95 ms | after added p50 / p95 ms | before wall s | after wall s |",
                  "| --- | ---: | ---: | ---: | ---: | ---: |"]
        for file, k in serve:
            def lat(side):
                return f"{fmt(cell('serve', file, k, side, 'added_ms_p50'), 0)} / {fmt(cell('serve', file, k, side, 'added_ms_p95'), 0)}"
            lines.append(f"| {file} | {k} | {lat('before')} | {lat('after')} | {fmt(cell('serve', file, k, 'before', 'wall_s'))} | "
                         f"{fmt(cell('serve', file, k, 'after', 'wall_s'))} |")
    failed = [r for r in results if "error" in r]
    if failed:
        lines += ["", *(f"- failed: {r['case']} {r['file']} k={r['k']} {r['side']}: {r['error'][:200]}" for r in failed)]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for results.json and results.md")
    ap.add_argument("--before", default="94868b9", help="commit measured as 'before' (default 94868b9, main before the thread policy)")
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--files", nargs="+", default=["tau", "codex"], choices=sorted(FILES))
    ap.add_argument("--competitors", nargs="+", type=int, default=[0, 1, 3])
    ap.add_argument("--serve-steps", type=int, default=6, help="requests of the serve conversation (0: no serve runs)")
    ap.add_argument("--ray-competitors", nargs="*", type=int, default=[0, 1], help="competitors for the Ray runs (none: no Ray runs)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each configuration (the table shows medians)")
    ap.add_argument("--quick", action="store_true", help="the sample file, 0 and 1 competitor, 3 serve steps, Ray quiet only")
    args = ap.parse_args(argv)
    if args.quick:
        args.files, args.competitors, args.serve_steps, args.ray_competitors = ["sample"], [0, 1], 3, [0]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))  # the worktree and competitors still go
    jobs = plan(args)
    results: list[dict] = []
    worktree = Path(tempfile.mkdtemp(prefix="iclr-before-"))
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(worktree), args.before], check=True, capture_output=True)
    trees = {"before": worktree, "after": ROOT}
    dataset = build_dataset(Path(tempfile.mkdtemp(prefix="iclr-bench-ds-")), 2)
    started = time.monotonic()
    try:
        for n, job in enumerate(jobs, 1):
            tree = trees[job["side"]]
            load = os.getloadavg()[0]
            if job["case"] == "spin":
                res = run_spin(tree, job["policy"])
            else:
                with Competitors(tree, job["k"], args.model, FILES["tau"] if not args.quick else FILES["sample"]):
                    if job["case"] == "score":
                        res = run_score(tree, args.model, FILES[job["file"]])
                    elif job["case"] == "serve":
                        res = run_serve(tree, args.model, args.serve_steps)
                    else:
                        res = run_ray(tree, args.model, dataset)
            res = {**job, **res, "load_start": round(load, 2), "load_end": round(os.getloadavg()[0], 2)}
            results.append(res)
            shown = res.get("error", "")[:120] or f"wall {res.get('wall_s')} s, cpu {res.get('cpu_s', '-')} s" + \
                (f", added p50 {res['added_ms_p50']} ms" if "added_ms_p50" in res else "")
            print(f"[{n}/{len(jobs)} {time.monotonic() - started:,.0f} s] {job['case']} {job['file']} k={job['k']} {job['side']}: {shown}", flush=True)
            (out / "results.json").write_text(json.dumps({"before": args.before, "cpus": os.cpu_count(), "results": results}, indent=2) + "\n")
            (out / "results.md").write_text(markdown(results))
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(worktree)], capture_output=True)
        shutil.rmtree(dataset, ignore_errors=True)
    print(markdown(results))
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
