"""Wall time, forwarded tokens and peak RSS of ``iclr score`` / ``iclr prune`` on long real sessions.

Run from the repository root::

    python benchmarks/bench_cli.py                       # before (b905d56) and after, both contexts
    python benchmarks/bench_cli.py --only after --json out.json

Each run is one fresh Python process running the CLI in-process (``iclr_cli.cli.app.main``) on
one file with the default proxy, so peak RSS is the whole command's. The forwarded tokens
are read from the scorer the command built (``pipeline.build_engines`` is wrapped to keep
it); "per trajectory token" divides them by the file's rendered length (P and every step,
counted with the proxy's tokenizer), where 1.0 is one pass over the session. ``cpu s`` is
the process's user + system CPU time (model loading included), steadier than wall time on a
shared machine. ``before``
runs the tree of commit ``--before`` (default ``b905d56``, the main branch before batched
streams and the sliding window) from a temporary ``git worktree``; ``after`` runs this checkout with
``--context fresh`` and ``--context sliding``. The load average is printed with every row:
the machine may be shared, and wall time scales with it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REALDATA = next((p for p in (ROOT.parent / "shared/realdata", ROOT.parent.parent / "shared/realdata") if p.is_dir()),
                ROOT.parent / "shared/realdata")
FILES = ("codex_rollout/agentcmd_rollout-2025-09-24T20-12-23.jsonl",
         "claude_code/spotter_258c7280_main_session_slice.jsonl")

CHILD = str(Path(__file__).resolve().parent / "measure_child.py")  # see its docstring


def rendered_tokens(path: Path) -> int:
    """Proxy tokens of P and every step of every trajectory in ``path`` (this checkout's reader)."""
    sys.path.insert(0, str(ROOT))
    from iclr_cli.inputs import load_file
    from iclr_cli.context import render_prompt, render_step
    from iclr_cli.scoring.loading import load_tokenizer

    tok = load_tokenizer("smollm2")
    _, doc = load_file(str(path))
    return sum(len(tok.token_spans(s)) for t in doc.trajectories for s in (*render_prompt(t.prompt), *map(render_step, t.steps)))


def run_one(tree: Path, args: list[str], python: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        load = os.getloadavg()[0]
        env = {**os.environ, "PYTHONPATH": str(tree)}
        t = time.perf_counter()
        proc = subprocess.run([python, CHILD, json.dumps({"args": [*args, "-q", "-o", str(Path(tmp) / "out")], "out": str(out), "scorer_stats": True})],
                              cwd=tree, env=env, capture_output=True, text=True)
        if not out.is_file():
            return {"error": (proc.stderr or proc.stdout)[-400:], "load_start": load}
        res = json.loads(out.read_text())
        res.update(load_start=load, load_end=os.getloadavg()[0], process_s=time.perf_counter() - t)
        return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", default="b905d56", help="commit measured as 'before' (default b905d56)")
    ap.add_argument("--only", choices=["before", "after"], help="run one side only")
    ap.add_argument("--files", nargs="+", default=list(FILES), help=f"files under {REALDATA}")
    ap.add_argument("--commands", nargs="+", default=["score", "prune"], choices=["score", "prune"])
    ap.add_argument("--contexts", nargs="+", default=["auto", "fresh", "sliding"], choices=["auto", "fresh", "sliding"])
    ap.add_argument("--json", help="also write every number to this file")
    args = ap.parse_args(argv)
    # A plain `kill` should still remove the temporary worktree (the `finally` below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
    python = sys.executable
    sides = [s for s in ("before", "after") if args.only in (None, s)]
    results: list[dict] = []
    worktree = None
    try:
        if "before" in sides:
            worktree = Path(tempfile.mkdtemp(prefix="iclr-before-"))
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(worktree), args.before],
                           check=True, capture_output=True)
        print(f"{'file':<34} {'command':<7} {'version':<14} {'wall s':>8} {'cpu s':>8} {'forwarded':>10} {'per token':>9} "
              f"{'peak MiB':>8} {'load':>9}")
        for name in args.files:
            path = REALDATA / name
            tokens = rendered_tokens(path)
            for command in args.commands:
                cli = [command, str(path)] + (["--variant", "iclr"] if command == "prune" else [])
                runs = ([("before", worktree, [])] if "before" in sides else []) + \
                       ([(f"after {c}", ROOT, ["--context", c]) for c in args.contexts] if "after" in sides else [])
                for label, tree, extra in runs:
                    res = run_one(tree, cli + extra, python)
                    res.update(file=name, command=command, version=label, rendered_tokens=tokens)
                    results.append(res)
                    if "error" in res:
                        print(f"{Path(name).name[:34]:<34} {command:<7} {label:<14} failed: {res['error']}")
                        continue
                    fwd = res["forward_tokens"]
                    per = f"{fwd / tokens:9.2f}" if fwd is not None else f"{'-':>9}"
                    print(f"{Path(name).name[:34]:<34} {command:<7} {label:<14} {res['wall']:8.1f} {res['cpu']:8.1f} {fwd or 0:>10} {per} "
                          f"{res['peak_mib']:8.0f} {res['load_start']:4.1f}/{res['load_end']:<4.1f}", flush=True)
                    if args.json:
                        Path(args.json).write_text(json.dumps(results, indent=2))
        print("rendered tokens: " + ", ".join(f"{Path(n).name} {r}" for n, r in
                                                {x['file']: x['rendered_tokens'] for x in results}.items()))
    finally:
        if worktree is not None:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(worktree)], capture_output=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
