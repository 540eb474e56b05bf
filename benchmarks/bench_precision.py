"""Cheaper arithmetic for the proxy: float32 against bfloat16 and int8 on this CPU.

For each precision the proxy (SmolLM2 by default) runs one forward pass over the same real
text (the tau-bench session of ``../shared/realdata`` rendered as the scorer renders it, cut
to ``--tokens``), and the bench reports tokens per second and how far the per-token
entropies move from float32 (mean and largest |d| in bits). int8 is torch's dynamic
quantization of the linear layers (``torch.ao.quantization.quantize_dynamic``: weights int8,
activations quantized per batch) of the decoder layers; the LM head stays float32 (quantized
too, the entropies moved by ~2 bits per token on average).

METHOD.md, "Score": float32 is the default and lower precision is an explicit opt-in
(``--dtype bfloat16``); this bench measures whether the opt-in is worth it on a machine.
Usage::

    python benchmarks/bench_precision.py --tokens 2048 --repeat 2
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SESSION = ROOT.parent / "shared" / "realdata" / "openai_chat_reasoning" / "taubench_airline_gpt5_wiki_random.json"


def text(tokens: int, tokenizer) -> list[int]:
    from iclr_cli.context import render_prompt, render_step
    from iclr_cli.inputs import open_inputs

    [item] = open_inputs([str(SESSION)], None)
    [doc] = list(item.documents(skip_bad_lines=False))
    traj = doc.trajectories[0]
    rendered = "".join((*render_prompt(traj.prompt), *(render_step(s) for s in traj.steps)))
    ids = tokenizer.encode(rendered)[0]
    while len(ids) < tokens:
        ids = ids + ids
    return ids[:tokens]


def entropies(model, ids, torch) -> tuple[list[float], float]:
    from iclr_cli.scoring.entropy import entropy_bits

    start = time.perf_counter()
    with torch.inference_mode():
        hidden = model.model(input_ids=torch.tensor([ids])).last_hidden_state[0]
        values = []
        for a in range(0, hidden.shape[0], 256):
            logits = model.lm_head(hidden[a : a + 256]).float()
            values.extend(entropy_bits(logits).tolist())
    return values, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--repeat", type=int, default=2, help="runs per precision (the best is kept)")
    ap.add_argument("--model", default="smollm2")
    args = ap.parse_args()
    import torch

    from iclr_cli.scoring.loading import load_model
    from iclr_cli.scoring.threads import limit_torch

    limit_torch()
    base, tokenizer, _ = load_model(args.model)
    ids = text(args.tokens, tokenizer)
    reference = None
    print(f"# {args.tokens} tokens, torch {torch.__version__}, {torch.get_num_threads()} threads")
    print("| precision | tokens/s | of float32 | mean abs d (bits/token) | max abs d |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name in ("float32", "bfloat16", "int8"):
        if name == "bfloat16":
            model, _, _ = load_model(args.model, dtype="bfloat16")
        elif name == "int8":
            import copy
            import warnings

            model = copy.deepcopy(base)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch's deprecation notice for torch.ao.quantization
                model.model = torch.ao.quantization.quantize_dynamic(model.model, {torch.nn.Linear}, dtype=torch.qint8)
        else:
            model = base
        best, values = None, None
        for _ in range(args.repeat):
            values, seconds = entropies(model, ids, torch)
            best = seconds if best is None else min(best, seconds)
        rate = len(ids) / best
        if reference is None:
            reference = (values, rate)
        diffs = [abs(a - b) for a, b in zip(values, reference[0])]
        print(f"| {name} | {rate:.0f} | {rate / reference[1]:.2f}x | {sum(diffs) / len(diffs):.3f} | {max(diffs):.2f} |", flush=True)


if __name__ == "__main__":
    main()
