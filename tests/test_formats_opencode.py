"""OpenCode and Kilo: the export JSON (read and written back) and the session database (read
for score and savings, refused by prune)."""

import copy
import json
import sqlite3

import pytest

from format_helpers import run_cli, summary_value
from iclr_cli.blocks import SKIP
from iclr_cli.errors import InputError
from iclr_cli.formats import registry
from iclr_cli.formats.adapters.kilo import ADAPTER as KILO
from iclr_cli.formats.adapters.opencode import ADAPTER
from iclr_cli.trajectory import Usage, WriteBack
from opencode_fixtures import R1, R2, R3, R4, R5, dump, export, to_db


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ICLR_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def session(tmp_path):
    path = tmp_path / "session.json"
    path.write_bytes(dump(export()))
    return path


@pytest.fixture
def db(tmp_path):
    folder = tmp_path / "opencode"
    folder.mkdir()
    path = folder / "opencode.db"
    to_db(path, [export()])
    return path


def parts_of(doc: dict, message: int) -> list[dict]:
    return doc["messages"][message]["parts"]


def test_export_and_databases_are_detected(session, db, tmp_path, capsys):
    assert registry.detect(session.read_bytes(), str(session)).name == "opencode"
    assert registry.detect(db.read_bytes(), str(db)).name == "opencode"
    kilo = tmp_path / "kilo.db"
    to_db(kilo, [export()], kilo=True)
    found = registry.detect_why(kilo.read_bytes(), str(kilo))
    assert (found.adapter.name, found.others) == ("kilo", ())
    code, out, _ = run_cli(capsys, "formats")
    assert code == 0 and "opencode" in out and "kilo" in out


def test_steps_reasoning_tools_and_requests_are_read(session):
    doc = ADAPTER.load(session.read_bytes(), "session.json")
    [traj] = doc.trajectories
    assert traj.id == "ses_t1"
    assert [(p.kind, p.label, p.text) for p in traj.prompt] == [("prompt", "user", "Fix the failing date parser test in utils.")]
    # one step per model call: msg_03 holds two (split at its second step-start)
    assert [[(p.kind, p.label) for p in s.parts] for s in traj.steps] == [
        [("reasoning", "reasoning"), ("action", "tool_call:bash"), ("observation", "tool_result")],
        [("reasoning", "reasoning"), ("action", "tool_call:edit"), ("observation", "tool_result")],
        [("reasoning", "reasoning"), ("action", "assistant"), ("observation", "user")],
        [("reasoning", "reasoning"), ("action", "assistant")],
        [("reasoning", "reasoning"), ("action", "assistant")],
    ]
    assert [s.parts[0].text for s in traj.steps] == [R1, R2, R3, R4, R5]
    assert [s.parts[0].write_back for s in traj.steps] == [WriteBack.IN_PLACE] * 3 + [WriteBack.SIGNED, WriteBack.OPAQUE]
    call, result = traj.steps[0].parts[1:]
    assert (call.text, call.call_id) == ('{"command": "pytest -q tests/test_utils.py"}', "call_1")
    assert (result.text, result.call_id) == ("1 failed: ValueError: unknown date '2024-W05-3'", "call_1")
    assert traj.steps[1].parts[2].text == "file changed on disk"  # a failed call's error is its result
    # the copy in reasoning_details is a second site of the same part (it ends with the newline OpenCode trimmed)
    assert [s.path[1:] for s in traj.steps[1].parts[0].ref.sites] == [
        ("messages", 2, "parts", 1, "text"), ("messages", 2, "parts", 1, "metadata", "openrouter", "reasoning_details", 0, "text")]
    assert traj.meta == {"format": "opencode", "model": "gpt-5", "provider": "openai"}
    # one request per step-finish: prompt = input + cache read + write, output = output + reasoning
    assert [(r.step, r.model) for r in traj.requests] == [(0, "deepseek-reasoner"), (1, "moonshotai/kimi-k2"), (2, "moonshotai/kimi-k2"), (3, "claude-sonnet-4-5")]
    assert traj.requests[1].usage == Usage(2000, 80, 800, 0, "step-finish tokens", reasoning_tokens=50)
    assert doc.warnings == [] and doc.unrecognised == []


def test_unedited_export_comes_back_byte_for_byte(session):
    data = session.read_bytes()
    doc = ADAPTER.load(data, "session.json")
    assert ADAPTER.dump(doc, doc.trajectories) == data


