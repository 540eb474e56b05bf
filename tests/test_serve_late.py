"""A late step is not lost: ``--late when-it-pays`` (:mod:`iclr_cli.serve.late`).

Steps whose scores missed the latency budget go upstream as generated; their scoring goes on,
and the conversation's late steps are compressed together at one request when that prefix
break is free (the provider's cache expired) or pays at the provider's cache prices. Every
request says what it did (one INFO line) and ``/stats`` counts late steps by cause and prefix
breaks by whose change they were.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace

import pytest

from test_serve_budget import REASONING, conversation, make, reasoning_sent, reference, send, settle

from iclr_cli.serve.late import ANTHROPIC, ANTHROPIC_1H, CACHE_RULES, Moment, break_now, rewrite_cost, rule_for


# -- the policy, a pure function -----------------------------------------------------------------

def test_a_break_is_taken_only_when_it_is_free_or_pays():
    # 1,000 tokens that would be read from the cache, 100 of them removed
    early = Moment(idle_s=10, tail_tokens=1000, saved_tokens=100, later_requests=1)
    # extra now: 900 * 1.25 - 1000 * 0.1 = 1025 token-prices; saved per later request: 10
    assert rewrite_cost(ANTHROPIC, 1000, 100, 1) == pytest.approx(1015)
    assert break_now(ANTHROPIC, early) is None
    assert break_now(ANTHROPIC, Moment(10, 1000, 100, 102)) is None  # 1,020 < 1,025
    assert break_now(ANTHROPIC, Moment(10, 1000, 100, 103)) == "pays"  # 1,030 >= 1,025
    # the cache expired after 5 minutes without a request: the prompt is written again anyway
    assert break_now(ANTHROPIC, Moment(301, 1000, 100, 1)) == "cache_expired"
    assert break_now(ANTHROPIC, Moment(299, 1000, 100, 1)) is None
    assert break_now(ANTHROPIC_1H, Moment(301, 1000, 100, 1)) is None
    # the client rewrote everything from before the late step itself
    assert break_now(ANTHROPIC, Moment(10, 0, 100, 1, client_changed=True)) == "client_break"
    # nothing to remove: never a break, not even a free one
    assert break_now(ANTHROPIC, Moment(4000, 1000, 0, 1000)) is None


def test_each_upstream_kind_has_its_documented_cache_rule():
    assert (rule_for("anthropic").ttl_s, rule_for("anthropic").write, rule_for("anthropic").read) == (300.0, 1.25, 0.1)
    assert rule_for("anthropic", one_hour=True) is ANTHROPIC_1H and ANTHROPIC_1H.write == 2.0
    assert rule_for("openai") is CACHE_RULES["openai"] and CACHE_RULES["openai"].write == 1.0
    assert rule_for("deepseek").ttl_s is None
    # unknown providers and local servers: the dearest documented write premium
    assert rule_for("local") is ANTHROPIC and rule_for(None) is ANTHROPIC
    assert rule_for("openai", one_hour=True) is CACHE_RULES["openai"]
    # with no write premium a break pays sooner: OpenAI 1,000 / 100 pays after 80 later requests
    assert break_now(CACHE_RULES["openai"], Moment(10, 1000, 100, 80)) == "pays"
    assert break_now(ANTHROPIC, Moment(10, 1000, 100, 80)) is None


# -- in the proxy ----------------------------------------------------------------------------------

def _two_late_steps():
    """A when-it-pays proxy with steps 0 and 1 sent late and their scores now ready."""
    gate = threading.Event()
    state, inner, batching = make("when-it-pays", gate=gate)
    assert reasoning_sent(send(state, conversation(1))) == [REASONING]
    assert reasoning_sent(send(state, conversation(2))) == [REASONING, REASONING]
    (conv,) = state.conversations()
    assert len(conv.late) == 2 and all(s.pending for s in conv.steps.values())
    gate.set()
    for _, future in list(conv.late.values()):
        settle(future)
    state.budget = replace(state.budget, max_wait=None)  # from now on a new step waits for its scores
    return state, conv, batching


def test_late_steps_whose_break_does_not_pay_yet_stay_as_generated():
    state, conv, batching = _two_late_steps()
    sent = reasoning_sent(send(state, conversation(3)))
    assert sent[:2] == [REASONING, REASONING]  # 2 requests so far: one cache rewrite would cost more
    assert "[SKIP]" in sent[2]  # step 2 was scored in time (the gate is open now)
    total = state.stats.total
    assert (total.steps_late, total.steps_late_compressed, total.prefix_breaks) == (2, 0, {})
    assert len(conv.late) == 2 and state.stats.total.late_causes == {"predicted": 2}  # a 0 s budget: not waited at all
    batching.close()


@pytest.mark.parametrize("why", ["pays", "cache_expired"])
def test_the_late_steps_are_compressed_together_at_one_break(why):
    state, conv, batching = _two_late_steps()
    if why == "pays":
        conv.seen = 100_000  # a long session: the removed tokens pay for the rewrite
    else:
        conv.last_request = time.monotonic() - 301  # Anthropic's 5-minute cache is gone
    sent = reasoning_sent(send(state, conversation(3)))
    ref = reference(2)
    assert sent[0] == ref[0] and "[SKIP]" in sent[0]  # step 0 scored on the history it had
    assert "[SKIP]" in sent[1] and "[SKIP]" in sent[2]
    total = state.stats.total
    assert (total.steps_late, total.steps_late_compressed, total.steps_compressed) == (2, 2, 3)
    assert total.prefix_breaks == {"proxy": 1} and not conv.late
    record = total.to_record()
    assert (record["steps_late_by_cause"], record["prefix_breaks"], record["prefix_breaks_by_cause"]) == ({"predicted": 2}, 1, {"proxy": 1})
    metrics = state.stats.metrics.render()[0].decode()
    assert 'iclr_serve_steps_late_total{cause="predicted"} 2.0' in metrics
    assert 'iclr_serve_prefix_breaks_total{cause="proxy"} 1.0' in metrics and "iclr_serve_steps_late_compressed_total 2.0" in metrics
    # the break happens once: the next request extends this one
    again = reasoning_sent(send(state, conversation(4)))
    assert again[:3] == sent and total.prefix_breaks == {"proxy": 1}
    batching.close()


def test_a_client_that_changes_its_own_history_is_its_own_prefix_break():
    state, _, batching = make("when-it-pays", max_wait=None)
    send(state, conversation(2))
    edited = conversation(3)
    edited[3] = {**edited[3], "content": "file0.py, edited"}  # the client rewrote a tool result
    send(state, edited)
    assert state.stats.total.prefix_breaks == {"client": 1}
    batching.close()


def test_every_request_says_what_it_did_in_one_info_line(caplog):
    import httpx
    from serve_fixtures import proxy, scripted_upstream
    from test_serve_eager import drive, responder

    with caplog.at_level(logging.INFO, logger="iclr.serve"), scripted_upstream(responder(3)) as up, proxy(up.url) as (url, _):
        drive(url, "Fix the bug.")
        httpx.post(url + "/chat/completions", content=b"not json{", timeout=30)
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO and r.name == "iclr.serve"]
    assert len(lines) == 5  # one per request: the first, three that decide a step, the bad body
    assert lines[0].startswith("a first request (no step to decide yet); P and the task queued for the scorer; added ")
    assert lines[1].startswith("conversation ") and "1 step decided; 1 compressed, 0 late" in lines[1]
    assert "waited" in lines[-2] and "added" in lines[-2]
    assert lines[-1].startswith("a body that is not a chat request (not JSON): forwarded as sent")


def test_a_restart_keeps_a_late_step_pending_and_scores_it_again(tmp_path):
    from iclr_cli.serve.store_sqlite import SqliteStore

    gate = threading.Event()
    state, _, batching = make("when-it-pays", gate=gate, store=SqliteStore(tmp_path, {"variant": "iclr"}))
    first = send(state, conversation(1))
    batching.stop()
    state.store.close()
    again, _, batching = make("when-it-pays", max_wait=None, store=SqliteStore(tmp_path, {"variant": "iclr"}))
    sent = send(again, conversation(2))
    assert sent[:4] == first  # the late step as it was sent: the break has not paid
    (conv,) = again.conversations()
    (late,) = [s for s in conv.steps.values() if s.late]
    assert late.pending and len(conv.late) == 1  # its scoring queued again in this process
    settle(next(iter(conv.late.values()))[1])
    conv.last_request = time.monotonic() - 301  # the provider's cache expired: compressed now
    sent = send(again, conversation(2))
    assert sent[2]["reasoning_content"] == reference(1)[0] and again.stats.total.prefix_breaks == {"proxy": 1}
    batching.close()
    again.store.close()
