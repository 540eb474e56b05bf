"""Pydantic AI message histories (iclr_cli/formats/adapters/pydantic_ai.py): ModelMessagesTypeAdapter
JSON, thinking parts under the provider rule table by their provider_name."""

from __future__ import annotations

import copy
import json

import pytest

from format_helpers import SAMPLES, run_cli, summary_value
from iclr_cli.blocks import SKIP
from iclr_cli.errors import InputError
from iclr_cli.formats import registry
from iclr_cli.trajectory import Usage, WriteBack

SAMPLE = SAMPLES / "pydantic_ai_messages.json"
THINK = "The config is read twice.\n\nThe second read overrides the flag.\n\nRemoving it fixes the bug."
SIG = "EqQBCkYIBxgCKkAourOwnSignature"


def prune(capsys, tmp_path, src, *args: str) -> tuple[bytes, str]:
    out = tmp_path / "out.json"
    code, stdout, err = run_cli(capsys, "prune", str(src), "--model", "fake", "-o", str(out), "--force", *args)
    assert (code, stdout) == (0, ""), err
    return out.read_bytes(), err


def history(*thinking: dict, model: str = "claude-sonnet-4-5", provider: str = "anthropic") -> list:
    return [
        {"parts": [{"content": "Fix the flag.", "timestamp": "t", "part_kind": "user-prompt"}], "instructions": "Be brief.", "kind": "request"},
        {"parts": [*thinking, {"tool_name": "grep", "args": {"q": "flag"}, "tool_call_id": "c1", "part_kind": "tool-call"}],
         "usage": {"input_tokens": 100, "cache_read_tokens": 60, "cache_write_tokens": 0, "output_tokens": 20},
         "model_name": model, "provider_name": provider, "kind": "response"},
        {"parts": [{"tool_name": "grep", "content": "cfg.py:3", "tool_call_id": "c1", "part_kind": "tool-return"}], "instructions": "Be brief.", "kind": "request"},
        {"parts": [{"content": "Done.", "part_kind": "text"}], "model_name": model, "provider_name": provider, "kind": "response"},
    ]


def thinking(**extra) -> dict:
    return {"content": THINK, "id": None, "signature": None, "provider_name": None, **extra, "part_kind": "thinking"}


def write(tmp_path, value):
    path = tmp_path / "history.json"
    path.write_text(json.dumps(value, indent=2))
    return path


def test_sample_is_detected_and_read():
    det = registry.detect_why(SAMPLE.read_bytes(), str(SAMPLE))
    assert det.adapter.name == "pydantic-ai" and not det.others
    [traj] = registry.get("pydantic-ai").load(SAMPLE.read_bytes(), "s").trajectories
    assert [(p.kind, p.label) for p in traj.prompt] == [("prompt", "system"), ("prompt", "user")]
    assert [[(p.kind, p.label, p.call_id) for p in s.parts] for s in traj.steps] == [
        [("reasoning", "reasoning", None), ("action", "tool_call:read_file", "call_k1"), ("observation", "tool_result", "call_k1")],
        [("reasoning", "reasoning", None), ("action", "assistant", None)],
    ]
    assert traj.steps[0].parts[1].text == '{"path": "ops/rotate.py"}'  # args kept as the JSON string it is
    assert traj.meta == {"format": "pydantic-ai", "model": "deepseek-reasoner", "provider": "deepseek"}
    assert [(r.step, r.usage.input_tokens, r.usage.output_tokens) for r in traj.requests] == [(0, 812, 96), (1, 1024, 120)]


def test_sample_unedited_is_byte_identical(tmp_path, capsys):
    out, _ = prune(capsys, tmp_path, SAMPLE, "--variant", "none")
    assert out == SAMPLE.read_bytes()


@pytest.mark.parametrize("variant", ["delete-all", "iclr"])
def test_sample_plain_thinking_is_edited_in_place_and_nothing_else(tmp_path, capsys, variant):
    before = json.loads(SAMPLE.read_bytes())
    out, _ = prune(capsys, tmp_path, SAMPLE, "--variant", variant)
    after = json.loads(out)
    for old, new in zip(before, after, strict=True):
        for p_old, p_new in zip(old["parts"], new["parts"], strict=True):
            if p_old["part_kind"] != "thinking":
                assert p_new == p_old
                continue
            # DeepSeek's thinking is plain text: an emptied part stays (the provider wants it back)
            assert p_new["content"] == "" if variant == "delete-all" else SKIP in p_new["content"]
            assert {k: v for k, v in p_new.items() if k != "content"} == {k: v for k, v in p_old.items() if k != "content"}
        assert {k: v for k, v in new.items() if k != "parts"} == {k: v for k, v in old.items() if k != "parts"}


