"""Roo Code / Kilo Code ``api_conversation_history.json`` (iclr_cli/formats/adapters/roo.py, read by the
``anthropic`` adapter): OpenRouter ``reasoning_details``, DeepSeek ``reasoning_content`` beside a
reasoning block, OpenAI-native encrypted reasoning blocks and items, Gemini ``thoughtSignature``
blocks; the field case 03b of the fifth round."""

from __future__ import annotations

import json

import pytest

from format_helpers import field_case, run_cli, summary_value
from iclr_cli.blocks import SKIP
from iclr_cli.formats import registry
from iclr_cli.formats.adapters.anthropic import ADAPTER
from iclr_cli.trajectory import WriteBack

TASK = {"role": "user", "content": [{"type": "text", "text": "<task>Rename the flag --fast to --quick.</task>"}], "ts": 1}
PLAN = "The flag is parsed in cli.py and named in the README.\n\nA search for --fast lists every place to change."
NEXT = "Two hits only.\n\nOne replacement per file is enough."
SUMMARY = "The script copies with a backslash glob.\n\nPowerShell on Linux runners reads it differently."


def write(tmp_path, messages, name="api_conversation_history.json") -> tuple:
    src = tmp_path / name
    src.write_bytes(json.dumps(messages, ensure_ascii=False).encode())  # compact, as Roo's safeWriteJson writes it
    return src, src.read_bytes()


def prune(capsys, tmp_path, src, *args: str) -> tuple[list, str]:
    out = tmp_path / "out.json"
    code, stdout, err = run_cli(capsys, "prune", str(src), "--model", "fake", "-o", str(out), *args)
    assert (code, stdout) == (0, ""), err
    return json.loads(out.read_bytes()), err


def deepseek() -> list:
    """DeepSeek through Roo: the reasoning block and, after a condense, its reasoning_content copy."""
    return [
        TASK,
        {"role": "assistant", "content": [{"type": "reasoning", "text": PLAN, "summary": []},
                                          {"type": "tool_use", "id": "call_0", "name": "search_files", "input": {"regex": "--fast"}}],
         "ts": 2, "reasoning_content": PLAN},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_0", "content": "cli.py:12\nREADME.md:40"}], "ts": 3},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": NEXT}, {"type": "text", "text": "Renaming."}], "ts": 4, "reasoning_content": NEXT},
    ]


def native() -> list:
    """Roo's OpenAI Responses provider: encrypted reasoning blocks (one with a summary), and an
    item of its own before its message as Roo builds of November 2025 stored it."""
    return [
        TASK,
        {"type": "reasoning", "summary": [], "encrypted_content": "gAAAAB-item", "id": "rs_0", "ts": 2},
        {"role": "assistant", "id": "resp_1", "content": [{"type": "reasoning", "summary": [], "encrypted_content": "gAAAAB-one", "id": "rs_1"},
                                                          {"type": "tool_use", "id": "call_1", "name": "read_file", "input": {"path": "build.ps1"}}], "ts": 3},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "Copy-Item src\\* out"}], "ts": 4},
        {"role": "assistant", "id": "resp_2", "content": [{"type": "reasoning", "summary": [{"type": "summary_text", "text": SUMMARY}], "encrypted_content": "gAAAAB-two", "id": "rs_2"},
                                                          {"type": "text", "text": "The glob uses a backslash."}], "ts": 5},
    ]


# -- 03b: the field case ------------------------------------------------------------------------

def case03b():
    return field_case("03b-roo-openrouter-reasoning-details.json", "turn5")


@pytest.mark.parametrize("variant", ["delete-all", "iclr"])
def test_03b_text_entries_pruned_call_signatures_value_equal(tmp_path, capsys, variant):
    src = case03b()
    before = json.loads(src.read_bytes())
    after, err = prune(capsys, tmp_path, src, "--variant", variant)
    assert "reasoning_details" not in err  # read, not warned about
    assert len(after) == len(before)
    for old, new in zip(before, after):
        if old["role"] != "assistant":
            assert new == old
            continue
        assert {k: v for k, v in new.items() if k != "reasoning_details"} == {k: v for k, v in old.items() if k != "reasoning_details"}
        encrypted = lambda m: [e for e in m["reasoning_details"] if e["type"] == "reasoning.encrypted"]  # noqa: E731
        assert encrypted(new) == encrypted(old)  # the calls' thought signatures, value-equal
        [text_old] = [e for e in old["reasoning_details"] if e["type"] == "reasoning.text"]
        [text_new] = [e for e in new["reasoning_details"] if e["type"] == "reasoning.text"]
        assert {k: v for k, v in text_new.items() if k != "text"} == {k: v for k, v in text_old.items() if k != "text"}
        if variant == "delete-all":
            assert text_new["text"] == ""
        else:
            assert SKIP in text_new["text"] and text_new["text"] != text_old["text"]
    assert summary_value(err, "reasoning blocks") == "11"
    assert summary_value(err, "blocks removed") == ("11" if variant == "delete-all" else "8")  # floor(0.8 * N): 3 + 3 + 2


