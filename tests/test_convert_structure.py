"""``iclr convert`` keeps the whole structure or refuses: results stay paired with their own
calls by id (never by position), images are carried in the target's form or the conversion
is refused naming the part (docs/FORMAT.md, "convert"; field cases 07 and 08)."""

import json
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from format_helpers import field_case, run_cli
from iclr_cli.errors import UsageError
from iclr_cli.formats import registry
from iclr_cli.formats.convert import check, convert_trajectories, pairing
from iclr_cli.trajectory import Media, Part, Step, Trajectory

PNG = Media("image", mime="image/png", data="iVBORw0KGgoAAAANSUhEUg==")


case = field_case


def records(data: bytes) -> list[dict]:
    return [json.loads(x) for x in data.splitlines() if x.strip()]


# --- case 07: parallel results that come back in another order than the calls --------------

@pytest.mark.parametrize("to", ["anthropic", "openai", "iclr"])
def test_case_07_each_result_stays_with_its_own_call(capsys, tmp_path, to):
    out = tmp_path / "c.jsonl"
    code, _, err = run_cli(capsys, "convert", str(case("07-parallel-results-permuted.json")), "--to", to, "-o", str(out))
    assert code == 0, err
    [again] = registry.get(to).load(out.read_bytes(), "c.jsonl").trajectories
    step = again.steps[0].parts
    args = {p.call_id: json.loads(p.text)["path"] for p in step if p.label == "tool_call:read_file"}
    answered = {args[p.call_id]: p.text for p in step if p.label == "tool_result"}
    assert answered == {"a.cfg": "limit = 10  # from a.cfg", "b.cfg": "limit = 12  # from b.cfg"}
    [record] = records(out.read_bytes())
    if to == "anthropic":
        assistant, results = record["messages"][1]["content"], record["messages"][2]["content"]
        assert [(b["id"], b["input"]["path"]) for b in assistant if b["type"] == "tool_use"] == [("call_a", "a.cfg"), ("call_b", "b.cfg")]
        assert [(b["tool_use_id"], b["content"]) for b in results] == [("call_b", "limit = 12  # from b.cfg"), ("call_a", "limit = 10  # from a.cfg")]
    if to == "openai":
        tools = [m for m in record["messages"] if m["role"] == "tool"]
        assert [(m["tool_call_id"], m["content"]) for m in tools] == [("call_b", "limit = 12  # from b.cfg"), ("call_a", "limit = 10  # from a.cfg")]


def test_a_writer_pairing_by_position_is_caught_by_the_check(monkeypatch):
    """The old rule (k-th result answers the k-th call) must not pass the lossless check."""
    calls = [Part("action", '{"p": "a"}', label="tool_call:read", call_id="A"), Part("action", '{"p": "b"}', label="tool_call:read", call_id="B")]
    traj = Trajectory("t", (Part("prompt", "go", label="user"),), (Step(0, (*calls, Part("observation", "b!", label="tool_result", call_id="B"), Part("observation", "a!", label="tool_result", call_id="A"))),))

    def by_position(traj, step, to):
        ids = iter(p.call_id for p in step.parts if pairing.is_call(p))
        return replace(step, parts=tuple(replace(p, call_id=next(ids)) if pairing.is_result(p) else p for p in step.parts))

    from iclr_cli.formats.convert import anthropic, openai

    monkeypatch.setattr(openai, "with_call_ids", by_position)
    monkeypatch.setattr(anthropic, "with_call_ids", by_position)
    for to in ("openai", "anthropic"):
        with pytest.raises(UsageError, match=r"step 0: part 2 \(observation 'tool_result'\) would read back paired with call 'A' instead of 'B'"):
            convert_trajectories([traj], to)


def test_result_naming_a_call_the_step_does_not_make_is_refused():
    traj = Trajectory("t", (), (Step(0, (Part("action", "{}", label="tool_call:x", call_id="A"), Part("observation", "r", label="tool_result", call_id="Z"))),))
    with pytest.raises(UsageError, match=r"a tool result for call 'Z', which this step does not make"):
        convert_trajectories([traj], "openai")


def test_formats_without_ids_pair_in_order_and_get_ids():
    step = Step(0, (Part("action", "{}", label="tool_call:x"), Part("action", "{}", label="tool_call:y"),
                    Part("observation", "rx", label="tool_result"), Part("observation", "ry", label="tool_result")))
    [record] = records(convert_trajectories([Trajectory("t", (), (step,))], "openai"))
    assert [(m["tool_call_id"], m["content"]) for m in record["messages"][1:]] == [("call_0_0", "rx"), ("call_0_1", "ry")]
    assert [c["id"] for c in record["messages"][0]["tool_calls"]] == ["call_0_0", "call_0_1"]


