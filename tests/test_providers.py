"""The per-upstream reasoning rules: one table, each rule cited, the kind guessed from the URL."""

from __future__ import annotations

import pytest

from iclr_cli import providers


@pytest.mark.parametrize("url, kind", [
    ("https://api.anthropic.com", "anthropic"),
    ("https://api.openai.com/v1", "openai"),
    ("https://my-res.openai.azure.com/openai/v1", "openai"),
    ("https://api.deepseek.com/anthropic", "deepseek"),
    ("https://api.minimax.io/anthropic", "anthropic-compatible"),
    ("https://openrouter.ai/api/v1", "openrouter"),
    ("http://127.0.0.1:8000/v1", "local"),
    ("http://localhost:11434/v1", "local"),
    ("http://10.0.3.7:8080", "local"),
    ("http://192.168.1.20:1234/v1", "local"),
    ("http://[::1]:8080/v1", "local"),
    ("https://llm.example.com/v1", "unknown"),
    ("https://api.anthropic.com.evil.example/v1", "unknown"),  # a suffix match needs the dot
])
def test_guess_from_the_host(url, kind):
    found, why = providers.guess(url)
    assert found.name == kind and why


def test_every_known_kind_cites_its_docs_and_sealed_kinds_say_what_may_go():
    names = providers.names()
    assert len(names) == len(set(names))
    for kind in providers.KINDS:
        if kind.name != "unknown":
            assert kind.docs and all(url.startswith("https://") for url in kind.docs), kind.name
        assert kind.reasoning in ("plain", "sealed") and kind.rule
    assert {k.name for k in providers.KINDS if k.legal_drop} == {"anthropic", "openai"}
    assert providers.get("anthropic").sealed and not providers.get("local").sealed
    with pytest.raises(KeyError):
        providers.get("nope")


def test_the_docs_table_is_this_table():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "serve.md").read_text(encoding="utf-8")
    section = page.split("## Each provider's reasoning rules", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")][1:]  # after the header
    assert [row.split("`")[1] for row in rows] == providers.names()
    for kind, row in zip(providers.KINDS, rows):
        assert f"| {kind.reasoning} |" in row, kind.name
        assert all(url in row for url in kind.docs), kind.name
