"""Online scoring speed and memory: bare forward vs naive recompute vs this project's scorer.

Run from the repository root::

    python benchmarks/bench_scoring.py            # full run (tens of minutes on 2 CPU cores)
    python benchmarks/bench_scoring.py --quick    # a few minutes

On the same inputs (the ``iclr`` variant, online write-back through
:func:`iclr_cli.compress.compress_trajectories`) it times:

1. **bare**: the transformer body alone over exactly the token chunks (3) ran, with the same KV
   reuse; no tokenization, no LM head, no entropy. The limit (3) can approach.
2. **naive**: full recompute of every step's input (``prefix_cache=False``).
3. **ours**: prefix (KV) reuse per trajectory, chunked entropy, batching (the default).

Throughput is *scored context tokens per second*: the sum over steps of the proxy's input
length, the same numerator for all three, so the ratios are ratios of wall time. Also printed:
peak RSS per method, the largest entropy difference between (2) and (3) in bits, the fitted
exponent of cost vs number of steps (log-log least squares) and peak memory while scoring one
long context compared with the model's weight size. Inputs: the real trajectories in
``../shared/realdata`` (through the format registry; skipped with a message when an adapter
is missing) and generated trajectories (``benchmarks/synthetic.py``) at 10, 20, 40, 80 steps.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import synthetic

from iclr_cli.inputs import load_file
from iclr_cli.blocks import split_blocks
from iclr_cli.compress import Settings, compress_trajectories
from iclr_cli.context import render_for_scoring, render_prompt, render_step
from iclr_cli.policies import parse_variant
from iclr_cli.scoring.base import ScoreRequest

SETTINGS = Settings(parse_variant("iclr"))


# -- memory ---------------------------------------------------------------------------------

def _status_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def reset_peak() -> None:
    """Reset the kernel's peak-RSS mark (Linux ``clear_refs`` 5) so each phase has its own."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def peak_mib() -> float:
    kib = _status_kib("VmHWM")
    if kib is None:  # not Linux: lifetime peak, in KiB on Linux / bytes on macOS
        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // (1024 if sys.platform == "darwin" else 1)
    return kib / 1024


def rss_mib() -> float:
    kib = _status_kib("VmRSS")
    return kib / 1024 if kib is not None else float("nan")


# -- the three methods ----------------------------------------------------------------------

class Recorder:
    """Wraps the scorer engine's group runs to keep the exact work (3) did, for (1) bare:
    per batched group, each row's past length and new token ids."""

    def __init__(self, scorer):
        self.groups: list[list[tuple[int, list[int]]]] = []
        self.engine = scorer._engine
        self._inner = self.engine._run_group
        self.engine._run_group = self

    def __call__(self, segs):
        self.groups.append([(g.past_len, list(g.ids)) for g in segs])
        return self._inner(segs)

    def restore(self) -> None:
        self.engine._run_group = self._inner


