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

import orjson

from iclr_cli.compress import Settings, compress_trajectories
from iclr_cli.errors import InputError
from iclr_cli.formats import registry
from iclr_cli.formats.reading import unfinished_line
from iclr_cli.inputs import Input
from iclr_cli.jsonl import unfinished_warning
from iclr_cli.pipeline import ScorerConfig, build_engines
from iclr_cli.savings.cache import SavingsCache, cache_key
from iclr_cli.savings.estimate import RequestEstimate, SessionEstimate, Totals, estimate_session
from iclr_cli.savings.measure import measure, seal_for_estimate
from iclr_cli.savings.plan import Plan, plan_file
from iclr_cli.savings.prices import Cost, PriceBook, session_provider
from iclr_cli.savings.sources import Activity, Candidate, Skipped, activity, discover
from iclr_cli.token_accounting import token_counter
from iclr_cli.trajectory import Request, Trajectory, Usage

BATCH_TRAJECTORIES = 64
BATCH_BYTES = 16 * 1024 * 1024

_FIELDS = ("step", "input", "reasoning", "saved", "cache_read", "cache_saved", "sealed", "recorded",
           "cache_write", "cache_write_1h", "output", "thinking", "model", "provider")


@dataclass(frozen=True)
class SessionResult:
    """One session's estimate, with what the table and the JSON show of it.

    ``reasoning``: reasoning tokens as generated (proxy tokens); ``sealed_reasoning``: of
    which sealed by the provider rule, by kind (``anthropic``, ``openai``);
    ``tokenizer``: the proxy whose tokens were counted; ``note``: why the recorded usage was
    not used, if it was not; ``activity``: the file's dates (never cached: an mtime may change
    while the content does not); ``provider``: the price table's provider of requests that
    name none (:func:`~iclr_cli.savings.prices.session_provider`); ``parent``: the session
    file a sub-agent transcript belongs to (:func:`~iclr_cli.savings.sources.session_of`).
    """

    file: str
    id: str
    format: str
    model: str | None
    estimate: SessionEstimate
    sealed: tuple[str, ...]
    reasoning: int
    tokenizer: str
    note: str | None = None
    activity: Activity | None = None
    provider: str | None = None
    parent: str | None = None
    sealed_reasoning: dict[str, int] = field(default_factory=dict)

    def cost(self, book: PriceBook) -> Cost:
        """This session's dollars at list price (:mod:`iclr_cli.savings.prices`)."""
        when = self.activity.last if self.activity is not None and self.activity.source == "content" else None
        return book.session(self.estimate.requests, self.model, self.provider, when)

    @property
    def thinking(self) -> int | None:
        """Thinking tokens the provider recorded over the session's requests (``None``: none recorded)."""
        found = [r.thinking for r in self.estimate.requests if r.thinking is not None]
        return round(sum(found)) if found else None

    @property
    def totals(self) -> Totals:
        return Totals.of(self.estimate.requests)

    @property
    def source(self) -> str:
        """Where the input counts came from: ``recorded`` (every request), ``proxy`` (none),
        or ``recorded N/M + proxy``; with ``, deleted: proxy`` when the session's ratio was
        not found or not plausible (basis ``unconverted``), so deletions stay proxy tokens."""
        n, known = len(self.estimate.requests), self.estimate.recorded
        if known == n and n:
            source = "recorded"
        else:
            source = "proxy" if not known else f"recorded {known}/{n} + proxy"
        return source + (", deleted: proxy" if self.estimate.basis == "unconverted" else "")

    def to_cache(self) -> dict:
        """A JSON-able dict of everything but the file name and activity."""
        return {
            "id": self.id, "format": self.format, "model": self.model, "sealed": list(self.sealed),
            "reasoning": self.reasoning, "tokenizer": self.tokenizer, "note": self.note,
            "ratio": self.estimate.ratio, "basis": self.estimate.basis, "rejected": self.estimate.rejected,
            "provider": self.provider, "sealed_reasoning": self.sealed_reasoning,
            "requests": [[getattr(r, f) for f in _FIELDS] for r in self.estimate.requests],
        }

    @classmethod
    def from_cache(cls, value: dict, file: str, when: Activity | None, parent: str | None = None) -> SessionResult:
        requests = tuple(RequestEstimate(**dict(zip(_FIELDS, row))) for row in value["requests"])
        return cls(file, value["id"], value["format"], value["model"], SessionEstimate(requests, value["ratio"], value["basis"], value["rejected"]),
                   tuple(value["sealed"]), value["reasoning"], value["tokenizer"], value["note"], when, value.get("provider"), parent,
                   dict(value.get("sealed_reasoning") or {}))


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
                       profile=c.profile, elide=s.elide)
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


