"""--context auto's cost model (iclr_cli.scoring.cost): token-equivalents with attention."""

import math

from tiny_llama import tiny, tiny_dir  # noqa: F401

import pytest

from iclr_cli.scoring.cost import run_cost, sliding_cost


def test_run_cost_counts_each_token_with_its_context():
    e = 100.0
    assert run_cost(0, 4, e) == pytest.approx(sum(1 + p / e for p in range(4)))
    assert run_cost(10, 20, e) == pytest.approx(sum(1 + p / e for p in range(10, 20)))
    assert run_cost(5, 5, e) == 0.0
    assert run_cost(0, 1000, math.inf) == 1000  # no attention term: tokens alone


def test_sliding_reads_every_token_past_the_limit_at_a_full_window():
    e, limit = 100.0, 50
    assert sliding_cost(30, limit, e) == pytest.approx(run_cost(0, 30, e))  # under the limit: a plain run
    assert sliding_cost(80, limit, e) == pytest.approx(run_cost(0, 50, e) + 30 * (1 + 50 / e))


def test_a_long_session_with_few_scored_steps_costs_sliding_more_than_its_token_count_says():
    """The Claude Code slice's shape: sliding reads 55K tokens once, fresh 31K in windows of 3.5K;
    by tokens fresh is not under half, by cost it is."""
    e, limit = 3073.0, 4096
    sliding = sliding_cost(55_466, limit, e)
    fresh = 9 * run_cost(0, 3_400, e)
    assert fresh * 2 > 55_466 and 9 * 3_400 * 2 < 2 * 55_466  # tokens: 30.6K vs 55.5K, not under half
    assert fresh * 2 < sliding  # cost: under half


def test_auto_plans_with_the_model_s_attention_equivalent(tiny):
    from iclr_cli.scoring.cost import attention_equivalent

    model, _ = tiny
    e = attention_equivalent(model)
    c = model.config
    params = sum(p.numel() for p in model.parameters()) - model.get_input_embeddings().weight.numel()
    assert e == pytest.approx(2 * params / (4 * c.num_hidden_layers * c.num_attention_heads * (c.hidden_size // c.num_attention_heads)))


def test_auto_mode_takes_fresh_only_when_it_costs_under_half_of_sliding():
    from iclr_cli.scoring.cost import auto_mode, run_cost, sliding_cost

    shared = lambda prev, ids: len(prev)  # noqa: E731  each request extends the last
    # a 10,000-token session read through a 100-token window, against two short windows
    windows = [(list(range(100)), "a"), (list(range(120)), "b")]
    assert auto_mode(iter(windows), shared, lambda req: 10_000, 100, 3000.0) == "fresh"
    fresh = run_cost(0, 100, 3000.0) + run_cost(100, 120, 3000.0)
    assert fresh * 2 < sliding_cost(10_000, 100, 3000.0)
    # the same windows when the whole session is 150 tokens: sliding reads it once, cheaper
    assert auto_mode(iter(windows), shared, lambda req: 150, 100, 3000.0) == "sliding"
    assert auto_mode(iter([]), shared, lambda req: 0, 100, 3000.0) == "sliding"  # nothing laid out
