"""The future-necessity probe under strict task-level nested evaluation (paper sections 3.3, 4.3).

A logistic-regression probe reads one pooled hidden state ``z^(l,p)`` of each boundary
(:mod:`~iclr_cli.analysis.features`) and predicts its label (:mod:`~iclr_cli.analysis.labels`).
Evaluation, as the paper describes it ("layer selection, pooling choice, feature
standardization, and PCA are selected using training tasks only; the outer evaluation folds
contain held out tasks"):

- **outer folds**: ``GroupKFold`` over the groups (tasks; ``--group-by``), at most ``outer``
  folds: every boundary of a task is in exactly one held-out fold;
- **inner folds**, on the outer fold's training tasks only: ``GroupKFold`` again (at most
  ``inner`` folds), and every configuration of the grid (layer, pooling, standardisation on or
  off, PCA to ``k`` components or none, the inverse regularisation ``C``) is scored by the
  AUROC of its pooled inner out-of-fold predictions; the best is refitted on all training
  tasks and scores the held-out ones. Ties go to the earlier configuration of the grid.

Because no held-out task is ever seen while choosing or fitting, a feature that identifies the
task (and through it the task's base rate) cannot lift the outer score. The reported
AUROC, average precision and balanced accuracy (threshold 0.5 on a class-balanced model)
are computed on the pooled outer predictions, with percentile bootstrap intervals over
boundaries (:mod:`~iclr_cli.analysis.stats`). scikit-learn provides the models and metrics.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from iclr_cli.analysis.stats import bootstrap_paired


@dataclass(frozen=True)
class Grid:
    """The configurations the inner folds choose from. ``layers`` are layer slots of the
    feature array (``None``: all); ``pca`` sizes are capped at the training rows."""

    layers: tuple[int, ...] | None = None
    pools: tuple[int, ...] | None = None
    scale: tuple[bool, ...] = (True, False)
    pca: tuple[int | None, ...] = (None, 16)
    c: tuple[float, ...] = (0.01, 0.1, 1.0, 10.0)


@dataclass(frozen=True)
class Config:
    """One probe configuration: layer slot, pool slot, standardise, PCA size, C."""

    layer: int
    pool: int
    scale: bool
    pca: int | None
    c: float


@dataclass
class Fold:
    """One outer fold: the held-out groups, what the inner folds chose and the held-out AUROC
    (``None`` when the held-out boundaries have one class only)."""

    index: int
    held_out: list[str]
    n: int
    positives: int
    selected: Config | None
    inner_auroc: float | None
    auroc: float | None


@dataclass
class ProbeResult:
    """Outer predictions and metrics: ``metrics[name] = (value, (low, high) or None)``."""

    scores: np.ndarray
    folds: list[Fold]
    metrics: dict[str, tuple[float | None, tuple[float, float] | None]] = field(default_factory=dict)


def _transform(cfg: Config, train: np.ndarray, test: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``train`` and ``test`` features after the configuration's standardisation and PCA,
    both fitted on ``train`` only."""
    from sklearn.decomposition import PCA
    from sklearn.preprocessing import StandardScaler

    if cfg.scale:
        scaler = StandardScaler().fit(train)
        train, test = scaler.transform(train), scaler.transform(test)
    if cfg.pca is not None:
        pca = PCA(n_components=max(1, min(cfg.pca, train.shape[0] - 1, train.shape[1])), random_state=seed).fit(train)
        train, test = pca.transform(train), pca.transform(test)
    return train, test


def _classifier(c: float):
    from sklearn.linear_model import LogisticRegression

    # liblinear: deterministic and fast on a few hundred rows; balanced classes make 0.5 the
    # natural threshold of the balanced accuracy.
    return LogisticRegression(C=c, class_weight="balanced", solver="liblinear", max_iter=1000)


def _fit_predict(cfg: Config, x: np.ndarray, y: np.ndarray, train: np.ndarray, test: np.ndarray, seed: int) -> np.ndarray:
    """Probability of label 1 for ``test`` rows from a model fitted on ``train`` rows (the
    training base rate when the training rows have one class)."""
    return _predict_many([cfg.c], cfg, x, y, train, test, seed)[0]


