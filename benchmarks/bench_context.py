"""Fidelity of the two context modes against full-context scores.

Run from the repository root::

    python benchmarks/bench_context.py            # the default files, 2,048-token limit
    python benchmarks/bench_context.py --limit 1024 --json out.json

On real trajectories that fit in the proxy's 8,192 positions (the OpenAI-chat and SWE-agent
files in ``../shared/realdata`` (tau-bench, SWE-agent), and the other real files there: mini-SWE-
agent, Codex, Claude Code, OpenHands; a trajectory is cut after the last step that still fits;
one whose P alone does not fit is left out), every reasoning block is scored three ways with
the default proxy:

1. **reference**: the whole input, never windowed (limit 8,192);
2. **fresh**: ``--context fresh`` at ``--limit`` tokens (P + recent history on a grid + step);
3. **sliding**: ``--context sliding`` at ``--limit`` tokens.

Every step is scored on the original history (``ratio=0``: nothing is written back), so the
three see the same requests and differ only in what the proxy conditions on. Per file and
over all files it prints, for the blocks of steps over the limit (where 2 and 3 differ from
1): the mean absolute entropy difference in bits, Spearman's rank correlation of block
entropies, and the share of BottomK selections (rho = 0.8, steps with N >= 2) that agree with
the reference; plus the forwarded tokens and seconds of each run (load average noted).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from iclr_cli.inputs import load_file
from iclr_cli.compress import Settings, compress_trajectories
from iclr_cli.context import render_prompt, render_step
from iclr_cli.policies import DEFAULT_RATIO, bottom_k, parse_variant

GROUPS = ("openai_chat_reasoning", "swe_agent", "mini_swe_agent", "codex_rollout", "claude_code", "openhands_events")
# The shared data sits beside the main checkout (../shared) or beside the worktrees (../../shared).
REALDATA = next((p for p in ("../shared/realdata", "../../shared/realdata") if os.path.isdir(p)), "../shared/realdata")
FULL = 8192


def spearman(xs: list[float], ys: list[float]) -> float:
    """Spearman's rho: Pearson correlation of average ranks (ties share their mean rank)."""

    def ranks(v):
        order = sorted(range(len(v)), key=v.__getitem__)
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2
            i = j + 1
        return r

    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    var = (sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry)) ** 0.5
    return cov / var if var else float("nan")


def fitted(traj, count):
    """``traj`` cut after its last step that fits in FULL tokens, or ``None`` if P does not fit."""
    used = sum(count(s) for s in render_prompt(traj.prompt))
    keep = 0
    for step in traj.steps:
        used += count(render_step(step))
        if used > FULL:
            break
        keep += 1
    has_reasoning = any(p.text.strip() for s in traj.steps[:keep] for p in s.reasoning)
    return traj.with_steps(traj.steps[:keep]) if keep and has_reasoning else None


def inputs(root: str, count, groups=GROUPS):

    if not os.path.isdir(root):
        print(f"  no folder {root}")
        return
    for group in groups:
        for path in sorted(glob.glob(os.path.join(root, group, "*"))):
            name = os.path.relpath(path, root)
            try:
                _, doc = load_file(path)
            except Exception as exc:  # noqa: BLE001  (report any adapter failure and go on)
                print(f"  skip {name}: {type(exc).__name__}: {str(exc)[:90]}")
                continue
            trajs = [t for t in (fitted(t, count) for t in doc.trajectories) if t is not None]
            if trajs:
                yield name, trajs
            else:
                print(f"  skip {name}: no trajectory with reasoning whose P fits in {FULL} tokens")


def scores(scorer, trajs):
    """``{(trajectory, step): (windowed, [entropy bits per block])}`` for the steps scored."""
    settings = Settings(parse_variant("iclr"), ratio=0.0)
    scorer.reset()
    t = time.perf_counter()
    before = scorer.stats.forward_tokens
    results = compress_trajectories(trajs, settings, scorer, scorer.tokenizer)
    steps = {(r.trajectory, r.step): (r.windowed, [b.entropy_bits for b in r.blocks])
             for res in results for r in res.steps if r.blocks and not r.skipped}
    return steps, time.perf_counter() - t, scorer.stats.forward_tokens - before


def compare(ref, other) -> dict:
    """Metrics over the blocks of steps the limited run windowed (``other``'s flag)."""
    xs, ys, agree, selected = [], [], 0, 0
    for key, (windowed, b) in other.items():
        if not windowed or key not in ref:
            continue
        a = ref[key][1]
        pairs = [(x, y) for x, y in zip(a, b) if x is not None and y is not None]
        xs += [x for x, _ in pairs]
        ys += [y for _, y in pairs]
        if len(a) >= 2:
            sa, sb = bottom_k(a, DEFAULT_RATIO), bottom_k(b, DEFAULT_RATIO)
            agree += len(sa & sb)
            selected += len(sa)
    if not xs:
        return {"blocks": 0}
    return {"blocks": len(xs), "mean_abs_diff_bits": sum(abs(x - y) for x, y in zip(xs, ys)) / len(xs),
            "spearman": spearman(xs, ys) if len(xs) > 2 else float("nan"),
            "bottomk_agree": agree / selected if selected else float("nan"), "bottomk_selected": selected,
            "xs": xs, "ys": ys, "agree": agree}


