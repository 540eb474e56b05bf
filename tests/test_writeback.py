"""The one write-back engine (formats/writeback.py): sites, signatures, opaque items, emptied
blocks, and the reasoning reported as written (docs/method.md, "Token counts")."""

import json

import pytest

from iclr_cli.formats.base import Document, OpaqueEdits
from iclr_cli.formats.reading import read_lines, whole
from iclr_cli.formats.writeback import Site, TextRef, locate, register_site_kind, splice, write_back
from iclr_cli.trajectory import Part, Step, Trajectory, WriteBack


def doc_of(records, parts):
    traj = Trajectory("t", (), (Step(0, tuple(parts)),))
    return Document("test", "t", [traj], records)


def edit(doc, texts):
    [traj] = doc.trajectories
    return [traj.with_steps([traj.steps[0].with_reasoning(texts)])]


def test_unedited_input_comes_back_byte_for_byte_and_as_read():
    data = b'{"a": "x",  "b": "y"}\r\n\n{"a":"z"}'
    records = read_lines(data, "t")
    doc = doc_of(records, [Part("reasoning", "x", ref=TextRef((Site((0, "a")),)))])
    result = write_back(records, doc, doc.trajectories)
    assert result.data == data
    assert result.written == tuple(doc.trajectories)


def test_one_text_in_several_sites_is_edited_everywhere_in_the_record_style():
    value = {"thought": "T1", "response": "T1\n```ls```", "history": ["say T1 now", "<think>T1</think>ok"]}
    data = json.dumps(value, indent=2).encode() + b"\n"
    records = whole(data, json.loads(data))
    sites = (Site((0, "thought")), Site((0, "response"), "prefix"), Site((0, "history", 0), "unique"), Site((0, "history", 1), "think:0"))
    doc = doc_of(records, [Part("reasoning", "T1", ref=TextRef(sites))])
    result = write_back(records, doc, edit(doc, ["[SKIP]"]))
    assert json.loads(result.data) == {
        "thought": "[SKIP]",
        "response": "[SKIP]\n```ls```",
        "history": ["say [SKIP] now", "<think>[SKIP]</think>ok"],
    }
    assert result.data.startswith(b'{\n  "thought"') and result.data.endswith(b"}\n")
    assert result.written[0].steps[0].reasoning[0].text == "[SKIP]"


def test_signed_edit_strips_the_signature_and_empty_blocks_leave_their_list():
    content = [{"type": "thinking", "thinking": "a", "signature": "S"}, {"type": "thinking", "thinking": "b", "signature": "T"}, {"type": "text", "text": "hi"}]
    data = json.dumps({"content": content}).encode()
    records = whole(data, json.loads(data))

    def part(i, text):
        path = (0, "content", i)
        ref = TextRef((Site((*path, "thinking")),), strip_keys=((path, "signature"),), remove_when_empty=path)
        return Part("reasoning", text, ref=ref, write_back=WriteBack.SIGNED)

    doc = doc_of(records, [part(0, "a"), part(1, "b")])
    out = json.loads(write_back(records, doc, edit(doc, ["", "B"])).data)
    assert out["content"] == [{"type": "thinking", "thinking": "B"}, {"type": "text", "text": "hi"}]


def codex_like():
    lines = [
        {"type": "response_item", "payload": {"type": "reasoning", "summary": [{"text": "s1"}, {"text": "s2"}], "encrypted_content": "E"}},
        {"type": "event_msg", "payload": {"type": "agent_reasoning", "text": "s1"}},
        {"type": "response_item", "payload": {"type": "reasoning", "summary": [{"text": "p"}]}},
    ]
    data = b"".join(json.dumps(v).encode() + b"\n" for v in lines)
    records = read_lines(data, "t")
    drop = ((0,), (1,))
    parts = [
        Part("reasoning", "s1", ref=TextRef((Site((0, "payload", "summary", 0, "text")), Site((1, "payload", "text"))), drop=drop), write_back=WriteBack.OPAQUE),
        Part("reasoning", "s2", ref=TextRef((Site((0, "payload", "summary", 1, "text")),), drop=drop), write_back=WriteBack.OPAQUE),
        Part("reasoning", "p", ref=TextRef((Site((2, "payload", "summary", 0, "text")),))),
    ]
    return data, records, doc_of(records, parts)


