"""The latency budget of ``iclr serve`` without HTTP: steps sent late, both late policies, what
the scorer saw, the decisions kept across a restart, and every path a request could wait on.

Scores are held back with a gate (``FakeScorer(gate=...)``): a request whose step's scoring is
gated can only go late, whatever the machine's speed, so nothing here asserts a time.
"""

from __future__ import annotations

import threading
import time

import orjson
import pytest

from iclr_cli.compress import Settings
from iclr_cli.errors import UsageError
from iclr_cli.policies import parse_variant
from iclr_cli.scoring.base import ScoreRequest
from iclr_cli.scoring.fake import FakeScorer, parse_fake
from iclr_cli.serve import replies
from iclr_cli.serve.batching import BatchingScorer
from iclr_cli.serve.budget import Budget, Waiting, describe, parse_max_wait
from iclr_cli.serve.eager import EagerScorer
from iclr_cli.serve.state import ServeState
from iclr_cli.serve.stats import Stats
from iclr_cli.serve.store_sqlite import SqliteStore

REASONING = "Look at the file first.\n\nMaybe grep for it.\n\nThe answer is in line 3.\n\nCheck the tests too."
SYSTEM = {"role": "system", "content": "You are an agent."}
USER = {"role": "user", "content": "Fix the bug."}
FOREVER = Budget(max_wait=None)


def assistant(i: int, reasoning: str = REASONING) -> dict:
    return {"role": "assistant", "content": None, "reasoning_content": reasoning,
            "tool_calls": [{"id": f"call_{i}", "type": "function", "function": {"name": "bash", "arguments": f'{{"command": "ls {i}"}}'}}]}


def conversation(steps: int, user=USER, reasoning: str = REASONING) -> list[dict]:
    out = [SYSTEM, user]
    for i in range(steps):
        out += [assistant(i, reasoning), {"role": "tool", "tool_call_id": f"call_{i}", "content": f"file{i}.py"}]
    return out


def make(late: str = "compress-later", max_wait: float | None = 0.0, gate: threading.Event | None = None, eager: bool = False, **kw):
    """A state whose scorer waits for ``gate`` before every call (a budget of 0 s: a step is
    compressed only when its scores are ready on arrival)."""
    inner = FakeScorer(gate=gate, record_requests=True)
    batching = BatchingScorer(inner, wait_s=0)
    stats = Stats()
    scorer = EagerScorer(batching, stats) if eager else batching
    settings = Settings(parse_variant("iclr"), score_all=False)
    return ServeState(settings, scorer, inner.tokenizer, stats=stats, budget=Budget(max_wait, late), **kw), inner, batching


def send(state: ServeState, messages: list[dict]) -> list[dict]:
    raw = orjson.dumps({"model": "m", "messages": messages})
    return orjson.loads(state.rewrite(orjson.loads(raw), raw).body)["messages"]


def reasoning_sent(messages: list[dict]) -> list[str]:
    return [m["reasoning_content"] for m in messages if m["role"] == "assistant"]


def settle(future, limit: float = 60) -> None:
    """Wait (not an assertion on time) until ``future`` has its result."""
    deadline = time.monotonic() + limit
    while not future.done() and time.monotonic() < deadline:
        time.sleep(0.002)


def idle(batching: BatchingScorer, limit: float = 60) -> None:
    deadline = time.monotonic() + limit
    while (batching.queued or batching.queue_info()["running_s"] is not None) and time.monotonic() < deadline:
        time.sleep(0.002)


def reference(steps: int) -> list[str]:
    """Step texts as the paper's online rule sends them: every step waits for its scores."""
    state, _, batching = make(max_wait=None)
    out = reasoning_sent(send(state, conversation(steps)))
    batching.close()
    return out


