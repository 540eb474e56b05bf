"""Chat JSONL with one message per line (``chat-lines``) and ShareGPT conversations
(``sharegpt``): what they read, byte-for-byte round trips, edits in place, located errors."""

import json

import pytest

from format_helpers import REPO, run_cli
from iclr_cli.inputs import load_file
from iclr_cli.errors import InputError
from iclr_cli.formats import registry
from iclr_cli.formats.writeback import write_document

SHAPES = REPO / "tests" / "shapes"


def load(path, fmt=None, **kw):
    adapter, doc = load_file(str(path), fmt, **kw)
    return adapter, doc


def texts(traj):
    return [(p.kind, p.label, p.text) for p in traj.prompt] + [(p.kind, p.label, p.text) for s in traj.steps for p in s.parts]


# --- chat-lines -------------------------------------------------------------------------------

def test_chat_lines_is_one_conversation_in_line_order():
    adapter, doc = load(SHAPES / "chat_lines.jsonl")
    [traj] = doc.trajectories
    assert adapter.name == "chat-lines" and traj.id == "chat_lines.jsonl#0"
    assert texts(traj) == [
        ("prompt", "system", "You are a coding agent."),
        ("prompt", "user", "Fix the failing test."),
        ("reasoning", "reasoning", "The test fails on an empty list.\n\nI should read the function first.\n\nThen run the test."),
        ("action", "tool_call:bash", '{"cmd": "pytest -x"}'),
        ("observation", "tool_result", "1 failed"),
        ("reasoning", "reasoning", "It is an IndexError.\n\nGuard the empty case."),
        ("action", "assistant", "Fixed by guarding the empty list."),
    ]


def test_chat_lines_round_trip_byte_for_byte_and_edit_only_the_reasoning_lines(tmp_path, capsys):
    # CRLF line ends, a blank line and no newline at the end: all kept
    lines = (SHAPES / "chat_lines.jsonl").read_text().splitlines()
    data = ("\r\n".join(lines[:2]) + "\r\n\r\n" + "\r\n".join(lines[2:])).encode()
    path = tmp_path / "chat.jsonl"
    path.write_bytes(data)
    adapter, doc = load(path)
    assert write_document(adapter, doc, doc.trajectories).data == data
    code, out, _ = run_cli(capsys, "prune", str(path), "--variant", "delete-all", "--model", "fake", "-q")
    assert code == 0
    before, after = data.split(b"\r\n"), out.encode().split(b"\r\n")
    assert len(before) == len(after) and [i for i, (a, b) in enumerate(zip(before, after)) if a != b] == [3, 5]
    assert json.loads(after[3])["reasoning_content"] == ""
    assert json.loads(after[5])["content"] == "<think></think>Fixed by guarding the empty list."


