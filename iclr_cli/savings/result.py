"""One session's estimate as a run reports it and the cache stores it (:class:`SessionResult`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from iclr_cli.savings.estimate import RequestEstimate, SessionEstimate, Totals
from iclr_cli.savings.prices import Cost, PriceBook
from iclr_cli.savings.sources import Activity

_FIELDS = ("step", "input", "reasoning", "saved", "cache_read", "cache_saved", "sealed", "recorded",
           "cache_write", "cache_write_1h", "output", "thinking", "model", "provider")


@dataclass(frozen=True)
class Blocks:
    """How a session's steps split into blocks, before anything is scored
    (:func:`iclr_cli.block_notes.block_counts` with the run's ``--block-split``):
    ``with_reasoning``: steps with editable reasoning; ``one_block``: of which a single
    candidate block (BottomK removes none); ``compressed``: steps whose reasoning already holds
    ``[SKIP]`` markers (an earlier write-back: :mod:`iclr_cli.savings.compressed`), not among
    ``with_reasoning``."""

    with_reasoning: int = 0
    one_block: int = 0
    compressed: int = 0


@dataclass(frozen=True)
class SessionResult:
    """One session's estimate, with what the table and the JSON show of it.

    ``reasoning``: reasoning tokens as generated (proxy tokens); ``sealed_reasoning``: of
    which sealed by the provider rule, by kind (``anthropic``, ``openai``);
    ``tokenizer``: the proxy whose tokens were counted; ``note``: why the recorded usage was
    not used, if it was not; ``activity``: the session's dates (cached only when they are the
    session's own, ``source == "session"``: a file's mtime may change while its content does
    not); ``provider``: the price table's provider of requests that name none
    (:func:`~iclr_cli.savings.prices.session_provider`); ``parent``: the session file a
    sub-agent transcript belongs to (:func:`~iclr_cli.savings.sources.session_of`);
    ``title``: the title the file gives the session, if any; ``database``: read from a session
    database (one file of many sessions, so always named by session); ``blocks``: its steps'
    block counts (:class:`Blocks`).
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
    title: str | None = None
    database: bool = False
    blocks: Blocks = Blocks()

    def cost(self, book: PriceBook) -> Cost:
        """This session's dollars at list price (:mod:`iclr_cli.savings.prices`)."""
        when = self.activity.last if self.activity is not None and self.activity.recorded else None
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
        """A JSON-able dict of everything but the file name and a file's dates."""
        own = self.activity if self.activity is not None and self.activity.source == "session" else None
        return {
            "id": self.id, "format": self.format, "model": self.model, "sealed": list(self.sealed),
            "reasoning": self.reasoning, "tokenizer": self.tokenizer, "note": self.note,
            "ratio": self.estimate.ratio, "basis": self.estimate.basis, "rejected": self.estimate.rejected,
            "provider": self.provider, "sealed_reasoning": self.sealed_reasoning,
            "title": self.title, "database": self.database, "blocks": list(vars(self.blocks).values()),
            "activity": [own.first.isoformat(), own.last.isoformat()] if own else None,
            "requests": [[getattr(r, f) for f in _FIELDS] for r in self.estimate.requests],
        }

    @classmethod
    def from_cache(cls, value: dict, file: str, when: Activity | None, parent: str | None = None) -> SessionResult:
        """The session stored by :meth:`to_cache`, dated by its own dates if it has them, else ``when``."""
        requests = tuple(RequestEstimate(**dict(zip(_FIELDS, row))) for row in value["requests"])
        own = value.get("activity")
        if own:
            when = Activity(datetime.fromisoformat(own[0]), datetime.fromisoformat(own[1]), "session")
        return cls(file, value["id"], value["format"], value["model"], SessionEstimate(requests, value["ratio"], value["basis"], value["rejected"]),
                   tuple(value["sealed"]), value["reasoning"], value["tokenizer"], value["note"], when, value.get("provider"), parent,
                   dict(value.get("sealed_reasoning") or {}), value.get("title"), bool(value.get("database")),
                   Blocks(*value.get("blocks") or ()))
