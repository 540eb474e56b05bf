"""Work ahead runs earliest deadline first (:mod:`iclr_cli.serve.schedule`, run by :mod:`iclr_cli.serve.batching`).

With several conversations at once the scorer's queue holds finished steps (wanted within a
tool's time), pieces of streaming replies (wanted by the reply's end), requests' P and history
(wanted before their reply streams) and late steps (wanted whenever the scorer is free). The
most urgent goes first, one stream's calls keep their order, and work that cannot be on time
never joins a batch of work that can.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

from iclr_cli.scoring.base import ScoreRequest
from iclr_cli.scoring.fake import FakeScorer
from iclr_cli.serve.batching import BatchingScorer
from iclr_cli.serve.schedule import BatchTimes, Call, label, pick_ahead


def _request(stream: str, label: str, partial: bool = False) -> ScoreRequest:
    step = f"{label} alpha beta gamma.\n\n{label} delta epsilon."
    return ScoreRequest(stream, ("P",), (), step, ((0, len(label) + 18), (len(label) + 20, len(step))), partial=partial)


def _held(max_batch: int):
    """A batching scorer whose first call (``hold``) blocks until released, so that the test can
    queue work behind it."""
    gate = threading.Event()
    inner = FakeScorer(gate=gate, record_requests=True)
    batching = BatchingScorer(inner, max_batch=max_batch, wait_s=0, late_idle_s=0)
    hold = batching.submit([_request("hold", "hold")], eager=True, due=0)
    deadline = time.monotonic() + 30
    while batching.queue_info()["running_s"] is None and time.monotonic() < deadline:
        time.sleep(0.001)
    return batching, inner, gate, hold


def _order(inner: FakeScorer) -> list[str]:
    return [r.step.split(" ", 1)[0] for r in inner.requests_seen][1:]  # after the first call


def test_the_most_urgent_work_ahead_runs_first():
    batching, inner, gate, _ = _held(max_batch=1)
    futures = [
        batching.submit([_request("late", "late")], eager=True),  # a late step: whenever
        batching.submit([_request("a", "context", partial=True)], eager=True, due=3.0),
        batching.submit([_request("b", "feed", partial=True)], eager=True, due=2.0),
        batching.submit([_request("c", "step")], eager=True, due=1.0),
    ]
    gate.set()
    for f in futures:
        f.result(timeout=30)
    assert _order(inner) == ["step", "feed", "context", "late"]
    batching.close()


def test_a_stream_keeps_its_order_and_is_as_urgent_as_its_most_urgent_call():
    batching, inner, gate, _ = _held(max_batch=1)
    futures = [
        batching.submit([_request("b", "otherfeed", partial=True)], eager=True, due=1.5),
        batching.submit([_request("a", "feed", partial=True)], eager=True, due=2.0),
        batching.submit([_request("a", "step")], eager=True, due=1.0),  # continues a's feed: after it
    ]
    gate.set()
    for f in futures:
        f.result(timeout=30)
    assert _order(inner) == ["feed", "step", "otherfeed"]
    batching.close()


def test_conversations_due_alike_share_a_batch_and_late_work_runs_apart():
    batching, inner, gate, _ = _held(max_batch=8)
    calls_before = inner.calls
    futures = [batching.submit([_request(s, "step")], eager=True, due=1.0) for s in ("a", "b", "c")]
    futures.append(batching.submit([_request("d", "late")], eager=True))
    gate.set()
    for f in futures:
        f.result(timeout=30)
    # after the hold: one batch of the three steps, then the late one on its own
    assert inner.calls - calls_before == 2 and batching.largest_batch == 3
    assert _order(inner) == ["step", "step", "step", "late"]
    batching.close()


def test_a_demoted_call_waits_behind_work_that_can_still_be_on_time():
    batching, inner, gate, _ = _held(max_batch=1)
    waited = batching.submit([_request("a", "missed")])  # a request waited for it, then gave up
    assert batching.demote(waited)
    on_time = batching.submit([_request("b", "step")], eager=True, due=1.0)
    gate.set()
    waited.result(timeout=30)
    on_time.result(timeout=30)
    assert _order(inner) == ["step", "missed"]
    batching.close()


def test_a_prefill_of_p_runs_alone():
    gate = threading.Event()
    inner = FakeScorer(gate=gate, record_requests=True, tokens_per_s=1e9)  # paced: a stream without state prefills
    batching = BatchingScorer(inner, max_batch=8, wait_s=0)
    hold = batching.submit([_request("kept", "hold")], eager=True, due=0)
    deadline = time.monotonic() + 30
    while batching.queue_info()["running_s"] is None and time.monotonic() < deadline:
        time.sleep(0.001)
    futures = [batching.submit([_request(s, "first")], eager=True, due=3.0) for s in ("a", "b")]
    futures.append(batching.submit([_request("kept", "step")], eager=True, due=1.0))
    gate.set()
    for f in (hold, *futures):
        f.result(timeout=30)
    # the step of the stream with kept state first, then each conversation's first call alone
    assert inner.calls == 4 and batching.largest_batch == 1
    assert _order(inner) == ["step", "first", "first"]
    batching.close()


def test_the_scorer_says_where_its_work_went():
    inner = FakeScorer(tokens_per_s=1e9)  # paced: it counts the tokens it runs after each stream's kept ones
    batching = BatchingScorer(inner, wait_s=0, late_idle_s=0)
    context = ScoreRequest("a", ("P alpha beta",), ("history gamma delta",), "", (), partial=True)
    batching.submit([context], eager=True, due=3.0).result(timeout=30)  # a's first call: a prefill
    batching.submit([_request("a", "feed", partial=True)], eager=True, due=2.0).result(timeout=30)
    batching.submit([_request("a", "step")], eager=True, due=1.0).result(timeout=30)
    batching.submit([_request("a", "waited")]).result(timeout=30)
    batching.submit([_request("a", "late")], eager=True).result(timeout=30)
    work = batching.work()
    assert {k: v["batches"] for k, v in work.items()} == {"prefill": 1, "step": 1, "waited_for": 1, "reply": 1, "context": 0, "late": 1}
    assert work["prefill"]["forward_tokens"] > 0 and sum(v["forward_tokens"] for v in work.values()) == inner.tokens_run
    batching.close()


def test_on_a_cpu_each_call_is_its_own_batch():
    class CpuFake(FakeScorer):
        device_type = "cpu"

    gate = threading.Event()
    inner = CpuFake(gate=gate, record_requests=True)
    batching = BatchingScorer(inner, max_batch=32, wait_s=0)
    elsewhere = BatchingScorer(FakeScorer(), max_batch=32)
    assert batching.max_calls == 1 and elsewhere.max_calls == 32
    elsewhere.close()
    hold = batching.submit([_request("hold", "hold")], eager=True, due=0)
    deadline = time.monotonic() + 30
    while batching.queue_info()["running_s"] is None and time.monotonic() < deadline:
        time.sleep(0.001)
    ahead = [batching.submit([_request(s, "step")], eager=True, due=1.0) for s in ("a", "b")]
    waited = [batching.submit([_request(s, "waited")]) for s in ("c", "d")]
    gate.set()
    for f in (hold, *ahead, *waited):
        f.result(timeout=30)
    # one result at a time: the first of four steps is not held until the fourth is done
    assert inner.calls == 5 and batching.largest_batch == 1
    assert _order(inner) == ["waited", "waited", "step", "step"]
    batching.close()


def test_late_work_waits_for_a_quiet_scorer():
    inner = FakeScorer(record_requests=True)
    batching = BatchingScorer(inner, wait_s=0, late_idle_s=5.0)
    batching.submit([_request("a", "step")], eager=True, due=1.0).result(timeout=30)
    late = batching.submit([_request("b", "late")], eager=True)
    on_time = batching.submit([_request("c", "step")], eager=True, due=1.0)
    on_time.result(timeout=30)
    # on-time work ran at once; the late call waits until nothing else has run for 5 s
    assert batching.where(late).state == "queued" and _order(inner) == ["step"]
    late.result(timeout=60)
    assert _order(inner) == ["step", "late"] and batching.work()["late"]["batches"] == 1
    batching.close()


def test_a_late_steps_long_scoring_does_not_make_a_finished_step_look_slow():
    # A late step's scoring reads all of its reasoning (nothing was fed along its stream in
    # time); a finished step scored ahead after its pieces were fed runs a word or two. Were
    # the late ones counted, every request would expect its step later than the budget and
    # not wait at all (budget.wait_within's "predicted").
    inner = FakeScorer(tokens_per_s=400)
    batching = BatchingScorer(inner, wait_s=0, late_idle_s=0)
    words = " ".join(f"w{i}" for i in range(200))  # 200 fake tokens: half a second at this pace

    def step(stream: str, text: str) -> ScoreRequest:
        return ScoreRequest(stream, ("P",), (), text, ((0, len(text)),))

    for stream in ("a", "b", "c"):
        batching.submit([step(stream, "w0")], eager=True, due=1.0).result(timeout=30)  # keeps the stream's state
        batching.submit([step(stream, words)], eager=True).result(timeout=30)  # late: the whole reasoning
    batching.submit([step("a", words + " end")], eager=True, due=1.0).result(timeout=30)  # on time: one word more
    running = batching.submit([step("d", words)], eager=True, due=1.0)  # a new stream's prefill, ~0.5 s
    deadline = time.monotonic() + 30
    while batching.where(running).state != "running" and time.monotonic() < deadline:
        time.sleep(0.001)
    queued = batching.submit([step("b", words + " end")], eager=True, due=1.0)
    # the queued finished step is expected right after the running prefill, not half a second later
    assert batching.eta(queued) - batching.eta(running) < 0.2
    assert batching.work()["late"]["batches"] == 3
    queued.result(timeout=30)
    batching.close()


def _call(stream: str, due: float, *, partial: bool = False, step: str = "s", waited: bool = False) -> Call:
    req = ScoreRequest(stream, ("P",), (), step, ((0, len(step)),) if step and not partial else (), partial=partial)
    return Call([req], Future(), 0.0, due, waited)


def test_pick_ahead_takes_the_earliest_head_of_each_stream_and_keeps_late_work_apart():
    kind = lambda requests: "step"  # noqa: E731
    a1, a2, b, late = _call("a", 9.0), _call("a", 1.0), _call("b", 5.0), _call("c", float("inf"))
    # a2 is due first, but a1 is queued before it: stream a runs a1 first, as urgent as a2
    assert pick_ahead([a1, a2, b, late], kind, max_batch=8, max_calls=1) == [a1]
    assert pick_ahead([b, a1, a2, late], kind, max_batch=8, max_calls=8) == [a1, b]  # never two of one stream
    assert pick_ahead([late, b], kind, max_batch=8, max_calls=8) == [b]  # late work joins no on-time batch
    assert pick_ahead([late], kind, max_batch=8, max_calls=8) == [late]
    assert pick_ahead([], kind, max_batch=8, max_calls=8) == []
    prefill = lambda requests: "prefill" if requests[0].stream == "b" else "step"  # noqa: E731
    assert pick_ahead([b, a2], prefill, max_batch=8, max_calls=8) == [a2]  # a prefill of P joins no batch...
    assert pick_ahead([b, _call("d", 7.0)], prefill, max_batch=8, max_calls=8) == [b]  # ...and runs alone when it is


def test_label_says_what_a_batch_was_for():
    assert label([_call("a", 1.0)], prefill=True) == "prefill"
    assert label([_call("a", float("inf"))], prefill=False) == "late"
    assert label([_call("a", float("inf"), waited=True)], prefill=False) == "waited_for"
    assert label([_call("a", 1.0, partial=True, step="")], prefill=False) == "context"
    assert label([_call("a", 1.0, partial=True, step="half a")], prefill=False) == "reply"
    assert label([_call("a", 1.0), _call("b", 1.0, partial=True)], prefill=False) == "step"


def test_batch_times_keep_late_work_out_of_the_typical_time():
    times = BatchTimes()
    assert times.typical("step") is None
    for seconds in (0.2, 0.4, 0.3):
        times.record("step", "step", seconds, 10)
    times.record("step", "late", 9.0, 500)
    assert times.typical("step") == 0.3 and times.seen("step") == 3
    work = times.work()
    assert work["late"] == {"batches": 1, "seconds": 9.0, "forward_tokens": 500}
    assert work["step"]["batches"] == 3 and work["step"]["forward_tokens"] == 30
