"""The main job end to end: files -> trajectories -> online compression -> records / files.

Format adapter -> Trajectory -> blocks -> scorer -> policy -> compressed Trajectory -> the
same adapter writes it back. Commands (``score``, ``prune``, ``convert``) are thin wrappers.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

from iclr_cli.compress import CompressionResult, Settings, StepReport, compress_trajectories, count_tokens
from iclr_cli.errors import UsageError
from iclr_cli.formats import registry
from iclr_cli.jsonio import read_input
from iclr_cli.formats.base import Document, FormatAdapter
from iclr_cli.policies import Variant
from iclr_cli.scoring.base import Scorer, Tokenizer
from iclr_cli.trajectory import Step, Trajectory


@dataclass(frozen=True)
class ScorerConfig:
    """How to build the proxy scorer (CLI options of ``score`` and ``prune``).

    ``model``: ``smollm2`` (embedded default), ``fake``, a local folder, a GGUF file or a
    cached Hugging Face id. ``max_tokens``: input limit before ``min`` with the proxy's
    maximum positions. ``dtype``: ``float32`` (default) or ``bfloat16`` (entropies change).
    """

    model: str = "smollm2"
    max_tokens: int = 42_000
    overflow: str = "window"
    dtype: str = "float32"
    prefix_cache: bool = True
    batch_size: int = 8
    device: str | None = None


@dataclass
class Input:
    """One input file: its bytes and the adapter that reads them."""

    path: str
    adapter: FormatAdapter
    data: bytes

    def documents(self, *, skip_bad_lines: bool, chunk_size: int = 256) -> Iterator[Document]:
        """The file's documents: several chunks for adapters that stream (one trajectory per
        line), else the whole file as one document.

        Raises:
            InputError: naming the file, line and field of the first bad record; after the
            last document, when the file held no step at all.
        """
        chunks = getattr(self.adapter, "load_chunks", None)
        if chunks is not None:
            docs = chunks(self.data, self.path, skip_bad_lines=skip_bad_lines, chunk_size=chunk_size)
        else:
            docs = iter([self.adapter.load(self.data, self.path, skip_bad_lines=skip_bad_lines)])
        steps = trajectories = 0
        for doc in docs:
            steps += sum(len(t.steps) for t in doc.trajectories)
            trajectories += len(doc.trajectories)
            yield doc
        registry.require_steps(self.adapter, self.path, steps, trajectories)


def open_inputs(paths: Sequence[str], fmt: str | None) -> list[Input]:
    """Read every input (``-`` is stdin, at most once) and pick its adapter.

    Raises:
        InputError: for a file that cannot be read or is not a known format.
        UsageError: for ``-`` given twice or an unknown ``--format``.
    """
    if sum(p == "-" for p in paths) > 1:
        raise UsageError("standard input ('-') can be read only once")
    inputs = []
    for path in paths:
        data = read_input(path)
        adapter = registry.get(fmt) if fmt else registry.detect(data, path)
        inputs.append(Input(path, adapter, data))
    return inputs


def build_engines(variant: Variant, config: ScorerConfig) -> tuple[Scorer | None, Tokenizer]:
    """The scorer (only for variants that rank by entropy) and the tokenizer that counts
    reasoning tokens (always the proxy's, so counts match the scorer's budget)."""
    from iclr_cli.scoring.factory import build_scorer, load_tokenizer

    if variant.needs_scores:
        scorer = build_scorer(
            config.model,
            max_tokens=config.max_tokens,
            overflow=config.overflow,
            dtype=config.dtype,
            device=config.device,
            prefix_cache=config.prefix_cache,
            batch_size=config.batch_size,
        )
        return scorer, scorer.tokenizer
    return None, load_tokenizer(config.model)


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


def compress_document(doc: Document, settings: Settings, scorer: Scorer | None, tokenizer: Tokenizer, *, on_step=None) -> list[CompressionResult]:
    """Compress every trajectory of ``doc`` online (step t of all of them batched together)."""
    return compress_trajectories(doc.trajectories, settings, scorer, tokenizer, on_step=on_step)


def score_records(path: str, results: Sequence[CompressionResult], variant: Variant) -> Iterator[dict]:
    """JSONL records of ``iclr score``: one per reasoning block, in trajectory/step/block order.

    Fields: ``trajectory``, ``step`` (0-based assistant turn), ``block`` (0-based), ``n_blocks``,
    ``n_tokens`` (proxy tokens), ``entropy_bits`` (mean bits per token), ``selected`` (the
    variant replaces it with ``[SKIP]``), ``text``, plus ``part``, ``source``, ``variant``,
    ``windowed``, ``history_kept``, ``context_tokens``. A step that was not scored yields one
    record with ``skipped`` (the reason) and ``n_blocks`` instead of block records.
    """
    for result in results:
        for report in result.steps:
            if not report.blocks:
                continue
            if report.skipped:
                yield {
                    "trajectory": report.trajectory,
                    "step": report.step,
                    "n_blocks": len(report.blocks),
                    "skipped": report.skipped,
                    "source": path,
                    "variant": variant.name,
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
                }


@dataclass
class NotAsAsked:
    """Reasoning parts whose write-back differs from what the variant asked (issue 10 #2):
    ``dropped`` went out whole with their item (written ``""``, asked something else),
    ``kept`` were left unedited (written as generated, asked an edit)."""

    dropped: int = 0
    kept: int = 0

    def add(self, asked: Step, generated: Step, written: Step) -> None:
        for a, g, w in zip(asked.reasoning, generated.reasoning, written.reasoning):
            if w.text != a.text:
                self.dropped += w.text == ""
                self.kept += w.text == g.text and w.text != ""


def as_written(results: Sequence[CompressionResult], written: Sequence[Trajectory], tokenizer: Tokenizer, not_as_asked: NotAsAsked | None = None) -> list[CompressionResult]:
    """``results`` recounted for the reasoning that was actually written (the adapter's
    :class:`~iclr_cli.formats.writeback.WriteResult`): a part written ``""`` counts as fully
    deleted with all its blocks removed, a part written as generated counts as not deleted
    with none removed (issue 10 #2). Steps written as asked keep their reports.

    This recount is the write-back side only; the token definition itself (METHOD.md:
    deleted reasoning tokens / generated reasoning tokens) is
    :class:`~iclr_cli.compress.StepReport`'s.
    """
    out = []
    for result, traj in zip(results, written, strict=True):
        reports = []
        for report, generated, asked, wrote in zip(result.steps, result.original.steps, result.compressed.steps, traj.steps):
            if not_as_asked is not None:
                not_as_asked.add(asked, generated, wrote)
            reports.append(_recount(report, generated, asked, wrote, tokenizer))
        out.append(CompressionResult(result.original, traj, tuple(reports)))
    return out


def _recount(report: StepReport, generated: Step, asked: Step, written: Step, tokenizer: Tokenizer) -> StepReport:
    triples = list(zip(generated.reasoning, asked.reasoning, written.reasoning))
    off = [i for i, (_g, a, w) in enumerate(triples) if a.text != w.text]
    if not off:
        return report

    def deleted(g: str, x: str) -> int:
        # tokens gone from a part generated as g and written as x: all, none, or the difference
        if x == g:
            return 0
        return len(tokenizer.token_spans(g)) - (len(tokenizer.token_spans(x)) if x else 0)

    if len(off) == len(triples):
        removed = sum(deleted(g.text, w.text) for g, _a, w in triples)
    else:
        removed = report.tokens_removed + sum(deleted(triples[i][0].text, triples[i][2].text) - deleted(triples[i][0].text, triples[i][1].text) for i in off)
    before = report.tokens_before
    blocks = tuple(
        replace(b, selected=triples[b.part][2].text == "") if b.part in off else b
        for b in report.blocks
    )
    return replace(report, blocks=blocks, tokens_after=count_tokens(tokenizer, written.reasoning), tokens_removed=min(max(removed, 0), before))


@dataclass
class Summary:
    """Totals over a run, for the stderr summary of ``prune`` and ``score``."""

    trajectories: int = 0
    steps: int = 0
    steps_with_reasoning: int = 0
    blocks: int = 0
    removed: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    tokens_removed: int = 0
    skipped: list[str] = field(default_factory=list)
    windowed: int = 0
    unrecognised: int = 0
    not_as_asked: NotAsAsked = field(default_factory=lambda: NotAsAsked())

    def add(self, results: Sequence[CompressionResult], doc: Document | None = None) -> None:
        """Add the reports of ``results`` (and the unrecognised count of ``doc``)."""
        if doc is not None:
            self.unrecognised += len(doc.unrecognised)
        for result in results:
            self.trajectories += 1
            for report in result.steps:
                self._add_step(report)

    def _add_step(self, report: StepReport) -> None:
        self.steps += 1
        self.steps_with_reasoning += bool(report.tokens_before)
        self.blocks += len(report.blocks)
        self.removed += report.n_removed
        self.tokens_before += report.tokens_before
        self.tokens_after += report.tokens_after
        self.tokens_removed += report.tokens_removed
        self.windowed += report.windowed
        if report.skipped and report.blocks:
            self.skipped.append(f"{report.trajectory} step {report.step}: {report.skipped}")
