"""Properties of prune over generated OpenAI and Anthropic trajectories (hypothesis).

- ``--variant none`` is the identity, byte for byte, in every layout.
- Any variant changes nothing but reasoning text: tool calls, results, ids, visible text,
  ``redacted_thinking`` and unknown fields compare equal; tool calls and results keep their
  pairing and order (METHOD.md, "Provider rules").
- What an adapter writes back is what compression produced: reloading the output gives the
  compressed reasoning; edited Anthropic thinking has no signature, unedited keeps its own.
"""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from format_helpers import SAMPLES, parse_any, run_cli, thinking_blocks, tool_ids, without_reasoning
from iclr_cli.compress import Settings, compress_trajectories
from iclr_cli.formats import registry
from iclr_cli.policies import parse_variant
from iclr_cli.scoring.fake import FakeScorer

ALPHABET = st.characters(codec="utf-8", exclude_categories=("Cs", "Cc"), exclude_characters="<>") | st.sampled_from(' "\\\t.é中')
PARA = st.text(ALPHABET, min_size=1, max_size=30).filter(lambda s: s.strip())
SEP = st.sampled_from(["\n\n", "\n \n", "\n\n\n", "\r\n\r\n", "\n\t\n"])
NAME = st.sampled_from(["bash", "read_file", "search", "edit"])


@st.composite
def reasoning(draw):
    paras = draw(st.lists(PARA, min_size=1, max_size=5))
    out = paras[0]
    for p in paras[1:]:
        out += draw(SEP) + p
    return draw(st.sampled_from(["", "\n"])) + out + draw(st.sampled_from(["", "\n"]))


@st.composite
def openai_messages(draw):
    msgs = [{"role": "system", "content": draw(PARA)}] if draw(st.booleans()) else []
    msgs.append({"role": "user", "content": draw(PARA)})
    for t in range(draw(st.integers(1, 4))):
        msg = {"role": "assistant", "content": draw(st.one_of(st.just(""), st.none(), PARA))}
        style = draw(st.sampled_from(["reasoning_content", "reasoning", "think", "none"]))
        if style == "think":
            msg["content"] = f"<think>{draw(reasoning())}</think>" + (msg["content"] or "")
        elif style != "none":
            msg[style] = draw(reasoning())
        calls = [
            {"id": f"call_{t}_{k}", "type": "function", "function": {"name": draw(NAME), "arguments": json.dumps({"q": draw(PARA)})}}
            for k in range(draw(st.integers(0, 2)))
        ]
        if calls:
            msg["tool_calls"] = calls
        if draw(st.booleans()):
            msg["x_vendor"] = {"latency_ms": draw(st.integers(0, 5000))}
        msgs.append(msg)
        msgs.extend({"role": "tool", "tool_call_id": c["id"], "content": draw(PARA)} for c in calls)
        if draw(st.booleans()):
            msgs.append({"role": "user", "content": draw(PARA)})
    return msgs


@st.composite
def anthropic_record(draw):
    msgs = [{"role": "user", "content": draw(PARA)}]
    for t in range(draw(st.integers(1, 4))):
        blocks = []
        for k in range(draw(st.integers(0, 2))):
            block = {"type": "thinking", "thinking": draw(reasoning())}
            if draw(st.booleans()):
                block["signature"] = f"sig-{t}-{k}"
            blocks.append(block)
        if draw(st.booleans()):
            blocks.append({"type": "redacted_thinking", "data": f"opaque{t}=="})
        if draw(st.booleans()):
            blocks.append({"type": "text", "text": draw(PARA)})
        uses = [{"type": "tool_use", "id": f"toolu_{t}_{k}", "name": draw(NAME), "input": {"q": draw(PARA)}} for k in range(draw(st.integers(0, 2)))]
        blocks = draw(st.permutations(blocks + uses)) or [{"type": "thinking", "thinking": draw(reasoning()), "signature": "s"}]
        msgs.append({"role": "assistant", "content": list(blocks)})
        results = [{"type": "tool_result", "tool_use_id": u["id"], "content": draw(st.one_of(PARA, st.builds(lambda s: [{"type": "text", "text": s}], PARA)))} for u in uses]
        if results or draw(st.booleans()):
            msgs.append({"role": "user", "content": results or draw(PARA)})
    if draw(st.booleans()):
        return msgs
    record = {"model": "claude-test", "messages": msgs}
    if draw(st.booleans()):
        record["system"] = draw(PARA)
    return record