def _predict_many(cs: Sequence[float], cfg: Config, x: np.ndarray, y: np.ndarray, train: np.ndarray, test: np.ndarray,
                  seed: int) -> list[np.ndarray]:
    """:func:`_fit_predict` for several values of C sharing one transform."""
    from sklearn.exceptions import ConvergenceWarning

    if len(set(y[train].tolist())) < 2:
        return [np.full(len(test), float(y[train].mean())) for _ in cs]
    feats = x[:, cfg.layer, cfg.pool, :].astype(np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        tr, te = _transform(cfg, feats[train], feats[test], seed)
        return [_classifier(c).fit(tr, y[train]).predict_proba(te)[:, 1] for c in cs]


def _auroc(y: np.ndarray, s: np.ndarray) -> float | None:
    from sklearn.metrics import roc_auc_score

    if len(set(y.tolist())) < 2:
        return None
    return float(roc_auc_score(y, np.nan_to_num(s, nan=0.5)))


def configs(grid: Grid, n_layers: int, n_pools: int) -> list[Config]:
    """Every configuration of ``grid`` in its order (layer, pool, scale, PCA, C)."""
    layers = grid.layers if grid.layers is not None else tuple(range(n_layers))
    pools = grid.pools if grid.pools is not None else tuple(range(n_pools))
    return [Config(*combo) for combo in itertools.product(layers, pools, grid.scale, grid.pca, grid.c)]


def _splits(groups: np.ndarray, rows: np.ndarray, folds: int) -> list[tuple[np.ndarray, np.ndarray]]:
    from sklearn.model_selection import GroupKFold

    k = min(folds, len(set(groups[rows].tolist())))
    if k < 2:
        return []
    return [(rows[a], rows[b]) for a, b in GroupKFold(n_splits=k).split(rows, groups=groups[rows])]


def select(x: np.ndarray, y: np.ndarray, groups: np.ndarray, train: np.ndarray, grid: Grid, inner: int, seed: int) -> tuple[Config, float | None]:
    """The configuration with the best pooled inner out-of-fold AUROC on ``train`` rows only
    (the first of the grid when the training rows hold fewer than two groups or one class)."""
    candidates = configs(grid, x.shape[1], x.shape[2])
    splits = _splits(groups, train, inner)
    if not splits or len(set(y[train].tolist())) < 2:
        return candidates[0], None
    best, best_auc = candidates[0], -1.0
    order = {r: i for i, r in enumerate(train)}
    # One transform per (layer, pool, scale, PCA) and split, shared by every C.
    shapes = list(dict.fromkeys((c.layer, c.pool, c.scale, c.pca) for c in candidates))
    for shape in shapes:
        cs = [c.c for c in candidates if (c.layer, c.pool, c.scale, c.pca) == shape]
        oof = np.empty((len(cs), len(train)))
        for a, b in splits:
            rows = [order[r] for r in b]
            for i, pred in enumerate(_predict_many(cs, Config(*shape, cs[0]), x, y, a, b, seed)):
                oof[i, rows] = pred
        for i, c in enumerate(cs):
            auc = _auroc(y[train], oof[i])
            if auc is not None and auc > best_auc:
                best, best_auc = Config(*shape, c), auc
    return best, (best_auc if best_auc >= 0 else None)


def evaluate(x: np.ndarray, y: Sequence[int], groups: Sequence[str], *, grid: Grid = Grid(), outer: int = 5, inner: int = 3,
             seed: int = 0, on_fold=None) -> ProbeResult:
    """Nested evaluation by group (module docstring).

    Args:
        x: ``[rows, layers, pools, hidden]`` features.
        y: 0/1 label per row. groups: the task of each row.
        outer / inner: most outer / inner folds (fewer when there are fewer groups).
        on_fold: called with each finished :class:`Fold` (progress).

    Raises:
        ValueError: fewer than two groups, or labels of one class only.
    """
    y = np.asarray(y, dtype=int)
    g = np.asarray(groups)
    if len(set(g.tolist())) < 2:
        raise ValueError("the nested split needs boundaries from at least two groups (tasks); see --group-by")
    if len(set(y.tolist())) < 2:
        raise ValueError(f"every label is {int(y[0]) if len(y) else '-'}: a probe needs both classes")
    from threadpoolctl import threadpool_limits

    scores = np.full(len(y), np.nan)
    folds: list[Fold] = []
    # Thousands of small fits: BLAS threads only wait for each other (10x slower measured).
    with threadpool_limits(1):
        for index, (train, test) in enumerate(_splits(g, np.arange(len(y)), outer)):
            cfg, inner_auc = select(x, y, g, train, grid, inner, seed)
            scores[test] = _fit_predict(cfg, x, y, train, test, seed)
            fold = Fold(index, sorted(set(g[test].tolist())), len(test), int(y[test].sum()), cfg, inner_auc, _auroc(y[test], scores[test]))
            folds.append(fold)
            if on_fold is not None:
                on_fold(fold)
    result = ProbeResult(scores, folds)
    result.metrics = metrics(y, scores, seed=seed)
    return result


MIN_TASKS = 10
"""Fewer held-out tasks than this and the probe's estimate is reported as not meaningful. The
bootstrap intervals resample boundaries, which treats boundaries of one task as independent;
the unit that generalises is the task (the split is by task for that reason), and with a
handful of tasks the estimate depends on which tasks they happen to be. The paper's cohort
has 31 tasks (section 4.3); 10 is this project's floor, not the paper's."""


def caveats(n_tasks: int, folds: Sequence[Fold], layer_names: Sequence[object], pool_names: Sequence[str]) -> list[str]:
    """What makes the estimate weak, one sentence each: too few tasks (:data:`MIN_TASKS`),
    a layer or pooling chosen differently across outer folds (the pooled AUROC is then of
    several probes, not one), outer folds chosen without inner folds (too few training tasks:
    the grid's first configuration was used), and held-out folds of one class (no AUROC of
    their own). Empty when none applies."""
    out = []
    if n_tasks < MIN_TASKS:
        out.append(f"only {n_tasks} tasks: too few for the estimate to mean much. The held-out AUROC rests on {n_tasks} "
                   f"tasks and its interval resamples boundaries, not tasks, so it leaves out how much tasks differ; "
                   f"use {MIN_TASKS} or more (the paper used 31)")
    chosen = [f for f in folds if f.selected is not None]
    for what, names, pick in (("layer", layer_names, lambda c: c.layer), ("pooling", pool_names, lambda c: c.pool)):
        by_choice: dict[object, list[int]] = {}
        for f in chosen:
            by_choice.setdefault(names[pick(f.selected)], []).append(f.index)  # type: ignore[arg-type]
        if len(by_choice) > 1:
            shown = "; ".join(f"{name} in fold{'s' if len(idx) > 1 else ''} {', '.join(map(str, idx))}" for name, idx in by_choice.items())
            out.append(f"the chosen {what} changed between outer folds ({shown}): the pooled AUROC is of {len(by_choice)} "
                       f"different probes, and the choice itself is unstable on these tasks")
    blind = [f.index for f in folds if f.inner_auroc is None]
    if blind:
        out.append(f"outer fold{'s' if len(blind) > 1 else ''} {', '.join(map(str, blind))} had too few training tasks (or one "
                   "class) for inner folds: the grid's first configuration was used, not a selected one")
    single = [f.index for f in folds if f.auroc is None]
    if single:
        out.append(f"the held-out boundaries of outer fold{'s' if len(single) > 1 else ''} {', '.join(map(str, single))} "
                   "have one class: no AUROC of their own (they count in the pooled one)")
    return out


def metrics(y: np.ndarray, scores: np.ndarray, *, seed: int = 0) -> dict[str, tuple[float | None, tuple[float, float] | None]]:
    """AUROC, average precision and balanced accuracy (threshold 0.5) with bootstrap 95%
    intervals. The values are scikit-learn's; the 2,000 bootstrap resamples use the same
    definitions in numpy (:func:`fast_auroc`, :func:`fast_ap`, :func:`fast_bacc`), which are
    equal to scikit-learn's on every input (the tests compare them) and 50x faster."""
    from sklearn.metrics import average_precision_score, balanced_accuracy_score, roc_auc_score

    s = np.nan_to_num(scores, nan=0.5)
    rows = np.stack([y, s], axis=1)
    exact = {
        "auroc": lambda: roc_auc_score(y, s),
        "average_precision": lambda: average_precision_score(y, s),
        "balanced_accuracy": lambda: balanced_accuracy_score(y, s >= 0.5),
    }
    fast = {"auroc": fast_auroc, "average_precision": fast_ap, "balanced_accuracy": fast_bacc}
    out = {}
    for name in exact:
        if len(set(y.tolist())) < 2:
            out[name] = (None, None)
            continue
        out[name] = (float(exact[name]()), bootstrap_paired(rows, fast[name], seed=seed))
    return out


def _classes(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    y, s = rows[:, 0] > 0.5, rows[:, 1]
    if y.all() or not y.any():
        raise ValueError("one class only")
    return y, s


def fast_auroc(rows: np.ndarray) -> float:
    """AUROC of ``rows[:, 1]`` for labels ``rows[:, 0]`` (Mann-Whitney, ties count one half).

    Raises:
        ValueError: when the labels hold one class only.
    """
    from scipy.stats import rankdata

    y, s = _classes(rows)
    ranks = rankdata(s)
    n1 = y.sum()
    n0 = len(y) - n1
    return float((ranks[y].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def fast_ap(rows: np.ndarray) -> float:
    """Average precision (scikit-learn's step-wise definition: sum over thresholds of
    precision times the recall gained).

    Raises:
        ValueError: when the labels hold one class only.
    """
    y, s = _classes(rows)
    order = np.argsort(-s, kind="mergesort")
    y, s = y[order], s[order]
    last = np.r_[np.diff(s) != 0, True]  # the last row of each tied score
    tp = np.cumsum(y)[last]
    fp = np.cumsum(~y)[last]
    precision = tp / (tp + fp)
    recall = tp / y.sum()
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def fast_bacc(rows: np.ndarray) -> float:
    """Balanced accuracy of the prediction ``score >= 0.5``.

    Raises:
        ValueError: when the labels hold one class only.
    """
    y, s = _classes(rows)
    pred = s >= 0.5
    return float(((pred & y).sum() / y.sum() + (~pred & ~y).sum() / (~y).sum()) / 2)
