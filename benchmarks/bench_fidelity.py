"""Fidelity and speed of scorer profiles against ``--exact`` on the real sessions.

For every file of ``../shared/realdata``, run
``iclr score`` once per profile (the real proxy, a fresh checkpoint folder, a fresh P cache)
and compare each profile's records with the exact scorer's, block by block:

- **agreement**: share of blocks whose BottomK decision (``selected``) is the same, over the
  blocks of steps with at least two blocks (one block is never removed, METHOD.md "Select and
  replace", so it always agrees); the issue's bar is 95% over all files;
- **mean |d| bits**: mean absolute difference of block entropies;
- **wall**: seconds of the whole command (model load included), and its ratio to exact.

Files whose reasoning is sealed by default (Anthropic-signed thinking, Codex encrypted
reasoning) are scored with ``--signed-thinking edit`` / ``--encrypted-reasoning drop`` here:
the point is to compare what the proxy sees, on the sessions where elision matters most.

Outputs are kept in ``--work`` keyed by the code's git revision, the file and the profile, so
an interrupted study resumes; ``--fresh`` starts over. Usage::

    python benchmarks/bench_fidelity.py                      # every profile, every file
    python benchmarks/bench_fidelity.py --profiles exact,fast --files taubench,swe_agent
    python benchmarks/bench_fidelity.py --profiles fast-f32,fast-f32-norecheck --busy 2 \
        --env MKL_ENABLE_INSTRUCTIONS=AVX2 --env ONEDNN_MAX_CPU_ISA=AVX2 --env ATEN_CPU_CAPABILITY=avx2

The fast profile's near ties (steps within its recheck margin) and those it rescored as exact
are counted per profile.
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

# name -> (path under realdata, extra options)
FILES = {
    "taubench": ("openai_chat_reasoning/taubench_airline_gpt5_wiki_random.json", []),
    "openhands-r1-content": ("openai_chat_reasoning/openhands_deepseek-r1_reasoning_content_exchanges.jsonl", []),
    "openhands-r1-think": ("openai_chat_reasoning/openhands_deepseek-r1_inline_think_tags_exchanges.jsonl", []),
    "swe_agent-pydicom": ("swe_agent/gpt4_pydicom-1458.traj", []),
    "swe_agent-marshmallow": ("swe_agent/marshmallow-1867_function_calling.traj", ["--block-split", "line"]),
    "mini_swe_agent": ("mini_swe_agent/github_issue.traj.json", []),
    "openhands-events": ("openhands_events/basic_gui_mode.json", []),
    "codex-rollout": ("codex_rollout/agentcmd_rollout-2025-09-24T20-12-23.jsonl", ["--encrypted-reasoning", "drop", "--block-split", "line"]),
    "claude-code-tool-heavy": ("claude_code/spotter_tool_heavy.jsonl", ["--signed-thinking", "edit", "--block-split", "line"]),
    "claude-code-slice": ("claude_code/spotter_258c7280_main_session_slice.jsonl", ["--signed-thinking", "edit", "--block-split", "line"]),
    # no step of these has two blocks (at most one thinking paragraph, or no reasoning kept in the
    # file), so no selection can differ; they are run for their wall time
    "claude-code-short": ("claude_code/spotter_short.jsonl", ["--signed-thinking", "edit"]),
    "claude-code-acompact": ("claude_code/spotter_258c7280_agent-acompact.jsonl", ["--signed-thinking", "edit"]),
    "claude-code-nothinking": ("claude_code/agentcmd_full_session_three_nothinking.jsonl", ["--signed-thinking", "edit"]),
    "mini_swe_agent-django": ("mini_swe_agent/liveswe_gpt-5-mini_django__django-11133.traj.json", []),
}

PROFILES = {
    "exact": ["--exact"],
    "w4k": ["--elide", "0"],
    "elide512-w8k": ["--max-tokens", "8192"],
    "fast": [],  # the default: 4,096-token window, elide 512, the native precision (--dtype auto)
    "fast-f32": ["--dtype", "float32"],  # the fast profile in float32 whatever the hardware
    "fast-norecheck": ["--recheck-below", "0"],  # the fast profile without its recheck of near ties
    "fast-f32-norecheck": ["--dtype", "float32", "--recheck-below", "0"],
    "elide1024-w4k": ["--elide", "1024"],
    "elide256-w4k": ["--elide", "256"],
    "elide512-w2k": ["--max-tokens", "2048"],
    "fast-bf16": ["--dtype", "bfloat16"],  # bf16 forced, also where it is not native
    # windows between the fast profile's and exact's, in float32 (a CPU without bf16)
    "f32-w6k": ["--max-tokens", "6144", "--dtype", "float32"],
    "f32-w8k": ["--max-tokens", "8192", "--dtype", "float32"],
    "f32-whole": ["--elide", "0", "--dtype", "float32"],  # the fast window, nothing elided
    "f32-elide2k": ["--elide", "2048", "--dtype", "float32"],
    # exact's window and render in the fresh window whatever --context auto would take
    "exact-fresh": ["--exact", "--context", "fresh"],
}


def revision() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "iclr_cli"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        return head + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def run_one(file: str, extra: list[str], profile: list[str], out: Path, model: str, setenv: dict[str, str] | None = None) -> float:
    """Run ``iclr score`` into ``out``; seconds of wall time. ``setenv`` is added to its
    environment (a CPU capped to AVX2, say)."""
    env = {**os.environ, **(setenv or {})}
    scratch = Path(tempfile.mkdtemp(prefix="iclr-fidelity-"))
    env["ICLR_CHECKPOINT_DIR"] = str(scratch / "checkpoints")
    env["ICLR_PROMPT_CACHE_DIR"] = str(scratch / "prompts")  # every run pays for its own P
    cmd = [sys.executable, "-m", "iclr_cli", "score", str(REALDATA / file), "--model", model, "-o", str(out), "--force", "--quiet", *extra, *profile]
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip()[-800:]}")
    return time.perf_counter() - start


def records(path: Path) -> dict[tuple, dict]:
    out = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if "block" in r:
            out[(r["trajectory"], r["step"], r["block"])] = r
    return out


def compare(exact: dict, other: dict) -> dict:
    """Agreement over blocks of multi-block steps, and mean |d| of entropies."""
    agree = total = 0
    diffs = []
    for key, e in exact.items():
        o = other.get(key)
        if o is None:
            continue
        if e["entropy_bits"] is not None and o["entropy_bits"] is not None:
            diffs.append(abs(e["entropy_bits"] - o["entropy_bits"]))
        if e["n_blocks"] >= 2:
            total += 1
            agree += e["selected"] == o["selected"]
    near = {key[:2] for key, o in other.items() if "fast_margin_bits" in o}
    rescored = {key[:2] for key, o in other.items() if "fast_margin_bits" in o and o.get("profile") == "exact"}
    return {"blocks": total, "agree": agree, "mean_abs_bits": sum(diffs) / len(diffs) if diffs else None,
            "near_ties": len(near), "rechecked_steps": len(rescored)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profiles", default=",".join(PROFILES), help="comma-separated names (exact always runs)")
    ap.add_argument("--files", default=",".join(FILES), help="comma-separated names")
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "iclr-bench-fidelity"))
    ap.add_argument("--fresh", action="store_true", help="ignore kept outputs")
    ap.add_argument("--revision", help="take kept outputs of this revision's folder (default: the current one)")
    ap.add_argument("--json", help="write the table as JSON here too")
    ap.add_argument("--busy", type=int, default=0, metavar="N",
                    help="run N CPU-bound processes beside every command (an agent's build; outputs kept apart)")
    ap.add_argument("--env", action="append", default=[], metavar="K=V",
                    help="set in every command's environment, e.g. the AVX2 cap: --env MKL_ENABLE_INSTRUCTIONS=AVX2 "
                         "--env ONEDNN_MAX_CPU_ISA=AVX2 --env ATEN_CPU_CAPABILITY=avx2 (outputs kept apart per setting)")
    args = ap.parse_args()
    setenv = dict(kv.split("=", 1) for kv in args.env)
    profiles = ["exact", *[p for p in args.profiles.split(",") if p and p != "exact"]]
    files = [f for f in args.files.split(",") if f]
    work = Path(args.work) / ((args.revision or revision()) + "".join(f"+{k}={v}" for k, v in sorted(setenv.items()))
                              + (f"+busy{args.busy}" if args.busy else ""))
    if args.fresh:
        shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    print(f"# revision {work.name}, model {args.model}, load {os.getloadavg()[0]:.1f}", flush=True)
    if setenv:
        print(f"# environment: {' '.join(args.env)}", flush=True)
    table: dict[str, dict[str, dict]] = {}
    busy = _busy(args.busy)
    try:
        run_all(files, profiles, work, args.model, setenv, table)
    finally:
        for proc in busy:
            proc.kill()
    report(files, profiles, table, args.json)


def _busy(n: int) -> list[subprocess.Popen]:
    """``n`` CPU-bound processes (bench_serve_budget's: a busy loop ending after an hour at most)."""
    loop = "import time\nend = time.monotonic() + 3600\nwhile time.monotonic() < end: sum(i * i for i in range(10000))"
    return [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(n)]


def run_all(files, profiles, work: Path, model: str, setenv: dict[str, str], table: dict) -> None:
    """Run (or take the kept outputs of) every file under every profile, printing a line each."""
    for name in files:
        path, extra = FILES[name]
        for prof in profiles:
            out = work / f"{name}.{prof}.jsonl"
            timing = work / f"{name}.{prof}.seconds"
            if not (out.exists() and timing.exists()):
                seconds = run_one(path, extra, PROFILES[prof], out, model, setenv)
                timing.write_text(f"{seconds:.2f}\n")
            table.setdefault(name, {})[prof] = {"wall_s": float(timing.read_text())}
        exact = records(work / f"{name}.exact.jsonl")
        for prof in profiles:
            row = table[name][prof]
            row.update(compare(exact, records(work / f"{name}.{prof}.jsonl")))
            row["wall_ratio"] = row["wall_s"] / table[name]["exact"]["wall_s"]
            share = row["agree"] / row["blocks"] if row["blocks"] else None
            print(f"{name:24} {prof:14} blocks {row['blocks']:4} agree {row['agree']:4} "
                  f"({'-' if share is None else f'{share:.3f}'}) |d| {row['mean_abs_bits'] or 0:.3f} bits  "
                  f"wall {row['wall_s']:7.1f} s ({row['wall_ratio']:.2f}x of exact) near ties {row['near_ties']}, rescored {row['rechecked_steps']}", flush=True)


def report(files, profiles, table: dict, json_path: str | None) -> None:
    """The summary table, one row per profile (and ``json_path`` as JSON)."""
    print("\n| profile | blocks (N >= 2) | agreement | mean abs d (bits) | near ties, rescored | wall, sum over files | of exact |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    summary = {}
    for prof in profiles:
        rows = [table[f][prof] for f in files]
        blocks, agree = sum(r["blocks"] for r in rows), sum(r["agree"] for r in rows)
        diffs = [r["mean_abs_bits"] for r in rows if r["mean_abs_bits"] is not None]
        wall, exact_wall = sum(r["wall_s"] for r in rows), sum(table[f]["exact"]["wall_s"] for f in files)
        worst = min(((r["agree"] / r["blocks"], f) for f, r in zip(files, rows) if r["blocks"]), default=(1.0, "-"))
        summary[prof] = {"blocks": blocks, "agreement": agree / blocks if blocks else None, "wall_s": wall,
                         "wall_ratio": wall / exact_wall, "worst_file": worst[1], "worst_agreement": worst[0]}
        print(f"| {prof} | {blocks} | {agree / blocks:.3f} (worst {worst[0]:.2f}, {worst[1]}) | {sum(diffs) / len(diffs):.3f} | {sum(r['near_ties'] for r in rows)}, {sum(r['rechecked_steps'] for r in rows)} | {wall:.0f} s | {wall / exact_wall:.2f} |")
    if json_path:
        Path(json_path).write_text(json.dumps({"files": table, "profiles": summary}, indent=2))


if __name__ == "__main__":
    main()
