"""Progress of a long run on stderr: done / total and the time left (docs/scoring.md, "What the commands write").

A run's work is a few :class:`Count` s (steps, tokens, rows, runs); one of them, the *pace*,
sets the estimate of the time left: elapsed x (total - done) / done, the average rate so far
(steady enough for runs of minutes, and it needs no tuning), taken when a unit last finished
and counted down from there, never up, while the next one runs (:func:`held_left`). Scoring costs about one forward
per token of a session, so ``score`` and ``prune`` pace on tokens (the rendered history, in
proxy tokens), not on steps, whose cost differs by orders of magnitude.

On a terminal a rich bar is redrawn twice a second. Off a terminal (CI, a log file) a line is
printed every ``every_s`` seconds by a timer thread, whether or not a step finished in
between (an event-driven line left gaps of minutes while one long step was scored), and once
more at the end if any was printed, so the last line holds the final counts.

:func:`progress_line` and :func:`seconds_left` are pure; :class:`Tracker` holds the counts
(thread-safe: Ray's progress arrives from a polling function, scoring events from the main
thread) and draws them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Count:
    """One kind of work: ``done`` of ``total`` ``unit`` s (``total`` ``None``: not known);
    ``growing``: the total covers only the input read so far."""

    unit: str
    done: int
    total: int | None = None
    growing: bool = False

    def shown(self) -> str:
        if self.total is None:
            return f"{self.done:,} {self.unit}"
        return f"{self.done:,}/{self.total:,}{'+' if self.growing else ''} {self.unit}"


def seconds_left(pace: Count, elapsed: float, scale: float = 1.0) -> float | None:
    """Estimated seconds until ``pace.done`` reaches its total at the average rate so far.

    ``scale`` stretches a total known for part of the run to all of it (a dataset run knows
    the tokens of the rows it has started, and how many rows there are). ``None`` when there
    is nothing to go on yet (no total, a growing total, nothing done).
    """
    if pace.total is None or pace.growing or pace.done <= 0 or elapsed <= 0:
        return None
    left = max(0.0, pace.total * scale - pace.done)
    return elapsed * left / pace.done


def held_left(base: float | None, since: float, units_left: int) -> float | None:
    """The time left ``since`` seconds after the last unit (step, run) finished, when the
    estimate then was ``base``: counted down as time passes, but never below the time of the
    units after the one now running (``base x (1 - 1/units_left)``, the running one taken as
    an average unit), and never up. The average rate alone (:func:`seconds_left` at the time
    now) grows while one long unit runs, since time passes and nothing is done; the running
    unit's own progress is not known here. ``None``: no estimate, also once the last unit has
    outlasted its share (rather than "about 0 s" while it still runs).
    """
    if base is None:
        return None
    floor = base * (1.0 - 1.0 / units_left) if units_left > 1 else 0.0
    left = max(base - max(since, 0.0), floor)
    return None if left <= 0.0 < base and units_left > 0 else left


class _Hold:
    """When the amount done last changed, for :func:`held_left` (the caller holds the lock)."""

    def __init__(self, start: float):
        self.start = start
        self.changed = start
        self.seen = 0

    def saw(self, done: int, now: float) -> None:
        if done != self.seen:
            self.seen = done
            self.changed = now

    def left(self, estimate_at: Callable[[float], float | None], units_left: int, now: float) -> float | None:
        """``estimate_at(elapsed)`` as it stood when the amount done last changed, held (see
        :func:`held_left`)."""
        return held_left(estimate_at(self.changed - self.start), now - self.changed, units_left)


def duration(seconds: float) -> str:
    """``42 s``, ``12 min 5 s``, ``2 h 3 min``."""
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


def progress_line(description: str, counts: Sequence[Count], elapsed: float, left: float | None) -> str:
    """``scoring: 47/120 steps, 12,345/40,000 tokens, 11 min 13 s, about 25 min left``."""
    parts = [c.shown() for c in counts]
    tail = f", about {duration(left)} left" if left is not None else ""
    return f"{description}: {', '.join(parts)}, {duration(elapsed)}{tail}"


@dataclass
class Work:
    """A run's counts as they stand (mutable; a :class:`Tracker` guards it with a lock).

    ``rows_total`` is the whole run's rows when known; ``rows_planned`` the rows whose steps
    and tokens are in the totals (a dataset run learns them one shard at a time).
    """

    steps: int = 0
    steps_total: int = 0
    tokens: int = 0
    tokens_total: int = 0
    rows: int = 0
    rows_planned: int = 0
    rows_total: int | None = None
    growing: bool = False

    def plus(self, other: Work) -> Work:
        """``self`` with ``other``'s steps, tokens and planned rows added (Ray's remote counts)."""
        return replace(self, steps=self.steps + other.steps, steps_total=self.steps_total + other.steps_total,
                       tokens=self.tokens + other.tokens, tokens_total=self.tokens_total + other.tokens_total,
                       rows_planned=self.rows_planned + other.rows_planned)

    def counts(self, *, rows: bool) -> list[Count]:
        """What the line shows: steps and tokens (and rows for a dataset run)."""
        out = [Count("steps", self.steps, self.steps_total, self.growing),
               Count("tokens", self.tokens, self.tokens_total, self.growing)]
        if rows:
            out.append(Count("rows", self.rows, self.rows_total))
        return out

    def scale(self) -> float | None:
        """The run's tokens over the planned tokens: 1 for files; for a dataset, every row over
        the rows started so far (the tokens per row so far stand for the rest); ``None``
        when the dataset's rows were not counted."""
        if not self.rows_planned:
            return 1.0
        if self.rows_total is None:
            return None
        return max(1.0, self.rows_total / self.rows_planned)

    def left(self, elapsed: float) -> float | None:
        """Seconds left, paced on tokens (:func:`seconds_left`)."""
        scale = self.scale()
        if scale is None:
            return None
        return seconds_left(Count("tokens", self.tokens, self.tokens_total or None, self.growing), elapsed, scale)

    def fraction(self) -> float | None:
        """Share of the run done, or ``None`` while unknown."""
        scale = self.scale()
        if scale is None or not self.tokens_total:
            return None
        return self.tokens / (self.tokens_total * scale)


