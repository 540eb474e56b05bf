"""``iclr cache``: what iclr keeps in its user cache folder, how big, and removing it by kind or age
(as ``pip cache`` and ``hf cache`` do). The kinds and the safety rules: :mod:`iclr_cli.cache_dir`."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from iclr_cli.cli import options as opt

app = typer.Typer(
    help="What iclr keeps in its cache folder ($ICLR_CACHE_DIR, else ~/.cache/iclr on Linux), how big, and removing it. "
         "Kinds: models (the dequantised proxy), prompts (P states), checkpoints (interrupted runs), savings, judge, "
         "agent-clis (test-only), other (not iclr's: listed, never removed). 'iclr cache' alone lists them.",
    add_completion=False,
)

AsJson = Annotated[bool, typer.Option("--json", "-j", help="Print the listing as JSON data (sizes in bytes, times as Unix seconds and ISO 8601).")]
Width = Annotated[Optional[int], typer.Option("--width", min=40, help="Table width in columns (default: the terminal's; the table's full width when stdout is not a terminal).", show_default=False)]


@app.callback(invoke_without_command=True)
def _default(ctx: typer.Context, as_json: AsJson = False, width: Width = None) -> None:
    """With no subcommand: the listing ('iclr cache list')."""
    if ctx.invoked_subcommand is None:
        list_(as_json=as_json, width=width)


@app.command("list")
def list_(as_json: AsJson = False, width: Width = None) -> None:
    """A table of each kind: its path, entries, size and last use, and the total (on stdout)."""
    from iclr_cli.cache_dir import cache_root, scan
    from iclr_cli.render.output import Output

    root = cache_root()
    usages = scan(root)
    if as_json:
        import orjson

        Output(None).write_bytes(orjson.dumps(_json(root, usages), option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))
        return
    _table(root, usages, width)


@app.command("rm")
def rm(
    kinds: Annotated[list[str], typer.Argument(metavar="KIND", help="models, prompts, checkpoints, savings, judge, agent-clis, or all (every kind but models: the proxy goes only when named).", show_default=False)],
    older_than: Annotated[Optional[str], typer.Option("--older-than", metavar="AGE", help="Only entries last used more than AGE ago (30m, 12h, 7d, 2w).", show_default=False)] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask (needed when stdin is not a terminal).")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", "-n", help="Say what would be removed; remove nothing.")] = False,
    quiet: opt.Quiet = False,
) -> None:
    """Remove cached files by kind (and age). Files a running iclr command has open are skipped
    and said so; what was freed is printed on stderr."""
    from iclr_cli.cache_dir import cache_root, human_size, parse_age, remove, scan, select
    from iclr_cli.errors import UsageError
    from iclr_cli.render.output import Output

    out = Output(None, quiet=quiet)
    age = parse_age(older_than) if older_than is not None else None
    chosen = select(scan(cache_root()), kinds, age)
    when = f" last used over {older_than} ago" if older_than else ""
    if not chosen:
        out.info(f"nothing to remove ({' '.join(kinds)}{when}) in {cache_root()}")
        return
    plan = _phrase(chosen)
    if dry_run:
        for e in chosen:
            out.info(f"would remove {e.path} ({human_size(e.size)})")
        out.info(f"would free {human_size(sum(e.size for e in chosen))}: {_phrase(chosen, total=False)}")
        return
    if not yes:
        if not sys.stdin.isatty():
            raise UsageError(f"iclr cache rm would remove {plan}{when}; stdin is not a terminal to ask: "
                             f"add --yes (or --dry-run to list them)")
        if not typer.confirm(f"Remove {plan}{when}?", err=True):
            out.info("nothing removed")
            return
    done = remove(chosen)
    for e, why in done.skipped:
        out.warn(f"kept {e.path}: {why}")
    out.info(f"removed {_phrase(done.removed, total=False) or 'nothing'}; freed {human_size(done.freed)}")


@app.command("path")
def path(kind: Annotated[Optional[str], typer.Argument(metavar="[KIND]", help="A kind's folder or file instead of the cache folder.", show_default=False)] = None) -> None:
    """Print the cache folder, or where one kind lives (moved by $ICLR_PROMPT_CACHE_DIR, $ICLR_CHECKPOINT_DIR)."""
    from iclr_cli.cache_dir import KIND_NAMES, cache_root, kind_path
    from iclr_cli.errors import UsageError
    from iclr_cli.render.output import Output

    if kind is not None and kind not in KIND_NAMES:
        raise UsageError(f"iclr cache path {kind}: no such kind; kinds are {', '.join(KIND_NAMES)}")
    Output(None).write_bytes(f"{cache_root() if kind is None else kind_path(kind)}\n".encode())


def _phrase(entries, *, total: bool = True) -> str:
    """What ``entries`` are, by kind: "4 prompt states (89.7 MB), the savings database (45.1 kB)", and
    with ``total`` (of more than one kind) ": 89.7 MB in all"."""
    from iclr_cli.cache_dir import human_size

    by_kind: dict[str, tuple[int, int]] = {}
    for e in entries:
        n, size = by_kind.get(e.kind, (0, 0))
        by_kind[e.kind] = (n + (1 if e.counted else 0), size + e.size)
    parts = []
    for kind, (n, size) in by_kind.items():
        if kind in ("savings", "judge"):
            parts.append(f"the {kind} database ({human_size(size)})")
        elif kind == "agent-clis":
            parts.append(f"the agent-clis folder ({human_size(size)})")
        else:
            unit = {"models": "model", "prompts": "prompt state", "checkpoints": "checkpoint"}[kind]
            parts.append(f"{n} {unit}{'' if n == 1 else 's'} ({human_size(size)})")
    text = ", ".join(parts)
    return f"{text}: {human_size(sum(size for _, size in by_kind.values()))} in all" if total and len(parts) > 1 else text


def _ago(t: float | None, now: float) -> str:
    if t is None:
        return "-"
    s = max(0.0, now - t)
    for unit, length in (("d", 86400), ("h", 3600), ("min", 60)):
        if s >= length:
            return f"{int(s // length)} {unit} ago"
    return "just now"


def _iso(t: float | None) -> str | None:
    if t is None:
        return None
    from datetime import datetime, timezone

    return datetime.fromtimestamp(t, tz=timezone.utc).isoformat(timespec="seconds")


def _json(root, usages) -> dict:
    return {
        "root": str(root),
        "kinds": [{"kind": u.kind.name, "what": u.kind.what, "path": str(u.path), "exists": u.path.exists(), "entries": u.entries,
                   "size_bytes": u.size, "last_used": _iso(u.used), "last_used_unix": u.used,
                   "removable": u.kind.removable, "in_all": u.kind.in_all} for u in usages],
        "total_bytes": sum(u.size for u in usages),
    }


def _table(root, usages, width: int | None) -> None:
    from rich.table import Table

    from iclr_cli.cache_dir import human_size
    from iclr_cli.render.diff_view import make_console
    from iclr_cli.render.output import FULL_WIDTH

    now = time.time()
    home = str(Path.home())

    def short(p) -> str:
        s = str(p)
        return "~" + s[len(home):] if home not in ("", "/") and s.startswith(home + "/") else s

    table = Table(title=f"iclr cache: {short(root)}", title_justify="left")
    for col, justify in (("kind", "left"), ("path", "left"), ("entries", "right"), ("size", "right"), ("last used", "right"), ("what", "left")):
        table.add_column(col, justify=justify, overflow="fold")  # a path is cut nowhere
    for u in usages:
        if u.kind.name == "other" and not u.items:
            continue
        entries = "-" if u.entries is None else f"{u.entries:,}"
        table.add_row(u.kind.name, short(u.path) if u.path.exists() else f"{short(u.path)} (none)", entries,
                      human_size(u.size), _ago(u.used, now), u.kind.what)
    table.add_section()
    table.add_row("total", "", "", human_size(sum(u.size for u in usages)), "", "")
    make_console(width=width or (None if sys.stdout.isatty() else FULL_WIDTH)).print(table)
