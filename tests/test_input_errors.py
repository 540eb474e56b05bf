"""Errors for input that is not what it claims to be: each names the file and says what is
wrong in the user's terms (a fresh user's trial: a field of a JSON document without its line,
``--format X`` on another format, plain text, UTF-16 without a byte order mark)."""

import json

import pytest

from format_helpers import SAMPLES, run_cli

CHAT = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "reasoning_content": "think"}]


def test_a_bad_field_of_a_json_document_names_its_line(capsys, tmp_path):
    path = tmp_path / "wrongtype.json"
    bad = [CHAT[0], {**CHAT[1], "reasoning_content": 5}]
    path.write_text(json.dumps({"messages": bad}, indent=2))
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if '"reasoning_content"' in text)
    code, _, err = run_cli(capsys, "score", str(path), "--model", "fake", "-o", str(tmp_path / "s.jsonl"))
    assert code == 2
    assert f"{path}:{line}: field 'messages[1].reasoning_content': must be a string" in err and "not number" in err


def test_a_field_whose_name_cannot_be_walked_says_json_document(capsys, tmp_path):
    path = tmp_path / "dotted.json"  # a key with a dot elsewhere does not disturb the walk
    path.write_text(json.dumps({"a.b": 1, "messages": [CHAT[0], {**CHAT[1], "reasoning_content": True}]}, indent=1))
    code, _, err = run_cli(capsys, "score", str(path), "--model", "fake", "-o", str(tmp_path / "s.jsonl"))
    assert code == 2 and f"{path}:11: field 'messages[1].reasoning_content'" in err
    from iclr_cli.errors import InputError
    from iclr_cli.formats.reading import located

    data = b'{"x.y":\n {"z": 1}}'
    assert str(located(InputError("f.json", "bad", field="x.y.z"), data)) == "f.json (JSON document): field 'x.y.z': bad"
    data = b'[\n {"a": [0,\n  {"b": "c"}]},\n {"a": "d", "e": {"f": 1}}\n]'
    assert located(InputError("f.json", "bad", field="[1].e.f"), data).line == 4
    assert located(InputError("f.json", "bad", field="[0].a[1].b"), data).line == 3
    # a field the document lacks is placed where the object that should hold it starts
    assert located(InputError("f.json", "bad", field="[1].role"), data).line == 4
    assert located(InputError("f.json", "bad", field="[0].a[1].role"), data).line == 3


def test_a_message_without_its_role_is_named_with_its_line(capsys, tmp_path):
    """Not "no message list found" nor "no format matched": the list is found by its first
    message, and the one that lost its role is named (JSON document and chat-message JSONL)."""
    messages = [{"role": "system", "content": "s"}, *CHAT, {"content": "", "reasoning_content": "more"}]
    doc = tmp_path / "chat.json"
    doc.write_text(json.dumps(messages, indent=1))
    line = next(n for n, text in enumerate(doc.read_text().splitlines(), 1) if '"more"' in text) - 2  # the message's "{"
    code, _, err = run_cli(capsys, "prune", str(doc), "--model", "fake", "-o", str(tmp_path / "p.json"))
    assert code == 2 and f"{doc}:{line}: field '[3].role': message has no string 'role'" in err
    lines = tmp_path / "chat.jsonl"
    lines.write_text("".join(json.dumps(m) + "\n" for m in [*messages[:2], messages[3], messages[2], messages[2]]))
    code, _, err = run_cli(capsys, "prune", str(lines), "--model", "fake", "-o", str(tmp_path / "p.jsonl"))
    assert code == 2 and f"{lines}:3: field 'role': line is not a chat message" in err


@pytest.mark.parametrize("value,code", [(5, 2), (True, 2), (["step one"], 0), ({"text": "x"}, 0)])
def test_reasoning_field_types_number_is_an_error_list_or_object_is_reported(capsys, tmp_path, value, code):
    """A number is no provider's shape (exit 2); a list or object might be one: reported and
    kept in place (--strict refuses it); each message says the rule."""
    path = tmp_path / "rc.jsonl"
    path.write_text(json.dumps({"messages": [CHAT[0], {**CHAT[1], "reasoning_content": value}]}) + "\n" + json.dumps({"messages": CHAT}) + "\n")
    got, _, err = run_cli(capsys, "prune", str(path), "--model", "fake", "-o", str(tmp_path / "o.jsonl"))
    assert got == code, err
    if code == 2:
        assert "must be a string (a list or object is reported as unrecognised and kept as it is)" in err
    else:
        assert "not text (a string is the documented form; a number would be an input error)" in err
        assert json.loads((tmp_path / "o.jsonl").read_text().splitlines()[0])["messages"][1]["reasoning_content"] == value
        got, _, err = run_cli(capsys, "prune", str(path), "--model", "fake", "--strict", "-o", str(tmp_path / "p.jsonl"))
        assert got == 2