def test_a_step_whose_scores_are_not_ready_goes_upstream_as_generated_and_stays_so_under_as_sent():
    gate = threading.Event()
    state, inner, batching = make("as-sent", gate=gate)
    assert reasoning_sent(send(state, conversation(1))) == [REASONING]
    total = state.stats.total
    assert (total.steps_completed, total.steps_late, total.steps_compressed) == (1, 1, 0)
    (conv,) = state.conversations()
    (stored,) = conv.steps.values()
    assert stored.late and not stored.pending and not conv.late
    gate.set()
    idle(batching)
    state.budget = FOREVER  # from now on every new step waits for its scores
    sent = reasoning_sent(send(state, conversation(3)))
    assert sent[0] == REASONING  # late for good: the provider's cached prefix never changes
    assert all("[SKIP]" in text for text in sent[1:])
    assert (total.steps_completed, total.steps_late, total.steps_late_compressed, total.steps_compressed) == (3, 1, 0, 2)
    batching.close()


def test_compress_later_compresses_a_late_step_at_the_first_request_that_finds_its_scores_ready():
    gate = threading.Event()
    state, inner, batching = make("compress-later", gate=gate)
    assert reasoning_sent(send(state, conversation(1))) == [REASONING]
    (conv,) = state.conversations()
    ((prepared, future),) = conv.late.values()
    assert next(iter(conv.steps.values())).pending
    # not ready at the next request either: still as generated, and the new step is scored on
    # the history as it stands, the late step in it as generated
    sent = reasoning_sent(send(state, conversation(2)))
    assert sent == [REASONING, REASONING] and state.stats.total.steps_late == 2
    gate.set()
    settle(future)
    for _, f in list(conv.late.values()):
        settle(f)
    gate.clear()  # step 2's scoring is held: it goes late in its turn
    sent = reasoning_sent(send(state, conversation(3)))
    ref = reference(2)
    assert sent[0] == ref[0] and "[SKIP]" in sent[0]  # step 0 was scored on the same history as without a budget
    assert "[SKIP]" in sent[1] and sent[2] == REASONING
    # step 1 was scored with step 0 as generated in its history (what the scorer saw then)
    step1 = [r for r in inner.requests_seen if len(r.history) == 1]
    assert step1 and all(REASONING in r.history[0] and "[SKIP]" not in r.history[0] for r in step1)
    total = state.stats.total
    assert total.steps_late_compressed == 2 and total.steps_compressed == 2
    # the rewrite happens once: the next request carries the same compressed steps
    gate.set()
    for _, f in list(conv.late.values()):
        settle(f)
    again = reasoning_sent(send(state, conversation(3)))
    assert again[:2] == sent[:2]
    batching.close()


def test_what_the_late_step_costs_and_saves_is_in_the_accounting():
    gate = threading.Event()
    state, _, batching = make("compress-later", gate=gate)
    send(state, conversation(1))
    generated = state.stats.total.reasoning.generated
    assert generated > 0 and state.stats.total.reasoning.deleted == 0
    gate.set()
    (conv,) = state.conversations()
    settle(next(iter(conv.late.values()))[1])
    state.budget = FOREVER
    send(state, conversation(2))
    total = state.stats.total.reasoning
    assert total.generated == 2 * generated  # the late step's tokens are counted once
    assert total.deleted > 0 and total.generated == total.kept + total.deleted
    batching.close()


@pytest.mark.parametrize("late", ["as-sent", "compress-later"])
def test_a_restart_with_a_state_dir_never_changes_a_decision(tmp_path, late):
    settings = {"variant": "iclr"}
    gate = threading.Event()
    state, _, batching = make(late, gate=gate, store=SqliteStore(tmp_path, settings))
    first = send(state, conversation(1))
    batching.stop()
    state.store.close()
    # restarted with no budget and an open scorer: what was decided stays decided
    again, _, batching = make(late, max_wait=None, store=SqliteStore(tmp_path, settings))
    sent = send(again, conversation(2))
    (stored,) = [s for s in again.conversations()[0].steps.values() if s.late]
    if late == "as-sent":
        assert sent[:4] == first and not stored.pending
    else:  # still pending at the restart: scored again on the history as it stands, compressed when ready
        assert sent[2]["reasoning_content"] == REASONING and stored.pending
        (conv,) = again.conversations()
        settle(next(iter(conv.late.values()))[1])
        sent = send(again, conversation(2))
        assert sent[2]["reasoning_content"] == reference(1)[0]
    decided = send(again, conversation(2))
    batching.close()
    again.store.close()
    # and a second restart sends the same bytes (the later compression was stored too)
    third, _, batching = make(late, max_wait=None, store=SqliteStore(tmp_path, settings))
    assert send(third, conversation(2)) == decided
    batching.close()
    third.store.close()


