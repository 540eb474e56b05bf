"""The main job end to end: files -> trajectories -> online compression -> records / files.

Format adapter -> Trajectory -> blocks -> scorer -> policy -> compressed Trajectory -> the
same adapter writes it back. Commands (``score``, ``prune``, ``convert``) are thin wrappers.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import get_args

from iclr_cli.blocks import SPLITTERS
from iclr_cli.block_notes import holds_skip
from iclr_cli.compress import CompressionResult, Settings, StepReport, compress_trajectories
from iclr_cli.errors import UsageError
from iclr_cli.formats.base import Document
from iclr_cli.policies import Variant
from iclr_cli.scoring.base import CONTEXTS, DEFAULT_CONTEXT, Overflow, Scorer, Tokenizer
from iclr_cli.resent import Totals
from iclr_cli.scoring.loading import DTYPES
from iclr_cli.scoring.profile import FAST, PROFILES, Profile, choose
from iclr_cli.scoring.recheck import Recheck
from iclr_cli.token_accounting import CountTokens, ReasoningTokens, TokenViews, account, token_counter
from iclr_cli.trajectory import Step, Trajectory


@dataclass(frozen=True)
class ScorerConfig:
    """How to build the proxy scorer (CLI options of ``score``, ``prune`` and ``replay``).

    ``model``: ``smollm2`` (embedded default), ``fake``, a local folder, a GGUF file or a
    cached Hugging Face id. ``max_tokens``: input limit before ``min`` with the proxy's
    maximum positions. ``overflow``: one of :data:`OVERFLOWS`. ``dtype``: one of
    :data:`DTYPES`; ``auto`` (default) is the precision the hardware runs natively, float32
    under ``--exact`` (METHOD.md, "Precision"), and :attr:`precision` is what it resolves to. ``context``: ``auto`` (default), ``sliding`` or ``fresh``, what the proxy sees over the
    limit. ``batch_size`` / ``cache_tokens``: ``None`` chooses them from the device's free
    memory (:mod:`iclr_cli.scoring.budget`). ``profile`` names what the proxy sees (``fast``,
    the default, or ``exact``: :mod:`iclr_cli.scoring.profile`), ``max_tokens`` and ``elide``
    (characters kept at each end of a long tool output or part of P; ``None``: all) are its
    values; :meth:`settings` passes ``elide`` to the online loop. ``recheck_below`` (bits;
    ``None``: never) is the fast profile's recheck of near ties (:func:`build_recheck`).

    Raises:
        UsageError: for an ``overflow``, ``dtype`` or ``context`` outside those choices (the
            one validator behind the CLI's enum options, for callers that build a config
            themselves).
    """

    model: str = "smollm2"
    max_tokens: int = FAST.max_tokens
    overflow: str = "window"
    dtype: str = "auto"
    prefix_cache: bool = True
    batch_size: int | None = None
    device: str | None = None
    context: str = DEFAULT_CONTEXT
    cache_tokens: int | None = None
    elide: int | None = FAST.elide
    profile: str = FAST.name
    recheck_below: float | None = FAST.recheck_below

    def __post_init__(self) -> None:
        check_choice("--overflow", self.overflow, OVERFLOWS)
        check_choice("--dtype", self.dtype, DTYPES)
        check_choice("--context", self.context, CONTEXTS)
        check_choice("profile", self.profile, tuple(PROFILES))

    @classmethod
    def for_profile(cls, profile: Profile, **kw) -> ScorerConfig:
        """A config scoring as ``profile`` does (its window and elision), other fields from ``kw``."""
        return cls(max_tokens=profile.max_tokens, elide=profile.elide, profile=profile.name,
                   recheck_below=profile.recheck_below, **kw)

    @classmethod
    def chosen(cls, exact: bool = False, max_tokens: int | None = None, elide: int | None = None,
               recheck_below: float | None = None, **kw) -> ScorerConfig:
        """A config for the options ``--exact``, ``--max-tokens``, ``--elide`` and
        ``--recheck-below`` (:func:`iclr_cli.scoring.profile.choose`, whose UsageError it
        raises), other fields from ``kw``."""
        return cls.for_profile(choose(exact, max_tokens, elide, recheck_below), **kw)

    @functools.cached_property
    def precision(self) -> str:
        """The precision the proxy's decoder runs in (``float32``, ``bfloat16``, ``float16``):
        ``dtype`` itself when forced, else :func:`iclr_cli.scoring.precision.resolve` (torch is
        imported and the CPU probed once; the fake proxy is ``float32`` without torch)."""
        from iclr_cli.scoring.fake import is_fake
        from iclr_cli.scoring.precision import resolve

        if is_fake(self.model) and self.dtype == "auto":
            return "float32"
        return resolve(self.dtype, self.device, exact=self.profile == "exact")

    def describe(self, enforced: int | None = None) -> str:
        """The profile and precision as run, for summaries (:meth:`iclr_cli.scoring.profile.Profile.describe`;
        ``enforced``: the scorer's window when the proxy caps it)."""
        from iclr_cli.scoring.precision import describe

        profile = Profile(self.profile, self.max_tokens, self.elide, self.recheck_below)
        return f"{profile.describe(enforced)}; {describe(self.precision)}"

    def settings(self, variant: Variant, **kw) -> Settings:
        """:class:`~iclr_cli.compress.Settings` for ``variant`` that render what this config's
        proxy should see (``elide``); other fields from ``kw``."""
        return Settings(variant, elide=self.elide, **kw)


OVERFLOWS: tuple[str, ...] = get_args(Overflow)
"""``--overflow`` choices: ``window`` (project default) and ``skip`` (the paper's rule)."""


def check_choice(option: str, value: str, choices: Sequence[str]) -> str:
    """``value`` if it is one of ``choices``.

    Raises:
        UsageError: naming the option and the choices otherwise.
    """
    if value not in choices:
        raise UsageError(f"{option} must be one of {', '.join(choices)}, not {value!r}")
    return value


def check_splitter(split: str) -> str:
    """``split`` if it names a block splitter (:data:`iclr_cli.blocks.SPLITTERS`).

    Raises:
        UsageError: otherwise.
    """
    return check_choice("--block-split", split, SPLITTERS)


def build_engines(variant: Variant, config: ScorerConfig) -> tuple[Scorer | None, Tokenizer]:
    """The scorer (only for variants that rank by entropy) and the tokenizer that counts
    reasoning tokens (always the proxy's, so counts match the scorer's budget). The scorer
    carries the profile's recheck of near ties as ``recheck`` (:func:`build_recheck`), which
    the online loop over recorded trajectories applies."""
    from iclr_cli.scoring.factory import build_scorer, load_tokenizer

    if variant.needs_scores:
        scorer = build_scorer(
            config.model,
            max_tokens=config.max_tokens,
            overflow=config.overflow,
            dtype=config.precision,
            device=config.device,
            prefix_cache=config.prefix_cache,
            prompt_cache=config.prefix_cache,  # --no-prefix-cache: no shared P state either
            batch_size=config.batch_size,
            context=config.context,
            cache_tokens=config.cache_tokens,
        )
        scorer.recheck = build_recheck(variant, config, scorer)
        return scorer, scorer.tokenizer
    return None, load_tokenizer(config.model)


def build_recheck(variant: Variant, config: ScorerConfig, scorer: Scorer | None) -> Recheck | None:
    """The recheck of near ties for a run of ``config`` (:mod:`iclr_cli.scoring.recheck`), or
    ``None`` when there is none (``--exact``, ``--recheck-below 0``, a variant without scores).
    Its exact scorer is built on first use: exact's window, the run's ``--context``, float32,
    the fast scorer's weights where those are float32 already."""
    if not (variant.needs_scores and config.recheck_below and scorer is not None):
        return None
    from iclr_cli.scoring.factory import build_exact_like

    return Recheck(config.recheck_below, lambda: build_exact_like(scorer, config.model, precision=config.precision,
                                                                  device=config.device, overflow=config.overflow,
                                                                  context=config.context, prefix_cache=config.prefix_cache, batch_size=config.batch_size,
                                                                  cache_tokens=config.cache_tokens))


class IdRegistry:
    """Trajectory ids key the scorer's prefix cache and the output records: two inputs with
    the same file name would collide, so a repeated id is a usage error."""

    def __init__(self) -> None:
        self._seen: dict[str, str] = {}

    def check(self, path: str, doc: Document) -> None:
        for traj in doc.trajectories:
            other = self._seen.setdefault(traj.id, path)
            if other != path:
                raise UsageError(f"trajectory id {traj.id!r} occurs in both {other} and {path}; rename one file")


def compress_document(doc: Document, settings: Settings, scorer: Scorer | None, tokenizer: Tokenizer, *, on_step=None,
                      checkpoint=None) -> list[CompressionResult]:
    """Compress every trajectory of ``doc`` online (step t of all of them batched together);
    ``checkpoint`` (:class:`iclr_cli.checkpoint.Checkpoint`) keeps each finished step and
    gives back those an interrupted run finished."""
    done = checkpoint.for_source(doc.source) if checkpoint is not None else None
    return compress_trajectories(doc.trajectories, settings, scorer, tokenizer, on_step=on_step, done=done)


# A proxy token spans fewer characters than this (BPE vocabularies top out near 16 for prose
# and code); a text longer than ``limit`` times it holds more than ``limit`` tokens.
_MAX_CHARS_PER_TOKEN = 16


def step_tokens(trajectories: Sequence[Trajectory], tokenizer: Tokenizer, limit: int | None = None) -> dict[tuple[str, int], int]:
    """Proxy tokens of every step as the scorer reads it (rendered, P counted with the first
    step), keyed by ``(trajectory id, step index)``: a step's weight in the progress and in
    the estimate of the time left (the forward pass costs about the same per token).

    With ``limit`` (the scorer's input limit in tokens) a weight is at most ``limit``: the
    scorer never reads more of a step, and a text too long to fit is not tokenized at all,
    so a 50 MB tool output costs no memory here (docs/scoring.md, "Huge tool outputs").
    """
    from iclr_cli.context import render_prompt, render_step

    def count(text: str) -> int:
        if not text:
            return 0
        if limit is not None and len(text) > limit * _MAX_CHARS_PER_TOKEN:
            return limit
        n = len(tokenizer.token_spans(text))
        return min(n, limit) if limit is not None else n

    weights = {}
    for traj in trajectories:
        extra = sum(count(seg) for seg in render_prompt(traj.prompt))
        for step in traj.steps:
            weights[(traj.id, step.index)] = count(render_step(step)) + extra
            extra = 0
    return weights


def track_steps(progress, trajectories: Sequence[Trajectory], tokenizer: Tokenizer, *, limit: int | None = None, rows: int = 0) -> Callable[[StepReport], None]:
    """Plan ``trajectories``' steps and tokens (and the ``rows`` of a dataset shard they come
    from) on ``progress`` (a :class:`~iclr_cli.render.progress.Tracker`, or anything with its
    ``plan`` and ``step``) and return the ``on_step`` callback of
    :func:`compress_trajectories` that reports them. ``limit``: the scorer's input limit in
    tokens (:func:`step_tokens`)."""
    weights = step_tokens(trajectories, tokenizer, limit)
    progress.plan(len(weights), sum(weights.values()), rows)
    return lambda report: progress.step(weights.get((report.trajectory, report.step), 0))


def score_records(path: str, results: Sequence[CompressionResult], variant: Variant, profile: str | None = None,
                  precision: str | None = None) -> Iterator[dict]:
    """JSONL records of ``iclr score``: one per reasoning block, in trajectory/step/block order.

    Fields: ``trajectory``, ``step`` (0-based assistant turn), ``block`` (0-based), ``n_blocks``,
    ``n_tokens`` (proxy tokens), ``entropy_bits`` (mean bits per token), ``selected`` (the
    variant replaces it with ``[SKIP]``), ``text``, plus ``part``, ``source``, ``variant``,
    ``windowed``, ``history_kept``, ``context_tokens``, ``context`` (``fresh`` or ``sliding``)
    when the scorer has context modes, ``history_tail_tokens`` when the oldest kept history
    segment was cut (only its most recent tokens fit), and ``protected`` with ``iclr-ext`` (a
    block whose derived state was not yet externalized, never removed), and ``profile``
    (``fast`` or ``exact``, :mod:`iclr_cli.scoring.profile`) and ``precision`` (the decoder's:
    ``float32`` or ``bfloat16``, :mod:`iclr_cli.scoring.precision`) when given. The blocks
    of a near tie of the fast profile (:mod:`iclr_cli.scoring.recheck`) carry
    ``fast_margin_bits``, the fast selection's margin, and those it rescored as ``exact`` say
    ``profile: exact`` and ``precision: float32``. A step that was not scored yields one
    record with ``skipped`` (the reason) and ``n_blocks`` instead of block records.
    """
    named = {**({"profile": profile} if profile else {}), **({"precision": precision} if precision else {})}
    for result in results:
        for report in result.steps:
            if not report.blocks:
                continue
            by = {**named, **({"profile": "exact", "precision": "float32"} if report.rechecked else {}),
                  **({"fast_margin_bits": report.near_tie} if report.near_tie is not None else {})}
            if report.skipped:
                yield {
                    "trajectory": report.trajectory,
                    "step": report.step,
                    "n_blocks": len(report.blocks),
                    "skipped": report.skipped,
                    "source": path,
                    "variant": variant.name,
                    **named,
                }
                continue
            for block in report.blocks:
                yield {
                    "trajectory": report.trajectory,
                    "step": report.step,
                    "block": block.block,
                    "n_blocks": len(report.blocks),
                    "n_tokens": block.n_tokens,
                    "entropy_bits": block.entropy_bits,
                    "selected": block.selected,
                    "text": block.text,
                    "part": block.part,
                    "source": path,
                    "variant": variant.name,
                    "windowed": report.windowed,
                    "history_kept": report.history_kept,
                    "context_tokens": report.context_tokens,
                    **({"context": report.context} if report.context else {}),
                    **({"history_tail_tokens": report.history_tail} if report.history_tail else {}),
                    **({"protected": block.protected} if variant.kind == "iclr-ext" else {}),
                    **by,
                }


@dataclass
class NotAsAsked:
    """Reasoning parts whose write-back differs from what the variant asked (docs/method.md, "Token counts"):
    ``dropped`` went out whole with their item (written ``""``, asked something else: an
    encrypted item under ``--encrypted-reasoning drop``, docs/FORMAT.md), holding
    ``dropped_blocks`` blocks of which the variant had asked to remove ``dropped_asked``;
    ``kept`` were left unedited (written as generated, asked an edit)."""

    dropped: int = 0
    kept: int = 0
    dropped_blocks: int = 0
    dropped_asked: int = 0

    def add(self, asked: Step, generated: Step, written: Step, report: StepReport | None = None) -> None:
        """Count the parts of one step; ``report`` (the step's blocks as the variant selected
        them) adds the blocks of the parts dropped whole."""
        for i, (a, g, w) in enumerate(zip(asked.reasoning, generated.reasoning, written.reasoning)):
            if w.text != a.text:
                self.dropped += w.text == ""
                self.kept += w.text == g.text and w.text != ""
                if w.text == "" and report is not None:
                    mine = [b for b in report.blocks if b.part == i]
                    self.dropped_blocks += len(mine)
                    self.dropped_asked += sum(b.selected for b in mine)


def as_written(results: Sequence[CompressionResult], written: Sequence[Trajectory], tokenizer: Tokenizer, not_as_asked: NotAsAsked | None = None) -> list[CompressionResult]:
    """``results`` recounted on the reasoning that was actually written (the adapter's
    :class:`~iclr_cli.formats.writeback.WriteResult`; docs/method.md, "Token counts").

    A part written ``""`` counts as fully deleted with all its blocks removed; a part written
    as generated counts as not deleted with none removed; a part the provider rule left
    sealed (:mod:`iclr_cli.formats.sealing`) counts as generated and kept, so ``diff`` of the
    two files says the same. Tokens follow the one definition
    of :mod:`iclr_cli.token_accounting`. Steps written as asked keep their reports, and the
    returned ``compressed`` trajectories are the written ones.
    """
    from iclr_cli.formats.sealing import Sealed

    count = token_counter(tokenizer)
    out = []
    for result, traj in zip(results, written, strict=True):
        reports = []
        for report, generated, asked, wrote in zip(result.steps, result.original.steps, result.compressed.steps, traj.steps):
            if not_as_asked is not None:
                not_as_asked.add(asked, generated, wrote, report)
            report = _as_written_step(report, generated, asked, wrote, count)
            # reasoning the provider rule left sealed was generated and is written as it was
            sealed = [p.text for p in generated.parts if isinstance(p.ref, Sealed)]
            reports.append(replace(report, tokens=report.tokens + account(count, zip(sealed, sealed))) if sealed else report)
        out.append(CompressionResult(result.original, traj, tuple(reports)))
    return out


def _as_written_step(report: StepReport, generated: Step, asked: Step, written: Step, count: CountTokens) -> StepReport:
    off = {i for i, (a, w) in enumerate(zip(asked.reasoning, written.reasoning)) if a.text != w.text}
    if not off:
        return report
    blocks = tuple(
        replace(b, selected=written.reasoning[b.part].text == "") if b.part in off else b
        for b in report.blocks
    )
    pairs = [(g.text, w.text) for g, w in zip(generated.reasoning, written.reasoning)]
    return replace(report, blocks=blocks, tokens=account(count, pairs))


@dataclass
class Summary(TokenViews):
    """Totals over a run, for the stderr summary of ``prune`` and ``score``.

    ``tokens`` is the reasoning-token accounting (:mod:`iclr_cli.token_accounting`)."""

    trajectories: int = 0
    steps: int = 0
    steps_with_reasoning: int = 0
    blocks: int = 0
    removed: int = 0
    tokens: ReasoningTokens = ReasoningTokens()
    skipped: list[str] = field(default_factory=list)
    windowed: int = 0
    unrecognised: int = 0
    not_as_asked: NotAsAsked = field(default_factory=lambda: NotAsAsked())
    contexts: Counter = field(default_factory=Counter)  # scored steps per context mode
    scored: int = 0  # steps the proxy scored (``prune`` skips those whose selection cannot change)
    one_block: int = 0  # steps with reasoning in a single candidate block: N = 1, nothing removable
    compressed: int = 0  # steps whose reasoning already holds [SKIP] blocks (a pruned file)
    resent: Totals = field(default_factory=Totals)  # prune: the static estimate of the input re-sent (iclr savings)
    sealed: Counter = field(default_factory=Counter)  # reasoning parts left sealed by the provider rule, by (kind, what)
    sealed_blocks: int = 0  # blocks of those parts, split as the candidates are (never candidates themselves)
    splitter: str = "paragraph"  # the --block-split the sealed blocks are counted with
    near_ties: int = 0  # steps whose fast selection was within the recheck's margin (iclr_cli.scoring.recheck)
    rechecked: int = 0  # of those, steps rescored as exact
    recheck_changed: int = 0  # of those, steps whose selection the exact scores changed

    def add(self, results: Sequence[CompressionResult], doc: Document | None = None) -> None:
        """Add the reports of ``results`` (and the unrecognised count of ``doc``), and the
        reasoning parts the provider rule left sealed (:mod:`iclr_cli.formats.sealing`)."""
        from iclr_cli.formats.sealing import sealed_block_count, sealed_parts

        if doc is not None:
            self.unrecognised += len(doc.unrecognised)
        for result in results:
            self.trajectories += 1
            self.sealed.update((s.kind, s.what) for s in sealed_parts(result.original))
            self.sealed_blocks += sealed_block_count(result.original, self.splitter)
            self.compressed += sum(holds_skip(step) for step in result.original.steps)
            for report in result.steps:
                self._add_step(report)

    def _add_step(self, report: StepReport) -> None:
        self.steps += 1
        self.steps_with_reasoning += bool(report.tokens.generated)
        self.blocks += len(report.blocks)
        self.removed += report.n_removed
        self.tokens = self.tokens + report.tokens
        self.windowed += report.windowed
        self.near_ties += report.near_tie is not None
        self.rechecked += report.rechecked
        self.recheck_changed += report.recheck_changed
        self.scored += any(b.entropy_bits is not None for b in report.blocks)
        self.one_block += bool(report.tokens.generated) and len(report.blocks) == 1
        if report.context:
            self.contexts[report.context] += 1
        if report.skipped and report.blocks:
            self.skipped.append(f"{report.trajectory} step {report.step}: {report.skipped}")
