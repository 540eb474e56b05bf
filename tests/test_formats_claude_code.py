"""Claude Code session adapter: grouping by message.id, sidechains, byte-exact round trip of
real sessions, and write-back that touches only edited thinking lines."""

import json
from collections import Counter

import pytest

from format_helpers import (
    REALDATA,
    SAMPLES,
    assert_signatures_follow_edits,
    realdata,
    realdata_ids,
    run_cli,
    tool_ids,
    without_reasoning,
)
from iclr_cli.blocks import SKIP
from iclr_cli.formats import registry
from iclr_cli.formats.adapters.claude_code import ADAPTER
from iclr_cli.trajectory import WriteBack

SAMPLE = SAMPLES / "claude_code_session.jsonl"
CC = REALDATA / "claude_code"


def summary(path):
    """(trajectory id, steps, thinking parts, tool calls, tool results, sidechain) of a file."""
    doc = ADAPTER.load(path.read_bytes(), str(path))
    [traj] = doc.trajectories
    parts = [p for s in traj.steps for p in s.parts]
    return (
        traj.id,
        len(traj.steps),
        sum(p.kind == "reasoning" for p in parts),
        sum(p.label.startswith("tool_call:") for p in parts),
        sum(p.label == "tool_result" for p in parts),
        traj.meta["sidechain"],
    )


@pytest.mark.parametrize("name", realdata_ids("claude_code") + ["SAMPLE"])
def test_round_trip_is_byte_identical(name):
    path = SAMPLE if name == "SAMPLE" else CC / name
    data = path.read_bytes()
    adapter = registry.detect(data, str(path))
    assert adapter.name == "claude_code"
    doc = adapter.load(data, str(path))
    assert adapter.dump(doc, doc.trajectories) == data


def test_real_session_counts_match_sources_md():
    realdata("claude_code")
    # SOURCES.md: short has 1 signed thinking (154 chars) and 2 tool pairs, all its assistant
    # lines share one message.id; main slice: 202 assistant lines, 124 pairs, 14 signed
    # blocks; agentcmd: 27 assistant lines, 23 tool_use vs 20 tool_result, no thinking.
    assert summary(CC / "spotter_short.jsonl") == ("55604662-cf2a-4331-851a-ec234028f8ca", 1, 1, 2, 2, False)
    assert summary(CC / "spotter_tool_heavy.jsonl") == ("d6e0bada-1959-4eec-a9d2-0bfade768d8f", 4, 1, 6, 6, False)
    assert summary(CC / "spotter_258c7280_main_session_slice.jsonl") == ("258c7280-ae70-4798-800f-63464d01a85d", 103, 14, 124, 124, False)
    assert summary(CC / "agentcmd_full_session_three_nothinking.jsonl") == ("cfa1e878-62b5-4e40-b281-bbf9b250d766", 10, 0, 23, 20, False)
    assert summary(CC / "spotter_258c7280_agent-acompact.jsonl") == ("258c7280-ae70-4798-800f-63464d01a85d", 1, 0, 0, 0, True)
    [short] = ADAPTER.load((CC / "spotter_short.jsonl").read_bytes(), "s").trajectories
    [thinking] = short.steps[0].reasoning
    assert len(thinking.text) == 154 and thinking.write_back is WriteBack.SIGNED
    [main] = ADAPTER.load((CC / "spotter_258c7280_main_session_slice.jsonl").read_bytes(), "m").trajectories
    assert all(p.write_back is WriteBack.SIGNED for s in main.steps for p in s.reasoning)
    assert Counter(p.label for s in main.steps for p in s.parts)["compact_summary"] == 1


def test_non_consecutive_lines_of_one_message_form_one_step():
    realdata("claude_code")
    # tool_heavy lines 34 and 37 share msg_019BN3FRqb7NU4DgBN5jdsym with a tool result between
    [traj] = ADAPTER.load((CC / "spotter_tool_heavy.jsonl").read_bytes(), "t").trajectories
    labels = [p.label for p in traj.steps[3].parts]
    assert labels == ["tool_call:Read", "tool_result", "tool_call:WebFetch", "tool_result", "user"]


def test_sample_steps_prompt_and_passthrough_lines():
    data = SAMPLE.read_bytes()
    doc = ADAPTER.load(data, str(SAMPLE))
    [traj] = doc.trajectories
    assert traj.id == "9b2f6c1e-4d7a-4e0b-8c3f-2a51d6e7f801"
    assert [p.label for p in traj.prompt] == ["user"]
    assert [len(s.reasoning) for s in traj.steps] == [1, 1, 1, 0, 0]
    assert all(s.reasoning[0].text.count("\n\n") >= 2 for s in traj.steps[:3])
    types = Counter(json.loads(line)["type"] for line in data.splitlines())
    assert types["progress"] == 2 and types["system"] == 1 and types["file-history-snapshot"] == 1