def test_a_step_with_nothing_to_compress_never_waits_and_is_not_counted_as_compressed():
    gate = threading.Event()  # never opened: any scoring would make the step late
    state, inner, batching = make("compress-later", gate=gate)
    sent = reasoning_sent(send(state, conversation(1, reasoning="One block only.")))
    assert sent == ["One block only."] and inner.calls == 0
    total = state.stats.total
    assert (total.steps_completed, total.steps_compressed, total.steps_late) == (1, 0, 0)
    batching.close()


def test_a_request_queued_behind_another_conversation_goes_late_within_the_budget():
    gate = threading.Event()
    state, _, batching = make("compress-later", max_wait=0.05, gate=gate)
    send(state, conversation(1))  # conversation A: its scoring holds the scorer
    other = conversation(1, user={"role": "user", "content": "Another task."})
    assert reasoning_sent(send(state, other)) == [REASONING]  # B waited its budget at most, then went on
    queue = batching.queue_info()
    assert queue["depth"] == 1 and queue["ahead"] == 1 and queue["waited_for"] == 0  # B's call, demoted
    assert queue["oldest_s"] is not None and queue["running_s"] is not None
    assert state.stats.total.steps_late == 2
    assert len(state.stats.total.scoring_wait_s) == 2
    gate.set()
    batching.close()


def test_a_step_scored_ahead_and_still_running_is_waited_for_within_the_budget_only():
    gate = threading.Event()
    state, inner, batching = make("as-sent", gate=gate, eager=True)
    from iclr_cli.serve.chat import CHAT
    from iclr_cli.serve.dialect import Reply

    first = [SYSTEM, USER]
    raw = orjson.dumps({"model": "m", "messages": first})
    rw = state.rewrite(orjson.loads(raw), raw)
    reply = Reply([assistant(0)])
    conv = replies.record_reply(state, None, rw.request, reply, CHAT)
    assert replies.prefetch(state, conv, rw.request, reply, CHAT)  # queued ahead; the gate holds it
    assert reasoning_sent(send(state, conversation(1))) == [REASONING]
    assert state.stats.eager.to_record()["waits"] == 1 and state.stats.eager.misses == 0
    assert state.stats.total.steps_late == 1
    gate.set()
    batching.close()


def test_where_a_call_stands_and_what_a_waiting_request_is_told():
    gate = threading.Event()
    inner = FakeScorer(gate=gate, tokens_per_s=1e9)  # paced: keeps per-stream state like the real scorer
    batching = BatchingScorer(inner, wait_s=0)
    step = "[reasoning]\nOne.\n\nTwo."

    def req(stream):
        return ScoreRequest(stream, ("[user]\nGo.\n\n",), (), step, ((12, 16), (18, len(step))))

    running = batching.submit([req("a")])
    waiting = Waiting(conversation="a")
    deadline = time.monotonic() + 60
    while batching.where(running).state != "running" and time.monotonic() < deadline:
        time.sleep(0.002)
    waiting.future = running
    assert batching.where(running).prefill and "prefill of P" in describe(waiting, batching)
    queued = batching.submit([req("b")])
    waiting.future = queued
    assert batching.where(queued).ahead == 0 and "scorer queue" in describe(waiting, batching)
    waiting.upstream = True
    assert "upstream" in describe(waiting, batching)
    gate.set()
    settle(queued)
    assert batching.where(queued).state == "done" and not inner.prefills(req("a")) and not inner.prefills(req("b"))
    again = batching.submit([req("a")])
    settle(again)
    batching.close()


