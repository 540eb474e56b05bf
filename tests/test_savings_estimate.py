"""The per-request arithmetic of ``iclr savings`` on sessions small enough to add up by hand."""

import pytest

from iclr_cli.savings.estimate import StepTokens, Totals, estimate_session, session_ratio
from iclr_cli.trajectory import Request, Usage

# P = 10 proxy tokens; three steps of 20, 30 and 40 rendered tokens whose reasoning (6, 8, 12
# tokens as generated) loses 5, 7 and 11 tokens to the variant.
STEPS = [StepTokens(20, 6, 5), StepTokens(30, 8, 7), StepTokens(40, 12, 11)]


def test_request_k_saves_the_deletions_of_steps_before_k_only():
    est = estimate_session(10, STEPS)
    # request 0 carries P; request 1 P + step 0; request 2 P + steps 0 and 1
    assert [r.input for r in est.requests] == [10, 30, 60]
    # steps before k: request 0 nothing, request 1 step 0 (5), request 2 steps 0 and 1 (5 + 7).
    # An off-by-one either way changes the total: j <= k gives 5 + 12 + 23 = 40, j < k - 1
    # gives 0 + 0 + 5 = 5.
    assert [r.saved for r in est.requests] == [0, 5, 12]
    assert [r.reasoning for r in est.requests] == [0, 6, 14]
    total = Totals.of(est.requests)
    assert (total.input, total.saved, total.input_after, total.reasoning) == (100, 17, 83, 20)
    assert (est.ratio, est.basis, est.recorded) == (1.0, "proxy", 0)
    assert total.cache_read is None and total.cache_read_after is None


def test_recorded_usage_converts_deletions_by_the_sessions_own_growth_ratio():
    usage = [Usage(100, cache_read_tokens=0), Usage(130, cache_read_tokens=90), Usage(175, cache_read_tokens=140)]
    est = estimate_session(10, STEPS, [Request(k, u) for k, u in enumerate(usage)])
    # recorded growth (130-100) + (175-130) = 75 over proxy growth 20 + 30 = 50: 1.5 per proxy token
    assert (est.ratio, est.basis, est.recorded, est.rejected) == (1.5, "growth", 3, None)
    assert [r.input for r in est.requests] == [100, 130, 175]
    assert [r.saved for r in est.requests] == [0, 7.5, 18]
    # step 0 ends at 130 recorded tokens (request 1's input): inside request 2's cache read
    # (140) but not request 1's (90); step 1 ends at 175, never inside. So only request 2's
    # cache read loses step 0's 1.5 x 5 tokens.
    assert [r.cache_saved for r in est.requests] == [0, 0, 7.5]
    total = Totals.of(est.requests)
    assert (total.input_after, total.cache_read, total.cache_read_after) == (379.5, 230, 222.5)


def test_sealed_deletions_are_counted_apart_and_not_taken_off():
    steps = [StepTokens(20, 6, 0, 5), StepTokens(30, 8, 7, 0), StepTokens(40)]
    est = estimate_session(10, steps)
    assert [r.saved for r in est.requests] == [0, 0, 7]
    assert [r.sealed for r in est.requests] == [0, 5, 5]


def test_several_requests_for_one_step_and_a_request_past_the_last_step():
    # a Codex step answered by two requests, and a logged request whose answer is missing
    reqs = [Request(0), Request(1), Request(1), Request(3)]
    est = estimate_session(10, STEPS, reqs)
    assert [r.step for r in est.requests] == [0, 1, 1, 3]
    assert [r.saved for r in est.requests] == [0, 5, 5, 23]
    assert [r.input for r in est.requests] == [10, 30, 30, 100]


def test_one_recorded_request_leaves_deletions_in_proxy_tokens():
    # a traffic-log line: only the last request is logged, 180 provider tokens for a prompt of
    # 10 + 20 + 30 = 60 proxy tokens. The recorded prompt may hold text the file does not (a
    # system prompt, tool schemas), so 180 / 60 is no tokenizer ratio: deletions stay proxy
    # tokens, 5 + 7 of steps 0 and 1.
    est = estimate_session(10, STEPS, [Request(2, Usage(180))])
    assert (est.ratio, est.basis, est.rejected) == (1.0, "unconverted", None)
    assert [(r.input, r.saved, r.reasoning) for r in est.requests] == [(180, 12, 14)]