@pytest.mark.parametrize("command", ["score", "convert"])
def test_format_of_another_shape_says_what_the_file_looks_like(capsys, tmp_path, command):
    extra = ["--to", "iclr"] if command == "convert" else ["--model", "fake"]
    code, _, err = run_cli(capsys, command, str(SAMPLES / "openai_chat.json"), "--format", "codex", *extra, "-o", str(tmp_path / "o"))
    assert code == 2
    assert "does not look like codex" in err and "it looks like openai" in err and "--format openai" in err
    assert "--skip-bad-lines" not in err  # skipping lines would not make it codex
    code, _, err = run_cli(capsys, "score", str(SAMPLES / "codex_rollout.jsonl"), "--format", "openai", "--model", "fake", "-o", str(tmp_path / "p"))
    assert code == 2 and "does not look like openai" in err and "it looks like codex" in err


def test_format_of_the_right_shape_keeps_the_readers_error(capsys, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"messages": CHAT}) + "\n" + json.dumps({"messages": [CHAT[0], {**CHAT[1], "reasoning_content": 5}]}) + "\n")
    code, _, err = run_cli(capsys, "score", str(path), "--format", "openai", "--model", "fake", "-o", str(tmp_path / "o"))
    assert code == 2 and f"{path}:2: field 'messages[1].reasoning_content'" in err and "does not look like" not in err


def test_plain_text_is_not_json_before_any_format_is_tried(capsys, tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("\nhello world\nmore text\n")
    code, _, err = run_cli(capsys, "score", str(path), "--model", "fake")
    assert code == 2 and f"{path}: not JSON or JSONL: line 2 is text ('hello world')" in err and "formats tried" not in err
    path.write_text('"a JSON string"\n')
    code, _, err = run_cli(capsys, "score", str(path), "--model", "fake")
    assert code == 2 and "line 1 is a JSON string, not a JSON object or list" in err


@pytest.mark.parametrize("encoding,name", [("utf-16-le", "UTF-16 (little-endian)"), ("utf-16-be", "UTF-16 (big-endian)"), ("utf-32-le", "UTF-32 (little-endian)")])
def test_wide_text_without_a_bom_is_named(capsys, tmp_path, encoding, name):
    path = tmp_path / "chat.json"
    path.write_bytes(json.dumps({"messages": CHAT}).encode(encoding))
    code, _, err = run_cli(capsys, "score", str(path), "--model", "fake")
    assert code == 2 and f"looks like {name} text without a byte order mark; save it as UTF-8" in err and "binary" not in err


def test_score_of_a_file_without_reasoning_says_so(capsys, tmp_path):
    path = tmp_path / "plain.jsonl"
    path.write_text(json.dumps({"messages": [CHAT[0], {"role": "assistant", "content": "a"}]}) + "\n")
    code, _, err = run_cli(capsys, "score", str(path), "--model", "fake", "-o", str(tmp_path / "s.jsonl"))
    assert code == 0 and "no reasoning blocks in the input: nothing to score (0 records written)" in err
    assert (tmp_path / "s.jsonl").read_bytes() == b""
    path.write_text(json.dumps({"messages": [CHAT[0], {**CHAT[1], "reasoning_content": "one\n\ntwo"}]}) + "\n")
    code, _, err = run_cli(capsys, "score", str(path), "--model", "fake", "-o", str(tmp_path / "t.jsonl"))
    assert code == 0 and "no reasoning blocks" not in err and (tmp_path / "t.jsonl").read_bytes()


_CALL = {"id": "c1", "type": "function", "function": {"name": "run", "arguments": 5}}
_INT_ARGUMENT_FILES = {
    "openai": ({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": None, "reasoning_content": "r", "tool_calls": [_CALL]},
                             {"role": "tool", "tool_call_id": "c1", "content": "ok"}]}, "messages[1].tool_calls[0].function.arguments", "not a number"),
    "openai-responses": ({"input": [{"role": "user", "content": "q"}, {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "r"}]},
                                    {"type": "function_call", "call_id": "c1", "name": "run", "arguments": 5},
                                    {"type": "function_call_output", "call_id": "c1", "output": "ok"}]}, "input[2].arguments", "not a number"),
    "codex": ([{"type": "session_meta", "payload": {"id": "s1", "cwd": "/w"}},
               {"type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "q"}]}},
               {"type": "response_item", "payload": {"type": "function_call", "call_id": "c1", "name": "run", "arguments": {"cmd": ["ls"]}, "id": "fc1"}}],
              "payload.arguments", "not an object"),
}


