"""Option types shared by several subcommands (``Annotated`` aliases, one definition each).

Options with a fixed set of values are enums built from the tuple the library validates
against (``SPLITTERS``, ``DTYPES``, the ``Overflow`` literal, ...), so ``--help`` lists the
choices, a wrong value is a usage error (exit 2) before anything runs, and the choices are
written down once. Commands pass ``.value`` on.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Annotated, Optional, get_args

import typer

from iclr_cli.blocks import SPLITTERS
from iclr_cli.formats.base import OpaqueEdits
from iclr_cli.formats.convert import TARGETS
from iclr_cli.formats.sealing import SIGNED_MODES
from iclr_cli.policies import DEFAULT_RATIO
from iclr_cli.scoring.base import CONTEXTS, DEFAULT_CONTEXT
from iclr_cli.scoring.base import Overflow as _OverflowLiteral
from iclr_cli.scoring.loading import DTYPES


class Choice(str, enum.Enum):
    """A fixed option value; ``str()`` and formatting give the value itself."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


def choices(name: str, values: Sequence[str]) -> type[Choice]:
    """An enum of ``values`` for a Typer option (members named after the values)."""
    return Choice(name, [(v.replace("-", "_"), v) for v in values])  # type: ignore[return-value]


OverflowChoice = choices("OverflowChoice", get_args(_OverflowLiteral))
ContextChoice = choices("ContextChoice", CONTEXTS)
DtypeChoice = choices("DtypeChoice", DTYPES)
SplitChoice = choices("SplitChoice", SPLITTERS)
ScoredVariant = choices("ScoredVariant", ("iclr", "iclr-ext", "step-only"))
OpaqueChoice = choices("OpaqueChoice", tuple(e.value for e in OpaqueEdits))
SignedChoice = choices("SignedChoice", SIGNED_MODES)
ConvertTarget = choices("ConvertTarget", TARGETS)

