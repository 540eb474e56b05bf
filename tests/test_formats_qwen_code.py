"""Qwen Code sessions (iclr_cli/formats/adapters/qwen_code.py): the field case of the fifth round
(../shared/cases/turn5/04a-qwen-code-chat.jsonl), our own sample with a rewind, a compression
checkpoint and a fragmented message, signed thoughts under the provider rule, bad input, and
files of the other agent logs read with the wrong --format."""

from __future__ import annotations

import json

import pytest

from format_helpers import SAMPLES, field_case, run_cli
from iclr_cli.blocks import SKIP
from iclr_cli.errors import InputError
from iclr_cli.formats import registry
from iclr_cli.formats.adapters.claude_code import ADAPTER as CLAUDE_CODE
from iclr_cli.formats.adapters.qwen_code import ADAPTER
from iclr_cli.formats.sniff import Head

SAMPLE = SAMPLES / "qwen_code_session.jsonl"


def case():
    return field_case("04a-qwen-code-chat.jsonl", "turn5")


def prune(capsys, tmp_path, src, *args: str) -> bytes:
    out = tmp_path / "out.jsonl"
    code, stdout, err = run_cli(capsys, "prune", str(src), "--model", "fake", "-o", str(out), "-q", *args)
    assert (code, stdout) == (0, ""), err
    return out.read_bytes()


def records(data: bytes) -> list[dict]:
    return [json.loads(line) for line in data.splitlines() if line.strip()]


# -- sniffing ------------------------------------------------------------------------------------

def test_the_case_and_the_sample_are_read_as_qwen_code_and_not_as_claude_code():
    for path in (case(), SAMPLE):
        data = path.read_bytes()
        found = registry.detect_why(data, str(path))
        assert found.adapter.name == "qwen_code" and found.others == ()
        assert CLAUDE_CODE.sniff(Head.of(data)) is None


def test_a_first_line_longer_than_the_head_is_judged_by_its_keys():
    line = json.dumps({"uuid": "x", "parentUuid": None, "sessionId": "s", "type": "user",
                       "message": {"role": "user", "parts": [{"text": "a" * 70_000}]}}, separators=(",", ":")).encode()
    head = line[:65536]
    assert ADAPTER.sniff(Head.of(head)) is not None
    assert CLAUDE_CODE.sniff(Head.of(head)) is None


# -- the field case ------------------------------------------------------------------------------

def test_case_score_reads_the_thought_parts_as_the_reasoning(capsys):
    code, stdout, err = run_cli(capsys, "score", str(case()), "--model", "fake", "-q")
    assert code == 0, err
    rows = [json.loads(line) for line in stdout.splitlines()]
    assert [(r["step"], r["n_blocks"]) for r in rows] == [(0, 4)] * 4 + [(1, 4)] * 4 + [(2, 3)] * 3
    assert {r["trajectory"] for r in rows} == {"5d0e9c7a-2b41-4f3e-9a6d-1c8b7e2f4a90"}
    assert rows[0]["text"].startswith("The export formats timestamps in the server's local zone")
    assert rows[-1]["text"] == "Moving the column to timestamptz would be cleaner, but it needs a migration and a review."


def test_case_steps_calls_and_results():
    data = case().read_bytes()
    [traj] = ADAPTER.load(data, "case").trajectories
    assert traj.meta == {"format": "qwen_code", "model": "qwen3-coder-plus"}
    assert [p.text for p in traj.prompt][0].startswith("The nightly CSV export shows every timestamp")
    labels = [[(p.kind, p.label, p.call_id) for p in s.parts] for s in traj.steps]
    assert labels == [
        [("reasoning", "reasoning", None), ("action", "tool_call:read_file", "call_7f3a01"), ("observation", "tool_result", "call_7f3a01")],
        [("reasoning", "reasoning", None), ("action", "tool_call:replace", "call_7f3a02"), ("observation", "tool_result", "call_7f3a02")],
        [("reasoning", "reasoning", None), ("action", "assistant", None)],
    ]
    usage = traj.requests[0].usage
    assert (usage.input_tokens, usage.output_tokens, usage.reasoning_tokens) == (5200, 200, 160)


