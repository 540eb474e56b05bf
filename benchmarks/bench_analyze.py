"""Cost of ``iclr analyze patch`` per boundary: the cached patched runs against L + 2 plain forwards.

Run from the repository root::

    python benchmarks/bench_analyze.py --quick        # 2 boundaries, 512-token limit (about 2 minutes on 2 quiet cores)
    python benchmarks/bench_analyze.py                # the default files, 8,192 tokens (see BENCHMARKS.md)
    python benchmarks/bench_analyze.py --json out.json --max-tokens 4096 FILE...

For every boundary of the given trajectories (default: the mini-SWE-agent and tau-bench files
in ``../shared/realdata``) the same patching is done twice with the same sensor:

1. **ours** (what ``iclr analyze patch`` runs): the full and the deleted history read with
   the stream caches (prefix reuse across boundaries), then one one-token run per layer on
   the deleted run's stored keys and values (:meth:`iclr_cli.analysis.sensor.Sensor.patch`);
2. **plain**: ``L + 2`` forwards of the whole input, no reuse: the full history, the deleted
   history, and the deleted history once per layer with a forward hook
   (:meth:`~iclr_cli.analysis.sensor.Sensor.patch_by_hook`).

It prints, per file and in total, the seconds and forwarded tokens per boundary of each, the
ratio plain / ours, and the largest difference in repair between the two (they compute the
same thing: it should be float rounding, about 1e-6). Timings on a shared machine are
distorted; the load average is printed with them. On a busy machine pass ``--threads 1``:
two OpenMP threads that wait for each other made a one-token run 100x slower here.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

REALDATA = next((p for p in ("../shared/realdata", "../../shared/realdata") if os.path.isdir(p)), "../shared/realdata")
DEFAULT_FILES = ("mini_swe_agent/github_issue.traj.json", "openai_chat_reasoning/taubench_airline_gpt5_wiki_random.json")


def run_file(sensor, path: str, limit: int | None) -> list[dict]:
    """Both methods on every boundary of ``path`` (at most ``limit`` boundaries)."""
    from iclr_cli.analysis.boundaries import boundaries, delete_all, lay_out
    from iclr_cli.analysis.inputs import read_paths
    from iclr_cli.analysis.stats import kl_bits

    rows = []
    layers = range(sensor.n_layers)
    for src in read_paths([path]).sources:
        traj = src.trajectory
        found = [b for b in boundaries(traj, delete_all(traj, sensor.tokenizer), ) if b.removes_reasoning][:limit]
        for b in found:
            full = lay_out(b.prompt, b.full, b.head, b.head_chars, sensor.encode, sensor.max_tokens, sensor.overflow)
            dele = lay_out(b.prompt, b.deleted, b.head, b.head_chars, sensor.encode, sensor.max_tokens, sensor.overflow)
            if full.plan.skipped or dele.plan.skipped:
                continue
            before = sensor.forwarded
            start = time.perf_counter()
            rf = sensor.read("ours-full", full.ids)
            rd = sensor.read("ours-deleted", dele.ids)
            ours = sensor.patch("ours-deleted", rf.residuals, layers)
            ours_s, ours_tokens = time.perf_counter() - start, sensor.forwarded - before + len(ours)
            d = kl_bits(rf.logprobs, rd.logprobs)

            before = sensor.forwarded
            start = time.perf_counter()
            pf = sensor.read(f"plain-full-{b.step}", full.ids)
            sensor.forget(f"plain-full-{b.step}")
            pd = sensor.read(f"plain-deleted-{b.step}", dele.ids)
            sensor.forget(f"plain-deleted-{b.step}")
            plain = {layer: sensor.patch_by_hook(dele.ids, layer, pf.residuals[layer]) for layer in layers}
            plain_s, plain_tokens = time.perf_counter() - start, sensor.forwarded - before
            gap = 0.0
            if d > 1e-3:
                gap = max(abs(kl_bits(rf.logprobs, ours[l]) - kl_bits(pf.logprobs, plain[l])) / d for l in layers)
            rows.append({"file": path, "step": b.step - 1, "tokens_full": len(full.ids), "tokens_deleted": len(dele.ids),
                         "d_bits": d, "ours_s": ours_s, "plain_s": plain_s, "ours_tokens": ours_tokens,
                         "plain_tokens": plain_tokens, "max_repair_gap": gap, "d_gap": abs(d - kl_bits(pf.logprobs, pd.logprobs))})
            print(f"  step {b.step - 1:3d}: {len(full.ids):6d} tokens  ours {ours_s:7.2f} s ({ours_tokens:7d} tok)  "
                  f"plain {plain_s:8.2f} s ({plain_tokens:8d} tok)  x{plain_s / max(ours_s, 1e-9):6.1f}  repair gap {gap:.1e}",
                  file=sys.stderr, flush=True)
        sensor.forget()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", help="trajectory files (default: two files of ../shared/realdata)")
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--max-tokens", type=int, default=8192)
    parser.add_argument("--boundaries", type=int, default=None, help="most boundaries per file")
    parser.add_argument("--quick", action="store_true", help="2 boundaries of one file at a 512-token limit")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    parser.add_argument("--json", help="also write the rows and totals here")
    args = parser.parse_args()

    import torch

    from iclr_cli.analysis.sensor import Sensor
    from iclr_cli.scoring.loading import load_model

    if args.threads:
        torch.set_num_threads(args.threads)
    files = args.files or [os.path.join(REALDATA, f) for f in DEFAULT_FILES]
    limit, max_tokens = args.boundaries, args.max_tokens
    if args.quick:
        files, limit, max_tokens = files[:1], 2, 512
    model, tokenizer, source = load_model(args.model, device="cpu")
    sensor = Sensor(model, tokenizer, name=source.name, max_tokens=max_tokens)
    print(f"sensor {source.name}: {sensor.n_layers} layers, limit {sensor.max_tokens} tokens, {torch.get_num_threads()} threads, "
          f"load average {os.getloadavg()[0]:.1f}", file=sys.stderr)
    rows = []
    for path in files:
        print(path, file=sys.stderr)
        rows.extend(run_file(sensor, path, limit))
    if not rows:
        sys.exit("no boundary with earlier reasoning in the given files")
    n = len(rows)
    total = {k: sum(r[k] for r in rows) for k in ("ours_s", "plain_s", "ours_tokens", "plain_tokens")}
    summary = {
        "boundaries": n, "layers": sensor.n_layers, "max_tokens": sensor.max_tokens,
        "ours_s_per_boundary": total["ours_s"] / n, "plain_s_per_boundary": total["plain_s"] / n,
        "ours_tokens_per_boundary": total["ours_tokens"] / n, "plain_tokens_per_boundary": total["plain_tokens"] / n,
        "speedup": total["plain_s"] / total["ours_s"], "max_repair_gap": max(r["max_repair_gap"] for r in rows),
        "load_average": os.getloadavg()[0],
    }
    print(f"\n{n} boundaries, L = {sensor.n_layers}: ours {summary['ours_s_per_boundary']:.2f} s and "
          f"{summary['ours_tokens_per_boundary']:.0f} forwarded tokens per boundary; plain (L + 2 forwards) "
          f"{summary['plain_s_per_boundary']:.2f} s and {summary['plain_tokens_per_boundary']:.0f}; "
          f"plain / ours = {summary['speedup']:.1f}x; largest repair difference {summary['max_repair_gap']:.1e}; "
          f"load average {summary['load_average']:.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
