"""Files -> trajectories -> batched online compression -> one estimate per session.

Every file is read first (:meth:`SavingsRun.prepare`): the provider rule seals the reasoning no
variant may edit (:func:`~iclr_cli.savings.measure.seal_for_estimate`), the upper bound
(``delete-all``) is estimated with the tokenizer alone, and the steps the scorer will be
handed are counted (:mod:`iclr_cli.savings.plan`), so the run says all that before the long
part and its progress has a total. Then the files left are scored (:meth:`SavingsRun.score`).

The trajectories of several files go through :func:`iclr_cli.compress.compress_trajectories`
together (step t of all of them in one scorer call), in batches of as many trajectories as the
scorer forwards at once (its ``batch_size``: 64 rows on a GPU; 1 on a CPU, where wider batches
measured slower and every trajectory in a batch keeps its key/value cache, so there a batch is
one file), at most :data:`BATCH_TRAJECTORIES` trajectories or :data:`BATCH_BYTES` of input, and
never two with the same id (ids key the scorer's per-trajectory caches). A file is never split. Each file's sessions are
stored in the cache (:mod:`iclr_cli.savings.cache`) as soon as its batch is done, so an
interrupted run keeps what it finished and the next run starts from there.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import NamedTuple

import orjson

from iclr_cli.compress import Settings, compress_trajectories
from iclr_cli.batch import require_jobs
from iclr_cli.errors import InputError
from iclr_cli.block_notes import block_counts
from iclr_cli.formats import database, registry
from iclr_cli.formats.reading import unfinished_line
from iclr_cli.inputs import Input
from iclr_cli.jsonl import unfinished_warning
from iclr_cli.pipeline import ScorerConfig, build_engines
from iclr_cli.savings.cache import SavingsCache, cache_key
from iclr_cli.savings.compressed import freeze
from iclr_cli.savings.estimate import Totals, estimate_session
from iclr_cli.savings.measure import measure, seal_for_estimate
from iclr_cli.savings.plan import Plan, plan_file
from iclr_cli.savings.prices import PriceBook, session_provider
from iclr_cli.savings.result import Blocks, SessionResult
from iclr_cli.savings.sources import Activity, Candidate, Skipped, activity, discover, session_activity
from iclr_cli.token_accounting import token_counter
from iclr_cli.trajectory import Request, Trajectory, Usage

BATCH_TRAJECTORIES = 64
BATCH_BYTES = 16 * 1024 * 1024

@dataclass(frozen=True)
class Options:
    """What ``iclr savings`` was asked: the variant's settings (``score_all=False``, as for
    ``prune``), the scorer, ``--format``, ``--skip-bad-lines``, the ``--since`` / ``--until``
    days (inclusive, on the last activity) and whether the cache is used."""

    settings: Settings
    config: ScorerConfig
    fmt: str | None = None
    skip_bad_lines: bool = False
    since: date | None = None
    until: date | None = None

    def key(self) -> dict[str, object]:
        """Everything that changes a file's estimate (the cache key's settings)."""
        s, c = self.settings, self.config
        key: dict[str, object] = {"variant": s.variant.name, "split": s.splitter, "model": c.model,
                                  "format": self.fmt, "skip_bad_lines": self.skip_bad_lines}
        if s.variant.kind == "random":
            key["seed"] = s.seed
        if s.variant.needs_scores:
            key.update(ratio=s.ratio, max_tokens=c.max_tokens, overflow=c.overflow, dtype=c.precision, context=c.context,
                       profile=c.profile, elide=s.elide, recheck_below=c.recheck_below)
        return key

    def bound(self) -> Options:
        """These options with the upper bound's variant, ``delete-all`` (every editable
        reasoning block removed; the tokenizer alone, no model)."""
        from iclr_cli.policies import parse_variant

        return dataclasses.replace(self, settings=dataclasses.replace(self.settings, variant=parse_variant("delete-all")))


@dataclass
class _Loaded:
    candidate: Candidate
    when: Activity
    key: str
    format: str
    trajectories: list[Trajectory]
    size: int
    note: str | None = None
    weights: dict[tuple[str, int], int] = field(default_factory=dict)  # steps to score (iclr_cli.savings.plan)
    database: bool = False
    frozen: list[int] = field(default_factory=list)  # steps already compressed, per trajectory (iclr_cli.savings.compressed)


class _Parsed(NamedTuple):
    format: str
    trajectories: list[Trajectory]
    note: str | None = None


@dataclass
class SavingsRun:
    """One ``iclr savings`` run; the fields fill up as files are done, so an interrupted run
    still says what it finished.

    A run is :meth:`prepare` then :meth:`score` (:meth:`run` does both). :meth:`prepare` reads
    every file, applies the provider rule (:func:`~iclr_cli.savings.measure.seal_for_estimate`),
    freezes the steps an earlier write-back compressed (:mod:`iclr_cli.savings.compressed`),
    estimates the upper bound (``bound``: the sessions under ``delete-all``, tokenizer only) and
    counts the steps the scorer will be handed (``plan``, :mod:`iclr_cli.savings.plan`); a
    variant that scores nothing is estimated there too. :meth:`score` then scores the files
    that need it, with the progress's total known from the start.

    ``files_read``: files estimated now; ``files_cached``: files whose sessions came from the
    cache; ``filtered``: files outside ``--since`` / ``--until`` (a session database whose
    every session is); ``filtered_sessions``: sessions of session databases outside them (each
    dated by its own row, :func:`~iclr_cli.savings.sources.session_activity`); ``unrecognised`` /
    ``warnings``: what the adapters reported, counted per file (``iclr score FILE`` shows them);
    ``unfinished``: ``(file, line)`` of each file whose last line is still being written (a live
    session: estimated up to the line before), found whether or not the file came from the
    cache, and left out of ``warnings`` since it is said on its own.
    ``progress``: a :class:`~iclr_cli.render.progress.Tracker` (or anything with its ``plan``,
    ``step`` and ``growing``) that the scored steps and their tokens are reported to, or
    ``None``. ``prepare_s``: seconds :meth:`prepare` took.
    """

    options: Options
    cache: SavingsCache
    progress: object | None = None
    sessions: list[SessionResult] = field(default_factory=list)
    bound: list[SessionResult] = field(default_factory=list)
    plan: Plan = field(default_factory=Plan)
    skipped: list[Skipped] = field(default_factory=list)
    files_read: int = 0
    files_cached: int = 0
    filtered: int = 0
    filtered_sessions: int = 0
    unrecognised: Counter[str] = field(default_factory=Counter)
    warnings: Counter[str] = field(default_factory=Counter)
    unfinished: list[tuple[str, int]] = field(default_factory=list)
    candidates: int = 0
    prepare_s: float = 0.0
    _engines: tuple | None = None
    _tokenizer: object | None = None
    _prices: PriceBook | None = None
    _pending: list[_Loaded] = field(default_factory=list)
    _order: dict[str, int] = field(default_factory=dict)

    @property
    def prices(self) -> PriceBook:
        """The price table (:class:`~iclr_cli.savings.prices.PriceBook`), loaded on first use."""
        if self._prices is None:
            self._prices = PriceBook.load()
        return self._prices

    @property
    def bounded(self) -> bool:
        """True when the variant scores, so ``delete-all`` is estimated besides as its upper bound."""
        return self.options.settings.variant.needs_scores

    def discover(self, paths: Sequence[str]) -> list[Candidate]:
        """The files under ``paths`` to read (:func:`~iclr_cli.savings.sources.discover`);
        the replay run files left out are noted as skipped.

        Raises:
            InputError: for a path that does not exist.
            UsageError: when there is no file to read (:func:`~iclr_cli.batch.require_jobs`: an empty folder is not a run that
                succeeded, as for ``score`` and ``prune``).
        """
        candidates, skipped = discover(paths)
        require_jobs(candidates, skipped, paths)
        self.skipped.extend(skipped)
        self.candidates = len(candidates)
        return candidates

    def run(self, candidates: Sequence[Candidate]) -> None:
        """Estimate every session of ``candidates`` (from :meth:`discover`): :meth:`prepare`,
        then :meth:`score`.

        Raises:
            InputError: for a file named on the command line that cannot be read as a
                trajectory format.
        """
        self.prepare(candidates)
        self.score()

    def prepare(self, candidates: Sequence[Candidate], advance: Callable[[int], None] | None = None) -> None:
        """Read every file of ``candidates``: sessions in the cache are taken from it, the
        upper bound is estimated, and the files left to score are counted into ``plan``.
        ``advance(1)`` is called after each file (a progress of files read).

        Raises:
            InputError: for a file named on the command line that cannot be read as a
                trajectory format.
        """
        began = time.monotonic()
        for cand in candidates:
            self._order.setdefault(cand.path, len(self._order))
            loaded = self._load(cand)
            if loaded is not None:
                self._pending.append(loaded)
            if advance is not None:
                advance(1)
        self.prepare_s = time.monotonic() - began

    def score(self) -> None:
        """Score the files :meth:`prepare` left, in batches (module docstring); the progress
        is told the whole plan first. Files with no step to score go first and load no model."""
        pending, self._pending = self._pending, []
        if self.progress is not None:
            self.progress.growing(False)  # type: ignore[attr-defined]
            self.progress.plan(self.plan.scored, self.plan.tokens)  # type: ignore[attr-defined]
        pending.sort(key=lambda item: bool(item.weights))  # stable: discovery order within each kind
        try:
            batch: list[_Loaded] = []
            for item in pending:
                limit = self._batch_limit() if item.weights else BATCH_TRAJECTORIES
                if batch and (bool(batch[0].weights) != bool(item.weights) or not _fits(batch, item, limit)):
                    self._finish(batch)
                    batch = []
                batch.append(item)
            if batch:
                self._finish(batch)
        finally:
            self.sessions.sort(key=lambda s: self._order.get(s.file, len(self._order)))

    def _skip(self, cand: Candidate, error: InputError) -> None:
        if cand.explicit:
            raise error
        where = f"line {error.line}: " if error.line is not None else ""
        what = f"field {error.field!r}: " if error.field is not None else ""
        self.skipped.append(Skipped(cand.path, where + what + error.summary))

    def _load(self, cand: Candidate) -> _Loaded | None:
        from iclr_cli.jsonio import read_input

        try:
            data = read_input(cand.path)
            log = read_input(cand.requests_log) if cand.requests_log else None
        except InputError as exc:
            self._skip(cand, exc)
            return None
        when = activity(data, cand.path)
        since, until = self.options.since, self.options.until
        stored_in = database.is_database(data)
        parsed, extra = None, {}
        if stored_in:  # every session writes the file: each is dated by its own row, filtered before the key
            parsed = self._parse(cand, data)
            if parsed is None:
                return None
            kept = [t for t in parsed.trajectories if (session_activity(t.meta) or when).within(since, until)]
            dropped = len(parsed.trajectories) - len(kept)
            self.filtered_sessions += dropped
            if dropped:
                extra = {"sessions": [t.id for t in kept]}  # the key of the sessions estimated, not of all
                parsed = parsed._replace(trajectories=kept)
            if dropped and not kept:
                self.filtered += 1
                return None
        elif not when.within(since, until):
            self.filtered += 1
            return None
        key = cache_key(data, log, {**self.options.key(), **extra})
        bound_key = cache_key(data, log, {**self.options.bound().key(), **extra}) if self.bounded else None
        stored = self.cache.get(key)
        bound = self.cache.get(bound_key) if bound_key is not None else None
        unfinished = unfinished_line(data)
        if stored is not None and (bound_key is None or bound is not None):
            self._cached(stored, cand, when)
            self._bound(bound, cand, when)
            self._unfinished(cand.path, unfinished)
            return None
        parsed = parsed or self._parse(cand, data)
        if parsed is None:
            return None
        if cand.requests_log:
            try:
                parsed = _Parsed(parsed.format, *_with_replay_requests(parsed.trajectories, data, cand.requests_log))
            except InputError as exc:
                self._skip(cand, exc)
                return None
        self._unfinished(cand.path, unfinished)
        # the provider rule first: sealed reasoning is never a candidate, so never scored; then
        # the steps an earlier write-back compressed, which write-back never compresses again
        frozen = [freeze(seal_for_estimate(t)) for t in parsed.trajectories]
        trajectories = [t for t, _ in frozen]
        item = _Loaded(cand, when, key, parsed.format, trajectories, len(data), parsed.note, database=stored_in,
                       frozen=[n for _, n in frozen])
        if bound_key is not None and bound is None:  # the upper bound: the tokenizer alone, seconds
            found = self._estimate([item], self.options.bound().settings, None)[0]
            self.cache.put(bound_key, [s.to_cache() for s in found])
            self.bound.extend(found)
        else:
            self._bound(bound, cand, when)
        if stored is not None:
            self._cached(stored, cand, when)
            return None
        if not self.options.settings.variant.needs_scores:  # estimated now, with the tokenizer alone
            self._store(item, self._estimate([item], self.options.settings, None)[0])
            return None
        plan, item.weights = plan_file(trajectories, self.options.settings, self.tokenizer(), self.options.config.max_tokens)
        self.plan.add(plan)
        return item

    def _unfinished(self, path: str, line: int | None) -> None:
        if line is not None:
            self.unfinished.append((path, line))

    def _parse(self, cand: Candidate, data: bytes) -> _Parsed | None:
        """The trajectories of ``data`` as its adapter reads them, or ``None`` when no format
        reads it (noted as skipped). A last line still being written is said on its own
        (:meth:`_unfinished`), not counted among the adapter's warnings.

        Raises:
            InputError: for a file named on the command line that no format reads.
        """
        unfinished = unfinished_line(data)
        said = unfinished_warning(cand.path, unfinished) if unfinished is not None else None
        try:
            adapter = registry.get(self.options.fmt) if self.options.fmt else registry.detect(data, cand.path)
            trajectories = []
            for doc in Input(cand.path, adapter, data).documents(skip_bad_lines=self.options.skip_bad_lines):
                trajectories.extend(doc.trajectories)
                self.unrecognised[cand.path] += len(doc.unrecognised)
                self.warnings[cand.path] += sum(w != said for w in doc.warnings)
        except InputError as exc:
            self._skip(cand, exc)
            return None
        return _Parsed(adapter.name, trajectories)

    def _cached(self, stored: list[dict], cand: Candidate, when: Activity) -> None:
        self.sessions.extend(SessionResult.from_cache(v, cand.path, when, cand.parent) for v in stored)
        self.files_cached += 1

    def _bound(self, bound: list[dict] | None, cand: Candidate, when: Activity) -> None:
        if bound is not None:
            self.bound.extend(SessionResult.from_cache(v, cand.path, when, cand.parent) for v in bound)

    def _batch_limit(self) -> int:
        """Most trajectories per batch: the scorer's rows per forward, else :data:`BATCH_TRAJECTORIES`."""
        rows = getattr(self.scorer(), "batch_size", None)
        return min(rows, BATCH_TRAJECTORIES) if isinstance(rows, int) and rows > 0 else BATCH_TRAJECTORIES

    def tokenizer(self):
        """The proxy's tokenizer, which counts every token of the estimate (loaded on first
        use, without the model)."""
        if self._tokenizer is None:
            from iclr_cli.scoring.factory import load_tokenizer

            self._tokenizer = load_tokenizer(self.options.config.model)
        return self._tokenizer

    def scorer(self):
        """The proxy scorer, built on first use: a run with nothing to score loads no model."""
        if self._engines is None:
            self._engines = build_engines(self.options.settings.variant, self.options.config)
        return self._engines[0]

    def _estimate(self, batch: Sequence[_Loaded], settings: Settings, scorer, on_step=None) -> list[list[SessionResult]]:
        """Each file's sessions of ``batch`` under ``settings``, compressed together online."""
        tokenizer = self.tokenizer()
        trajectories = [t for item in batch for t in item.trajectories]
        results = iter(compress_trajectories(trajectories, settings, scorer, tokenizer, on_step=on_step))
        count = token_counter(tokenizer)
        out = []
        for item in batch:
            found = []
            for traj, frozen in zip(item.trajectories, item.frozen, strict=True):
                measured = measure(next(results), count)
                estimate = estimate_session(measured.prompt, measured.steps, traj.requests)
                model, title = traj.meta.get("model"), traj.meta.get("title")
                with_reasoning, one_block, _ = block_counts([traj], settings.splitter)
                found.append(SessionResult(item.candidate.path, traj.id, item.format, model if isinstance(model, str) else None,
                                           estimate, measured.sealed, measured.reasoning, tokenizer.name, item.note,
                                           session_activity(traj.meta) or item.when,
                                           session_provider(item.format, traj.meta.get("provider")), item.candidate.parent,
                                           dict(measured.sealed_reasoning), title if isinstance(title, str) else None,
                                           item.database, Blocks(with_reasoning, one_block, frozen)))
            out.append(found)
        return out

    def _store(self, item: _Loaded, found: list[SessionResult]) -> None:
        self.cache.put(item.key, [s.to_cache() for s in found])
        self.sessions.extend(found)
        self.files_read += 1

    def _finish(self, batch: list[_Loaded]) -> None:
        weights = {key: w for item in batch for key, w in item.weights.items()}  # ids are unique in a batch (_fits)
        scorer = self.scorer() if weights else _Unscored()
        on_step = None
        if self.progress is not None and weights:
            progress = self.progress

            def on_step(report) -> None:
                key = (report.trajectory, report.step)
                if key in weights:  # only steps the scorer was handed count
                    progress.step(weights[key])  # type: ignore[attr-defined]
        for item, found in zip(batch, self._estimate(batch, self.options.settings, scorer, on_step)):
            self._store(item, found)
        reset = getattr(scorer, "reset", None)
        if reset is not None:
            reset()  # a finished batch's trajectories never come back: free their caches

    @property
    def totals(self) -> Totals:
        total = Totals()
        for s in self.sessions:
            total = total + s.totals
        return total

    @property
    def bound_totals(self) -> Totals:
        """The upper bound's totals (``delete-all``; empty when the variant does not score)."""
        total = Totals()
        for s in self.bound:
            total = total + s.totals
        return total


