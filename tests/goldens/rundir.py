"""A small replay run folder, written by the tests in the layout ``iclr replay --out`` uses
(the input contract of :mod:`iclr_cli.render.runs`): results.jsonl, and per record
``runs/TASK/VARIANT/seedN/`` with trajectory.json (OpenAI chat messages), requests.jsonl
(per-request usage) and, for one iclr record, block_scores.jsonl."""

from __future__ import annotations

import json
from pathlib import Path

REASONING = "Look at the test output first.\n\nThe failure is in parse().\n\nThe regex looks greedy.\n\nCheck the fixture too."

# (task, variant, seed): (actions per step, input tokens per request, output per request, reward, removed)
RUNS = {
    ("fix-bug", "none", 0): (["cat parser.py", "pytest -x", "write parser.py", "submit"], [500, 800, 1100, 1400], [100, 100, 100, 100], 0.5, 0),
    ("fix-bug", "iclr", 0): (["cat parser.py", "pytest -x", "grep -n regex parser.py", "write parser.py", "submit"], [500, 650, 760, 870, 980], [90, 90, 90, 90, 90], 1.0, 240),
    ("fix-bug", "delete-all", 0): (["cat parser.py", "ls", "submit"], [500, 560, 620], [80, 80, 80], 0.0, 300),
    ("csv-sum", "none", 0): (["head data.csv", "submit"], [400, 700], [120, 60], 1.0, 0),
    ("csv-sum", "iclr", 0): (["head data.csv", "submit"], [400, 610], [120, 60], 1.0, 96),
}


def _messages(actions: list[str]) -> list[dict]:
    msgs = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Do the task."}]
    for i, action in enumerate(actions):
        name = "submit" if action == "submit" else "bash"
        call = {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps({"command": action})}}
        msgs.append({"role": "assistant", "reasoning_content": REASONING, "content": None, "tool_calls": [call]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"result of {action}"})
    return msgs


def write_run(root: Path, *, block_scores: bool = True) -> Path:
    """Write the run folder under ``root/run`` and return its path."""
    run = root / "run"
    run.mkdir()
    records = []
    for (task, variant, seed), (actions, inputs, outputs, reward, removed) in RUNS.items():
        rel = Path("runs") / task / variant / f"seed{seed}"
        folder = run / rel
        folder.mkdir(parents=True)
        doc = {"messages": _messages(actions), "tools": [], "meta": {"task": task, "variant": variant, "seed": seed}}
        (folder / "trajectory.json").write_text(json.dumps(doc, indent=1))
        log = [
            {"step": i, "messages_sent": 3 + 2 * i, "input_tokens": a, "output_tokens": b, "cache_read_tokens": None, "reasoning_tokens": None}
            for i, (a, b) in enumerate(zip(inputs, outputs))
        ]
        (folder / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in log))
        record = {
            "task": task, "variant": variant, "seed": seed, "reward": reward, "requests": len(actions),
            "input_tokens": sum(inputs), "output_tokens": sum(outputs), "cache_read_tokens": None,
            "reasoning_tokens_generated": 100 * len(actions), "reasoning_tokens_removed": removed,
            "wall_s": 1.5, "status": "submitted",
            "trajectory": str(rel / "trajectory.json"), "requests_log": str(rel / "requests.jsonl"), "block_scores": None,
        }
        if block_scores and (task, variant) == ("fix-bug", "iclr"):
            scores = [
                {"trajectory": "generated.json#0", "step": s, "block": b, "n_blocks": 4, "n_tokens": 6,
                 "entropy_bits": round(1.0 + 0.5 * b + 0.25 * s, 3), "selected": b < 3, "text": ""}
                for s in range(len(actions)) for b in range(4)
            ]
            (folder / "block_scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in scores))
            record["block_scores"] = str(rel / "block_scores.jsonl")
        records.append(record)
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return run