def prune(capsys, tmp_path, src, variant, *extra):
    out = tmp_path / f"out-{variant}.jsonl"
    code, stdout, _ = run_cli(capsys, "prune", str(src), "--model", "fake", "--variant", variant, "-o", str(out), "-q", *extra)
    assert code == 0 and stdout == ""
    return out.read_bytes()


def assert_only_thinking_lines_changed(before: bytes, after: bytes) -> int:
    """Every line that changed holds thinking; other fields equal; returns lines changed."""
    old, new = before.split(b"\n"), after.split(b"\n")
    assert len(old) == len(new)
    changed = 0
    for a, b in zip(old, new):
        if a == b:
            continue
        changed += 1
        va, vb = json.loads(a), json.loads(b)
        assert [x["type"] for x in va["message"]["content"]] == ["thinking"]
        assert without_reasoning(va) == without_reasoning(vb)
        assert b'":' in b and b'": ' not in b  # compact separators, like the original line
    return changed


@pytest.mark.parametrize("name", ["spotter_258c7280_main_session_slice.jsonl", "SAMPLE"])
def test_prune_iclr_changes_only_thinking_and_drops_signatures_of_edited_blocks(tmp_path, capsys, name):
    if name != "SAMPLE":
        realdata("claude_code")
    src = SAMPLE if name == "SAMPLE" else CC / name
    before = src.read_bytes()
    # signed thinking is sealed by default (the provider rule): by default nothing changes
    assert prune(capsys, tmp_path, src, "iclr") == before
    after = prune(capsys, tmp_path, src, "iclr", "--signed-thinking", "edit")
    changed = assert_only_thinking_lines_changed(before, after)
    assert changed >= 3
    old_values = [json.loads(x) for x in before.splitlines()]
    new_values = [json.loads(x) for x in after.splitlines()]
    assert assert_signatures_follow_edits(old_values, new_values) == changed
    assert tool_ids(new_values) == tool_ids(old_values)
    assert sum(SKIP in json.dumps(v) for v in new_values) == changed


def test_prune_delete_all_keeps_lines_with_empty_unsigned_thinking(tmp_path, capsys):
    before = SAMPLE.read_bytes()
    after = prune(capsys, tmp_path, SAMPLE, "delete-all", "--signed-thinking", "edit")
    assert assert_only_thinking_lines_changed(before, after) == 3
    new_values = [json.loads(x) for x in after.splitlines()]
    emptied = [v for v in new_values if v.get("type") == "assistant" and v["message"]["content"][0]["type"] == "thinking"]
    assert [v["message"]["content"] for v in emptied] == [[{"type": "thinking", "thinking": ""}]] * 3
    # the parentUuid chain is intact: every parent is a uuid of an earlier line
    seen = set()
    for v in new_values:
        assert v.get("parentUuid") is None or v["parentUuid"] in seen
        if "uuid" in v:
            seen.add(v["uuid"])


def line(kind, uuid, parent, content, *, msg_id=None, sidechain=False, session="s-1"):
    message = {"role": kind, "content": content}
    if msg_id:
        message = {"id": msg_id, "type": "message", **message}
    rec = {"parentUuid": parent, "isSidechain": sidechain, "sessionId": session, "type": kind, "message": message, "uuid": uuid}
    return json.dumps(rec, separators=(",", ":"))


THINK = [{"type": "thinking", "thinking": "first\n\nsecond\n\nthird", "signature": "SIG"}]


def test_sidechain_lines_are_not_steps_and_pass_through(tmp_path, capsys):
    rows = [
        line("user", "u1", None, "task"),
        line("assistant", "a1", "u1", THINK, msg_id="m1"),
        line("assistant", "a2", "a1", [{"type": "tool_use", "id": "t1", "name": "Task", "input": {"prompt": "look"}}], msg_id="m1"),
        line("user", "x1", "a2", "look", sidechain=True),
        line("assistant", "x2", "x1", THINK, msg_id="m-side", sidechain=True),
        line("user", "u2", "a2", [{"type": "tool_result", "tool_use_id": "t1", "content": "found"}]),
        line("assistant", "a3", "u2", [{"type": "text", "text": "done"}]),  # no message.id
        line("assistant", "a4", "a3", [{"type": "text", "text": "really"}]),
    ]
    src = tmp_path / "session.jsonl"
    src.write_text("\n".join(rows) + "\n")
    [traj] = ADAPTER.load(src.read_bytes(), str(src)).trajectories
    assert traj.id == "s-1" and traj.meta["sidechain"] is False
    assert [[p.label for p in s.parts] for s in traj.steps] == [["reasoning", "tool_call:Task", "tool_result"], ["assistant"], ["assistant"]]
    after = prune(capsys, tmp_path, src, "iclr", "--signed-thinking", "edit").split(b"\n")
    assert after[4] == rows[4].encode()  # the sidechain's thinking is untouched
    # no model names the provider: the edited block keeps its signature key (sealing.py)
    assert b"[SKIP]" in after[1] and b'"signature":"SIG"' in after[1]
    # the same lines as a pure sub-agent transcript: the sidechain is the trajectory
    side = tmp_path / "agent-x.jsonl"
    side.write_text("\n".join(rows[3:5]) + "\n")
    [sub] = ADAPTER.load(side.read_bytes(), str(side)).trajectories
    assert sub.meta["sidechain"] is True and len(sub.steps) == 1 and len(sub.steps[0].reasoning) == 1


