"""Usage parsing: cache reads under either provider's field name, missing fields stay None."""

from __future__ import annotations

from iclr_cli.replay.accounting import Usage, parse_usage, total_usage


def test_openai_style_cached_and_reasoning_tokens():
    u = parse_usage({"prompt_tokens": 1200, "completion_tokens": 300, "prompt_tokens_details": {"cached_tokens": 1024}, "completion_tokens_details": {"reasoning_tokens": 250}})
    assert u == Usage(1200, 300, 1024, 250)


def test_deepseek_style_cache_hit_tokens():
    u = parse_usage({"prompt_tokens": 900, "completion_tokens": 80, "prompt_cache_hit_tokens": 640, "prompt_cache_miss_tokens": 260})
    assert u == Usage(900, 80, 640, None)


def test_details_without_cached_falls_back_to_deepseek_field():
    u = parse_usage({"prompt_tokens": 10, "completion_tokens": 1, "prompt_tokens_details": {"audio_tokens": 0}, "prompt_cache_hit_tokens": 7})
    assert u.cache_read_tokens == 7


def test_no_usage_is_all_none_not_zero():
    assert parse_usage(None) == Usage(None, None, None, None)
    assert parse_usage({"prompt_tokens": "12", "completion_tokens": -1}) == Usage(None, None, None, None)


def test_totals_name_unreported_fields():
    t = total_usage([Usage(100, 10, None, None), Usage(150, 20, None, 5), Usage(None, None, None, None)])
    assert (t.requests, t.input_tokens, t.output_tokens, t.cache_read_tokens, t.reasoning_tokens) == (3, 250, 30, None, 5)
    assert t.unreported == ("cache_read_tokens",)
    assert total_usage([]).unreported == ()
