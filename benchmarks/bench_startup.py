"""Start-up times that tests must not assert: measured here instead.

Run from the repository root::

    python benchmarks/bench_startup.py [--repeat 5]

Prints, as JSON, the median wall time in seconds of fresh processes doing:

- ``help``: ``iclr --help`` (must not import torch);
- ``tokenizer``: loading only the SmolLM2 tokenizer from the prepared cache (no torch);
- ``cache_key``: the model cache key of the embedded GGUF, from the remembered digest
  (``iclr_cli.scoring.loading.gguf_digest``), and the same with the digest hashed afresh.

Figures measured on a loaded shared machine are upper bounds; say so when quoting them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

SNIPPETS = {
    "help": None,
    "tokenizer": "from iclr_cli.scoring import load_tokenizer; load_tokenizer('smollm2')",
    "cache_key": "from iclr_cli.scoring import loading; loading.resolve('smollm2')",
}


def _time(args: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run(args, check=True, capture_output=True, env=env)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    results: dict[str, float] = {}
    for name, code in SNIPPETS.items():
        cmd = [sys.executable, "-m", "iclr_cli", "--help"] if code is None else [sys.executable, "-c", code]
        _time(cmd, env)  # warm the file cache and the digest index
        results[name] = statistics.median(_time(cmd, env) for _ in range(args.repeat))
    unremembered = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as empty:  # no digest remembered: the GGUF is hashed
            unremembered.append(_time([sys.executable, "-c", SNIPPETS["cache_key"]], {**env, "ICLR_CACHE_DIR": empty}))
    results["cache_key_unremembered"] = statistics.median(unremembered)
    print(json.dumps({k: round(v, 3) for k, v in results.items()}, indent=2))


if __name__ == "__main__":
    main()
