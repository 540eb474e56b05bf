"""A session file read while its agent is still appending to it (a user trial: 4 of 6 prunes
against a live Claude Code writer exited 2). The file ends in a half-written line with no line
end; it is read up to the line before with one warning naming FILE:LINE, and write-back keeps
the half line byte for byte. Every other bad line stays an input error (docs/FORMAT.md, "Lines
that are not JSON, and a session being written")."""

import json

import pytest

from format_helpers import SAMPLES, run_cli

# sample -> (its number of lines, options that make prune edit it: the Claude Code sample's
# thinking is all signed, sealed unless --signed-thinking edit)
CASES = {
    "claude_code_session.jsonl": (20, ("--signed-thinking", "edit")),
    "qwen_code_session.jsonl": (13, ()),
}
PRUNE = ("--model", "fake", "--variant", "delete-all")


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ICLR_CACHE_DIR", str(tmp_path / "cache"))


def sample(name: str) -> bytes:
    return (SAMPLES / name).read_bytes()


def half_of_last_line(data: bytes) -> bytes:
    """The first half of the file's last record: what a writer has flushed of the next one."""
    last = data.rstrip(b"\n").rsplit(b"\n", 1)[1]
    return last[: len(last) // 2]


def live_copy(tmp_path, name: str) -> tuple:
    data = sample(name)
    partial = half_of_last_line(data)
    path = tmp_path / f"live-{name}"
    path.write_bytes(data + partial)
    return path, partial


def warning_of(path, line: int) -> str:
    return (f"{path}:{line}: the last line looks like one still being written (no line end yet, and not complete JSON): "
            f"read up to line {line - 1}; this line is not scored, and prune writes it back byte for byte")


@pytest.mark.parametrize("name", CASES)
def test_score_reads_up_to_the_line_being_written_and_says_so(capsys, tmp_path, name):
    lines, opts = CASES[name]
    assert sample(name).count(b"\n") == lines
    path, _ = live_copy(tmp_path, name)
    code, out, err = run_cli(capsys, "score", str(path), "--model", "fake", *opts)
    assert code == 0, err
    assert err.count("still being written") == 1
    assert warning_of(path, lines + 1) in " ".join(err.split())  # rich wraps long warnings
    # the records are those of the file without the half line (the same name in another folder)
    (tmp_path / "whole").mkdir()
    (tmp_path / "whole" / path.name).write_bytes(sample(name))
    code, whole, _ = run_cli(capsys, "score", str(tmp_path / "whole" / path.name), "--model", "fake", *opts)
    assert code == 0 and out.count("\n") > 0
    assert out.replace(str(path), "FILE") == whole.replace(str(tmp_path / "whole" / path.name), "FILE")


@pytest.mark.parametrize("name", CASES)
def test_prune_writes_the_half_line_back_byte_for_byte(capsys, tmp_path, name):
    _, opts = CASES[name]
    path, partial = live_copy(tmp_path, name)
    code, _, err = run_cli(capsys, "prune", str(path), *PRUNE, *opts, "-o", str(tmp_path / "live.out"))
    assert code == 0, err
    code, _, err = run_cli(capsys, "prune", str(SAMPLES / name), *PRUNE, *opts, "-o", str(tmp_path / "whole.out"))
    assert code == 0, err
    whole = (tmp_path / "whole.out").read_bytes()
    assert whole != sample(name)  # the prune did edit reasoning
    assert (tmp_path / "live.out").read_bytes() == whole + partial
    # in place: the same bytes
    code, _, err = run_cli(capsys, "prune", str(path), *PRUNE, *opts, "-i")
    assert code == 0, err
    assert path.read_bytes() == whole + partial


@pytest.mark.parametrize("name", CASES)
def test_savings_estimates_the_complete_lines_and_says_so(capsys, tmp_path, name):
    lines, _ = CASES[name]
    path, _ = live_copy(tmp_path, name)
    code, out, err = run_cli(capsys, "savings", str(path), "--model", "fake", "--variant", "delete-all", "--json")
    assert code == 0, err
    live = json.loads(out)
    assert live["unfinished"] == [{"file": str(path), "line": lines + 1}]
    assert warning_of(path, lines + 1) in " ".join(err.split())
    code, out, _ = run_cli(capsys, "savings", str(SAMPLES / name), "--model", "fake", "--variant", "delete-all", "--json")
    assert code == 0
    assert live["summary"] == json.loads(out)["summary"]
    # the second run takes the file from the cache, and still says it
    code, out, err = run_cli(capsys, "savings", str(path), "--model", "fake", "--variant", "delete-all", "--json")
    assert code == 0 and json.loads(out)["files"]["cached"] == 1
    assert warning_of(path, lines + 1) in " ".join(err.split())


@pytest.mark.parametrize("name", CASES)
def test_a_bad_last_line_that_ends_in_a_newline_is_still_an_error(capsys, tmp_path, name):
    lines, opts = CASES[name]
    path = tmp_path / name
    path.write_bytes(sample(name) + half_of_last_line(sample(name)) + b"\n")
    for command, given in (("score", opts), ("prune", opts), ("savings", ())):
        code, _, err = run_cli(capsys, command, str(path), "--model", "fake", *given)
        assert code == 2, (command, err)
        assert f"{path}:{lines + 1}: line is not a complete JSON record" in err
        assert "still being written" not in err


@pytest.mark.parametrize("name", CASES)
def test_a_cut_line_in_the_middle_is_still_an_error(capsys, tmp_path, name):
    _, opts = CASES[name]
    data = sample(name)
    rows = data.split(b"\n")
    path = tmp_path / name
    # line 5 cut and the next record written after it, and a half line at the end as well
    path.write_bytes(b"\n".join([*rows[:4], rows[4][: len(rows[4]) // 2], *rows[5:]]) + half_of_last_line(data))
    code, _, err = run_cli(capsys, "prune", str(path), *PRUNE, *opts, "-o", str(tmp_path / "out"))
    assert code == 2
    assert f"{path}:5: line is not a complete JSON record" in err and "--skip-bad-lines" in err
    assert not (tmp_path / "out").exists()


JSONL_SAMPLES = sorted(p.name for p in SAMPLES.glob("*.jsonl"))


@pytest.mark.parametrize("name", JSONL_SAMPLES)
def test_every_jsonl_format_keeps_the_half_line(capsys, tmp_path, name):
    # one reader splits every JSONL format: each sample pruned with a half line appended is
    # its own prune plus those bytes
    path, partial = live_copy(tmp_path, name)
    code, _, err = run_cli(capsys, "prune", str(path), *PRUNE, "-o", str(tmp_path / "live.out"))
    assert code == 0, err
    assert "still being written" in err
    code, _, err = run_cli(capsys, "prune", str(SAMPLES / name), *PRUNE, "-o", str(tmp_path / "whole.out"))
    assert code == 0, err
    assert (tmp_path / "live.out").read_bytes() == (tmp_path / "whole.out").read_bytes() + partial


def test_the_rule_of_the_reader():
    from iclr_cli.errors import InputError
    from iclr_cli.formats.reading import unfinished_line
    from iclr_cli.jsonl import BAD_LINE, iter_jsonl

    data = b'{"a": 1}\r\n{"b": 2}\n{"c": '
    lines = list(iter_jsonl(data, "f.jsonl", live=True))
    assert [(x.number, x.value, x.unfinished) for x in lines] == [(1, {"a": 1}, False), (2, {"b": 2}, False), (3, BAD_LINE, True)]
    assert bytes(lines[2].raw) == b'{"c": ' and lines[2].end == b""
    assert unfinished_line(data) == 3
    with pytest.raises(InputError, match=r"f.jsonl:3: line is not a complete JSON record"):
        list(iter_jsonl(data, "f.jsonl"))  # not live: iclr's own outputs are written whole
    # a complete last record without its line end is read; a spread-out JSON document has no such line
    assert [x.value for x in iter_jsonl(b'{"a": 1}\n{"b": 2}', "f", live=True)] == [{"a": 1}, {"b": 2}]
    assert unfinished_line(b'{"a": 1}\n{"b": 2}') is None
    assert unfinished_line(b'{\n  "a": [1,\n  2]\n}') is None
    assert unfinished_line(b'{"a": ') is None
