"""Dataset throughput: ``--engine local`` vs ``--engine ray`` with 1 and 2 scorer actors, and
memory against the number of rows.

Run from the repository root::

    python benchmarks/bench_corpus.py                      # real proxy, 4 rows (minutes on 2 CPUs)
    python benchmarks/bench_corpus.py --model fake --rows 64 --shard-rows 8
    python benchmarks/bench_corpus.py --num-gpus-per-worker 1   # on a GPU machine

The dataset is built in a temp folder (parquet, one OpenAI message list per row) from the
tau-bench trajectory in ``../shared/realdata`` (10 assistant turns, 6.8k reasoning-and-context
tokens), repeated under distinct ids. Each configuration runs ``score --dataset`` end to end
through :func:`iclr_cli.corpus.run.run_dataset` (read, scoring, write-back of records, manifest)
and reports rows/s and reasoning tokens/s (the units of the progress line; reasoning tokens
are counted by the proxy's tokenizer). The Ray cluster is started once before the timed runs
(its start-up is printed apart); actor start-up and model loading are inside each timed run,
as they are for a user. Results of every configuration are checked against the local run
(same records, entropies within 1e-6 bits).

The memory section runs ``score --dataset`` with the fake scorer over ``--memory-rows`` rows in
a fresh process and prints its RSS after the first tenth of the shards and at the end:
streamed shards keep it flat. (The peak also holds what ``datasets``' parquet reader keeps for
the file, which grows with the size of one file, not with the rows processed.)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from iclr_cli.compress import Settings  # noqa: E402
from iclr_cli.corpus.run import EngineOptions, run_dataset  # noqa: E402
from iclr_cli.corpus.shard import Job  # noqa: E402
from iclr_cli.corpus.source import DatasetSpec  # noqa: E402
from iclr_cli.pipeline import ScorerConfig  # noqa: E402
from iclr_cli.policies import parse_variant  # noqa: E402
from iclr_cli.render.output import Output  # noqa: E402

REAL = ROOT.parent / "shared" / "realdata" / "openai_chat_reasoning" / "taubench_airline_gpt5_wiki_random.json"
if not REAL.exists():
    REAL = Path("/work/shared/realdata/openai_chat_reasoning/taubench_airline_gpt5_wiki_random.json")


def build_dataset(folder: Path, rows: int) -> Path:
    """``rows`` copies of the tau-bench run as one parquet file, ids ``tau-0``..."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    messages = json.loads(REAL.read_text())[0]["traj"]
    folder.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist([{"id": f"tau-{i}", "messages": messages} for i in range(rows)])
    # Row groups of 64 rows, as datasets writes them (one group of every row would make the
    # reader hold the whole file).
    pq.write_table(table, folder / "train.parquet", row_group_size=64)
    return folder


def timed(src: Path, out: Path, model: str, shard_rows: int, options: EngineOptions) -> dict:
    job = Job("score", DatasetSpec(str(src)), Settings(parse_variant("iclr")), ScorerConfig(model), shard_rows)
    start = time.perf_counter()
    result = run_dataset(job, options, str(out), Output(str(out), quiet=True))
    wall = time.perf_counter() - start
    return {
        "rows": result.rows, "wall_s": round(wall, 2), "rows_per_s": round(result.rows / wall, 3),
        "reasoning_tokens": result.summary.tokens_before, "tokens_per_s": round(result.summary.tokens_before / wall, 1),
    }


def max_entropy_diff(a: Path, b: Path) -> float:
    ra = [json.loads(x) for x in a.read_text().splitlines()]
    rb = [json.loads(x) for x in b.read_text().splitlines()]
    strip = lambda r: {k: v for k, v in r.items() if k != "entropy_bits"}  # noqa: E731
    if len(ra) != len(rb) or any(strip(x) != strip(y) for x, y in zip(ra, rb)):
        return math.inf
    return max((abs(x["entropy_bits"] - y["entropy_bits"]) for x, y in zip(ra, rb) if x.get("entropy_bits") is not None), default=0.0)


