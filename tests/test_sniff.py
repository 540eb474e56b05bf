"""Choosing a file's adapter by its structure (docs/FORMAT.md): the parsed head, scored
matches, the 'read as X (why); also readable as Y' line, and --format overriding it."""

import json

import pytest

from format_helpers import SAMPLES, run_cli
from iclr_cli.formats import registry
from iclr_cli.formats.sniff import HEAD_BYTES, Head, close_cut

THINK = "Plan it.\n\nDo it."


@pytest.mark.parametrize(
    ("cut", "value"),
    [
        (b'[{"a": 1}, {"b": [2', [{"a": 1}, {"b": []}]),
        (b'{"messages": [{"role": "user", "content": "ab [c', {"messages": [{"role": "user"}]}),
        (b'{"k": "v", "x', {"k": "v"}),
        (b'{"a"', {}),
        (b"nothing", None),
    ],
)
def test_a_cut_document_is_closed_at_its_last_complete_element(cut, value):
    assert close_cut(cut) == value


def test_head_of_jsonl_with_a_cut_last_line():
    rows = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x" * 50}]
    raw = b"\n".join(json.dumps(r).encode() for r in rows)
    head = Head.of(raw[:-10])
    assert head.lines and head.records[0] == rows[0] and head.records[1] == {"role": "assistant"}


def test_a_huge_converse_file_is_judged_by_the_structure_of_its_head():
    big = "x" * (HEAD_BYTES * 3)
    doc = {"modelId": "m", "messages": [
        {"role": "user", "content": [{"text": "hi"}]},
        {"role": "assistant", "content": [{"reasoningContent": {"reasoningText": {"text": THINK}}}, {"toolUse": {"toolUseId": "t", "name": "n", "input": {}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "t", "content": [{"text": big}]}}]},
    ]}
    data = json.dumps(doc, indent=2).encode()
    assert len(data) > HEAD_BYTES and registry.detect(data, "big.json").name == "bedrock"


@pytest.mark.parametrize(
    ("messages", "adapter"),
    [
        # OpenAI-only structure: results in role tool, calls in tool_calls
        ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
          {"role": "tool", "tool_call_id": "c", "content": "ok"}], "openai"),
        # Anthropic-only blocks
        ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
          {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}], "anthropic"),
        # Gemini parts, role model
        ([{"role": "user", "parts": [{"text": "hi"}]}, {"role": "model", "parts": [{"text": THINK, "thought": True}]}], "gemini"),
        # Converse blocks
        ([{"role": "user", "content": [{"text": "hi"}]}, {"role": "assistant", "content": [{"reasoningContent": {"reasoningText": {"text": THINK}}}]}], "bedrock"),
        # LangChain dumps
        ([{"type": "human", "data": {"content": "hi"}}, {"type": "ai", "data": {"content": "ok", "additional_kwargs": {}}}], "langchain"),
        # plain string messages: OpenAI chat, the lowest score
        ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}], "openai"),
    ],
    ids=["openai", "anthropic", "gemini", "bedrock", "langchain", "plain"],
)
def test_structure_decides(messages, adapter):
    assert registry.detect(json.dumps(messages).encode(), "x.json").name == adapter


def test_ambiguous_file_names_the_choice_and_format_overrides_it(tmp_path, capsys):
    src = tmp_path / "amb.json"
    src.write_text(json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": [{"type": "thinking", "thinking": THINK}, {"type": "text", "text": "ok"}]}]))
    out = tmp_path / "o.jsonl"
    code, _, err = run_cli(capsys, "score", str(src), "--model", "fake", "-o", str(out))
    assert code == 0, err
    assert f"{src}: read as anthropic (Anthropic content blocks 'thinking'); also readable as openai" in err
    assert "Use --format openai to read it that way" in err
    code, _, err = run_cli(capsys, "score", str(src), "--model", "fake", "--format", "openai", "-o", str(out), "--force")
    assert code == 0 and "read as" not in err
    assert json.loads(out.read_text().splitlines()[0])["part"] == 0  # read through the OpenAI thinking chunk


def test_unambiguous_file_prints_no_choice(tmp_path, capsys):
    code, _, err = run_cli(capsys, "prune", str(SAMPLES / "bedrock_converse.json"), "--variant", "none", "--model", "fake", "-o", str(tmp_path / "o.json"))
    assert code == 0 and "read as" not in err


def test_formats_lists_every_adapter(capsys):
    code, out, _ = run_cli(capsys, "formats")
    assert code == 0
    assert [line.split("\t")[0] for line in out.splitlines()] == registry.names()
    assert {"bedrock", "litellm-spend", "langchain", "gemini-cli"} <= set(registry.names())


REALDATA_FORMATS = {"claude_code": "claude_code", "codex_rollout": "codex", "mini_swe_agent": "mini-swe-agent",
                    "openai_chat_reasoning": "openai", "openhands_events": "openhands", "swe_agent": "swe-agent"}


@pytest.mark.parametrize("folder", sorted(REALDATA_FORMATS))
def test_real_transcripts_keep_the_format_they_had(folder):
    from format_helpers import realdata

    for path in realdata(folder):
        assert registry.detect(path.read_bytes(), str(path)).name == REALDATA_FORMATS[folder], path.name


def test_jsonl_with_a_record_split_in_two_stays_jsonl():
    good = json.dumps({"messages": [{"role": "user", "content": "t"}, {"role": "assistant", "reasoning_content": THINK, "content": "ok"}]}).encode()
    cut = good.index(b"Do it")
    data = good + b"\n" + good[:cut] + b"\n" + good[cut:] + b"\n"
    assert registry.detect(data, "x.jsonl").name == "openai"
    assert Head.of(data).lines
