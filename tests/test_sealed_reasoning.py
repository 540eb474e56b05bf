"""Reasoning that is in the file but may never be edited (signed, encrypted, redacted) is named
in a warning, never passed over in silence; Gemini signatures on any part block a conversion;
upper-case think tags are reported as unrecognised (docs/FORMAT.md, "Reasoning left unedited")."""

import json

import pytest

from format_helpers import run_cli, summary_value
from iclr_cli.formats.adapters.gemini import ADAPTER as GEMINI
from iclr_cli.formats.openai_messages import read_messages

THOUGHT = "The user wants the limit.\n\nI should open a.cfg first.\n\nThen I answer."


def gemini_doc(*, signed_thought: bool, signed_call: bool) -> dict:
    thought = {"text": THOUGHT, "thought": True, **({"thoughtSignature": "c2ln"} if signed_thought else {})}
    call = {"functionCall": {"name": "read_file", "args": {"path": "a.cfg"}}, **({"thoughtSignature": "Y2FsbA=="} if signed_call else {})}
    return {
        "contents": [
            {"role": "user", "parts": [{"text": "What is the limit?"}]},
            {"role": "model", "parts": [{"text": "Plain thought.\n\nSecond block.", "thought": True}, call]},
            {"role": "user", "parts": [{"functionResponse": {"name": "read_file", "response": {"content": "limit=10"}}}]},
            {"role": "model", "parts": [thought, {"text": "It is 10."}]},
        ]
    }


def prune(capsys, tmp_path, name: str, data: str, *args: str) -> tuple[int, str, bytes, bytes]:
    src, out = tmp_path / name, tmp_path / f"out-{name}"
    src.write_text(data)
    code, _, err = run_cli(capsys, "prune", str(src), "--model", "fake", "--variant", "delete-all", "-o", str(out), *args)
    return code, err, src.read_bytes(), out.read_bytes()


def test_signed_gemini_thought_is_named_in_a_warning_and_left_as_written(capsys, tmp_path):
    code, err, before, after = prune(capsys, tmp_path, "g.json", json.dumps(gemini_doc(signed_thought=True, signed_call=False)))
    assert code == 0
    src = tmp_path / "g.json"
    assert (
        f"{src}: 1 reasoning part signed by Gemini (thoughtSignature; a signed part must not change): "
        "left unedited, not scored or pruned (at field 'contents[3].parts[0]')"
    ) in " ".join(err.split())
    assert summary_value(err, "reasoning blocks") == "2"  # the unsigned thought only
    thoughts = [p for c in json.loads(after)["contents"] for p in c["parts"] if p.get("thought")]
    assert thoughts == [{"text": THOUGHT, "thought": True, "thoughtSignature": "c2ln"}]  # unsigned one deleted, signed kept


def test_all_signed_gemini_counts_every_signed_thought_once_per_kind(tmp_path):
    doc = {"contents": [{"role": "model", "parts": [{"text": f"t{k}", "thought": True, "thoughtSignature": "c2ln"} for k in range(3)]}]}
    read = GEMINI.load(json.dumps(doc).encode(), "all.json")
    assert read.warnings == [
        "all.json: 3 reasoning parts signed by Gemini (thoughtSignature; a signed part must not change): "
        "left unedited, not scored or pruned (first at field 'contents[0].parts[0]')"
    ]
    jsonl = "\n".join(json.dumps(doc) for _ in range(2)) + "\n"
    [chunk] = GEMINI.load_chunks(jsonl.encode(), "all.jsonl")
    assert chunk.warnings == [
        "all.jsonl: 6 reasoning parts signed by Gemini (thoughtSignature; a signed part must not change): "
        "left unedited, not scored or pruned (first at line 1, field 'contents[0].parts[0]')"
    ]


def test_google_signed_pi_thinking_is_named_in_a_warning(capsys, tmp_path):
    lines = [
        {"type": "session", "version": 3, "id": "s", "timestamp": "t", "cwd": "/w"},
        {"type": "message", "id": "e1", "parentId": None, "timestamp": "t", "message": {"role": "user", "content": [{"type": "text", "text": "limit?"}], "timestamp": 1}},
        {"type": "message", "id": "e2", "parentId": "e1", "timestamp": "t", "message": {
            "role": "assistant", "api": "google-generative-ai", "provider": "google", "model": "gemini", "stopReason": "stop", "timestamp": 2,
            "content": [{"type": "thinking", "thinking": THOUGHT, "thinkingSignature": "sig"}, {"type": "text", "text": "12"}]}},
    ]
    code, err, before, after = prune(capsys, tmp_path, "p.jsonl", "".join(json.dumps(x) + "\n" for x in lines))
    assert code == 0 and after == before
    assert (
        f"{tmp_path / 'p.jsonl'}: 1 reasoning part signed by google-generative-ai (a Gemini thought signature; a signed part must not change): "
        "left unedited, not scored or pruned (at line 3, field 'message.content[0]')"
    ) in " ".join(err.split())
    assert summary_value(err, "reasoning blocks") == "0"


