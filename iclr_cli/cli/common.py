"""Glue shared by ``score`` and ``prune``: option validation, engine set-up, summaries."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from iclr_cli.errors import InputError
from iclr_cli.formats.base import Document
from iclr_cli.pipeline import ScorerConfig, Summary
from iclr_cli.savings.estimate import Totals
from iclr_cli.render.output import Output
from iclr_cli.token_accounting import WHOLE_ITEM_WHY, blocks_cell, blocks_removed_cell, summary_rows


def scorer_config(model: str, max_tokens: int | None, overflow: str, dtype: str, no_prefix_cache: bool, batch_size: int | None,
                  device: str | None, *, context: str | None = None, cache_tokens: int | None = None,
                  exact: bool = False, elide: int | None = None, recheck_below: float | None = None) -> ScorerConfig:
    """Scorer options into a :class:`ScorerConfig` (which validates them); ``None`` for
    ``context`` is the default context, ``None`` for ``max_tokens``, ``elide`` and
    ``recheck_below`` the profile's (``--exact`` or the fast default:
    :func:`iclr_cli.scoring.profile.choose`).

    Raises:
        UsageError: for an unknown ``--overflow``, ``--dtype`` or ``--context``, or
            ``--elide`` or ``--recheck-below`` with ``--exact``.
    """
    extra = {"context": str(context)} if context is not None else {}
    return ScorerConfig.chosen(exact, max_tokens, elide, recheck_below, model=model, overflow=str(overflow), dtype=str(dtype),
                                    prefix_cache=not no_prefix_cache, batch_size=batch_size, device=device,
                                    cache_tokens=cache_tokens, **extra)


def check_splitter(split: str) -> str:
    """``split`` if it names a block splitter (see :func:`iclr_cli.pipeline.check_splitter`)."""
    from iclr_cli.pipeline import check_splitter as check

    return check(str(split))


def in_place_target(input: str, output: str | None) -> str:
    """The file ``--in-place`` writes: the input itself (an ``-o`` naming the same file is
    allowed, any other is a contradiction).

    Raises:
        UsageError: for stdin, or an ``-o`` that is another file.
    """
    from iclr_cli.errors import UsageError
    from iclr_cli.jsonio import same_file

    if input == "-":
        raise UsageError("--in-place needs a file to write back to, not stdin ('-')")
    if output == "-" or (output is not None and not same_file(output, input)):
        raise UsageError(f"--in-place writes {input} itself; drop -o {output}, or drop --in-place to write -o")
    return input


def near_tie_row(summary: Summary) -> tuple[str, str]:
    """The summary row of the fast profile's recheck (:mod:`iclr_cli.scoring.recheck`): near
    ties, those rescored as exact and what that changed, and those left as scored."""
    value = f"{summary.near_ties}, rescored as exact {summary.rechecked} ({summary.recheck_changed} selections changed)"
    left = summary.near_ties - summary.rechecked
    if left:
        value += f", {left} kept as scored (--exact reads those sessions through its sliding window: docs/scoring.md)"
    return "near ties (recheck)", value


def warn_precision(out: Output, config: ScorerConfig) -> None:
    """The warning for a forced precision below float32 (METHOD.md, "Precision"). ``auto``
    is not warned about: it takes bf16 only where the hardware runs it natively, and the
    summary names what ran."""
    if config.dtype not in ("auto", "float32"):
        out.warn(f"--dtype {config.dtype}: entropies differ from float32 (block means ~0.05 bits on average, single tokens "
                 "up to ~1.8 bits, measured on the default proxy); selections may change")


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
        raise InputError(doc.source, f"{n} text{'s' if n != 1 else ''} or field{'s' if n != 1 else ''} not read as reasoning or action (--strict); see the warnings above")


def warn_one_block(out: Output, trajectories, splitter: str) -> bool:
    """Before a long scoring run: warn when most steps with reasoning hold one block (see
    :func:`iclr_cli.block_notes.one_block_note`). Returns whether it warned."""
    from iclr_cli.block_notes import block_counts, one_block_note

    with_reasoning, one, compressed = block_counts(trajectories, splitter)
    note = one_block_note(one, with_reasoning, splitter, compressed)
    if note:
        out.warn(note)
    return note is not None


@contextlib.contextmanager
def interruptible(out: Output, done: Callable[[], str]) -> Iterator[None]:
    """Turn Ctrl-C inside the block into :class:`~iclr_cli.errors.Interrupted` (exit 130) with
    one line saying what was kept; ``done()`` says how far the command got."""
    try:
        yield
    except KeyboardInterrupt:
        raise out.interrupted(done()) from None


def resent_row(t: Totals) -> tuple[str, str]:
    """``input tokens re-sent, static: X -> Y (-Z%)``: the input of every request of the
    sessions as recorded (or counted by the proxy) and with online write-back (docs/savings.md);
    sealed reasoning is not taken off and is named when present."""
    from iclr_cli.savings.estimate import change_percent

    pct = change_percent(t.input, t.saved)
    value = f"{round(t.input):,} -> {round(t.input_after):,}" + (f" ({pct:.1f}%)" if pct is not None and t.saved else " (0%)" if pct is not None else "")
    if round(t.sealed):
        value += f"; sealed reasoning not counted: {round(t.sealed):,}"
    return ("input tokens re-sent, static", value)


# ``score`` scores every step with blocks; ``prune`` only those whose selection depends on
# the scores (Settings.score_all): the label says which, so the two summaries' scored,
# windowed and context rows differ visibly for that reason.
SCORED_LABEL = {"score": "steps scored (every step with blocks)", "prune": "steps scored (only where BottomK can remove a block)"}


def sealed_row(sealed) -> tuple[str, str]:
    """The summary row of the reasoning parts left sealed by the provider rule
    (:mod:`iclr_cli.formats.sealing`), by provider kind: ``3 (anthropic signed 2, openai encrypted 1)``."""
    from iclr_cli.formats.sealing import SIGNED

    inner = ", ".join(f"{kind} {'signed' if what == SIGNED else 'encrypted'} {n}" for (kind, what), n in sorted(sealed.items()))
    return ("reasoning parts left sealed (provider rule)", f"{sum(sealed.values())} ({inner})")


def _removed_value(summary: Summary, variant: str) -> str | int:
    """The blocks-removed cell: random-R deletes tokens anywhere in a step's reasoning (METHOD.md,
    "Variants"), not whole blocks, so its cell says how many tokens went beside the whole blocks.
    Blocks that went with an encrypted item dropped whole are named with the reason, as
    ``iclr diff`` of the output names them (:func:`~iclr_cli.token_accounting.blocks_removed_cell`),
    and with how many of them the variant chose."""
    missed = summary.not_as_asked
    if not variant.startswith("random-"):
        cell = blocks_removed_cell(summary.removed, missed.dropped, missed.dropped_blocks)
        return cell if not missed.dropped else f"{cell[:-1]}; --variant {variant} chose {missed.dropped_asked} of them)"
    return f"{summary.removed} whole; {variant} deletes tokens, not blocks: {summary.tokens.deleted:,} tokens deleted"


def print_summary(out: Output, summary: Summary, tokenizer_name: str, variant: str, command: str = "prune", splitter: str | None = None,
                  scorer: str | None = None) -> None:
    """The run summary table on stderr (``command``: ``score`` or ``prune``). Reasoning tokens
    follow the one accounting of :mod:`iclr_cli.token_accounting`. With ``splitter`` (the
    ``--block-split`` of a variant that ranks blocks), a warning when most steps with reasoning
    hold one block names a finer one. ``scorer`` names the profile that scored
    (:meth:`~iclr_cli.pipeline.ScorerConfig.describe`), for variants that score."""
    from iclr_cli.block_notes import one_block_note

    selected = "blocks selected" if command == "score" else "blocks removed"  # score only reports what the variant would remove
    rows = [
        ("trajectories", summary.trajectories),
        ("steps", summary.steps),
        ("steps with reasoning", summary.steps_with_reasoning),
        ("steps with one block (N = 1)", summary.one_block),
        ("reasoning blocks", blocks_cell(summary.blocks, summary.sealed_blocks)),
        (selected, _removed_value(summary, variant)),
        *summary_rows(summary.tokens, tokenizer_name),
        *([resent_row(summary.resent)] if summary.resent.requests else []),
        *([("scorer profile", scorer)] if scorer else []),
        (SCORED_LABEL.get(command, "steps scored"), summary.scored),
        ("scored steps windowed (over --max-tokens)", summary.windowed),
        *([near_tie_row(summary)] if scorer else []),
        *([("context (scored steps)", ", ".join(f"{mode} {n}" for mode, n in sorted(summary.contexts.items())))]
          if summary.contexts else []),
        ("steps skipped", len(summary.skipped)),
        ("unrecognised", summary.unrecognised),
        *([sealed_row(summary.sealed)] if summary.sealed else []),
    ]
    out.table(f"iclr {command} --variant {variant}", ["", "value"], rows, wrap_last=True)
    note = one_block_note(summary.one_block, summary.steps_with_reasoning, splitter, summary.compressed) if splitter else None
    if note:
        out.warn(note)
    for line in summary.skipped:
        out.warn(f"not pruned: {line}")
    missed = summary.not_as_asked
    if missed.dropped:
        out.warn(
            f"--variant {variant} could not be applied as asked to {missed.dropped} reasoning part(s) with encrypted_content "
            f"({WHOLE_ITEM_WHY}): --encrypted-reasoning drop removed their items whole; the summary counts them as fully deleted"
        )
    if missed.kept:
        out.warn(
            f"--variant {variant} could not be applied as asked to {missed.kept} reasoning part(s) with encrypted_content: "
            "--encrypted-reasoning keep left them unedited; the summary counts them as not deleted"
        )
