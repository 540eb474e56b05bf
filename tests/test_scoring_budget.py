"""The scorer's default memory budget, and the CLI options that override it (docs/scoring.md, "Batching and memory")."""

import json
from types import SimpleNamespace

import pytest

from format_helpers import run_cli
from iclr_cli.scoring import budget

CPU, GPU = SimpleNamespace(type="cpu"), SimpleNamespace(type="cuda")


def test_budget_is_a_share_of_free_memory():
    b = budget.plan(46_080, 8192, CPU, free=10 * 2**30)  # SmolLM2 float32, 10 GiB free
    usable = 0.4 * 10 * 2**30
    assert b.cache_tokens == int(0.6 * usable / 46_080) == 55_924
    assert b.batch_tokens == int(0.4 * usable / (1.5 * 46_080)) == 24_855
    assert b.batch_size == 1 and budget.plan(46_080, 8192, GPU, free=10 * 2**30).batch_size == 64
    # a small device still holds one full-length stream and one full-length row
    tiny = budget.plan(46_080, 8192, CPU, free=2**20)
    assert (tiny.cache_tokens, tiny.batch_tokens) == (8192, 8192)


def test_free_memory_is_read_on_linux():
    free = budget.free_bytes(CPU)
    assert free is None or free > 0


@pytest.fixture
def chat(tmp_path):
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([
        {"role": "user", "content": "Fix it."},
        {"role": "assistant", "reasoning_content": "One.\n\nTwo.", "content": "Done."},
    ]))
    return path


def test_cli_context_and_cache_options(chat, capsys):
    code, out, err = run_cli(capsys, "score", str(chat), "--model", "fake", "--context", "rolling", "-q")
    assert code == 2 and "--context" in err and "fresh" in err and "sliding" in err
    for context in ("fresh", "sliding"):
        code, out, _ = run_cli(capsys, "score", str(chat), "--model", "fake", "--context", context,
                               "--cache-tokens", "4096", "--batch-size", "2", "-q")
        assert code == 0 and len(out.splitlines()) == 2
    code, _, err = run_cli(capsys, "prune", str(chat), "--model", "fake", "--cache-tokens", "0", "-q")
    assert code == 2 and "--cache-tokens" in err
