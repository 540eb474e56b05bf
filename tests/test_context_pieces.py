"""A request's P-and-history feed run in pieces (``ScoreRequest.limit``): each piece runs at
most ``limit`` tokens past the stream's state, the finished step then scores as if the history
had been read at once (within 1e-3 bits, both context modes, a tiny random Llama), and in
``iclr serve``'s batching scorer a step a client waits for runs between two pieces of another
conversation's history instead of after all of it.
"""

import threading

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tiny_llama import TOL, tiny, tiny_dir  # noqa: F401 (fixtures)
from tiny_llama import scorer as any_scorer

from iclr_cli.scoring.base import ScoreRequest
from iclr_cli.scoring.fake import FakeScorer
from iclr_cli.serve.batching import BatchingScorer

PROMPT = ("[system]\nYou are a careful agent. Use the shell tool.\n\n", "[user]\nWhy did the nightly backup fail?\n\n")
FIRST = ("[reasoning]\nCheck the crontab first.\n\n[tool_call:shell]\ncrontab -l\n\n[tool_result]\n0 2 * * * /opt/run.sh\n\n",)
# a tool's long output: what a request's history feed brings after a step (digits are a token each)
LONG = FIRST + ("[reasoning]\nRead the job's log.\n\n[tool_call:shell]\ncat /var/log/backup.log\n\n[tool_result]\n"
                + "\n".join(f"2026-12-0{d % 9 + 1} 02:00:{d % 60:02d} backup: password check failed for user backup" for d in range(40)) + "\n\n",)
REASONING = ("The log says the password check failed for user backup every night.\n\n"
             "Nothing in the job changed, so the password was probably rotated.\n\n"
             "I will report the cause and the file to update.")
HEAD = "[reasoning]\n"


def finished(stream: str) -> ScoreRequest:
    spans, pos = [], len(HEAD)
    for para in REASONING.split("\n\n"):
        spans.append((pos, pos + len(para)))
        pos += len(para) + 2
    return ScoreRequest(stream, PROMPT, LONG, HEAD + REASONING, tuple(spans))


def context(stream: str, history: tuple[str, ...], limit: int | None = None) -> ScoreRequest:
    return ScoreRequest(stream, PROMPT, history, "", (), partial=True, limit=limit)


@pytest.mark.parametrize("context_mode, max_tokens", [("fresh", None), ("sliding", 256)])
def test_a_history_fed_in_pieces_scores_as_read_at_once_and_runs_each_token_once(tiny, context_mode, max_tokens):
    kw = {"context": context_mode, **({"max_tokens": max_tokens} if max_tokens else {})}
    [want] = any_scorer(tiny, **kw).score([finished("a")])

    s = any_scorer(tiny, **kw)
    [first] = s.score([context("a", FIRST, limit=50)])
    assert first.pending_tokens == 0  # a stream's first feed starts from P's state: never cut
    before = s.stats.forward_tokens
    pending = []
    while True:
        [fed] = s.score([context("a", LONG, limit=50)])
        pending.append(fed.pending_tokens)
        if not fed.pending_tokens:
            break
    history = s.stats.forward_tokens - before
    assert len(pending) >= 4 and all(a - b == 50 for a, b in zip(pending, pending[1:-1]))
    assert history == 50 * (len(pending) - 1) + (pending[-2] if len(pending) > 1 else 0)  # each token once
    [got] = s.score([finished("a")])
    assert [b.n_tokens for b in got.blocks] == [b.n_tokens for b in want.blocks]
    assert max(abs(a.entropy_bits - b.entropy_bits) for a, b in zip(got.blocks, want.blocks)) < TOL


def test_the_paced_fake_charges_a_piece_and_reports_the_rest():
    fake = FakeScorer(tokens_per_s=1e9)
    fake.score([context("a", FIRST)])
    held = fake.tokens_run
    [fed] = fake.score([context("a", LONG, limit=40)])
    assert fake.tokens_run - held == 40 and fed.pending_tokens > 0
    [rest] = fake.score([context("a", LONG)])
    assert rest.pending_tokens == 0 and fake.tokens_run - held == 40 + fed.pending_tokens


def _order(piece: int) -> tuple[list[str], object]:
    """Run conversation A's long history feed (ahead of time) while conversation B's finished
    step is waited for; the order the scorer ran them in (``A`` a piece of A's feed, ``B``
    B's step) and A's feed result."""
    gate = threading.Event()
    gate.set()
    fake = FakeScorer(tokens_per_s=1e9, gate=gate, record_requests=True)
    batching = BatchingScorer(fake, context_piece=piece)
    try:
        for stream in ("a", "b"):  # both conversations hold a state, as after their first request
            batching.submit([context(stream, FIRST)], eager=True, due=0).result(timeout=10)
        fake.requests_seen.clear()
        gate.clear()
        feed = batching.submit([context("a", LONG)], eager=True, due=3.0)
        while batching.where(feed).state != "running":  # A's first piece holds the scorer (at the gate)
            threading.Event().wait(0.01)
        step = batching.submit([finished("b")])
        gate.set()
        step.result(timeout=10)
        [result] = feed.result(timeout=10)
    finally:
        batching.close()
    return ["B" if r.stream == "b" else "A" for r in fake.requests_seen], result


def test_a_waited_for_step_runs_between_the_pieces_of_another_conversations_history(caplog):
    caplog.set_level("DEBUG", logger="iclr.serve")
    order, result = _order(piece=40)
    assert order[:2] == ["A", "B"] and order.count("A") >= 3  # B right after A's first piece
    assert result.pending_tokens == 0 and result.context_tokens > 200  # A's feed still read all of its history
    # serve's debug log: one line a batch, what it was for and what it forwarded
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("scorer: ")]
    pieces = [line for line in lines if line.startswith("scorer: context batch (feed), 1 call(s) of 1 stream(s), 40 tokens forwarded")]
    assert len(pieces) == order.count("A") - 1 and any(line.startswith("scorer: waited_for batch (step)") for line in lines)


def test_uncut_the_waited_for_step_runs_after_the_whole_history():
    order, result = _order(piece=0)
    assert order == ["A", "B"] and result.pending_tokens == 0


def test_a_rest_of_no_more_than_half_a_piece_runs_in_the_same_piece():
    probe = FakeScorer(tokens_per_s=1e9)
    probe.score([context("a", FIRST)])
    held = probe.tokens_run
    probe.score([context("a", LONG)])
    new = probe.tokens_run - held  # the history's tokens past the kept state
    for limit, pending in ((new - 10, 0), (new // 2, new - new // 2)):
        fake = FakeScorer(tokens_per_s=1e9)
        fake.score([context("a", FIRST)])
        [fed] = fake.score([context("a", LONG, limit=limit)])
        assert fed.pending_tokens == pending, limit