Output = Annotated[Optional[str], typer.Option("--output", "-o", help="Output file (written atomically); '-' or omitted: stdout.")]
Format = Annotated[Optional[str], typer.Option("--format", "-f", help="Input format; auto-detected when omitted. See 'iclr formats'.")]
Ratio = Annotated[float, typer.Option("--ratio", min=0.0, max=1.0, help="rho: share of a step's blocks removed by BottomK (floor(rho*N)).")]
Seed = Annotated[int, typer.Option("--seed", help="Seed of random-R deletions (combined with trajectory id and step).")]
Model = Annotated[str, typer.Option("--model", "-m", help="Proxy model: 'smollm2' (embedded default), 'fake', a local folder, a .gguf file, or a cached Hugging Face id.")]
MaxTokens = Annotated[Optional[int], typer.Option("--max-tokens", min=16, help="Scorer input limit in tokens, capped at the proxy's maximum positions (default: 4,096; with --exact 42,000).", show_default=False)]
Exact = Annotated[bool, typer.Option("--exact", help="Score as METHOD.md says to the letter: the proxy's full window and every tool output whole (slower; the default elides long tool outputs and uses a 4,096-token window, docs/scoring.md: Speed).")]
Elide = Annotated[Optional[int], typer.Option("--elide", min=0, metavar="CHARS", help="Characters the proxy reads at each end of a long tool output or part of P (default 512; 0: all of it).", show_default=False)]
RecheckBelow = Annotated[Optional[float], typer.Option("--recheck-below", min=0.0, metavar="BITS", help="Score a near tie again as --exact does: a step whose selection is within BITS of changing (lowest kept block's entropy minus highest removed one's), where --exact scores in the fresh window (default 0.75; 0: never; docs/scoring.md: Rechecking near ties).", show_default=False)]
Overflow = Annotated[OverflowChoice, typer.Option("--overflow", help="Over the limit: 'window' keeps P + recent history + the step; 'skip' leaves the step unpruned (paper).")]
Dtype = Annotated[DtypeChoice, typer.Option("--dtype", help="Proxy precision: 'auto' (default) runs the decoder in bfloat16 where the hardware runs it natively (AMX or AVX512-BF16 CPUs that measure faster, CUDA GPUs with bf16) and float32 elsewhere, with a float32 LM head and entropy; --exact means float32. A forced bfloat16/float16 moves block means ~0.05 bits (single tokens up to ~1.8 bits) and a warning says so.")]
NoPrefixCache = Annotated[bool, typer.Option("--no-prefix-cache", help="Recompute every step from scratch, P included: no kept or shared scorer state (verification, benchmarks).")]
BatchSize = Annotated[Optional[int], typer.Option("--batch-size", min=1, help="Most trajectories scored in one batched forward (default: chosen for the device).", show_default=False)]
CacheTokens = Annotated[Optional[int], typer.Option("--cache-tokens", min=1, help="Key/value tokens the scorer keeps over all trajectories' caches (default: from free memory).", show_default=False)]
Context = Annotated[ContextChoice, typer.Option("--context", help="Over the limit: 'sliding' reads the session once through a sliding KV window; 'fresh' recomputes a window of P + recent history per step; 'auto' takes sliding unless fresh costs under half as much (tokens weighted by the context they attend to), per trajectory (docs/scoring.md: Scoring long sessions).")]
Device = Annotated[Optional[str], typer.Option("--device", help="torch device: cpu, cuda, cuda:N, mps (default: cuda when available, else cpu).")]
BlockSplit = Annotated[SplitChoice, typer.Option("--block-split", help="How a reasoning part is cut into blocks: paragraph (blank lines, default), line, sentence.")]
SkipBadLines = Annotated[bool, typer.Option("--skip-bad-lines", help="Skip unparseable JSONL lines (each reported) instead of failing.")]
Strict = Annotated[bool, typer.Option("--strict", help="Exit 2 when an assistant turn holds text the format adapter reads neither as reasoning nor as action.")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No summary, warnings or progress bar on stderr.")]
Force = Annotated[bool, typer.Option("--force", help="Overwrite an -o file that is read-only (its mode is kept).")]
InPlace = Annotated[bool, typer.Option("--in-place", "-i", help="Write the result over the input file (atomically: a temp file renamed over it, its mode kept). Without it, an -o that names the input file is refused.")]
Width = Annotated[Optional[int], typer.Option("--width", min=40, help="Table width in columns (default: the terminal's; the table's full width when stderr is not a terminal).")]
ScoredVariantOpt = Annotated[ScoredVariant, typer.Option("--variant", "-v", help="iclr (context-conditioned), iclr-ext (iclr that never removes a block whose derived state is not yet externalized; this project's hypothesis) or step-only.")]
EncryptedReasoning = Annotated[OpaqueChoice, typer.Option("--encrypted-reasoning", help="Reasoning beside encrypted_content (Codex/Responses items, encrypted reasoning_details): 'seal' leaves it as generated and no variant scores or edits it (default, as iclr serve does); 'drop' removes an edited item whole; 'keep' leaves an edited item unedited.")]
SignedThinking = Annotated[SignedChoice, typer.Option("--signed-thinking", help="Thinking signed by a provider that checks the signature (Anthropic; Gemini; a provider the file does not name): 'seal' leaves it as generated, not scored or pruned (default, as iclr serve does); 'edit' edits it and removes the signature. A plain-text provider's signed thinking (DeepSeek, MiniMax, Kimi, local servers) is always edited and keeps its signature.")]

DEFAULT_RATIO_VALUE = DEFAULT_RATIO
WINDOW = OverflowChoice("window")
CONTEXT = ContextChoice(DEFAULT_CONTEXT)
AUTO_DTYPE = DtypeChoice("auto")
ICLR_TARGET = ConvertTarget("iclr")
PARAGRAPH = SplitChoice("paragraph")
SEAL = OpaqueChoice("seal")
SEAL_SIGNED = SignedChoice("seal")
