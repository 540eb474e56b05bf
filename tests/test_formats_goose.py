"""Goose sessions: legacy session JSONL and ``goose session export`` JSON read and written
back, ``sessions.db`` read for score and savings and refused by prune."""

import json
import sqlite3

import pytest

from format_helpers import SAMPLES, run_cli, summary_value
from iclr_cli.inputs import load_file
from iclr_cli.blocks import SKIP
from iclr_cli.errors import InputError
from iclr_cli.formats import registry
from iclr_cli.formats.adapters.anthropic import REDACTED_TEXT
from iclr_cli.formats.adapters.goose import ADAPTER
from iclr_cli.trajectory import WriteBack

SAMPLE = SAMPLES / "goose_session.jsonl"

SCHEMA = """
CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP);
CREATE TABLE sessions (id TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '', description TEXT NOT NULL DEFAULT '',
    working_dir TEXT NOT NULL, created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    provider_name TEXT, model_config_json TEXT);
CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT, session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL, content_json TEXT NOT NULL, created_timestamp INTEGER NOT NULL,
    timestamp TIMESTAMP DEFAULT CURRENT_TIMESTAMP, tokens INTEGER, metadata_json TEXT);
"""
"""The part of Goose's schema (session_manager.rs, create_schema) these tests need."""

THREE_PARAGRAPHS = "First I list the files.\n\nThen I read the failing test carefully.\n\nFinally I patch the rounding."


def lines_of(data: bytes) -> list[dict]:
    return [json.loads(x) for x in data.splitlines() if x.strip()]


def make_db(path, sessions, messages):
    """A Goose sessions.db: ``sessions`` as (id, provider, model or None, created_at),
    ``messages`` as (session id, role, content (a list, or raw text), created_timestamp)."""
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA)
    for sid, provider, model, created in sessions:
        config = json.dumps({"model_name": model, "context_limit": None}) if model else None
        conn.execute("insert into sessions (id, working_dir, provider_name, model_config_json, created_at) values (?, '/w', ?, ?, ?)",
                     (sid, provider, config, created))
    for sid, role, content, t in messages:
        raw = content if isinstance(content, str) else json.dumps(content)
        conn.execute("insert into messages (session_id, role, content_json, created_timestamp, metadata_json) values (?, ?, ?, ?, ?)",
                     (sid, role, raw, t, '{"userVisible":true,"agentVisible":true}'))
    conn.commit()
    conn.close()
    return path


DB_SESSIONS = [("20251001_1", "anthropic", "claude-sonnet-4-5", "2025-10-01 09:00:00"), ("20251001_2", "ollama", "qwen3:8b", "2025-10-01 10:00:00")]
DB_MESSAGES = [
    ("20251001_2", "user", [{"type": "text", "text": "Rename the module."}], 10),
    ("20251001_1", "user", [{"type": "text", "text": "Fix the test."}], 1),
    ("20251001_1", "assistant", [{"type": "thinking", "thinking": "The test fails on rounding.", "signature": "sig-abc"},
                                 {"type": "toolRequest", "id": "t1", "toolCall": {"status": "success", "value": {"name": "developer__shell", "arguments": {"command": "pytest"}}}}], 2),
    ("20251001_1", "user", [{"type": "toolResponse", "id": "t1", "toolResult": {"status": "success", "value": {"content": [{"type": "text", "text": "1 failed"}], "isError": False}}}], 3),
    ("20251001_2", "assistant", [{"type": "thinking", "thinking": THREE_PARAGRAPHS, "signature": ""}, {"type": "text", "text": "Done."}], 11),
]


@pytest.fixture
def db(tmp_path):
    return make_db(tmp_path / "sessions.db", DB_SESSIONS, DB_MESSAGES)


