"""Vercel AI SDK histories (iclr_cli/formats/adapters/ai_sdk.py): UIMessage[] as useChat keeps it,
ModelMessage[] as response.messages gives it, Roo Code's {version: 2, messages} envelope;
signed reasoning under the provider rule table."""

from __future__ import annotations

import copy
import json

import pytest

from format_helpers import SAMPLES, field_case, run_cli, summary_value
from iclr_cli.blocks import SKIP
from iclr_cli.errors import InputError
from iclr_cli.formats import registry
from iclr_cli.trajectory import WriteBack

THINK = "First I check the parser.\n\nThen I check the writer.\n\nThe writer is wrong."
SIG = "EqQBCkYIBxgCKkAsignatureOfOurOwn"
MODEL_SAMPLE = SAMPLES / "ai_sdk_model_messages.json"


def case():
    return field_case("06-vercel-uimessages.json", "turn5")


def prune(capsys, tmp_path, src, *args: str) -> tuple[bytes, str]:
    out = tmp_path / "out.json"
    code, stdout, err = run_cli(capsys, "prune", str(src), "--model", "fake", "-o", str(out), "--force", *args)
    assert (code, stdout) == (0, ""), err
    return out.read_bytes(), err


def write(tmp_path, value, name="h.json") -> object:
    path = tmp_path / name
    path.write_text(json.dumps(value, indent=2))
    return path


