"""Field cases of the third round that are about reading the right format (../shared/cases/turn3/,
README there): 04 LiteLLM spend logs, 06 Magistral thinking chunks, 07 Bedrock Converse, 08
LiteLLM thinking_blocks. Each is run with the command the README names and its output checked
byte for byte against the value built here from the input."""

from __future__ import annotations

import copy
import json

from format_helpers import field_case, run_cli, summary_value
from iclr_cli.formats import registry


def case(name: str):
    return field_case(name, "turn3")


def prune(capsys, tmp_path, src, *args: str) -> tuple[bytes, str]:
    out = tmp_path / "out"
    code, stdout, err = run_cli(capsys, "prune", str(src), "--model", "fake", "-o", str(out), *args)
    assert (code, stdout) == (0, ""), err
    return out.read_bytes(), err


def indented(value) -> bytes:
    """The layout of the JSON case files (indent 2, newline at the end), which prune keeps."""
    return (json.dumps(value, indent=2) + "\n").encode()


def blocks_per_step(capsys, src, *args: str) -> dict[tuple[str, int], int]:
    code, stdout, err = run_cli(capsys, "score", str(src), "--model", "fake", "-q", *args)
    assert code == 0, err
    counts: dict[tuple[str, int], int] = {}
    for rec in map(json.loads, stdout.splitlines()):
        key = (rec["trajectory"], rec["step"])
        counts[key] = counts.get(key, 0) + 1
    return counts


def test_04_spend_log_rows_are_request_plus_reply_with_every_copy_edited(tmp_path, capsys):
    src = case("04-litellm-spend-logs.jsonl")
    assert registry.detect(src.read_bytes(), str(src)).name == "litellm-spend"
    # row a: its reply is step 0; row b: the first reply (now in the request) and its own reply
    assert blocks_per_step(capsys, src) == {("chatcmpl-04a", 0): 4, ("chatcmpl-04b", 0): 4, ("chatcmpl-04b", 1): 4}
    rows = [json.loads(line) for line in src.read_bytes().splitlines()]
    want = copy.deepcopy(rows)
    want[0]["response"]["choices"][0]["message"]["reasoning_content"] = ""
    want[1]["messages"][2]["reasoning_content"] = ""
    want[1]["proxy_server_request"]["messages"][2]["reasoning_content"] = ""
    want[1]["response"]["choices"][0]["message"]["reasoning_content"] = ""
    expected = b"".join(json.dumps(r, separators=(",", ":"), ensure_ascii=False).encode() + b"\n" for r in want)
    out, err = prune(capsys, tmp_path, src, "--variant", "delete-all")
    assert out == expected
    assert summary_value(err, "trajectories") == "2" and summary_value(err, "blocks removed") == "12"


def test_04_iclr_edits_both_request_copies_alike(tmp_path, capsys):
    src = case("04-litellm-spend-logs.jsonl")
    out, _ = prune(capsys, tmp_path, src, "--variant", "iclr")
    row = json.loads(out.splitlines()[1])
    first, second = row["messages"][2]["reasoning_content"], row["proxy_server_request"]["messages"][2]["reasoning_content"]
    assert first == second and "[SKIP]" in first
    assert "[SKIP]" in row["response"]["choices"][0]["message"]["reasoning_content"]


def test_06_magistral_thinking_chunks_are_openai_and_emptied_in_place(tmp_path, capsys):
    src = case("06-magistral-thinking-chunks.json")
    doc = json.loads(src.read_bytes())
    found = registry.detect_why(src.read_bytes(), str(src))
    assert found.adapter.name == "openai" and "Mistral 'thinking' content chunks" in found.match.reason
    want = copy.deepcopy(doc)
    for i in (2, 4):
        want["messages"][i]["content"][0]["thinking"][0]["text"] = ""
    out, _ = prune(capsys, tmp_path, src, "--variant", "delete-all")
    assert out == indented(want)


