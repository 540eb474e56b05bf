"""The transformers scorer on a tiny random Llama with the real SmolLM2 tokenizer.

Numeric checks with a tolerance (STYLE.md, 9): the prefix-cached, uncached and batched paths
must give the same entropies within 1e-3 bits, and the same as a plain full forward pass.
These are the ``--context fresh`` tests; the sliding window has its own (test_scoring_sliding).
"""

import math

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tiny_llama import TOL, VOCAB, assert_same, flat, make_trajs, run, tiny, tiny_dir  # noqa: F401
from tiny_llama import scorer as any_scorer

from iclr_cli.errors import UsageError
from iclr_cli.scoring import build_scorer
from iclr_cli.scoring.base import ScoreRequest
from iclr_cli.scoring.entropy import entropy_bits
from iclr_cli.scoring.transformers_scorer import TransformersScorer


def scorer(tiny, **kw):
    """The fresh window unless a test says otherwise (the sliding window: test_scoring_sliding)."""
    return any_scorer(tiny, **{"context": "fresh", **kw})


def test_cached_uncached_and_batched_agree_over_an_online_run(tiny):
    trajs = make_trajs()
    # Two cache slots for three trajectories: exercises the no-thrash admission rule.
    cached = scorer(tiny, prefix_cache=True, max_streams=2)
    naive = scorer(tiny, prefix_cache=False, batch_size=1)
    batched = scorer(tiny, prefix_cache=False, batch_size=8)
    ref = run(naive, trajs)
    assert_same(run(cached, trajs), ref)
    assert_same(run(batched, trajs), ref)
    assert cached.stats.reused_tokens > 0
    assert cached.stats.forward_tokens < naive.stats.forward_tokens
    assert batched.stats.batches < naive.stats.batches


def test_block_entropies_equal_a_plain_full_forward(tiny):
    model, tokenizer = tiny
    s = scorer(tiny)
    prompt = ("[user]\nFix it.\n\n",)
    history = ("[reasoning]\nLook at the parser.\n\n[tool_result]\nok\n\n",)
    step = "[reasoning]\nFirst check the header.\n\nThen run the test again."
    spans = ((12, 35), (37, len(step)))
    for req in (ScoreRequest("a", prompt, history, step, spans),
                ScoreRequest("b", (), (), step[12:], ((0, 23), (25, len(step) - 12)))):
        [res] = s.score([req])
        ids = [tokenizer.encode(seg)[0] for seg in (*req.prompt, *req.history)]
        ids = [i for seg in ids for i in seg]
        step_ids, offsets = tokenizer.encode(req.step)
        base = len(ids)
        if not req.prompt:  # history-free: the start token is prepended
            ids, base = [tokenizer.bos_id], 1
        with torch.inference_mode():
            logits = model(torch.tensor([ids + step_ids])).logits[0]
        h = entropy_bits(logits)
        for (a, b), got in zip(req.spans, res.blocks):
            toks = [base + k for k, (st, _) in enumerate(offsets) if a <= st < b and base + k > 0]
            assert got.n_tokens == len(toks) > 0
            assert got.entropy_bits == pytest.approx(sum(h[p - 1].item() for p in toks) / len(toks), abs=TOL)
        assert res.context_tokens == base + len(step_ids)


def test_chunk_sizes_do_not_change_results(tiny):
    trajs = make_trajs(n_traj=2, n_steps=4, seed=1)
    ref = run(scorer(tiny), trajs)
    assert_same(run(scorer(tiny, chunk_size=1, forward_chunk=64), trajs), ref)
    assert_same(run(scorer(tiny, prefix_cache=False, chunk_size=7, forward_chunk=100), trajs), ref)


def test_small_window_cached_equals_uncached(tiny):
    trajs = make_trajs(n_traj=2, n_steps=8, seed=2)
    cached, naive = scorer(tiny, max_tokens=160), scorer(tiny, max_tokens=160, prefix_cache=False)
    a, b = run(cached, trajs), run(naive, trajs)
    assert_same(a, b)
    reports = [r for res in a for r in res.steps]
    assert sum(r.windowed for r in reports) >= 4
    assert all(r.context_tokens <= 160 for r in reports if not r.skipped)
    assert any(r.history_kept < r.step for r in reports if r.windowed)


def test_step_only_scores_the_first_token_and_batches(tiny):
    trajs = make_trajs(n_traj=3, n_steps=3, seed=3)
    one, many = scorer(tiny, batch_size=1), scorer(tiny, batch_size=8)
    a = run(one, trajs, "step-only")
    assert_same(a, run(many, trajs, "step-only"))
    assert many.stats.batches < one.stats.batches
    _, tokenizer = tiny
    for res in a:
        for step, report in zip(res.original.steps, res.steps):
            first_block = step.reasoning[0].text.split("\n\n")[0]
            # every token of block 0 is scored, position 0 included (the start token predicts it)
            assert report.blocks[0].n_tokens == len(tokenizer.token_spans(first_block))


