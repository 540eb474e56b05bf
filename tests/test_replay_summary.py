"""Summary math on hand-made records: W/T/L, token changes, deletion ratio, amplification."""

from __future__ import annotations

import pytest

from iclr_cli.replay.summary import legend, summarize, table_rows


def rec(task, variant, seed, reward, inp, out, cache=None, gen=0, removed=0, status="submitted", requests=3):
    return {
        "task": task, "variant": variant, "seed": seed, "reward": reward, "status": status, "requests": requests,
        "input_tokens": inp, "output_tokens": out, "cache_read_tokens": cache,
        "reasoning_tokens_generated": gen, "reasoning_tokens_removed": removed,
    }


RECORDS = [
    rec("a", "none", 0, 0.5, 1000, 100, 400, gen=200),
    rec("b", "none", 0, 1.0, 2000, 200, 800, gen=300),
    rec("c", "none", 0, 0.0, 500, 50, None, gen=100),
    rec("a", "iclr", 0, 1.0, 600, 80, 200, gen=150, removed=100),  # win
    rec("b", "iclr", 0, 1.0, 1500, 150, 600, gen=250, removed=150),  # tie
    rec("c", "iclr", 0, 0.0, 900, 70, None, gen=120, removed=50),  # tie
    rec("a", "delete-all", 0, 0.25, 300, 60, 100, gen=100, removed=100),  # loss
    rec("b", "delete-all", 0, 0.0, 1800, 300, None, status="error"),  # left out
    rec("d", "delete-all", 0, 1.0, 100, 10, None, gen=10, removed=10),  # no baseline partner
]


def by_variant(records=RECORDS):
    return {r.variant: r for r in summarize(records)}


def test_wins_ties_losses_against_none_on_same_task_and_seed():
    s = by_variant()
    assert (s["iclr"].wins, s["iclr"].ties, s["iclr"].losses, s["iclr"].paired) == (1, 2, 0, 3)
    assert (s["delete-all"].wins, s["delete-all"].ties, s["delete-all"].losses, s["delete-all"].paired) == (0, 0, 1, 1)
    assert s["delete-all"].errors == 1 and s["delete-all"].runs == 2


def test_mean_reward_and_token_totals():
    s = by_variant()
    assert s["none"].mean_reward == pytest.approx(0.5)
    assert s["iclr"].mean_reward == pytest.approx(2 / 3)
    assert (s["iclr"].input_tokens, s["iclr"].output_tokens, s["iclr"].cache_read_tokens) == (3000, 300, 800)
    assert s["iclr"].total_tokens == 3300
    assert s["iclr"].change["input_tokens"] == pytest.approx((3000 - 3500) / 3500)
    assert s["iclr"].change["cache_read_tokens"] == pytest.approx((800 - 1200) / 1200)


def test_change_uses_paired_runs_only():
    s = by_variant()["delete-all"]
    assert s.input_tokens == 400  # totals: every non-error run
    assert s.change["input_tokens"] == pytest.approx((300 - 1000) / 1000)  # only task a pairs


def test_deletion_ratio_and_amplification():
    s = by_variant()["iclr"]
    assert s.deletion_ratio == pytest.approx(300 / 520)
    # total tokens: iclr 3300 vs none 3850 on the same tasks; 300 reasoning tokens removed
    assert s.amplification == pytest.approx((3300 - 3850) / 300)
    d = by_variant()["delete-all"]
    assert d.amplification == pytest.approx((360 - 1100) / 100)
    assert by_variant()["none"].amplification is None
    assert by_variant()["none"].deletion_ratio == 0.0


def test_last_record_of_a_key_wins():
    records = RECORDS + [rec("a", "iclr", 0, 0.0, 600, 80, 200, gen=150, removed=100)]
    s = by_variant(records)["iclr"]
    assert (s.wins, s.ties, s.losses) == (0, 2, 1)


def test_table_shows_na_for_unreported_cache_and_changes():
    records = [rec("a", "none", 0, 0.5, 1000, 100), rec("a", "random-10", 0, 0.5, 400, 50, gen=100, removed=10)]
    columns, rows = table_rows(summarize(records))
    assert columns[0] == "variant" and rows[0][0] == "none"
    row = dict(zip(columns, rows[1]))
    assert row["input"] == "400 (-60.0%)"
    assert row["cache read"] == "n/a"
    assert row["W/T/L"] == "0/1/0"
    assert row["deleted"] == "10.0%"
    assert row["amplification"] == "-65.00"


def test_legend_gives_each_columns_unit_and_flags_the_fake_tokenizer():
    text = legend(["smollm2", None])
    assert "input, output, cache read: API tokens" in text
    assert "deleted: reasoning tokens removed / generated, both in the proxy's tokenizer" in text
    assert "so API tokens per proxy token" in text
    assert "--proxy-model fake" not in text
    assert legend(["regex-words"]).endswith("(a real proxy's tokens carry their leading space).")
