"""``convert`` compares with the input as parsed JSON (docs/FORMAT.md): a text under a key
the adapter never read, that the output does not carry, refuses the conversion (exit 2,
naming the line and field); ids, timestamps and numbers are format data, and each adapter's
``not_carried`` key paths are format data with text (formats/convert/carried.py)."""

from __future__ import annotations

import json

import pytest

from format_helpers import CASES, REALDATA, SAMPLES, run_cli
from iclr_cli.inputs import load_file
from iclr_cli.formats.convert import convert_document
from iclr_cli.formats.convert.carried import AskedDict, is_text, reading_tracked, unread_texts
from iclr_cli.formats import registry
from iclr_cli.jsonio import loads

ASSISTANT = {"role": "assistant", "content": "I will read the helper first.", "tool_calls": [
    {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"report/dates.py\"}"}}]}
CHAT = [{"role": "user", "content": "The report crashes on the 31st. Fix it."}, ASSISTANT,
        {"role": "tool", "tool_call_id": "call_1", "content": "def add_month(d): return d.replace(month=d.month + 1)"}]


def convert(capsys, tmp_path, record, to="openai", name="in.json"):
    src = tmp_path / name
    src.write_text(json.dumps(record, indent=2))
    out = tmp_path / "out.jsonl"
    code, _, err = run_cli(capsys, "convert", str(src), "--to", to, "-o", str(out))
    return code, err, out, src


@pytest.mark.parametrize("to", ["iclr", "openai", "anthropic"])
def test_a_system_prompt_the_adapter_does_not_read_refuses(capsys, tmp_path, to):
    record = {"system": [{"text": "You are a careful coding agent. Keep changes small."}], "messages": CHAT}
    code, err, out, src = convert(capsys, tmp_path, record, to)
    assert code == 2 and not out.exists()
    assert f"{src}: field 'system[0].text': text the openai adapter does not read would not be carried" in err


def test_an_unread_message_field_with_text_refuses_naming_the_line(capsys, tmp_path):
    rows = [{"messages": CHAT}, {"messages": [CHAT[0], {**ASSISTANT, "provider_notes": "The model hesitated before the call."}, CHAT[2]]}]
    src = tmp_path / "rows.jsonl"
    src.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in rows))
    code, _, err = run_cli(capsys, "convert", str(src), "--to", "iclr", "-o", str(tmp_path / "o.jsonl"))
    assert code == 2 and f"{src}:2: field 'messages[1].provider_notes'" in err


def test_unread_text_that_the_output_carries_and_format_data_pass(capsys, tmp_path):
    record = {"messages": CHAT, "id": "run-7", "created": 1777712401, "model": "deepseek-reasoner", "ok": True,
              "timestamp": "2026-05-02T09:01:00.000Z",
              "raw_prompt": "The report crashes on the 31st. Fix it.",  # a copy of the user text: carried
              "raw_args": {"path": "report/dates.py", "note": "def add_month(d): return d.replace(month=d.month + 1)"}}
    code, err, out, _ = convert(capsys, tmp_path, record, "openai")
    assert code == 0, err
    assert json.loads(out.read_text())["messages"][0]["content"] == CHAT[0]["content"]


def test_json_escaped_copies_are_carried(capsys, tmp_path):
    multi = {**ASSISTANT, "tool_calls": [{**ASSISTANT["tool_calls"][0], "function": {"name": "run", "arguments": json.dumps({"script": "set -e\nmake test"})}}]}
    record = {"messages": [CHAT[0], multi, CHAT[2]], "debug": {"script": "set -e\nmake test"}}
    code, err, out, _ = convert(capsys, tmp_path, record, "openai")
    assert code == 0, err
    # "debug.script" is not read, but its text is carried: inside the arguments JSON string, escaped
    assert b'set -e\\\\nmake test' in out.read_bytes()  # the newline escaped twice: JSON in JSON
    [call] = json.loads(out.read_text())["messages"][1]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"script": "set -e\nmake test"}


