"""P once per machine (iclr_cli.scoring.prefix): a new session's first scored step with and without the shared P state.

Run from the repository root::

    python benchmarks/bench_prompt_cache.py                      # SmolLM2, P of about 3,500 tokens, sliding
    python benchmarks/bench_prompt_cache.py --p-tokens 20000     # Claude Code's size
    python benchmarks/bench_prompt_cache.py --context fresh --max-tokens 8192

Requests are what ``iclr serve`` sends its scorer for a Claude-Code-style session (read by the
serve Messages reader, prepared by the online loop): P is a system prompt and tool
definitions of about ``--p-tokens`` proxy tokens (``bench_serve_budget._p``) and the session's
first user message (its task: different in every session), then one tool step of history and
the step to score. Each session is a new stream.

Rows, all on one loaded model, the P cache in a fresh temporary folder:

- the reference: each session on a scorer without the shared P state (``prompt_cache=False``):
  what every new session cost before (the column "without P cache");
- ``A (miss)``, ``B (memory hit)``: sessions A then B (another task) on one scorer;
- ``C (disk hit)``: session C on a new scorer instance with the same folder (a new process).

Each row: tokens forwarded through the model, tokens taken from the shared state, seconds
(wall clock, one scoring call; a miss includes writing the state to disk, a disk hit reading
it), the same for the reference, and the largest block entropy difference against it (bits). Wall times are wall clock on a shared machine: say the load (printed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_serve_budget import _p, _step  # noqa: E402


def session_request(task: int, system, tools):
    """The scorer request of a session's second step (one tool step of history before it)."""
    from iclr_cli.compress import Settings, prepare_step
    from iclr_cli.policies import parse_variant
    from iclr_cli.serve.dialect import Request
    from iclr_cli.serve.messages import MessagesDialect

    messages = [{"role": "user", "content": f"Task {task}: the test suite fails after the last refactor of the cache layer; find out why and fix it."}]
    for k in range(2):
        reasoning, command, output = _step(task, k)
        messages.append({"role": "assistant", "content": [
            {"type": "thinking", "thinking": reasoning, "signature": ""},
            {"type": "tool_use", "id": f"t{task}_{k}", "name": "Bash", "input": {"command": command}}]})
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{task}_{k}", "content": output}]})
    body = {"model": "claude-bench", "system": system, "tools": tools, "messages": messages}
    traj = MessagesDialect().read(Request(body, messages), f"session-{task}").trajectory
    return prepare_step(traj.id, traj.prompt, traj.steps[:-1], traj.steps[-1], Settings(parse_variant("iclr"))).request


def measure(scorer, request):
    before = (scorer.stats.forward_tokens, scorer.stats.reused_tokens)
    t0 = time.perf_counter()
    [result] = scorer.score([request])
    wall = time.perf_counter() - t0
    return result, scorer.stats.forward_tokens - before[0], scorer.stats.reused_tokens - before[1], wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--p-tokens", type=int, default=3500, help="proxy tokens of system prompt + tool definitions")
    parser.add_argument("--context", default="sliding", choices=["sliding", "fresh"])
    parser.add_argument("--max-tokens", type=int, default=8192)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    from iclr_cli.scoring.loading import load_model
    from iclr_cli.scoring.transformers_scorer import TransformersScorer

    model, tokenizer, source = load_model(args.model, device=args.device)
    system, tools = _p(args.p_tokens, tokenizer)
    requests = {name: session_request(task, system, tools) for name, task in (("A", 1), ("B", 2), ("C", 3))}
    shared = sum(len(tokenizer.encode(seg)[0]) for seg in requests["A"].prompt if not seg.startswith("[user]\n"))
    p_all = sum(len(tokenizer.encode(seg)[0]) for seg in requests["B"].prompt)

    def build(folder=None, on=True):
        return TransformersScorer(model, tokenizer, name=source.name, max_tokens=args.max_tokens, context=args.context,
                                  prompt_cache=on, prompt_cache_dir=folder)

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "prompts"
        off = build(on=False)
        ref = {name: measure(off, req) for name, req in requests.items()}
        one = build(folder)
        rows = []
        rows.append(("A (miss)", "A", measure(one, requests["A"])))
        rows.append(("B (memory hit)", "B", measure(one, requests["B"])))
        rows.append(("C (disk hit, new scorer)", "C", measure(build(folder), requests["C"])))
        disk = sum(f.stat().st_size for f in folder.glob("*.pt"))

    print(json.dumps({"model": source.name, "context": args.context, "max_tokens": args.max_tokens, "load": os.getloadavg(),
                      "p_tokens": p_all, "shared_tokens": shared, "context_tokens": ref["B"][0].context_tokens,
                      "disk_bytes": disk}))
    print("| run | session | forward tokens | reused from P state | seconds | without P cache: tokens / seconds | max entropy diff (bits) |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for label, name, (result, forward, reused, wall) in rows:
        diff = max(abs(a.entropy_bits - b.entropy_bits) for a, b in zip(result.blocks, ref[name][0].blocks) if a.entropy_bits is not None)
        print(f"| {label} | {name} | {forward:,} | {reused:,} | {wall:.1f} | {ref[name][1]:,} / {ref[name][3]:.1f} | {diff:.1e} |")


if __name__ == "__main__":
    main()
