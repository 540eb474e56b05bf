"""Rechecking near ties: a step the fast profile nearly selected otherwise is scored as ``exact``.

The fast profile (:mod:`iclr_cli.scoring.profile`) shows the proxy a 4,096-token window with
long tool outputs elided. Block entropies then move by about 0.1 bits on average against
``--exact`` (METHOD.md's window and render), which changes no selection whose blocks lie
apart; but a step whose kept and removed blocks lie within tenths of a bit of each other can
flip, and on the 1.9 MB Claude Code slice of realdata four of 21 blocks did (BENCHMARKS.md,
"Rechecking near ties"). The margin of a selection (:func:`iclr_cli.policies.selection_margin`)
says how close a step is; a step under ``below`` bits is rendered again whole (P and the
history as they stand, nothing elided) and scored by a second scorer with exact's window, in
float32, and exact's scores decide its selection and are what the run reports.

The second scorer takes its context mode as ``--exact`` does (``--context auto``: planned per
trajectory on the whole render of the history as recorded, :meth:`plan`), so a rescored step
gets the scores ``--exact`` gives it. In the sliding mode that means reading the session up to
the step, once per trajectory, which costs what ``--exact`` costs up to there; the fresh
window is no shortcut: on SWE-agent pydicom it selected otherwise than ``--exact`` on 2 of 9
blocks and took 5.6 times as long (BENCHMARKS.md, "Rechecking near ties"). The scorer is built
on first use, so a run with no near tie loads nothing more; where the fast profile runs in
float32 it shares the fast scorer's weights.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from iclr_cli.scoring.base import Scorer, ScoreRequest


@dataclass
class Recheck:
    """The recheck of one run: its threshold, its scorer (built by ``build`` on first use) and
    what it did.

    Attributes:
        below: bits; a scored step whose fast selection margin is under it is rescored.
        build: returns the exact scorer (called at most once).
        rechecked: steps rescored so far.
        changed: of those, steps whose selection differs from the fast one.
    """

    below: float
    build: Callable[[], Scorer]
    rechecked: int = 0
    changed: int = 0
    _scorer: Scorer | None = field(default=None, repr=False)
    _planned: set[str] = field(default_factory=set, repr=False)

    def wants(self, margin: float) -> bool:
        """True when a selection ``margin`` bits from changing is to be rescored."""
        return margin < self.below

    @property
    def scorer(self) -> Scorer:
        """The exact scorer, built now if this is its first use."""
        if self._scorer is None:
            self._scorer = self.build()
        return self._scorer

    def plan(self, previews: Mapping[str, Callable[[], Sequence[ScoreRequest]]]) -> None:
        """Let the exact scorer choose the context mode of each stream not planned yet, as
        ``--exact`` would (``plan_contexts``), from ``previews``: stream -> its requests on the
        history as recorded, rendered whole (called only for streams planned now)."""
        todo = {stream: make for stream, make in previews.items() if stream not in self._planned}
        plan = getattr(self.scorer, "plan_contexts", None)
        if todo and plan is not None:
            plan({stream: make() for stream, make in todo.items()})
        self._planned.update(todo)

    def note(self, changed: bool) -> None:
        """Count one rescored step (``changed``: its exact selection differs)."""
        self.rechecked += 1
        self.changed += changed
