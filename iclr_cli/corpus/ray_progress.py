"""Progress of ``--engine ray`` inside the shards (docs/datasets.md, "Progress").

The scorer actors run far from the driver's progress line: each reports the steps and tokens
of its shard (``plan``) and every step it finishes (``step``) to one :class:`ProgressCounter`
actor, without waiting (:class:`RemoteProgress`); the driver's
:class:`~iclr_cli.render.progress.Tracker` reads the counter when it draws (:class:`Poller`).
"""

from __future__ import annotations

import time

import ray

from iclr_cli.render.progress import Work


class ProgressCounter:
    """Steps and tokens the scorer actors planned and finished (a Ray actor reserving no CPU;
    calls from one actor run in the order they were made, so a step never precedes its plan)."""

    def __init__(self):
        self.counts = [0, 0, 0, 0, 0]  # steps, steps_total, tokens, tokens_total, rows_planned

    def plan(self, steps: int, tokens: int, rows: int = 0) -> None:
        self.counts[1] += steps
        self.counts[3] += tokens
        self.counts[4] += rows

    def step(self, tokens: int) -> None:
        self.counts[0] += 1
        self.counts[2] += tokens

    def sync(self) -> None:
        """Nothing: waiting on it means this caller's earlier messages are counted."""

    def snapshot(self) -> list[int]:
        return list(self.counts)


class RemoteProgress:
    """What a :class:`~iclr_cli.corpus.shard.ShardProcessor` in an actor reports to: forwards to the counter
    without waiting (a step costs a message, not a round trip)."""

    def __init__(self, counter):
        self._counter = counter

    def plan(self, steps: int, tokens: int, rows: int = 0) -> None:
        self._counter.plan.remote(steps, tokens, rows)

    def step(self, tokens: int) -> None:
        self._counter.step.remote(tokens)

    def sync(self) -> None:
        """Wait until the counter has this actor's messages (before its shard goes back, so
        the driver's last reading after the last shard holds every step)."""
        ray.get(self._counter.sync.remote())


class Poller:
    """A ``Tracker.poll`` reading the counter at most once per ``every_s`` (a terminal's bar
    redraws twice a second), keeping the last counts when the counter cannot answer."""

    def __init__(self, counter, every_s: float = 1.0):
        self._counter, self._every = counter, every_s
        self._at = float("-inf")
        self._work = Work()

    def __call__(self) -> Work:
        if self._counter is not None and time.monotonic() - self._at >= self._every:
            self._read()
        return self._work

    def _read(self) -> None:
        try:
            steps, steps_total, tokens, tokens_total, rows = ray.get(self._counter.snapshot.remote(), timeout=10)
            self._work = Work(steps, steps_total, tokens, tokens_total, rows_planned=rows)
        except Exception:  # progress is best effort; the run reports its own errors
            pass
        self._at = time.monotonic()

    def freeze(self) -> None:
        """Read the counter a last time and keep those counts (the counter is going away)."""
        if self._counter is not None:
            self._read()
            self._counter = None
