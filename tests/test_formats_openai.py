"""OpenAI chat adapter on the samples and the real reasoning transcripts: byte-exact round
trip, counts, and pruning that changes nothing but reasoning (METHOD.md, "Provider rules")."""

import json

import pytest

from format_helpers import REALDATA, SAMPLES, parse_any, realdata, realdata_ids, run_cli, tool_ids, without_reasoning
from iclr_cli.blocks import SKIP, split_blocks
from iclr_cli.formats import registry
from iclr_cli.formats.adapters.openai_chat import ADAPTER

OC = REALDATA / "openai_chat_reasoning"
SAMPLE_FILES = ["openai_chat.json", "openai_think_tags.jsonl"]


def path_of(name):
    return SAMPLES / name if name in SAMPLE_FILES else OC / name


@pytest.mark.parametrize("name", SAMPLE_FILES + realdata_ids("openai_chat_reasoning"))
def test_detected_as_openai_and_round_trip_is_byte_identical(name):
    path = path_of(name)
    data = path.read_bytes()
    adapter = registry.detect(data, str(path))
    assert adapter.name == "openai"
    doc = adapter.load(data, str(path))
    assert adapter.dump(doc, doc.trajectories) == data


def counts(path):
    doc = ADAPTER.load(path.read_bytes(), str(path))
    return [(len(t.steps), sum(len(s.reasoning) for s in t.steps), sum(p.label.startswith("tool_call:") for s in t.steps for p in s.parts)) for t in doc.trajectories]


def test_counts_of_samples():
    assert counts(SAMPLES / "openai_chat.json") == [(3, 3, 2)]
    assert counts(SAMPLES / "openai_think_tags.jsonl") == [(1, 1, 0), (2, 2, 0)]
    doc = ADAPTER.load((SAMPLES / "openai_chat.json").read_bytes(), "s")
    assert all(s.reasoning[0].text.count("\n\n") >= 1 for s in doc.trajectories[0].steps)


def test_counts_of_real_files_match_sources_md():
    realdata("openai_chat_reasoning")
    # SOURCES.md: tau-bench 10 assistant msgs, 6 tool calls, 7 with reasoning_content; the
    # DeepSeek logs are 3 API calls each (the last request replays one assistant turn).
    assert counts(OC / "taubench_airline_gpt5_wiki_random.json") == [(10, 7, 6)]
    assert counts(OC / "openhands_deepseek-r1_reasoning_content_exchanges.jsonl") == [(1, 1, 0), (1, 1, 0), (2, 1, 0)]
    assert counts(OC / "openhands_deepseek-r1_inline_think_tags_exchanges.jsonl") == [(1, 1, 0), (1, 1, 0), (2, 1, 0)]


def prune(capsys, tmp_path, src, variant):
    out = tmp_path / f"out-{variant}"
    code, stdout, _ = run_cli(capsys, "prune", str(src), "--model", "fake", "--variant", variant, "-o", str(out), "-q")
    assert code == 0 and stdout == ""
    return out.read_bytes()


@pytest.mark.parametrize("variant", ["iclr", "delete-all"])
@pytest.mark.parametrize("name", SAMPLE_FILES + realdata_ids("openai_chat_reasoning"))
def test_prune_changes_only_reasoning_and_keeps_tool_pairs(tmp_path, capsys, name, variant):
    src = path_of(name)
    before = src.read_bytes()
    after = prune(capsys, tmp_path, src, variant)
    assert after != before
    old, new = parse_any(before), parse_any(after)
    assert without_reasoning(new) == without_reasoning(old)
    assert tool_ids(new) == tool_ids(old)
    if src.suffix == ".jsonl":  # same line count, edited lines keep the input's style
        assert after.count(b"\n") == before.count(b"\n")


def test_delete_all_leaves_empty_reasoning_content_not_a_missing_field(tmp_path, capsys):
    after = json.loads(prune(capsys, tmp_path, SAMPLES / "openai_chat.json", "delete-all"))
    assistants = [m for m in after if m["role"] == "assistant"]
    assert [m["reasoning_content"] for m in assistants] == ["", "", ""]
    assert [len(m.get("tool_calls", [])) for m in assistants] == [1, 1, 0]


