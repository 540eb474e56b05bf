"""OpenAI Responses item lists and logs (``openai-responses``): detection, byte-exact round
trips, reasoning_text and summaries edited together, encrypted items dropped with the ids that
point to them, and history held by the server said so."""

from __future__ import annotations

import json

import pytest

from format_helpers import REALDATA, run_cli
from iclr_cli.compress import Settings, compress_trajectories
from iclr_cli.formats import registry
from iclr_cli.formats.base import OpaqueEdits
from iclr_cli.formats.adapters.codex import ADAPTER as CODEX
from iclr_cli.formats.adapters.openai_responses import ADAPTER
from iclr_cli.policies import parse_variant
from iclr_cli.scoring.fake import RegexTokenizer

THINK_1 = "The user wants two cities.\n\nCall get_weather for Tokyo first.\n\nThen for Paris.\n\nThen compare them."
THINK_2 = "Tokyo is sunny.\n\nNow Paris.\n\nSame tool.\n\nKeep the units."

# what the Agents SDK's result.to_input_list() holds after a run against a local server
# (raw reasoning_text; the second item's summary repeats its text, as Ollama writes it)
AGENTS_SDK = [
    {"content": "What is the weather in Tokyo and Paris?", "role": "user"},
    {"id": "rs_68a1f0c2", "summary": [], "type": "reasoning", "content": [{"text": THINK_1, "type": "reasoning_text"}]},
    {"arguments": "{\"city\":\"Tokyo\"}", "call_id": "call_1", "name": "get_weather", "type": "function_call", "id": "fc_68a1f0c3", "status": "completed"},
    {"call_id": "call_1", "output": "sunny, 24C", "type": "function_call_output"},
    {"id": "rs_68a1f0c4", "summary": [{"text": THINK_2, "type": "summary_text"}], "type": "reasoning", "content": [{"text": THINK_2, "type": "reasoning_text"}]},
    {"arguments": "{\"city\":\"Paris\"}", "call_id": "call_2", "name": "get_weather", "type": "function_call", "id": "fc_68a1f0c5", "status": "completed"},
    {"call_id": "call_2", "output": "rain, 14C", "type": "function_call_output"},
    {"id": "msg_68a1f0c6", "content": [{"annotations": [], "text": "Tokyo: sunny, 24C. Paris: rain, 14C.", "type": "output_text", "logprobs": []}], "role": "assistant", "status": "completed", "type": "message"},
]

# OpenAI's own API with store: false: encrypted reasoning, a summary, item ids
ENCRYPTED = [
    {"role": "user", "content": [{"type": "input_text", "text": "Rename the file, then list the folder."}]},
    {"type": "reasoning", "id": "rs_a", "summary": [{"type": "summary_text", "text": "**Renaming**\n\nUse mv.\n\nCheck the name.\n\nThen ls."}], "encrypted_content": "gAAAAB-a"},
    {"type": "function_call", "id": "fc_a", "call_id": "call_a", "name": "shell", "arguments": "{\"cmd\": \"mv a b\"}"},
    {"type": "function_call_output", "call_id": "call_a", "output": ""},
    {"type": "reasoning", "id": "rs_b", "summary": [{"type": "summary_text", "text": "**Listing**\n\nRun ls.\n\nShow it.\n\nDone after."}], "encrypted_content": "gAAAAB-b"},
    {"type": "function_call", "id": "fc_b", "call_id": "call_b", "name": "shell", "arguments": "{\"cmd\": \"ls\"}"},
    {"type": "function_call_output", "call_id": "call_b", "output": "b"},
]


def dumps(value) -> bytes:
    return json.dumps(value, indent=2, ensure_ascii=False).encode() + b"\n"


def jsonl(records) -> bytes:
    return b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in records)