def export_of(model: str, provider: str = "anthropic") -> dict:
    """A ``goose session export --format json`` document holding the sample's messages."""
    messages = lines_of(SAMPLE.read_bytes())[1:]
    return {"id": "20251002_7", "working_dir": "/home/dev/projects/ledger", "name": "Fix rounding", "user_set_name": False,
            "session_type": "user", "created_at": "2025-10-02T08:00:00Z", "updated_at": "2025-10-02T08:05:00Z", "extension_data": {},
            "conversation": messages, "message_count": len(messages), "provider_name": provider,
            "model_config": {"model_name": model, "context_limit": 200000, "temperature": None}, "goose_mode": "auto"}


def test_sample_export_and_database_are_detected_as_goose(tmp_path, db, capsys):
    assert registry.detect(SAMPLE.read_bytes(), str(SAMPLE)).name == "goose"
    export = tmp_path / "export.json"
    export.write_text(json.dumps(export_of("claude-sonnet-4-5"), indent=2))
    assert registry.detect_why(export.read_bytes(), str(export)).match.reason == "a Goose session export (working_dir and a conversation list)"
    found = registry.detect_why(db.read_bytes(), str(db))
    assert (found.adapter.name, found.match.reason) == ("goose", "a Goose sessions.db (tables sessions, messages with content_json)")
    # messages alone (no metadata line) are told by Goose's own content types
    body = b"".join(SAMPLE.read_bytes().splitlines(keepends=True)[1:])
    assert "toolRequest" in registry.detect_why(body, "s.jsonl").match.reason
    code, out, _ = run_cli(capsys, "formats")
    assert code == 0 and "goose" in out


def test_sample_reads_steps_reasoning_calls_and_results():
    doc = ADAPTER.load(SAMPLE.read_bytes(), "goose_session.jsonl")
    [traj] = doc.trajectories
    assert traj.id == "goose_session" and traj.meta == {"format": "goose"}
    assert [(p.kind, p.label) for p in traj.prompt] == [("prompt", "user")]
    assert [[(p.kind, p.label) for p in s.parts] for s in traj.steps] == [
        [("reasoning", "reasoning"), ("action", "assistant"), ("action", "tool_call:developer__shell"), ("observation", "tool_result")],
        [("reasoning", "reasoning"), ("action", "tool_call:developer__text_editor"), ("observation", "tool_result")],
        [("reasoning", "redacted_thinking"), ("reasoning", "reasoning"), ("action", "assistant")],
    ]
    modes = [p.write_back for s in traj.steps for p in s.parts if p.kind == "reasoning"]
    assert modes == [WriteBack.SIGNED, WriteBack.IN_PLACE, WriteBack.READ_ONLY, WriteBack.IN_PLACE]
    call, result = traj.steps[0].parts[2:]
    assert (call.text, call.call_id) == ('{"command": "rg -n \\"def total\\" src"}', "toolu_01")
    assert (result.text, result.call_id) == ("src/invoice.py:12:def total(lines):", "toolu_01")
    # the newer CallToolResult shape ({content, isError}) reads the same as the older list
    assert traj.steps[1].parts[2].text == "def total(lines):\n    return round(sum(l.price * l.qty for l in lines), 2)\n"
    assert traj.steps[2].parts[0].text == REDACTED_TEXT
    assert doc.warnings == ["goose_session.jsonl: 1 reasoning part redacted by the provider (redactedThinking): left unedited, not scored or pruned "
                            "(at line 7, field 'content[0]')"]
    assert doc.unrecognised == []


def test_unedited_jsonl_and_export_come_back_byte_for_byte(tmp_path, capsys):
    data = SAMPLE.read_bytes()
    doc = ADAPTER.load(data, "s.jsonl")
    assert ADAPTER.dump(doc, doc.trajectories) == data
    export = tmp_path / "export.json"
    export.write_text(json.dumps(export_of("claude-sonnet-4-5"), indent=2))
    out = tmp_path / "out.json"
    code, _, err = run_cli(capsys, "prune", str(export), "--variant", "none", "--model", "fake", "-o", str(out), "-q")
    assert code == 0, err
    assert out.read_bytes() == export.read_bytes()


