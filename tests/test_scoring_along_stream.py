"""Scoring along the stream: a step fed as it is generated (``ScoreRequest.partial``) leaves
the stream's state so that the finished step runs only what is left, with the same entropies
as scoring it at once (within 1e-3 bits), in both context modes, on a tiny random Llama with
the SmolLM2 tokenizer; the paced fake charges the same way.
"""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tiny_llama import TOL, tiny, tiny_dir  # noqa: F401
from tiny_llama import scorer as any_scorer

from iclr_cli.scoring.base import ScoreRequest, settled_end
from iclr_cli.scoring.fake import FakeScorer

PROMPT = ("[system]\nYou are a careful agent. Use the shell tool.\n\n", "[user]\nWhy did the nightly backup fail?\n\n")
HISTORY = ("[reasoning]\nCheck the crontab first.\n\n[tool_call:shell]\ncrontab -l\n\n[tool_result]\n0 2 * * * /opt/run.sh\n\n",)
REASONING = ("The log says the password check failed for user backup, which started on the second.\n\n"
             "Nothing in the job changed, so the password was probably rotated without updating the file.\n\n"
             "I cannot change anything here, so I will report the cause and the file to update.")
HEAD = "[reasoning]\n"


def finished(stream: str) -> ScoreRequest:
    step = HEAD + REASONING
    spans, pos = [], len(HEAD)
    for para in REASONING.split("\n\n"):
        spans.append((pos, pos + len(para)))
        pos += len(para) + 2
    return ScoreRequest(stream, PROMPT, HISTORY, step, tuple(spans))


def feeds(stream: str, pieces: int):
    """The step as it streams: growing prefixes, cut anywhere (mid-word too), the last one
    all of it (the reply's last reasoning token has arrived)."""
    step = HEAD + REASONING
    cuts = [len(HEAD) + len(REASONING) * k // pieces for k in range(1, pieces + 1)]
    return [ScoreRequest(stream, PROMPT, HISTORY, step[:c], (), partial=True) for c in cuts]


def test_settled_end_holds_back_the_last_word_and_the_whitespace_before_it():
    assert settled_end("abc def") == 3
    assert settled_end("abc def ") == 7
    assert settled_end("abc\n\n") == 3
    assert settled_end("abcdef") == 0
    assert settled_end("") == 0


def test_settled_tokens_are_a_prefix_of_the_finished_text_s_tokens(tiny):
    _, tokenizer = tiny
    text = HEAD + REASONING
    for cut in range(0, len(text), 7):
        part = text[:cut]
        settled = tokenizer.encode(part[: settled_end(part)])[0]
        assert tokenizer.encode(text)[0][: len(settled)] == settled, repr(part[-20:])


@pytest.mark.parametrize("context", ["fresh", "sliding"])
def test_a_step_fed_along_the_stream_scores_as_the_finished_step_and_runs_only_the_rest(tiny, context):
    at_once = any_scorer(tiny, context=context)
    [want] = at_once.score([finished("a")])
    whole = at_once.stats.forward_tokens

    along = any_scorer(tiny, context=context)
    for req in feeds("a", 6):
        [fed] = along.score([req])
        assert fed.blocks == () and fed.skipped is None
    before = along.stats.forward_tokens
    [got] = along.score([finished("a")])
    last = along.stats.forward_tokens - before

    assert [b.n_tokens for b in got.blocks] == [b.n_tokens for b in want.blocks]
    for a, b in zip(got.blocks, want.blocks):
        assert abs(a.entropy_bits - b.entropy_bits) < TOL
    assert along.stats.feeds == 6
    assert last <= 3, f"the finished step ran {last} tokens after the feeds"
    assert before <= whole  # feeds never run a settled token twice


def test_in_bfloat16_too_a_fed_step_scores_as_the_finished_step(tiny_dir, monkeypatch, tmp_path):
    """The native precision on CPUs with AMX: feeds run other chunk shapes than the finished
    step at once, and the bf16 rounding still stays within the tolerance (1.9e-4 bits here)."""
    from iclr_cli.scoring import loading
    from iclr_cli.scoring.transformers_scorer import TransformersScorer

    monkeypatch.setenv("ICLR_CACHE_DIR", str(tmp_path))
    model, tokenizer, _ = loading.load_model(str(tiny_dir), dtype="bfloat16", device="cpu")
    [want] = TransformersScorer(model, tokenizer, context="sliding", prompt_cache=False).score([finished("a")])
    along = TransformersScorer(model, tokenizer, context="sliding", prompt_cache=False)
    for req in feeds("a", 6):
        along.score([req])
    [got] = along.score([finished("a")])
    assert max(abs(a.entropy_bits - b.entropy_bits) for a, b in zip(got.blocks, want.blocks)) < TOL


def test_the_context_alone_is_fed_before_the_step_exists(tiny):
    """serve's first feed of a request: P and the history, while the upstream works."""
    s = any_scorer(tiny, context="sliding")
    [fed] = s.score([ScoreRequest("a", PROMPT, HISTORY, "", (), partial=True)])
    assert fed.context_tokens > 0
    context_tokens = s.stats.forward_tokens
    s.score([finished("a")])
    step_tokens = s.stats.forward_tokens - context_tokens
    assert 0 < step_tokens < context_tokens + 80


def test_feeds_of_another_history_are_recomputed_not_trusted(tiny):
    """A client that edited its history: the kept entropies are of other tokens."""
    s = any_scorer(tiny, context="fresh")
    for req in feeds("a", 3):
        s.score([ScoreRequest(req.stream, PROMPT, ("[user]\nsomething else entirely\n\n",), req.step, (), partial=True)])
    [got] = s.score([finished("a")])
    [want] = any_scorer(tiny, context="fresh").score([finished("a")])
    for a, b in zip(got.blocks, want.blocks):
        assert abs(a.entropy_bits - b.entropy_bits) < TOL


def test_a_scorer_without_kept_state_ignores_feeds(tiny):
    s = any_scorer(tiny, context="fresh", prefix_cache=False)
    [fed] = s.score(feeds("a", 2)[1:])
    assert fed.blocks == () and s.stats.forward_tokens == 0


def test_the_paced_fake_charges_feeds_and_then_only_the_rest():
    fake = FakeScorer(tokens_per_s=1e9)
    for req in feeds("a", 4):
        fake.score([req])
    fed = fake.tokens_run
    [got] = fake.score([finished("a")])
    assert fake.tokens_run - fed <= 3
    [want] = FakeScorer().score([finished("a")])
    assert got.blocks == want.blocks
