"""LiteLLM spend logs: each row is its request plus its reply, the request's two copies edited
alike, rows without a stored conversation passed through, a row whose copies differ refused."""

import copy
import json

import pytest

from format_helpers import SAMPLES, run_cli
from iclr_cli.errors import InputError
from iclr_cli.formats import registry
from iclr_cli.formats.adapters.litellm_spend import ADAPTER

SAMPLE = SAMPLES / "litellm_spend_logs.jsonl"
THINK = "First look.\n\nThen act."


def rows():
    return [json.loads(line) for line in SAMPLE.read_bytes().splitlines()]


def jsonl(values) -> bytes:
    return b"".join(json.dumps(v, separators=(",", ":")).encode() + b"\n" for v in values)


def test_sample_rows_are_trajectories_with_the_reply_last():
    data = SAMPLE.read_bytes()
    assert registry.detect(data, "s.jsonl").name == "litellm-spend"
    doc = ADAPTER.load(data, "s.jsonl")
    assert [t.id for t in doc.trajectories] == ["req-rel-001", "req-rel-002"]
    first, second = doc.trajectories
    assert [p.label for p in first.prompt] == ["system", "tools", "user"]  # the request body's tools
    assert len(first.steps) == 1 and first.steps[0].parts[-1].label == "tool_call:read_file"
    assert len(second.steps) == 2 and second.steps[1].parts[-1].text.startswith("build/VERSION is generated")
    # the first reply, repeated in row 2's request, is one part with a site in each copy
    sites = [s.path[1:] for s in second.steps[0].reasoning[0].ref.sites]
    assert sites == [("messages", 2, "thinking_blocks", 0, "thinking"), ("messages", 2, "reasoning_content"),
                     ("proxy_server_request", "messages", 2, "thinking_blocks", 0, "thinking"), ("proxy_server_request", "messages", 2, "reasoning_content")]
    assert doc.warnings == ["s.jsonl: 1 spend-log row holds no stored conversation (store_prompts_in_spend_logs off, or not a chat call): passed through unscored"]


def test_delete_all_edits_every_copy_and_keeps_the_embedding_row(tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    # anthropic/claude-*: the signed blocks are sealed by default, every copy of them kept
    code, _, err = run_cli(capsys, "prune", str(SAMPLE), "--variant", "delete-all", "--model", "fake", "-o", str(out))
    assert code == 0 and out.read_bytes() == SAMPLE.read_bytes(), err
    code, _, err = run_cli(capsys, "prune", str(SAMPLE), "--variant", "delete-all", "--model", "fake", "--signed-thinking", "edit", "-o", str(out))
    assert code == 0, err
    want = rows()
    for msg in (want[0]["response"]["choices"][0]["message"], want[1]["messages"][2], want[1]["proxy_server_request"]["messages"][2], want[1]["response"]["choices"][0]["message"]):
        msg["reasoning_content"] = msg["thinking_blocks"][0]["thinking"] = ""
        del msg["thinking_blocks"][0]["signature"]
    assert out.read_bytes() == jsonl(want)
    assert out.read_bytes().splitlines()[2] == SAMPLE.read_bytes().splitlines()[2]


def test_the_get_spend_logs_list_and_page_are_read_alike():
    listing = json.dumps(rows(), indent=2).encode()
    page = json.dumps({"data": rows(), "total": 3}).encode()
    for data in (listing, page):
        doc = ADAPTER.load(data, "l.json")
        assert [t.id for t in doc.trajectories] == ["req-rel-001", "req-rel-002"]
        assert ADAPTER.dump(doc, doc.trajectories) == data


def test_copies_that_differ_are_refused_naming_the_field():
    bad = rows()[:2]
    bad[1]["proxy_server_request"]["messages"][2]["reasoning_content"] = "something else"
    bad[1]["proxy_server_request"]["messages"][2]["thinking_blocks"][0]["thinking"] = "something else"
    with pytest.raises(InputError) as exc:
        ADAPTER.load(jsonl(bad), "x.jsonl")
    assert exc.value.line == 2 and exc.value.field == "proxy_server_request.messages"
    assert "step 0" in exc.value.problem


def test_a_body_stored_as_a_json_string_is_refused():
    row = copy.deepcopy(rows()[0])
    row["response"] = json.dumps(row["response"])
    with pytest.raises(InputError) as exc:
        ADAPTER.load(jsonl([row]), "x.jsonl")
    assert exc.value.field == "response" and "JSON string" in exc.value.problem


def test_request_only_in_the_proxy_copy_is_read_from_there():
    row = copy.deepcopy(rows()[1])
    row["messages"] = {}
    doc = ADAPTER.load(jsonl([row]), "x.jsonl")
    [traj] = doc.trajectories
    assert len(traj.steps) == 2
    assert traj.steps[0].reasoning[0].ref.sites[0].path[1:3] == ("proxy_server_request", "messages")


def test_reasoning_content_rows_round_trip_with_none(tmp_path, capsys):
    row = {"request_id": "r1", "call_type": "completion", "messages": [{"role": "user", "content": "hi"}],
           "response": {"choices": [{"message": {"role": "assistant", "content": "ok", "reasoning_content": THINK}}]},
           "proxy_server_request": {"messages": [{"role": "user", "content": "hi"}]}}
    src = tmp_path / "r.jsonl"
    src.write_bytes(jsonl([row]))
    out = tmp_path / "o.jsonl"
    code, _, err = run_cli(capsys, "prune", str(src), "--variant", "none", "--model", "fake", "--strict", "-o", str(out))
    assert code == 0, err
    assert out.read_bytes() == src.read_bytes()