def test_case_delete_all_empties_the_thoughts_and_keeps_calls_and_results_byte_equal(tmp_path, capsys):
    src = case()
    before = src.read_bytes().splitlines(keepends=True)
    after = prune(capsys, tmp_path, src, "--variant", "delete-all").splitlines(keepends=True)
    assert len(after) == len(before)
    assert [i for i, (a, b) in enumerate(zip(before, after)) if a != b] == [1, 3, 5]  # the assistant records only
    for i in (1, 3, 5):
        old, new = json.loads(before[i]), json.loads(after[i])
        assert {k: v for k, v in new.items() if k != "message"} == {k: v for k, v in old.items() if k != "message"}
        # qwen3-coder-plus is a plain provider: an emptied thought stays as an empty part
        assert new["message"]["parts"][0] == {"text": "", "thought": True}
        assert new["message"]["parts"][1:] == old["message"]["parts"][1:]  # the call, or the answer, as it was


def test_case_default_variant_writes_skip_blocks(tmp_path, capsys):
    src = case()
    old = records(src.read_bytes())
    new = records(prune(capsys, tmp_path, src))
    for a, b in zip(old, new):
        if a["type"] != "assistant":
            assert a == b
            continue
        thought = b["message"]["parts"][0]["text"]
        assert SKIP in thought and thought != a["message"]["parts"][0]["text"]
        assert b["message"]["parts"][1:] == a["message"]["parts"][1:]


@pytest.mark.parametrize("path", ["case", "sample"])
def test_unedited_write_back_is_byte_exact(path):
    src = case() if path == "case" else SAMPLE
    data = src.read_bytes()
    doc = ADAPTER.load(data, str(src))
    assert ADAPTER.dump(doc, doc.trajectories) == data


# -- our sample: rewind, compression, fragments -------------------------------------------------

def test_sample_reads_the_active_chain_only():
    [traj] = ADAPTER.load(SAMPLE.read_bytes(), "s").trajectories
    reasoning = [[p.text.split("\n")[0] for p in s.reasoning] for s in traj.steps]
    assert reasoning == [
        ["The report counts items twice when a product sits in two warehouses."],
        ["The query joins stock without grouping by product, which explains the double count."],
        ["The CSV export calls the report query through a helper, so the fix already covers it."],  # a3 was rewound
    ]
    step1 = [(p.kind, p.label) for p in traj.steps[1].parts]
    assert step1 == [("reasoning", "reasoning"), ("action", "assistant"), ("observation", "compact_summary"), ("observation", "user")]
    # the two fragments of a4 are one step: its thought, then its answer
    assert [p.label for p in traj.steps[2].parts] == ["reasoning", "assistant"]
    assert [r.usage.input_tokens for r in traj.requests] == [4100, 4400, 1300]


def test_sample_delete_all_edits_the_compression_copy_alike_and_leaves_the_dead_branch(tmp_path, capsys):
    before = SAMPLE.read_bytes().splitlines(keepends=True)
    after = prune(capsys, tmp_path, SAMPLE, "--variant", "delete-all").splitlines(keepends=True)
    assert [i for i, (a, b) in enumerate(zip(before, after)) if a != b] == [1, 4, 8, 10]
    new = [json.loads(line) for line in after]
    assert new[4]["message"]["parts"][0] == {"text": "", "thought": True}
    assert new[8]["systemPayload"]["compressedHistory"][2]["parts"] == new[4]["message"]["parts"]
    assert after[6] == before[6]  # the rewound answer a3 is not read and not written


# -- signatures and the provider rule ------------------------------------------------------------