def bare_replay(scorer, groups) -> float:
    """Seconds to run the recorded groups through the model body only: the same batches,
    past lengths (zero-filled buffers: attention costs the same), steps and masks as (3),
    without copying stored pasts in or out, the LM head or the entropies."""
    import torch

    from iclr_cli.scoring.kv import buffer_cache

    engine, shape = scorer._engine, scorer._engine.shape
    t = time.perf_counter()
    with torch.inference_mode():
        for rows in groups:
            lens = [p for p, _ in rows]
            news = [len(ids) for _, ids in rows]
            most_past, most_new = max(lens), max(news)
            buf = torch.zeros(shape.layers, 2, len(rows), shape.kv_heads, most_past + most_new, shape.head_dim,
                              dtype=shape.dtype, device=engine.device)
            cache = buffer_cache(buf, most_past)
            padded = len(set(lens)) > 1 or len(set(news)) > 1
            mask = torch.ones(len(rows), most_past + most_new, dtype=torch.long, device=engine.device)
            step = max(256, engine.forward_chunk // len(rows)) if len(rows) > 1 else engine.forward_chunk
            for a in range(0, most_new, step):
                c = min(step, most_new - a)
                ids = torch.tensor([(list(r[a : a + c]) + [0] * c)[:c] for _, r in rows], device=engine.device)
                kw = {}
                if padded:
                    kw = {"attention_mask": mask[:, : most_past + a + c],
                          "position_ids": torch.tensor([[p + a + k for k in range(c)] for p in lens], device=engine.device)}
                scorer._base(input_ids=ids, use_cache=True, **{scorer._cache_kw: cache}, **kw)
    return time.perf_counter() - t


def timed_run(scorer, trajs, *, prefix_cache: bool):
    from iclr_cli.scoring.transformers_scorer import ScorerStats

    scorer.reset()
    scorer.prefix_cache = prefix_cache
    scorer.stats = ScorerStats()
    reset_peak()
    t = time.perf_counter()
    results = compress_trajectories(trajs, SETTINGS, scorer, scorer.tokenizer)
    return results, time.perf_counter() - t, peak_mib()


def entropies(results):
    return [b.entropy_bits for res in results for r in res.steps for b in r.blocks]


def compare(scorer, trajs, *, naive: bool) -> dict:
    """Run (3), (1) and optionally (2) on ``trajs``; one row of numbers."""
    recorder = Recorder(scorer)
    try:
        ours, t_ours, peak_ours = timed_run(scorer, trajs, prefix_cache=True)
    finally:
        recorder.restore()
    stats = scorer.stats
    reset_peak()
    t_bare = bare_replay(scorer, recorder.groups)
    row = {
        "trajectories": len(trajs),
        "steps": sum(len(t.steps) for t in trajs),
        "trajectory_tokens": sum(trajectory_tokens(scorer, t) for t in trajs),
        "scored_context_tokens": sum(r.context_tokens or 0 for res in ours for r in res.steps),
        "forward_tokens_ours": stats.forward_tokens,
        "reused_tokens_ours": stats.reused_tokens,
        "t_bare": t_bare, "t_ours": t_ours, "peak_mib_bare": peak_mib(), "peak_mib_ours": peak_ours,
    }
    if naive:
        ref, t_naive, peak_naive = timed_run(scorer, trajs, prefix_cache=False)
        row["forward_tokens_naive"] = scorer.stats.forward_tokens
        diffs = [abs(a - b) for a, b in zip(entropies(ours), entropies(ref)) if a is not None and b is not None]
        row.update(t_naive=t_naive, peak_mib_naive=peak_naive, max_diff_bits=max(diffs, default=0.0),
                   same_output=[r.compressed for r in ours] == [r.compressed for r in ref])
    return row


def trajectory_tokens(scorer, traj) -> int:
    segs = [*render_prompt(traj.prompt), *(render_step(s) for s in traj.steps)]
    return sum(len(scorer.tokenizer.token_spans(s)) for s in segs)


# -- reporting ------------------------------------------------------------------------------

HEADER = (f"{'input':<34} {'steps':>5} {'tokens':>7} {'scored':>8} {'bare s':>8} {'naive s':>8} {'ours s':>8} "
          f"{'ours tok/s':>10} {'3/2':>6} {'3/1':>5} {'max|d| bits':>11} {'peak MiB b/n/o':>16}")


def fmt_row(name: str, r: dict) -> str:
    tps = r["scored_context_tokens"] / r["t_ours"] if r["t_ours"] else float("nan")
    naive = "t_naive" in r
    speed = f"{r['t_naive'] / r['t_ours']:6.1f}" if naive else f"{'-':>6}"
    diff = f"{r['max_diff_bits']:11.2e}" if naive else f"{'-':>11}"
    peaks = f"{r['peak_mib_bare']:.0f}/{r['peak_mib_naive']:.0f}/{r['peak_mib_ours']:.0f}" if naive else \
        f"{r['peak_mib_bare']:.0f}/-/{r['peak_mib_ours']:.0f}"
    t_naive = f"{r['t_naive']:8.1f}" if naive else f"{'-':>8}"
    return (f"{name[:34]:<34} {r['steps']:>5} {r['trajectory_tokens']:>7} {r['scored_context_tokens']:>8} "
            f"{r['t_bare']:8.1f} {t_naive} {r['t_ours']:8.1f} {tps:10.0f} {speed} {r['t_bare'] / r['t_ours']:5.2f} "
            f"{diff} {peaks:>16}")


def loglog_slope(xs, ys) -> float:
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


# -- sections -------------------------------------------------------------------------------

def real_inputs(root: str, max_tokens: int, scorer, only: str | None = None):
    """``(name, trajectories)`` per real file that loads and has scorable reasoning."""

    for path in sorted(glob.glob(os.path.join(root, "*", "*"))):
        if path.endswith(".md") or (only and only not in path):
            continue
        name = os.path.relpath(path, root)
        try:
            _, doc = load_file(path)
        except Exception as exc:  # noqa: BLE001  (any adapter failure: report it and go on)
            print(f"  skip {name}: {type(exc).__name__}: {str(exc)[:90]}")
            continue
        with_reasoning = [t for t in doc.trajectories if any(p.text.strip() for s in t.steps for p in s.reasoning)]
        keep = [t for t in with_reasoning if trajectory_tokens(scorer, t) <= max_tokens]
        if keep:
            yield name, keep
        elif with_reasoning:
            print(f"  skip {name}: longer than --real-max-tokens {max_tokens}")
        else:
            print(f"  skip {name}: no reasoning to score")


def memory_check(scorer, target: int, baseline: float) -> dict:
    """Score one request of about ``target`` tokens; peak RSS against the weights.

    ``baseline`` is the RSS before the model was loaded (Python, torch and transformers
    already imported), so ``peak - baseline`` is what the model and the scoring cost.
    """
    import torch

    traj = synthetic.trajectory(200, seed=7, traj_id="memory")
    prompt = render_prompt(traj.prompt)
    big = synthetic.trajectory(1, seed=11).steps[0]
    big_reasoning = "\n\n".join([big.reasoning[0].text] * 3)
    step = big.with_reasoning([big_reasoning])
    splits = [split_blocks(big_reasoning)]
    rendered = render_for_scoring(step, splits)
    count = lambda s: len(scorer._encode(s)[0])
    used = sum(count(s) for s in prompt) + count(rendered.text)
    history = []
    for s in traj.steps:
        seg = render_step(s)
        n = count(seg)
        if used + n > target:
            # Fill the rest with the head of this segment, cut at a token boundary.
            room = target - used
            if room > 0:
                history.append(seg[: scorer._encode(seg)[1][room - 1][1]])
            break
        history.append(seg)
        used += n
    req = ScoreRequest("memory", prompt, tuple(history), rendered.text, rendered.spans)
    weights = sum(p.numel() * p.element_size() for p in scorer.model.parameters()) / 2**20
    scorer.reset()
    scorer.prefix_cache = True
    before = rss_mib()
    reset_peak()
    t = time.perf_counter()
    [res] = scorer.score([req])
    elapsed = time.perf_counter() - t
    peak = peak_mib()
    kv = sum(state.store.nbytes for state, _, _ in scorer._streams._entries.values()) / 2**20
    scorer.reset()
    del torch
    return {"context_tokens": res.context_tokens, "weights_mib": weights, "baseline_mib": baseline,
            "rss_before_mib": before, "peak_mib": peak, "model_peak_mib": peak - baseline,
            "over_weights_mib": peak - baseline - weights, "kv_cache_mib": kv, "seconds": elapsed}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2", help="model spec (default: the embedded SmolLM2)")
    ap.add_argument("--quick", action="store_true", help="10/20 steps, small real files, 2,048-token memory check")
    ap.add_argument("--steps", type=int, nargs="+", help="synthetic trajectory lengths (default 10 20 40 80)")
    ap.add_argument("--naive-max-steps", type=int, help="run naive only up to this many steps (default 40; quick 20)")
    ap.add_argument("--real", default="../shared/realdata", help="folder of real trajectories ('' to skip)")
    ap.add_argument("--real-max-tokens", type=int, help="skip real trajectories longer than this (default 10000; quick 3000)")
    ap.add_argument("--memory-tokens", type=int, help="context length of the memory check (default 8192; quick 2048)")
    ap.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's choice)")
    ap.add_argument("--context", choices=["fresh", "sliding"], help="context mode (default: the scorer's)")
    ap.add_argument("--only", help="real files whose path contains this text")
    ap.add_argument("--sections", nargs="+", default=["memory", "synthetic", "real"],
                    choices=["memory", "synthetic", "real"], help="what to run (default: all)")
    ap.add_argument("--json", help="also write every number to this JSON file (rewritten after each row)")
    args = ap.parse_args(argv)
    steps = args.steps or ([10, 20] if args.quick else [10, 20, 40, 80])
    naive_max = args.naive_max_steps or (20 if args.quick else 40)
    real_max = args.real_max_tokens or (3000 if args.quick else 10_000)
    mem_tokens = args.memory_tokens or (2048 if args.quick else 8192)

    import torch
    import transformers  # noqa: F401  (its import cost belongs to the baseline, not the model)

    from iclr_cli.scoring import build_scorer

    baseline = rss_mib()
    if args.threads:
        torch.set_num_threads(args.threads)
    t = time.perf_counter()
    scorer = build_scorer(args.model, **({"context": args.context} if args.context else {}))
    load_s = time.perf_counter() - t
    out: dict = {"model": scorer.name, "context": scorer.context, "dtype": str(next(scorer.model.parameters()).dtype), "device": str(scorer._device),
                 "threads": torch.get_num_threads(), "cpus": os.cpu_count(), "load_seconds": load_s,
                 "loadavg_start": os.getloadavg(), "synthetic": {}, "real": {}}
    print(f"model {scorer.name} ({out['dtype']}, {out['device']}, {out['threads']} threads), loaded in {load_s:.1f} s; "
          f"max_tokens {scorer.max_tokens}; load average {out['loadavg_start'][0]:.1f}")
    print("columns: tokens = trajectory tokens; scored = sum of scorer input lengths; 3/2 = naive time / ours; "
          "3/1 = bare time / ours")

    def save():
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=2, default=str))

    # Memory first: the process heap is then as fresh as it gets after loading the model.
    if "memory" in args.sections:
        memory_section(scorer, mem_tokens, baseline, out)
        save()
    if "synthetic" in args.sections:
        synthetic_section(scorer, steps, naive_max, out, save)
    if args.real and "real" in args.sections:
        real_section(scorer, args.real, real_max, args.only, out, save)
    out["loadavg_end"] = os.getloadavg()
    save()
    return 0


