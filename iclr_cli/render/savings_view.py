"""``iclr savings`` (and ``iclr report FILE``) as a table on stdout or as JSON data.

The table is the command's result, so it goes to stdout (as ``iclr report``'s does), full
width off a terminal; progress and warnings stay on stderr.

The JSON follows the shape of ccusage's session report (``type``; ``data``, one record per
session with its first and last activity; ``summary``, the totals), with this project's
snake_case names (``input_tokens``, ``cache_read_tokens``, as ``iclr replay`` writes them). Token
counts are whole numbers (rounded once, from the per-request estimate); percentages are
numbers (negative: fewer tokens), ``null`` where the figure is unknown. Dollars
(``cost_usd``, ``cost_usd_with_writeback``, ``cost_saved_usd``) are list prices from
``genai-prices`` (:mod:`iclr_cli.savings.prices`; ``price_source`` names it), ``null`` where
no request was priced; ``prices_unavailable`` says why there are none at all. A session's
Claude Code sub-agent transcripts are counted in its record (``subagents`` lists each).
``unfinished`` lists each file whose last line is still being written (``file``, ``line``).
``reasoning`` gives the reasoning tokens and the sealed ones by kind (:func:`header`'s first
line); ``block_notes`` the lines of :func:`block_lines` (steps already compressed, the one-block
hint), and each session its block counts and ``title``; a scoring variant adds ``upper_bound`` (``delete-all``'s summary, with the seconds the
reading took) and ``scoring`` (:class:`~iclr_cli.savings.plan.Plan`, with ``files_cached``).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from iclr_cli.block_notes import one_block_note
from iclr_cli.render.progress import duration
from iclr_cli.savings import prices
from iclr_cli.savings.estimate import RATIO_BOUNDS, Totals, change_percent
from iclr_cli.savings.measure import sealed_rule
from iclr_cli.savings.prices import Cost, PriceBook
from iclr_cli.savings.result import SessionResult
from iclr_cli.savings.run import SavingsRun

COLUMNS = ["session", "requests", "input", "of which reasoning", "with write-back", "cache read", "with write-back", "sealed",
           "cost", "with write-back", "tokens from", "last activity"]
STATIC_NOTE = (
    "static estimate: the recorded actions are assumed unchanged. A live run with write-back takes other "
    "actions and a different number of requests (trajectory amplification, paper section 4.2): "
    "'iclr replay' measures that."
)


def title(run: SavingsRun, *, interrupted: bool = False) -> str:
    """The table's title, which says it is a static estimate."""
    variant = run.options.settings.variant.name
    done = f" (interrupted: {run.files_read + run.files_cached} of {run.candidates} files)" if interrupted else ""
    return f"iclr savings --variant {variant}: static estimate of online write-back{done}"


SEALED_WHAT = {"anthropic": "signed thinking", "openai": "encrypted reasoning"}
"""What the provider rule seals, by kind (:func:`iclr_cli.savings.measure.sealed_kind`)."""


def _share_sessions(run: SavingsRun) -> list[SessionResult]:
    """The sessions whose reasoning the header counts: the upper bound's when the variant
    scores (known before scoring; the same reasoning), else the run's."""
    return run.bound if run.bounded else run.sessions


def sealed_share(run: SavingsRun) -> tuple[int, dict[str, int]]:
    """``(reasoning tokens as generated, {kind: of which sealed})`` over the run's sessions, in
    proxy tokens."""
    sessions = _share_sessions(run)
    by: Counter = Counter()
    for s in sessions:
        by.update(s.sealed_reasoning)
    return sum(s.reasoning for s in sessions), dict(sorted(by.items()))


