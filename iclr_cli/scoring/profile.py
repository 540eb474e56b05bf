"""Scorer profiles: what the proxy sees, the fast default against ``--exact`` (docs/scoring.md, "Speed").

Every proxy token costs one forward pass, and on a laptop CPU that pass is all a user waits
for. Two things set how many tokens there are and what each costs:

- ``max_tokens``, the scorer's input limit (METHOD.md, "Input limit"): attention over an
  8,192-token window costs about twice the weights per token on the default proxy; a 4,096
  window halves that part.
- ``elide``, what the proxy reads of long tool outputs and parts of P: their first and last
  ``elide`` characters with a marker between (:func:`iclr_cli.context.elide_text`). Tool
  outputs are most of a coding session's tokens (86% of a Codex rollout measured here).

``exact`` is METHOD.md to the letter: the whole render, the proxy's full window (42,000
capped at its maximum positions). ``fast``, the default, is the fastest combination whose
BottomK selections agreed with ``exact`` on at least 95% of the blocks of the real sessions
in ``../shared/realdata`` (``benchmarks/bench_fidelity.py``; the figures are in
BENCHMARKS.md, "Fast default against --exact"). Both compute in float32; the window and the
render are the only differences, and each record says which profile scored it.

The window and elision alone fall short on one real file: on the 1.9 MB Claude Code slice
four of 21 blocks flip, in steps whose blocks lie within tenths of a bit of each other, and
no wider window or lighter elision fixes it without flipping another file (BENCHMARKS.md, "The
fast default on the Claude Code slice"). So the fast profile rechecks near ties: a step whose
fast selection is within ``recheck_below`` bits of changing is scored again as ``exact``
scores it (:mod:`iclr_cli.scoring.recheck`).
"""

from __future__ import annotations

from dataclasses import dataclass

from iclr_cli.errors import UsageError
from iclr_cli.scoring.base import DEFAULT_MAX_TOKENS

FAST_MAX_TOKENS = 4096
FAST_ELIDE = 512
# Every flip of the fast selection measured on realdata (23 multi-block steps, 327 blocks) had
# a fast margin under 0.55 bits (BENCHMARKS.md, "Rechecking near ties"); 0.75 leaves room.
FAST_RECHECK_BELOW = 0.75


@dataclass(frozen=True)
class Profile:
    """What the proxy sees: ``name`` (``fast`` or ``exact``), ``max_tokens`` (the requested
    input limit in tokens, before the cap at the proxy's maximum positions), ``elide``
    (characters kept at each end of a long tool output or part of P; ``None``: everything) and
    ``recheck_below`` (bits: a step whose selection margin is under it is scored again as
    ``exact`` scores it, :mod:`iclr_cli.scoring.recheck`; ``None``: never)."""

    name: str
    max_tokens: int
    elide: int | None
    recheck_below: float | None = None

    def describe(self, enforced: int | None = None) -> str:
        """One line for summaries, e.g. ``fast (4,096-token window, long tool outputs cut to
        512 chars at each end)``; ``enforced``: the window the scorer actually uses, when the
        proxy's maximum positions cap it (``exact (42,000-token window, capped at 8,192 by the
        proxy, everything whole)``)."""
        seen = f"long tool outputs cut to {self.elide:,} chars at each end" if self.elide else "everything whole"
        cap = f", capped at {enforced:,} by the proxy" if enforced is not None and enforced < self.max_tokens else ""
        recheck = (f", near ties (margin under {self.recheck_below:g} bits) rescored as exact where --exact uses its fresh window"
                   if self.recheck_below else "")
        return f"{self.name} ({self.max_tokens:,}-token window{cap}, {seen}{recheck})"


FAST = Profile("fast", FAST_MAX_TOKENS, FAST_ELIDE, FAST_RECHECK_BELOW)
EXACT = Profile("exact", DEFAULT_MAX_TOKENS, None)
PROFILES = {p.name: p for p in (FAST, EXACT)}


def choose(exact: bool = False, max_tokens: int | None = None, elide: int | None = None,
           recheck_below: float | None = None) -> Profile:
    """The profile for the CLI options ``--exact``, ``--max-tokens``, ``--elide`` and
    ``--recheck-below``.

    An explicit ``max_tokens`` replaces the profile's window; ``elide=0`` turns elision off
    in the fast profile (the name stays ``fast``: the window is still its own unless given);
    ``recheck_below=0`` turns the recheck off.

    Raises:
        UsageError: ``--elide`` or ``--recheck-below`` with ``--exact`` (exact renders
            everything and has nothing to recheck against), or a negative one.
    """
    if elide is not None and elide < 0:
        raise UsageError(f"--elide {elide}: give a number of characters, 0 or more")
    if recheck_below is not None and not recheck_below >= 0:
        raise UsageError(f"--recheck-below {recheck_below}: give a number of bits, 0 or more")
    if exact and elide:
        raise UsageError("--exact renders every tool output whole; drop --elide, or drop --exact")
    if exact and recheck_below:
        raise UsageError("--exact scores every step as exact already; drop --recheck-below, or drop --exact")
    base = EXACT if exact else FAST
    recheck = base.recheck_below if recheck_below is None else (recheck_below or None)
    return Profile(base.name, max_tokens or base.max_tokens, base.elide if elide is None else (elide or None), recheck)
