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

A rescored step gets the scores ``--exact`` gives it: the second scorer chooses each
trajectory's context mode as ``--exact`` does (``--context auto``, planned on the whole
render of the history as recorded, :meth:`Recheck.plan`). Only where that is the fresh window
is a near tie rescored (:meth:`Recheck.affordable`): there it costs one window of exact's,
whatever the session's length. In the sliding window it would cost reading the session up
to the step, about what all of ``--exact`` costs (measured: taubench 1.4x and OpenHands R1
1.25x of ``--exact``'s whole run with the recheck, against 0.6x and 0.3x without), so such a
near tie keeps the fast scores and is reported as one (the fast profile agreed with
``--exact`` on 98.9-100% of those files' blocks; the one file under 95%, the Claude Code
slice, is scored in the fresh window). A shortcut through the fresh window where ``--exact``
slides is no recheck: on SWE-agent pydicom it selected otherwise than ``--exact`` on 2 of 9
blocks and took 5.6 times as long (BENCHMARKS.md, "Rechecking near ties").

The scorer is built on first use, so a run with no near tie loads nothing more; where the
fast profile runs in float32 it shares the fast scorer's weights.
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
        left: near ties not rescored (their trajectory slides under ``--exact``).
    """

    below: float
    build: Callable[[], Scorer]
    rechecked: int = 0
    changed: int = 0
    left: int = 0
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

    def affordable(self, stream: str) -> bool:
        """True when a near tie of ``stream`` is rescored: the exact scorer scores it in the
        fresh window (one window of work), or has no context modes (the fake scorer)."""
        mode = getattr(self.scorer, "mode", None)
        return mode is None or mode(stream) == "fresh"

    def note(self, changed: bool) -> None:
        """Count one rescored step (``changed``: its exact selection differs)."""
        self.rechecked += 1
        self.changed += changed
