"""``iclr savings`` (and ``iclr report FILE``) as a table on stdout or as JSON data.

The table is the command's result, so it goes to stdout (as ``iclr report``'s does), full
width off a terminal; progress and warnings stay on stderr.

The JSON follows the shape of ccusage's session report (``type``; ``data``, one record per
session with its first and last activity; ``summary``, the totals), with this project's
snake_case names (``input_tokens``, ``cache_read_tokens``, as ``iclr replay`` writes them). Token
counts are whole numbers (rounded once, from the per-request estimate); percentages are
numbers (negative: fewer tokens), ``null`` where the figure is unknown.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence

from iclr_cli.savings.estimate import RATIO_BOUNDS, Totals, change_percent
from iclr_cli.savings.measure import sealed_rule
from iclr_cli.savings.run import SavingsRun, SessionResult

COLUMNS = ["session", "requests", "input", "of which reasoning", "with write-back", "cache read", "with write-back", "sealed", "tokens from", "last activity"]
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


def _row(label: str, t: Totals, kinds: Sequence[str], source: str, last: str) -> list[str]:
    return [label, f"{t.requests:,}", _n(t.input), _n(t.reasoning), _after(t.input, t.saved), _n(t.cache_read),
            _after(t.cache_read, t.cache_saved), _sealed(t.sealed, kinds), source, last]


def _label(s: SessionResult, per_file: Counter) -> str:
    name = os.path.basename(s.file)
    if per_file[s.file] == 1:
        return name
    return s.id if name in s.id else f"{name} {s.id}"


FILE_TIME = "(file time)"
"""Marks a date that is the file's modification time: the file holds no timestamps."""


def _last(s: SessionResult) -> str:
    if s.activity is None:
        return "-"
    day = s.activity.last.date().isoformat()
    return f"{day} {FILE_TIME}" if s.activity.source == "mtime" else day


def table_rows(run: SavingsRun) -> list[list[str]]:
    """One row per session in the order read, then the total (when there are sessions)."""
    per_file = Counter(s.file for s in run.sessions)
    rows = [_row(_label(s, per_file), s.totals, s.sealed, s.source, _last(s)) for s in run.sessions]
    if run.sessions:
        kinds = sorted({k for s in run.sessions for k in s.sealed})
        sources = {s.source for s in run.sessions}
        rows.append(_row("total", run.totals, kinds, sources.pop() if len(sources) == 1 else "mixed", ""))
    return rows


def notes(run: SavingsRun) -> list[str]:
    """The lines under the table: what the estimate is, the rules behind the sealed column,
    where the tokens came from, and what was skipped, filtered or taken from the cache."""
    lines = [STATIC_NOTE]
    low, high = RATIO_BOUNDS
    kinds = sorted({k for s in run.sessions for k in s.sealed})
    for kind in kinds:
        lines.append(f"sealed ({kind}), not taken off the input. {sealed_rule(kind)}")
    tokenizers = sorted({s.tokenizer for s in run.sessions})
    if tokenizers:
        lines.append(
            f"deleted reasoning is counted with the proxy tokenizer ({', '.join(tokenizers)}) and converted by each "
            "session's ratio of recorded to proxy tokens: the growth of the recorded input between requests over the "
            f"proxy count of the steps added, used when within {low:g}-{high:g} ('deleted: proxy': no such ratio, the "
            "deletions stay proxy tokens); 'proxy' rows have no recorded usage and count the prompt with the proxy "
            "tokenizer too"
        )
    for s in run.sessions:
        if s.note:
            lines.append(f"{s.file}: {s.note}")
        if s.estimate.rejected is not None:
            lines.append(f"{s.file}: the recorded input grew {s.estimate.rejected:.2f} tokens per proxy token of the steps "
                         f"added, not a tokenizer ratio ({low:g}-{high:g}): deletions counted in proxy tokens")
    if run.skipped:
        names = ", ".join(os.path.basename(k.path) for k in run.skipped[:3])
        more = f" and {len(run.skipped) - 3} more" if len(run.skipped) > 3 else ""
        lines.append(f"skipped {len(run.skipped)} file{'s' if len(run.skipped) != 1 else ''} not read as a session: {names}{more} (--json lists each with its reason)")
    if any(s.activity is not None and s.activity.source == "mtime" for s in run.sessions):
        lines.append(f"{FILE_TIME}: the file holds no timestamps, so its last activity is its modification time "
                     "(--since / --until filter on that too)")
    if run.filtered:
        lines.append(f"{run.filtered} file{'s' if run.filtered != 1 else ''} outside --since/--until")
    if run.files_cached:
        lines.append(f"{run.files_cached} of {run.files_cached + run.files_read} files from the cache of earlier runs")
    if run.unrecognised or run.warnings:
        lines.append(f"the format readers reported {run.unrecognised} unrecognised text(s) and {run.warnings} warning(s): 'iclr score FILE' shows them")
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


def _session_record(s: SessionResult) -> dict:
    return {
        "session": s.id,
        "file": s.file,
        "format": s.format,
        "model": s.model,
        **_totals_record(s.totals),
        "sealed": list(s.sealed),
        "token_source": s.source,
        "ratio": s.estimate.ratio,
        "ratio_basis": s.estimate.basis,
        "ratio_rejected": s.estimate.rejected,
        "proxy_tokenizer": s.tokenizer,
        "first_activity": s.activity.first.isoformat() if s.activity else None,
        "last_activity": s.activity.last.isoformat() if s.activity else None,
        "activity_from": s.activity.source if s.activity else None,
        "note": s.note,
    }


def to_json(run: SavingsRun, *, complete: bool = True) -> dict:
    """The whole run as JSON data (see the module docstring)."""
    settings = run.options.settings
    return {
        "type": "savings",
        "estimate": "static",
        "variant": settings.variant.name,
        "ratio": settings.ratio,
        "complete": complete,
        "data": [_session_record(s) for s in run.sessions],
        "summary": {"sessions": len(run.sessions), **_totals_record(run.totals)},
        "files": {"candidates": run.candidates, "read": run.files_read, "cached": run.files_cached,
                  "filtered": run.filtered, "skipped": len(run.skipped)},
        "skipped": [{"file": k.path, "reason": k.reason} for k in run.skipped],
        "sealed_rules": {k: sealed_rule(k) for k in sorted({k for s in run.sessions for k in s.sealed})},
    }
