"""The files ``iclr savings`` reads: folders walked, replay run folders understood, dates found.

- A folder is walked recursively in name order; every file in it is a candidate, and the
  ones no adapter reads are skipped later with their reason (:class:`Skipped`).
- A replay run folder (``runs/TASK/VARIANT/seedN``: ``generated.json`` beside
  ``requests.jsonl``) is one session: ``generated.json`` (the reasoning as generated) with the
  usage of ``requests.jsonl`` as its requests. ``trajectory.json`` there is the compressed copy
  of the same conversation, and ``requests.jsonl`` / ``block_scores.jsonl`` are the run's logs:
  they are skipped, so nothing is counted twice.
- A Claude Code sub-agent transcript (``<session>/subagents/agent-*.jsonl``) belongs to the
  session file beside its folder (:func:`session_of`) and is counted with it; a session file
  named on the command line brings its sub-agents along.
- A session database's ``-wal``, ``-shm`` and ``-journal`` files are read with it by SQLite
  (:mod:`iclr_cli.formats.database`) and skipped as files of their own.
- A session's dates (first and last activity, UTC) are the earliest and latest timestamps the
  file holds (``timestamp``, ``timestamp_start``, ``created_at``, LiteLLM's ``startTime`` /
  ``endTime``: ISO 8601 text or Unix seconds), else the file's modification time (the table
  marks such dates, and ``--since`` / ``--until`` filter on them too). A session of a session
  database is dated by its own row instead (:func:`session_activity`): every session writes
  the one file, so neither its bytes nor its modification time date any one of them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timezone
from pathlib import Path

from iclr_cli.errors import InputError, UsageError
from iclr_cli.formats.database import SESSION_TIMES, SIDE_FILES

REPLAY_GENERATED = "generated.json"
REPLAY_REQUESTS = "requests.jsonl"
_REPLAY_COPIES = {
    "trajectory.json": "replay run: the compressed copy of generated.json",
    REPLAY_REQUESTS: "replay run: the request log of generated.json",
    "block_scores.jsonl": "replay run: block scores, not a session",
}
_TIMESTAMP = re.compile(
    rb'"(?:timestamp|timestamp_start|created_at|createdAt|startTime|endTime)"\s*:\s*'
    rb'(?:"([0-9]{4}-[0-9]{2}-[0-9]{2}[^"]{0,40})"|([0-9]{9,11}(?:\.[0-9]+)?)\b)'
)


@dataclass(frozen=True)
class Candidate:
    """A file to read: ``explicit`` when named on the command line (its errors stop the run);
    ``requests_log`` is the replay request log read with it, if any; ``parent`` the session
    file a Claude Code sub-agent transcript belongs to (:func:`session_of`), if any."""

    path: str
    explicit: bool = False
    requests_log: str | None = None
    parent: str | None = None


SUBAGENTS = "subagents"


def session_of(path: str) -> str | None:
    """The session file of a Claude Code sub-agent transcript, or ``None``.

    Claude Code writes each sub-agent (Task tool, compaction, side questions) to its own file
    beside the session: ``<project>/<session>.jsonl`` and
    ``<project>/<session>/subagents/agent-<id>.jsonl`` (nested fan-outs further down); the
    sub-agent's requests are billed to that session. The outermost such session that exists
    is returned.
    """
    parts = os.path.normpath(os.path.abspath(path)).split(os.sep)
    for i, name in enumerate(parts[:-1]):
        if name == SUBAGENTS and i >= 1:
            session = os.sep.join(parts[:i]) + ".jsonl"
            if os.path.isfile(session):
                return session
    return None


def subagent_files(session: str) -> list[str]:
    """The sub-agent transcripts beside a session file (``<session>/subagents/**/*.jsonl``),
    in name order."""
    folder = os.path.join(os.path.splitext(session)[0], SUBAGENTS)
    if not session.endswith(".jsonl") or not os.path.isdir(folder):
        return []
    return [f for f in _walk(Path(folder)) if f.endswith(".jsonl")]


@dataclass(frozen=True)
class Skipped:
    """A file left out, and why (one line)."""

    path: str
    reason: str


def discover(paths: Sequence[str]) -> tuple[list[Candidate], list[Skipped]]:
    """The candidate files under ``paths`` (files as given, folders walked), and the replay
    run files left out (see the module docstring). Each file is listed once.

    Raises:
        InputError: for a path that does not exist.
    """
    found: list[Candidate] = []
    skipped: list[Skipped] = []
    seen: set[str] = set()
    for given in paths:
        p = Path(given)
        if not p.exists():
            raise InputError(given, "no such file or folder")
        files = [(str(p), True)] if not p.is_dir() else [(f, False) for f in _walk(p)]
        if not p.is_dir():  # a session named alone brings its sub-agents
            files += [(f, False) for f in subagent_files(str(p))]
        for path, explicit in files:
            real = os.path.realpath(path)
            if real in seen:
                continue
            seen.add(real)
            folder, name = os.path.split(path)
            replay = os.path.isfile(os.path.join(folder, REPLAY_GENERATED)) and os.path.isfile(os.path.join(folder, REPLAY_REQUESTS))
            if replay and name in _REPLAY_COPIES and not explicit:
                skipped.append(Skipped(path, _REPLAY_COPIES[name]))
                continue
            side = next((suffix for suffix in SIDE_FILES if name.endswith(suffix)), None)
            if side and not explicit and os.path.isfile(path[: -len(side)]):
                skipped.append(Skipped(path, f"SQLite {side[1:]} file of {name[: -len(side)]}, read with it"))
                continue
            log = os.path.join(folder, REPLAY_REQUESTS) if replay and name == REPLAY_GENERATED else None
            found.append(Candidate(path, explicit, log, session_of(path)))
    return found, skipped


def _walk(folder: Path) -> Iterator[str]:
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            yield os.path.join(root, name)


@dataclass(frozen=True)
class Activity:
    """First and last activity of a file or session (UTC), and where they came from:
    ``content`` (the file's timestamps), ``session`` (the session's own row in a session
    database: :func:`session_activity`) or ``mtime`` (the file's modification time)."""

    first: datetime
    last: datetime
    source: str

    @property
    def recorded(self) -> bool:
        """Whether the dates are the session's own (not the file's modification time)."""
        return self.source != "mtime"

    def within(self, since: date | None, until: date | None) -> bool:
        """Whether the last activity's day is in ``since..until`` (inclusive; ``None``: open)."""
        day = self.last.date()
        return not ((since and day < since) or (until and day > until))


def session_activity(meta: Mapping[str, object]) -> Activity | None:
    """The dates a session database records for one session (``meta``'s
    :data:`~iclr_cli.formats.database.SESSION_TIMES`, ISO 8601 UTC), or ``None`` when it
    records neither."""
    found = []
    for key in SESSION_TIMES:
        value = meta.get(key)
        when = _parse(value.encode("ascii", "replace"), None) if isinstance(value, str) else None
        if when is not None:
            found.append(when)
    return Activity(min(found), max(found), "session") if found else None


def activity(data: bytes, path: str) -> Activity:
    """The dates of ``data`` (read from ``path``; see the module docstring)."""
    stamps = []
    for m in _TIMESTAMP.finditer(data):
        when = _parse(m.group(1), m.group(2))
        if when is not None:
            stamps.append(when)
    if stamps:
        return Activity(min(stamps), max(stamps), "content")
    try:
        mtime = datetime.fromtimestamp(os.stat(path).st_mtime, tz=timezone.utc)
    except OSError:
        mtime = datetime.now(tz=timezone.utc)
    return Activity(mtime, mtime, "mtime")


def _parse(iso: bytes | None, epoch: bytes | None) -> datetime | None:
    try:
        if iso is not None:
            text = iso.decode("ascii", "replace").replace("Z", "+00:00")
            when = datetime.fromisoformat(text)
            return when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when.astimezone(timezone.utc)
        return datetime.fromtimestamp(float(epoch), tz=timezone.utc)  # type: ignore[arg-type]
    except (ValueError, OverflowError, OSError):
        return None


def parse_day(text: str, option: str) -> date:
    """A ``--since`` / ``--until`` day: ``YYYYMMDD`` (as ccusage takes it) or ``YYYY-MM-DD``.

    Raises:
        UsageError: naming the option, for anything else.
    """
    for fmt in ("%Y%m%d", "%Y-%m-%d"):
        try:
            return datetime.strptime(text, fmt).date()
        except ValueError:
            continue
    raise UsageError(f"{option} {text!r}: give a day as YYYYMMDD or YYYY-MM-DD")
