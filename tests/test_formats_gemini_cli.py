"""Gemini CLI recordings: the conversation gemini-cli's loader rebuilds (re-written ids, $set
checkpoints, $rewindTo), every copy of a thought edited alike, tool results read once."""

import json

from format_helpers import SAMPLES, run_cli
from iclr_cli.formats import registry
from iclr_cli.formats.adapters.gemini_cli import ADAPTER, parse_thought
from iclr_cli.trajectory import WriteBack

SAMPLE = SAMPLES / "gemini_cli_session.jsonl"
META = {"sessionId": "s-1", "projectHash": "p-1", "startTime": "t0", "lastUpdated": "t0"}
THINK = "Read the config.\n\nThen run the tests."


def lines(*values) -> bytes:
    return b"".join(json.dumps(v, separators=(",", ":")).encode() + b"\n" for v in values)


def gemini(mid, thoughts=(), content="", **extra):
    return {"id": mid, "timestamp": "t", "type": "gemini", "content": content,
            "thoughts": [{"subject": s, "description": d, "timestamp": "t"} for s, d in thoughts], **extra}


def user(mid, text):
    return {"id": mid, "timestamp": "t", "type": "user", "content": [{"text": text}]}


def test_sample_conversation_is_what_gemini_cli_resumes():
    data = SAMPLE.read_bytes()
    assert registry.detect(data, "s.jsonl").name == "gemini-cli"
    [traj] = ADAPTER.load(data, "s.jsonl").trajectories
    assert traj.id == "8c1f3e2a-5b6d-4e7f-9a0b-1c2d3e4f5a6b" and traj.meta["model"] == "gemini-2.5-pro"
    assert [p.label for p in traj.prompt] == ["user"]
    # the rewound question and the info line are gone; the tool response is read once
    assert [[(p.kind, p.label) for p in s.parts] for s in traj.steps] == [
        [("reasoning", "reasoning"), ("action", "tool_call:run_shell_command"), ("observation", "tool_result")],
        [("reasoning", "reasoning"), ("action", "assistant")],
    ]
    # the first gemini message was written three times: one part, three sites, the live one first
    sites = traj.steps[0].reasoning[0].ref.sites
    assert [s.path[0] for s in sites] == [6, 3, 5]


def test_iclr_edits_every_copy_of_a_thought_alike(tmp_path, capsys):
    out = tmp_path / "o.jsonl"
    code, _, err = run_cli(capsys, "prune", str(SAMPLE), "--variant", "iclr", "--model", "fake", "-o", str(out))
    assert code == 0, err
    got = [json.loads(line) for line in out.read_bytes().splitlines()]
    first = [r["thoughts"][0]["description"] for r in got if r.get("id") == "b7e2d4f1-3c5a-4b6e-8f7d-2e1c0b9a8d02"]
    assert len(first) == 3 and len(set(first)) == 1 and "[SKIP]" in first[0]
    assert all(r["thoughts"][0]["subject"] == "Locating the backup job" for r in got if r.get("id") == "b7e2d4f1-3c5a-4b6e-8f7d-2e1c0b9a8d02")
    src = SAMPLE.read_bytes().splitlines()
    untouched = [i for i, r in enumerate(got) if "thoughts" not in r]
    assert all(out.read_bytes().splitlines()[i] == src[i] for i in untouched)


def test_checkpoint_replaces_the_conversation_and_its_copy_is_edited():
    g = gemini("g1", [("Plan", THINK)])
    data = lines(META, user("u0", "old question"), gemini("g0", [("Old", "An earlier plan.")]), {"$set": {"messages": [user("u1", "Fix the build."), g]}}, g)
    doc = ADAPTER.load(data, "c.jsonl")
    [traj] = doc.trajectories
    assert [p.text for p in traj.prompt] == ["Fix the build."]
    assert [p.text for s in traj.steps for p in s.reasoning] == [THINK]
    out = [json.loads(x) for x in ADAPTER.dump(doc, [traj.with_steps([traj.steps[0].with_reasoning([""])])]).splitlines()]
    assert out[3]["$set"]["messages"][1]["thoughts"][0]["description"] == out[4]["thoughts"][0]["description"] == ""
    assert out[2]["thoughts"][0]["description"] == "An earlier plan."  # dropped by the checkpoint: not read, not edited


def test_rewind_to_an_unknown_id_clears_the_conversation():
    data = lines(META, user("u1", "first"), gemini("g1", [("P", THINK)]), {"$rewindTo": "missing"}, user("u2", "second"), gemini("g2", content="ok"))
    [traj] = ADAPTER.load(data, "r.jsonl").trajectories
    assert [p.text for p in traj.prompt] == ["second"] and traj.steps[0].reasoning == ()


def test_content_thought_and_its_summary_are_one_part():
    raw = f"**Plan** {THINK}"
    assert parse_thought(raw) == ("Plan", THINK)
    msg = gemini("g1", [("Plan", THINK)], content=[{"text": raw, "thought": True}, {"text": "Done."}])
    doc = ADAPTER.load(json.dumps({**META, "messages": [user("u1", "go"), msg]}).encode(), "w.json")
    [traj] = doc.trajectories
    [part] = traj.steps[0].reasoning
    assert part.text == THINK
    out = json.loads(ADAPTER.dump(doc, [traj.with_steps([traj.steps[0].with_reasoning(["[SKIP]"])])]))
    edited = out["messages"][1]
    assert edited["content"][0]["text"] == "**Plan** [SKIP]" and edited["thoughts"][0]["description"] == "[SKIP]"


def test_signed_content_thought_is_read_only_with_its_summary():
    raw = f"**Plan** {THINK}"
    msg = gemini("g1", [("Plan", THINK)], content=[{"text": raw, "thought": True, "thoughtSignature": "c2ln"}, {"text": "Done."}])
    doc = ADAPTER.load(json.dumps({**META, "messages": [user("u1", "go"), msg]}).encode(), "w.json")
    [traj] = doc.trajectories
    assert traj.steps[0].reasoning == ()
    assert [p.write_back for p in traj.steps[0].parts if p.kind == "reasoning"] == [WriteBack.READ_ONLY]
    assert any("signed by Gemini" in w for w in doc.warnings)


def test_unknown_gemini_part_is_reported(tmp_path, capsys):
    src = tmp_path / "u.json"
    src.write_text(json.dumps({**META, "messages": [user("u1", "go"), gemini("g1", content=[{"planStep": {"note": "hidden"}}, {"text": "ok"}])]}))
    code, _, err = run_cli(capsys, "score", str(src), "--model", "fake", "--strict", "-o", str(tmp_path / "s.jsonl"))
    assert code == 2 and "field 'messages[1].content[0]'" in err
