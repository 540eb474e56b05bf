"""``iclr savings`` per session: a session database's sessions dated, filtered and named by
their own rows, steps already compressed by iclr left as they are, and prune's one-block hint."""

import copy
import json
import os
from datetime import datetime, timezone

import pytest

from format_helpers import run_cli
from iclr_cli.block_notes import one_block_note
from iclr_cli.formats.database import row_time
from opencode_fixtures import export, to_db
from test_savings_cli import CHAT3


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    """Each test its own savings cache (the fake scorer needs no model cache)."""
    monkeypatch.setenv("ICLR_CACHE_DIR", str(tmp_path / "cache"))


def ms(text):
    """Epoch milliseconds of a UTC time, as OpenCode's ``Date.now()`` stores it."""
    return int(datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp() * 1000)


def opencode_session(sid, title, created, updated):
    doc = copy.deepcopy(export())
    doc["info"].update(id=sid, title=title, time={"created": ms(created), "updated": ms(updated)})
    for m in doc["messages"]:  # ids are primary keys: each session its own
        m["info"]["id"] += sid
        for p in m["parts"]:
            p["id"] += sid
    return doc


@pytest.fixture
def two_sessions(tmp_path):
    """A database of a March and an April session, the file itself last written in 2026."""
    path = tmp_path / "opencode.db"
    to_db(path, [opencode_session("ses_mar", "Fix date parser", "2025-03-05T10:00:00", "2025-03-05T11:30:00"),
                 opencode_session("ses_apr", "Second task", "2025-04-10T09:00:00", "2025-04-10T09:45:00")])
    stamp = datetime(2026, 1, 1, tzinfo=timezone.utc).timestamp()
    os.utime(path, (stamp, stamp))
    return path


def savings(capsys, *args):
    code, out, err = run_cli(capsys, "savings", *args, "--model", "fake")
    assert code == 0, err
    return out


def test_row_times_are_epoch_milliseconds_seconds_or_sqlite_text():
    assert row_time(1741172400000) == "2025-03-05T11:00:00+00:00"  # OpenCode: Date.now()
    assert row_time(1741172400) == "2025-03-05T11:00:00+00:00"
    assert row_time("2025-03-05 11:00:00") == "2025-03-05T11:00:00+00:00"  # SQLite CURRENT_TIMESTAMP (UTC)
    assert [row_time(v) for v in (None, 0, "", "soon", True)] == [None] * 5


def test_database_sessions_are_dated_by_their_own_rows_not_the_file(two_sessions, capsys):
    report = json.loads(savings(capsys, str(two_sessions), "--variant", "delete-all", "--no-cache", "--json"))
    dates = [(r["session"], r["title"], r["first_activity"], r["last_activity"], r["activity_from"]) for r in report["data"]]
    assert dates == [("ses_mar", "Fix date parser", "2025-03-05T10:00:00+00:00", "2025-03-05T11:30:00+00:00", "session"),
                     ("ses_apr", "Second task", "2025-04-10T09:00:00+00:00", "2025-04-10T09:45:00+00:00", "session")]


def test_since_until_keep_the_sessions_of_a_database_active_in_the_window(two_sessions, capsys):
    args = (str(two_sessions), "--variant", "delete-all", "--since", "20250301", "--until", "20250331", "--json")
    for served in (0, 1):  # the second run comes from the cache, with the same dates and the same one session
        report = json.loads(savings(capsys, *args))
        assert [(r["session"], r["last_activity"]) for r in report["data"]] == [("ses_mar", "2025-03-05T11:30:00+00:00")]
        assert report["files"] == {"candidates": 1, "read": 1 - served, "cached": served, "filtered": 0, "filtered_sessions": 1,
                                   "skipped": 0}
    # the file's own date (2026) is in no window: before, the whole database was filtered out on it
    report = json.loads(savings(capsys, str(two_sessions), "--variant", "delete-all", "--since", "20260101", "--json"))
    assert report["data"] == [] and report["files"]["filtered"] == 1 and report["files"]["filtered_sessions"] == 2
    table = savings(capsys, str(two_sessions), "--variant", "delete-all", "--until", "20250331")
    assert "1 session of session databases outside --since/--until" in table
    assert "(file time)" not in table


def test_a_database_of_one_session_is_named_by_the_session(tmp_path, capsys):
    path = tmp_path / "opencode.db"
    to_db(path, [opencode_session("ses_one", "Fix date parser", "2025-03-05T10:00:00", "2025-03-05T11:30:00")])
    table = savings(capsys, str(path), "--variant", "delete-all", "--no-cache")
    [row] = [line for line in table.splitlines() if line.startswith("│") and "ses_one" in line]
    assert row.split("│")[1].strip() == 'opencode.db ses_one "Fix date parser"'
    assert "2025-03-05" in row


