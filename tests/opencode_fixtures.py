"""OpenCode / Kilo sessions written for the tests: an export document (``export``), its bytes as
``opencode export`` writes them (``dump``) and the same sessions as a session database
(``to_db``, OpenCode's drizzle schema; ``kilo=True`` adds a table of Kilo's own (kilo_board, as @kilocode/cli 7.7.7 has))."""

import json
import sqlite3

R1 = "The test feeds '2024-W05-3' to parse_date.\n\nThe parser only knows calendar dates, so the week form falls through to the error branch.\n\nI should run the suite first to see the exact failure."
R2 = "The failure is a ValueError from the week branch.\n\nAdding an ISO week case with datetime.strptime and %G-W%V-%u handles it.\n\nThen rerun the single test."
R3 = "Everything passes now; a short summary for the user is enough."
R4 = "Checking the second module before answering, signed."
R5 = "Summary of an encrypted Responses item."
def export():
    """One session: a DeepSeek turn, two OpenRouter calls in one message (the first with a
    reasoning_details copy), an Anthropic-signed turn and an encrypted OpenAI Responses turn."""
    msgs = [
      {"info": {"id": "msg_01", "sessionID": "ses_t1", "role": "user", "time": {"created": 1}, "agent": "build", "model": {"providerID": "deepseek", "modelID": "deepseek-reasoner"}},
       "parts": [{"id": "prt_01", "sessionID": "ses_t1", "messageID": "msg_01", "type": "text", "text": "Fix the failing date parser test in utils."}]},
      {"info": {"id": "msg_02", "sessionID": "ses_t1", "role": "assistant", "time": {"created": 2, "completed": 3}, "parentID": "msg_01", "modelID": "deepseek-reasoner", "providerID": "deepseek", "mode": "build", "agent": "build", "path": {"cwd": "/w", "root": "/w"}, "cost": 0.001, "tokens": {"input": 900, "output": 40, "reasoning": 60, "cache": {"read": 100, "write": 0}}, "finish": "tool-calls"},
       "parts": [
         {"id": "prt_02", "sessionID": "ses_t1", "messageID": "msg_02", "type": "step-start", "snapshot": "abc"},
         {"id": "prt_03", "sessionID": "ses_t1", "messageID": "msg_02", "type": "reasoning", "text": R1, "time": {"start": 2, "end": 3}},
         {"id": "prt_04", "sessionID": "ses_t1", "messageID": "msg_02", "type": "tool", "callID": "call_1", "tool": "bash", "state": {"status": "completed", "input": {"command": "pytest -q tests/test_utils.py"}, "output": "1 failed: ValueError: unknown date '2024-W05-3'", "title": "pytest", "metadata": {}, "time": {"start": 2, "end": 3}}},
         {"id": "prt_05", "sessionID": "ses_t1", "messageID": "msg_02", "type": "step-finish", "reason": "tool-calls", "cost": 0.001, "tokens": {"input": 900, "output": 40, "reasoning": 60, "cache": {"read": 100, "write": 0}}}]},
      {"info": {"id": "msg_03", "sessionID": "ses_t1", "role": "assistant", "time": {"created": 4}, "parentID": "msg_01", "modelID": "moonshotai/kimi-k2", "providerID": "openrouter", "mode": "build", "agent": "build", "path": {"cwd": "/w", "root": "/w"}, "cost": 0, "tokens": {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}}},
       "parts": [
         {"id": "prt_06", "sessionID": "ses_t1", "messageID": "msg_03", "type": "step-start"},
         {"id": "prt_07", "sessionID": "ses_t1", "messageID": "msg_03", "type": "reasoning", "text": R2, "metadata": {"openrouter": {"reasoning_details": [{"type": "reasoning.text", "text": R2 + "\n", "format": "unknown", "index": 0}]}}, "time": {"start": 4, "end": 5}},
         {"id": "prt_08", "sessionID": "ses_t1", "messageID": "msg_03", "type": "tool", "callID": "call_2", "tool": "edit", "state": {"status": "error", "input": {"path": "utils.py"}, "error": "file changed on disk", "time": {"start": 4, "end": 5}}},
         {"id": "prt_09", "sessionID": "ses_t1", "messageID": "msg_03", "type": "step-finish", "reason": "tool-calls", "cost": 0, "tokens": {"input": 1200, "output": 30, "reasoning": 50, "cache": {"read": 800, "write": 0}}},
         {"id": "prt_10", "sessionID": "ses_t1", "messageID": "msg_03", "type": "step-start"},
         {"id": "prt_11", "sessionID": "ses_t1", "messageID": "msg_03", "type": "reasoning", "text": R3, "time": {"start": 5, "end": 6}},
         {"id": "prt_12", "sessionID": "ses_t1", "messageID": "msg_03", "type": "text", "text": "The parser now accepts ISO week dates; the test passes.", "time": {"start": 5, "end": 6}},
         {"id": "prt_13", "sessionID": "ses_t1", "messageID": "msg_03", "type": "step-finish", "reason": "stop", "cost": 0, "tokens": {"input": 1300, "output": 20, "reasoning": 10, "cache": {"read": 1100, "write": 0}}}]},
      {"info": {"id": "msg_04", "sessionID": "ses_t1", "role": "user", "time": {"created": 7}, "agent": "build", "model": {"providerID": "anthropic", "modelID": "claude-sonnet-4-5"}},
       "parts": [{"id": "prt_14", "sessionID": "ses_t1", "messageID": "msg_04", "type": "text", "text": "Also check the second module."}]},
      {"info": {"id": "msg_05", "sessionID": "ses_t1", "role": "assistant", "time": {"created": 8}, "parentID": "msg_04", "modelID": "claude-sonnet-4-5", "providerID": "anthropic", "mode": "build", "agent": "build", "path": {"cwd": "/w", "root": "/w"}, "cost": 0, "tokens": {"input": 10, "output": 5, "reasoning": 0, "cache": {"read": 0, "write": 0}}},
       "parts": [
         {"id": "prt_15", "sessionID": "ses_t1", "messageID": "msg_05", "type": "step-start"},
         {"id": "prt_16", "sessionID": "ses_t1", "messageID": "msg_05", "type": "reasoning", "text": R4, "metadata": {"anthropic": {"signature": "EqQBCkYIBxgCKkB"}}, "time": {"start": 8, "end": 9}},
         {"id": "prt_17", "sessionID": "ses_t1", "messageID": "msg_05", "type": "text", "text": "The second module is fine."},
         {"id": "prt_18", "sessionID": "ses_t1", "messageID": "msg_05", "type": "step-finish", "reason": "stop", "cost": 0, "tokens": {"input": 10, "output": 5, "reasoning": 0, "cache": {"read": 0, "write": 0}}}]},
      {"info": {"id": "msg_06", "sessionID": "ses_t1", "role": "assistant", "time": {"created": 9}, "parentID": "msg_04", "modelID": "gpt-5", "providerID": "openai", "mode": "build", "agent": "build", "path": {"cwd": "/w", "root": "/w"}, "cost": 0, "tokens": {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}}},
       "parts": [
         {"id": "prt_19", "sessionID": "ses_t1", "messageID": "msg_06", "type": "step-start"},
         {"id": "prt_20", "sessionID": "ses_t1", "messageID": "msg_06", "type": "reasoning", "text": R5, "metadata": {"openai": {"itemId": "rs_1", "reasoningEncryptedContent": "gAAAAB"}}, "time": {"start": 9, "end": 10}},
         {"id": "prt_21", "sessionID": "ses_t1", "messageID": "msg_06", "type": "text", "text": "Done."}]},
    ]
    return {"info": {"id": "ses_t1", "slug": "brave-otter", "projectID": "p1", "directory": "/w", "title": "Fix date parser", "version": "1.14.0", "time": {"created": 1, "updated": 9}}, "messages": msgs}
