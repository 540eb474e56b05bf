"""Codex CLI rollout adapter: steps and echoes on the real rollout, encrypted items dropped or
kept, in-place summaries edited with their echo, and nothing but reasoning changed."""

import json

import pytest

from format_helpers import REALDATA, SAMPLES, realdata, realdata_ids, run_cli, summary_value
from iclr_cli.inputs import load_file
from iclr_cli.blocks import split_blocks
from iclr_cli.compress import Settings, compress_trajectories
from iclr_cli.errors import InputError
from iclr_cli.formats import registry
from iclr_cli.formats.base import OpaqueEdits
from iclr_cli.formats.adapters.codex import ADAPTER
from iclr_cli.policies import parse_variant
from iclr_cli.scoring.fake import RegexTokenizer
from iclr_cli.trajectory import WriteBack

SAMPLE = SAMPLES / "codex_rollout.jsonl"
REAL = REALDATA / "codex_rollout" / "agentcmd_rollout-2025-09-24T20-12-23.jsonl"


def records(data: bytes) -> list[dict]:
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def is_reasoning_record(r: dict) -> bool:
    p = r.get("payload", {})
    return (r["type"] == "response_item" and p.get("type") == "reasoning") or (r["type"] == "event_msg" and p.get("type") == "agent_reasoning")


def delete_all(doc, opaque: OpaqueEdits) -> bytes:
    results = compress_trajectories(doc.trajectories, Settings(parse_variant("delete-all")), None, RegexTokenizer())
    return ADAPTER.dump(doc, [r.compressed for r in results], opaque=opaque)


def call_ids(recs: list[dict]) -> list[str]:
    return [f"{r['payload']['type']}:{r['payload']['call_id']}" for r in recs if r["type"] == "response_item" and "call_id" in r["payload"]]


@pytest.mark.parametrize("name", realdata_ids("codex_rollout") + ["SAMPLE"])
def test_round_trip_is_byte_identical(name):
    path = SAMPLE if name == "SAMPLE" else REALDATA / "codex_rollout" / name
    data = path.read_bytes()
    assert registry.detect(data, str(path)).name == "codex"
    doc = ADAPTER.load(data, str(path))
    assert ADAPTER.dump(doc, doc.trajectories) == data
    assert ADAPTER.dump(doc, doc.trajectories, opaque=OpaqueEdits.KEEP) == data


def test_real_rollout_counts_match_sources_md():
    realdata("codex_rollout")
    [traj] = ADAPTER.load(REAL.read_bytes(), str(REAL)).trajectories
    parts = [p for s in traj.steps for p in s.parts]
    reasoning = [p for p in parts if p.kind == "reasoning"]
    # SOURCES.md: 17 reasoning items, all with encrypted_content; 16 calls / 16 outputs. The
    # 17 agent_reasoning echoes are the same text and must not count again.
    assert traj.id == "01997ea4-a70d-7da3-8c20-c736db82a7c5"
    assert len(reasoning) == 17
    assert {p.write_back for p in reasoning} == {WriteBack.OPAQUE}
    assert sum(p.label.startswith("tool_call:") for p in parts) == 16
    assert sum(p.label == "tool_result" for p in parts) == 16
    # 16 call turns + 2 answer turns; one call turn (line 67) has no reasoning item.
    assert len(traj.steps) == 18
    assert [len(s.reasoning) for s in traj.steps].count(0) == 1
    assert sum(len(split_blocks(p.text).blocks) for p in reasoning) == 17  # two summaries open with a **title** paragraph, joined to the one it heads (METHOD.md, "Blocks")
    assert sum(len(p.text) for p in reasoning) == sum(len(r["payload"]["summary"][0]["text"]) for r in records(REAL.read_bytes()) if r["type"] == "response_item" and r["payload"]["type"] == "reasoning")


