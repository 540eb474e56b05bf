"""Reward: the hidden tests' pass rate on the workspace's stats.py, rescaled so the
starting code scores 0 and all tests passing scores 1 (checks.fix_reward)."""

from iclr_cli.replay.checks import fix_reward

HIDDEN_TESTS = """
from stats import mean, median, value_range

def test_mean():
    assert mean([1, 2, 3, 4]) == 2.5

def test_median_odd():
    assert median([3, 1, 2]) == 2

def test_median_even():
    assert median([4, 1, 3, 2]) == 2.5

def test_median_even_two():
    assert median([10, 20]) == 15

def test_median_single():
    assert median([7]) == 7

def test_median_floats():
    assert abs(median([0.5, 1.5, 2.5, 3.5]) - 2.0) < 1e-12

def test_median_does_not_modify_input():
    data = [3, 1, 2]
    median(data)
    assert data == [3, 1, 2]

def test_range():
    assert value_range([5, -2, 7]) == 9
"""


def check(ctx):
    return fix_reward(ctx, HIDDEN_TESTS)
