"""Wall time, CPU time and peak RSS of ``iclr savings`` over a folder, cold and from its cache.

Run from the repository root::

    python benchmarks/bench_savings.py                 # ../shared/realdata, delete-all and iclr (SmolLM2)
    python benchmarks/bench_savings.py --quick         # the same with --model fake: seconds
    python benchmarks/bench_savings.py --folder ~/.claude/projects --variants delete-all

Every run is a fresh Python process running the CLI in-process (``iclr_cli.cli.app.main``)
with ``--json``, so peak RSS (``VmHWM``) is the whole command's. Each variant runs twice on an
empty savings cache: ``cold`` estimates every file, ``cached`` must take every file from the
cache (the row shows the files read and cached, from the JSON). The savings cache lives in a
temporary cache folder whose ``models`` link to the real one, so the proxy is not converted
again. The load average is printed with each row: wall time on a shared machine scales with it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REALDATA = next((p for p in (ROOT.parent / "shared/realdata", ROOT.parent.parent / "shared/realdata") if p.is_dir()),
                ROOT.parent / "shared/realdata")

CHILD = str(Path(__file__).resolve().parent / "measure_child.py")  # see its docstring


def cache_folder(tmp: Path) -> Path:
    """A cache folder for this benchmark whose proxy model files are the real ones."""
    sys.path.insert(0, str(ROOT))
    from iclr_cli.scoring.loading import cache_root

    real = cache_root()
    folder = tmp / "cache"
    folder.mkdir()
    for entry in real.iterdir() if real.is_dir() else []:
        if entry.name != "savings.sqlite3" and not entry.name.startswith("savings.sqlite3-"):
            (folder / entry.name).symlink_to(entry)
    return folder


def run(args: list[str], cache: Path, tmp: Path) -> dict:
    out, stdout = tmp / "result.json", tmp / "stdout.json"
    env = {**os.environ, "ICLR_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    spec = json.dumps({"args": args, "out": str(out), "stdout": str(stdout)})
    subprocess.run([sys.executable, CHILD, spec], env=env, cwd=ROOT, check=True, stderr=subprocess.DEVNULL)
    result = json.loads(out.read_text())
    report = json.loads(stdout.read_text()) if result["code"] == 0 else {}
    result["files"] = report.get("files", {})
    result["summary"] = report.get("summary", {})
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", default=str(REALDATA))
    parser.add_argument("--variants", default="delete-all,iclr")
    parser.add_argument("--quick", action="store_true", help="--model fake (seconds; proves the script runs)")
    parser.add_argument("--json", help="also write the rows here")
    opts = parser.parse_args()
    model = ["--model", "fake"] if opts.quick else []
    rows = []
    print(f"{'variant':<12} {'run':<7} {'wall s':>8} {'cpu s':>8} {'peak MiB':>9} {'read':>5} {'cached':>6} {'input':>12} {'with wb':>12} {'load':>5}")
    for variant in opts.variants.split(","):
        with tempfile.TemporaryDirectory() as name:
            tmp = Path(name)
            cache = cache_folder(tmp)
            for label in ("cold", "cached"):
                t = time.time()
                r = run(["savings", opts.folder, "--variant", variant, "--json", *model], cache, tmp)
                load = os.getloadavg()[0]
                files, summary = r["files"], r["summary"]
                print(f"{variant:<12} {label:<7} {r['wall']:>8.1f} {r['cpu']:>8.1f} {r['peak_mib']:>9.0f} {files.get('read', '-'):>5} "
                      f"{files.get('cached', '-'):>6} {summary.get('input_tokens', '-'):>12} {summary.get('input_tokens_with_writeback', '-'):>12} {load:>5.1f}")
                rows.append({"variant": variant, "run": label, "started": t, "load": load, **r})
    if opts.json:
        Path(opts.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
