"""``iclr score`` / ``iclr prune`` before and after, side by side in one run on one machine.

"Before" is a checkout of an earlier revision (``--before REV``, default the last commit
before the scorer profiles) in a git worktree, run with the current virtual environment;
"after" is this checkout with its defaults (the fast profile) and with ``--exact``. Every
command runs the real proxy from a cold start (model load included: what a user waits for),
with a fresh checkpoint folder and a fresh P cache; ``--warm`` adds a second fast run that
finds P on disk. Commands alternate before / after per file so that a change of load on the
machine hits both alike; the load average is printed with each row.

Files are real sessions from ``../shared/realdata``; sealed reasoning is opened the same way
for both revisions (``--signed-thinking edit``, ``--encrypted-reasoning drop``) so there is
something to score. Usage::

    python benchmarks/bench_speed.py                       # every file, score and prune
    python benchmarks/bench_speed.py --files taubench --commands prune --warm
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REALDATA = ROOT.parent / "shared" / "realdata"
DEFAULT_BEFORE = "8379dc1"

FILES = {
    "taubench": ("openai_chat_reasoning/taubench_airline_gpt5_wiki_random.json", []),
    "codex-rollout": ("codex_rollout/agentcmd_rollout-2025-09-24T20-12-23.jsonl", ["--encrypted-reasoning", "drop", "--block-split", "line"]),
    "swe_agent-pydicom": ("swe_agent/gpt4_pydicom-1458.traj", []),
    "openhands-r1-think": ("openai_chat_reasoning/openhands_deepseek-r1_inline_think_tags_exchanges.jsonl", []),
    "claude-code-tool-heavy": ("claude_code/spotter_tool_heavy.jsonl", ["--signed-thinking", "edit", "--block-split", "line"]),
}


def worktree(rev: str) -> Path:
    """A worktree of ``rev`` under the temp folder (made once, reused)."""
    path = Path(tempfile.gettempdir()) / f"iclr-before-{rev}"
    if not (path / "iclr_cli").is_dir():
        subprocess.run(["git", "worktree", "add", "--detach", str(path), rev], cwd=ROOT, check=True, capture_output=True)
    return path


def run(code: Path, command: str, file: str, options: list[str], scratch: Path, model: str, keep_prompts: bool = False) -> tuple[float, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(code)  # this revision's iclr_cli, the current environment's libraries
    env["ICLR_CHECKPOINT_DIR"] = str(scratch / "checkpoints")
    env["ICLR_PROMPT_CACHE_DIR"] = str(scratch / "prompts")
    if not keep_prompts:
        shutil.rmtree(scratch / "prompts", ignore_errors=True)
    out = scratch / ("out.jsonl" if command == "score" else "pruned" + Path(file).suffix)
    cmd = [sys.executable, "-m", "iclr_cli", command, str(REALDATA / file), "--model", model, "-o", str(out), "--force", *options]
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=scratch)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} (PYTHONPATH={code}) exited {done.returncode}: {done.stderr.strip()[-600:]}")
    return seconds, done.stderr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", default=DEFAULT_BEFORE, help="revision to compare with")
    ap.add_argument("--files", default=",".join(FILES))
    ap.add_argument("--commands", default="score,prune")
    ap.add_argument("--no-exact", action="store_true", help="skip the --exact run of the new code")
    ap.add_argument("--warm", action="store_true", help="add a fast run that finds P in the on-disk cache")
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--json", help="write the rows as JSON here too")
    args = ap.parse_args()
    before = worktree(args.before)
    rows = []
    print(f"# before {args.before} ({before}), after {ROOT}; cpus {os.cpu_count()}", flush=True)
    print("| file | command | before (s) | after, fast (s) | speed-up | after, --exact (s) | fast, P on disk (s) | load |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |", flush=True)
    for name in [f for f in args.files.split(",") if f]:
        path, options = FILES[name]
        for command in [c for c in args.commands.split(",") if c]:
            scratch = Path(tempfile.mkdtemp(prefix="iclr-speed-"))
            try:
                load = os.getloadavg()[0]
                old, _ = run(before, command, path, options, scratch, args.model)
                new, err = run(ROOT, command, path, options, scratch, args.model)
                exact = None if args.no_exact else run(ROOT, command, path, [*options, "--exact"], scratch, args.model)[0]
                warm = run(ROOT, command, path, options, scratch, args.model, keep_prompts=True)[0] if args.warm else None
                load = (load + os.getloadavg()[0]) / 2
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            row = {"file": name, "command": command, "before_s": old, "fast_s": new, "speedup": old / new,
                   "exact_s": exact, "warm_s": warm, "load": load}
            rows.append(row)
            fmt = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
            print(f"| {name} | {command} | {old:.1f} | {new:.1f} | {old / new:.2f}x | {fmt(exact)} | {fmt(warm)} | {load:.1f} |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
