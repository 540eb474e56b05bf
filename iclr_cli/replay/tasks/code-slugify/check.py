"""Reward: the hidden tests' pass rate on the workspace's textutil.py, rescaled so the
starting code scores 0 and all tests passing scores 1 (checks.fix_reward)."""

from iclr_cli.replay.checks import fix_reward

HIDDEN_TESTS = """
from textutil import slugify, word_count

def test_simple():
    assert slugify("Hello World") == "hello-world"

def test_punctuation_runs():
    assert slugify("Hello,   World!!") == "hello-world"

def test_edges():
    assert slugify("  --Rust & Go--  ") == "rust-go"

def test_digits():
    assert slugify("Top 10 Tips (2024)") == "top-10-tips-2024"

def test_already_slug():
    assert slugify("already-a-slug") == "already-a-slug"

def test_only_punctuation():
    assert slugify("!!!") == ""

def test_word_count():
    assert word_count("a b  c") == 3
"""


def check(ctx):
    return fix_reward(ctx, HIDDEN_TESTS)