def test_sample_steps_follow_the_documented_rule():
    [traj] = ADAPTER.load(SAMPLE.read_bytes(), str(SAMPLE)).trajectories
    assert traj.id == "0199b2c1-5d0e-7a31-9f44-2f6c8e1d7a10"
    assert [p.label for p in traj.prompt] == ["user", "user"]
    shapes = [[p.kind[0] for p in s.parts] for s in traj.steps]
    # reasoning item with two summaries + call + output; reasoning + 2 parallel calls + 2
    # outputs; a call with no reasoning; reasoning + final answer.
    assert shapes == [["r", "r", "a", "o"], ["r", "a", "a", "o", "o"], ["a", "o"], ["r", "a"]]
    assert [p.write_back for s in traj.steps for p in s.reasoning] == [WriteBack.OPAQUE, WriteBack.OPAQUE, WriteBack.IN_PLACE, WriteBack.OPAQUE]


def test_drop_removes_edited_items_and_their_echoes_only():
    realdata("codex_rollout")
    data = REAL.read_bytes()
    out = delete_all(ADAPTER.load(data, str(REAL)), OpaqueEdits.DROP)
    before, after = records(data), records(out)
    assert len(before) - len(after) == 34  # 17 items + 17 echoes
    assert after == [r for r in before if not is_reasoning_record(r)]
    kept_lines = [line for line in data.splitlines(keepends=True) if not is_reasoning_record(json.loads(line))]
    assert out == b"".join(kept_lines)  # survivors byte for byte
    assert call_ids(after) == call_ids(before)


def test_keep_leaves_encrypted_items_untouched():
    realdata("codex_rollout")
    data = REAL.read_bytes()
    assert delete_all(ADAPTER.load(data, str(REAL)), OpaqueEdits.KEEP) == data


def test_in_place_item_is_edited_with_its_echo_and_opaque_ones_follow_the_flag():
    data = SAMPLE.read_bytes()
    doc = ADAPTER.load(data, str(SAMPLE))
    [traj] = doc.trajectories
    step = traj.steps[1]
    edited = traj.with_steps([step.with_reasoning(["[SKIP]"]) if s is step else s for s in traj.steps])
    out = records(ADAPTER.dump(doc, [edited]))
    before = records(data)
    changed = [i for i, (a, b) in enumerate(zip(before, out)) if a != b]
    assert len(out) == len(before)
    assert [before[i]["payload"]["type"] for i in changed] == ["agent_reasoning", "reasoning"]
    for i in changed:
        text = out[i]["payload"]["text"] if out[i]["type"] == "event_msg" else out[i]["payload"]["summary"][0]["text"]
        assert text == "[SKIP]"

    first = traj.steps[0]
    edited = traj.with_steps([first.with_reasoning(["x", first.reasoning[1].text]) if s is first else s for s in traj.steps])
    dropped = records(ADAPTER.dump(doc, [edited], opaque=OpaqueEdits.DROP))
    # the item (two summaries) and both of its echoes go, although only one summary changed
    assert len(before) - len(dropped) == 3
    assert not any(r["type"] == "event_msg" and r["payload"].get("text", "").startswith("**Locating") for r in dropped)
    assert ADAPTER.dump(doc, [edited], opaque=OpaqueEdits.KEEP) == data


@pytest.mark.parametrize("encrypted", ["seal", "drop"])
@pytest.mark.parametrize("variant", ["iclr", "delete-all"])
@pytest.mark.parametrize("name", realdata_ids("codex_rollout") + ["SAMPLE"])
def test_cli_prune_changes_only_reasoning(capsys, tmp_path, name, variant, encrypted):
    path = SAMPLE if name == "SAMPLE" else REALDATA / "codex_rollout" / name
    out = tmp_path / "out.jsonl"
    code, _, err = run_cli(capsys, "prune", str(path), "--model", "fake", "--variant", variant, "--encrypted-reasoning", encrypted, "-o", str(out))
    assert code == 0, err
    before, after = records(path.read_bytes()), records(out.read_bytes())
    assert [r for r in after if not is_reasoning_record(r)] == [r for r in before if not is_reasoning_record(r)]
    originals = [r for r in before if is_reasoning_record(r)]
    for r in (r for r in after if is_reasoning_record(r) and r not in originals):
        # an edited record that survived must be an in-place item (or its echo)
        assert "encrypted_content" not in r["payload"]
        if variant == "delete-all":
            assert r["payload"].get("text", "") == "" and all(s["text"] == "" for s in r["payload"].get("summary", []))
    encrypted_before = [r for r in before if is_reasoning_record(r) and "encrypted_content" in r["payload"]]
    encrypted_after = [r for r in after if is_reasoning_record(r) and "encrypted_content" in r["payload"]]
    if encrypted == "seal":  # the default, as iclr serve: encrypted items are left as generated, by every variant
        assert encrypted_after == encrypted_before
        if encrypted_before:
            assert "left sealed" in " ".join(err.split())
    elif variant == "delete-all":  # --encrypted-reasoning drop: an edited encrypted item goes whole
        assert not encrypted_after
    assert load_file(str(out))[0].name == "codex"