def test_chat_lines_errors_name_the_line_and_field(tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_text('{"role": "user", "content": "Go."}\n{"role": "assistant", "content": "ok"}\n{"role": "assistant", "content": 7}\n')
    with pytest.raises(InputError) as exc:
        load(path, "chat-lines")
    assert (exc.value.line, exc.value.field) == (3, "content")
    path.write_text('{"role": "user", "content": "Go."}\n{"role": "assistant", "content": "ok"}\n{"note": "not a message"}\n')
    with pytest.raises(InputError) as exc:
        load(path, "chat-lines")
    assert exc.value.line == 3 and "not a chat message" in exc.value.problem
    _, doc = load(path, "chat-lines", skip_bad_lines=True)
    assert len(doc.trajectories[0].steps) == 1 and "chat.jsonl:3: passed through unscored" in doc.warnings[0]


def test_chat_lines_is_what_openai_suggests_for_such_a_file(capsys):
    code, _, err = run_cli(capsys, "score", str(SHAPES / "chat_lines.jsonl"), "--format", "openai", "--model", "fake")
    assert code == 2 and "it looks like chat-lines" in err and "use --format chat-lines" in err
    code, out, _ = run_cli(capsys, "score", str(SHAPES / "chat_lines.jsonl"), "--format", "chat-lines", "--model", "fake", "-q")
    assert code == 0 and len(out.splitlines()) == 5  # 3 + 2 blocks


def test_chat_lines_does_not_take_other_jsonl():
    for name in ("openai.jsonl", "anthropic.jsonl", "gemini.jsonl", "openai_traffic.jsonl"):
        assert registry.detect_why((SHAPES / name).read_bytes(), name).adapter.name != "chat-lines"
    # a conversation per line, and messages without an assistant turn, are not one chat
    one_per_line = b'{"messages": [{"role": "user", "content": "a"}]}\n{"messages": [{"role": "user", "content": "b"}]}\n'
    assert registry.get("chat-lines").sniff(one_per_line) is None
    assert registry.get("chat-lines").sniff(b'{"role": "user", "content": "a"}\n{"role": "user", "content": "b"}\n') is None


# --- ShareGPT ---------------------------------------------------------------------------------

def test_sharegpt_roles_as_llama_factory_names_them():
    adapter, doc = load(SHAPES / "sharegpt.json")
    assert adapter.name == "sharegpt"
    first, second = doc.trajectories
    assert (first.id, second.id) == ("weather-1", "sharegpt.json#1")
    assert texts(first) == [
        ("prompt", "system", "You are a helpful assistant."),
        ("prompt", "tools", '[{"name": "get_weather", "parameters": {"location": "string"}}]'),
        ("prompt", "user", "What is the weather in Jinan today?"),
        ("action", "tool_call:get_weather", '{"location": "Jinan"}'),
        ("observation", "tool_result", '{"temperature": 20, "condition": "sunny"}'),
        ("reasoning", "reasoning", "The tool says 20 degrees and sunny.\n\nI should answer in one sentence.\n\nMention the temperature."),
        ("action", "assistant", "It is sunny in Jinan, 20 °C."),
    ]
    assert len(first.steps) == 2 and texts(second)[-2:] == [("reasoning", "reasoning", "Simple arithmetic.\n\nFour."), ("action", "assistant", "4")]


@pytest.mark.parametrize("name", ["sharegpt.json", "sharegpt_llamafactory.jsonl"])
def test_sharegpt_round_trips_byte_for_byte_and_edits_inside_the_think_tags(name, tmp_path, capsys):
    src = SHAPES / name
    adapter, doc = load(src)
    assert write_document(adapter, doc, doc.trajectories).data == src.read_bytes()
    code, out, _ = run_cli(capsys, "prune", str(src), "--variant", "delete-all", "--model", "fake", "-q", "--strict")
    assert code == 0
    records = json.loads(out) if name.endswith(".json") else [json.loads(x) for x in out.splitlines()]
    originals = json.loads(src.read_text()) if name.endswith(".json") else [json.loads(x) for x in src.read_text().splitlines()]
    for before, after in zip(originals, records):
        assert set(after) == set(before)  # every key kept
        for a, b in zip(before["conversations"], after["conversations"]):
            if "<think>" in a["value"]:
                assert b["value"] == "<think></think>" + a["value"].split("</think>", 1)[1]
            else:
                assert b == a


def test_sharegpt_errors_and_unknown_roles(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": 3}]}]))
    with pytest.raises(InputError) as exc:
        load(path)
    assert exc.value.field == "[0].conversations[1].value" and "must be a string" in exc.value.problem
    path.write_text(json.dumps({"conversations": [{"from": "human", "value": "hi"}, {"from": "critic", "value": "meh"},
                                                  {"from": "gpt", "value": "<think>hm</think>ok"}]}))
    _, doc = load(path)
    [note] = doc.unrecognised
    assert note.field == "conversations[1].from" and "'critic'" in note.what
    assert ("prompt", "critic", "meh") in texts(doc.trajectories[0])


def test_sharegpt_is_named_when_read_as_openai(capsys):
    code, _, err = run_cli(capsys, "score", str(SHAPES / "sharegpt.json"), "--format", "openai", "--model", "fake")
    assert code == 2 and "use --format sharegpt" in err