SHAPES = {
    "item-list.json": dumps(AGENTS_SDK),
    "request.json": dumps({"model": "gpt-5", "instructions": "You are a weather bot.", "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}], "input": AGENTS_SDK[:7], "store": False}),
    "response.json": dumps({"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-5", "output": AGENTS_SDK[1:3], "usage": {"input_tokens": 10, "output_tokens": 5}}),
    "pairs.jsonl": jsonl([{"request": {"model": "gpt-5", "input": AGENTS_SDK[:1]}, "response": {"object": "response", "output": AGENTS_SDK[1:3]}},
                          {"request": {"model": "gpt-5", "input": AGENTS_SDK[:4]}, "response": {"object": "response", "output": AGENTS_SDK[4:6]}}]),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_every_shape_is_detected_and_round_trips_byte_for_byte(name, tmp_path, capsys):
    path = tmp_path / name
    path.write_bytes(SHAPES[name])
    assert registry.detect(SHAPES[name], name) is ADAPTER
    out = tmp_path / f"none-{name}"
    code, _, err = run_cli(capsys, "prune", str(path), "--variant", "none", "--strict", "--model", "fake", "-o", str(out))
    assert code == 0, err
    assert out.read_bytes() == SHAPES[name]
    doc = ADAPTER.load(SHAPES[name], name)
    assert sum(len(t.steps) for t in doc.trajectories) >= 1 and not doc.unrecognised


def test_chat_messages_anthropic_and_codex_files_are_not_taken():
    chat = dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    anthropic = dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": [{"type": "thinking", "thinking": "x", "signature": "s"}, {"type": "text", "text": "hello"}]}])
    codex = jsonl([{"timestamp": "t", "type": "session_meta", "payload": {"id": "s"}}, {"timestamp": "t", "type": "response_item", "payload": AGENTS_SDK[2]}])
    assert registry.detect(chat, "c.json").name == "openai"
    assert registry.detect(anthropic, "a.json").name == "anthropic"
    assert registry.detect(codex, "r.jsonl").name == "codex"


def test_reasoning_text_is_pruned_in_place_and_a_summary_of_the_same_text_with_it(tmp_path, capsys):
    path = tmp_path / "run.json"
    path.write_bytes(SHAPES["item-list.json"])
    code, _, err = run_cli(capsys, "prune", str(path), "--model", "fake", "--strict", "-o", str(tmp_path / "out.json"))
    assert code == 0, err
    out = json.loads((tmp_path / "out.json").read_text())
    assert [i.get("type") for i in out] == [i.get("type") for i in AGENTS_SDK]
    first, second = out[1]["content"][0]["text"], out[4]["content"][0]["text"]
    assert first.count("[SKIP]") == 3 and second.count("[SKIP]") == 3
    assert out[4]["summary"] == [{"text": second, "type": "summary_text"}]
    # nothing but reasoning changed
    for before, after in zip(AGENTS_SDK, out):
        if before.get("type") != "reasoning":
            assert before == after


def test_a_dropped_encrypted_item_takes_the_ids_that_point_to_it():
    doc = ADAPTER.load(dumps(ENCRYPTED), "enc.json")
    results = compress_trajectories(doc.trajectories, Settings(parse_variant("delete-all")), None, RegexTokenizer())
    dropped = json.loads(ADAPTER.dump(doc, [r.compressed for r in results], opaque=OpaqueEdits.DROP))
    # no reasoning item left, and no fc_ id whose rs_ item is gone; call_id still pairs results
    assert [i.get("type") for i in dropped] == [None, "function_call", "function_call_output", "function_call", "function_call_output"]
    assert [("id" in i, i.get("call_id")) for i in dropped if i.get("type") == "function_call"] == [(False, "call_a"), (False, "call_b")]
    assert [i for i in dropped if i.get("type") == "function_call_output"] == [ENCRYPTED[3], ENCRYPTED[6]]
    kept = ADAPTER.dump(doc, [r.compressed for r in results], opaque=OpaqueEdits.KEEP)
    assert kept == dumps(ENCRYPTED)


def test_only_the_dropped_turn_loses_its_ids():
    doc = ADAPTER.load(dumps(ENCRYPTED), "enc.json")
    (traj,) = doc.trajectories
    edited = traj.with_steps([traj.steps[0].with_reasoning(["[SKIP]"]), traj.steps[1]])
    out = json.loads(ADAPTER.dump(doc, [edited], opaque=OpaqueEdits.DROP))
    assert [i.get("id") for i in out] == [None, None, None, "rs_b", "fc_b", None]


def test_server_held_history_is_said_and_not_pretended_pruned(tmp_path, capsys):
    body = {"model": "gpt-5", "previous_response_id": "resp_abc", "input": [AGENTS_SDK[3], *AGENTS_SDK[4:7]]}
    path = tmp_path / "continued.json"
    path.write_bytes(dumps(body))
    code, _, err = run_cli(capsys, "prune", str(path), "--model", "fake", "-o", str(tmp_path / "out.json"))
    assert code == 0, err
    assert "held by the server (previous_response_id resp_abc" in err and "the history on the server is not" in err


def test_unknown_item_types_are_reported_and_strict_refuses(tmp_path, capsys):
    items = [*AGENTS_SDK[:4], {"type": "future_call", "id": "x_1", "payload": "?"}, *AGENTS_SDK[4:]]
    path = tmp_path / "future.json"
    path.write_bytes(dumps(items))
    doc = ADAPTER.load(path.read_bytes(), "future.json")
    assert [u.field for u in doc.unrecognised] == ["[4]"]
    code, _, err = run_cli(capsys, "prune", str(path), "--variant", "none", "--strict", "--model", "fake", "-o", str(tmp_path / "o.json"))
    assert code == 2 and "future_call" in err


def test_codex_rollout_items_read_alike_as_a_responses_item_list(tmp_path, capsys):
    """The items Codex logged (a real rollout) as the item list it sends: the same reasoning
    as the codex adapter reads, and a byte-exact round trip."""
    rollout = REALDATA / "codex_rollout" / "agentcmd_rollout-2025-09-24T20-12-23.jsonl"
    if not rollout.is_file():
        pytest.skip(f"real rollout not available at {rollout}")
    items = [r["payload"] for r in map(json.loads, rollout.read_text().splitlines()) if r["type"] == "response_item"]
    data = dumps(items)
    assert registry.detect(data, "items.json") is ADAPTER
    mine = [p.text for t in ADAPTER.load(data, "items.json").trajectories for s in t.steps for p in s.reasoning]
    codex = [p.text for t in CODEX.load(rollout.read_bytes(), rollout.name).trajectories for s in t.steps for p in s.reasoning]
    assert mine == codex and len(mine) >= 10
    path = tmp_path / "items.json"
    path.write_bytes(data)
    code, _, err = run_cli(capsys, "prune", str(path), "--variant", "none", "--strict", "--model", "fake", "-o", str(tmp_path / "o.json"))
    assert code == 0, err
    assert (tmp_path / "o.json").read_bytes() == data