def test_entropies_are_inside_zero_and_log2_v(tiny):
    values = [e for *_, e, _ in flat(run(scorer(tiny), make_trajs(n_traj=1, n_steps=3))) if e is not None]
    assert values and all(0.0 < v < math.log2(VOCAB) for v in values)
    assert max(values) - min(values) > 0.1  # the fixture's weights give context-dependent scores


def test_limits_and_skips(tiny):
    s = scorer(tiny, max_tokens=42_000, overflow="skip")
    assert s.max_tokens == 512  # capped at the model's positions
    long_step = " ".join(["word"] * 600)
    [res] = s.score([ScoreRequest("x", ("[user]\nhi\n\n",), (), long_step, ((0, len(long_step)),))])
    assert res.skipped and "over the scorer's limit" in res.skipped and res.blocks == ()
    with pytest.raises(UsageError):
        scorer(tiny, overflow="drop")
    with pytest.raises(UsageError):
        scorer(tiny, batch_size=0)


def test_factory_loads_a_folder_spec_frozen(tiny_dir, monkeypatch, tmp_path):
    monkeypatch.setenv("ICLR_CACHE_DIR", str(tmp_path))
    s = build_scorer(str(tiny_dir), max_tokens=300, batch_size=2, chunk_size=16, dtype="float32", device="cpu")
    assert isinstance(s, TransformersScorer)
    assert s.name == tiny_dir.name and s.max_tokens == 300 and s.chunk_size == 16
    assert s.context == "auto" and s.batch_size == 2 and s.cache_tokens >= 300  # defaults: docs/scoring.md
    assert not s.model.training and not any(p.requires_grad for p in s.model.parameters())
    assert next(s.model.parameters()).dtype == torch.float32


def test_proxy_tokenizer_matches_the_transformers_tokenizer(tiny_dir, tiny):
    _, tokenizer = tiny
    auto = transformers.AutoTokenizer.from_pretrained(str(tiny_dir))
    assert tokenizer.bos_id == auto.bos_token_id
    for text in ("plain words", "  def f(x):\n\treturn x  # élan 日本語 🙂\n\n\nDone.", "a <|im_start|> b"):
        enc = auto(text, add_special_tokens=False, return_offsets_mapping=True, split_special_tokens=True)
        assert tokenizer.encode(text) == (enc["input_ids"], [tuple(o) for o in enc["offset_mapping"]])


def test_rescoring_the_same_request_recomputes_the_needed_positions(tiny):
    # The whole input is cached the second time; the positions before each block token
    # must still be run (a KV cache holds no hidden states), or there is nothing to score.
    s = scorer(tiny)
    step = "[reasoning]\nFirst check the header.\n\nThen run the test again."
    req = ScoreRequest("a", ("[user]\nFix it.\n\n",), (), step, ((12, 35), (37, len(step))))
    [first] = s.score([req])
    [again] = s.score([req])
    assert s.stats.reused_tokens > 0
    for x, y in zip(first.blocks, again.blocks):
        assert x.n_tokens == y.n_tokens and abs(x.entropy_bits - y.entropy_bits) < TOL


def test_stream_caches_respect_count_and_token_budgets(tiny):
    trajs = make_trajs(n_traj=3, n_steps=3, seed=4)
    ref = run(scorer(tiny, prefix_cache=False), trajs)
    two = scorer(tiny, max_streams=2)
    assert two.stream_capacity == 2
    assert_same(run(two, trajs), ref)
    # The online loop runs trajectories in waves of stream_capacity: the third starts when
    # the first two are done, and evicts the least recently used.
    assert list(two._streams) == ["traj-1", "traj-2"] and two.stats.reused_tokens > 0
    # Called with more streams than slots, the first ones keep their slots; the third is
    # recomputed instead of evicting a stream the same call still needs (plain LRU would
    # thrash and reuse nothing).
    direct = scorer(tiny, max_streams=2)
    prompt = ("[user]\nFix it.\n\n",)
    step = "[reasoning]\nFirst check the header.\n\nThen run it."
    first = [ScoreRequest(n, prompt, (), step, ((12, 35),)) for n in "abc"]
    direct.score(first)
    assert list(direct._streams) == ["a", "b"]
    before = direct.stats.reused_tokens
    direct.score([ScoreRequest(n, prompt, (step + "\n\n",), step, ((12, 35),)) for n in "abc"])
    assert list(direct._streams) == ["a", "b"] and direct.stats.reused_tokens - before > 0
    tight = scorer(tiny, cache_tokens=10)
    assert_same(run(tight, trajs), ref)
    assert tight.stats.reused_tokens == 0 and not tight._streams
