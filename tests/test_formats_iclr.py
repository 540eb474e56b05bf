"""Canonical iclr.trajectory/1 JSONL: schema checks with located errors, unknown fields kept,
edits rewrite only reasoning text, and every adapter's trajectories survive a write + read."""

import json

import pytest

from format_helpers import REALDATA, SAMPLES, run_cli
from iclr_cli.inputs import load_file
from iclr_cli.errors import InputError
from iclr_cli.formats import registry
from iclr_cli.formats.adapters.iclr_jsonl import ADAPTER, SCHEMA, to_record
from iclr_cli.trajectory import WriteBack

SAMPLE = SAMPLES / "canonical.iclr.jsonl"


def test_sample_is_detected_and_round_trips():
    data = SAMPLE.read_bytes()
    assert registry.detect(data, "x").name == "iclr"
    doc = ADAPTER.load(data, str(SAMPLE))
    assert [t.id for t in doc.trajectories] == ["weather-cli-7", "0199b2c1-5d0e-7a31-9f44-2f6c8e1d7a10"]
    assert [len(t.steps) for t in doc.trajectories] == [3, 1]
    assert doc.trajectories[1].steps[0].reasoning[0].write_back is WriteBack.OPAQUE
    assert ADAPTER.dump(doc, doc.trajectories) == data


def test_edit_rewrites_only_reasoning_text_and_keeps_unknown_fields(capsys, tmp_path):
    out = tmp_path / "out.jsonl"
    # the second trajectory's reasoning came beside encrypted_content: sealed unless dropped on request
    code, _, err = run_cli(capsys, "prune", str(SAMPLE), "--model", "fake", "--variant", "delete-all", "-o", str(out))
    assert code == 0, err
    assert out.read_bytes().splitlines()[1] == SAMPLE.read_bytes().splitlines()[1]
    code, _, err = run_cli(capsys, "prune", str(SAMPLE), "--model", "fake", "--variant", "delete-all", "--encrypted-reasoning", "drop", "-o", str(out))
    assert code == 0, err
    before = [json.loads(line) for line in SAMPLE.read_bytes().splitlines()]
    after = [json.loads(line) for line in out.read_bytes().splitlines()]
    for old, new in zip(before, after, strict=True):
        for s_old, s_new in zip(old["steps"], new["steps"], strict=True):
            for p_old, p_new in zip(s_old["parts"], s_new["parts"], strict=True):
                if p_old["kind"] == "reasoning":
                    assert p_new["text"] == ""
                    p_old, p_new = {k: v for k, v in p_old.items() if k != "text"}, {k: v for k, v in p_new.items() if k != "text"}
                assert p_new == p_old  # x_tokens, write_back, actions, observations kept
        strip = lambda r: {k: v for k, v in r.items() if k != "steps"}  # noqa: E731
        assert strip(new) == strip(old)  # x_run and meta kept
    assert after[0]["x_run"] == {"task": "weather-cli-7", "reward": 1.0}


@pytest.mark.parametrize(
    "line, message",
    [
        (b'{"schema": "iclr.trajectory/2", "id": "a", "steps": []}', "t.jsonl:1: field 'schema': unsupported schema 'iclr.trajectory/2'; this version reads 'iclr.trajectory/1'"),
        (b'{"schema": "iclr.trajectory/1", "id": 5, "steps": []}', "t.jsonl:1: field 'id': must be a string"),
        (b'{"schema": "iclr.trajectory/1", "id": "a"}', "t.jsonl:1: field 'steps': must be a list"),
        (b'{"schema": "iclr.trajectory/1", "id": "a", "steps": [{"index": 1, "parts": []}]}', "t.jsonl:1: field 'steps[0].index': must be 0 (steps are numbered from 0 in order)"),
        (b'{"schema": "iclr.trajectory/1", "id": "a", "steps": [{"parts": [{"kind": "prompt", "text": "x"}]}]}', "t.jsonl:1: field 'steps[0].parts[0].kind': must be one of reasoning, action, observation"),
        (b'{"schema": "iclr.trajectory/1", "id": "a", "steps": [{"parts": [{"kind": "reasoning", "text": "x", "write_back": "maybe"}]}]}', "t.jsonl:1: field 'steps[0].parts[0].write_back': must be one of in_place, signed, opaque, read_only"),
        (b'{"schema": "iclr.trajectory/1", "id": "a", "prompt": [{"kind": "prompt", "text": null}], "steps": []}', "t.jsonl:1: field 'prompt[0].text': must be a string"),
    ],
)
def test_bad_records_name_line_and_field(line, message):
    good = b'{"schema": "iclr.trajectory/1", "id": "ok", "steps": []}\n'
    with pytest.raises(InputError) as exc:
        ADAPTER.load(good + line, "t.jsonl")
    assert str(exc.value) == message.replace("t.jsonl:1", "t.jsonl:2")


def test_skip_bad_lines_passes_bad_records_through_unchanged():
    data = b'{"schema": "iclr.trajectory/1", "id": "ok", "steps": []}\n{"schema": "other"}\nnot json\n'
    doc = ADAPTER.load(data, "t.jsonl", skip_bad_lines=True)
    assert [t.id for t in doc.trajectories] == ["ok"]
    assert len(doc.warnings) == 2 and doc.warnings[0].startswith("t.jsonl:2: passed through unscored: field 'schema'")
    assert ADAPTER.dump(doc, doc.trajectories) == data


def test_chunks_dump_their_own_lines():
    lines = [json.dumps({"schema": SCHEMA, "id": f"t{i}", "steps": [{"parts": [{"kind": "reasoning", "text": "a\n\nb"}]}]}).encode() + b"\n" for i in range(5)]
    data = b"".join(lines)
    chunks = list(ADAPTER.load_chunks(data, "c.jsonl", chunk_size=2))
    assert [len(c.trajectories) for c in chunks] == [2, 2, 1]
    assert b"".join(ADAPTER.dump(c, c.trajectories) for c in chunks) == data


REAL_FILES = sorted(p for p in REALDATA.glob("*/*") if p.is_file()) if REALDATA.is_dir() else []


@pytest.mark.parametrize("path", REAL_FILES + sorted(SAMPLES.iterdir()), ids=lambda p: p.name)
def test_every_format_survives_canonical_write_and_read(path):
    adapter, doc = load_file(str(path))
    data = b"".join(json.dumps(to_record(t), ensure_ascii=False).encode() + b"\n" for t in doc.trajectories)
    again = ADAPTER.load(data, "c.jsonl").trajectories
    assert len(again) == len(doc.trajectories)
    for a, b in zip(doc.trajectories, again):
        view = lambda t: [[(p.kind, p.label, p.text, p.write_back) for p in ps] for ps in [t.prompt, *[s.parts for s in t.steps]]]  # noqa: E731
        assert (b.id, view(b)) == (a.id, view(a))
