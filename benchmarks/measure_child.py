"""Run one ``iclr`` command in this process and record what it cost: the benchmarks' child.

    python benchmarks/measure_child.py SPEC_JSON

SPEC: ``{"args": [...], "out": path}`` and optionally ``"stdout": path`` (the command's standard
output goes there) and ``"scorer_stats": true`` (also record the scorer's forwarded and reused
tokens). Writes ``{"code", "wall", "cpu", "peak_mib"[, "forward_tokens", "reused_tokens"]}`` to
``out``: wall and CPU seconds of the command, and the process's peak RSS in MiB (``VmHWM``, so a
fresh process per measurement). ``iclr_cli`` is imported from the caller's ``PYTHONPATH``, so the
same driver measures any checkout (``bench_cli.py --tree``, ``bench_memory.py --tree``).
"""

import contextlib
import json
import resource
import sys
import time


def main(spec: dict) -> None:
    kept: dict = {}
    if spec.get("scorer_stats"):
        import iclr_cli.pipeline as pipeline

        inner = pipeline.build_engines

        def build_engines(*a, **k):
            scorer, tokenizer = inner(*a, **k)
            kept["scorer"] = scorer
            return scorer, tokenizer

        pipeline.build_engines = build_engines
    from iclr_cli.cli.app import main as iclr

    sink = open(spec["stdout"], "w") if spec.get("stdout") else None
    code = 0
    t = time.perf_counter()
    with contextlib.redirect_stdout(sink) if sink else contextlib.nullcontext():
        try:
            sys.argv = ["iclr", *spec["args"]]
            iclr()
        except SystemExit as exc:
            code = exc.code or 0
    wall = time.perf_counter() - t
    if sink:
        sink.close()
    use = resource.getrusage(resource.RUSAGE_SELF)
    with open("/proc/self/status") as status:
        peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024
    result = {"code": code, "wall": wall, "cpu": use.ru_utime + use.ru_stime, "peak_mib": peak}
    if spec.get("scorer_stats"):
        stats = getattr(kept.get("scorer"), "stats", None)
        result.update(forward_tokens=getattr(stats, "forward_tokens", None), reused_tokens=getattr(stats, "reused_tokens", None))
    with open(spec["out"], "w") as out:
        json.dump(result, out)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