class _Unscored:
    """The scorer of a batch with no step to hand it (every step sealed or of one block): the
    online loop sends it nothing, so no model is loaded for it."""

    def score(self, requests):
        raise AssertionError(f"{len(requests)} scorer requests from a batch planned to score none")


def _fits(batch: Sequence[_Loaded], item: _Loaded, limit: int) -> bool:
    ids = {t.id for b in batch for t in b.trajectories}
    if any(t.id in ids for t in item.trajectories) or len({t.id for t in item.trajectories}) < len(item.trajectories):
        return False
    size = sum(b.size for b in batch) + item.size
    count = sum(len(b.trajectories) for b in batch) + len(item.trajectories)
    return size <= BATCH_BYTES and count <= limit


def _with_replay_requests(trajectories: list[Trajectory], data: bytes, log: str) -> tuple[list[Trajectory], str | None]:
    """A replay's ``generated.json`` with the requests of its ``requests.jsonl`` (docs/replay.md,
    "Output"), when the replay ran variant ``none``: any other variant's requests carried
    compressed history, so their usage is not the uncompressed figure and the proxy estimate is
    used instead (the returned note says so).

    Raises:
        InputError: naming the log, line and field of a bad token count.
    """
    from iclr_cli.render.runs import read_requests_log

    try:
        meta = orjson.loads(data).get("meta")
    except (orjson.JSONDecodeError, AttributeError):
        meta = None
    variant = meta.get("variant") if isinstance(meta, dict) else None
    if variant not in (None, "none"):
        return trajectories, f"replay of variant {variant}: its requests carried compressed history, so the proxy estimate is used"
    if len(trajectories) != 1:
        return trajectories, None
    requests = tuple(
        Request(u.step, Usage(u.input_tokens, u.output_tokens, u.cache_read_tokens, None, "requests.jsonl") if u.input_tokens is not None else None)
        for u in read_requests_log(log)
    )
    return [dataclasses.replace(trajectories[0], requests=requests)], None