def test_opaque_edit_with_drop_removes_the_item_and_reports_every_part_in_it_as_deleted():
    data, records, doc = codex_like()
    result = write_back(records, doc, edit(doc, ["s", "s2", "q"]), OpaqueEdits.DROP)
    assert result.data.splitlines() == [data.splitlines()[2].replace(b'"p"', b'"q"')]
    # s2 was not edited, but it went out with its item
    assert [p.text for p in result.written[0].steps[0].reasoning] == ["", "", "q"]


def test_opaque_edit_with_keep_writes_nothing_of_it_and_reports_the_original():
    data, records, doc = codex_like()
    result = write_back(records, doc, edit(doc, ["s", "s2", "p"]), OpaqueEdits.KEEP)
    assert result.data == data
    assert [p.text for p in result.written[0].steps[0].reasoning] == ["s1", "s2", "p"]


def test_opaque_edit_with_a_nested_drop_removes_that_entry_and_edits_the_other_copies():
    # OpenRouter style: plain ``reasoning`` plus ``reasoning_details`` with an encrypted entry
    msg = {"reasoning": "r", "reasoning_details": [{"type": "reasoning.text", "text": "r", "signature": "S"}, {"type": "reasoning.encrypted", "data": "X"}]}
    data = json.dumps(msg).encode()
    records = whole(data, json.loads(data))
    ref = TextRef(
        (Site((0, "reasoning")), Site((0, "reasoning_details", 0, "text"))),
        drop=((0, "reasoning_details", 1),),
        strip_keys=(((0, "reasoning_details", 0), "signature"),),
    )
    doc = doc_of(records, [Part("reasoning", "r", ref=ref, write_back=WriteBack.OPAQUE)])
    result = write_back(records, doc, edit(doc, ["[SKIP]"]))
    assert json.loads(result.data) == {"reasoning": "[SKIP]", "reasoning_details": [{"type": "reasoning.text", "text": "[SKIP]"}]}
    assert result.written[0].steps[0].reasoning[0].text == "[SKIP]"


def test_locate_and_splice():
    assert [locate("ab", "ab"), locate("abc", "ab"), locate("xaby", "ab"), locate("abab", "b"), locate(3, "a")] == ["whole", "prefix", "unique", None, None]
    with pytest.raises(ValueError, match="no longer holds"):
        splice("changed", "whole", "orig", "new")
    with pytest.raises(ValueError, match="unknown site kind"):
        splice("x", "nope", "x", "y")


def test_a_registered_site_kind_is_used_by_splice():
    register_site_kind("upper-test", lambda value, _arg, old, new: value.replace(old.upper(), new) if old.upper() in value else None)
    assert splice("say HI", "upper-test", "hi", "yo") == "say yo"
    with pytest.raises(ValueError, match="registered already"):
        register_site_kind("whole", lambda *a: None)


def test_an_edited_part_without_a_textref_is_an_adapter_bug():
    records = whole(b'{"a": "x"}', {"a": "x"})
    doc = doc_of(records, [Part("reasoning", "x", ref=("legacy", 0))])
    with pytest.raises(TypeError, match="no TextRef"):
        write_back(records, doc, edit(doc, ["y"]))


def test_an_edited_record_writes_back_every_number_it_holds_as_read():
    """Edited records are re-serialised: an integer beyond 64 bits (orjson would read a float)
    and NaN (Python's writer emits it; orjson would write null) come back as they were."""
    from iclr_cli.jsonio import dumps_like, loads

    line = b'{"id":18446744073709551617,"score":NaN,"n":3,"text":"old"}'
    value = loads(line)
    assert value["id"] == 18446744073709551617 and value["score"] != value["score"]
    value["text"] = "new"
    assert dumps_like(value, line) == b'{"id":18446744073709551617,"score":NaN,"n":3,"text":"new"}'


@pytest.mark.parametrize("text, why", [
    ('{"a": 1e400}', "the number 1e400 is beyond the range of a double"),
    ("[" * 3000 + "]" * 3000, "nested deeper than the JSON parser follows"),
    ('{"a": ' + "7" * 5001 + "}", "an integer of more than 4,300 digits"),
])
def test_a_document_no_writer_could_give_back_is_an_input_error(tmp_path, text, why):
    from iclr_cli.errors import InputError
    from iclr_cli.formats.reading import parse_document

    with pytest.raises(InputError, match=why):
        parse_document(text.encode(), "f.json")
