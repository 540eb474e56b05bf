"""The probe's nested evaluation: it finds a planted signal, not a shuffled one, and a feature
that only identifies the task cannot lift the held-out score."""

from __future__ import annotations

import numpy as np
import pytest

from tiny_llama import make_trajs, tiny, tiny_dir  # noqa: F401

pytest.importorskip("sklearn")

from iclr_cli.analysis.probe import Grid, configs, evaluate, fast_ap, fast_auroc, fast_bacc  # noqa: E402

SMALL = Grid(scale=(True,), pca=(None,), c=(1.0, 100.0))


@pytest.fixture(scope="module")
def boundary_features(tiny):  # noqa: F811
    """Real hidden states: the tiny Llama read at every boundary of 16 generated trajectories."""
    from iclr_cli.analysis.features import extract
    from iclr_cli.analysis.inputs import Source
    from iclr_cli.analysis.labels import labelled_steps
    from iclr_cli.analysis.sensor import Sensor

    model, tokenizer = tiny
    sensor = Sensor(model, tokenizer, name="tiny", max_tokens=512)
    trajs = make_trajs(n_traj=16, n_steps=8, seed=3)
    wanted = {(t.id, s) for t in trajs for s in labelled_steps(t)}
    found = extract(sensor, [Source(t, f"file-{t.id}") for t in trajs], wanted, layers=range(sensor.n_layers))
    assert found.x.shape[1:] == (2, 3, 64) and len(found.keys) > 90
    return found


def test_labels_planted_along_a_hidden_state_direction_are_found(boundary_features):
    f = boundary_features
    z = f.x[:, 1, 0]  # layer 1, boundary token
    # A direction of the hidden states: a random mix of their three main axes of variation.
    axes = np.linalg.svd(z - z.mean(0), full_matrices=False)[2][:3]
    projection = z @ (np.random.default_rng(0).normal(size=3) @ axes)
    y = (projection > np.median(projection)).astype(int)
    result = evaluate(f.x, y, f.groups, grid=SMALL)
    assert result.metrics["auroc"][0] > 0.95
    assert result.metrics["balanced_accuracy"][0] > 0.8
    low, high = result.metrics["auroc"][1]
    assert low <= result.metrics["auroc"][0] <= high
    # the inner folds found the slot the labels were planted in
    assert sum((fold.selected.layer, fold.selected.pool) == (1, 0) for fold in result.folds) >= 3


def test_shuffled_labels_score_chance_on_average(boundary_features):
    f = boundary_features
    rng = np.random.default_rng(1)
    projection = f.x[:, 1, 0] @ rng.normal(size=f.x.shape[-1])
    y = (projection > np.median(projection)).astype(int)
    aucs = [evaluate(f.x, rng.permutation(y), f.groups, grid=SMALL, seed=k).metrics["auroc"][0] for k in range(6)]
    assert abs(np.mean(aucs) - 0.5) < 0.1, aucs


def _task_data(seed):
    """12 tasks whose base rates differ (0.15 or 0.85); the only feature identifies the task."""
    rng = np.random.default_rng(seed)
    tasks = np.repeat(np.arange(12), 12)
    rates = np.where(np.arange(12) % 2 == 0, 0.15, 0.85)
    y = (rng.random(tasks.size) < rates[tasks]).astype(int)
    embedding = rng.normal(size=(12, 16)) * 3
    x = (embedding[tasks] + 0.1 * rng.normal(size=(tasks.size, 16)))[:, None, None, :].astype(np.float32)
    return x, y, np.array([f"task{t}" for t in tasks])


def test_a_task_identifying_feature_does_not_lift_the_outer_auroc():
    grid = Grid(scale=(True,), pca=(None,), c=(0.1, 10.0))
    nested, leaky = [], []
    for seed in range(3):
        x, y, groups = _task_data(seed)
        nested.append(evaluate(x, y, groups, grid=grid, seed=seed).metrics["auroc"][0])
        # The same probe split by boundary instead of by task sees every task in training.
        leaky.append(evaluate(x, y, np.array([str(i) for i in range(len(y))]), grid=grid, seed=seed).metrics["auroc"][0])
    assert np.mean(leaky) > 0.75, leaky  # the feature does carry the task's base rate...
    assert np.mean(nested) < 0.62, nested  # ...which the split by task keeps out


