"""Field cases of the OpenAI side (../shared/cases/turn2/, README there): each is run with the
command the README names and its output checked byte for byte against the right value."""

from __future__ import annotations

import copy
import json


from format_helpers import field_case, run_cli
from iclr_cli.blocks import SKIP

case = field_case


def prune(capsys, tmp_path, src, *args: str) -> bytes:
    out = tmp_path / "out.json"
    code, stdout, err = run_cli(capsys, "prune", str(src), "--model", "fake", "-o", str(out), *args)
    assert (code, stdout) == (0, ""), err
    return out.read_bytes()


def as_file(value) -> bytes:
    """The layout of the case files (indent 2, newline at the end), which prune keeps."""
    return (json.dumps(value, indent=2) + "\n").encode()


def blocks_per_step(capsys, src, *args: str) -> dict[int, int]:
    code, stdout, err = run_cli(capsys, "score", str(src), "--model", "fake", "-q", *args)
    assert code == 0, err
    counts: dict[int, int] = {}
    for rec in map(json.loads, stdout.splitlines()):
        counts[rec["step"]] = counts.get(rec["step"], 0) + 1
    return counts


def test_02_openrouter_details_edited_with_reasoning(tmp_path, capsys):
    src = case("02-openrouter-reasoning-details.json")
    doc = json.loads(src.read_bytes())
    # anthropic/claude-* through OpenRouter: the signed entry is Anthropic's and the encrypted
    # one only the provider reads: both messages are left alone by default (the provider rule)
    assert blocks_per_step(capsys, src) == {}
    assert prune(capsys, tmp_path, src, "--variant", "delete-all") == src.read_bytes()
    edit = ("--signed-thinking", "edit", "--encrypted-reasoning", "drop")
    assert blocks_per_step(capsys, src, *edit) == {0: 3, 1: 3}
    want = copy.deepcopy(doc)
    first, second = want["messages"][2], want["messages"][4]
    first["reasoning"] = first["reasoning_details"][0]["text"] = ""
    del first["reasoning_details"][0]["signature"]  # an edited signed entry loses its signature
    second["reasoning"] = second["reasoning_details"][0]["summary"] = ""
    del second["reasoning_details"][1]  # the encrypted copy goes with its edited sibling
    assert prune(capsys, tmp_path, src, "--variant", "delete-all", *edit) == as_file(want)


def test_02_keep_leaves_the_encrypted_message_whole(tmp_path, capsys):
    src = case("02-openrouter-reasoning-details.json")
    doc = json.loads(src.read_bytes())
    out = json.loads(prune(capsys, tmp_path, src, "--variant", "delete-all", "--encrypted-reasoning", "keep", "--signed-thinking", "edit"))
    assert out["messages"][4] == doc["messages"][4]
    assert out["messages"][2]["reasoning"] == out["messages"][2]["reasoning_details"][0]["text"] == ""


def test_02_iclr_prunes_both_copies_alike(tmp_path, capsys):
    src = case("02-openrouter-reasoning-details.json")
    out = json.loads(prune(capsys, tmp_path, src, "--variant", "iclr", "--signed-thinking", "edit", "--encrypted-reasoning", "drop"))
    first, second = out["messages"][2], out["messages"][4]
    assert first["reasoning"].count(SKIP) == 2 and first["reasoning"] == first["reasoning_details"][0]["text"]
    assert second["reasoning"].count(SKIP) == 2 and second["reasoning"] == second["reasoning_details"][0]["summary"]
    assert "signature" not in first["reasoning_details"][0]
    assert [d["type"] for d in second["reasoning_details"]] == ["reasoning.summary"]


def test_03_lone_closing_tag_reasoning_before_it(tmp_path, capsys):
    src = case("03-think-missing-open-tag.json")
    doc = json.loads(src.read_bytes())
    assert blocks_per_step(capsys, src) == {0: 3, 1: 3}
    want = copy.deepcopy(doc)
    for i in (2, 4):
        want[i]["content"] = want[i]["content"][want[i]["content"].index("</think>") :]
    assert want[2]["content"] == "</think>\n\nI will read src/loader.py and tests/conftest.py first."
    assert prune(capsys, tmp_path, src, "--variant", "delete-all") == as_file(want)


def test_08_content_parts_keep_their_list_and_image(tmp_path, capsys):
    src = case("08-assistant-content-parts.json")
    doc = json.loads(src.read_bytes())
    assert blocks_per_step(capsys, src) == {0: 3, 1: 3}
    want = copy.deepcopy(doc)
    want["messages"][2]["content"][0]["text"] = "<think></think>\n\nI will read the loader first."
    want["messages"][4]["content"][0]["text"] = "<think></think>"
    out = prune(capsys, tmp_path, src, "--variant", "delete-all")
    assert out == as_file(want)
    assert json.loads(out)["messages"][1]["content"][1] == doc["messages"][1]["content"][1]  # the image


def test_13_gpt_oss_thinking_field_and_harmony_channels(tmp_path, capsys):
    src = case("13-gpt-oss-thinking-and-harmony.json")
    doc = json.loads(src.read_bytes())
    assert blocks_per_step(capsys, src) == {0: 3, 1: 3}
    want = copy.deepcopy(doc)
    want["messages"][2]["thinking"] = ""
    want["messages"][4]["content"] = (
        "<|channel|>analysis<|message|><|end|><|start|>assistant<|channel|>final<|message|>"
        "The fixture shares a cache file; use tmp_path.<|return|>"
    )
    assert prune(capsys, tmp_path, src, "--variant", "delete-all") == as_file(want)