def _signed(model: str) -> bytes:
    lines = [
        {"uuid": "u", "parentUuid": None, "sessionId": "s1", "type": "user", "message": {"role": "user", "parts": [{"text": "Rename the helper."}]}},
        {"uuid": "a", "parentUuid": "u", "sessionId": "s1", "type": "assistant", "model": model, "message": {"role": "model", "parts": [
            {"text": "The helper is used in two modules.\n\nBoth imports need the new name.", "thought": True, "thoughtSignature": "c2lnLXRob3VnaHQ="},
            {"functionCall": {"id": "c1", "name": "edit", "args": {"path": "a.py"}}, "thoughtSignature": "c2lnLWNhbGw="}]}},
        {"uuid": "t", "parentUuid": "a", "sessionId": "s1", "type": "tool_result", "message": {"role": "user", "parts": [
            {"functionResponse": {"id": "c1", "name": "edit", "response": {"output": "ok"}}}]}},
        {"uuid": "b", "parentUuid": "t", "sessionId": "s1", "type": "assistant", "model": model, "message": {"role": "model", "parts": [
            {"text": "Done.", "thought": False}]}},
    ]
    return b"".join(json.dumps(x, separators=(",", ":")).encode() + b"\n" for x in lines)


def test_signed_thought_of_gemini_is_sealed_and_written_back_byte_for_byte(tmp_path, capsys):
    src = tmp_path / "g.jsonl"
    src.write_bytes(_signed("gemini-2.5-pro"))
    assert prune(capsys, tmp_path, src, "--variant", "delete-all") == src.read_bytes()


def test_signed_thought_of_a_plain_provider_is_edited_keeping_its_key_and_the_call_signature(tmp_path, capsys):
    src = tmp_path / "d.jsonl"
    src.write_bytes(_signed("deepseek-reasoner"))
    new = records(prune(capsys, tmp_path, src, "--variant", "delete-all"))
    old = records(src.read_bytes())
    assert new[1]["message"]["parts"][0] == {"text": "", "thought": True, "thoughtSignature": "c2lnLXRob3VnaHQ="}
    assert new[1]["message"]["parts"][1] == old[1]["message"]["parts"][1]  # the call keeps its signature
    assert new[2:] == old[2:]


def test_signed_thought_edited_on_request_loses_its_signature_only(tmp_path, capsys):
    src = tmp_path / "g.jsonl"
    src.write_bytes(_signed("gemini-2.5-pro"))
    new = records(prune(capsys, tmp_path, src, "--variant", "delete-all", "--signed-thinking", "edit"))
    assert new[1]["message"]["parts"] == [{"functionCall": {"id": "c1", "name": "edit", "args": {"path": "a.py"}}, "thoughtSignature": "c2lnLWNhbGw="}]


# -- bad input -----------------------------------------------------------------------------------

def test_a_message_without_parts_names_file_line_and_field(tmp_path, capsys):
    lines = case().read_bytes().splitlines(keepends=True)
    bad = json.loads(lines[3])
    bad["message"] = {"role": "model", "text": "lost its parts"}
    lines[3] = json.dumps(bad).encode() + b"\n"
    src = tmp_path / "bad.jsonl"
    src.write_bytes(b"".join(lines))
    with pytest.raises(InputError) as exc:
        ADAPTER.load(src.read_bytes(), str(src))
    assert (exc.value.line, exc.value.field) == (4, "message.parts")
    assert exc.value.problem == "message has no 'parts' list (a Qwen Code message is a Gemini Content: role and parts)"
    code, _, err = run_cli(capsys, "score", str(src), "--model", "fake", "-q")
    assert code == 2
    assert f"{src}:4: field 'message.parts': message has no 'parts' list" in err


def test_a_line_that_is_not_an_object_is_refused_and_skippable(tmp_path):
    src = tmp_path / "bad.jsonl"
    src.write_bytes(case().read_bytes() + b"[1, 2]\n")
    with pytest.raises(InputError) as exc:
        ADAPTER.load(src.read_bytes(), str(src))
    assert (exc.value.line, exc.value.problem) == (7, "line is not a JSON object (expected one Qwen Code chat record per line)")
    doc = ADAPTER.load(src.read_bytes(), str(src), skip_bad_lines=True)
    assert len(doc.trajectories[0].steps) == 3 and ADAPTER.dump(doc, doc.trajectories) == src.read_bytes()