# --- case 08 and other images ----------------------------------------------------------------

def test_case_08_to_anthropic_refuses_naming_the_image(capsys, tmp_path):
    out = tmp_path / "c.jsonl"
    out.write_bytes(b"untouched")
    code, stdout, err = run_cli(capsys, "convert", str(case("08-assistant-content-parts.json")), "--to", "anthropic", "-o", str(out))
    assert code == 2
    assert "cannot convert 08-assistant-content-parts.json#0 to anthropic without losing data: prompt: part 2 (prompt 'user', image/png): " in err
    assert "OpenAI image detail 'low'" in err and "[image]" not in stdout
    assert out.read_bytes() == b"untouched"


@pytest.mark.parametrize("to", ["openai", "iclr"])
def test_case_08_image_is_carried_where_the_target_holds_it(capsys, tmp_path, to):
    source = case("08-assistant-content-parts.json")
    out = tmp_path / "c.jsonl"
    code, _, err = run_cli(capsys, "convert", str(source), "--to", to, "-o", str(out))
    assert code == 0, err
    original = json.loads(source.read_bytes())["messages"][1]["content"][1]["image_url"]
    [again] = registry.get(to).load(out.read_bytes(), "c.jsonl").trajectories
    image = again.prompt[2]
    assert image.media == Media("image", mime="image/png", data=original["url"].split(",", 1)[1], detail="low")
    [record] = records(out.read_bytes())
    if to == "openai":
        assert record["messages"][1]["content"][1] == {"type": "image_url", "image_url": original}
    assert b"[image]" not in out.read_bytes()


def test_openai_image_without_detail_becomes_an_anthropic_image_block():
    traj = Trajectory("t", (Part("prompt", "look", label="user"), Part("prompt", "", label="user", media=PNG),
                            Part("prompt", "", label="user", media=Media("image", url="https://example.org/a.jpg"))), ())
    [record] = records(convert_trajectories([traj], "anthropic"))
    assert record["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "look"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG.data}},
        {"type": "image", "source": {"type": "url", "url": "https://example.org/a.jpg"}},
    ]}]


SCREENSHOT_SESSION = [
    {"type": "user", "sessionId": "s1", "uuid": "u1", "parentUuid": None, "message": {"role": "user", "content": "Check the page."}},
    {"type": "assistant", "sessionId": "s1", "uuid": "u2", "parentUuid": "u1", "message": {"id": "m1", "role": "assistant", "model": "claude", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "screenshot", "input": {"url": "http://localhost"}}]}},
    {"type": "user", "sessionId": "s1", "uuid": "u3", "parentUuid": "u2", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": [
            {"type": "text", "text": "Page at 1280x720"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG.data}}]}]}},
    {"type": "assistant", "sessionId": "s1", "uuid": "u4", "parentUuid": "u3", "message": {"id": "m2", "role": "assistant", "model": "claude", "content": [
        {"type": "text", "text": "The page renders."}]}},
]


@pytest.mark.parametrize("to", ["anthropic", "iclr", "openai"])
def test_claude_code_screenshot_result_is_carried_or_refused(capsys, tmp_path, to):
    src = tmp_path / "session.jsonl"
    src.write_text("".join(json.dumps(e) + "\n" for e in SCREENSHOT_SESSION))
    out = tmp_path / "c.jsonl"
    code, _, err = run_cli(capsys, "convert", str(src), "--to", to, "-o", str(out))
    if to == "openai":
        assert code == 2
        assert "step 0: part 2 (observation 'tool_result', image/png): OpenAI chat tool messages hold text only" in err
        return
    assert code == 0, err
    [again] = registry.get(to).load(out.read_bytes(), "c.jsonl").trajectories
    assert [(p.label, p.text, p.call_id, p.media) for p in again.steps[0].parts[1:]] == [
        ("tool_result", "Page at 1280x720", "toolu_1", None), ("tool_result", "", "toolu_1", PNG)]
    if to == "anthropic":
        [record] = records(out.read_bytes())
        assert record["messages"][2]["content"][0]["content"][1] == SCREENSHOT_SESSION[2]["message"]["content"][0]["content"][1]


def test_check_names_lost_media_and_changed_ids():
    a = Part("observation", "", label="user", media=PNG)
    assert check.difference(a, replace(a, media=None)) == "would lose its media"
    assert check.difference(a, replace(a, media=replace(PNG, data="AAAA"))) == "would read back with other media"
    b = Part("observation", "r", label="tool_result", call_id="A")
    assert check.difference(b, replace(b, call_id="B")) == "would read back paired with call 'B' instead of 'A'"
    assert check.difference(b, b) is None


