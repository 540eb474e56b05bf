"""Every copy of a reasoning text is edited together, or the record is refused
(docs/FORMAT.md, "Write-back"): a rule of the write-back engine (formats/writeback.py), so every adapter, present
and future, gets it. A copy is a string of the same record, not a site of any reasoning part,
that contains the original text verbatim or JSON-escaped."""

from __future__ import annotations

import json

import pytest

from format_helpers import run_cli
from iclr_cli.errors import InputError
from iclr_cli.formats.base import Document, OpaqueEdits
from iclr_cli.formats.openai_messages import read_messages, write_messages
from iclr_cli.formats.reading import read_lines, whole
from iclr_cli.formats.writeback import MIN_COPY_CHARS, Site, TextRef, UnregisteredCopy, apply_edits, write_back
from iclr_cli.trajectory import Part, Step, Trajectory, WriteBack

THOUGHT = "The helper keeps the day when it adds a month.\n\nShort months break on the 31st."


def doc_of(records, parts):
    return Document("test", "src.jsonl", [Trajectory("t", (), (Step(0, tuple(parts)),))], records)


def edited(doc, texts):
    [traj] = doc.trajectories
    return [traj.with_steps([traj.steps[0].with_reasoning(texts)])]


def part(text, *paths, **kw):
    return Part("reasoning", text, ref=TextRef(tuple(Site(p) for p in paths), **kw.pop("ref", {})), **kw)


def test_a_copy_outside_the_sites_refuses_the_record_with_line_and_field():
    lines = [{"other": 1}, {"messages": [{"reasoning_content": THOUGHT}], "log": {"request": [{"reasoning_content": THOUGHT}]}}]
    data = b"".join(json.dumps(x).encode() + b"\n" for x in lines)
    records = read_lines(data, "src.jsonl")
    doc = doc_of(records, [part(THOUGHT, (1, "messages", 0, "reasoning_content"))])
    with pytest.raises(InputError) as err:
        write_back(records, doc, edited(doc, [""]))
    assert (err.value.source, err.value.line, err.value.field) == ("src.jsonl", 2, "log.request[0].reasoning_content")
    assert "messages[0].reasoning_content" in err.value.problem and "half-edited" in err.value.problem


@pytest.mark.parametrize("copy", [
    f"<think>{THOUGHT}</think>\n\nI will clamp the day.",  # inside a longer string
    json.dumps({"messages": [{"role": "assistant", "reasoning_content": THOUGHT}]}),  # a request kept as a JSON string
    json.dumps({"messages": [{"reasoning_content": THOUGHT}]}, ensure_ascii=False, indent=1),
])
def test_containing_and_json_escaped_copies_count(copy):
    value = {"reasoning": THOUGHT, "raw": copy}
    records = whole(json.dumps(value).encode(), value)
    doc = doc_of(records, [part(THOUGHT, (0, "reasoning"))])
    with pytest.raises(InputError, match="half-edited") as err:
        write_back(records, doc, edited(doc, ["[SKIP]"]))
    assert err.value.field == "raw" and err.value.line is None


def test_registered_copies_other_parts_short_texts_and_unedited_parts_pass():
    short = "Check the 31st."
    assert len(short) < MIN_COPY_CHARS
    value = {"a": THOUGHT, "b": THOUGHT, "loop": THOUGHT, "s": short, "note": f"log: {short}", "c": "other text that stays", "d": "other text that stays"}
    records = whole(json.dumps(value).encode(), value)
    parts = [
        part(THOUGHT, (0, "a"), (0, "b")),  # one part, two sites: edited together
        part(THOUGHT, (0, "loop")),  # the same words said again in a later turn: another part, kept
        part(short, (0, "s")),
        part("other text that stays", (0, "c")),
    ]
    doc = doc_of(records, parts)
    out = json.loads(write_back(records, doc, edited(doc, ["", THOUGHT, "", "other text that stays"])).data)
    assert out == {**value, "a": "", "b": "", "s": ""}