def test_a_wait_the_scorer_expects_to_outlast_the_budget_is_not_waited():
    gate = threading.Event()
    state, _, batching = make("compress-later", max_wait=3600.0, gate=gate)
    batching.eta = lambda future: 1e9  # expected far past the deadline: a prefill of P on a CPU
    deadlines: list = []
    wait = Waiting.wait

    def spy(self, future, deadline):
        deadlines.append((deadline, time.monotonic()))
        return wait(self, future, deadline)

    Waiting.wait = spy
    try:
        assert reasoning_sent(send(state, conversation(1))) == [REASONING]
    finally:
        Waiting.wait = wait
    ((deadline, called),) = deadlines
    assert deadline <= called  # went late at once instead of waiting the hour
    assert state.stats.total.steps_late == 1
    gate.set()
    batching.close()


def test_the_scorer_estimates_a_call_from_recent_batches_of_its_kind():
    gate = threading.Event()
    inner = FakeScorer(gate=gate, tokens_per_s=1e9)
    batching = BatchingScorer(inner, wait_s=0)
    step = "[reasoning]\nOne.\n\nTwo."

    def req(stream):
        return ScoreRequest(stream, ("[user]\nGo.\n\n",), (), step, ((12, 16), (18, len(step))))

    first = batching.submit([req("a")])
    assert until_running(batching, first)
    time.sleep(0.05)
    # nothing of its kind has finished: expected to run as long again as it has so far
    assert batching.eta(first) >= 0.05
    queued = batching.submit([req("b")])
    assert batching.eta(queued) >= 0.05  # behind it (not an assertion on speed: a lower bound)
    gate.set()
    settle(queued)
    assert batching.eta(queued) == 0.0 and not inner.prefills(req("b"))
    typical = batching.times.typical("prefill")  # two prefills (streams a and b) have run
    gate.clear()
    again = batching.submit([req("a")])  # kept: no prefill, a kind that has not finished yet
    assert until_running(batching, again)
    later = batching.submit([req("c")])  # a prefill queued behind it
    assert batching.eta(later) >= typical
    gate.set()
    settle(later)
    batching.close()


def until_running(batching, future, limit: float = 60) -> bool:
    deadline = time.monotonic() + limit
    while batching.where(future).state != "running" and time.monotonic() < deadline:
        time.sleep(0.002)
    return batching.where(future).state == "running"


def test_budget_and_option_values():
    assert Budget(0.5).deadline(10.0) == 10.5 and FOREVER.deadline(10.0) is None
    assert parse_max_wait(float("inf")) is None and parse_max_wait(0) == 0
    with pytest.raises(ValueError):
        Budget(0.5, "never")
    with pytest.raises(ValueError):
        parse_max_wait(-1)


def test_paced_fake_charges_p_once_then_only_new_tokens():
    fake = FakeScorer(tokens_per_s=1e9)
    prompt = ("[system]\n" + "word " * 200 + "\n\n",)
    step = "[reasoning]\nOne.\n\nTwo."
    spans = ((12, 16), (18, len(step)))
    first = fake.score([ScoreRequest("s", prompt, (), step, spans)])
    p_tokens = fake.tokens_run
    assert p_tokens > 400
    later = fake.score([ScoreRequest("s", prompt, ("[tool]\nok\n\n",), step, spans)])
    assert fake.tokens_run - p_tokens < 20  # only what follows the kept prefix
    assert FakeScorer().score([ScoreRequest("s", prompt, ("[tool]\nok\n\n",), step, spans)]) == later  # same scores at any pace
    assert first[0].blocks and parse_fake("fake") is None and parse_fake("fake:300") == 300
    for bad in ("fake:0", "fake:x", "fake:-3", "fake:inf"):
        with pytest.raises(UsageError, match="fake:N"):
            parse_fake(bad)


