"""What iclr keeps in its user cache folder, how big it is, and removing it (``iclr cache``).

The folder is ``$ICLR_CACHE_DIR``, else ``platformdirs.user_cache_dir("iclr")``
(:func:`iclr_cli.scoring.loading.cache_root`; ``~/.cache/iclr`` on Linux). What is written there,
by kind (:data:`KINDS`):

- ``models``: ``models/<name>-<key>/``, a GGUF proxy dequantised to float32 safetensors once
  (:func:`iclr_cli.scoring.loading.ensure_folder`; SmolLM2: 517 MB), ``models/.<name>-*`` while
  a conversion runs, and ``gguf-digests.json`` (the GGUF content hashes it is keyed by).
- ``prompts``: scorer states after a system prompt and tools, ``<key>.pt`` with its
  ``<text key>.<key>.alias`` files and ``recent-*.json`` (:mod:`iclr_cli.scoring.prefix`; up to
  2 GiB, least recently used first out). ``$ICLR_PROMPT_CACHE_DIR`` moves them.
- ``checkpoints``: ``<run>.sqlite3`` (+ ``-wal``/``-shm``), the scored steps of an interrupted
  ``score``/``prune`` (:mod:`iclr_cli.checkpoint`; removed when the run finishes, or after 14 days
  by the next run). ``$ICLR_CHECKPOINT_DIR`` moves them.
- ``savings``: ``savings.sqlite3``, sessions already estimated by ``iclr savings`` / ``report``,
  keyed by content (:mod:`iclr_cli.savings.cache`).
- ``judge``: ``judge.sqlite3``, answers of ``analyze --label judge`` (:mod:`iclr_cli.analysis.judge`).
- ``agent-clis``: Claude Code and Codex installed with npm by ``scripts/agent_clis.sh`` for the
  end-to-end tests of ``iclr serve`` (``tests/test_serve_agents.py``); iclr itself never reads it.
  They always install into ``~/.cache/iclr/agent-clis``, so it is found when that is the cache
  folder (the default on Linux); a ``$ICLR_AGENT_CLIS`` folder is the user's and never touched.
- ``other``: anything else in the folder: listed so the total is the folder's, never removed.

``iclr serve --state-dir DIR`` keeps its state in ``DIR``, never here.

Safety when removing: an SQLite file (checkpoints, savings, judge) that a running command has
open is skipped. Those files are in WAL mode, and every open connection holds a shared lock on
byte 128 of the ``-shm`` file as long as it is open (the "DMS" lock: sqlite.org/walformat.html;
``UNIX_SHM_DMS`` in SQLite's ``os_unix.c``), which a test lock finds (:func:`in_use`). Deleting
the file instead frees nothing while the command runs (it goes on writing to the unlinked file)
and loses what it keeps: an interrupted ``score`` would say its steps were kept for a resume
that then finds none. Where ``fcntl`` is missing (Windows) an open file cannot be deleted, and
the error is reported as the skip. Files whose name says they are being written (``.tmp-*``,
``models/.*``) are skipped until an hour old, as :mod:`iclr_cli.scoring.prefix` does.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import sqlite3
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from iclr_cli.errors import UsageError

STALE_TMP_S = 3600
"""A half-written file (``.tmp-*``, a model conversion folder) younger than this is in use."""

PROMPT_DIR_ENV = "ICLR_PROMPT_CACHE_DIR"  # as iclr_cli.scoring.prompt_keys.prompt_dir (which imports torch)
CHECKPOINT_DIR_ENV = "ICLR_CHECKPOINT_DIR"  # as iclr_cli.checkpoint.Checkpoint.open
DIGESTS = "gguf-digests.json"  # iclr_cli.scoring.loading._DIGESTS
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


@dataclasses.dataclass(frozen=True)
class Kind:
    """One kind of thing in the cache folder.

    ``name``: what ``iclr cache rm`` takes; ``what``: a short description; ``removable``: whether
    ``rm`` may take it at all (``other`` is not); ``in_all``: whether ``rm all`` takes it (the proxy
    model is removed only when named).
    """

    name: str
    what: str
    removable: bool = True
    in_all: bool = True


KINDS: tuple[Kind, ...] = (
    Kind("models", "dequantised proxy models (rebuilt in ~15 s)", in_all=False),
    Kind("prompts", "scorer states after a system prompt (P)"),
    Kind("checkpoints", "scored steps of interrupted score/prune runs"),
    Kind("savings", "iclr savings estimates, by file content"),
    Kind("judge", "analyze --label judge answers"),
    Kind("agent-clis", "npm agent CLIs for iclr's own tests (test-only)"),
    Kind("other", "not written by iclr", removable=False, in_all=False),
)
KIND_NAMES = tuple(k.name for k in KINDS)
REMOVABLE = tuple(k.name for k in KINDS if k.removable)


@dataclasses.dataclass(frozen=True)
class Entry:
    """One thing removed as a whole: a file with its companions, or a folder.

    ``size`` in bytes (every file below a folder, companions included); ``used``: the newest
    modification time in seconds since the epoch (a prompt state and a model folder are touched
    when read, so for them it is the last use); ``counted``: whether it is one of the kind's
    entries (a bookkeeping file such as ``recent-*.json`` is not, and is removed only with the
    whole kind); ``writing``: a name that says it is being written (see the module docstring).
    """

    kind: str
    path: Path
    size: int
    used: float | None
    companions: tuple[Path, ...] = ()
    counted: bool = True
    writing: bool = False


@dataclasses.dataclass(frozen=True)
class Usage:
    """One kind's share of the folder: ``path`` (its folder or file), ``entries`` (model
    folders, prompt states, checkpoints; rows of the savings and judge databases, ``None`` when
    they cannot be read), ``size`` in bytes, ``used`` (newest of its entries) and ``items``."""

    kind: Kind
    path: Path
    entries: int | None
    size: int
    used: float | None
    items: tuple[Entry, ...]


def cache_root() -> Path:
    """The cache folder (:func:`iclr_cli.scoring.loading.cache_root`)."""
    from iclr_cli.scoring.loading import cache_root as root

    return root()


def kind_path(name: str, root: Path | None = None) -> Path:
    """Where kind ``name`` lives: a folder, or the database file of ``savings`` / ``judge``."""
    root = cache_root() if root is None else root
    if name == "prompts" and os.environ.get(PROMPT_DIR_ENV):
        return Path(os.environ[PROMPT_DIR_ENV])
    if name == "checkpoints" and os.environ.get(CHECKPOINT_DIR_ENV):
        return Path(os.environ[CHECKPOINT_DIR_ENV])
    if name == "other":
        return root
    from iclr_cli.savings.cache import DB_NAME

    return root / {"savings": DB_NAME, "judge": "judge.sqlite3"}.get(name, name)


def _walk(path: Path) -> tuple[int, float | None]:
    """Bytes of every file at or below ``path`` and their newest modification time (links
    are not followed, a file with several hard links counts once, as ``du`` counts it: npm
    links binaries; a file that vanishes meanwhile is not counted)."""
    try:
        st = path.lstat()
    except OSError:
        return 0, None
    if not path.is_dir() or path.is_symlink():
        return st.st_size, st.st_mtime
    size, newest = 0, st.st_mtime
    seen: set[tuple[int, int]] = set()
    stack = [str(path)]
    while stack:
        try:
            it = os.scandir(stack.pop())
        except OSError:
            continue
        with it:
            for e in it:
                try:
                    s = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                newest = max(newest, s.st_mtime)
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
                elif s.st_nlink < 2 or (s.st_dev, s.st_ino) not in seen:
                    seen.add((s.st_dev, s.st_ino))
                    size += s.st_size
    return size, newest


def _entry(kind: str, path: Path, companions: Sequence[Path] = (), *, counted: bool = True, writing: bool = False) -> Entry:
    size, used = _walk(path)
    for c in companions:
        s, u = _walk(c)
        size += s
        used = u if used is None else max(used, u or used)
    return Entry(kind, path, size, used, tuple(companions), counted, writing)


def _children(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir())
    except OSError:
        return []


def _sqlite_entry(kind: str, path: Path) -> list[Entry]:
    companions = [Path(f"{path}{s}") for s in SQLITE_COMPANIONS if Path(f"{path}{s}").exists()]
    return [_entry(kind, path, companions)] if path.exists() or companions else []


def _rows(path: Path, table: str) -> int | None:
    """Rows of ``table`` in the database at ``path``, read-only (``None``: not readable).

    Without a ``-wal`` file nobody is writing it and it is opened ``immutable``: a read-only
    WAL connection would otherwise leave a ``-wal`` and a 32 kB ``-shm`` behind (listing the
    cache must not grow it). With one, ``mode=ro`` reads what a running command committed."""
    if not path.is_file():
        return 0
    mode = "ro" if Path(f"{path}-wal").exists() else "ro&immutable=1"
    try:
        db = sqlite3.connect(f"file:{path}?mode={mode}", uri=True, timeout=1)
        try:
            return db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        finally:
            db.close()
    except sqlite3.Error:
        return None


def _items(kind: str, path: Path, root: Path) -> list[Entry]:
    if kind == "models":
        items = [_entry(kind, p, counted=not p.name.startswith("."), writing=p.name.startswith("."))
                 for p in _children(path)]
        digests = root / DIGESTS
        return items + ([_entry(kind, digests, counted=False)] if digests.exists() else [])
    if kind == "prompts":
        files = _children(path)
        aliases: dict[str, list[Path]] = {}
        for p in files:
            parts = p.name.split(".")
            if len(parts) == 3 and parts[2] == "alias":
                aliases.setdefault(parts[1], []).append(p)
        items = []
        for p in files:
            if p.suffix == ".pt" and not p.name.startswith("."):
                items.append(_entry(kind, p, aliases.pop(p.stem, [])))
            elif p.name.startswith(".tmp-"):
                items.append(_entry(kind, p, counted=False, writing=True))
            elif not p.name.endswith(".alias"):
                items.append(_entry(kind, p, counted=False))
        # aliases of a state that is gone: leftovers, removed with the whole kind
        items += [_entry(kind, p, counted=False) for ps in aliases.values() for p in ps]
        return items
    if kind == "checkpoints":
        items = []
        for p in _children(path):
            base = next((p.name[: -len(s)] for s in SQLITE_COMPANIONS if p.name.endswith(".sqlite3" + s)), None)
            if p.name.endswith(".sqlite3"):
                items += _sqlite_entry(kind, p)
            elif base is None or not (path / base).exists():  # a stray file, or a companion whose database is gone
                items.append(_entry(kind, p, counted=False))
        return items
    if kind in ("savings", "judge"):
        return _sqlite_entry(kind, path)
    return [_entry(kind, path)] if path.exists() else []


def scan(root: Path | None = None) -> list[Usage]:
    """Every kind's share of the cache folder ``root`` (default :func:`cache_root`), in
    :data:`KINDS` order; ``other`` holds the folder's entries that no kind claims."""
    root = cache_root() if root is None else root
    out: list[Usage] = []
    claimed = {root / DIGESTS}
    for kind in KINDS[:-1]:
        path = kind_path(kind.name, root)
        items = _items(kind.name, path, root)
        claimed.add(path)
        claimed.update(Path(f"{path}{s}") for s in SQLITE_COMPANIONS)
        if kind.name in ("savings", "judge"):
            entries = _rows(path, "sessions" if kind.name == "savings" else "answers")
        else:
            entries = sum(1 for e in items if e.counted)
        out.append(_usage(kind, path, entries, items))
    others = [_entry("other", p) for p in _children(root) if p not in claimed]
    out.append(_usage(KINDS[-1], root, len(others), others))
    return out