def test_unrecognised_text_blocks_a_conversion(capsys, tmp_path):
    src = tmp_path / "g.json"
    src.write_text(json.dumps({"contents": [{"role": "user", "parts": [{"text": "q"}]}, {"role": "model", "parts": [{"mysteryPart": {"x": 1}}]}]}))
    code, _, err = run_cli(capsys, "convert", str(src), "--to", "iclr")
    assert code == 2
    assert f"cannot convert {src} to iclr without losing data: 1 text or field the gemini adapter does not read would not be carried" in err
    assert f"the first: {src}: field 'contents[1].parts[0].mysteryPart': model part with mysteryPart" in err


# --- property: permutations and multimodal parts ---------------------------------------------

WORD = st.text(alphabet="abcdefgh ijk.\n", min_size=1, max_size=12).filter(lambda s: s.strip())
IMAGE = st.builds(
    Media, st.just("image"), st.sampled_from(["image/png", "image/jpeg"]), st.sampled_from(["iVBORw0KGgo=", "/9j/4AAQSkZJRg=="]),
    st.none(), st.sampled_from([None, None, "low", "high"]),
) | st.builds(Media, st.just("image"), st.none(), st.none(), st.sampled_from(["https://example.org/x.png"]), st.sampled_from([None, "low"]))


@st.composite
def trajectories(draw):
    prompt = [Part("prompt", draw(WORD), label="system"), Part("prompt", draw(WORD), label="user")]
    if draw(st.booleans()):
        prompt.append(Part("prompt", "", label="user", media=draw(IMAGE)))
    steps = []
    for index in range(draw(st.integers(1, 3))):
        parts = []
        if draw(st.booleans()):
            parts.append(Part("reasoning", draw(WORD), label="reasoning"))
        if draw(st.booleans()):
            parts.append(Part("action", draw(WORD), label="assistant"))
        n = draw(st.integers(0, 3))
        with_ids = draw(st.booleans())
        ids = [f"call_{index}_{draw(st.text(alphabet='xyz', min_size=3, max_size=3))}{k}" if with_ids else None for k in range(n)]
        for k in range(n):
            parts.append(Part("action", json.dumps({"k": k, "s": index}), label=f"tool_call:{draw(st.sampled_from(['read', 'bash']))}", call_id=ids[k]))
        order = draw(st.permutations(range(n))) if with_ids else list(range(n))
        for k in order:
            parts.append(Part("observation", draw(WORD), label="tool_result", call_id=ids[k]))
            if draw(st.integers(0, 4)) == 0:
                parts.append(Part("observation", "", label="tool_result", call_id=ids[k], media=draw(IMAGE)))
        if draw(st.booleans()):
            parts.append(Part("observation", draw(WORD), label="user"))
            if draw(st.booleans()):
                parts.append(Part("observation", "", label="user", media=draw(IMAGE)))
        steps.append(Step(index, tuple(parts)))
    return Trajectory("gen", tuple(prompt), tuple(steps))


def answered_calls(traj: Trajectory) -> list:
    """Per step, for each result part in order: the (label, arguments) of the call it answers,
    found by id, or by order where the calls have no ids (this test's own pairing)."""
    out = []
    for step in traj.steps:
        calls = [p for p in step.parts if p.label.startswith("tool_call:")]
        by_id = {p.call_id: p for p in calls}
        by_order = any(p.call_id is None for p in calls)
        k = -1
        for p in step.parts:
            if p.label == "tool_result":
                if by_order:
                    k += p.media is None
                    call = calls[k]
                else:
                    call = by_id[p.call_id]
                out.append((step.index, call.label, json.loads(call.text)))
    return out


def view(traj: Trajectory) -> list:
    return [[(p.kind, p.label, p.text, p.media) for p in ps] for ps in (traj.prompt, *(s.parts for s in traj.steps))]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traj=trajectories(), to=st.sampled_from(["iclr", "openai", "anthropic"]))
def test_conversion_keeps_every_part_and_pairing_or_refuses(traj, to):
    images = [p for ps in (traj.prompt, *(s.parts for s in traj.steps)) for p in ps if p.media is not None]
    must_refuse = (to == "openai" and any(p.label == "tool_result" for p in images)) or (to == "anthropic" and any(p.media.detail for p in images))
    try:
        data = convert_trajectories([traj], to)
    except UsageError as exc:
        assert must_refuse, str(exc)
        assert "image" in str(exc)
        return
    assert not must_refuse
    [again] = registry.get(to).load(data, "out.jsonl").trajectories
    assert view(again) == view(traj)
    assert answered_calls(again) == answered_calls(traj)
    given_ids = [p.call_id for s in traj.steps for p in s.parts if p.call_id is not None]
    kept = [p.call_id for s in again.steps for p in s.parts if p.call_id is not None]
    assert all(i in kept for i in given_ids)
