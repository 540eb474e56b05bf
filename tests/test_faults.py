"""Input that must not break iclr: JSONL faults, text edge cases, output safety.

Each case feeds a small crafted file and checks the exact behaviour: exit 2 naming file and
line by default; with --skip-bad-lines the bad line is reported and kept byte for byte while
the rest is processed in order.
"""

import json

import orjson
import pytest

from iclr_cli.cli.app import main
from iclr_cli.formats import registry

REASONING = "Plan the change.\n\nRead the code.\n\nWrite the fix.\n\nRun the tests.\n\nReport back."


def record(i=0, reasoning=REASONING, content="ok"):
    return {"id": i, "messages": [
        {"role": "user", "content": "Task"},
        {"role": "assistant", "reasoning_content": reasoning, "content": content},
    ]}


def line(i=0, **kw):
    return json.dumps(record(i, **kw), ensure_ascii=False).encode()


def run_cli(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    cap = capsys.readouterr()
    return exc.value.code, cap.out, cap.err


def prune(path, capsys, *extra):
    return run_cli(["prune", str(path), "--model", "fake", *extra], capsys)


@pytest.mark.parametrize(
    "bad,expect",
    [
        (line(1)[:30], "not a complete JSON record"),
        (b"\x00" * 16, "only NUL bytes"),
        (line(1) + line(2), "two JSON values on one line"),
        (b'{"messages": [{"role": "user", "content": "a', "not a complete JSON record"),
    ],
    ids=["cut-mid-record", "nul-bytes", "glued-records", "raw-newline-split"],
)
def test_bad_line_fails_with_location_then_skips(tmp_path, capsys, bad, expect):
    path = tmp_path / "in.jsonl"
    path.write_bytes(line(0) + b"\n" + bad + b"\n" + line(3) + b"\n")
    out = tmp_path / "out.jsonl"
    code, _, err = prune(path, capsys, "-o", str(out))
    assert code == 2
    assert f"{path}:2:" in err and expect in err
    assert not out.exists()

    code, _, err = prune(path, capsys, "-o", str(out), "--skip-bad-lines")
    assert code == 0
    assert f"{path}:2: skipped" in err
    lines = out.read_bytes().split(b"\n")
    assert lines[1] == bad
    assert orjson.loads(lines[0])["id"] == 0 and orjson.loads(lines[2])["id"] == 3
    assert b"[SKIP]" in lines[0] and b"[SKIP]" in lines[2]


def test_record_split_by_raw_newline_reports_both_halves(tmp_path, capsys):
    whole = line(1)
    cut = whole.index(b"Read the code")
    path = tmp_path / "in.jsonl"
    path.write_bytes(line(0) + b"\n" + whole[:cut] + b"\n" + whole[cut:] + b"\n")
    code, out, err = prune(path, capsys, "--skip-bad-lines")
    assert code == 0
    assert "in.jsonl:2: skipped" in err and "in.jsonl:3: skipped" in err
    assert out.encode().split(b"\n")[1:3] == [whole[:cut], whole[cut:]]


def test_empty_lines_bom_and_crlf_round_trip(tmp_path, capsys):
    data = b"\xef\xbb\xbf" + line(0) + b"\r\n\r\n" + line(1) + b"\r\n"
    path = tmp_path / "in.jsonl"
    path.write_bytes(data)
    code, out, _ = prune(path, capsys, "--variant", "none", "-q")
    assert code == 0 and out.encode() == data
    code, out, _ = prune(path, capsys, "-q")
    raw = out.encode()
    assert raw.startswith(b"\xef\xbb\xbf{") and raw.count(b"\r\n") == 3 and raw.count(b"[SKIP]") == 8


def test_lone_surrogates_are_read_and_written_back(tmp_path, capsys):
    text = "Odd bytes \\ud800 here.\\n\\nSecond thought.\\n\\nThird thought."
    raw = ('{"messages": [{"role": "user", "content": "x\\udfff"}, {"role": "assistant", "reasoning_content": "' + text + '", "content": "y"}]}').encode()
    path = tmp_path / "in.jsonl"
    path.write_bytes(raw + b"\n")
    code, out, _ = prune(path, capsys, "--variant", "none", "-q")
    assert code == 0 and out.encode() == raw + b"\n"
    code, out, _ = prune(path, capsys, "-q")
    assert code == 0
    edited = json.loads(out)
    assert edited["messages"][0]["content"] == "x\udfff"
    assert edited["messages"][1]["reasoning_content"].count("[SKIP]") == 2


def test_untouched_lines_keep_their_escaping_and_edited_lines_their_style(tmp_path, capsys):
    escaped = json.dumps(record(0, content="caf\u00e9 \U0001F469\u200d\U0001F4BB"), ensure_ascii=True).encode()
    raw_utf8 = json.dumps(record(1, reasoning="only one block", content="caf\u00e9"), ensure_ascii=False).encode()
    path = tmp_path / "in.jsonl"
    path.write_bytes(escaped + b"\n" + raw_utf8 + b"\n")
    code, out, _ = prune(path, capsys, "-q")
    first, second, _ = out.encode().split(b"\n")
    assert second == raw_utf8  # one block: nothing to prune, byte for byte
    assert b"\\u00e9" in first and b"[SKIP]" in first and not any(b > 127 for b in first)


def test_emoji_sequences_at_block_edges_survive(tmp_path, capsys):
    reasoning = "\U0001F469\u200d\U0001F4BB start\n\nmiddle \u2764\ufe0f\n\n\U0001F44D\U0001F3FD\n\nend \U0001F1FA\U0001F1F8"
    path = tmp_path / "in.json"
    path.write_text(json.dumps(record(0, reasoning=reasoning)["messages"], ensure_ascii=False))
    code, out, _ = prune(path, capsys, "-q")
    kept = json.loads(out)[1]["reasoning_content"]
    for block in kept.split("\n\n"):
        assert block == "[SKIP]" or block in reasoning


def test_error_mid_run_leaves_no_partial_file_and_input_untouched(tmp_path, capsys, monkeypatch):
    path = tmp_path / "in.jsonl"
    data = line(0) + b"\n"
    path.write_bytes(data)
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"previous result\n")

    def explode(*a, **k):
        raise RuntimeError("disk on fire")

    adapter = registry.get("openai")
    monkeypatch.setattr(type(adapter), "dump", explode)
    monkeypatch.setattr(type(adapter), "write", explode)  # the write-back engine's entry point
    with pytest.raises(RuntimeError):
        main(["prune", str(path), "--model", "fake", "-o", str(out)])
    assert out.read_bytes() == b"previous result\n"
    assert path.read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "out.jsonl"]


def test_empty_file_is_an_input_error(tmp_path, capsys):
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    code, _, err = run_cli(["score", str(path), "--model", "fake"], capsys)
    assert code == 2 and "empty.jsonl: file is empty" in err


def test_streamed_chunks_give_the_same_output_as_one_document(tmp_path):
    from iclr_cli.compress import Settings, compress_trajectories
    from iclr_cli.policies import parse_variant
    from iclr_cli.scoring.fake import FakeScorer

    data = b"".join(line(i) + b"\n" for i in range(7)) + b"\n"
    adapter = registry.get("openai")
    scorer = FakeScorer()
    settings = Settings(parse_variant("iclr"))

    def prune_doc(doc):
        results = compress_trajectories(doc.trajectories, settings, scorer, scorer.tokenizer)
        return adapter.dump(doc, [r.compressed for r in results])

    chunks = list(adapter.load_chunks(data, "in.jsonl", chunk_size=3))
    assert [len(c.trajectories) for c in chunks] == [3, 3, 1]
    assert [t.id for c in chunks for t in c.trajectories] == [f"in.jsonl#{i}" for i in range(7)]
    assert b"".join(prune_doc(c) for c in chunks) == prune_doc(adapter.load(data, "in.jsonl"))