def test_07_converse_signed_reasoning_removed_redacted_kept(tmp_path, capsys):
    src = case("07-bedrock-converse-reasoning.json")
    doc = json.loads(src.read_bytes())
    assert registry.detect(src.read_bytes(), str(src)).name == "bedrock"
    # Claude on Bedrock signs its reasoning: by default it is sealed (the provider rule), so
    # nothing is a candidate and prune writes the file back byte for byte, saying so
    assert blocks_per_step(capsys, src) == {}
    out, err = prune(capsys, tmp_path, src, "--variant", "delete-all")
    assert out == src.read_bytes() and summary_value(err, "reasoning parts left sealed (provider rule)") == "2 (anthropic signed 2)"
    edit = ("--signed-thinking", "edit")
    assert blocks_per_step(capsys, src, *edit) == {("07-bedrock-converse-reasoning.json#0", 0): 4, ("07-bedrock-converse-reasoning.json#0", 1): 4}
    want = copy.deepcopy(doc)
    # a fully deleted signed block leaves content (its signature with it); the redacted
    # block, the tool call, the result, the system prompt and the answer stay as they were
    del want["messages"][1]["content"][0]
    del want["messages"][3]["content"][1]
    out, err = prune(capsys, tmp_path, src, "--variant", "delete-all", *edit)
    assert out == indented(want)
    assert "1 reasoning part redacted by the provider" in err


def test_07_converse_iclr_drops_the_signature_of_an_edited_block(tmp_path, capsys):
    src = case("07-bedrock-converse-reasoning.json")
    doc = json.loads(src.read_bytes())
    out, _ = prune(capsys, tmp_path, src, "--variant", "iclr", "--signed-thinking", "edit")
    got = json.loads(out)
    for i, k in ((1, 0), (3, 1)):
        block = got["messages"][i]["content"][k]["reasoningContent"]["reasoningText"]
        assert "[SKIP]" in block["text"] and "signature" not in block
    assert got["messages"][3]["content"][0] == doc["messages"][3]["content"][0]
    assert got["system"] == doc["system"] and got["toolConfig"] == doc["toolConfig"]


def test_07_convert_to_openai_refuses_and_writes_nothing(tmp_path, capsys):
    src = case("07-bedrock-converse-reasoning.json")
    out = tmp_path / "out.jsonl"
    code, stdout, err = run_cli(capsys, "convert", str(src), "--to", "openai", "-o", str(out))
    assert code == 2 and stdout == "" and not out.exists()
    assert "cannot convert" in err and "without losing data" in err
    # without the tool definitions, the signed reasoning is what stops it
    doc = json.loads(src.read_bytes())
    del doc["toolConfig"]
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(doc, indent=2))
    code, _, err = run_cli(capsys, "convert", str(bare), "--to", "openai", "-o", str(out))
    assert code == 2 and "signed thinking" in err and not out.exists()


def test_08_litellm_thinking_blocks_are_openai_signed_block_emptied(tmp_path, capsys):
    src = case("08-litellm-thinking-blocks.json")
    doc = json.loads(src.read_bytes())
    assert registry.detect(src.read_bytes(), str(src)).name == "openai"
    # anthropic/claude-*: the signed blocks (and reasoning_content, their copy; the display-omitted
    # block too) are sealed by default
    out, err = prune(capsys, tmp_path, src, "--variant", "delete-all")
    assert out == src.read_bytes() and summary_value(err, "reasoning parts left sealed (provider rule)") == "3 (anthropic signed 3)"
    want = copy.deepcopy(doc)
    for i in (2, 8):
        msg = want["messages"][i]
        msg["reasoning_content"] = msg["thinking_blocks"][0]["thinking"] = ""
        del msg["thinking_blocks"][0]["signature"]
    out, err = prune(capsys, tmp_path, src, "--variant", "delete-all", "--signed-thinking", "edit")
    assert out == indented(want)
    assert summary_value(err, "unrecognised") == "0"
    assert "1 reasoning part of type redacted_thinking" in err
