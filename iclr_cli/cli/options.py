"""Option types shared by several subcommands (``Annotated`` aliases, one definition each)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from iclr_cli.policies import DEFAULT_RATIO

Output = Annotated[Optional[str], typer.Option("--output", "-o", help="Output file (written atomically); '-' or omitted: stdout.")]
Format = Annotated[Optional[str], typer.Option("--format", "-f", help="Input format; auto-detected when omitted. See 'iclr formats'.")]
Ratio = Annotated[float, typer.Option("--ratio", min=0.0, max=1.0, help="rho: share of a step's blocks removed by BottomK (floor(rho*N)).")]
Seed = Annotated[int, typer.Option("--seed", help="Seed of random-R deletions (combined with trajectory id and step).")]
Model = Annotated[str, typer.Option("--model", "-m", help="Proxy model: 'smollm2' (embedded default), 'fake', a local folder, a .gguf file, or a cached Hugging Face id.")]
MaxTokens = Annotated[int, typer.Option("--max-tokens", min=16, help="Scorer input limit in tokens (capped at the proxy's maximum positions).")]
Overflow = Annotated[str, typer.Option("--overflow", help="Over the limit: 'window' keeps P + recent history + the step; 'skip' leaves the step unpruned (paper).")]
Dtype = Annotated[str, typer.Option("--dtype", help="Proxy precision: float32 (default) or bfloat16 (entropies change by up to ~1.8 bits/token).")]
NoPrefixCache = Annotated[bool, typer.Option("--no-prefix-cache", help="Recompute every step from scratch (verification, benchmarks).")]
BatchSize = Annotated[int, typer.Option("--batch-size", min=1, help="Scorer batch size for independent requests.")]
Device = Annotated[Optional[str], typer.Option("--device", help="torch device (default: cuda when available, else cpu).")]
Split = Annotated[str, typer.Option("--split", help="Block splitter: paragraph (blank lines, default), line, sentence.")]
SkipBadLines = Annotated[bool, typer.Option("--skip-bad-lines", help="Skip unparseable JSONL lines (each reported) instead of failing.")]
Strict = Annotated[bool, typer.Option("--strict", help="Exit 2 when an assistant turn holds text the format adapter reads neither as reasoning nor as action.")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No summary, warnings or progress bar on stderr.")]

DEFAULT_RATIO_VALUE = DEFAULT_RATIO