def test_cli_score_on_real_rollout(capsys, tmp_path):
    realdata("codex_rollout")
    out = tmp_path / "scores.jsonl"
    # every reasoning item holds encrypted_content: sealed by default, so nothing is a candidate
    code, _, err = run_cli(capsys, "score", str(REAL), "--model", "fake", "-o", str(out))
    assert code == 0, err
    assert out.read_bytes() == b"" and summary_value(err, "reasoning parts left sealed (provider rule)") == "17 (openai encrypted 17)"
    code, _, err = run_cli(capsys, "score", str(REAL), "--model", "fake", "--encrypted-reasoning", "drop", "-o", str(out))
    assert code == 0, err
    rows = records(out.read_bytes())
    assert len(rows) == 17
    assert len({r["step"] for r in rows}) == 17


def test_bad_payload_names_line_and_field():
    bad = b'{"type":"session_meta","payload":{"id":"s"}}\n{"type":"response_item","payload":"oops"}\n'
    with pytest.raises(InputError) as exc:
        ADAPTER.load(bad, "r.jsonl")
    assert str(exc.value) == "r.jsonl:2: field 'payload': response_item has no object 'payload'"
    bad = b'{"type":"session_meta","payload":{"id":"s"}}\n{"type":"response_item","payload":{"type":"reasoning","summary":"x"}}\n'
    with pytest.raises(InputError, match=r"r.jsonl:2: field 'payload.summary'"):
        ADAPTER.load(bad, "r.jsonl")