@pytest.mark.parametrize(
    ("extra", "what", "field"),
    [
        ({"reasoning_details": [{"type": "reasoning.encrypted", "data": "gAAAA", "index": 0}]}, "encrypted (reasoning.encrypted, no readable text)", "[1].reasoning_details[0]"),
    ],
)
def test_openai_message_with_only_sealed_reasoning_is_named_in_a_warning(capsys, tmp_path, extra, what, field):
    messages = [{"role": "user", "content": "limit?"}, {"role": "assistant", "content": "12", **extra}]
    code, err, before, after = prune(capsys, tmp_path, "o.json", json.dumps(messages))
    assert code == 0 and after == before
    assert f"{tmp_path / 'o.json'}: 1 reasoning part {what}: left unedited, not scored or pruned (at field '{field}')" in " ".join(err.split())


def test_redacted_thinking_block_is_sealed_in_the_message_api():
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "12", "thinking_blocks": [{"type": "redacted_thinking", "data": "xyz"}]}]
    traj = read_messages(messages, traj_id="t")
    assert [(s.field, s.what) for s in traj.sealed] == [("messages[1].thinking_blocks[0]", "of type redacted_thinking (redacted; its payload cannot be read)")]
    assert traj.steps[0].reasoning == ()


def test_encrypted_entry_beside_readable_text_is_not_called_unedited(tmp_path, capsys):
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "reasoning": "One.\n\nTwo.",
                 "reasoning_details": [{"type": "reasoning.text", "text": "One.\n\nTwo."}, {"type": "reasoning.encrypted", "data": "gA"}]}]
    # the text beside an encrypted copy of itself is sealed by default, and the warning says why
    code, err, before, after = prune(capsys, tmp_path, "o2.json", json.dumps(messages))
    assert code == 0 and after == before and "beside encrypted_content left sealed" in " ".join(err.split())
    code, err, _, after = prune(capsys, tmp_path, "o2.json", json.dumps(messages), "--encrypted-reasoning", "drop")
    assert code == 0 and "left unedited" not in err
    assert json.loads(after)[1]["reasoning"] == ""  # the readable copy was pruned (opaque: encrypted entry dropped)


@pytest.mark.parametrize("tag", ["THINK", "Think"])
def test_upper_case_think_tags_are_reported_and_strict_exits_2(capsys, tmp_path, tag):
    src = tmp_path / "u.json"
    src.write_text(json.dumps([{"role": "user", "content": "limit?"}, {"role": "assistant", "content": f"<{tag}>One.\n\nTwo.</{tag}>12"}]))
    code, _, err = run_cli(capsys, "prune", str(src), "--model", "fake", "--variant", "delete-all", "--strict", "-o", str(tmp_path / "o.json"))
    assert code == 2
    assert f"{src}: field '[1].content': <{tag}> markup in the visible text" in err
    assert f"{src}: field '[1].content': </{tag}> markup in the visible text" in err
    assert "2 texts or fields not read as reasoning or action (--strict)" in " ".join(err.split())


@pytest.mark.parametrize("to", ["iclr", "openai", "anthropic"])
def test_gemini_signature_on_a_function_call_blocks_every_conversion(capsys, tmp_path, to):
    src = tmp_path / "c.json"
    src.write_text(json.dumps(gemini_doc(signed_thought=False, signed_call=True)))
    out = tmp_path / "out.jsonl"
    code, _, err = run_cli(capsys, "convert", str(src), "--to", to, "-o", str(out))
    assert code == 2 and not out.exists()
    assert (
        f"cannot convert {src} to {to} without losing data: 1 gemini signature (a provider's thought signature) would not be carried; "
        f"the first: {src}: field 'contents[1].parts[1].thoughtSignature': step 0: functionCall part"
    ) in " ".join(err.split())


def test_gemini_signed_thought_is_refused_for_iclr_too_and_unsigned_converts(capsys, tmp_path):
    signed, plain = tmp_path / "s.json", tmp_path / "p.json"
    signed.write_text(json.dumps(gemini_doc(signed_thought=True, signed_call=True)))
    plain.write_text(json.dumps(gemini_doc(signed_thought=False, signed_call=False)))
    code, _, err = run_cli(capsys, "convert", str(signed), "--to", "iclr")
    assert code == 2 and "2 gemini signatures (a provider's thought signature) would not be carried" in " ".join(err.split())
    code, out, _ = run_cli(capsys, "convert", str(plain), "--to", "iclr")
    assert code == 0 and len(out.splitlines()) == 1
