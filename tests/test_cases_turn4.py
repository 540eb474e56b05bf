"""Field cases of the fourth round (../shared/cases/turn4/, README there): each is run with the
commands the README names and its output checked against what a correct tool does."""

from __future__ import annotations

import json
import re

import pytest

from format_helpers import field_case, run_cli, summary_value
from iclr_cli.blocks import SKIP


def case(name: str):
    return field_case(name, "turn4")


def prune(capsys, tmp_path, src, *args: str) -> tuple[bytes, str]:
    out = tmp_path / "out"
    code, stdout, err = run_cli(capsys, "prune", str(src), "--model", "fake", "-o", str(out), *args)
    assert (code, stdout) == (0, ""), err
    return out.read_bytes(), err


def score(capsys, src) -> list[dict]:
    code, stdout, err = run_cli(capsys, "score", str(src), "--model", "fake", "-q")
    assert code == 0, err
    return [json.loads(line) for line in stdout.splitlines()]


# -- 02: a Claude Code session that switched provider -------------------------------------------

@pytest.mark.parametrize("variant", ["delete-all", "iclr"])
def test_02_deepseek_blocks_edited_keeping_the_empty_signature_the_anthropic_block_untouched(tmp_path, capsys, variant):
    src = case("02-claude-code-empty-signature.jsonl")
    before = src.read_bytes().split(b"\n")
    out, err = prune(capsys, tmp_path, src, "--variant", variant)
    after = out.split(b"\n")
    assert len(after) == len(before)
    changed = [i for i, (a, b) in enumerate(zip(before, after)) if a != b]
    assert changed == [1, 7]  # lines 2 and 8: DeepSeek's thinking; every other line byte-identical
    for i in changed:
        old, new = json.loads(before[i]), json.loads(after[i])
        [block] = new["message"]["content"]
        assert block["type"] == "thinking" and block["signature"] == ""  # the empty key stays, as it was
        assert {k: v for k, v in new.items() if k != "message"} == {k: v for k, v in old.items() if k != "message"}
        if variant == "delete-all":
            assert block["thinking"] == ""
        else:
            assert SKIP in block["thinking"] and block["thinking"] != old["message"]["content"][0]["thinking"]
    assert summary_value(err, "reasoning parts left sealed (provider rule)") == "1 (anthropic signed 1)"


def test_02_score_does_not_count_the_display_omitted_block(capsys):
    src = case("02-claude-code-empty-signature.jsonl")
    records = score(capsys, src)
    assert [(r["step"], r["n_blocks"]) for r in records] == [(0, 4)] * 4 + [(2, 4)] * 4
    assert all(r["text"].strip() for r in records)


# -- 05: OpenRouter with Gemini 3: thought signatures bound to tool calls ------------------------

@pytest.mark.parametrize("variant", ["delete-all", "iclr"])
@pytest.mark.parametrize("encrypted", [None, "drop", "keep"])
def test_05_call_signatures_stay_value_equal_text_entries_edited_with_reasoning(tmp_path, capsys, variant, encrypted):
    src = case("05-openrouter-gemini-details.json")
    doc = json.loads(src.read_bytes())
    extra = ("--encrypted-reasoning", encrypted) if encrypted else ()
    out, _ = prune(capsys, tmp_path, src, "--variant", variant, *extra)
    got = json.loads(out)
    for old, new in zip(doc["messages"], got["messages"]):
        if old["role"] != "assistant":
            assert new == old
            continue
        assert new.get("tool_calls") == old.get("tool_calls")
        signatures = lambda m: [e for e in m["reasoning_details"] if e["type"] == "reasoning.encrypted"]  # noqa: E731
        assert signatures(new) == signatures(old)  # value-equal while their calls stay
        texts = [e["text"] for e in new["reasoning_details"] if e["type"] == "reasoning.text"]
        assert texts == [new["reasoning"]]  # the text entry is edited together with reasoning
        assert new["reasoning"] != old["reasoning"]
        if variant == "delete-all":
            assert new["reasoning"] == ""
    assert [len(s) for s in _steps(capsys, src)] == [4, 4, 3]


def _steps(capsys, src) -> list[list[dict]]:
    by_step: dict[int, list[dict]] = {}
    for r in score(capsys, src):
        by_step.setdefault(r["step"], []).append(r)
    return [by_step[k] for k in sorted(by_step)]


def test_05_convert_refuses_the_thought_signatures(tmp_path, capsys):
    src = case("05-openrouter-gemini-details.json")
    out = tmp_path / "out.jsonl"
    code, _, err = run_cli(capsys, "convert", str(src), "--to", "anthropic", "-o", str(out))
    assert code == 2 and "thought signature" in err and not out.exists()


# -- 07: llama.cpp deepseek-legacy: one reasoning in <think> and in reasoning_content -----------

@pytest.mark.parametrize("variant", ["delete-all", "iclr"])
def test_07_think_copy_equals_reasoning_content_and_the_answer_is_byte_identical(tmp_path, capsys, variant):
    src = case("07-llamacpp-deepseek-legacy.json")
    doc = json.loads(src.read_bytes())
    out, err = prune(capsys, tmp_path, src, "--variant", variant)
    got = json.loads(out)
    for old, new in zip(doc["messages"], got["messages"]):
        if old["role"] != "assistant":
            assert new == old
            continue
        inner, answer = re.fullmatch(r"(?s)<think>(.*)</think>(.*)", new["content"]).groups()
        assert inner.strip() == new["reasoning_content"]  # every stored form says the same
        assert answer == re.fullmatch(r"(?s)<think>.*</think>(.*)", old["content"]).group(1)
        assert new.get("tool_calls") == old.get("tool_calls")
        assert new["reasoning_content"] != old["reasoning_content"]
    assert summary_value(err, "reasoning blocks") == "8"  # 4 paragraphs per message, counted once


def test_07_score_counts_each_paragraph_once(capsys):
    src = case("07-llamacpp-deepseek-legacy.json")
    assert [len(s) for s in _steps(capsys, src)] == [4, 4]
