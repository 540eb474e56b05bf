"""Grouped-query attention without copying the keys and values (:mod:`iclr_cli.scoring.attention`).

The tiny test Llama has 4 query heads over 2 key/value heads, as SmolLM2 groups 9 over 3. With
grouped attention left to torch's SDPA (no ``repeat_kv`` copy of the past), every entropy is the
one of the expanded heads, in one call and fed along a stream onto a kept past.
"""

from __future__ import annotations

import os

import pytest

from tiny_llama import scorer, tiny, tiny_dir  # noqa: F401  (fixtures)

from iclr_cli.scoring.attention import FORCE_GQA, grouped_attention_on_cpu
from iclr_cli.scoring.base import ScoreRequest

P = ("You are a careful agent. Read before you edit. " * 30,)
HISTORY = tuple(f"Step {i}: I listed the folder and found file{i}.py with a failing test in it." * 3 for i in range(4))
STEP = "The test fails on line 3.\n\nMaybe the import is wrong.\n\nI will read the module first."
SPANS = ((0, 25), (27, 52), (54, len(STEP)))


def _entropies(model, monkeypatch, force: str) -> list[float]:
    monkeypatch.setenv(FORCE_GQA, force)
    s = scorer(model, max_tokens=256, context="sliding")
    for cut in (20, 40, 60):  # fed along the stream, onto the kept past
        s.score([ScoreRequest("a", P, HISTORY, STEP[:cut], (), partial=True)])
    fed = [b.entropy_bits for b in s.score([ScoreRequest("a", P, HISTORY, STEP, SPANS)])[0].blocks]
    whole = [b.entropy_bits for b in scorer(model, max_tokens=256, context="sliding").score([ScoreRequest("b", P, HISTORY, STEP, SPANS)])[0].blocks]
    assert fed == pytest.approx(whole, abs=1e-4)
    return whole


def test_grouped_attention_gives_the_entropies_of_the_expanded_heads(tiny, monkeypatch):  # noqa: F811
    model, _ = tiny
    assert model.config.num_key_value_heads < model.config.num_attention_heads
    grouped = _entropies(tiny, monkeypatch, "1")
    expanded = _entropies(tiny, monkeypatch, "0")
    assert len(grouped) == 3 and grouped == pytest.approx(expanded, abs=1e-5)


def test_it_is_turned_on_for_the_cpu_only_and_never_over_the_users_choice(monkeypatch):
    monkeypatch.delenv(FORCE_GQA, raising=False)
    assert not grouped_attention_on_cpu("cuda") and FORCE_GQA not in os.environ
    assert grouped_attention_on_cpu("cpu") and os.environ[FORCE_GQA] == "1"
    monkeypatch.setenv(FORCE_GQA, "0")
    assert not grouped_attention_on_cpu("cpu") and os.environ[FORCE_GQA] == "0"