@st.composite
def document(draw, fmt):
    make = openai_messages if fmt == "openai" else anthropic_record
    layout = draw(st.sampled_from(["indent", "compact", "spaced", "jsonl"]))
    ascii_only = draw(st.booleans())
    if layout == "jsonl":
        seps = (",", ":") if draw(st.booleans()) else (", ", ": ")
        records = draw(st.lists(make(), min_size=1, max_size=3))
        end = draw(st.sampled_from(["\n", "\r\n"]))
        text = end.join(json.dumps(r, ensure_ascii=ascii_only, separators=seps) for r in records) + draw(st.sampled_from(["", end]))
    else:
        value = draw(make())
        if layout == "indent":
            text = json.dumps(value, indent=2, ensure_ascii=ascii_only) + "\n"
        else:
            text = json.dumps(value, ensure_ascii=ascii_only, separators=(",", ":") if layout == "compact" else (", ", ": "))
    return text.encode("utf-8")


def prune_bytes(data: bytes, fmt: str, variant: str):
    adapter = registry.get(fmt)
    doc = adapter.load(data, "gen.json")
    scorer = FakeScorer()
    results = compress_trajectories(doc.trajectories, Settings(parse_variant(variant)), scorer, scorer.tokenizer)
    return adapter, adapter.dump(doc, [r.compressed for r in results]), results


VARIANTS = ["iclr", "step-only", "delete-all", "random-40"]
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


EMPTY = {"type": "thinking", "thinking": ""}


def assert_thinking_write_back(old: list[dict], texts: list[str], new: list[dict]) -> None:
    """The provider rule, stated independently of the adapter: an unedited block is kept as
    it was; an edited one gets the new text and loses only its signature; a deleted one (new
    text "") is gone, or left as an empty unsigned block where it was all of its message."""
    assert len(old) == len(texts)
    expected, deleted = [], 0
    for block, text in zip(old, texts):
        if text == block["thinking"]:
            expected.append(block)
        elif text == "":
            deleted += 1
        else:
            expected.append({**{k: v for k, v in block.items() if k != "signature"}, "thinking": text})
    assert [b for b in new if b != EMPTY] == [b for b in expected if b != EMPTY]
    assert sum(b == EMPTY for b in new) <= deleted + sum(b == EMPTY for b in expected)


def check(data: bytes, fmt: str, variant: str) -> None:
    adapter, out, results = prune_bytes(data, fmt, variant)
    before, after = parse_any(data), parse_any(out)
    assert without_reasoning(after) == without_reasoning(before)
    assert tool_ids(after) == tool_ids(before)
    new_texts = [p.text for r in results for s in r.compressed.steps for p in s.reasoning]
    if fmt == "anthropic":
        assert_thinking_write_back(thinking_blocks(before), new_texts, thinking_blocks(after))
        if any(t == "" for t in new_texts):
            return  # removed blocks: the reread trajectory has fewer reasoning parts
    reread = adapter.load(out, "gen.json").trajectories
    assert [[p.text for s in t.steps for p in s.reasoning] for t in reread] == [
        [p.text for s in r.compressed.steps for p in s.reasoning] for r in results
    ]


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
@SETTINGS
@given(data=st.data())
def test_variant_none_is_the_identity(fmt, data):
    raw = data.draw(document(fmt))
    _, out, _ = prune_bytes(raw, fmt, "none")
    assert out == raw


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
@SETTINGS
@given(data=st.data())
def test_any_variant_changes_only_reasoning(fmt, variant, data):
    check(data.draw(document(fmt)), fmt, variant)


@SETTINGS
@given(raw=document("anthropic"))
def test_anthropic_documents_with_typed_blocks_are_sniffed_as_anthropic(raw):
    typed = any(b in raw for b in (b'"thinking"', b'"tool_use"', b'"tool_result"', b'"redacted_thinking"'))
    expected = "anthropic" if typed else "openai"
    assert registry.detect(raw, "gen.json").name == expected


@pytest.mark.parametrize("name", ["anthropic_messages.json", "claude_code_session.jsonl", "openai_chat.json", "openai_think_tags.jsonl"])
def test_cli_prune_variant_none_is_the_identity_on_samples(tmp_path, capsys, name):
    out = tmp_path / name
    code, _, _ = run_cli(capsys, "prune", str(SAMPLES / name), "--variant", "none", "--model", "fake", "-o", str(out), "-q")
    assert code == 0
    assert out.read_bytes() == (SAMPLES / name).read_bytes()