def test_delete_all_empties_plain_thinking_and_leaves_the_rest(tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    code, _, err = run_cli(capsys, "prune", str(SAMPLE), "--variant", "delete-all", "--model", "fake", "-o", str(out))
    assert code == 0, err
    before_raw, after_raw = SAMPLE.read_bytes().splitlines(), out.read_bytes().splitlines()
    assert [k for k, (a, b) in enumerate(zip(before_raw, after_raw)) if a != b] == [4, 6]  # the two plain-thinking messages
    before, after = lines_of(SAMPLE.read_bytes()), lines_of(out.read_bytes())
    # the emptied thinking items are removed; tool requests, redacted thinking and text stay as they were
    assert after[4]["content"] == before[4]["content"][1:]
    assert after[6]["content"] == [before[6]["content"][0], before[6]["content"][2]]
    # the signed one: its provider is not recorded in a legacy file, so it stays sealed
    assert after_raw[2] == before_raw[2]
    assert summary_value(err, "reasoning parts left sealed (provider rule)") == "1 (unknown signed 1)"


def test_iclr_variant_on_an_export_seals_claude_signatures_by_default(tmp_path, capsys):
    value = export_of("claude-sonnet-4-5")
    value["conversation"][1]["content"][0]["thinking"] = THREE_PARAGRAPHS
    export = tmp_path / "export.json"
    export.write_text(json.dumps(value, indent=2))
    out = tmp_path / "out.json"
    code, _, err = run_cli(capsys, "prune", str(export), "--model", "fake", "-o", str(out))
    assert code == 0, err
    assert json.loads(out.read_bytes())["conversation"][1] == value["conversation"][1]
    assert summary_value(err, "reasoning parts left sealed (provider rule)") == "1 (anthropic signed 1)"
    # --signed-thinking edit: [SKIP] in the text, and the signature kept as "" (Goose requires the field)
    code, _, err = run_cli(capsys, "prune", str(export), "--model", "fake", "--signed-thinking", "edit", "-o", str(out), "--force", "-q")
    assert code == 0, err
    edited = json.loads(out.read_bytes())["conversation"][1]["content"][0]
    assert SKIP in edited["thinking"] and edited["signature"] == ""
    assert list(edited) == ["type", "thinking", "signature"]


def test_score_reads_every_session_of_the_database(db, tmp_path, capsys):
    out = tmp_path / "scores.jsonl"
    code, _, err = run_cli(capsys, "score", str(db), "--model", "fake", "-o", str(out), "--signed-thinking", "edit")
    assert code == 0, err
    records = lines_of(out.read_bytes())
    assert [(r["trajectory"], r["step"], r["block"], r["text"]) for r in records] == [
        ("20251001_1", 0, 0, "The test fails on rounding."),
        ("20251001_2", 0, 0, "First I list the files."),
        ("20251001_2", 0, 1, "Then I read the failing test carefully."),
        ("20251001_2", 0, 2, "Finally I patch the rounding."),
    ]
    doc = ADAPTER.load(db.read_bytes(), str(db))
    assert [(t.id, t.meta.get("model"), t.meta.get("provider")) for t in doc.trajectories] == [
        ("20251001_1", "claude-sonnet-4-5", "anthropic"), ("20251001_2", "qwen3:8b", "ollama")]
    assert [p.label for p in doc.trajectories[0].steps[0].parts] == ["reasoning", "tool_call:developer__shell", "tool_result"]


def test_savings_over_a_folder_with_the_database(db, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ICLR_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "sessions.db-wal").write_bytes(b"")  # SQLite's side file: never a session of its own
    code, out, err = run_cli(capsys, "savings", str(tmp_path), "--variant", "delete-all", "--model", "fake", "--json")
    assert code == 0, err
    rows = json.loads(out)["data"]
    assert [(r["session"], r["format"], r["model"], r["requests"]) for r in rows] == [
        ("20251001_1", "goose", "claude-sonnet-4-5", 1), ("20251001_2", "goose", "qwen3:8b", 1)]


def test_prune_refuses_the_database_and_names_the_export_command(db, tmp_path, capsys):
    code, _, err = run_cli(capsys, "prune", str(db), "--model", "fake", "-o", str(tmp_path / "out.db"))
    assert code == 2
    assert err.strip() == (
        f"iclr: error: {db}: a session database (goose): prune writes a file in its input's format and never writes a database "
        "(score and savings read it as it is); export one session with Goose's own command, goose session export --session-id ID "
        "--format json --output FILE (ids: goose session list; goose session import FILE brings it back), and prune that file")
    assert not (tmp_path / "out.db").exists()


def test_a_bad_line_names_file_line_and_field(tmp_path):
    lines = SAMPLE.read_bytes().splitlines(keepends=True)
    bad = json.loads(lines[3])
    bad["content"][0]["toolResult"] = {"status": "done"}
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join([*lines[:3], json.dumps(bad).encode() + b"\n", *lines[4:]]))
    with pytest.raises(InputError) as exc:
        load_file(str(path))
    assert str(exc.value) == f"{path}:4: field 'content[0].toolResult': must be an object with 'status' success or error"
    bad = json.loads(lines[1])
    bad["role"] = "system"
    path.write_bytes(b"".join([lines[0], json.dumps(bad).encode() + b"\n", *lines[2:]]))
    with pytest.raises(InputError) as exc:
        load_file(str(path))
    assert str(exc.value) == f"{path}:2: field 'role': role must be 'user' or 'assistant', not \"system\""