@pytest.mark.parametrize(
    "bad, field",
    [
        ('{"type":"assistant","sessionId":"s","uuid":"b","message":"oops"}', "message"),
        ('{"type":"assistant","sessionId":"s","uuid":"b","message":{"role":"assistant"}}', "message.content"),
        ('{"type":"assistant","sessionId":"s","uuid":"b","message":{"role":"assistant","content":[{"type":"thinking"}]}}', "message.content[0].thinking"),
        ('["not", "an", "event"]', None),
        ('{"type":"user","sessionId":"s","uuid":"b","message":{"role":"user","content":', None),
    ],
)
def test_malformed_line_exits_2_naming_file_line_and_field(tmp_path, capsys, bad, field):
    src = tmp_path / "bad.jsonl"
    src.write_text(line("user", "a", None, "hi") + "\n" + bad + "\n")
    code, _, err = run_cli(capsys, "prune", str(src), "--format", "claude_code", "--model", "fake", "-q")
    assert code == 2
    assert f"{src}:2" in err
    if field:
        assert repr(field) in err


def test_skip_bad_lines_passes_the_line_through(tmp_path, capsys):
    bad = '{"type":"assistant","sessionId":"s","uuid":"b","message":"oops"}'
    src = tmp_path / "bad.jsonl"
    src.write_text(line("user", "a", None, "hi") + "\n" + bad + "\n" + line("assistant", "c", "a", THINK, msg_id="m") + "\n")
    out = tmp_path / "out.jsonl"
    code, _, err = run_cli(capsys, "prune", str(src), "--model", "fake", "--skip-bad-lines", "--signed-thinking", "edit", "-o", str(out))
    assert code == 0 and f"{src}:2" in err
    lines = out.read_bytes().split(b"\n")
    assert lines[1] == bad.encode() and b"[SKIP]" in lines[2]


