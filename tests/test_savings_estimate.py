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
    usage = [Usage(100, cache_read_tokens=0), Usage(160, cache_read_tokens=90), Usage(250, cache_read_tokens=170)]
    est = estimate_session(10, STEPS, [Request(k, u) for k, u in enumerate(usage)])
    # recorded growth (160-100) + (250-160) = 150 over proxy growth 20 + 30 = 50: 3 per proxy token
    assert (est.ratio, est.basis, est.recorded) == (3.0, "growth", 3)
    assert [r.input for r in est.requests] == [100, 160, 250]
    assert [r.saved for r in est.requests] == [0, 15, 36]
    # step 0 ends at 160 recorded tokens (request 1's input): inside request 2's cache read
    # (170) but not request 1's (90); step 1 ends at 250, never inside. So only request 2's
    # cache read loses step 0's 3 x 5 tokens.
    assert [r.cache_saved for r in est.requests] == [0, 0, 15]
    total = Totals.of(est.requests)
    assert (total.input_after, total.cache_read, total.cache_read_after) == (459, 260, 245)


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


def test_one_recorded_request_takes_the_prompt_ratio():
    # a traffic-log line: only the last request is logged, 180 provider tokens for a prompt
    # of 10 + 20 + 30 = 60 proxy tokens
    est = estimate_session(10, STEPS, [Request(2, Usage(180))])
    assert (est.ratio, est.basis) == (3.0, "prompt")
    assert [r.saved for r in est.requests] == [36]


def test_ratio_leaves_out_pairs_whose_recorded_input_shrank():
    # a compaction between requests 1 and 2: the recorded input drops, that pair is left out
    assert session_ratio([10, 30, 60], [(0, 100), (1, 160), (2, 40)]) == (3.0, "growth")
    assert session_ratio([10, 30, 60], []) == (1.0, "proxy")


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