def test_iclr_keeps_think_tags_and_separators(tmp_path, capsys):
    src = SAMPLES / "openai_think_tags.jsonl"
    after = prune(capsys, tmp_path, src, "iclr")

    def think_bodies(data):
        texts = [m["content"] for rec in parse_any(data) for m in rec["messages"] if m["role"] == "assistant"]
        assert all(t.startswith("<think>\n") and "</think>\n\n" in t for t in texts)
        return [t[len("<think>") : t.index("</think>")] for t in texts]

    old, new = think_bodies(src.read_bytes()), think_bodies(after)
    assert [len(split_blocks(b).blocks) for b in old] == [3, 3, 2]
    # floor(0.8 * N) blocks become [SKIP]; the blank-line separators stay as they were
    assert [b.count(SKIP) for b in new] == [2, 2, 1]
    assert [b.count("\n\n") for b in new] == [b.count("\n\n") for b in old]


def test_text_encoded_tool_call_in_reasoning_survives_pruning(tmp_path, capsys):
    realdata("openai_chat_reasoning")
    src = OC / "openhands_deepseek-r1_reasoning_content_exchanges.jsonl"
    reasoning = parse_any(src.read_bytes())[2]["response"]["choices"][0]["message"]["reasoning_content"]
    [call] = [b for b in split_blocks(reasoning).blocks if "<function=" in b]
    after = parse_any(prune(capsys, tmp_path, src, "iclr"))[2]["response"]["choices"][0]["message"]["reasoning_content"]
    assert call in after and SKIP in after


def test_message_without_role_exits_2_naming_the_field(tmp_path, capsys):
    src = tmp_path / "bad.json"
    src.write_text(json.dumps({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}, 5]}))
    code, _, err = run_cli(capsys, "prune", str(src), "--format", "openai", "--model", "fake", "-q")
    assert code == 2 and str(src) in err and "'messages[2]'" in err


@pytest.mark.parametrize("extra", [[], ["--skip-bad-lines"]])
def test_truncated_pretty_printed_document_is_reported_where_it_ends(tmp_path, capsys, extra):
    # the sample cut inside its first reasoning_content string, as a partly copied file is
    full = (SAMPLES / "openai_chat.json").read_bytes()
    key = full.index(b'"reasoning_content": "')
    opened = key + len(b'"reasoning_content": ')
    data = full[: opened + 30]
    src = tmp_path / "trunc.json"
    src.write_bytes(data)
    line = data.count(b"\n") + 1
    column = opened - data.rindex(b"\n") - 1 + 1
    code, _, err = run_cli(capsys, "prune", str(src), "--model", "fake", "-o", str(tmp_path / "out.json"), *extra)
    assert code == 2
    assert err.strip() == f"iclr: error: {src}:{line}: truncated JSON document: the string opened at line {line}, column {column} is never closed"
    assert not (tmp_path / "out.json").exists()


def test_invalid_pretty_printed_document_names_line_and_column(tmp_path, capsys):
    src = tmp_path / "bad.json"
    src.write_text('[\n  {"role": "user", "content": "q"},\n  {"role": "assistant" "content": "a"}\n]\n')
    code, _, err = run_cli(capsys, "prune", str(src), "--format", "openai", "--model", "fake", "-q")
    assert code == 2
    assert err.strip() == f"iclr: error: {src}:3: not a valid JSON document: parsing failed at line 3, column 24 (Expecting ',' delimiter)"


def test_valid_document_of_another_format_says_what_was_expected(tmp_path, capsys):
    src = SAMPLES / "gemini_contents.json"
    code, _, err = run_cli(capsys, "prune", str(src), "--format", "openai", "--model", "fake", "-q")
    assert code == 2
    assert err.startswith(f"iclr: error: {src}: does not look like openai (") and "it looks like gemini" in err
    assert err.strip().endswith("Read as openai: no message list found (expected a list of messages, 'messages', 'traj', or request/response)")
