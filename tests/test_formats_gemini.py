"""Gemini native contents: sniffed as its own format (never OpenAI chat), thoughts are
reasoning, a part with a thoughtSignature is never edited, byte-exact round trip."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from format_helpers import SAMPLES, run_cli
from iclr_cli.blocks import SKIP
from iclr_cli.errors import InputError
from iclr_cli.formats import registry
from iclr_cli.formats.adapters.gemini import ADAPTER
from iclr_cli.trajectory import WriteBack

SAMPLE = SAMPLES / "gemini_contents.json"


def signed_parts(doc) -> list[dict]:
    """Every part carrying a thought signature, in document order."""
    contents = doc["contents"] if isinstance(doc, dict) else doc
    return [p for c in contents for p in c["parts"] if "thoughtSignature" in p or "thought_signature" in p]


def test_sample_is_gemini_and_parsed_into_steps():
    data = SAMPLE.read_bytes()
    assert registry.detect(data, str(SAMPLE)).name == "gemini"
    [traj] = ADAPTER.load(data, "g.json").trajectories
    assert [p.label for p in traj.prompt] == ["system", "tools", "user", "user"]
    assert json.loads(traj.prompt[1].text)[0]["functionDeclarations"][0]["name"] == "read_file"
    image = traj.prompt[3]
    assert image.text == "" and image.media.mime == "image/png" and image.media.kind == "image" and len(image.media.data) == 88
    assert [[(p.kind, p.label) for p in s.parts] for s in traj.steps] == [
        [("reasoning", "reasoning"), ("action", "tool_call:read_file"), ("action", "tool_call:run_tests"),
         ("observation", "tool_result"), ("observation", "tool_result")],
        [("reasoning", "reasoning"), ("reasoning", "reasoning"), ("action", "assistant"), ("action", "tool_call:run_tests"),
         ("observation", "tool_result")],
        [("reasoning", "reasoning"), ("action", "assistant")],
    ]
    # the signed thought is read-only: not part of R_t
    assert [p.write_back for p in traj.steps[1].parts[:2]] == [WriteBack.READ_ONLY, WriteBack.IN_PLACE]
    assert [len(s.reasoning) for s in traj.steps] == [1, 1, 1]
    assert traj.meta == {"format": "gemini", "model": "gemini-2.5-pro"}


def test_calls_without_ids_pair_with_responses_by_name_not_position():
    [traj] = ADAPTER.load(SAMPLE.read_bytes(), "g.json").trajectories
    step = traj.steps[0].parts
    calls = {p.call_id: p.label for p in step if p.kind == "action"}
    assert calls == {"call_0_0": "tool_call:read_file", "call_0_1": "tool_call:run_tests"}
    results = [(p.call_id, json.loads(p.text)["output"][:6]) for p in step if p.kind == "observation"]
    assert results == [("call_0_1", "FAILED"), ("call_0_0", "PATTER")]  # responses came back run_tests first


def test_ids_given_by_the_api_are_kept():
    doc = {"contents": [
        {"role": "user", "parts": [{"text": "go"}]},
        {"role": "model", "parts": [{"functionCall": {"id": "fc-2", "name": "f", "args": {}}}, {"functionCall": {"id": "fc-1", "name": "f", "args": {"a": 1}}}]},
        {"role": "user", "parts": [{"functionResponse": {"id": "fc-1", "name": "f", "response": {"x": 1}}}, {"functionResponse": {"id": "fc-2", "name": "f", "response": {"x": 2}}}]},
    ]}
    [traj] = ADAPTER.load(json.dumps(doc).encode(), "g.json").trajectories
    assert [p.call_id for p in traj.steps[0].parts] == ["fc-2", "fc-1", "fc-1", "fc-2"]


@pytest.mark.parametrize(
    "doc",
    [
        # a bare chat history with only text: no Gemini-only key, but "parts" and no "content"
        [{"role": "user", "parts": [{"text": "hi"}]}, {"role": "model", "parts": [{"text": "think", "thought": True}, {"text": "hello"}]}],
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        {"request": {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}, "response": {"candidates": [{"content": {"role": "model", "parts": [{"text": "yo"}]}}]}},
        # the Python SDK's snake_case dump
        {"system_instruction": {"parts": [{"text": "be brief"}]}, "contents": [{"role": "model", "parts": [{"text": "a", "thought": True, "thought_signature": "c2ln"}]}]},
    ],
    ids=["history", "request", "request-response", "snake-case"],
)
def test_gemini_shapes_are_never_read_as_openai_chat(doc):
    data = json.dumps(doc, indent=1).encode()
    assert registry.detect(data, "x.json").name == "gemini"
    assert registry.detect(json.dumps(doc).encode() + b"\n", "x.jsonl").name == "gemini"
    [traj] = ADAPTER.load(data, "x.json").trajectories
    assert traj.steps or traj.prompt


def test_request_response_record_reads_reply_and_model():
    doc = {"request": {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
           "response": {"modelVersion": "gemini-2.5-flash", "candidates": [{"content": {"role": "model", "parts": [{"text": "Plan.\n\nAct.", "thought": True}, {"text": "yo"}]}}]}}
    [traj] = ADAPTER.load(json.dumps(doc).encode(), "x.json").trajectories
    assert [(p.kind, p.text) for p in traj.steps[0].parts] == [("reasoning", "Plan.\n\nAct."), ("action", "yo")]
    assert traj.meta["model"] == "gemini-2.5-flash"


def test_snake_case_signed_thought_is_read_only():
    doc = {"contents": [{"role": "model", "parts": [{"text": "a\n\nb", "thought": True, "thought_signature": "c2ln"}, {"text": "c\n\nd", "thought": True}]}]}
    [traj] = ADAPTER.load(json.dumps(doc).encode(), "x.json").trajectories
    assert [p.write_back for p in traj.steps[0].parts] == [WriteBack.READ_ONLY, WriteBack.IN_PLACE]


def test_round_trip_is_byte_identical_for_json_and_jsonl():
    data = SAMPLE.read_bytes()
    doc = ADAPTER.load(data, "g.json")
    assert ADAPTER.dump(doc, doc.trajectories) == data
    record = json.loads(data)
    jsonl = (json.dumps(record, ensure_ascii=False) + "\r\n" + json.dumps(record["contents"]) + "\n").encode()
    doc = ADAPTER.load(jsonl, "g.jsonl")
    assert len(doc.trajectories) == 2
    assert ADAPTER.dump(doc, doc.trajectories) == jsonl


@pytest.mark.parametrize("variant", ["iclr", "step-only", "delete-all", "random-40"])
def test_prune_edits_only_unsigned_thoughts(tmp_path, capsys, variant):
    out = tmp_path / "out.json"
    code, _, err = run_cli(capsys, "prune", str(SAMPLE), "--variant", variant, "--model", "fake", "-o", str(out), "-q")
    assert code == 0, err
    before, after = json.loads(SAMPLE.read_bytes()), json.loads(out.read_bytes())
    assert signed_parts(after) == signed_parts(before)  # every signed part, byte for byte as JSON
    old_thoughts = [p["text"] for c in before["contents"] for p in c["parts"] if p.get("thought") and "thoughtSignature" not in p]
    new_thoughts = [p["text"] for c in after["contents"] for p in c["parts"] if p.get("thought") and "thoughtSignature" not in p]
    if variant == "delete-all":
        assert new_thoughts == []  # emptied thoughts leave parts (the API rejects empty text)
    else:
        assert len(new_thoughts) == len(old_thoughts) and new_thoughts != old_thoughts
    strip = lambda d: [[p for p in c["parts"] if not (p.get("thought") and "thoughtSignature" not in p)] for c in d["contents"]]  # noqa: E731
    assert strip(after) == strip(before)
    assert {k: v for k, v in after.items() if k != "contents"} == {k: v for k, v in before.items() if k != "contents"}


def test_iclr_variant_writes_skip_markers_into_thought_text(tmp_path, capsys):
    out = tmp_path / "out.json"
    assert run_cli(capsys, "prune", str(SAMPLE), "--variant", "iclr", "--model", "fake", "-o", str(out), "-q")[0] == 0
    after = json.loads(out.read_bytes())
    first = after["contents"][1]["parts"][0]
    assert first["thought"] is True and SKIP in first["text"]
    assert out.read_bytes().startswith(b'{\n  "model": "gemini-2.5-pro",\n  "systemInstruction"')  # the file's own layout


def test_cli_prune_variant_none_is_the_identity(tmp_path, capsys):
    out = tmp_path / "out.json"
    assert run_cli(capsys, "prune", str(SAMPLE), "--variant", "none", "--model", "fake", "-o", str(out), "-q")[0] == 0
    assert out.read_bytes() == SAMPLE.read_bytes()


def test_a_thought_that_is_the_only_part_stays_as_empty_text(tmp_path, capsys):
    doc = {"contents": [{"role": "user", "parts": [{"text": "q"}]}, {"role": "model", "parts": [{"text": "a\n\nb", "thought": True}]},
                        {"role": "model", "parts": [{"text": "c\n\nd", "thought": True}, {"text": "answer"}]}]}
    src = tmp_path / "g.json"
    src.write_text(json.dumps(doc))
    out = tmp_path / "o.json"
    assert run_cli(capsys, "prune", str(src), "--variant", "delete-all", "--model", "fake", "-o", str(out), "-q")[0] == 0
    assert json.loads(out.read_bytes())["contents"][1:] == [
        {"role": "model", "parts": [{"text": "", "thought": True}]},
        {"role": "model", "parts": [{"text": "answer"}]},
    ]


def test_unknown_model_part_is_reported_as_unrecognised():
    doc = {"contents": [{"role": "model", "parts": [{"text": "hi"}, {"toolCallV9": {"x": 1}, "thoughtSignature": "c2ln"}, {"text": "", "thoughtSignature": "c2ln"}]}]}
    loaded = ADAPTER.load(json.dumps(doc).encode(), "x.json")
    assert [(u.line, u.field) for u in loaded.unrecognised] == [(None, "contents[0].parts[1].toolCallV9")]
    # a part holding only a signature carries nothing and is not reported
    assert [p.text for p in loaded.trajectories[0].steps[0].parts] == ["hi"]


@pytest.mark.parametrize(
    "doc, line, field",
    [
        ({"contents": [{"role": "model", "parts": [{"text": 3}]}]}, None, "contents[0].parts[0].text"),
        ({"contents": [{"role": "model", "parts": ["text"]}]}, None, "contents[0].parts[0]"),
        ({"systemInstruction": {"parts": [{"inlineData": {}}]}, "contents": [{"parts": [{"text": "x"}]}]}, None, "systemInstruction.parts[0]"),
    ],
)
def test_bad_input_names_the_field(doc, line, field):
    with pytest.raises(InputError) as exc:
        ADAPTER.load(json.dumps(doc).encode(), "bad.json")
    assert exc.value.line == line and exc.value.field == field


def test_jsonl_line_without_a_conversation_names_the_line():
    data = b'{"contents": [{"parts": [{"text": "x"}]}]}\n{"foo": 1}\n'
    with pytest.raises(InputError) as exc:
        ADAPTER.load(data, "g.jsonl")
    assert exc.value.line == 2 and "no Gemini conversation" in str(exc.value)


SCALAR = st.none() | st.booleans() | st.integers(-2, 2) | st.text(alphabet="ab \n", max_size=6)
PART = st.one_of(
    st.builds(lambda t: {"text": t}, SCALAR),
    st.builds(lambda t, s: {"text": t, "thought": True, **({"thoughtSignature": s} if s else {})}, st.text(alphabet="ab\n", max_size=8), st.sampled_from(["", "c2ln"])),
    st.builds(lambda n, a, i: {"functionCall": {"name": n, "args": a, **({"id": i} if i else {})}}, SCALAR, SCALAR | st.dictionaries(st.text(max_size=2), SCALAR, max_size=2), st.sampled_from(["", "x1"])),
    st.builds(lambda n, r, ps: {"functionResponse": {"name": n, "response": r, **({"parts": ps} if ps is not None else {})}}, SCALAR, SCALAR, st.none() | st.lists(SCALAR | st.just({"inlineData": {"mimeType": "image/png", "data": "AA=="}}), max_size=2)),
    st.builds(lambda m, d: {"inlineData": {"mimeType": m, "data": d}}, SCALAR, SCALAR),
    st.dictionaries(st.sampled_from(["executableCode", "codeExecutionResult", "fileData", "zzz", "thought_signature"]), SCALAR | st.dictionaries(st.sampled_from(["code", "output", "fileUri"]), SCALAR, max_size=2), max_size=2),
)
CONTENT = st.builds(lambda r, ps: {"role": r, "parts": ps}, st.sampled_from(["user", "model", "model", "function", 3]), st.lists(PART, max_size=4) | st.lists(PART | SCALAR, max_size=3))


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(contents=st.lists(CONTENT, min_size=1, max_size=5) | st.lists(CONTENT | SCALAR, min_size=1, max_size=3), system=st.none() | SCALAR | st.just({"parts": [{"text": "s"}]}), jsonl=st.booleans())
def test_structured_fuzz_reads_cleanly_and_writes_back(contents, system, jsonl):
    record = {"contents": contents, **({"systemInstruction": system} if system is not None else {})}
    data = (json.dumps(record) + "\n").encode() if jsonl else json.dumps(record, indent=2).encode()
    try:
        doc = ADAPTER.load(data, "fuzz.json")
    except InputError as exc:
        assert "fuzz.json" in str(exc)
        return
    assert ADAPTER.dump(doc, doc.trajectories) == data
    emptied = [t.with_steps([s.with_reasoning([""] * len(s.reasoning)) for s in t.steps]) for t in doc.trajectories]
    after = json.loads(ADAPTER.dump(doc, emptied))
    assert signed_parts(after) == signed_parts(json.loads(data))


def test_a_content_without_parts_is_named_by_its_field():
    doc = {"contents": [{"role": "user", "parts": [{"text": "q"}]}, {"role": "model", "text": "flat"}]}
    text = json.dumps(doc, indent=2)
    with pytest.raises(InputError) as exc:
        ADAPTER.load(text.encode(), "g.json")
    opens = text[: text.index('"role": "model"')].rindex("{")  # the content lacking parts starts there
    assert exc.value.line == text.count("\n", 0, opens) + 1 and exc.value.field == "contents[1].parts"
    with pytest.raises(InputError, match="no Gemini conversation found"):
        ADAPTER.load(json.dumps({"messages": []}, indent=2).encode(), "g.json")
