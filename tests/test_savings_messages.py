"""What ``iclr savings`` says under its table and on Ctrl-C: each note names the files it is
about (a note ``(file time): the file holds no timestamps`` over three files said neither
which), and an interrupted ``--no-cache`` run never says its results are cached."""

import json

from format_helpers import SAMPLES, run_cli
from test_savings_cli import cache_dir  # noqa: F401 (the autouse fixture: each test's own savings cache)

CHAT = [
    {"role": "user", "content": "Task"},
    {"role": "assistant", "reasoning_content": "alpha\n\nbeta", "content": "A0"},
    {"role": "user", "content": "ok"},
    {"role": "assistant", "reasoning_content": "gamma", "content": "A1"},
]


def savings(capsys, *args):
    return run_cli(capsys, "savings", *args, "--variant", "delete-all", "--model", "fake", "--no-cache", "--width", "400")


def test_file_time_note_names_the_files_without_timestamps(capsys, tmp_path):
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text(json.dumps(CHAT))
    dated = tmp_path / "claude.jsonl"
    dated.write_bytes((SAMPLES / "claude_code_session.jsonl").read_bytes())  # holds timestamps
    code, out, err = savings(capsys, str(tmp_path / "a.json"), str(tmp_path / "b.json"), str(dated))
    assert code == 0, err
    [note] = [line for line in out.splitlines() if line.startswith("(file time):")]
    assert note == (f"(file time): {tmp_path / 'a.json'}, {tmp_path / 'b.json'} hold no timestamps, so the last activity "
                    "shown is the file's modification time (--since / --until filter on that too)")


def test_reader_warnings_note_names_the_file_and_its_count(capsys, tmp_path):
    rows = (SAMPLES / "claude_code_session.jsonl").read_bytes().split(b"\n")
    path = tmp_path / "session.jsonl"
    path.write_bytes(b"\n".join([*rows[:4], b'{"cut', *rows[4:]]))  # line 5 is not JSON
    code, out, err = savings(capsys, str(path), "--skip-bad-lines")
    assert code == 0, err
    [note] = [line for line in out.splitlines() if line.startswith("the format readers")]
    assert note == f"the format readers reported on {path} (1 warning): 'iclr score {path}' shows what"


def test_a_line_being_written_is_said_once_not_counted_as_a_reader_warning(capsys, tmp_path):
    data = (SAMPLES / "claude_code_session.jsonl").read_bytes()
    path = tmp_path / "session.jsonl"
    path.write_bytes(data + b'{"type": "assis')
    code, out, err = savings(capsys, str(path))
    assert code == 0, err
    assert " ".join(err.split()).count(f"{path}:21: the last line looks like one still being written") == 1
    assert "the format readers" not in out


def interrupt_first_file(monkeypatch):
    import iclr_cli.savings.run as run

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "compress_trajectories", interrupt)


def test_interrupted_no_cache_run_says_nothing_was_cached(capsys, tmp_path, monkeypatch):
    (tmp_path / "chat.json").write_text(json.dumps(CHAT))
    interrupt_first_file(monkeypatch)
    code, _, err = savings(capsys, str(tmp_path / "chat.json"))
    assert code == 130
    assert err.rstrip().splitlines()[-1] == ("iclr: interrupted after 0 of 1 files: the table covers those; with --no-cache "
                                             "nothing was cached, so the same command starts over")
    assert "cached)" not in err


def test_interrupted_run_with_the_cache_says_it_goes_on(capsys, tmp_path, monkeypatch):
    (tmp_path / "chat.json").write_text(json.dumps(CHAT))
    interrupt_first_file(monkeypatch)
    code, _, err = run_cli(capsys, "savings", str(tmp_path / "chat.json"), "--variant", "delete-all", "--model", "fake")
    assert code == 130
    assert err.rstrip().splitlines()[-1] == ("iclr: interrupted after 0 of 1 files: the table covers those, and the same "
                                             "command goes on from there (they are cached)")
