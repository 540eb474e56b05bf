"""Glue shared by ``score`` and ``prune``: option validation, engine set-up, summaries."""

from __future__ import annotations

from iclr_cli.errors import InputError, UsageError
from iclr_cli.formats.base import Document
from iclr_cli.pipeline import ScorerConfig, Summary
from iclr_cli.render.output import Output


def scorer_config(model: str, max_tokens: int, overflow: str, dtype: str, no_prefix_cache: bool, batch_size: int, device: str | None) -> ScorerConfig:
    """Validate scorer options into a :class:`ScorerConfig`.

    Raises:
        UsageError: for an unknown ``--overflow`` or ``--dtype``.
    """
    if overflow not in ("window", "skip"):
        raise UsageError(f"--overflow must be 'window' or 'skip', not {overflow!r}")
    if dtype not in ("float32", "bfloat16", "float16"):
        raise UsageError(f"--dtype must be float32 or bfloat16, not {dtype!r}")
    return ScorerConfig(model, max_tokens, overflow, dtype, not no_prefix_cache, batch_size, device)


def check_splitter(split: str) -> None:
    from iclr_cli.blocks import SPLITTERS

    if split not in SPLITTERS:
        raise UsageError(f"--split must be one of {', '.join(SPLITTERS)}, not {split!r}")


def warn_precision(out: Output, config: ScorerConfig) -> None:
    if config.dtype != "float32":
        out.warn(f"--dtype {config.dtype}: entropies differ from float32 (up to ~1.8 bits/token measured on the default proxy); selections may change")


def report_reading(out: Output, doc: Document, *, strict: bool) -> None:
    """Warn about what reading ``doc`` skipped or could not read (one line each).

    Raises:
        InputError: with ``strict``, when an assistant turn held text the adapter reads
        neither as reasoning nor as action (docs/FORMAT.md, "Unrecognised text").
    """
    for w in doc.warnings:
        out.warn(w)
    for item in doc.unrecognised:
        out.warn(f"{item.describe(doc.source)} (not read as reasoning or action)")
    if strict and doc.unrecognised:
        n = len(doc.unrecognised)
        raise InputError(doc.source, f"{n} assistant-turn text{'s' if n != 1 else ''} in fields or markup not read as reasoning or action (--strict); see the warnings above")


def print_summary(out: Output, summary: Summary, tokenizer_name: str, variant: str, command: str = "prune") -> None:
    """The run summary table on stderr (``command``: ``score`` or ``prune``)."""
    ratio = summary.tokens_removed / summary.tokens_before if summary.tokens_before else 0.0
    rows = [
        ("trajectories", summary.trajectories),
        ("steps", summary.steps),
        ("steps with reasoning", summary.steps_with_reasoning),
        ("reasoning blocks", summary.blocks),
        ("blocks removed", summary.removed),
        ("reasoning tokens before", summary.tokens_before),
        ("reasoning tokens after", summary.tokens_after),
        ("reasoning tokens deleted", summary.tokens_removed),
        ("deletion ratio", f"{ratio:.3f}"),
        ("tokenizer", tokenizer_name),
        ("steps windowed", summary.windowed),
        ("steps skipped", len(summary.skipped)),
        ("unrecognised", summary.unrecognised),
    ]
    if command == "score":  # score only reports what the variant would remove
        rows = [("blocks selected" if k == "blocks removed" else k, v) for k, v in rows]
    out.table(f"iclr {command} --variant {variant}", ["", "value"], rows)
    for line in summary.skipped:
        out.warn(f"not pruned: {line}")
    missed = summary.not_as_asked
    if missed.dropped:
        out.warn(
            f"--variant {variant} could not be applied as asked to {missed.dropped} reasoning part(s) with encrypted_content: "
            "--encrypted-reasoning drop removed their items whole; the summary counts them as fully deleted"
        )
    if missed.kept:
        out.warn(
            f"--variant {variant} could not be applied as asked to {missed.kept} reasoning part(s) with encrypted_content: "
            "--encrypted-reasoning keep left them unedited; the summary counts them as not deleted"
        )