def synthetic_section(scorer, steps, naive_max, out, save) -> None:
    print("\n== generated trajectories ==")
    print(HEADER)
    for n in steps:
        row = compare(scorer, [synthetic.trajectory(n)], naive=n <= naive_max)
        out["synthetic"][n] = row
        print(fmt_row(f"synthetic {n} steps", row), flush=True)
        save()
    if len(steps) >= 2:
        rows = out["synthetic"]
        fits = {m: loglog_slope(steps, [rows[n][f"t_{m}"] for n in steps]) for m in ("ours", "bare")}
        naive_steps = [n for n in steps if "t_naive" in rows[n]]
        if len(naive_steps) >= 2:
            fits["naive"] = loglog_slope(naive_steps, [rows[n]["t_naive"] for n in naive_steps])
        out["exponent"] = fits
        print("cost ~ steps^k, fitted k: " + ", ".join(f"{m} {k:.2f}" for m, k in fits.items()))
        work = {"ours forward tokens": loglog_slope(steps, [rows[n]["forward_tokens_ours"] for n in steps]),
                "scored context tokens": loglog_slope(steps, [rows[n]["scored_context_tokens"] for n in steps])}
        out["work_exponent"] = work
        print("work ~ steps^k, fitted k: " + ", ".join(f"{m} {k:.2f}" for m, k in work.items())
              + " (time grows faster than tokens run: attention cost per token grows with the context)")