def _cut_third_line(tmp_path):
    """The sample session with its third line cut in the middle (as a crash mid-write leaves it)."""
    lines = SAMPLE.read_bytes().split(b"\n")
    lines[2] = lines[2][: len(lines[2]) // 3]
    src = tmp_path / "broken.jsonl"
    src.write_bytes(b"\n".join(lines))
    return src, lines[2]


def test_one_cut_early_line_does_not_change_the_sniffed_format(tmp_path, capsys):
    src, cut = _cut_third_line(tmp_path)
    assert registry.detect(src.read_bytes(), str(src)).name == "claude_code"
    # without --skip-bad-lines the cut line is still the error
    code, _, err = run_cli(capsys, "prune", str(src), "--model", "fake", "-q")
    assert code == 2
    assert f"{src}:3: line is not a complete JSON record" in err
    out = tmp_path / "out.jsonl"
    code, _, err = run_cli(capsys, "prune", str(src), "--model", "fake", "--skip-bad-lines", "--signed-thinking", "edit", "-o", str(out))
    assert code == 0, err
    assert f"{src}:3: skipped" in err and "no message list found" not in err
    written = out.read_bytes().split(b"\n")
    assert written[2] == cut and b"[SKIP]" in out.read_bytes()


def test_a_pretty_printed_document_is_not_read_as_jsonl_with_bad_lines():
    data = (SAMPLES / "openai_chat.json").read_bytes()
    assert registry.detect(data, "c.json").name == "openai"
    # cut short, it still sniffs as the document it starts as
    assert registry.detect(data[:700], "c.json").name == "openai"


def test_sniff():
    assert ADAPTER.sniff(SAMPLE.read_bytes()[:65536])
    # a first line longer than the head is judged by its keys
    head = b'{"parentUuid":null,"isSidechain":false,"sessionId":"s","type":"user","message":{"content":"' + b"x" * 70000
    assert ADAPTER.sniff(head[:65536])
    for name in ("anthropic_messages.json", "openai_chat.json", "openai_think_tags.jsonl"):
        assert not ADAPTER.sniff((SAMPLES / name).read_bytes())
    assert not ADAPTER.sniff(b'{"timestamp":"t","type":"session_meta","payload":{}}\n{"type":"response_item"}\n')


def test_bom_crlf_and_blank_lines_survive_an_edit(tmp_path, capsys):
    rows = [line("user", "a", None, "hi"), "", line("assistant", "b", "a", THINK, msg_id="m"), line("user", "c", "b", "ok")]
    data = b"\xef\xbb\xbf" + "\r\n".join(rows).encode()  # no final line end
    src = tmp_path / "crlf.jsonl"
    src.write_bytes(data)
    doc = ADAPTER.load(data, str(src))
    assert ADAPTER.dump(doc, doc.trajectories) == data
    after = prune(capsys, tmp_path, src, "iclr", "--signed-thinking", "edit")
    old, new = data.split(b"\r\n"), after.split(b"\r\n")
    assert len(new) == 4 and new[0] == old[0] and new[1] == b"" and new[3] == old[3]
    assert b"[SKIP]" in new[2] and b'"signature":"SIG"' in new[2]  # no model: the key is kept


def test_system_text_before_the_first_turn_is_prompt_and_id_falls_back_to_the_file_name(tmp_path):
    system = lambda content: json.dumps({"type": "system", "subtype": "informational", "content": content, "isSidechain": False, "uuid": content})
    rows = [system("hooks loaded"), line("user", "u", None, "go", session=None), line("assistant", "a", "u", THINK, msg_id="m", session=None), system("after")]
    src = tmp_path / "nosession.jsonl"
    src.write_text("\n".join(rows) + "\n")
    [traj] = ADAPTER.load(src.read_bytes(), str(src)).trajectories
    assert traj.id == "nosession.jsonl#0"
    assert [(p.label, p.text) for p in traj.prompt] == [("system", "hooks loaded"), ("user", "go")]
    assert [p.label for p in traj.steps[0].parts] == ["reasoning"]  # the later system line is not sent to the model


def cc_line(kind, content, **extra):
    base = {"type": kind, "sessionId": "s", "uuid": f"u{len(extra)}", "parentUuid": None}
    return json.dumps({**base, "message": {"role": kind, "content": content, **extra}}).encode() + b"\n"


def test_a_session_with_no_conversation_is_an_input_error(capsys, tmp_path):
    from iclr_cli.errors import InputError

    data = b'{"type": "summary", "summary": "x", "leafUuid": "a"}\n{"type": "file-history-snapshot", "messageId": "m", "snapshot": {}}\n'
    assert registry.detect(data, "s.jsonl").name == "claude_code"
    with pytest.raises(InputError, match="holds no user or assistant message"):
        ADAPTER.load(data, "s.jsonl")
    # only a user line: it reads, but has no step, which the commands refuse
    path = tmp_path / "s.jsonl"
    path.write_bytes(cc_line("user", "hello"))
    code, _, err = run_cli(capsys, "prune", str(path), "--model", "fake", "--variant", "delete-all", "-o", str(tmp_path / "o.jsonl"))
    assert code == 2 and "holds no assistant turn" in err and not (tmp_path / "o.jsonl").exists()


def test_unread_assistant_text_is_reported_with_its_line():
    data = cc_line("user", "hi") + cc_line("assistant", [{"type": "text", "text": "<think>why</think>ok"}], id="m1") + cc_line("assistant", [{"type": "fancy_block", "x": 1}], id="m2", reasoning_content="r")
    doc = ADAPTER.load(data, "s.jsonl")
    [traj] = doc.trajectories
    assert [p.text for s in traj.steps for p in s.reasoning] == ["why"]
    assert [(u.line, u.field) for u in doc.unrecognised] == [(3, "message.content[0]"), (3, "message.reasoning_content")]
    out = ADAPTER.dump(doc, [traj.with_steps([traj.steps[0].with_reasoning([""]), traj.steps[1]])])
    assert json.loads(out.splitlines()[1])["message"]["content"] == [{"type": "text", "text": "<think></think>ok"}]
    assert out.splitlines()[0] + b"\n" == data.splitlines(keepends=True)[0]


@pytest.mark.parametrize("kind", [None, "hologram"])
def test_a_message_line_under_another_type_is_reported_not_dropped_unseen(kind):
    """An assistant line whose type was lost or is one this adapter does not know holds a turn
    the proxy would not read: it is counted as unrecognised with its line."""
    lines = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
    at = next(i for i, r in enumerate(lines) if r.get("type") == "assistant")
    if kind is None:
        del lines[at]["type"]
    else:
        lines[at]["type"] = kind
    doc = ADAPTER.load("".join(json.dumps(r) + "\n" for r in lines).encode(), "s.jsonl")
    [note] = [u for u in doc.unrecognised if u.field == "type"]
    assert note.line == at + 1 and f"but its type is {kind!r}" in note.what
    plain = ADAPTER.load(SAMPLE.read_bytes(), "s.jsonl")
    assert not [u for u in plain.unrecognised if u.field == "type"]  # bookkeeping lines carry no message