def rss_profile_mib(src: Path, out: Path, shard_rows: int) -> dict:
    """RSS of a fresh ``iclr score --dataset --model fake`` process after each finished shard:
    at the first tenth of the shards, at the end, and the peak."""
    code = (
        "import sys\n"
        "from iclr_cli.corpus import sinks\n"
        "from iclr_cli.cli.app import main\n"
        "seen = []\n"
        "write = sinks.ScoreSink.write\n"
        "def record(self, entry, data):\n"
        "    write(self, entry, data)\n"
        "    seen.append(int(open('/proc/self/statm').read().split()[1]) * 4096 / 2**20)\n"
        "sinks.ScoreSink.write = record\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "peak = [int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM')][0] / 1024\n"
        "print(seen[len(seen) // 10], seen[-1], peak)\n"
    )
    args = ["score", "--dataset", str(src), "--model", "fake", "--shard-rows", str(shard_rows), "-q", "-o", str(out)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    done = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True, text=True, env=env)
    tenth, last, peak = (round(float(x), 1) for x in done.stdout.split()[-3:])
    return {"after_first_tenth": tenth, "at_end": last, "peak": peak}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2", help="proxy: smollm2 (default), fake, or a model folder")
    parser.add_argument("--rows", type=int, default=4)
    parser.add_argument("--shard-rows", type=int, default=1)
    parser.add_argument("--workers", default="1,2", help="Ray actor counts to time")
    parser.add_argument("--num-gpus-per-worker", type=float, default=0.0)
    parser.add_argument("--memory-rows", type=int, default=1600, help="rows of the memory section (0: skip)")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    if not REAL.exists():
        print(f"bench_corpus: {REAL} is missing (../shared/realdata)", file=sys.stderr)
        return 2
    results: dict = {"load_avg_before": os.getloadavg(), "cpus": os.cpu_count(), "model": args.model, "rows": args.rows, "shard_rows": args.shard_rows}
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        src = build_dataset(tmp_path / "ds", args.rows)
        print(f"dataset: {args.rows} rows of the tau-bench run, shards of {args.shard_rows}; model {args.model}; "
              f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
        runs = {"local": timed(src, tmp_path / "local.jsonl", args.model, args.shard_rows, EngineOptions())}
        from iclr_cli.corpus.ray_engine import RayOptions, connect

        start = time.perf_counter()
        started = connect(RayOptions())
        results["ray_start_s"] = round(time.perf_counter() - start, 1)
        try:
            for n in [int(w) for w in args.workers.split(",")]:
                out = tmp_path / f"ray{n}.jsonl"
                runs[f"ray x{n}"] = timed(src, out, args.model, args.shard_rows, EngineOptions("ray", n, args.num_gpus_per_worker))
                runs[f"ray x{n}"]["max_diff_bits"] = max_entropy_diff(tmp_path / "local.jsonl", out)
        finally:
            if started:
                import ray

                ray.shutdown()
        results["runs"] = runs
        print(f"ray cluster start (not in the runs below): {results['ray_start_s']} s")
        print(f"{'engine':<10} {'rows':>5} {'wall s':>8} {'rows/s':>8} {'reasoning tok':>14} {'tok/s':>8} {'max|d| bits':>12}")
        for name, r in runs.items():
            diff = r.get("max_diff_bits")
            print(f"{name:<10} {r['rows']:>5} {r['wall_s']:>8} {r['rows_per_s']:>8} {r['reasoning_tokens']:>14} {r['tokens_per_s']:>8} "
                  f"{'-' if diff is None else f'{diff:.1e}':>12}")
        if args.memory_rows:
            mem_src = build_dataset(tmp_path / "mem", args.memory_rows)
            memory = rss_profile_mib(mem_src, tmp_path / "mem.jsonl", 16)
            results["memory_mib"] = memory
            print(f"RSS of score --dataset --model fake over {args.memory_rows} rows (shards of 16): "
                  f"{memory['after_first_tenth']} MiB after the first tenth of the shards, {memory['at_end']} MiB at the end, "
                  f"peak {memory['peak']} MiB")
    results["load_avg_after"] = os.getloadavg()
    print(f"load average after: {results['load_avg_after'][0]:.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