def dump(doc):
    """The bytes ``opencode export`` writes: JSON.stringify(value, null, 2) and a newline."""
    return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode()
def to_db(path, docs, kilo=False):
    """Write ``docs`` (export documents) into a new database at ``path`` as OpenCode stores them:
    ids in their own columns, the rest of each message and part as JSON in ``data``."""
    conn = sqlite3.connect(path)
    extra = "" if not kilo else ";\n    create table kilo_board (root_session_id text primary key, objective text)"
    conn.executescript(f"""
    create table session (id text primary key, project_id text not null, parent_id text, slug text not null, directory text not null, title text not null, version text not null, time_created integer not null, time_updated integer not null){extra};
    create table message (id text primary key, session_id text not null, time_created integer not null, time_updated integer not null, data text not null);
    create table part (id text primary key, message_id text not null, session_id text not null, time_created integer not null, time_updated integer not null, data text not null);
    """)
    for doc in docs:
        i = doc["info"]
        conn.execute("insert into session (id, project_id, slug, directory, title, version, time_created, time_updated) values (?,?,?,?,?,?,?,?)", (i["id"], "p1", i["slug"], i["directory"], i["title"], i["version"], i["time"]["created"], i["time"]["updated"]))
        for m in doc["messages"]:
            info = {k: v for k, v in m["info"].items() if k not in ("id", "sessionID")}
            conn.execute("insert into message values (?,?,?,?,?)", (m["info"]["id"], i["id"], m["info"]["time"]["created"], 0, json.dumps(info)))
            for p in m["parts"]:
                data = {k: v for k, v in p.items() if k not in ("id", "sessionID", "messageID")}
                conn.execute("insert into part values (?,?,?,?,?,?)", (p["id"], m["info"]["id"], i["id"], 0, 0, json.dumps(data)))
    conn.commit()
    conn.close()