def test_03b_score_reads_each_text_entry_as_the_steps_reasoning(capsys):
    code, stdout, err = run_cli(capsys, "score", str(case03b()), "--model", "fake", "-q")
    assert code == 0, err
    records = [json.loads(line) for line in stdout.splitlines()]
    assert [(r["step"], r["n_blocks"]) for r in records] == [(0, 4)] * 4 + [(1, 4)] * 4 + [(2, 3)] * 3
    assert records[0]["text"].startswith("The export formats timestamps")
    assert records[-1]["text"].startswith("Moving the column to timestamptz")


def test_03b_unedited_write_back_is_byte_exact_and_signatures_listed():
    data = case03b().read_bytes()
    doc = ADAPTER.load(data, "h.json")
    assert registry.detect(data, "h.json").name == "anthropic"
    assert ADAPTER.dump(doc, doc.trajectories) == data
    assert [s.field for s in doc.signatures] == ["[1].reasoning_details[1]", "[3].reasoning_details[1]"]
    assert doc.unrecognised == []
    assert [[p.write_back for p in s.reasoning] for s in doc.trajectories[0].steps] == [[WriteBack.IN_PLACE]] * 3


# -- reasoning_details: sealing encrypted entries, signed and summary entries -------------------

def details_message(details, content=None) -> list:
    content = content if content is not None else [{"type": "tool_use", "id": "call_9", "name": "list_files", "input": {}}]
    return [TASK, {"role": "assistant", "content": content, "ts": 2, "reasoning_details": details}]


def test_encrypted_entry_not_bound_to_a_call_seals_the_text(tmp_path, capsys):
    details = [{"type": "reasoning.summary", "summary": SUMMARY, "format": "openai-responses-v1", "index": 0},
               {"type": "reasoning.encrypted", "data": "gAAAAB-opaque", "id": "rs_7", "format": "openai-responses-v1", "index": 0}]
    src, data = write(tmp_path, details_message(details))
    [step] = ADAPTER.load(data, "h.json").trajectories[0].steps
    assert [(p.text, p.write_back) for p in step.reasoning] == [(SUMMARY, WriteBack.OPAQUE)]
    out, err = prune(capsys, tmp_path, src, "--variant", "delete-all")
    assert out == json.loads(data)  # sealed: left as generated
    assert summary_value(err, "reasoning parts left sealed (provider rule)") == "1 (openai encrypted 1)"
    # --encrypted-reasoning drop: the text is edited and the encrypted entry goes with the edit
    out, _ = prune(capsys, tmp_path, src, "--variant", "delete-all", "--encrypted-reasoning", "drop")
    assert out[1]["reasoning_details"] == [{**details[0], "summary": ""}]


def test_signed_text_entry_is_sealed_and_the_bound_signature_kept_when_edited(tmp_path, capsys):
    details = [{"type": "reasoning.text", "text": PLAN, "signature": "EqQBsig", "format": "anthropic-claude-v1", "index": 0},
               {"type": "reasoning.encrypted", "data": "c2ln", "id": "call_9", "format": "google-gemini-v1", "index": 0}]
    src, data = write(tmp_path, details_message(details))
    _, err = prune(capsys, tmp_path, src, "--variant", "delete-all")
    assert summary_value(err, "reasoning parts left sealed (provider rule)") == "1 (unknown signed 1)"
    out, _ = prune(capsys, tmp_path, src, "--variant", "delete-all", "--signed-thinking", "edit")
    assert out[1]["reasoning_details"][0]["text"] == ""
    assert out[1]["reasoning_details"][1] == details[1]


def test_encrypted_only_details_are_named_as_sealed(tmp_path, capsys):
    src, data = write(tmp_path, details_message([{"type": "reasoning.encrypted", "data": "ZW5j", "id": None, "index": 0}]))
    doc = ADAPTER.load(data, str(src))
    assert doc.trajectories[0].steps[0].reasoning == ()
    assert doc.warnings == [f"{src}: 1 reasoning part encrypted (reasoning.encrypted, no readable text): left unedited, not scored or pruned (at field '[1].reasoning_details[0]')"]


def test_details_text_equal_to_a_reasoning_block_is_one_part(tmp_path, capsys):
    msgs = details_message([{"type": "reasoning.text", "text": PLAN, "index": 0}],
                           [{"type": "reasoning", "text": PLAN}, {"type": "text", "text": "Looking."}])
    src, data = write(tmp_path, msgs)
    [step] = ADAPTER.load(data, "h.json").trajectories[0].steps
    assert len(step.reasoning) == 1
    out, _ = prune(capsys, tmp_path, src)
    assert out[1]["content"][0]["text"] == out[1]["reasoning_details"][0]["text"] != PLAN