def _usage(kind: Kind, path: Path, entries: int | None, items: Sequence[Entry]) -> Usage:
    used = [e.used for e in items if e.used is not None]
    return Usage(kind, path, entries, sum(e.size for e in items), max(used) if used else None, tuple(items))


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|min|h|d|w)?\s*$")
_UNIT_S = {"s": 1, None: 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str) -> float:
    """Seconds in ``text``: a number with ``s``, ``m``, ``h``, ``d`` or ``w`` (``7d``, ``12h``).

    Raises:
        UsageError: for anything else (the message shows the accepted forms).
    """
    m = _DURATION.match(text)
    if not m:
        raise UsageError(f"--older-than {text!r}: not a duration; give a number and a unit: 30m, 12h, 7d or 2w")
    return float(m.group(1)) * _UNIT_S[m.group(2)]


def select(usages: Iterable[Usage], kinds: Sequence[str], older_than: float | None = None, now: float | None = None) -> list[Entry]:
    """The entries ``iclr cache rm KINDS [--older-than]`` removes.

    ``kinds``: names from :data:`REMOVABLE`, or ``all`` (every kind whose :attr:`Kind.in_all`).
    ``older_than``: seconds; only entries last used before ``now - older_than`` go, and
    bookkeeping files (not :attr:`Entry.counted`) stay. Without it, the whole kind goes.

    Raises:
        UsageError: for a kind that does not exist or cannot be removed.
    """
    wanted: set[str] = set()
    for k in kinds:
        if k == "all":
            wanted.update(kind.name for kind in KINDS if kind.in_all)
        elif k in REMOVABLE:
            wanted.add(k)
        elif k in KIND_NAMES:
            raise UsageError(f"iclr cache rm {k}: iclr did not write these files, so it does not remove them; look at them with 'iclr cache list'")
        else:
            raise UsageError(f"iclr cache rm {k}: no such kind; kinds are {', '.join(REMOVABLE)} and all (every kind but models)")
    now = time.time() if now is None else now
    chosen = []
    for u in usages:
        if u.kind.name not in wanted:
            continue
        for e in u.items:
            if older_than is None or (e.counted and e.used is not None and e.used < now - older_than):
                chosen.append(e)
    return chosen