def test_a_file_of_bookkeeping_only_is_an_input_error():
    line = {"uuid": "s", "parentUuid": None, "sessionId": "x", "type": "system", "subtype": "ui_telemetry", "systemPayload": {}}
    with pytest.raises(InputError, match="holds no user or assistant message"):
        ADAPTER.load(json.dumps(line).encode() + b"\n", "t.jsonl")


# -- another agent's file read with --format: never "a broken file of this one" ------------------

AGENT_SAMPLES = {
    "claude_code": SAMPLES / "claude_code_session.jsonl",
    "pi": SAMPLES / "pi_session.jsonl",
    "gemini-cli": SAMPLES / "gemini_cli_session.jsonl",
    "codex": SAMPLES / "codex_rollout.jsonl",
    "qwen_code": SAMPLE,
}


@pytest.mark.parametrize("owner", sorted(AGENT_SAMPLES))
@pytest.mark.parametrize("forced", sorted(AGENT_SAMPLES))
def test_another_agents_file_is_said_to_look_like_its_own_format(capsys, owner, forced):
    path = AGENT_SAMPLES[owner]
    assert registry.detect(path.read_bytes(), str(path)).name == owner
    code, _, err = run_cli(capsys, "score", str(path), "--model", "fake", "-q", "--format", forced)
    if forced == owner:
        assert code == 0, err
        return
    assert code == 2
    assert f"{path}: does not look like {forced} (" in err
    assert f"it looks like {owner} (" in err and f"use --format {owner}" in err


def test_the_case_read_as_claude_code_or_gemini_cli_points_to_qwen_code(capsys):
    src = case()
    for forced, reason in (("claude_code", "field 'message.content': message has no 'content'"),
                           ("gemini-cli", "no Gemini CLI session record or message found")):
        code, _, err = run_cli(capsys, "score", str(src), "--model", "fake", "-q", "--format", forced)
        assert code == 2
        assert f"does not look like {forced} (" in err
        assert "it looks like qwen_code (Qwen Code chat records (uuid/parentUuid with a Gemini Content message)): use --format qwen_code" in err
        assert reason in err


def test_formats_lists_qwen_code(capsys):
    code, out, _ = run_cli(capsys, "formats")
    assert code == 0
    assert "qwen_code" in out and "Qwen Code sessions" in out


def test_usage_reads_both_conventions_of_candidates_token_count():
    from iclr_cli.formats.adapters.qwen_code import _usage

    # Qwen Code's OpenAI converter: candidates = completion_tokens, thoughts included (total = prompt + candidates)
    qwen = _usage({"promptTokenCount": 100, "candidatesTokenCount": 30, "thoughtsTokenCount": 30, "totalTokenCount": 130, "cachedContentTokenCount": 0})
    assert (qwen.input_tokens, qwen.output_tokens, qwen.cache_read_tokens, qwen.reasoning_tokens) == (100, 30, None, 30)
    # Gemini's: thoughts counted apart from the candidates
    gemini = _usage({"promptTokenCount": 5200, "candidatesTokenCount": 40, "thoughtsTokenCount": 160, "cachedContentTokenCount": 4096})
    assert (gemini.input_tokens, gemini.output_tokens, gemini.cache_read_tokens) == (5200, 200, 4096)
    assert _usage({"candidatesTokenCount": 3}) is None


def test_messages_off_the_resumed_chain_are_said_with_their_lines():
    """A record whose parentUuid is null mid-file starts the chain Qwen Code resumes: the turns
    before it are not scored, and the warning names them instead of dropping them unseen."""
    lines = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
    at = max(i for i, r in enumerate(lines) if r.get("type") == "user" and "message" in r and i > 0)
    lines[at]["parentUuid"] = None
    doc = ADAPTER.load("".join(json.dumps(r) + "\n" for r in lines).encode(), "q.jsonl")
    [said] = [w for w in doc.warnings if "off the conversation Qwen Code resumes" in w]
    before = [i + 1 for i, r in enumerate(lines[:at]) if r.get("type") in ("user", "assistant", "tool_result") and "message" in r]
    assert before and all(str(n) in said.rsplit(":", 1)[1] for n in before)