def header(run: SavingsRun) -> list[str]:
    """The first lines of a run, printed once every file is read and before anything is
    scored: how much of the reasoning is sealed and why, the upper bound (``delete-all``,
    tokenizer only) when the variant scores, and the steps the scorer will be handed."""
    total, by = sealed_share(run)
    sessions = len(_share_sessions(run))
    sealed = sum(by.values())
    line = f"reasoning: {total:,} proxy tokens in {sessions:,} session{'s' if sessions != 1 else ''}"
    if total:
        line += f", sealed by the provider rule: {sealed:,} ({100.0 * sealed / total:.1f}%)"
    if by:
        line += (" (" + ", ".join(f"{k} {SEALED_WHAT.get(k, 'reasoning')} {n:,}" for k, n in by.items()) + "): its provider "
                 "takes it back only as generated (signature / encrypted_content), so no variant may edit it; it is not "
                 "scored, only read as context, and the notes give each provider's rule")
    lines = [line]
    if run.bounded:
        t = run.bound_totals
        line = (f"upper bound (--variant delete-all: every editable reasoning block removed; tokenizer only, "
                f"{f'{run.prepare_s:.1f} s' if run.prepare_s < 1 else duration(run.prepare_s)} to read and count every file): input {_n(t.input)} -> {_after(t.input, t.saved)} tokens")
        book = run.prices
        cost = prices.total(s.cost(book) for s in run.bound)
        if not book.problem and cost.priced:
            line += f", saved {_dollars(cost.saved)} of {_dollars(cost.before)} at list price"
        lines.append(line)
        p = run.plan
        cached = f"; {run.files_cached:,} file{'s' if run.files_cached != 1 else ''} from the cache" if run.files_cached else ""
        skipped = (f"not scored: {p.sealed:,} whose reasoning is all sealed, {p.one_block:,} whose selection cannot depend "
                   "on the scores (one block: BottomK removes none)")
        if p.compressed:
            skipped += f", {p.compressed:,} already compressed ([SKIP] markers)"
        if p.scored:
            lines.append(f"scoring {p.scored:,} of {p.steps:,} steps in {p.files:,} file{'s' if p.files != 1 else ''} "
                         f"({p.tokens:,} proxy tokens to read); {skipped}{cached}")
        else:
            lines.append(f"nothing to score in {p.files:,} file{'s' if p.files != 1 else ''} ({p.steps:,} steps); {skipped}{cached}")
    return lines


def _n(value: float | None) -> str:
    return "-" if value is None else f"{round(value):,}"


def _after(before: float | None, saved: float | None) -> str:
    if before is None:
        return "-"
    pct = change_percent(before, saved)
    if pct is None:
        return f"{round(before - (saved or 0.0)):,}"
    # nothing saved reads "0%"; a saving too small for one decimal still shows its sign
    return f"{round(before - (saved or 0.0)):,} ({'0' if not saved else f'{pct:.1f}'}%)"


def _sealed(amount: float, kinds: Sequence[str]) -> str:
    return f"{round(amount):,} {'/'.join(kinds)}" if kinds else _n(amount)


def _dollars(value: float) -> str:
    return f"${value:,.2f}" if value >= 0.995 or value == 0 else f"${value:.4f}"


def _cost(c: Cost) -> tuple[str, str]:
    """The two cost cells: before and with write-back (with the change), ``-`` when nothing was priced."""
    if not c.priced:
        return "-", "-"
    pct = change_percent(c.before, c.saved)
    change = f" ({'0' if not c.saved else f'{pct:.1f}'}%)" if pct is not None else ""
    partial = "+" if c.unpriced else ""  # some requests are not in the figure
    return _dollars(c.before) + partial, _dollars(c.after) + partial + change


def _row(label: str, t: Totals, kinds: Sequence[str], cost: Cost, source: str, last: str) -> list[str]:
    return [label, f"{t.requests:,}", _n(t.input), _n(t.reasoning), _after(t.input, t.saved), _n(t.cache_read),
            _after(t.cache_read, t.cache_saved), _sealed(t.sealed, kinds), *_cost(cost), source, last]


TITLE_CHARS = 40
"""Most characters of a session's title in its label; a longer one is cut with an ellipsis."""


def _label(s: SessionResult, per_file: Counter) -> str:
    """The file's name for a file of one session; else (and always for a session database,
    whatever it holds) the session: the name and id, and the title the file gives it."""
    name = os.path.basename(s.file)
    if per_file[s.file] == 1 and not s.database:
        return name
    label = s.id if name in s.id else f"{name} {s.id}"
    if s.title:
        title = s.title if len(s.title) <= TITLE_CHARS else s.title[: TITLE_CHARS - 1].rstrip() + "\u2026"
        label += f' "{title}"'
    return label


