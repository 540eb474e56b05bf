"""Throughput of the ``iclr`` variant with step t of many trajectories batched.

Run from the repository root::

    python benchmarks/bench_batching.py                    # batch 1, 4, 16 on generated trajectories
    python benchmarks/bench_batching.py --device cuda --trajectories 64 --rows 1 16 64

The same generated trajectories (``benchmarks/synthetic.py``: a coding agent, ~250 proxy
tokens a step, lengths varying from trajectory to trajectory so that cached prefixes differ)
are compressed online with the default proxy, at most ``rows`` trajectories per batched
forward. Printed per row count and context mode: wall seconds, forwarded tokens per second
(real tokens, padding excluded), padding share, peak RSS (CPU) or peak allocated memory
(CUDA), and the largest entropy difference from batch 1 in bits (target: below 1e-3).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import synthetic
from bench_scoring import peak_mib, reset_peak

from iclr_cli.compress import Settings, compress_trajectories
from iclr_cli.policies import parse_variant


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--device", help="torch device (default: cuda when available, else cpu)")
    ap.add_argument("--trajectories", type=int, default=16)
    ap.add_argument("--steps", type=int, default=6, help="steps of the longest trajectory (others have fewer)")
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 4, 16], help="batch sizes (trajectories per forward)")
    ap.add_argument("--contexts", nargs="+", default=["fresh"], choices=["fresh", "sliding"])
    ap.add_argument("--max-tokens", type=int, default=8192)
    ap.add_argument("--threads", type=int)
    args = ap.parse_args(argv)

    import torch

    from iclr_cli.scoring.loading import load_model
    from iclr_cli.scoring.transformers_scorer import TransformersScorer

    if args.threads:
        torch.set_num_threads(args.threads)
    model, tokenizer, source = load_model(args.model, device=args.device)
    device = next(model.parameters()).device
    trajs = [synthetic.trajectory(max(2, args.steps - i % 3), seed=i, traj_id=f"t{i}") for i in range(args.trajectories)]
    settings = Settings(parse_variant("iclr"))
    print(f"model {source.name} on {device}; {len(trajs)} trajectories of {args.steps - 2}-{args.steps} steps; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'context':<8} {'rows':>4} {'wall s':>8} {'tok/s':>8} {'pad %':>6} {'batches':>7} {'peak MiB':>9} {'max|d| bits':>11} {'load':>9}")
    for context in args.contexts:
        ref = None
        for rows in args.rows:
            scorer = TransformersScorer(model, tokenizer, name=source.name, max_tokens=args.max_tokens, context=context,
                                        batch_size=rows, cache_tokens=len(trajs) * 2 * args.max_tokens)
            load = os.getloadavg()[0]
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            else:
                reset_peak()
            t = time.perf_counter()
            res = compress_trajectories(trajs, settings, scorer, tokenizer)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            wall = time.perf_counter() - t
            peak = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else peak_mib()
            ents = [b.entropy_bits for r in res for s in r.steps for b in s.blocks]
            ref = ref or ents
            diff = max((abs(a - b) for a, b in zip(ref, ents) if a is not None and b is not None), default=0.0)
            st = scorer.stats
            print(f"{context:<8} {rows:>4} {wall:8.1f} {st.forward_tokens / wall:8.0f} "
                  f"{100 * st.pad_tokens / max(1, st.pad_tokens + st.forward_tokens):6.1f} {st.batches:>7} {peak:9.0f} "
                  f"{diff:11.2e} {load:4.1f}/{os.getloadavg()[0]:<4.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