def fmt(name: str, steps: int, m: dict) -> str:
    if not m.get("blocks"):
        return f"{name[:44]:<44} {steps:>6} {0:>6}  (no step windowed and scored at this limit)"
    return (f"{name[:44]:<44} {steps:>6} {m['blocks']:>6} {m['mean_abs_diff_bits']:>9.3f} {m['spearman']:>8.3f} "
            f"{m['bottomk_agree']:>8.3f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--limit", type=int, default=2048, help="input limit of the compared modes (default 2048)")
    ap.add_argument("--real", default=REALDATA, help=f"folder of real trajectories (default {REALDATA})")
    ap.add_argument("--only", help="files whose path contains this text")
    ap.add_argument("--groups", nargs="+", default=list(GROUPS), help="folders of --real to read (default: all)")
    ap.add_argument("--json", help="also write every number to this file")
    ap.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's choice)")
    args = ap.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)

    from iclr_cli.scoring.loading import load_model
    from iclr_cli.scoring.transformers_scorer import TransformersScorer

    model, tokenizer, source = load_model(args.model)
    runs = {"reference": TransformersScorer(model, tokenizer, name=source.name, max_tokens=FULL, context="fresh"),
            "fresh": TransformersScorer(model, tokenizer, name=source.name, max_tokens=args.limit, context="fresh"),
            "sliding": TransformersScorer(model, tokenizer, name=source.name, max_tokens=args.limit, context="sliding")}
    count = lambda text: len(tokenizer.encode(text)[0])  # noqa: E731
    print(f"model {source.name}; reference limit {FULL}, compared at {args.limit} tokens; "
          f"load average {os.getloadavg()[0]:.1f}")
    out: dict = {"limit": args.limit, "loadavg_start": os.getloadavg(), "files": {}}
    totals = {m: {"xs": [], "ys": [], "agree": 0, "selected": 0} for m in ("fresh", "sliding")}
    cost = {m: [0, 0.0] for m in runs}
    rows = {"fresh": [], "sliding": []}
    for name, trajs in inputs(args.real, count, args.groups):
        if args.only and args.only not in name:
            continue
        got = {m: scores(s, trajs) for m, s in runs.items()}
        for m, (_, secs, fwd) in got.items():
            cost[m][0] += fwd
            cost[m][1] += secs
        entry = {"trajectories": len(trajs), "tokens": sum(count(s) for t in trajs for s in (*render_prompt(t.prompt), *map(render_step, t.steps))),
                 "cost": {m: {"forward_tokens": g[2], "seconds": g[1]} for m, g in got.items()}}
        for m in ("fresh", "sliding"):
            metrics = compare(got["reference"][0], got[m][0])
            rows[m].append(fmt(name, sum(w for w, _ in got[m][0].values()), metrics))
            if metrics.get("blocks"):
                totals[m]["xs"] += metrics.pop("xs")
                totals[m]["ys"] += metrics.pop("ys")
                totals[m]["agree"] += metrics.pop("agree")
                totals[m]["selected"] += metrics["bottomk_selected"]
            entry[m] = metrics
        out["files"][name] = entry
        print(f"  {name}: {entry['tokens']} tokens; forwarded " +
              ", ".join(f"{m} {g[2]} in {g[1]:.0f} s" for m, g in got.items()), flush=True)
    header = f"{'file':<44} {'wsteps':>6} {'blocks':>6} {'mean|d|':>9} {'spearman':>8} {'bottomk':>8}"
    for m in ("fresh", "sliding"):
        t = totals[m]
        print(f"\n== {m} window at {args.limit} tokens vs full context (blocks of windowed steps) ==")
        print(header)
        for row in rows[m]:
            print(row)
        if t["xs"]:
            mean = sum(abs(x - y) for x, y in zip(t["xs"], t["ys"])) / len(t["xs"])
            agree = t["agree"] / t["selected"] if t["selected"] else float("nan")
            out[m] = {"blocks": len(t["xs"]), "mean_abs_diff_bits": mean, "spearman": spearman(t["xs"], t["ys"]),
                      "bottomk_agree": agree}
            print(f"{'all files':<44} {'':>6} {len(t['xs']):>6} {mean:>9.3f} {out[m]['spearman']:>8.3f} {agree:>8.3f}")
    print("\nforwarded tokens (seconds): " + ", ".join(f"{m} {c[0]} ({c[1]:.0f} s)" for m, c in cost.items()))
    out["cost"] = {m: {"forward_tokens": c[0], "seconds": c[1]} for m, c in cost.items()}
    out["loadavg_end"] = os.getloadavg()
    print(f"load average at the end {out['loadavg_end'][0]:.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