def _per_file(run: SavingsRun) -> Counter:
    """Rows per file (a sub-agent counted with its session is no row)."""
    files = {x.file for x in run.sessions}
    return Counter(s.file for s in run.sessions if s.parent is None or s.parent not in files)


@dataclass(frozen=True)
class Group:
    """One row: a session and the sub-agent transcripts counted with it (Claude Code's
    ``<session>/subagents/agent-*.jsonl``; :func:`iclr_cli.savings.sources.session_of`)."""

    session: SessionResult
    subagents: tuple[SessionResult, ...] = ()

    @property
    def members(self) -> tuple[SessionResult, ...]:
        return (self.session, *self.subagents)

    @property
    def totals(self) -> Totals:
        total = Totals()
        for s in self.members:
            total = total + s.totals
        return total

    def cost(self, book: PriceBook) -> Cost:
        return prices.total(s.cost(book) for s in self.members)


def groups(run: SavingsRun) -> list[Group]:
    """The sessions in the order read, each with its sub-agents; a sub-agent whose session
    file is not in the run (not given, or outside --since / --until) is a row of its own."""
    files = {s.file for s in run.sessions}
    subagents: dict[str, list[SessionResult]] = {}
    for s in run.sessions:
        if s.parent is not None and s.parent in files:
            subagents.setdefault(s.parent, []).append(s)
    taken: set[str] = set()
    out = []
    for s in run.sessions:
        if s.parent is not None and s.parent in files:
            continue
        extra = () if s.file in taken else tuple(subagents.get(s.file, ()))
        taken.add(s.file)
        out.append(Group(s, extra))
    return out


def _group_label(g: Group, per_file: Counter) -> str:
    label = _label(g.session, per_file)
    if g.subagents:
        label += f" (+{len(g.subagents)} sub-agent{'s' if len(g.subagents) != 1 else ''})"
    elif g.session.parent is not None:
        label += f" (sub-agent of {os.path.basename(g.session.parent)})"
    return label


def _source(g: Group) -> str:
    sources = {s.source for s in g.members}
    return sources.pop() if len(sources) == 1 else "mixed"


FILE_TIME = "(file time)"
"""Marks a date that is the file's modification time: the file holds no timestamps."""


def _last(s: SessionResult) -> str:
    if s.activity is None:
        return "-"
    day = s.activity.last.date().isoformat()
    return f"{day} {FILE_TIME}" if s.activity.source == "mtime" else day


def table_rows(run: SavingsRun) -> list[list[str]]:
    """One row per session (its sub-agents counted with it) in the order read, then the total
    (when there are sessions)."""
    per_file = _per_file(run)
    book = run.prices
    rows = []
    for g in groups(run):
        kinds = sorted({k for s in g.members for k in s.sealed})
        rows.append(_row(_group_label(g, per_file), g.totals, kinds, g.cost(book), _source(g), _last(g.session)))
    if run.sessions:
        kinds = sorted({k for s in run.sessions for k in s.sealed})
        sources = {s.source for s in run.sessions}
        total_cost = prices.total(s.cost(book) for s in run.sessions)
        rows.append(_row("total", run.totals, kinds, total_cost, sources.pop() if len(sources) == 1 else "mixed", ""))
    return rows


def price_notes(run: SavingsRun) -> list[str]:
    """What the cost columns are and where the prices come from, or why there are none."""
    book = run.prices
    if not run.sessions:
        return []
    if book.problem:
        return [f"cost: {book.problem}; the token columns are unaffected"]
    total = prices.total(s.cost(book) for s in run.sessions)
    lines = [f"cost: list prices from {book.source}, per recorded request as its provider bills it (cache reads and "
             "writes at their own rates, 1-hour cache writes apart, output unchanged), at the price in force on the "
             "session's last activity; write-back takes the saving off the cache read where the deleted steps were "
             "cached, else off the cache writes, then the uncached input"]
    if total.priced:
        lines.append(f"saved: {_dollars(total.saved)} of {_dollars(total.before)} over {total.priced:,} priced requests"
                     + (f" (models: {', '.join(total.models)})" if total.models else ""))
    if total.unpriced:
        why = []
        if total.no_usage:
            why.append(f"{total.no_usage:,} without recorded usage (their input is the proxy tokenizer's count, no provider's)")
        if total.no_model:
            why.append(f"{total.no_model:,} whose file names no model")
        if total.unknown:
            unknown = total.unpriced - total.no_usage - total.no_model
            why.append(f"{unknown:,} of a model the price table does not know ({', '.join(total.unknown)})")
        lines.append(f"{total.unpriced:,} request{'s' if total.unpriced != 1 else ''} not priced: {'; '.join(why)}. "
                     "A '+' marks a cost that leaves some out")
    return lines