# -- reasoning block + reasoning_content (DeepSeek / Z.ai) --------------------------------------

def test_reasoning_content_copy_is_one_reasoning_counted_once(tmp_path):
    _, data = write(tmp_path, deepseek())
    doc = ADAPTER.load(data, "h.json")
    assert doc.unrecognised == []
    steps = doc.trajectories[0].steps
    assert [[p.text for p in s.reasoning] for s in steps] == [[PLAN], [NEXT]]
    assert [site.path for site in steps[0].reasoning[0].ref.sites] == [(0, 1, "content", 0, "text"), (0, 1, "reasoning_content")]
    assert ADAPTER.dump(doc, doc.trajectories) == data


@pytest.mark.parametrize("variant", ["delete-all", "iclr"])
def test_reasoning_content_edited_with_its_block(tmp_path, capsys, variant):
    src, data = write(tmp_path, deepseek())
    out, err = prune(capsys, tmp_path, src, "--variant", variant)
    assert summary_value(err, "reasoning blocks") == "4"
    first, second = out[1], out[3]
    if variant == "delete-all":
        assert first["content"] == [deepseek()[1]["content"][1]]  # the emptied block leaves; the call stays
        assert first["reasoning_content"] == "" and second["reasoning_content"] == ""  # written "", never removed
        assert second["content"] == [{"type": "text", "text": "Renaming."}]
    else:
        assert first["content"][0]["text"] == first["reasoning_content"] == "The flag is parsed in cli.py and named in the README.\n\n" + SKIP
        assert second["content"][0]["thinking"] == second["reasoning_content"] == "Two hits only.\n\n" + SKIP
    assert [m for i, m in enumerate(out) if i in (0, 2)] == [m for i, m in enumerate(deepseek()) if i in (0, 2)]


def test_reasoning_content_joining_two_blocks_and_a_lone_one(tmp_path, capsys):
    joined = [TASK, {"role": "assistant", "content": [{"type": "reasoning", "text": PLAN}, {"type": "reasoning", "text": NEXT}, {"type": "text", "text": "ok"}],
                     "ts": 2, "reasoning_content": PLAN + "\n\n" + NEXT}]
    src, data = write(tmp_path, joined)
    [step] = ADAPTER.load(data, "h.json").trajectories[0].steps
    assert [p.text for p in step.reasoning] == [PLAN, NEXT]
    assert [s.how for p in step.reasoning for s in p.ref.sites] == ["whole", "unique", "whole", "unique"]
    out, _ = prune(capsys, tmp_path, src, "--variant", "delete-all")
    assert out[1]["reasoning_content"] == "\n\n" and out[1]["content"] == [{"type": "text", "text": "ok"}]
    # reasoning_content alone (no block holds it): a reasoning part of its own, edited in place
    lone = [TASK, {"role": "assistant", "content": [{"type": "text", "text": "ok"}], "ts": 2, "reasoning_content": PLAN}]
    src, data = write(tmp_path, lone, "lone.json")
    [step] = ADAPTER.load(data, "h.json").trajectories[0].steps
    assert [(p.kind, p.text) for p in step.parts] == [("reasoning", PLAN), ("action", "ok")]
    out, _ = prune(capsys, tmp_path, src, "--variant", "delete-all")
    assert out[1] == {**lone[1], "reasoning_content": ""}


# -- OpenAI-native encrypted reasoning ----------------------------------------------------------

def test_encrypted_blocks_are_sealed_never_scored_as_text(tmp_path, capsys):
    src, data = write(tmp_path, native())
    doc = ADAPTER.load(data, str(src))
    steps = doc.trajectories[0].steps
    assert [[(p.kind, p.label, p.write_back) for p in s.parts] for s in steps] == [
        [("action", "tool_call:read_file", WriteBack.IN_PLACE), ("observation", "tool_result", WriteBack.IN_PLACE)],
        [("reasoning", "reasoning", WriteBack.OPAQUE), ("action", "assistant", WriteBack.IN_PLACE)],
    ]
    assert steps[1].parts[0].text == SUMMARY
    assert doc.unrecognised == []
    assert doc.warnings == [f"{src}: 2 reasoning parts encrypted (encrypted_content, no summary text): left unedited, not scored or pruned (first at field '[1]')"]
    assert ADAPTER.dump(doc, doc.trajectories) == data
    for variant in ("delete-all", "iclr"):
        out, err = prune(capsys, tmp_path, src, "--variant", variant)
        assert out == native()
        assert (tmp_path / "out.json").read_bytes() == data  # sealed: byte for byte
        assert summary_value(err, "reasoning parts left sealed (provider rule)") == "1 (openai encrypted 1)"
    out, _ = prune(capsys, tmp_path, src, "--variant", "delete-all", "--encrypted-reasoning", "drop")
    assert out[4]["content"] == [{"type": "text", "text": "The glob uses a backslash."}]  # the edited block dropped whole
    assert out[:4] == native()[:4]