def test_goose_database_sessions_are_dated_by_their_rows_too(tmp_path, capsys):
    import sqlite3

    from test_formats_goose import DB_MESSAGES, make_db

    path = make_db(tmp_path / "sessions.db", [("20251001_1", "anthropic", "claude-sonnet-4-5", "2025-10-01 09:00:00"),
                                              ("20251001_2", "ollama", "qwen3:8b", "2025-10-03 10:00:00")], DB_MESSAGES)
    with sqlite3.connect(path) as conn:  # Goose's updated_at, SQLite's UTC text; the fixture leaves it at the default (now)
        conn.execute("update sessions set updated_at = replace(created_at, ':00:00', ':20:00')")
    report = json.loads(savings(capsys, str(path), "--variant", "delete-all", "--no-cache", "--json", "--since", "20251002"))
    assert [(r["session"], r["first_activity"], r["last_activity"], r["activity_from"]) for r in report["data"]] == [
        ("20251001_2", "2025-10-03T10:00:00+00:00", "2025-10-03T10:20:00+00:00", "session")]
    assert report["files"]["filtered_sessions"] == 1


# --- steps already compressed ([SKIP] markers) -------------------------------------------

# Regex-tokenizer counts (--model fake; tests/test_savings_cli.py, CHAT3): "alpha beta" is 3
# tokens, "gamma delta epsilon" 5. Step 0 went through iclr's write-back (it kept "alpha beta"
# and marked two blocks [SKIP]); steps 1 and 2 did not.
COMPRESSED = [*CHAT3[:2], {**CHAT3[2], "reasoning_content": "alpha beta\n\n[SKIP]\n\n[SKIP]"}, *CHAT3[3:]]


def test_steps_already_compressed_are_counted_and_not_compressed_again(tmp_path, capsys):
    path = tmp_path / "served.json"
    path.write_text(json.dumps(COMPRESSED))
    report = json.loads(savings(capsys, str(path), "--variant", "delete-all", "--no-cache", "--json"))
    [s] = report["data"]
    # delete-all takes only step 1's 5 tokens off request 2; before, it took step 0's kept
    # "alpha beta" and its separator (4 tokens) again, off requests 1 and 2: 4 + 4 + 5 = 13
    assert s["input_tokens"] - s["input_tokens_with_writeback"] == 5
    assert (s["compressed_steps"], s["steps_with_reasoning"]) == (1, 2)
    [note] = report["block_notes"]
    assert note.startswith("1 step already compressed ([SKIP] markers of iclr's write-back, iclr serve or prune) in served.json: "
                           "online write-back compresses a step once, so the estimate takes nothing more off them")
    table = savings(capsys, str(path), "--no-cache")  # iclr: the compressed step is never handed to the scorer
    assert note in table


def test_the_upper_bound_and_the_plan_leave_compressed_steps_alone(tmp_path, capsys):
    path = tmp_path / "served.json"
    path.write_text(json.dumps(COMPRESSED))
    report = json.loads(savings(capsys, str(path), "--no-cache", "--json"))
    assert report["scoring"]["compressed"] == 1
    bound = report["upper_bound"]
    assert bound["input_tokens"] - bound["input_tokens_with_writeback"] == 5


# --- one block a step: prune's hint --------------------------------------------------------

ONE_BLOCK = [
    *CHAT3[:2],
    {**CHAT3[2], "reasoning_content": "The parser fails on week dates. I will add a branch and run the test."},
    CHAT3[3],
    {**CHAT3[4], "reasoning_content": "The branch works. Running the whole suite now to be sure."},
]


def test_one_paragraph_sessions_get_prunes_block_split_hint(tmp_path, capsys):
    path = tmp_path / "onepara.json"
    path.write_text(json.dumps(ONE_BLOCK))
    hint = one_block_note(2, 2, "paragraph")
    assert hint == ("2 of 2 steps with reasoning hold a single block (their reasoning is one paragraph), and BottomK removes "
                    "nothing from one block (N = 1); --block-split line or --block-split sentence cuts reasoning into more blocks")
    report = json.loads(savings(capsys, str(path), "--no-cache", "--json"))
    assert report["summary"]["input_change_percent"] == 0 and report["block_notes"] == [hint]
    assert hint in savings(capsys, str(path), "--no-cache")
    code, _, err = run_cli(capsys, "prune", str(path), "-o", str(tmp_path / "out.json"), "--model", "fake")
    assert code == 0 and hint in " ".join(err.split())  # prune says the same
    # the finer split it names does find blocks to remove, and the hint goes
    report = json.loads(savings(capsys, str(path), "--no-cache", "--json", "--block-split", "sentence"))
    assert report["summary"]["input_change_percent"] < 0 and report["block_notes"] == []