def in_use(path: Path) -> bool:
    """Whether another process has the SQLite database at ``path`` open: it holds the shared
    "DMS" lock on byte 128 of ``path-shm`` as long as its connection is open (WAL mode; see
    the module docstring). Always ``False`` without ``fcntl`` (the delete itself fails there).

    A probe from a process that has the database open itself finds nothing (POSIX record locks
    do not conflict within a process) and, closing its descriptor, would drop that process's
    locks: only ``iclr cache`` calls this, and it opens no database but read-only counts it closes first.
    """
    try:
        import fcntl
    except ImportError:
        return False
    try:
        fd = os.open(f"{path}-shm", os.O_RDWR)
    except OSError:
        return False
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 128)
        except OSError:
            return True
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, 128)
        return False
    finally:
        os.close(fd)


def busy(entry: Entry, now: float | None = None) -> str | None:
    """Why ``entry`` must not be removed now (``None``: it may)."""
    now = time.time() if now is None else now
    if entry.writing and entry.used is not None and now - entry.used < STALE_TMP_S:
        return "being written (under an hour old)"
    if entry.path.name.endswith(".sqlite3") and in_use(entry.path):
        return "open in a running iclr command"
    return None


@dataclasses.dataclass
class Removal:
    """What :func:`remove` did: ``removed`` entries, bytes ``freed``, and ``skipped`` as
    (entry, reason) pairs."""

    removed: list[Entry] = dataclasses.field(default_factory=list)
    freed: int = 0
    skipped: list[tuple[Entry, str]] = dataclasses.field(default_factory=list)


def remove(entries: Iterable[Entry]) -> Removal:
    """Remove ``entries`` (each with its companions), skipping those :func:`busy` names and
    those the system refuses to delete (reported with the error)."""
    done = Removal()
    for e in entries:
        why = busy(e)
        if why is not None:
            done.skipped.append((e, why))
            continue
        try:
            for p in (e.path, *e.companions):
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                else:
                    p.unlink(missing_ok=True)
        except OSError as exc:
            done.skipped.append((e, f"{type(exc).__name__}: {exc.strerror or exc}"))
            continue
        done.removed.append(e)
        done.freed += e.size
    return done


def human_size(n: int) -> str:
    """Bytes in decimal units, as ``du --si`` and pip print them: ``183.4 MB``."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")