def real_section(scorer, root, real_max, only, out, save) -> None:
    print(f"\n== real trajectories ({root}, each file's trajectories online together, <= {real_max} tokens) ==")
    if not os.path.isdir(root):
        print(f"  skip: {root} not found")
        return
    print(HEADER)
    for name, trajs in real_inputs(root, real_max, scorer, only):
        row = compare(scorer, trajs, naive=True)
        out["real"][name] = row
        print(fmt_row(name, row), flush=True)
        save()


def memory_section(scorer, mem_tokens, baseline, out) -> None:
    print(f"\n== memory: one {mem_tokens}-token context ==")
    mem = memory_check(scorer, mem_tokens, baseline)
    out["memory"] = mem
    print(f"context {mem['context_tokens']} tokens scored in {mem['seconds']:.1f} s; weights {mem['weights_mib']:.0f} MiB; "
          f"RSS before load {mem['baseline_mib']:.0f} MiB, after load {mem['rss_before_mib']:.0f} MiB, "
          f"peak while scoring {mem['peak_mib']:.0f} MiB")
    print(f"model + scoring peak = {mem['model_peak_mib']:.0f} MiB = weights + {mem['over_weights_mib']:.0f} MiB "
          f"(KV cache kept for the stream: {mem['kv_cache_mib']:.0f} MiB); target: weights + <= 1024 MiB")


if __name__ == "__main__":
    raise SystemExit(main())
