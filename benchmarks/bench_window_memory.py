"""Peak memory of the real proxy scoring one step at a full window.

    python benchmarks/bench_window_memory.py                  # 8,192 tokens, forward chunks of 1,024 and 256
    python benchmarks/bench_window_memory.py --max-tokens 4096

Each configuration runs in a fresh process (peak RSS is the process's high-water mark,
``VmHWM``): build the default scorer (SmolLM2, float32, CPU) with ``--context fresh``, then score
one trajectory whose P is longer than the window, so the step is scored against a full window.
Prints the peak after loading the model and after scoring, the wall time and the entropies (the
same for every chunk size). What it separates: the model load, and the window's keys, values and
forward on top of it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _peak_mib() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024


def child(max_tokens: int, chunk: int) -> dict:
    from iclr_cli.compress import Settings, compress_trajectories
    from iclr_cli.policies import parse_variant
    from iclr_cli.scoring.factory import build_scorer
    from iclr_cli.trajectory import Part, Step, Trajectory

    scorer = build_scorer("smollm2", device="cpu", max_tokens=max_tokens, context="fresh")
    scorer._engine.forward_chunk = chunk  # the forward step size is not a CLI option
    loaded = _peak_mib()
    prompt = " ".join(f"word{i % 977} value {i}" for i in range(max_tokens))  # more tokens than the window
    step = Step(0, (Part("reasoning", "First I check the file.\n\nThen I fix it.", label="reasoning"), Part("action", "ls", label="tool_call:bash")))
    t = time.perf_counter()
    [result] = compress_trajectories([Trajectory("t", (Part("prompt", prompt, label="user"),), (step,))], Settings(parse_variant("iclr")), scorer, scorer.tokenizer)
    report = result.steps[0]
    return {"max_tokens": max_tokens, "forward_chunk": chunk, "loaded_mib": round(loaded), "scored_mib": round(_peak_mib()),
            "wall_s": round(time.perf_counter() - t, 1), "context_tokens": report.context_tokens,
            "entropies": [round(b.entropy_bits, 4) for b in report.blocks]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-tokens", type=int, default=8192)
    ap.add_argument("--chunks", type=int, nargs="+", default=[1024, 256])
    ap.add_argument("--child", nargs=2, type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(*args.child)))
        return 0
    print(f"{'max tokens':>10} {'chunk':>6} {'loaded MiB':>11} {'scored MiB':>11} {'wall s':>7} {'context':>8}  entropies")
    for chunk in args.chunks:
        proc = subprocess.run([sys.executable, __file__, "--child", str(args.max_tokens), str(chunk)], cwd=ROOT, capture_output=True, text=True)
        if proc.returncode:
            print(proc.stderr[-2000:], file=sys.stderr)
            return 1
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"{r['max_tokens']:>10} {r['forward_chunk']:>6} {r['loaded_mib']:>11} {r['scored_mib']:>11} {r['wall_s']:>7} {r['context_tokens']:>8}  {r['entropies']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