@dataclass
class SavingsRun:
    """One ``iclr savings`` run; the fields fill up as files are done, so an interrupted run
    still says what it finished.

    A run is :meth:`prepare` then :meth:`score` (:meth:`run` does both). :meth:`prepare` reads
    every file, applies the provider rule (:func:`~iclr_cli.savings.measure.seal_for_estimate`),
    estimates the upper bound (``bound``: the sessions under ``delete-all``, tokenizer only) and
    counts the steps the scorer will be handed (``plan``, :mod:`iclr_cli.savings.plan`); a
    variant that scores nothing is estimated there too. :meth:`score` then scores the files
    that need it, with the progress's total known from the start.

    ``files_read``: files estimated now; ``files_cached``: files whose sessions came from the
    cache; ``filtered``: files outside ``--since`` / ``--until``; ``unrecognised`` /
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
        """
        candidates, skipped = discover(paths)
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
        day = when.last.date()
        if (self.options.since and day < self.options.since) or (self.options.until and day > self.options.until):
            self.filtered += 1
            return None
        key = cache_key(data, log, self.options.key())
        bound_key = cache_key(data, log, self.options.bound().key()) if self.bounded else None
        stored = self.cache.get(key)
        bound = self.cache.get(bound_key) if bound_key is not None else None
        unfinished = unfinished_line(data)
        if stored is not None and (bound_key is None or bound is not None):
            self._cached(stored, cand, when)
            self._bound(bound, cand, when)
            self._unfinished(cand.path, unfinished)
            return None
        try:
            adapter = registry.get(self.options.fmt) if self.options.fmt else registry.detect(data, cand.path)
            trajectories = []
            for doc in Input(cand.path, adapter, data).documents(skip_bad_lines=self.options.skip_bad_lines):
                trajectories.extend(doc.trajectories)
                self.unrecognised[cand.path] += len(doc.unrecognised)
                said = unfinished_warning(cand.path, unfinished) if unfinished is not None else None
                self.warnings[cand.path] += sum(w != said for w in doc.warnings)
            note = None
            if cand.requests_log:
                trajectories, note = _with_replay_requests(trajectories, data, cand.requests_log)
        except InputError as exc:
            self._skip(cand, exc)
            return None
        self._unfinished(cand.path, unfinished)
        # the provider rule first: sealed reasoning is never a candidate, so never scored
        trajectories = [seal_for_estimate(t) for t in trajectories]
        item = _Loaded(cand, when, key, adapter.name, trajectories, len(data), note)
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
            for traj in item.trajectories:
                measured = measure(next(results), count)
                estimate = estimate_session(measured.prompt, measured.steps, traj.requests)
                model = traj.meta.get("model")
                found.append(SessionResult(item.candidate.path, traj.id, item.format, model if isinstance(model, str) else None,
                                           estimate, measured.sealed, measured.reasoning, tokenizer.name, item.note, item.when,
                                           session_provider(item.format, traj.meta.get("provider")), item.candidate.parent,
                                           dict(measured.sealed_reasoning)))
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