def notes(run: SavingsRun) -> list[str]:
    """The lines under the table: what the estimate is, the rules behind the sealed column,
    where the tokens came from, and what was skipped, filtered or taken from the cache."""
    lines = [STATIC_NOTE, *price_notes(run)]
    low, high = RATIO_BOUNDS
    kinds = sorted({k for s in run.sessions for k in s.sealed})
    for kind in kinds:
        lines.append(f"sealed ({kind}): its reasoning re-sent, all of it whatever the variant (no variant may edit it, so it "
                     f"is not scored), not taken off the input. {sealed_rule(kind)}")
    tokenizers = sorted({s.tokenizer for s in run.sessions})
    if tokenizers:
        lines.append(
            f"deleted reasoning is counted with the proxy tokenizer ({', '.join(tokenizers)}) and converted by each "
            "session's ratio of recorded to proxy tokens: the growth of the recorded input between requests over the "
            f"proxy count of the steps added, used when within {low:g}-{high:g} ('deleted: proxy': no such ratio, the "
            "deletions stay proxy tokens); 'proxy' rows have no recorded usage and count the prompt with the proxy "
            "tokenizer too"
        )
    per_file = _per_file(run)
    for s in run.sessions:
        where = _label(s, per_file) if s.database else s.file
        if s.note:
            lines.append(f"{where}: {s.note}")
        if s.estimate.rejected is not None:
            lines.append(f"{where}: the recorded input grew {s.estimate.rejected:.2f} tokens per proxy token of the steps "
                         f"added, not a tokenizer ratio ({low:g}-{high:g}): deletions counted in proxy tokens")
    rows = groups(run)
    counted = sum(len(g.subagents) for g in rows)
    if counted:
        lines.append(f"{counted} sub-agent transcript{'s' if counted != 1 else ''} (<session>/subagents/*.jsonl) counted with "
                     "their session: their requests are billed to it")
    alone = [g.session for g in rows if g.session.parent is not None]
    if alone:
        lines.append(f"{len(alone)} sub-agent transcript{'s' if len(alone) != 1 else ''} shown alone: the session file beside "
                     "it is not in this run")
    thinking = [s.thinking for s in run.sessions if s.thinking is not None]
    if thinking:
        lines.append(f"thinking tokens recorded by the provider: {sum(thinking):,} (part of the output; a provider that returns "
                     "summarised thinking bills more than the text the file holds)")
    if run.skipped:
        names = ", ".join(os.path.basename(k.path) for k in run.skipped[:3])
        more = f" and {len(run.skipped) - 3} more" if len(run.skipped) > 3 else ""
        lines.append(f"skipped {len(run.skipped)} file{'s' if len(run.skipped) != 1 else ''} not read as a session: {names}{more} (--json lists each with its reason)")
    lines += block_lines(run, per_file)
    undated = list(dict.fromkeys(s.file for s in run.sessions if s.activity is not None and s.activity.source == "mtime"))
    if undated:
        holds = "holds" if len(undated) == 1 else "hold"
        lines.append(f"{FILE_TIME}: {_some(undated)} {holds} no timestamps, so the last activity shown is the file's "
                     "modification time (--since / --until filter on that too)")
    if any(s.activity is not None and s.activity.source == "session" for s in run.sessions):
        lines.append("a session database's sessions are dated by their own rows (created and last updated), not by the "
                     "file: --since / --until filter each session on them")
    if run.filtered:
        lines.append(f"{run.filtered} file{'s' if run.filtered != 1 else ''} outside --since/--until")
    if run.filtered_sessions:
        n = run.filtered_sessions
        lines.append(f"{n} session{'s' if n != 1 else ''} of session databases outside --since/--until")
    if run.files_cached:
        lines.append(f"{run.files_cached} of {run.files_cached + run.files_read} files from the cache of earlier runs")
    reported = [f for f in dict.fromkeys([*run.unrecognised, *run.warnings]) if run.unrecognised[f] or run.warnings[f]]
    if reported:
        counted = [f"{f} ({_reports(run.unrecognised[f], run.warnings[f])})" for f in reported]
        shows = f"'iclr score {reported[0]}'" if len(reported) == 1 else "'iclr score FILE'"
        lines.append(f"the format readers reported on {_some(counted)}: {shows} shows what")
    return lines


