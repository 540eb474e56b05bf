"""BottomK, random-R and variant parsing (METHOD.md, "Select and replace", "Variants")."""

import math

import pytest
from hypothesis import given, strategies as st

from iclr_cli.errors import UsageError
from iclr_cli.policies import bottom_k, parse_variant, random_token_deletion


def test_bottom_k_removes_floor_of_ratio_n_lowest():
    scores = [3.0, 1.0, 2.0, 5.0, 4.0]
    assert bottom_k(scores, 0.8) == {1, 2, 0, 4}


def test_single_block_is_never_removed():
    assert bottom_k([0.1], 0.8) == frozenset()
    assert bottom_k([], 0.8) == frozenset()


def test_ties_take_the_earlier_block_first():
    assert bottom_k([1.0, 1.0, 1.0], 0.5) == {0}
    assert bottom_k([2.0, 1.0, 1.0, 1.0], 0.5) == {1, 2}


def test_none_scores_are_never_removed_but_count_in_n():
    assert bottom_k([None, 1.0, 2.0, None, 3.0], 0.8) == {1, 2, 4}


@given(st.lists(st.floats(0, 20, allow_nan=False), max_size=40), st.sampled_from([0.0, 0.29, 0.5, 0.8, 1.0]))
def test_bottom_k_count_and_minimality(scores, ratio):
    chosen = bottom_k(scores, ratio)
    n = len(scores)
    expected = 0 if n <= 1 else math.floor(ratio * n + 1e-9)
    assert len(chosen) == expected
    if chosen and len(chosen) < n:
        assert max(scores[i] for i in chosen) <= min(scores[i] for i in range(n) if i not in chosen)


def test_ratio_out_of_range():
    with pytest.raises(ValueError):
        bottom_k([1.0, 2.0], 1.5)


def test_random_deletion_is_deterministic_and_sized():
    a = random_token_deletion(200, 10, seed=0, trajectory="t", step=3)
    b = random_token_deletion(200, 10, seed=0, trajectory="t", step=3)
    c = random_token_deletion(200, 10, seed=1, trajectory="t", step=3)
    d = random_token_deletion(200, 10, seed=0, trajectory="t", step=4)
    assert a == b
    assert len(a) == 20
    assert a != c and a != d
    assert all(0 <= i < 200 for i in a)
    assert len(random_token_deletion(7, 50, seed=0, trajectory="t", step=0)) == 4  # round half up
    assert random_token_deletion(0, 40, seed=0, trajectory="t", step=0) == frozenset()


@pytest.mark.parametrize(
    "name,kind,param",
    [("none", "none", None), ("iclr", "iclr", None), ("step-only", "step-only", None), ("delete-all", "delete-all", None),
     ("random-10", "random", 10), ("random-7", "random", 7), ("sliding-window-5", "sliding-window", 5)],
)
def test_parse_variant(name, kind, param):
    v = parse_variant(name)
    assert (v.kind, v.param) == (kind, param)


@pytest.mark.parametrize("bad", ["random", "random-101", "sliding-window-0", "bottomk", ""])
def test_parse_variant_rejects(bad):
    with pytest.raises(UsageError):
        parse_variant(bad)