def test_an_edit_goes_into_the_text_and_its_reasoning_details_copy(session):
    data = session.read_bytes()
    doc = ADAPTER.load(data, "session.json")
    [traj] = doc.trajectories
    new = f"{SKIP}\n\nAdding an ISO week case with datetime.strptime and %G-W%V-%u handles it.\n\n{SKIP}"
    steps = list(traj.steps)
    steps[1] = steps[1].with_reasoning([new])
    out = json.loads(ADAPTER.dump(doc, [traj.with_steps(steps)]))
    before = export()
    part = parts_of(out, 2)[1]
    assert part["text"] == new
    assert part["metadata"]["openrouter"]["reasoning_details"][0]["text"] == new + "\n"
    expected = copy.deepcopy(before)
    parts_of(expected, 2)[1]["text"] = new
    parts_of(expected, 2)[1]["metadata"]["openrouter"]["reasoning_details"][0]["text"] = new + "\n"
    assert out == expected


def test_cli_delete_all_follows_each_provider_rule(session, tmp_path, capsys):
    out = tmp_path / "out.json"
    code, _, err = run_cli(capsys, "prune", str(session), "--variant", "delete-all", "--model", "fake", "-o", str(out))
    assert code == 0, err
    after, expected = json.loads(out.read_bytes()), export()
    for message, k in ((1, 1), (2, 1), (2, 5)):  # DeepSeek and OpenRouter reasoning: plain, emptied
        parts_of(expected, message)[k]["text"] = ""
    parts_of(expected, 2)[1]["metadata"]["openrouter"]["reasoning_details"][0]["text"] = "\n"
    assert after == expected  # the signed Anthropic and the encrypted OpenAI parts stay as generated
    assert summary_value(err, "reasoning parts left sealed (provider rule)") == "2 (anthropic signed 1, openai encrypted 1)"
    assert out.read_bytes().startswith(b'{\n  "info": {\n    "id": "ses_t1",')  # OpenCode's own layout


def test_cli_edits_signed_and_drops_encrypted_when_asked(session, tmp_path, capsys):
    out = tmp_path / "out.json"
    code, _, err = run_cli(capsys, "prune", str(session), "--variant", "delete-all", "--model", "fake", "--signed-thinking", "edit",
                           "--encrypted-reasoning", "drop", "-o", str(out), "-q")
    assert code == 0, err
    after = json.loads(out.read_bytes())
    assert parts_of(after, 4)[1] == {**parts_of(export(), 4)[1], "text": "", "metadata": {"anthropic": {}}}  # signature gone with the text
    assert [p["type"] for p in parts_of(after, 5)] == ["step-start", "text"]  # the Responses reasoning item dropped whole


def test_cli_iclr_variant_writes_skip_blocks(session, tmp_path, capsys):
    out = tmp_path / "out.json"
    code, _, err = run_cli(capsys, "prune", str(session), "--variant", "iclr", "--model", "fake", "-o", str(out), "-q")
    assert code == 0, err
    after, before = json.loads(out.read_bytes()), export()
    first = parts_of(after, 1)[1]["text"]
    assert SKIP in first and first != R1 and all(block in R1 or block == SKIP for block in first.split("\n\n"))
    copy_text = parts_of(after, 2)[1]["metadata"]["openrouter"]["reasoning_details"][0]["text"]
    assert copy_text == parts_of(after, 2)[1]["text"] + "\n"
    assert after["messages"][4:] == before["messages"][4:]  # sealed turns untouched


def test_score_reads_every_session_of_the_database(db, tmp_path, capsys):
    second = export()
    second["info"]["id"] = "ses_t2"
    second["info"]["time"]["created"] = 50
    for message in second["messages"]:
        message["info"]["id"] += "b"
        for part in message["parts"]:
            part["id"] += "b"
    other = tmp_path / "two.db"
    to_db(other, [export(), second])
    out = tmp_path / "scores.jsonl"
    code, _, err = run_cli(capsys, "score", str(other), "--model", "fake", "-o", str(out), "-q")
    assert code == 0, err
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted({r["trajectory"] for r in records}) == ["ses_t1", "ses_t2"]
    assert {r["source"] for r in records} == {str(other)}
    doc = ADAPTER.load(other.read_bytes(), str(other))
    assert [t.id for t in doc.trajectories] == ["ses_t1", "ses_t2"]
    assert [s.parts[0].text for s in doc.trajectories[1].steps] == [R1, R2, R3, R4, R5]


def test_savings_over_a_folder_with_the_database_and_its_wal(db, capsys):
    conn = sqlite3.connect(db)
    conn.execute("pragma journal_mode=wal")
    conn.execute("pragma wal_autocheckpoint=0")
    conn.execute("update session set title = 'renamed'")
    conn.commit()  # left open: the -wal file stays beside the database
    assert (db.parent / "opencode.db-wal").exists()
    code, out, err = run_cli(capsys, "savings", str(db.parent), "--variant", "delete-all", "--model", "fake", "--json")
    conn.close()
    assert code == 0, err
    report = json.loads(out)
    [row] = report["data"]
    assert (row["requests"], row["input_tokens"], row["cache_read_tokens"]) == (4, 5410, 2000)
    assert sorted(s["file"].rsplit("/", 1)[1] for s in report["skipped"]) == ["opencode.db-shm", "opencode.db-wal"]