def _some(names: list[str], limit: int = 3) -> str:
    """The first ``limit`` of ``names``, and how many more."""
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def _reports(unrecognised: int, warnings: int) -> str:
    parts = [f"{n} {what}{'s' if n != 1 else ''}" for n, what in ((warnings, "warning"), (unrecognised, "unrecognised text")) if n]
    return ", ".join(parts)


def block_lines(run: SavingsRun, per_file: Counter | None = None) -> list[str]:
    """What the blocks of the run's sessions say about the figures: the steps an earlier
    write-back already compressed, which the estimate leaves as they are
    (:mod:`iclr_cli.savings.compressed`), and, for a variant that ranks blocks, ``prune``'s
    hint when most steps hold a single block (:func:`iclr_cli.block_notes.one_block_note`)."""
    per_file = per_file if per_file is not None else _per_file(run)
    lines = []
    compressed = [s for s in run.sessions if s.blocks.compressed]
    if compressed:
        steps = sum(s.blocks.compressed for s in compressed)
        names = _some([_label(s, per_file) for s in compressed])
        lines.append(f"{steps:,} step{'s' if steps != 1 else ''} already compressed ([SKIP] markers of iclr's write-back, "
                     f"iclr serve or prune) in {names}: online write-back compresses a step once, so the estimate takes "
                     "nothing more off them (their saving was had when the session ran, and a recorded input holds it); "
                     "their reasoning is counted as re-sent")
    settings = run.options.settings
    if settings.variant.needs_scores:
        note = one_block_note(sum(s.blocks.one_block for s in run.sessions), sum(s.blocks.with_reasoning for s in run.sessions),
                              settings.splitter)
        if note:
            lines.append(note)
    return lines


def paint(console, run: SavingsRun, *, interrupted: bool = False) -> None:
    """Print the table and its notes on ``console`` (a rich console, e.g. stdout's)."""
    from rich.table import Table

    from iclr_cli.render.diff_view import emit

    def draw(c) -> None:
        table = Table(title=title(run, interrupted=interrupted), title_justify="left")
        for i, name in enumerate(COLUMNS):
            table.add_column(name, justify="left" if i == 0 else "right")
        for row in table_rows(run):
            table.add_row(*row)
        c.print(table)
        for line in notes(run):
            c.print(line, markup=False, soft_wrap=True)

    emit(console, draw, pager=False)


def _cost_record(c: Cost, book: PriceBook) -> dict:
    if book.problem:
        return {"cost_usd": None, "cost_usd_with_writeback": None, "cost_saved_usd": None, "priced_requests": 0,
                "unpriced_requests": c.unpriced, "price_models": [], "unknown_models": []}
    return {
        "cost_usd": round(c.before, 6) if c.priced else None,
        "cost_usd_with_writeback": round(c.after, 6) if c.priced else None,
        "cost_saved_usd": round(c.saved, 6) if c.priced else None,
        "priced_requests": c.priced,
        "unpriced_requests": c.unpriced,
        "price_models": list(c.models),
        "unknown_models": list(c.unknown),
    }