def test_a_bad_json_column_names_file_table_row_and_field(tmp_path):
    path = make_db(tmp_path / "sessions.db", DB_SESSIONS[:1], [*DB_MESSAGES[1:3], ("20251001_1", "user", '[{"type": "text", "text": ', 3)])
    with pytest.raises(InputError) as exc:
        load_file(str(path))
    assert str(exc.value).startswith(f"{path}: field 'content_json': table messages, row id 3 (session 20251001_1): not valid JSON (")
    path = make_db(tmp_path / "s2.db", DB_SESSIONS[:1], [*DB_MESSAGES[1:2], ("20251001_1", "assistant", [{"type": "toolRequest", "id": "x"}], 2)])
    with pytest.raises(InputError) as exc:
        load_file(str(path))
    assert str(exc.value) == (f"{path}: field 'content_json[0].toolCall': table messages, row id 2 (session 20251001_1): "
                              "must be an object with 'status' success or error")


def test_an_unknown_assistant_item_is_reported_not_scored(tmp_path):
    lines = SAMPLE.read_bytes().splitlines(keepends=True)
    msg = json.loads(lines[6])
    msg["content"].append({"type": "hologram", "payload": "x"})
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join([*lines[:6], json.dumps(msg).encode() + b"\n"]))
    doc = ADAPTER.load(path.read_bytes(), "s.jsonl")
    assert [u.describe("s.jsonl") for u in doc.unrecognised] == ["s.jsonl:7: field 'content[3]': assistant content item of type 'hologram'"]
    assert doc.trajectories[0].steps[2].parts[-1].label == "hologram"


def test_skip_bad_lines_passes_a_half_read_message_through_unscored(tmp_path, capsys):
    lines = SAMPLE.read_bytes().splitlines(keepends=True)
    bad = json.loads(lines[4])
    bad["content"][1]["toolCall"] = "broken"  # its thinking item reads fine, its tool call does not
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join([*lines[:4], json.dumps(bad).encode() + b"\n", *lines[5:]]))
    out = tmp_path / "out.jsonl"
    code, _, err = run_cli(capsys, "prune", str(path), "--variant", "delete-all", "--model", "fake", "--skip-bad-lines", "-o", str(out))
    assert code == 0, err
    assert f"{path}:5: passed through unscored: must be an object with 'status' success or error" in err
    assert out.read_bytes().splitlines()[4] == path.read_bytes().splitlines()[4]  # the bad line untouched
    [traj] = ADAPTER.load(path.read_bytes(), "s.jsonl", skip_bad_lines=True).trajectories
    assert len(traj.steps) == 2 and [p.label for p in traj.steps[0].parts][-1] == "tool_result"