def test_thought_signature_block_is_a_signature_not_an_action(tmp_path):
    msgs = [TASK, {"role": "assistant", "content": [{"type": "reasoning", "text": PLAN}, {"type": "tool_use", "id": "c", "name": "f", "input": {}},
                                                    {"type": "thoughtSignature", "thoughtSignature": "Q2lR"}], "ts": 2}]
    _, data = write(tmp_path, msgs)
    doc = ADAPTER.load(data, "h.json")
    assert [p.label for p in doc.trajectories[0].steps[0].parts] == ["reasoning", "tool_call:f"]
    assert [s.field for s in doc.signatures] == ["[1].content[2]"] and doc.unrecognised == []


def test_sniff_takes_a_tool_less_roo_history_for_anthropic(tmp_path):
    msgs = [TASK, {"role": "assistant", "content": [{"type": "reasoning", "text": PLAN}, {"type": "text", "text": "<attempt_completion/>"}], "ts": 2, "reasoning_content": PLAN}]
    _, data = write(tmp_path, msgs)
    assert registry.detect(data, "h.json").name == "anthropic"
    # without Roo's 'ts' the same content is no evidence either way
    plain = [{k: v for k, v in m.items() if k != "ts"} for m in msgs]
    assert registry.detect(json.dumps(plain).encode(), "h.json").name != "anthropic"


# -- bad input ----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "change, line, field, problem",
    [
        ({"reasoning_details": {"type": "reasoning.text"}}, 23, "[1].reasoning_details", "reasoning_details must be a list of reasoning entries"),
        ({"reasoning_details": ["x"]}, 24, "[1].reasoning_details[0]", "reasoning_details entry is not an object with a string 'type'"),
        ({"reasoning_details": [{"type": "reasoning.text", "text": 4}]}, 26, "[1].reasoning_details[0].text", "reasoning.text entry's 'text' must be a string"),
        ({"reasoning_content": ["a"]}, 23, "[1].reasoning_content", "reasoning_content must be a string, not list"),
        ({"content": [{"type": "reasoning", "encrypted_content": 5}]}, 17, "[1].content[0].encrypted_content", "encrypted reasoning block has no string 'encrypted_content'"),
        ({"content": [{"type": "reasoning", "encrypted_content": "e", "summary": "s"}]}, 18, "[1].content[0].summary", "'summary' must be a list of summary_text entries"),
    ],
)
def test_bad_fields_exit_2_naming_file_line_and_field(tmp_path, capsys, change, line, field, problem):
    msgs = [TASK, {"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": "f", "input": {}}], "ts": 2, **change}]
    src = tmp_path / "api_conversation_history.json"
    src.write_text(json.dumps(msgs, indent=1))
    code, _, err = run_cli(capsys, "prune", str(src), "--format", "anthropic", "--model", "fake", "-q")
    assert code == 2
    assert f"{src}:{line}: field {field!r}: {problem}" in err


def test_unknown_entry_types_are_reported_and_kept(tmp_path, capsys):
    details = [{"type": "reasoning.text", "text": PLAN}, {"type": "reasoning.future", "blob": 1}, {"type": "reasoning.text"}]
    src, data = write(tmp_path, details_message(details))
    doc = ADAPTER.load(data, "h.json")
    assert [(u.field, u.what) for u in doc.unrecognised] == [
        ("[1].reasoning_details[1]", "reasoning_details entry of type 'reasoning.future': not scored or pruned"),
        ("[1].reasoning_details[2]", "reasoning.text entry has no 'text': not scored or pruned"),
    ]
    out, _ = prune(capsys, tmp_path, src, "--variant", "delete-all")
    assert out[1]["reasoning_details"] == [{"type": "reasoning.text", "text": ""}, details[1], details[2]]


def test_serve_messages_seals_an_encrypted_blocks_summary_on_a_plain_upstream():
    from iclr_cli.serve.messages import ENCRYPTED, MessagesDialect

    body = {"model": "m", "messages": [m for m in native() if "role" in m]}
    dialect = MessagesDialect(sealed=False)
    transcript = dialect.read(dialect.parse(body), "t")
    summary = transcript.trajectory.steps[1].parts[0]
    assert (summary.text, summary.write_back, summary.ref) == (SUMMARY, WriteBack.READ_ONLY, None)
    assert transcript.sealed == ((), (ENCRYPTED,))