def test_prune_refuses_a_database_naming_the_export_command(db, tmp_path, capsys):
    code, _, err = run_cli(capsys, "prune", str(db), "--model", "fake", "-o", str(tmp_path / "out"))
    assert code == 2
    assert err.strip().endswith(
        f"{db}: a session database (opencode): prune writes a file in its input's format and never writes a database (score and "
        "savings read it as it is); export one session as a file with `opencode export <sessionID> > session.json` (Kilo: `kilo export`), "
        "and prune that file")
    kilo = tmp_path / "kilo.db"
    to_db(kilo, [export()], kilo=True)
    code, _, err = run_cli(capsys, "prune", str(kilo), "--model", "fake", "-o", str(tmp_path / "out"))
    assert code == 2 and "a session database (kilo)" in err and "`kilo export <sessionID> > session.json`, and prune that file" in err
    assert not (tmp_path / "out").exists()


def test_bad_json_in_a_data_column_names_file_table_row_and_field(db):
    conn = sqlite3.connect(db)
    conn.execute("update part set data = '{\"type\": \"text\", ' where id = 'prt_12'")
    conn.commit()
    conn.close()
    with pytest.raises(InputError) as exc:
        ADAPTER.load(db.read_bytes(), str(db))
    assert str(exc.value).startswith(f"{db}: field 'data': table 'part', row id 'prt_12': not valid JSON (")


def test_a_part_of_the_wrong_shape_is_named_in_the_database_and_the_export(db, tmp_path):
    conn = sqlite3.connect(db)
    data = json.loads(conn.execute("select data from part where id = 'prt_04'").fetchone()[0])
    del data["state"]["output"]
    conn.execute("update part set data = ? where id = 'prt_04'", (json.dumps(data),))
    conn.commit()
    conn.close()
    with pytest.raises(InputError) as exc:
        ADAPTER.load(db.read_bytes(), str(db))
    assert str(exc.value) == f"{db}: field 'data.state.output': table 'part', row id 'prt_04': completed tool part has no string 'output'"
    doc = export()
    del parts_of(doc, 1)[2]["state"]["output"]
    with pytest.raises(InputError) as exc:
        ADAPTER.load(dump(doc), "s.json")
    assert str(exc.value) == "s.json:95: field 'messages[1].parts[2].state.output': completed tool part has no string 'output'"


def test_a_reasoning_details_copy_with_other_text_leaves_the_part_unedited():
    doc = export()
    parts_of(doc, 2)[1]["metadata"]["openrouter"]["reasoning_details"][0]["text"] = "Then rerun the single test."  # the last chunk only
    read = ADAPTER.load(dump(doc), "s.json")
    assert read.trajectories[0].steps[1].parts[0].write_back is WriteBack.READ_ONLY
    assert [u.describe("s.json") for u in read.unrecognised] == [
        "s.json: field 'messages[2].parts[1].metadata.openrouter.reasoning_details[0].text': "
        "holds other text than the reasoning part (sent upstream instead of it): neither is edited"]
    assert read.warnings == [
        "s.json: 1 reasoning part whose reasoning_details copy holds other text: left unedited, not scored or pruned "
        "(at field 'messages[2].parts[1].text')"]


def test_failed_turns_are_left_out_and_aborted_ones_with_content_kept():
    doc = export()
    doc["messages"][5]["info"]["error"] = {"name": "APIError", "data": {"message": "overloaded", "isRetryable": True}}
    doc["messages"][4]["info"]["error"] = {"name": "MessageAbortedError", "data": {"message": "aborted"}}
    read = ADAPTER.load(dump(doc), "s.json")
    [traj] = read.trajectories
    assert [s.parts[0].text for s in traj.steps] == [R1, R2, R3, R4]
    assert read.warnings[0] == ("s.json: not scored, left as written (assistant messages that ended in an error, which OpenCode never "
                                "sends again): messages[5].info (APIError)")


def test_kilo_reads_an_export_by_name(session):
    doc = KILO.load(session.read_bytes(), "session.json")
    assert doc.format == "kilo" and len(doc.trajectories[0].steps) == 5
    assert KILO.dump(doc, doc.trajectories) == session.read_bytes()


def test_an_export_of_a_kilo_agent_is_detected_as_kilo(session):
    doc = export()
    doc["info"]["agent"] = "code"
    found = registry.detect_why(dump(doc), "k.json")
    assert (found.adapter.name, [a.name for a, _ in found.others]) == ("kilo", ["opencode"])
    assert registry.detect_why(session.read_bytes(), "s.json").adapter.name == "opencode"  # agent 'build': OpenCode's
