"""The native precision (METHOD.md, "Precision"): detected from the CPU's flags, oneDNN's cap
and a measured matmul, never assumed; bf16 decoder with a float32 head; outputs name it."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tiny_llama import TOL, tiny_dir  # noqa: F401

from iclr_cli.pipeline import ScorerConfig
from iclr_cli.scoring import precision
from iclr_cli.scoring.base import ScoreRequest


@pytest.fixture
def probe(monkeypatch):
    """Stand-ins for the CPU's flags and the measured speed-up; the cache cleared around."""
    precision.native_precision.cache_clear()
    state = {"flags": frozenset({"avx2", "amx_bf16", "avx512_bf16"}), "speedup": 7.6}
    monkeypatch.setattr(precision, "cpu_flags", lambda path="/proc/cpuinfo": state["flags"])
    monkeypatch.setattr(precision, "cpu_bf16_speedup", lambda: state["speedup"])
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    yield state
    precision.native_precision.cache_clear()


def test_amx_that_measures_faster_runs_bfloat16(probe):
    found = precision.native_precision("cpu")
    assert found.dtype == "bfloat16" and "AMX" in found.why and "7.6x" in found.why


def test_a_cpu_without_bf16_flags_runs_float32_without_measuring(probe):
    probe["flags"] = frozenset({"avx2", "fma"})
    probe["speedup"] = 100.0  # never asked
    assert precision.native_precision("cpu").dtype == "float32"


def test_onednn_capped_below_bf16_runs_float32(probe, monkeypatch):
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert precision.native_precision("cpu") == precision.Native("float32", "oneDNN capped at AVX2 (ONEDNN_MAX_CPU_ISA): bf16 would be emulated")


def test_flags_that_do_not_measure_faster_run_float32(probe):
    probe["flags"] = frozenset({"avx512_bf16"})  # AVX512-BF16 without AMX: measured 0.6x on two threads
    probe["speedup"] = 0.58
    found = precision.native_precision("cpu")
    assert found.dtype == "float32" and "0.58x" in found.why


def test_the_probe_runs_on_this_cpu():
    assert precision.cpu_bf16_speedup() > 0


def test_cpu_flags_are_read_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2 amx_bf16\n")
    assert precision.cpu_flags(str(info)) == frozenset({"fpu", "avx2", "amx_bf16"})
    assert precision.cpu_flags(str(tmp_path / "missing")) is None


def test_resolve_keeps_a_forced_dtype_and_exact_means_float32(probe):
    assert precision.resolve("float16", "cpu") == "float16"
    assert precision.resolve("auto", "cpu", exact=True) == "float32"
    assert precision.resolve("auto", "cpu") == "bfloat16"


def test_config_names_the_precision_the_fake_proxy_needs_no_torch_for():
    assert ScorerConfig(model="fake").precision == "float32"
    assert ScorerConfig.chosen(True, model="smollm2").precision == "float32"
    assert "float32" in ScorerConfig.chosen(True, model="fake").describe()


def test_bf16_decoder_keeps_an_exact_float32_head_and_moves_block_means_little(tiny_dir, monkeypatch, tmp_path):
    from iclr_cli.scoring import loading
    from iclr_cli.scoring.transformers_scorer import TransformersScorer

    monkeypatch.setenv("ICLR_CACHE_DIR", str(tmp_path))
    f32, tok, _ = loading.load_model(str(tiny_dir), dtype="float32", device="cpu")
    bf16, _, _ = loading.load_model(str(tiny_dir), dtype="bfloat16", device="cpu")
    assert bf16.iclr_precision == "bfloat16" and f32.iclr_precision == "float32"
    assert bf16.model.layers[0].mlp.up_proj.weight.dtype == torch.bfloat16
    head = precision.scoring_head(bf16)
    assert head.weight.dtype == torch.float32
    assert torch.equal(head.weight, f32.get_output_embeddings().weight)  # copied before the cast, not rounded
    hidden = torch.randn(3, f32.config.hidden_size, dtype=torch.bfloat16)
    assert head(hidden).dtype == torch.float32

    step = "[reasoning]\nCheck the crontab first.\n\nThen read the log tail and report the error."
    req = ScoreRequest("a", ("[user]\nWhy did the backup fail?\n\n",), (), step, ((12, 36), (38, len(step))))
    [a] = TransformersScorer(f32, tok, context="fresh", prompt_cache=False).score([req])
    [b] = TransformersScorer(bf16, tok, context="fresh", prompt_cache=False).score([req])
    diffs = [abs(x.entropy_bits - y.entropy_bits) for x, y in zip(a.blocks, b.blocks)]
    assert max(diffs) < 0.5 and max(diffs) > TOL / 1000  # moved, a little