def _totals_record(t: Totals) -> dict:
    return {
        "requests": t.requests,
        "recorded_requests": t.recorded,
        "input_tokens": round(t.input),
        "reasoning_tokens_resent": round(t.reasoning),
        "input_tokens_with_writeback": round(t.input_after),
        "input_change_percent": change_percent(t.input, t.saved),
        "cache_read_tokens": None if t.cache_read is None else round(t.cache_read),
        "cache_read_tokens_with_writeback": None if t.cache_read_after is None else round(t.cache_read_after),
        "cache_read_change_percent": change_percent(t.cache_read, t.cache_saved),
        "sealed_tokens": round(t.sealed),
    }


def _session_record(s: SessionResult, book: PriceBook) -> dict:
    return {
        "session": s.id,
        "file": s.file,
        "format": s.format,
        "model": s.model,
        **_totals_record(s.totals),
        **_cost_record(s.cost(book), book),
        "thinking_tokens_recorded": s.thinking,
        "sealed": list(s.sealed),
        "token_source": s.source,
        "ratio": s.estimate.ratio,
        "ratio_basis": s.estimate.basis,
        "ratio_rejected": s.estimate.rejected,
        "proxy_tokenizer": s.tokenizer,
        "first_activity": s.activity.first.isoformat() if s.activity else None,
        "last_activity": s.activity.last.isoformat() if s.activity else None,
        "activity_from": s.activity.source if s.activity else None,
        "title": s.title,
        "steps_with_reasoning": s.blocks.with_reasoning,
        "one_block_steps": s.blocks.one_block,
        "compressed_steps": s.blocks.compressed,
        "note": s.note,
    }


def _group_record(g: Group, book: PriceBook) -> dict:
    """A session's record; with sub-agents, its totals and cost include theirs and
    ``subagents`` lists each one's own record."""
    record = _session_record(g.session, book)
    if g.subagents:
        record.update(_totals_record(g.totals), **_cost_record(g.cost(book), book))
        record["subagents"] = [_session_record(s, book) for s in g.subagents]
    else:
        record["subagents"] = []
    record["parent_session_file"] = g.session.parent
    return record


def to_json(run: SavingsRun, *, complete: bool = True) -> dict:
    """The whole run as JSON data (see the module docstring)."""
    settings = run.options.settings
    book = run.prices
    return {
        "type": "savings",
        "estimate": "static",
        "variant": settings.variant.name,
        "ratio": settings.ratio,
        **({"scorer": run.options.config.describe()} if settings.variant.needs_scores else {}),
        "complete": complete,
        "data": [_group_record(g, book) for g in groups(run)],
        "summary": {"sessions": len(groups(run)), "transcripts": len(run.sessions), **_totals_record(run.totals),
                    **_cost_record(prices.total(s.cost(book) for s in run.sessions), book)},
        "price_source": book.source,
        "prices_unavailable": book.problem,
        "files": {"candidates": run.candidates, "read": run.files_read, "cached": run.files_cached,
                  "filtered": run.filtered, "filtered_sessions": run.filtered_sessions, "skipped": len(run.skipped)},
        "skipped": [{"file": k.path, "reason": k.reason} for k in run.skipped],
        "unfinished": [{"file": path, "line": line} for path, line in run.unfinished],
        "sealed_rules": {k: sealed_rule(k) for k in sorted({k for s in run.sessions for k in s.sealed})},
        "reasoning": _reasoning_record(run),
        "block_notes": block_lines(run),
        **({"upper_bound": _bound_record(run, book), "scoring": vars(run.plan) | {"files_cached": run.files_cached}}
           if run.bounded else {}),
    }


def _reasoning_record(run: SavingsRun) -> dict:
    """The header's first line as data: reasoning tokens and the sealed ones by kind."""
    total, by = sealed_share(run)
    sealed = sum(by.values())
    return {"reasoning_tokens": total, "sealed_tokens": sealed, "sealed_by_kind": by,
            "sealed_percent": 100.0 * sealed / total if total else None}


def _bound_record(run: SavingsRun, book: PriceBook) -> dict:
    """The upper bound (``delete-all``) summed over the run's sessions."""
    return {"variant": "delete-all", **_totals_record(run.bound_totals),
            **_cost_record(prices.total(s.cost(book) for s in run.bound), book), "seconds": round(run.prepare_s, 3)}