class Tracker:
    """Counts of one run, drawn on stderr while the run goes (see the module docstring).

    Methods are called from the thread that runs the work; ``poll`` (when set) returns extra
    counts kept elsewhere (Ray actors) and is called only when a line is drawn.
    """

    def __init__(self, description: str, *, rows_total: int | None = None, dataset: bool = False,
                 clock: Callable[[], float] = time.monotonic):
        self.description = description
        self.dataset = dataset
        self._work = Work(rows_total=rows_total)
        self._lock = threading.Lock()
        self._clock = clock
        self._start = clock()
        self._hold = _Hold(self._start)
        self.poll: Callable[[], Work] | None = None

    def plan(self, steps: int, tokens: int, rows: int = 0) -> None:
        """More work is known: ``steps`` steps of ``tokens`` tokens (in ``rows`` rows)."""
        with self._lock:
            w = self._work
            w.steps_total += steps
            w.tokens_total += tokens
            w.rows_planned += rows

    def step(self, tokens: int) -> None:
        """One step done; ``tokens``: its share of the planned tokens."""
        with self._lock:
            self._work.steps += 1
            self._work.tokens += tokens
            self._hold.seen += tokens  # remote tokens (poll) are seen when a line is drawn
            self._hold.changed = self._clock()

    def rows(self, n: int) -> None:
        """``n`` rows finished (written)."""
        with self._lock:
            self._work.rows += n

    def growing(self, value: bool) -> None:
        """Whether more input is still to be read (totals are lower bounds)."""
        with self._lock:
            self._work.growing = value

    def snapshot(self) -> Work:
        """The counts now, remote ones included."""
        with self._lock:
            work = replace(self._work)
        if self.poll is not None:
            work = work.plus(self.poll())
        return work

    def line(self) -> str:
        """The progress line now; the time left is held while a step runs (:func:`held_left`)."""
        now = self._clock()
        work = self.snapshot()
        with self._lock:
            self._hold.saw(work.tokens, now)
            left = self._hold.left(work.left, work.steps_total - work.steps, now)
        return progress_line(self.description, work.counts(rows=self.dataset), now - self._start, left)

    def fraction(self) -> float | None:
        return self.snapshot().fraction()


class Ticker:
    """A count of whole units (``replay``'s runs) with a known total, drawn like a
    :class:`Tracker` (same line, same timer)."""

    def __init__(self, description: str, total: int | None, unit: str, *, clock: Callable[[], float] = time.monotonic):
        self.description = description
        self._count = Count(unit, 0, total)
        self._lock = threading.Lock()
        self._clock = clock
        self._start = clock()
        self._hold = _Hold(self._start)

    def advance(self, n: int = 1) -> None:
        with self._lock:
            self._count = replace(self._count, done=self._count.done + n)
            self._hold.saw(self._count.done, self._clock())

    def line(self) -> str:
        """The progress line now; the time left is held while a unit runs (:func:`held_left`)."""
        now = self._clock()
        with self._lock:
            count = self._count
            left = self._hold.left(lambda elapsed: seconds_left(count, elapsed), (count.total or 0) - count.done, now)
        return progress_line(self.description, [count], now - self._start, left)

    def fraction(self) -> float | None:
        with self._lock:
            count = self._count
        return count.done / count.total if count.total else None


class Timer:
    """Calls ``emit(source.line())`` every ``every_s`` seconds from a daemon thread until
    stopped; :meth:`stop` emits one last line when any was emitted (the final counts)."""

    def __init__(self, source, emit: Callable[[str], None], every_s: float):
        self._source, self._emit, self._every = source, emit, max(every_s, 0.01)
        self._stopped = threading.Event()
        self.emitted = 0
        self._thread = threading.Thread(target=self._run, name="iclr-progress", daemon=True)

    def start(self) -> Timer:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stopped.wait(self._every):
            self._emit(self._source.line())
            self.emitted += 1

    def stop(self, *, final: bool = True) -> None:
        self._stopped.set()
        self._thread.join()
        if final and self.emitted:
            self._emit(self._source.line())


class Bar:
    """The rich renderable of a terminal: a bar of the pace's fraction done, then the line."""

    def __init__(self, source):
        self._source = source

    def __rich__(self):
        from rich.progress_bar import ProgressBar
        from rich.table import Table

        grid = Table.grid(padding=(0, 1))
        grid.add_column()
        grid.add_column()
        fraction = self._source.fraction()
        bar = ProgressBar(total=None) if fraction is None else ProgressBar(total=1000, completed=round(1000 * min(fraction, 1.0)))
        bar.width = 30
        grid.add_row(bar, self._source.line())
        return grid
