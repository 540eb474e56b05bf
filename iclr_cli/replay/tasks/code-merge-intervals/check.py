"""Reward: the hidden tests' pass rate on the workspace's calendar_tools.py, rescaled so the
starting code scores 0 and all tests passing scores 1 (checks.fix_reward)."""

from iclr_cli.replay.checks import fix_reward

HIDDEN_TESTS = """
from calendar_tools import merge_intervals, total_booked

def test_empty():
    assert merge_intervals([]) == []

def test_disjoint():
    assert merge_intervals([(1, 2), (4, 5)]) == [(1, 2), (4, 5)]

def test_overlap():
    assert merge_intervals([(1, 4), (2, 6)]) == [(1, 6)]

def test_unsorted():
    assert merge_intervals([(8, 10), (1, 3), (2, 4)]) == [(1, 4), (8, 10)]

def test_touching():
    assert merge_intervals([(1, 2), (2, 3)]) == [(1, 3)]

def test_contained():
    assert merge_intervals([(1, 10), (2, 3), (4, 5)]) == [(1, 10)]

def test_total():
    assert total_booked([(5, 7), (1, 3), (2, 4)]) == 5
"""


def check(ctx):
    return fix_reward(ctx, HIDDEN_TESTS)
