"""Stopping ``iclr serve`` does not wait for the scoring in progress.

The tiny random Llama's decoder is slowed to one forward chunk per half second and the step
is long enough for dozens of chunks, so a job run to its end would take tens of seconds.
Stopping the scorer must abandon it between two chunks: the tests count the chunks that ran
(never a wall-clock bound) and check what a request waiting for it got (503, nothing stored).
"""

from __future__ import annotations

import threading

import httpx
import orjson
import pytest

torch = pytest.importorskip("torch")

from replay_fixtures import call, completion
from serve_fixtures import proxy, scripted_upstream
from tiny_llama import WORDS, scorer, tiny, tiny_dir  # noqa: F401

from iclr_cli.scoring.base import ScoreRequest, ScoringCancelled
from iclr_cli.serve.batching import BatchingScorer

CHUNK = 4  # forward_chunk: tokens per forward step


class Slow:
    """A decoder that waits ``pace`` seconds before each forward chunk and counts them."""

    def __init__(self, inner, pace: float = 0.5):
        self.inner, self.pace = inner, pace
        self.calls = 0
        self.started = threading.Event()
        self._never = threading.Event()

    def __call__(self, **kw):
        self.calls += 1
        self.started.set()
        self._never.wait(self.pace)
        return self.inner(**kw)


def slow_scorer(tiny, pace: float = 0.5):
    s = scorer(tiny, forward_chunk=CHUNK, batch_size=1)
    slow = Slow(s._engine.base, pace)
    s._engine.base = slow
    return s, slow


def long_reasoning(n: int = 240) -> str:
    words = [WORDS[(i * 7) % len(WORDS)] for i in range(n)]
    return "\n\n".join(" ".join(words[a : a + 40]) + "." for a in range(0, n, 40))


def chunks_for(s, text: str) -> int:
    """Forward chunks a job over ``text`` alone needs at least."""
    return len(s.tokenizer.encode(text)[0]) // CHUNK


def test_stopping_the_batching_scorer_abandons_its_job_between_chunks(tiny):
    s, slow = slow_scorer(tiny)
    text = long_reasoning()
    needed = chunks_for(s, text)
    assert needed >= 40  # run to its end, the job would take 20 s or more
    batching = BatchingScorer(s, wait_s=0)
    job = batching.submit([ScoreRequest("conv", ("Fix the bug.\n\n",), (), text, ((0, len(text)),))], eager=True)
    queued = batching.submit([ScoreRequest("other", ("P\n\n",), (), text, ((0, len(text)),))], eager=True)
    assert slow.started.wait(60)
    batching.close()
    ran = slow.calls
    assert ran < needed and not batching._thread.is_alive()
    with pytest.raises(ScoringCancelled):
        job.result(timeout=0)
    with pytest.raises(ScoringCancelled):  # queued behind it: never started
        queued.result(timeout=0)
    with pytest.raises(ScoringCancelled):
        batching.submit([ScoreRequest("late", (), (), "x", ((0, 1),))])
    assert slow.calls == ran


def test_shutdown_cancels_scoring_ahead_and_a_waiting_request_gets_503(tiny):
    s, slow = slow_scorer(tiny)
    text = long_reasoning()
    assert chunks_for(s, text) >= 40
    first = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Fix the bug."}]
    reply = completion(None, [call("bash", {"command": "ls"}, call_id="call_0")], reasoning_content=text)
    answer: dict = {}
    with scripted_upstream([reply, completion("done")]) as up, proxy(up.url, scorer=s, tokenizer=s.tokenizer) as (url, state):
        resp = httpx.post(url + "/chat/completions", json={"model": "m", "messages": first}, timeout=60)
        assert resp.status_code == 200
        assert slow.started.wait(60)  # the reply's step is being scored ahead, chunk by chunk
        message = resp.json()["choices"][0]["message"]
        second = [*first, message, {"role": "tool", "tool_call_id": "call_0", "content": "out"}]
        entered = threading.Event()
        rewrite = state.rewrite

        def rewriting(*args):
            entered.set()
            return rewrite(*args)

        state.rewrite = rewriting

        def agent():  # the next request: it needs that step compressed, so it waits for it
            answer["resp"] = httpx.post(url + "/chat/completions", content=orjson.dumps({"model": "m", "messages": second}), timeout=60)

        client = threading.Thread(target=agent)
        client.start()
        assert entered.wait(60)
    # the proxy has shut down (the block above ended): the job did not run to its end
    client.join(60)
    assert not state.scorer.inner._thread.is_alive()  # the scorer thread ended with the proxy
    assert slow.calls < chunks_for(s, text)
    resp = answer["resp"]
    assert resp.status_code == 503 and resp.json()["error"]["code"] == "shutting_down"
    assert len(up.requests) == 1  # the waiting request never went upstream
    assert all(not c.steps for c in state.conversations())  # nothing stored as a failed step
    assert state.stats.total.scorer_failures == 0