def test_an_answer_that_repeats_the_reasoning_is_the_answer_not_a_copy():
    value = {"reasoning": THOUGHT, "answer": THOUGHT, "raw": THOUGHT}
    records = whole(json.dumps(value).encode(), value)
    parts = [part(THOUGHT, (0, "reasoning")), Part("action", THOUGHT, label="assistant")]
    doc = doc_of(records, parts)
    assert json.loads(write_back(records, doc, edited(doc, [""])).data) == {"reasoning": "", "answer": THOUGHT, "raw": THOUGHT}


def test_a_read_only_part_saying_the_same_words_is_not_a_copy():
    value = {"sealed": {"text": THOUGHT, "encrypted_content": "gAAA"}, "plain": THOUGHT}
    records = whole(json.dumps(value).encode(), value)
    parts = [Part("reasoning", THOUGHT, write_back=WriteBack.READ_ONLY), part(THOUGHT, (0, "plain"))]
    doc = doc_of(records, parts)
    out = json.loads(write_back(records, doc, edited(doc, ["[SKIP]"])).data)
    assert out == {"sealed": value["sealed"], "plain": "[SKIP]"}


def test_a_copy_dropped_with_an_opaque_item_does_not_count():
    value = {"items": [{"summary": THOUGHT, "encrypted_content": "gAAA"}], "echo": THOUGHT}
    records = whole(json.dumps(value).encode(), value)
    ref = {"drop": ((0, "items", 0),)}
    doc = doc_of(records, [part(THOUGHT, (0, "echo"), (0, "items", 0, "summary"), ref=ref, write_back=WriteBack.OPAQUE)])
    out = json.loads(write_back(records, doc, edited(doc, ["[SKIP]"]), OpaqueEdits.DROP).data)
    assert out == {"items": [], "echo": "[SKIP]"}


def test_apply_edits_names_the_string_and_the_primary_site():
    values = [{"reasoning_content": THOUGHT, "content": f"<think>{THOUGHT}</think>ok"}]
    traj = Trajectory("t", (), (Step(0, (part(THOUGHT, (0, "reasoning_content")),)),))
    with pytest.raises(UnregisteredCopy) as err:
        apply_edits(values, [traj], [traj.with_steps([traj.steps[0].with_reasoning([""])])])
    assert err.value.path == (0, "content") and err.value.site == Site((0, "reasoning_content"))


def test_message_level_write_back_refuses_with_the_message_field():
    messages = [{"role": "user", "content": "Fix it."},
                {"role": "assistant", "reasoning_content": THOUGHT, "content": "I will clamp it.", "provider_raw": {"thinking": THOUGHT}},
                {"role": "user", "content": "Go on."}]
    read = read_messages(messages, traj_id="c")
    new = read.with_steps([read.steps[0].with_reasoning([""])])
    with pytest.raises(InputError) as err:
        write_messages(messages, read, new)
    assert (err.value.source, err.value.field) == ("messages", "messages[1].provider_raw.thinking")


def test_prune_refuses_a_half_edit_with_exit_2_and_writes_nothing(capsys, tmp_path):
    row = {"messages": [{"role": "user", "content": "Fix it."}, {"role": "assistant", "reasoning_content": THOUGHT, "content": "Clamp."}],
           "proxy_request": {"messages": [{"role": "assistant", "reasoning_content": THOUGHT}]}}
    src = tmp_path / "rows.jsonl"
    plain = {"messages": row["messages"]}
    src.write_bytes(json.dumps(plain).encode() + b"\n" + json.dumps(row).encode() + b"\n")
    out = tmp_path / "out.jsonl"
    code, _, err = run_cli(capsys, "prune", str(src), "--variant", "delete-all", "--model", "fake", "-o", str(out))
    assert code == 2 and not out.exists()
    assert f"{src}:2: field 'proxy_request.messages[0].reasoning_content'" in err
    code, _, err = run_cli(capsys, "prune", str(src), "--variant", "none", "--model", "fake", "-o", str(out))
    assert code == 0 and out.read_bytes() == src.read_bytes()  # nothing edited: nothing to refuse