@pytest.mark.parametrize("missing, field", [("name", "payload.name"), ("arguments", "payload.arguments"), ("call_id", "payload.call_id")])
def test_a_tool_call_without_a_required_field_names_its_line_and_field(missing, field):
    """OpenAI's reference requires a function_call's name, arguments and call_id: without one
    the action loses its tool or arguments, or its output its pairing."""
    call = {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"}
    del call[missing]
    data = b'{"type":"session_meta","payload":{"id":"s"}}\n' + json.dumps({"type": "response_item", "payload": call}).encode() + b"\n"
    with pytest.raises(InputError) as exc:
        ADAPTER.load(data, "r.jsonl")
    assert str(exc.value).startswith(f"r.jsonl:2: field '{field}': a function_call item has no '{missing}'")


def test_a_record_without_its_type_is_reported_not_dropped_unseen():
    """The record's tool call is then not in the history the proxy reads: that is said, with the line."""
    lines = [json.loads(line) for line in SAMPLE.read_text().splitlines()]
    at = next(i for i, r in enumerate(lines) if r.get("type") == "response_item" and r["payload"].get("type") == "function_call")
    del lines[at]["type"]
    lines.insert(1, {"type": "hologram", "payload": {}})
    doc = ADAPTER.load("\n".join(json.dumps(r) for r in lines).encode() + b"\n", "r.jsonl")
    assert [(u.line, u.field) for u in doc.unrecognised] == [(2, "type"), (at + 2, "type")]
    assert "'hologram'" in doc.unrecognised[0].what and "no string 'type'" in doc.unrecognised[1].what


def test_each_echo_belongs_to_one_part_even_when_texts_repeat():
    lines = [
        {"type": "session_meta", "payload": {"id": "s"}},
        {"type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}},
        {"type": "event_msg", "payload": {"type": "agent_reasoning", "text": "**Same title**"}},
        {"type": "event_msg", "payload": {"type": "agent_reasoning", "text": "**Same title**"}},
        {"type": "response_item", "payload": {"type": "reasoning", "summary": [{"type": "summary_text", "text": "**Same title**"}], "content": None}},
        {"type": "response_item", "payload": {"type": "reasoning", "summary": [{"type": "summary_text", "text": "**Same title**"}], "content": None}},
        {"type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}},
    ]
    data = b"".join(json.dumps(x).encode() + b"\n" for x in lines)
    doc = ADAPTER.load(data, "r.jsonl")
    [step] = doc.trajectories[0].steps
    echo_sites = [[s.path[0] for s in p.ref.sites[1:]] for p in step.reasoning]
    assert echo_sites == [[2], [3]]
    out = records(ADAPTER.dump(doc, [doc.trajectories[0].with_steps([step.with_reasoning(["a", "b"])])]))
    assert [r["payload"].get("text") for r in out[2:4]] == ["a", "b"]


@pytest.mark.parametrize("opaque", [OpaqueEdits.DROP, OpaqueEdits.KEEP])
def test_written_accounting_of_random_on_encrypted_items(opaque):
    """random-10 cannot edit items with encrypted_content. ``drop`` removes all
    17 whole, so the reasoning written is empty (deleted = generated); ``keep`` leaves them as
    they were (deleted = 0). The recount follows what went to the output, not the variant."""
    from iclr_cli.pipeline import NotAsAsked, as_written

    realdata("codex_rollout")
    data = REAL.read_bytes()
    doc = ADAPTER.load(data, str(REAL))
    tok = RegexTokenizer()
    results = compress_trajectories(doc.trajectories, Settings(parse_variant("random-10")), None, tok)
    asked = sum(r.tokens_removed for r in results[0].steps)
    generated = sum(len(tok.token_spans(p.text)) for s in doc.trajectories[0].steps for p in s.reasoning)
    assert 0 < asked < generated  # random-10 asked for about a tenth
    wrote = ADAPTER.write(doc, [r.compressed for r in results], opaque=opaque)
    missed = NotAsAsked()
    [result] = as_written(results, wrote.written, tok, missed)
    texts = [p.text for s in wrote.written[0].steps for p in s.reasoning]
    deleted = sum(r.tokens_removed for r in result.steps)
    if opaque is OpaqueEdits.DROP:
        assert len(records(data)) - len(records(wrote.data)) == 34
        assert texts == [""] * 17
        assert (deleted, sum(r.tokens_after for r in result.steps)) == (generated, 0)
        assert sum(r.n_removed for r in result.steps) == 17  # every block went with its item
        assert (missed.dropped, missed.kept) == (17, 0)
    else:
        assert wrote.data == data
        assert texts == [p.text for s in doc.trajectories[0].steps for p in s.reasoning]
        assert (deleted, sum(r.tokens_after for r in result.steps)) == (0, generated)
        assert (missed.dropped, missed.kept) == (0, 17)


@pytest.mark.parametrize("flag", ["drop", "keep"])
def test_cli_prune_random_on_real_rollout_reports_what_was_written(capsys, tmp_path, flag):
    realdata("codex_rollout")
    out = tmp_path / "out.jsonl"
    args = ["prune", str(REAL), "--model", "fake", "--variant", "random-10", "--encrypted-reasoning", flag, "-o", str(out)]
    code, _, err = run_cli(capsys, *args)
    assert code == 0, err
    before = summary_value(err, "reasoning tokens generated (regex-words)")
    if flag == "drop":
        assert len(records(out.read_bytes())) == 112 - 34
        assert summary_value(err, "reasoning tokens deleted") == before
        assert summary_value(err, "deletion ratio (deleted / generated)") == "1.000"
        # random-R deletes tokens; its cell says so beside the whole blocks (the items went whole)
        assert summary_value(err, "blocks removed") == f"17 whole; random-10 deletes tokens, not blocks: {before} tokens deleted"
        assert "could not be applied as asked to 17 reasoning part(s)" in err and "removed their items whole" in err
    else:
        assert out.read_bytes() == REAL.read_bytes()
        assert (summary_value(err, "reasoning tokens deleted"), summary_value(err, "deletion ratio (deleted / generated)")) == ("0", "0.000")
        assert "could not be applied as asked to 17 reasoning part(s)" in err and "left them unedited" in err


def test_cli_prune_delete_all_drop_is_as_asked(capsys, tmp_path):
    realdata("codex_rollout")
    code, _, err = run_cli(capsys, "prune", str(REAL), "--model", "fake", "--variant", "delete-all", "--encrypted-reasoning", "drop", "-o", str(tmp_path / "o.jsonl"))
    assert code == 0 and summary_value(err, "deletion ratio (deleted / generated)") == "1.000"
    assert "could not be applied" not in err


@pytest.mark.parametrize("variant", ["iclr", "random-10", "delete-all"])
def test_every_variant_leaves_encrypted_items_sealed_by_default(capsys, tmp_path, variant):
    """A baseline that drops every encrypted item is not random-10: all variants follow the
    provider rule (encrypted reasoning sealed, as iclr serve does), so they stay comparable."""
    realdata("codex_rollout")
    out = tmp_path / "o.jsonl"
    code, _, err = run_cli(capsys, "prune", str(REAL), "--model", "fake", "--variant", variant, "-o", str(out))
    assert code == 0, err
    assert out.read_bytes() == REAL.read_bytes()
    assert summary_value(err, "reasoning parts left sealed (provider rule)") == "17 (openai encrypted 17)"
    assert "could not be applied" not in err


def compacted_rollout() -> bytes:
    def reasoning(text, enc=None):
        item = {"type": "reasoning", "summary": [{"type": "summary_text", "text": text}], "content": None}
        if enc:
            item["encrypted_content"] = enc
        return item

    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it"}]}
    lines = [
        {"type": "session_meta", "payload": {"id": "s1"}},
        {"type": "response_item", "payload": user},
        {"type": "event_msg", "payload": {"type": "agent_reasoning", "text": "alpha\n\nbeta"}},
        {"type": "response_item", "payload": reasoning("alpha\n\nbeta")},  # line 4: in place
        {"type": "response_item", "payload": {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"}},
        {"type": "response_item", "payload": {"type": "function_call_output", "call_id": "c1", "output": "ok"}},
        {"type": "event_msg", "payload": {"type": "agent_reasoning", "text": "gamma"}},
        {"type": "response_item", "payload": reasoning("gamma", "ENC-B")},  # line 8: encrypted
        {"type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "<think>hidden plan</think>Done."}]}},
        {
            "type": "compacted",
            "payload": {
                "message": "summary of the work so far",
                "replacement_history": [user, reasoning("alpha\n\nbeta"), reasoning("gamma", "ENC-B"), reasoning("delta", "ENC-C")],
            },
        },  # line 10
        {"type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go on"}]}},
        {"type": "response_item", "payload": {"type": "hologram_call", "result": "..."}},  # line 12: a type no reader knows (image_generation_call is read now)
        {"type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]}},  # line 13
    ]
    return b"".join(json.dumps(x).encode() + b"\n" for x in lines)


def test_compacted_replacement_history_follows_the_live_rules():
    data = compacted_rollout()
    doc = ADAPTER.load(data, "c.jsonl")
    [traj] = doc.trajectories
    assert ADAPTER.dump(doc, doc.trajectories) == data
    reasoning = [p for s in traj.steps for p in s.reasoning]
    assert [p.text for p in reasoning] == ["alpha\n\nbeta", "gamma", "hidden plan", "delta"]
    assert [p.write_back for p in reasoning] == [WriteBack.IN_PLACE, WriteBack.OPAQUE, WriteBack.IN_PLACE, WriteBack.OPAQUE]
    # the live item, its echo and its copy in the replacement history are one part
    assert [s.path[0] for s in reasoning[0].ref.sites] == [3, 2, 9]
    assert reasoning[1].ref.drop == ((7,), (6,), (9, "payload", "replacement_history", 2))
    assert [p.label for p in traj.steps[1].parts if p.kind == "observation"] == ["compact_summary", "user"]
    assert len(traj.steps) == 3  # the refusal after "go on" is a turn of its own
    assert [p.text for s in traj.steps[1:] for p in s.parts if p.kind == "action"] == ["Done.", ""]

    for opaque in (OpaqueEdits.DROP, OpaqueEdits.KEEP):
        results = compress_trajectories(doc.trajectories, Settings(parse_variant("delete-all")), None, RegexTokenizer())
        wrote = ADAPTER.write(doc, [r.compressed for r in results], opaque=opaque)
        out = records(wrote.data)
        history = [r for r in out if r["type"] == "compacted"][0]["payload"]["replacement_history"]
        texts = [p.text for s in wrote.written[0].steps for p in s.reasoning]
        assert history[1]["summary"][0]["text"] == ""  # in-place copy edited with its live item
        assert out[2]["payload"]["text"] == out[3]["payload"]["summary"][0]["text"] == ""
        assert out[8 if opaque is OpaqueEdits.KEEP else 6]["payload"]["content"][0]["text"] == "<think></think>Done."
        if opaque is OpaqueEdits.DROP:
            assert len(out) == 13 - 2  # the encrypted line and its echo
            assert [h.get("encrypted_content") for h in history] == [None, None]  # both encrypted copies left the list
            assert texts == ["", "", "", ""]
        else:
            assert len(out) == 13
            assert [h.get("encrypted_content") for h in history] == [None, None, "ENC-B", "ENC-C"]
            assert texts == ["", "gamma", "", "delta"]


def test_unread_items_and_text_are_reported_with_their_line():
    doc = ADAPTER.load(compacted_rollout(), "c.jsonl")
    assert [(u.line, u.field) for u in doc.unrecognised] == [(12, "payload"), (13, "payload.content[0]")]
    assert "'hologram_call'" in doc.unrecognised[0].what and "'refusal'" in doc.unrecognised[1].what


def test_real_rollout_has_nothing_unrecognised():
    realdata("codex_rollout")
    assert ADAPTER.load(REAL.read_bytes(), str(REAL)).unrecognised == []


def test_items_with_only_encrypted_content_are_counted_in_a_warning():
    lines = [
        {"type": "session_meta", "payload": {"id": "s"}},
        {"type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}},
        {"type": "response_item", "payload": {"type": "reasoning", "summary": [], "content": None, "encrypted_content": "E1"}},
        {"type": "response_item", "payload": {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c"}},
    ]
    doc = ADAPTER.load(b"".join(json.dumps(x).encode() + b"\n" for x in lines), "r.jsonl")
    assert doc.trajectories[0].steps[0].reasoning == ()
    assert doc.warnings == ["r.jsonl: 1 reasoning items hold only encrypted_content (no summary text): nothing there to score or prune"]


def test_tool_search_items_are_a_call_and_its_output_so_steps_do_not_merge():
    """Newer Codex CLIs log tool_search_call / tool_search_output: the output is an
    observation (its tools as JSON), so the model items after it start a new step."""
    lines = [
        {"type": "session_meta", "payload": {"id": "s"}},
        {"type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "find the deploy tool"}]}},
        {"type": "response_item", "payload": {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Search for a tool first."}], "content": None}},
        {"type": "response_item", "payload": {"type": "tool_search_call", "call_id": "ts_1", "arguments": {"query": "deploy"}}},
        {"type": "response_item", "payload": {"type": "tool_search_output", "call_id": "ts_1", "status": "completed", "execution": "server", "tools": [{"name": "deploy"}]}},
        {"type": "response_item", "payload": {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Now call it."}], "content": None}},
        {"type": "response_item", "payload": {"type": "function_call", "name": "deploy", "arguments": "{}", "call_id": "c_2"}},
    ]
    doc = ADAPTER.load(b"".join(json.dumps(x).encode() + b"\n" for x in lines), "r.jsonl")
    assert doc.unrecognised == []
    [traj] = doc.trajectories
    assert [[(p.kind, p.label) for p in s.parts] for s in traj.steps] == [
        [("reasoning", "reasoning"), ("action", "tool_call:tool_search_call"), ("observation", "tool_result")],
        [("reasoning", "reasoning"), ("action", "tool_call:deploy")],
    ]
    assert traj.steps[0].parts[2].text == '[{"name": "deploy"}]'