def test_a_gated_fake_stops_at_once_when_cancelled():
    gate = threading.Event()
    fake = FakeScorer(gate=gate)
    out: list = []
    step = "[reasoning]\nOne.\n\nTwo."

    def run():
        try:
            fake.score([ScoreRequest("s", (), (), step, ((12, 16), (18, len(step))))])
        except Exception as exc:
            out.append(exc)

    t = threading.Thread(target=run)
    t.start()
    fake.cancel()
    t.join(60)
    assert type(out[0]).__name__ == "ScoringCancelled" and not gate.is_set()


def test_the_budget_options_from_the_command_line_and_a_config_file(tmp_path):
    import typer

    from iclr_cli.cli.app import build_app

    serve = typer.main.get_command(build_app()).commands["serve"]
    defaults = serve.make_context("serve", ["--upstream", "http://127.0.0.1:9/v1"]).params
    assert defaults["max_wait"] == 0.5 and defaults["late"].value == "when-it-pays"
    config = tmp_path / "serve.toml"
    config.write_text('upstream = "http://127.0.0.1:9/v1"\nmax-wait = inf\nlate = "compress-later"\n')
    params = serve.make_context("serve", ["--config", str(config)]).params
    assert params["max_wait"] == float("inf") and params["late"].value == "compress-later"
    with pytest.raises(Exception, match="greater than or equal to 0"):
        serve.make_context("serve", ["--upstream", "http://127.0.0.1:9/v1", "--max-wait", "-1"])


def test_a_step_fed_along_the_stream_is_its_own_kind_of_batch():
    """Feeds (many short batches, and a request's context feed of hundreds of tokens) never
    stand for a finished step's time in the estimate of a wait."""
    from iclr_cli.scoring.base import ScoreRequest
    from iclr_cli.scoring.fake import FakeScorer
    from iclr_cli.serve.batching import BatchingScorer

    inner = FakeScorer(tokens_per_s=1e9)
    batching = BatchingScorer(inner)
    try:
        step = ScoreRequest("a", ("P",), (), "[reasoning]\nx y", ((12, 15),))
        fed = ScoreRequest("a", ("P",), (), "[reasoning]\nx", (), partial=True)
        assert batching._kind([fed]) == "prefill"  # nothing kept for stream a yet: it runs P
        batching.score([fed])
        assert batching._kind([fed]) == "feed" and batching._kind([step]) == "step" and batching._kind([fed, step]) == "step"
        assert batching.times.seen("prefill") and not batching.times.seen("step")
    finally:
        batching.close()


def test_each_wait_logs_what_was_expected_against_what_came(caplog):
    """The log's calibration of the decision to wait (``--log-level debug``): the expected time
    beside the time the scores took, or that they missed the budget."""
    import logging
    import threading
    from concurrent.futures import Future

    from iclr_cli.serve.budget import Waiting, wait_within
    from iclr_cli.serve.stats import Stats

    class Expects:
        def eta(self, future):
            return 0.25

        def where(self, future):
            return None

    soon, never = Future(), Future()
    threading.Timer(0.05, soon.set_result, ([object()],)).start()
    with caplog.at_level(logging.DEBUG, logger="iclr.serve"):
        result, cause = wait_within(Expects(), Stats(), Waiting(conversation="c1"), soon, time.monotonic() + 0.4)
        assert result is not None and cause is None
        result, cause = wait_within(Expects(), Stats(), Waiting(conversation="c2"), never, time.monotonic() + 0.3)
        assert result is None and cause == "queue"
        assert wait_within(Expects(), Stats(), Waiting(conversation="c3"), never, time.monotonic() + 0.1) == (None, "predicted")
    said = [r.getMessage() for r in caplog.records]
    ready = next(m for m in said if m.startswith("conversation c1: scores expected in 0.25 s, ready in "))
    assert 0.04 <= float(ready.rsplit(" ", 2)[1]) < 0.4
    assert "conversation c2: scores expected in 0.25 s, not ready within the budget" in said
    assert any(m.startswith("conversation c3: scores expected in 0.25 s, 0.1") and m.endswith("not waited for") for m in said)