def test_anthropic_signed_thinking_sealed_by_default_signature_removed_on_edit(tmp_path, capsys):
    src = write(tmp_path, history(thinking(signature=SIG, provider_name="anthropic")))
    out, err = prune(capsys, tmp_path, src, "--variant", "delete-all")
    assert out == src.read_bytes()
    assert summary_value(err, "reasoning parts left sealed (provider rule)") == "1 (anthropic signed 1)"
    out, _ = prune(capsys, tmp_path, src, "--signed-thinking", "edit")
    part = json.loads(out)[1]["parts"][0]
    assert "signature" not in part and SKIP in part["content"]  # pydantic-ai then sends it as plain text
    out, _ = prune(capsys, tmp_path, src, "--variant", "delete-all", "--signed-thinking", "edit")
    assert json.loads(out)[1]["parts"] == history()[1]["parts"]


def test_anthropic_signature_on_a_deepseek_model_is_edited_and_kept(tmp_path, capsys):
    src = write(tmp_path, history(thinking(signature=SIG, provider_name="anthropic"), model="deepseek-chat"))
    out, _ = prune(capsys, tmp_path, src, "--variant", "delete-all")
    assert json.loads(out)[1]["parts"][0] == {**thinking(signature=SIG, provider_name="anthropic"), "content": ""}


def test_openai_encrypted_item_sealed_and_dropped_whole_on_request(tmp_path, capsys):
    first = thinking(id="rs_9", signature="gAAAA", provider_name="openai")
    second = {**thinking(id="rs_9", provider_name="openai"), "content": "A second summary."}
    src = write(tmp_path, history(first, second, model="gpt-5", provider="openai"))
    out, err = prune(capsys, tmp_path, src, "--variant", "delete-all")
    assert out == src.read_bytes()
    assert summary_value(err, "reasoning parts left sealed (provider rule)") == "2 (openai encrypted 2)"
    out, _ = prune(capsys, tmp_path, src, "--variant", "delete-all", "--encrypted-reasoning", "drop")
    assert [p["part_kind"] for p in json.loads(out)[1]["parts"]] == ["tool-call"]  # every summary of the item goes


@pytest.mark.parametrize(("part", "why"), [
    (thinking(signature="c2ln", provider_name="google-gla"), "signed by Gemini"),
    ({**thinking(id="redacted_thinking", signature="ZW5j", provider_name="anthropic"), "content": "[redacted]"}, "redacted by Anthropic"),
])
def test_gemini_signed_and_redacted_thinking_are_never_edited(tmp_path, capsys, part, why):
    src = write(tmp_path, history(part))
    [traj] = registry.get("pydantic-ai").load(src.read_bytes(), str(src)).trajectories
    assert traj.steps[0].parts[0].write_back is WriteBack.READ_ONLY
    out, err = prune(capsys, tmp_path, src, "--variant", "delete-all", "--signed-thinking", "edit")
    assert out == src.read_bytes() and f"1 reasoning part {why}" in err


def test_instructions_read_once_and_usage_includes_the_cache(tmp_path):
    src = write(tmp_path, history(thinking()))
    [traj] = registry.get("pydantic-ai").load(src.read_bytes(), str(src)).trajectories
    assert [(p.label, p.text) for p in traj.prompt] == [("instructions", "Be brief."), ("user", "Fix the flag.")]
    assert traj.requests[0].usage == Usage(100, 20, 60, 0, "usage")
    assert traj.requests[1].usage is None


def test_a_part_without_part_kind_is_named(tmp_path, capsys):
    bad = copy.deepcopy(history(thinking()))
    del bad[2]["parts"][0]["part_kind"]
    src = write(tmp_path, bad)
    code, _, err = run_cli(capsys, "score", str(src), "--model", "fake", "-q")
    assert code == 2
    assert f"{src}:43: field '[2].parts[0]': message part has no string 'part_kind'" in err


def test_a_message_of_another_kind_is_an_error(tmp_path):
    src = write(tmp_path, [*history(thinking()), {"role": "user", "content": "hi"}])
    with pytest.raises(InputError) as exc:
        registry.get("pydantic-ai").load(src.read_bytes(), str(src))
    assert exc.value.field == "[4]" and exc.value.problem.startswith("not a Pydantic AI message")


def test_formats_lists_pydantic_ai(capsys):
    code, out, _ = run_cli(capsys, "formats")
    assert code == 0 and "pydantic-ai" in [line.split("\t")[0] for line in out.splitlines()]