def test_case_07_bedrock_converse_is_carried_or_refused(capsys, tmp_path):
    src = CASES / "turn3" / "07-bedrock-converse-reasoning.json"
    if not src.is_file():
        pytest.skip(f"field case not available at {src}")
    for to in ("openai", "anthropic", "iclr"):
        out = tmp_path / f"{to}.jsonl"
        code, _, err = run_cli(capsys, "convert", str(src), "--to", to, "-o", str(out))
        # read as Converse: openai and anthropic cannot carry the signed and redacted reasoning;
        # the canonical model carries every text (signatures are format data it does not hold)
        assert (code, out.exists()) == ((0, True) if to == "iclr" else (2, False)), err
        out.unlink(missing_ok=True)
        # read as OpenAI chat (how it was misread before the Converse adapter): refused before
        # converting, as a file that does not look like OpenAI chat and loses its reasoning so
        code, _, err = run_cli(capsys, "convert", str(src), "--format", "openai", "--to", to, "-o", str(out))
        assert code == 2 and not out.exists(), err
        assert "does not look like openai (" in err and "use --format bedrock" in err
        assert "Read as openai: 0 reasoning part(s), where bedrock reads 2" in err


def test_declared_format_data_is_not_refused(capsys, tmp_path):
    code, _, err = run_cli(capsys, "convert", str(SAMPLES / "claude_code_session.jsonl"), "--to", "iclr", "-o", str(tmp_path / "c.jsonl"))
    assert code == 0, err  # toolUseResult copies, hook payloads and system notices are declared
    assert ("toolUseResult",) in registry.get("claude_code").not_carried


def test_asking_is_reading_and_iterating_is_not():
    with reading_tracked():
        value = loads(b'{"a": "one two", "b": {"c": "three four", "d": "x"}, "e": ["five six"], "f": "seven eight"}')
    assert isinstance(value, AskedDict)
    value.get("a")
    value["b"]
    list(value.items())
    assert "f" in value  # presence is not reading either
    assert list(unread_texts(value, (), frozenset())) == [(("b", "c"), "three four"), (("e", 0), "five six"), (("f",), "seven eight")]
    assert list(unread_texts(value, (), frozenset({("b", "c"), ("e",), ("f",)}))) == []
    assert is_text("a b") and not is_text("2026-05-02T09:01:00Z") and not is_text(" word ")


def test_library_callers_without_tracking_keep_the_part_check_only(tmp_path):
    src = tmp_path / "in.json"
    src.write_text(json.dumps({"system": [{"text": "You are careful."}], "messages": CHAT}))
    _, doc = load_file(str(src))
    assert convert_document(doc, "openai")  # not read under reading_tracked: no input-side check


@pytest.mark.parametrize("to", ["openai", "anthropic", "iclr"])
def test_a_copy_of_tool_arguments_is_carried_as_a_json_value(capsys, tmp_path, to):
    """The arguments are a string in OpenAI chat and an object in Anthropic ``input``: an
    unread copy of them is carried by either (compared as JSON values, key order aside)."""
    copy = {"messages": [CHAT[0], ASSISTANT, CHAT[2]], "debug": {"arguments": "{\"path\":  \"report/dates.py\"}"}}
    code, err, out, _ = convert(capsys, tmp_path, copy, to)
    assert code == 0, err
    out.unlink()
    other = {**copy, "debug": {"arguments": "{\"path\": \"report/other.py\"}"}}
    code, err, out, src = convert(capsys, tmp_path, other, to)
    assert code == 2 and not out.exists() and f"{src}: field 'debug.arguments'" in err


def test_openhands_observation_copies_of_calls_convert_to_every_target(capsys, tmp_path):
    """OpenHands V0 keeps each call's model_response again on its observation (event 8 of
    basic_gui_mode.json repeats event 7's call): both targets carry it."""
    src = REALDATA / "openhands_events" / "basic_gui_mode.json"
    if not src.is_file():
        pytest.skip(f"real data not available at {src}")
    for to in ("openai", "anthropic"):
        code, _, err = run_cli(capsys, "convert", str(src), "--to", to, "-o", str(tmp_path / f"{to}.jsonl"))
        assert code == 0, err
        assert json.loads((tmp_path / f"{to}.jsonl").read_text())["messages"]