def ui_history(reasoning: dict, model: str | None = None) -> list:
    assistant = {"id": "a1", "role": "assistant", "parts": [{"type": "step-start"}, reasoning,
                 {"type": "tool-grep", "toolCallId": "c1", "state": "output-available", "input": {"q": "x"}, "output": "none"},
                 {"type": "step-start"}, {"type": "text", "text": "Done.", "state": "done"}]}
    if model:
        assistant["metadata"] = {"model": model}
    return [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Fix it."}]}, assistant]


# -- the field case: UIMessages with Anthropic-signed reasoning ---------------------------------

def test_case_is_read_as_ui_messages_one_step_per_step_start():
    src = case()
    det = registry.detect_why(src.read_bytes(), str(src))
    assert det.adapter.name == "ai-sdk" and det.match.reason.startswith("AI SDK UIMessages")
    [traj] = registry.get("ai-sdk").load(src.read_bytes(), str(src)).trajectories
    assert [(p.kind, p.label) for p in traj.prompt] == [("prompt", "user")]
    assert [[(p.kind, p.label, p.call_id) for p in s.parts] for s in traj.steps] == [
        [("reasoning", "reasoning", None), ("action", "tool_call:readFile", "toolu_01Ab3Cd4Ef5Gh6"), ("observation", "tool_result", "toolu_01Ab3Cd4Ef5Gh6")],
        [("reasoning", "reasoning", None), ("action", "tool_call:editFile", "toolu_01Ij7Kl8Mn9Op0"), ("observation", "tool_result", "toolu_01Ij7Kl8Mn9Op0")],
        [("reasoning", "reasoning", None), ("action", "assistant", None)],
    ]
    assert all(s.parts[0].write_back is WriteBack.SIGNED for s in traj.steps)
    assert traj.steps[0].parts[1].text == '{"path": "export/writer.py"}'
    assert traj.meta["model"] == "claude-sonnet-4-5" and traj.meta["provider"] == "anthropic"


@pytest.mark.parametrize("variant", ["delete-all", "iclr", "none"])
def test_case_signed_reasoning_is_sealed_by_default_and_written_back_byte_for_byte(tmp_path, capsys, variant):
    src = case()
    out, err = prune(capsys, tmp_path, src, "--variant", variant)
    assert out == src.read_bytes()
    if variant != "none":
        assert summary_value(err, "reasoning parts left sealed (provider rule)") == "3 (anthropic signed 3)"
        assert "3 reasoning parts signed for anthropic left sealed" in err


def test_case_delete_all_with_signed_thinking_edit_removes_the_reasoning_parts_only(tmp_path, capsys):
    src = case()
    before = json.loads(src.read_bytes())
    out, _ = prune(capsys, tmp_path, src, "--variant", "delete-all", "--signed-thinking", "edit")
    after = json.loads(out)
    expected = copy.deepcopy(before)
    expected[1]["parts"] = [p for p in before[1]["parts"] if p["type"] != "reasoning"]
    assert after == expected


def test_case_iclr_with_signed_thinking_edit_skips_blocks_and_drops_each_signature(tmp_path, capsys):
    src = case()
    before = json.loads(src.read_bytes())
    out, err = prune(capsys, tmp_path, src, "--signed-thinking", "edit")
    after = json.loads(out)
    assert before[0] == after[0]
    for old, new in zip(before[1]["parts"], after[1]["parts"], strict=True):
        if old["type"] != "reasoning":
            assert new == old
            continue
        assert new["providerMetadata"] == {"anthropic": {}}  # the signature no longer matches: gone
        assert SKIP in new["text"] and new["text"] != old["text"]
        assert {k: v for k, v in new.items() if k not in ("text", "providerMetadata")} == {k: v for k, v in old.items() if k not in ("text", "providerMetadata")}
    assert summary_value(err, "reasoning blocks") == "11"


# -- UIMessages: other providers ----------------------------------------------------------------

def test_anthropic_signature_on_a_plain_model_is_edited_and_kept(tmp_path, capsys):
    reasoning = {"type": "reasoning", "text": THINK, "providerMetadata": {"anthropic": {"signature": SIG}}}
    src = write(tmp_path, ui_history(reasoning, model="deepseek-chat"))
    out, _ = prune(capsys, tmp_path, src, "--variant", "delete-all")
    part = json.loads(out)[1]["parts"][1]
    assert part == {"type": "reasoning", "text": "", "providerMetadata": {"anthropic": {"signature": SIG}}}


def test_unsigned_reasoning_is_edited_in_place(tmp_path, capsys):
    src = write(tmp_path, ui_history({"type": "reasoning", "text": THINK, "state": "done"}))
    out, _ = prune(capsys, tmp_path, src)
    before, after = json.loads(src.read_bytes()), json.loads(out)
    assert SKIP in after[1]["parts"][1]["text"]
    after[1]["parts"][1]["text"] = THINK
    assert after == before


def test_openai_item_is_sealed_as_encrypted_and_dropped_on_request(tmp_path, capsys):
    reasoning = {"type": "reasoning", "text": THINK, "providerMetadata": {"openai": {"itemId": "rs_1", "reasoningEncryptedContent": "gAAAA"}}}
    src = write(tmp_path, ui_history(reasoning))
    out, err = prune(capsys, tmp_path, src, "--variant", "delete-all")
    assert out == src.read_bytes()
    assert summary_value(err, "reasoning parts left sealed (provider rule)") == "1 (openai encrypted 1)"
    out, _ = prune(capsys, tmp_path, src, "--variant", "delete-all", "--encrypted-reasoning", "drop")
    assert [p["type"] for p in json.loads(out)[1]["parts"]] == ["step-start", "tool-grep", "step-start", "text"]


@pytest.mark.parametrize(("metadata", "why"), [
    ({"anthropic": {"redactedData": "ZW5j"}}, "redacted by Anthropic"),
    ({"google": {"thoughtSignature": "c2ln"}}, "signed by Gemini"),
])
def test_redacted_and_gemini_signed_reasoning_is_never_edited(tmp_path, capsys, metadata, why):
    src = write(tmp_path, ui_history({"type": "reasoning", "text": THINK, "providerMetadata": metadata}))
    out, err = prune(capsys, tmp_path, src, "--variant", "delete-all", "--signed-thinking", "edit")
    assert out == src.read_bytes()
    assert f"1 reasoning part {why}" in err


def test_pydantic_ai_backend_metadata_follows_its_provider(tmp_path, capsys):
    meta = {"pydantic_ai": {"signature": SIG, "provider_name": "anthropic"}}
    src = write(tmp_path, ui_history({"type": "reasoning", "text": THINK, "providerMetadata": meta}))
    _, err = prune(capsys, tmp_path, src, "--variant", "delete-all")
    assert summary_value(err, "reasoning parts left sealed (provider rule)") == "1 (anthropic signed 1)"
    out, _ = prune(capsys, tmp_path, src, "--signed-thinking", "edit")
    assert json.loads(out)[1]["parts"][1]["providerMetadata"] == {"pydantic_ai": {"provider_name": "anthropic"}}


def test_ai_sdk_4_parts_tool_invocation_and_reasoning_details(tmp_path, capsys):
    history = [{"id": "u", "role": "user", "content": "Fix it.", "parts": [{"type": "text", "text": "Fix it."}]},
               {"id": "a", "role": "assistant", "content": "", "parts": [
                   {"type": "reasoning", "reasoning": THINK, "details": [{"type": "text", "text": THINK}]},
                   {"type": "tool-invocation", "toolInvocation": {"state": "result", "toolCallId": "c9", "toolName": "ls", "args": {"d": "."}, "result": ["a.py"]}}]}]
    # AI SDK 4 UIMessages keep 'content' beside 'parts': read as UIMessages all the same
    src = write(tmp_path, {"id": "chat-7", "messages": history})
    doc = registry.get("ai-sdk").load(src.read_bytes(), str(src))
    [traj] = doc.trajectories
    assert traj.id == "chat-7"
    assert [(p.label, p.text) for p in traj.steps[0].parts[1:]] == [("tool_call:ls", '{"d": "."}'), ("tool_result", '["a.py"]')]
    out, _ = prune(capsys, tmp_path, src)
    part = json.loads(out)["messages"][1]["parts"][0]
    assert SKIP in part["reasoning"] and part["details"] == [{"type": "text", "text": part["reasoning"]}]  # both copies alike
    out, _ = prune(capsys, tmp_path, src, "--variant", "delete-all")
    assert json.loads(out)["messages"][1]["parts"] == history[1]["parts"][1:]


# -- ModelMessages and Roo Code's envelope -------------------------------------------------------

def test_model_sample_read_and_pruned_without_touching_calls_or_roo_fields(tmp_path, capsys):
    det = registry.detect_why(MODEL_SAMPLE.read_bytes(), str(MODEL_SAMPLE))
    assert det.adapter.name == "ai-sdk" and det.match.reason == "AI SDK ModelMessages (tool-call, tool-result)"
    [traj] = registry.get("ai-sdk").load(MODEL_SAMPLE.read_bytes(), "s").trajectories
    assert [[p.label for p in s.parts] for s in traj.steps] == [
        ["reasoning", "tool_call:read_file", "tool_result"], ["reasoning", "tool_call:apply_diff", "tool_result"], ["reasoning", "assistant"]]
    assert traj.steps[1].parts[2].text == '{"ok": true}'
    before = json.loads(MODEL_SAMPLE.read_bytes())
    out, _ = prune(capsys, tmp_path, MODEL_SAMPLE, "--variant", "delete-all")
    after = json.loads(out)
    expected = copy.deepcopy(before)
    for msg in expected["messages"]:
        if msg["role"] == "assistant":
            msg["content"] = [p for p in msg["content"] if p["type"] != "reasoning"]
    assert after == expected


def test_model_sample_unedited_is_byte_identical(tmp_path, capsys):
    out, _ = prune(capsys, tmp_path, MODEL_SAMPLE, "--variant", "none")
    assert out == MODEL_SAMPLE.read_bytes()


def test_roo_encrypted_reasoning_item_is_sealed_and_dropped_on_request(tmp_path, capsys):
    env = {"version": 2, "messages": [
        {"role": "user", "content": "Go.", "ts": 1},
        {"type": "reasoning", "encrypted_content": "gAAAA", "summary": [{"type": "summary_text", "text": THINK}], "ts": 2},
        {"role": "assistant", "content": [{"type": "tool-call", "toolCallId": "c", "toolName": "ls", "input": {}}], "ts": 3},
        {"role": "tool", "content": [{"type": "tool-result", "toolCallId": "c", "toolName": "ls", "output": {"type": "text", "value": "a"}}]}]}
    src = write(tmp_path, env)
    out, err = prune(capsys, tmp_path, src, "--variant", "delete-all")
    assert out == src.read_bytes() and summary_value(err, "reasoning parts left sealed (provider rule)") == "1 (openai encrypted 1)"
    out, _ = prune(capsys, tmp_path, src, "--variant", "delete-all", "--encrypted-reasoning", "drop")
    assert json.loads(out)["messages"] == [env["messages"][0], *env["messages"][2:]]


def test_model_messages_signed_under_two_namespaces_lose_both_on_edit(tmp_path, capsys):
    options = {"bedrock": {"signature": SIG}, "anthropic": {"signature": SIG}}
    history = [{"role": "user", "content": "Go."},
               {"role": "assistant", "content": [{"type": "reasoning", "text": THINK, "providerOptions": options}, {"type": "text", "text": "ok"}]}]
    src = write(tmp_path, history)
    _, err = prune(capsys, tmp_path, src, "--variant", "delete-all")
    assert summary_value(err, "reasoning parts left sealed (provider rule)") == "1 (anthropic signed 1)"
    out, _ = prune(capsys, tmp_path, src, "--signed-thinking", "edit")
    part = json.loads(out)[1]["content"][0]
    assert part["providerOptions"] == {"bedrock": {}, "anthropic": {}} and SKIP in part["text"]


def test_ai_sdk_4_model_message_signature_on_the_part(tmp_path, capsys):
    history = [{"role": "user", "content": "Go."},
               {"role": "assistant", "content": [{"type": "reasoning", "text": THINK, "signature": SIG}, {"type": "tool-call", "toolCallId": "c", "toolName": "ls", "args": {}}]},
               {"role": "tool", "content": [{"type": "tool-result", "toolCallId": "c", "toolName": "ls", "result": "a"}]}]
    src = write(tmp_path, history)
    [traj] = registry.get("ai-sdk").load(src.read_bytes(), str(src)).trajectories
    assert traj.steps[0].parts[0].write_back is WriteBack.SIGNED
    out, _ = prune(capsys, tmp_path, src, "--variant", "delete-all", "--signed-thinking", "edit")
    assert json.loads(out)[1]["content"] == [history[1]["content"][1]]


# -- bad input and listing ------------------------------------------------------------------------

def test_a_message_without_parts_is_named_with_its_line(tmp_path):
    history = ui_history({"type": "reasoning", "text": THINK})
    history.append({"id": "u2", "role": "user", "text": "again"})
    src = write(tmp_path, history)
    with pytest.raises(InputError) as exc:
        registry.get("ai-sdk").load(src.read_bytes(), str(src))
    assert str(exc.value) == f"{src}:42: field '[2]': not a UIMessage: expected an object with a string 'role' and a 'parts' list"


def test_reasoning_without_text_is_an_error_via_the_cli(tmp_path, capsys):
    src = write(tmp_path, ui_history({"type": "reasoning", "text": ["not", "a", "string"]}))
    code, _, err = run_cli(capsys, "prune", str(src), "--model", "fake", "-o", str(tmp_path / "o.json"))
    assert code == 2
    assert f"{src}:21: field '[1].parts[1].text': reasoning part has no string 'text'" in err


def test_a_model_message_part_without_type(tmp_path):
    src = write(tmp_path, [{"role": "user", "content": "Go."}, {"role": "assistant", "content": [{"type": "tool-call", "toolCallId": "c", "toolName": "x", "input": {}}, {"text": "?"}]}])
    with pytest.raises(InputError) as exc:
        registry.get("ai-sdk").load(src.read_bytes(), str(src))
    assert exc.value.field == "[1].content[1]" and exc.value.problem == "message part has no string 'type'" and exc.value.line == 15


def test_formats_lists_ai_sdk(capsys):
    code, out, _ = run_cli(capsys, "formats")
    assert code == 0 and "ai-sdk" in [line.split("\t")[0] for line in out.splitlines()]


def test_roo_openrouter_details_copy_is_edited_with_the_reasoning(tmp_path, capsys):
    details = [{"type": "reasoning.text", "text": THINK, "format": "unknown", "index": 0}]
    history = [{"role": "user", "content": "Go."},
               {"role": "assistant", "content": [{"type": "reasoning", "text": THINK}, {"type": "text", "text": "ok"}],
                "providerOptions": {"openrouter": {"reasoning_details": details}}}]
    src = write(tmp_path, {"version": 2, "messages": history})
    out, _ = prune(capsys, tmp_path, src)
    msg = json.loads(out)["messages"][1]
    assert SKIP in msg["content"][0]["text"]
    assert msg["providerOptions"]["openrouter"]["reasoning_details"] == [{**details[0], "text": msg["content"][0]["text"]}]