@pytest.mark.parametrize("fmt", sorted(_INT_ARGUMENT_FILES))
def test_tool_call_arguments_that_are_not_json_text_are_refused_naming_the_field(capsys, tmp_path, fmt):
    """A call's arguments are JSON text on every OpenAI wire; a number (or, on Responses and
    Codex, an object) is a malformed call, refused before anything is scored."""
    record, field, kind = _INT_ARGUMENT_FILES[fmt]
    path = tmp_path / ("in.jsonl" if isinstance(record, list) else "in.json")
    path.write_text("".join(json.dumps(r) + "\n" for r in record) if isinstance(record, list) else json.dumps(record))
    code, _, err = run_cli(capsys, "prune", str(path), "--format", fmt, "--model", "fake", "-o", str(tmp_path / "out"))
    assert code == 2, err
    assert f"field '{field}': must be" in err and kind in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["score", "prune"])
@pytest.mark.parametrize("cut", ["document", "jsonl"])
def test_a_cut_file_fails_before_the_proxy_model_loads(capsys, tmp_path, monkeypatch, command, cut):
    """A truncated file is found by reading it, not after the model has loaded (seconds)."""
    from iclr_cli import pipeline

    loaded = []
    monkeypatch.setattr(pipeline, "build_engines", lambda *a, **k: loaded.append(a) or (_ for _ in ()).throw(AssertionError("model loaded")))
    turns = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "reasoning_content": "think it through"}]
    if cut == "document":
        text = json.dumps({"messages": turns * 3}, indent=2)
        text = text[: text.index('"think it through"', len(text) // 2) + 6]  # ends inside a string
        expected = "truncated JSON document: the string opened at line"
    else:
        # line 3 cut and the next written after it (a cut last line with no line end is one
        # still being written: read with a warning, tests/test_live_session_file.py)
        lines = [json.dumps({"messages": turns, "id": k}) for k in range(4)]
        text = "\n".join([*lines[:2], lines[2][:30], lines[3]]) + "\n"
        expected = ":3: line is not a complete JSON record"
    path = tmp_path / ("cut.json" if cut == "document" else "cut.jsonl")
    path.write_text(text)
    code, _, err = run_cli(capsys, command, str(path), "--format", "openai", "-o", str(tmp_path / "out"))
    assert (code, loaded) == (2, []), err
    assert expected in err, err


def test_a_values_kind_is_named_in_jsons_terms_whatever_parsed_it():
    """Converting reads objects into a dict subclass that records the keys asked for: a report
    still says "object", never the class's name."""
    from iclr_cli.formats.convert.carried import AskedDict
    from iclr_cli.formats.reasoning_fields import json_kind

    assert [json_kind(v) for v in (AskedDict({"a": 1}), {}, [], "s", 1.5, True, None)] == \
        ["object", "object", "list", "string", "number", "boolean", "null"]


def test_a_reader_tripped_by_an_unforeseen_shape_is_an_input_error_not_a_traceback(capsys, tmp_path, monkeypatch):
    """A value of a shape no reader foresaw (a 'type' that is a list) names the file and exits 2;
    a sniffer it trips only rules its format out."""
    from iclr_cli.formats.adapters import openai_chat
    from iclr_cli.formats.adapters.claude_code import ADAPTER as CLAUDE

    path = tmp_path / "chat.json"
    path.write_text(json.dumps(CHAT))

    def trips(*args, **kwargs):
        raise TypeError("unhashable type: 'list'")

    monkeypatch.setattr(CLAUDE, "sniff", trips)  # detection goes on without it
    monkeypatch.setattr(openai_chat.ADAPTER, "load", trips)
    monkeypatch.setattr(openai_chat.ADAPTER, "load_chunks", trips, raising=False)
    code, out, err = run_cli(capsys, "prune", str(path), "--model", "fake", "-o", str(tmp_path / "p.json"))
    assert code == 2 and out == "" and not (tmp_path / "p.json").exists()
    assert f"{path}: the openai reader met a value of a type or shape it does not expect (unhashable type: 'list')" in err


def test_a_claude_code_line_whose_type_is_not_a_string_is_reported(tmp_path, capsys):
    sample = SAMPLES / "claude_code_session.jsonl"
    lines = [json.loads(line) for line in sample.read_text().splitlines() if line.strip()]
    at = next(i for i, r in enumerate(lines) if r.get("type") == "user")
    lines[at]["type"] = ["user"]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    code, _, err = run_cli(capsys, "prune", str(path), "--model", "fake", "-o", str(tmp_path / "p.jsonl"))
    assert code == 0 and f"{path}:{at + 1}: field 'type': line holds a user message but its type is ['user']" in err


@pytest.mark.parametrize("sample, holder, role, field", [
    ("anthropic_messages.json", "messages", "assistant", "role"),
    ("bedrock_converse.json", "messages", "assistant", "role"),
    ("gemini_contents.json", "contents", "model", "role"),
])
def test_a_model_turn_under_an_unknown_role_is_reported(tmp_path, capsys, sample, holder, role, field):
    """Read as input it would lose its step: the summary's unrecognised count and a warning say so."""
    doc = json.loads((SAMPLES / sample).read_text())
    turns = doc[holder] if isinstance(doc, dict) else doc
    at = next(i for i, m in enumerate(turns) if m.get("role") == role)
    turns[at]["role"] = "zzunknown"
    path = tmp_path / sample
    path.write_text(json.dumps(doc, indent=1))
    code, _, err = run_cli(capsys, "prune", str(path), "--model", "fake", "-o", str(tmp_path / "p.json"))
    assert code == 0 and f"field '{holder}[{at}].{field}': role 'zzunknown'" in err and "not as a model turn" in err
    from format_helpers import summary_value

    assert summary_value(err, "unrecognised") == "1"


def test_a_first_field_larger_than_the_sniffed_head_is_still_detected(tmp_path, capsys):
    """The format is judged on the file's first 64 KiB, then on more of it: a 200 KB system
    prompt before the messages no longer makes every format miss."""
    doc = json.loads((SAMPLES / "anthropic_messages.json").read_text())
    doc = {"system": "You are careful. " * 12_000, **{k: v for k, v in doc.items() if k != "system"}}
    path = tmp_path / "big_system.json"
    path.write_text(json.dumps(doc))
    assert path.stat().st_size > 200_000
    code, _, err = run_cli(capsys, "prune", str(path), "--model", "fake", "-o", str(tmp_path / "p.json"))
    assert code == 0, err
    from iclr_cli.formats import registry

    assert registry.detect(path.read_bytes(), str(path)).name == "anthropic"


def test_a_null_line_in_jsonl_is_a_bad_line_not_a_blank_one(tmp_path, capsys):
    """Readers take a value of None for a blank line: a literal ``null`` line was passed over
    unseen. It is a bad line: refused, or skipped and named with --skip-bad-lines."""
    lines = (SAMPLES / "claude_code_session.jsonl").read_text().splitlines()
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join([*lines[:3], "null", *lines[3:]]) + "\n")
    code, _, err = run_cli(capsys, "prune", str(path), "--model", "fake", "-o", str(tmp_path / "p.jsonl"))
    assert code == 2 and f"{path}:4: line is JSON null, not a record" in err
    code, _, err = run_cli(capsys, "prune", str(path), "--model", "fake", "--skip-bad-lines", "-o", str(tmp_path / "p.jsonl"))
    assert code == 0 and f"{path}:4: skipped: line is JSON null, not a record" in err
    assert (tmp_path / "p.jsonl").read_text().splitlines()[3] == "null"  # passed through as it was


def test_a_gemini_cli_line_that_is_none_of_its_records_is_reported(tmp_path, capsys):
    lines = (SAMPLES / "gemini_cli_session.jsonl").read_text().splitlines()
    path = tmp_path / "g.jsonl"
    path.write_text("\n".join([*lines[:2], "42", "{}", *lines[2:]]) + "\n")
    code, _, err = run_cli(capsys, "prune", str(path), "--model", "fake", "-o", str(tmp_path / "p.jsonl"))
    assert code == 0 and f"{path}:3: line is not a Gemini CLI record" in err and f"{path}:4: line is not a Gemini CLI record" in err
    from format_helpers import summary_value

    assert summary_value(err, "unrecognised") == "2"


@pytest.mark.parametrize("at", [0, 2])
def test_a_byte_that_is_not_utf8_names_its_jsonl_line(tmp_path, capsys, at):
    """On the first line too: a complete record with one Latin-1 byte is a JSONL line, not a
    document that failed to parse."""
    lines = (SAMPLES / "codex_rollout.jsonl").read_bytes().splitlines()
    lines[at] = lines[at].replace(b'Z"', b'Z\xe9"', 1)  # inside the record's timestamp string
    assert b"\xe9" in lines[at]
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    code, _, err = run_cli(capsys, "prune", str(path), "--model", "fake", "-o", str(tmp_path / "p.jsonl"))
    assert code == 2 and f"{path}:{at + 1}: not UTF-8 text: byte 0xe9, the line's byte" in err
