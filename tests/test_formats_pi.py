"""pi coding-agent sessions: the session tree's current path, thinking signatures per api,
aborted turns, compaction entries, byte-exact round trip."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from format_helpers import summary_value, SAMPLES, run_cli
from iclr_cli.blocks import SKIP
from iclr_cli.errors import InputError
from iclr_cli.formats import registry
from iclr_cli.formats.adapters.pi import ADAPTER
from iclr_cli.trajectory import Part, WriteBack

SAMPLE = SAMPLES / "pi_session.jsonl"


def lines_of(data: bytes) -> list[dict]:
    return [json.loads(x) for x in data.splitlines() if x.strip()]


def entry(entries: list[dict], eid: str) -> dict:
    return next(e for e in entries if e.get("id") == eid)


def test_sample_is_pi_and_parsed_along_the_current_branch():
    data = SAMPLE.read_bytes()
    assert registry.detect(data, str(SAMPLE)).name == "pi"
    doc = ADAPTER.load(data, "pi_session.jsonl")
    [traj] = doc.trajectories
    assert traj.id == "4f0c2a9e-7b1d-4c55-9e0a-3d2b8f61c7a4"
    assert [p.label for p in traj.prompt] == ["user"]
    assert len(traj.steps) == 5
    # one reasoning part per step; how each may be written back follows the message's api
    modes = [next(p for p in s.parts if p.kind == "reasoning").write_back for s in traj.steps]
    assert modes == [WriteBack.SIGNED, WriteBack.SIGNED, WriteBack.OPAQUE, WriteBack.IN_PLACE, WriteBack.READ_ONLY]
    step2 = [(p.kind, p.label) for p in traj.steps[2].parts]
    assert step2 == [
        ("reasoning", "reasoning"), ("action", "tool_call:screenshot"), ("observation", "tool_result"), ("observation", "tool_result"),
        ("observation", "compaction_summary"), ("observation", "branch_summary"), ("observation", "user"),
    ]
    shot = traj.steps[2].parts[3]
    assert shot.call_id == "call_shot01" and shot.media.mime == "image/png" and shot.text == ""
    assert traj.steps[2].parts[4].text.startswith("## Goal\nFix the one-cent checkout error.")
    assert traj.steps[3].parts[-1] == Part(
        "observation", "$ git diff --stat\n src/cart.py | 5 +++--\n 1 file changed, 3 insertions(+), 2 deletions(-)\n", label="bash_execution")
    # the abandoned branch ("Also refactor the tax code") is not on the path
    assert all("refactor the tax" not in p.text for s in traj.steps for p in s.parts)
    assert traj.meta == {"format": "pi", "model": "gemini-2.5-pro"}
    assert doc.warnings == [
        "pi_session.jsonl: not scored, left as written (pi never sends aborted or failed turns again): assistant turn at line 7 (aborted)",
        "pi_session.jsonl: 2 entries on other branches of the session tree passed through unscored",
        "pi_session.jsonl: 1 reasoning part signed by google-generative-ai (a Gemini thought signature; a signed part must not change): "
        "left unedited, not scored or pruned (at line 22, field 'message.content[0]')",
    ]


def test_parallel_results_pair_with_their_calls_by_id():
    [traj] = ADAPTER.load(SAMPLE.read_bytes(), "s.jsonl").trajectories
    parts = traj.steps[0].parts
    calls = {p.call_id: p.label for p in parts if p.kind == "action"}
    results = [(calls[p.call_id], p.text[:8]) for p in parts if p.label == "tool_result"]
    assert results == [("tool_call:bash", "src/cart"), ("tool_call:read", "class Ca")]


def test_aborted_turn_with_a_half_written_tool_call_is_no_step():
    [traj] = ADAPTER.load(SAMPLE.read_bytes(), "s.jsonl").trajectories
    labels = [p.label for s in traj.steps for p in s.parts]
    assert "tool_call:edit" in labels and labels.count("tool_call:edit") == 1  # the aborted edit call is not there
    assert traj.steps[0].parts[-1].text == "Use Decimal for money, not float. Go on."


def test_round_trip_is_byte_identical_also_with_crlf_and_no_final_newline():
    data = SAMPLE.read_bytes()
    doc = ADAPTER.load(data, "s.jsonl")
    assert ADAPTER.dump(doc, doc.trajectories) == data
    crlf = data.replace(b"\n", b"\r\n")[:-2]
    doc = ADAPTER.load(crlf, "s.jsonl")
    assert ADAPTER.dump(doc, doc.trajectories) == crlf


def test_cli_prune_variant_none_is_the_identity(tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    code, _, err = run_cli(capsys, "prune", str(SAMPLE), "--variant", "none", "--model", "fake", "-o", str(out), "-q")
    assert code == 0, err
    assert out.read_bytes() == SAMPLE.read_bytes()


@pytest.mark.parametrize("opaque", ["drop", "keep"])
def test_delete_all_follows_each_signature_rule(tmp_path, capsys, opaque):
    out = tmp_path / "out.jsonl"
    code, _, err = run_cli(capsys, "prune", str(SAMPLE), "--variant", "delete-all", "--model", "fake", "--encrypted-reasoning", opaque,
                           "--signed-thinking", "edit", "-o", str(out), "-q")
    assert code == 0, err
    before, after = lines_of(SAMPLE.read_bytes()), lines_of(out.read_bytes())
    assert len(after) == len(before)  # no entry is ever removed: the tree stays whole
    first = lambda e, eid: entry(e, eid)["message"]["content"][0]  # noqa: E731
    # anthropic: signed thinking emptied and its signature dropped
    assert first(after, "c2d9a7f1") == {"type": "thinking", "thinking": ""}
    assert first(after, "1b9c3f5a") == {"type": "thinking", "thinking": ""}
    # openai-completions: the "signature" names the reasoning field and stays
    assert first(after, "bf3a5b7d") == {"type": "thinking", "thinking": "", "thinkingSignature": "reasoning_content"}
    # google: a signed thought is never edited
    assert entry(after, "e26d8e0a") == entry(before, "e26d8e0a")
    # openai-responses: the reasoning item is dropped whole, or left as it was
    responses = entry(after, "4e6f8a0c")["message"]["content"]
    if opaque == "drop":
        assert [b["type"] for b in responses] == ["toolCall"]
    else:
        assert responses == entry(before, "4e6f8a0c")["message"]["content"]
    # the aborted turn and the abandoned branch are untouched; so is every non-assistant line
    for eid in ("f3c7d1e9", "8c0d2e4a"):
        assert entry(after, eid) == entry(before, eid)
    changed = {e.get("id") for e, f in zip(before, after) if e != f}
    assert changed == {"c2d9a7f1", "1b9c3f5a", "bf3a5b7d"} | ({"4e6f8a0c"} if opaque == "drop" else set())


def test_by_default_each_message_follows_its_own_provider_rule(tmp_path, capsys):
    """Anthropic-signed thinking and encrypted Responses reasoning are sealed; the plain
    openai-completions thinking (its "signature" names a field) is edited."""
    out = tmp_path / "out.jsonl"
    code, _, err = run_cli(capsys, "prune", str(SAMPLE), "--variant", "delete-all", "--model", "fake", "-o", str(out))
    assert code == 0, err
    before, after = lines_of(SAMPLE.read_bytes()), lines_of(out.read_bytes())
    changed = {e.get("id") for e, f in zip(before, after) if e != f}
    assert changed == {"bf3a5b7d"}
    assert summary_value(err, "reasoning parts left sealed (provider rule)") == "3 (anthropic signed 2, openai encrypted 1)"


def test_iclr_variant_writes_skip_into_thinking_and_keeps_tool_calls(tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    assert run_cli(capsys, "prune", str(SAMPLE), "--variant", "iclr", "--model", "fake", "--signed-thinking", "edit", "-o", str(out), "-q")[0] == 0
    before, after = lines_of(SAMPLE.read_bytes()), lines_of(out.read_bytes())
    edited = entry(after, "1b9c3f5a")["message"]["content"]
    assert SKIP in edited[0]["thinking"] and "thinkingSignature" not in edited[0]
    assert edited[1:] == entry(before, "1b9c3f5a")["message"]["content"][1:]
    raw_before, raw_after = SAMPLE.read_bytes().splitlines(), out.read_bytes().splitlines()
    for old, new in zip(raw_before, raw_after):
        if old != new:
            assert b'"role":"assistant"' in new and new.startswith(b'{"type":"message","id":')  # own compact style


def test_version_1_session_is_read_in_file_order():
    entries = [
        {"type": "session", "id": "s1", "timestamp": "t", "cwd": "/w"},
        {"type": "message", "timestamp": "t", "message": {"role": "user", "content": "fix it"}},
        {"type": "message", "timestamp": "t", "message": {"role": "assistant", "api": "anthropic-messages", "stopReason": "toolUse", "content": [
            {"type": "thinking", "thinking": "Look.\n\nThen act.", "thinkingSignature": ""},
            {"type": "toolCall", "id": "t1", "name": "bash", "arguments": {"command": "ls"}}]}},
        {"type": "message", "timestamp": "t", "message": {"role": "toolResult", "toolCallId": "t1", "toolName": "bash", "content": [], "isError": False}},
        {"type": "compaction", "timestamp": "t", "summary": "Listed files.", "firstKeptEntryIndex": 2, "tokensBefore": 900},
        {"type": "message", "timestamp": "t", "message": {"role": "assistant", "stopReason": "stop", "content": [{"type": "text", "text": "Done."}]}},
    ]
    data = "".join(json.dumps(e) + "\n" for e in entries).encode()
    assert registry.detect(data, "v1.jsonl").name == "pi"
    doc = ADAPTER.load(data, "v1.jsonl")
    [traj] = doc.trajectories
    assert [[(p.kind, p.label, p.text) for p in s.parts] for s in traj.steps] == [
        [("reasoning", "reasoning", "Look.\n\nThen act."), ("action", "tool_call:bash", '{"command": "ls"}'),
         ("observation", "tool_result", ""), ("observation", "compaction_summary", "Listed files.")],
        [("action", "assistant", "Done.")],
    ]
    assert traj.steps[0].parts[0].write_back is WriteBack.IN_PLACE  # an empty signature signs nothing
    assert doc.warnings == []


def test_leaf_is_the_last_entry_even_when_it_is_on_an_older_branch():
    entries = [
        {"type": "session", "version": 3, "id": "s", "cwd": "/w"},
        {"type": "message", "id": "a", "parentId": None, "message": {"role": "user", "content": "q"}},
        {"type": "message", "id": "b", "parentId": "a", "message": {"role": "assistant", "stopReason": "stop", "content": [{"type": "text", "text": "first answer"}]}},
        {"type": "message", "id": "c", "parentId": "a", "message": {"role": "assistant", "stopReason": "stop", "content": [{"type": "text", "text": "second answer"}]}},
        {"type": "label", "id": "d", "parentId": "b", "targetId": "b", "label": "keep"},
    ]
    doc = ADAPTER.load("".join(json.dumps(e) + "\n" for e in entries).encode(), "t.jsonl")
    assert [p.text for s in doc.trajectories[0].steps for p in s.parts] == ["first answer"]
    assert doc.warnings == ["t.jsonl: 1 entry on other branches of the session tree passed through unscored"]


def test_unknown_assistant_block_is_reported_as_unrecognised():
    entries = [{"type": "session", "version": 3, "id": "s", "cwd": "/w"},
               {"type": "message", "id": "a", "parentId": None, "message": {"role": "assistant", "stopReason": "stop", "content": [{"type": "audio", "data": "AA=="}]}}]
    doc = ADAPTER.load("".join(json.dumps(e) + "\n" for e in entries).encode(), "t.jsonl")
    assert [(u.line, u.field, u.what) for u in doc.unrecognised] == [(2, "message.content[0]", "assistant content block of type 'audio'")]


@pytest.mark.parametrize(
    "bad, line, field",
    [
        ('["not", "an", "entry"]', 2, None),
        ('{"type": "message", "id": "x", "parentId": null, "message": {"content": "no role"}}', 2, "message"),
        ('{"type": "message", "id": "x", "parentId": null, "message": {"role": "assistant", "content": "text"}}', 2, "message.content"),
        ('{"type": "message", "id": "x", "parentId": null, "message": {"role": "assistant", "content": [{"type": "thinking"}]}}', 2, "message.content[0].thinking"),
    ],
)
def test_bad_lines_name_line_and_field(bad, line, field):
    data = b'{"type":"session","version":3,"id":"s","cwd":"/w"}\n' + bad.encode() + b"\n"
    with pytest.raises(InputError) as exc:
        ADAPTER.load(data, "bad.jsonl")
    assert exc.value.line == line and exc.value.field == field


def test_not_claude_code_and_not_openai():
    head = SAMPLE.read_bytes()[:4096]
    assert not registry.get("claude_code").sniff(head)
    assert registry.get("pi").sniff(head)
    # a Claude Code session is not taken for pi
    assert not ADAPTER.sniff((SAMPLES / "claude_code_session.jsonl").read_bytes()[:65536])


SCALAR = st.none() | st.booleans() | st.integers(-2, 2) | st.text(alphabet="ab \n", max_size=6)
BLOCK = st.one_of(
    st.builds(lambda t, s, r: {"type": "thinking", "thinking": t, **({"thinkingSignature": s} if s is not None else {}), **({"redacted": True} if r else {})},
              st.text(alphabet="ab\n", max_size=8), st.sampled_from([None, "", "sig", "reasoning_content"]), st.sampled_from([False] * 5 + [True])),
    st.builds(lambda t: {"type": "text", "text": t}, st.text(alphabet="ab \n", max_size=6)),
    st.builds(lambda i, a: {"type": "toolCall", "id": i, "name": "bash", "arguments": a}, st.sampled_from(["t1", "t2", 5]), SCALAR | st.just({"command": "ls"})),
    st.builds(lambda d: {"type": "image", "data": d, "mimeType": "image/png"}, SCALAR),
    st.dictionaries(st.sampled_from(["type", "x"]), SCALAR, max_size=2),
)
ASSISTANT = (
    st.builds(lambda c, api, stop: {"role": "assistant", "content": c, "api": api, "stopReason": stop},
              st.lists(BLOCK, min_size=1, max_size=4), st.sampled_from(["anthropic-messages", "openai-responses", "openai-completions", "google-vertex", None]),
              st.sampled_from(["stop", "toolUse", "toolUse", "aborted", "error"]))
)
MESSAGE = st.one_of(
    ASSISTANT,
    ASSISTANT,
    st.builds(lambda c: {"role": "user", "content": c}, st.text(max_size=4) | st.lists(BLOCK, max_size=2)),
    st.builds(lambda i, c: {"role": "toolResult", "toolCallId": i, "toolName": "bash", "content": c, "isError": False}, st.sampled_from(["t1", "t2", 5]), st.lists(BLOCK, max_size=2)),
    st.builds(lambda c, o: {"role": "bashExecution", "command": c, "output": o, "exitCode": 1}, SCALAR, SCALAR),
    st.builds(lambda r: {"role": r, "summary": "s"}, st.sampled_from(["compactionSummary", "branchSummary", "custom", "weird"])),
)


@st.composite
def sessions(draw):
    entries = [{"type": "session", "version": draw(st.sampled_from([1, 2, 3])), "id": "s", "cwd": "/w"}]
    for k in range(draw(st.integers(1, 6))):
        parent = draw(st.sampled_from([f"e{k - 1}", f"e{k - 1}", f"e{k - 1}", None, "e0", "missing"]))
        kind = draw(st.sampled_from(["message"] * 5 + ["compaction", "branch_summary", "custom_message", "label", "bogus"]))
        e = {"type": kind, "id": f"e{k}", "parentId": parent}
        if kind == "message":
            e["message"] = draw(MESSAGE) if draw(st.integers(0, 9)) else draw(SCALAR)
        elif kind in ("compaction", "branch_summary"):
            e["summary"] = draw(SCALAR)
        elif kind == "custom_message":
            e["content"] = draw(st.text(max_size=3) | st.lists(BLOCK, max_size=2))
        entries.append(e)
    return "".join(json.dumps(e) + "\n" for e in entries).encode()


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=sessions())
def test_structured_fuzz_reads_cleanly_and_writes_back(data):
    try:
        doc = ADAPTER.load(data, "fuzz.jsonl")
    except InputError as exc:
        assert "fuzz.jsonl" in str(exc)
        return
    assert ADAPTER.dump(doc, doc.trajectories) == data
    emptied = [t.with_steps([s.with_reasoning([""] * len(s.reasoning)) for s in t.steps]) for t in doc.trajectories]
    after = lines_of(ADAPTER.dump(doc, emptied))
    assert len(after) == len(lines_of(data))


def test_a_session_with_no_messages_says_so():
    doc = ADAPTER.load(b'{"type":"session","version":3,"id":"s","cwd":"/w"}\n', "empty.jsonl")
    assert doc.trajectories[0].steps == () and doc.warnings == ["empty.jsonl: no messages on the session's current branch; nothing to score"]


def test_an_entry_holding_a_message_under_another_type_is_reported():
    """A pi entry with a conversation message but a type other than 'message' is not read: said, with its line."""
    sample = SAMPLES / "pi_session.jsonl"
    lines = [json.loads(line) for line in sample.read_text().splitlines() if line.strip()]
    at = next(i for i, r in enumerate(lines) if r.get("type") == "message")
    lines[at]["type"] = "hologram"
    doc = ADAPTER.load("".join(json.dumps(r) + "\n" for r in lines).encode(), "p.jsonl")
    assert [(u.line, u.field) for u in doc.unrecognised] == [(at + 1, "type")]
    assert not ADAPTER.load(sample.read_bytes(), "p.jsonl").unrecognised