def test_each_outer_fold_holds_out_whole_tasks():
    x, y, groups = _task_data(0)
    result = evaluate(x, y, groups, grid=SMALL, outer=4)
    held = [g for fold in result.folds for g in fold.held_out]
    assert sorted(held) == sorted(set(groups)) and len(result.folds) == 4
    assert not np.isnan(result.scores).any()


def test_evaluate_refuses_what_it_cannot_split():
    x = np.zeros((6, 1, 1, 2), np.float32)
    with pytest.raises(ValueError, match="two groups"):
        evaluate(x, [0, 1, 0, 1, 0, 1], ["a"] * 6)
    with pytest.raises(ValueError, match="both classes"):
        evaluate(x, [1] * 6, list("abcabc"))


def test_configs_cover_the_grid_in_order():
    got = configs(Grid(scale=(True, False), pca=(None, 4), c=(1.0,)), n_layers=2, n_pools=3)
    assert len(got) == 2 * 3 * 2 * 2 and (got[0].layer, got[0].pool, got[0].scale, got[0].pca) == (0, 0, True, None)


def test_the_fast_bootstrap_metrics_are_scikit_learns():
    from sklearn.metrics import average_precision_score, balanced_accuracy_score, roc_auc_score

    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(200):
        n = int(rng.integers(4, 40))
        y, s = rng.integers(0, 2, n), np.round(rng.random(n), 1)  # rounded: many ties
        if len(set(y.tolist())) < 2:
            continue
        rows = np.stack([y, s], axis=1)
        assert fast_auroc(rows) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
        assert fast_ap(rows) == pytest.approx(average_precision_score(y, s), abs=1e-12)
        assert fast_bacc(rows) == pytest.approx(balanced_accuracy_score(y, s >= 0.5), abs=1e-12)
        checked += 1
    assert checked > 150


def test_caveats_name_too_few_tasks_and_a_layer_that_changes_between_folds():
    from iclr_cli.analysis.probe import MIN_TASKS, Config, Fold, caveats

    def fold(i, layer, pool=0, inner=0.7, auroc=0.8):
        return Fold(i, [f"t{i}"], 4, 2, Config(layer, pool, True, None, 1.0), inner, auroc)

    layers, pools = [4, 8], ["boundary", "reasoning", "last64"]
    folds = [fold(0, 0), fold(1, 1), fold(2, 0), fold(3, 1, auroc=None)]
    found = caveats(4, folds, layers, pools)
    assert found[0].startswith("only 4 tasks: too few for the estimate to mean much.") and f"use {MIN_TASKS} or more" in found[0]
    assert found[1].startswith("the chosen layer changed between outer folds (4 in folds 0, 2; 8 in folds 1, 3): "
                               "the pooled AUROC is of 2 different probes")
    assert found[2] == "the held-out boundaries of outer fold 3 have one class: no AUROC of their own (they count in the pooled one)"
    assert len(found) == 3  # the pooling was the same in every fold
    steady = [Fold(i, [f"t{i}"], 4, 2, Config(1, 0, True, None, 1.0), 0.7, 0.8) for i in range(5)]
    assert caveats(MIN_TASKS, steady, layers, pools) == []
    blind = [Fold(0, ["a"], 4, 2, Config(0, 0, True, None, 0.01), None, 0.6)]
    assert caveats(12, blind, layers, pools) == ["outer fold 0 had too few training tasks (or one class) for inner folds: "
                                                 "the grid's first configuration was used, not a selected one"]


def test_a_probe_on_four_tasks_carries_the_caveat():
    x, y, groups = _task_data(0)
    keep = np.isin(groups, ["task0", "task1", "task2", "task3"])
    result = evaluate(x[keep], y[keep], groups[keep], grid=SMALL, outer=4)
    from iclr_cli.analysis.probe import caveats

    assert caveats(4, result.folds, [0], ["boundary"])[0].startswith("only 4 tasks")