def test_ratio_outside_the_tokenizer_bounds_is_rejected():
    # recorded input that does not grow (a synthetic log) gives no pair; growth of 1000 per 20
    # proxy tokens (50x) is no tokenizer's ratio: both fall back to proxy tokens
    assert session_ratio([10, 30, 60], [(0, 16000), (1, 16000), (2, 16000)]) == (1.0, "unconverted", None)
    assert session_ratio([10, 30, 60], [(0, 14000), (1, 15000), (2, 16500)]) == (1.0, "unconverted", 50.0)
    # the bounds themselves are accepted: 2 and 0.5 per proxy token
    assert session_ratio([10, 30, 60], [(0, 100), (1, 140), (2, 200)]) == (2.0, "growth", None)
    assert session_ratio([10, 30, 60], [(0, 100), (1, 110), (2, 125)]) == (0.5, "growth", None)
    assert session_ratio([10, 30, 60], [(0, 100), (1, 109), (2, 124)])[1] == "unconverted"


def test_large_unrecorded_system_prompt_never_inflates_reasoning():
    # a Claude Code session: every request records 16,000 tokens more than the file holds (its
    # system prompt and tool schemas); the steps grow the input by 24 and 36 recorded tokens
    # for 20 and 30 proxy tokens, 1.2 per proxy token. Reasoning re-sent is the proxy count of
    # earlier steps' reasoning times 1.2: request 1 carries step 0's 6, request 2 steps 0 and
    # 1's 6 + 8 (the old whole-prompt ratio, 16060 / 60, made it 3,748).
    recorded = [Usage(16000), Usage(16024), Usage(16060)]
    est = estimate_session(10, STEPS, [Request(k, u) for k, u in enumerate(recorded)])
    assert (est.ratio, est.basis) == (1.2, "growth")
    assert [r.reasoning for r in est.requests] == pytest.approx([0, 7.2, 16.8])
    assert [r.saved for r in est.requests] == pytest.approx([0, 6, 14.4])
    assert all(r.saved <= r.reasoning for r in est.requests)


def test_a_request_without_usage_after_a_recorded_one_grows_from_it():
    # Codex: request 0 recorded (4000 tokens), requests 1 and 2 logged no usage. Each is the
    # recorded 4000 plus the proxy tokens of the steps added since (20; 20 + 30), not the
    # proxy count of the whole prompt (30; 60), which lacks what only the provider counted.
    est = estimate_session(10, STEPS, [Request(0, Usage(4000)), Request(1), Request(2)])
    assert [r.input for r in est.requests] == [4000, 4020, 4050]
    assert [r.recorded for r in est.requests] == [True, False, False]
    assert [r.saved for r in est.requests] == [0, 5, 12]


def test_saving_never_exceeds_the_recorded_input():
    est = estimate_session(10, [StepTokens(20, 50, 50), StepTokens(5)], [Request(0, Usage(5)), Request(1, Usage(6))])
    assert all(r.saved <= r.input for r in est.requests)


@pytest.mark.parametrize("cache", [None, 0])
def test_totals_add_and_keep_unknown_apart_from_zero(cache):
    a = Totals.of(estimate_session(10, STEPS).requests)
    b = Totals.of(estimate_session(10, STEPS, [Request(0, Usage(50, cache_read_tokens=cache))]).requests)
    both = a + b
    assert both.requests == 4
    assert both.cache_read == (None if cache is None else 0)


def test_sealed_kind_agrees_with_what_the_write_back_edits():
    from iclr_cli.formats.base import OpaqueEdits
    from iclr_cli.formats.writeback import Site, TextRef
    from iclr_cli.savings.measure import plain_upstream, sealed_kind
    from iclr_cli.trajectory import Part, WriteBack

    signed = Part("reasoning", "t", ref=TextRef((Site((0, "a")),), strip_keys=(((0,), "signature"),)), write_back=WriteBack.SIGNED)
    droppable = Part("reasoning", "t", ref=TextRef((Site((0, "a")),), drop=((0, "enc"),)), write_back=WriteBack.OPAQUE)
    undroppable = Part("reasoning", "t", ref=TextRef((Site((0, "a")),)), write_back=WriteBack.OPAQUE)
    # Anthropic's own API and OpenAI's: sealed whatever the write-back does
    assert [sealed_kind(p) for p in (signed, droppable, undroppable)] == ["anthropic", "openai", "openai"]
    # a plain upstream: the signature is dropped and the edit goes through; an encrypted entry is
    # dropped with the edit only under DROP and when there is an entry to drop
    assert [sealed_kind(p, True) for p in (signed, droppable, undroppable)] == [None, None, "openai"]
    assert sealed_kind(droppable, True, OpaqueEdits.KEEP) == "openai"
    assert plain_upstream({"format": "openai"}) and plain_upstream({"format": "litellm-spend", "provider": "deepseek"})
    assert not plain_upstream({"format": "litellm-spend", "provider": "anthropic"})
    assert not plain_upstream({"format": "claude_code"}) and not plain_upstream({"format": "codex"})
