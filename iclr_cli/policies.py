"""Variants and selection rules as pure functions (METHOD.md, "Select and replace", "Variants").

Nothing here touches a model, a file or the terminal: scores and token spans come in, the
indices to remove go out. The online loop in :mod:`iclr_cli.compress` applies them.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from iclr_cli.errors import UsageError

DEFAULT_RATIO = 0.8
VARIANT_NAMES = ("none", "iclr", "iclr-ext", "step-only", "delete-all", "random-R", "sliding-window-K")


@dataclass(frozen=True)
class Variant:
    """A parsed variant name.

    ``kind`` is one of ``none``, ``iclr``, ``iclr-ext``, ``step-only``, ``delete-all``,
    ``random``, ``sliding-window``; ``param`` is R (percent of reasoning tokens deleted) for ``random``
    and K (steps kept) for ``sliding-window``, else ``None``.
    """

    name: str
    kind: str
    param: int | None = None

    @property
    def needs_scores(self) -> bool:
        """True when the variant ranks blocks by proxy entropy."""
        return self.kind in ("iclr", "iclr-ext", "step-only")

    @property
    def conditions_on_history(self) -> bool:
        """True when the proxy scores a step against P and the compressed history (``iclr``,
        ``iclr-ext``), so the online loop must carry that history from step to step."""
        return self.kind in ("iclr", "iclr-ext")

    @property
    def edits_reasoning(self) -> bool:
        """True when the variant rewrites reasoning text of completed steps."""
        return self.kind in ("iclr", "iclr-ext", "step-only", "delete-all", "random")


_PARAM = re.compile(r"^(random|sliding-window)-(\d+)$")


FILE_VARIANT_NAMES = VARIANT_NAMES[:-1]
"""The variants a command that edits a file's reasoning takes: ``sliding-window-K`` drops
whole steps, which only ``iclr replay`` does (a file keeps its actions and observations)."""


def parse_variant(name: str, *, names: Sequence[str] = VARIANT_NAMES) -> Variant:
    """Parse ``none``, ``iclr``, ``iclr-ext``, ``step-only``, ``delete-all``, ``random-R`` or
    ``sliding-window-K``; an unknown name is answered with ``names``, those the command takes.

    Raises:
        UsageError: for any other name, or R outside 0..100, or K < 1.
    """
    if name in ("none", "iclr", "iclr-ext", "step-only", "delete-all"):
        return Variant(name, name)
    m = _PARAM.match(name)
    if m:
        kind, value = m.group(1), int(m.group(2))
        if kind == "random" and not 0 <= value <= 100:
            raise UsageError(f"variant {name!r}: R must be a percentage between 0 and 100")
        if kind == "sliding-window" and value < 1:
            raise UsageError(f"variant {name!r}: K must be at least 1")
        return Variant(name, kind, value)
    example = "random-10, sliding-window-5" if "sliding-window-K" in names else "random-10"
    raise UsageError(f"unknown variant {name!r}; choose one of {', '.join(names)} (e.g. {example})")


def bottom_k(scores: Sequence[float | None], ratio: float = DEFAULT_RATIO) -> frozenset[int]:
    """Indices of the ``floor(ratio * N)`` lowest scores: ``D_t = BottomK`` (paper section 3.2).

    ``N = len(scores)``; ``N = 1`` removes nothing. Ties go to the earlier block first, so the
    result is deterministic. A ``None`` score (a block no proxy token started in) is never
    removed but still counts in ``N``.

    Raises:
        ValueError: when ``ratio`` is outside [0, 1].
    """
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"ratio must be within [0, 1], got {ratio}")
    n = len(scores)
    if n <= 1:
        return frozenset()
    # The epsilon keeps floor(0.29 * 100) at 29 despite binary floating point.
    k = math.floor(ratio * n + 1e-9)
    candidates = sorted((s, i) for i, s in enumerate(scores) if s is not None)
    return frozenset(i for _, i in candidates[:k])


def selection_margin(scores: Sequence[float | None], selected: frozenset[int] | set[int]) -> float:
    """How far, in bits, a BottomK selection is from changing: the lowest score among the
    kept blocks minus the highest among the removed ones (``inf`` when nothing is removed or
    nothing scored is kept, since then no score can change which blocks go).

    A selection changes when scores move by about this much against each other, so a small
    margin marks a step whose selection an approximate scorer may get wrong (the fast
    profile's recheck, :mod:`iclr_cli.scoring.recheck`). Blocks without a score take no part.
    """
    kept = [s for i, s in enumerate(scores) if s is not None and i not in selected]
    removed = [s for i, s in enumerate(scores) if s is not None and i in selected]
    if not kept or not removed:
        return math.inf
    return min(kept) - max(removed)


def bottom_k_protected(scores: Sequence[float | None], protected: frozenset[int] | set[int], ratio: float = DEFAULT_RATIO) -> frozenset[int]:
    """``iclr-ext``: BottomK as :func:`bottom_k`, except that a block in ``protected`` is never removed.

    This project's hypothesis from the paper's externalization finding (section 4.4: future
    behavioural risk 67.3% while derived state lives only in reasoning, 36.2% once it is
    externalized), not a rule of the paper: a block whose derived state has not reached an
    external carrier (:func:`iclr_cli.derived_state.unexternalized`) stays. A protected block
    **counts in N** and simply cannot be chosen, like a block without a score: the removal
    budget ``floor(rho * N)`` is the one ``iclr`` has, spent on the lowest-entropy blocks that
    are not protected, so a replay against ``iclr`` compares which blocks go, not how many
    (fewer go only when fewer than ``floor(rho * N)`` are unprotected).

    Raises:
        ValueError: when ``ratio`` is outside [0, 1].
    """
    return bottom_k([None if i in protected else s for i, s in enumerate(scores)], ratio)


def random_token_deletion(
    n_tokens: int,
    percent: float,
    *,
    seed: int,
    trajectory: str,
    step: int,
    deletable: Sequence[int] | None = None,
) -> frozenset[int]:
    """Indices of ``round(percent/100 * n_tokens)`` reasoning tokens to delete (variant ``random-R``).

    ``n_tokens`` is the step's reasoning tokens as generated (the denominator of the deletion
    ratio); the indices are drawn from ``deletable`` (default: all of them), the tokens a
    variant may touch under the one block rule (:mod:`iclr_cli.blocks`); when fewer are
    deletable than asked for, all of them go. Deterministic: the generator is seeded by
    ``(seed, trajectory, step)`` only, so the same trajectory gets the same deletions on any
    machine and in any run order.
    """
    pool = list(range(n_tokens)) if deletable is None else sorted(deletable)
    k = math.floor(percent / 100.0 * n_tokens + 0.5)
    rng = random.Random(f"iclr-random:{seed}:{trajectory}:{step}")
    return frozenset(rng.sample(pool, min(k, len(pool))))


def sliding_window_start(n_steps: int, keep: int) -> int:
    """Index of the first step that stays in context when only the last ``keep`` do (Table 1)."""
    return max(0, n_steps - keep)
