"""NUL padding where a writer crashed is line damage, wherever it sits (a Claude Code session).

A crashed or preallocated session file holds runs of NUL bytes between its JSONL records. Within
the first 64 KiB, which is what the format sniffer reads, such a run used to make the whole file
"binary data": now, among records that parse, it is a bad line like any other, named with its
file and line and the flag that skips it.
"""

from __future__ import annotations

from pathlib import Path

from format_helpers import run_cli

SAMPLE = Path(__file__).resolve().parents[1] / "sample_trajectories" / "claude_code_session.jsonl"


def _padded(tmp_path: Path, pad: bytes) -> Path:
    lines = SAMPLE.read_bytes().splitlines(keepends=True)
    path = tmp_path / "crashed.jsonl"
    path.write_bytes(b"".join(lines[:3]) + pad + b"".join(lines[3:]))
    return path


def test_a_nul_run_past_the_sniffed_head_is_a_named_bad_line(tmp_path, capsys):
    path = _padded(tmp_path, b"\0" * (80 * 1024) + b"\n")  # the head the sniffer reads ends inside it
    code, out, err = run_cli(capsys, "score", str(path), "--model", "fake")
    assert code == 2 and f"{path}:4" in err and "NUL" in err and "--skip-bad-lines" in err and not out
    code, out, err = run_cli(capsys, "score", str(path), "--model", "fake", "--skip-bad-lines", "--signed-thinking", "edit")
    assert code == 0 and f"{path}:4: skipped" in err
    records = [line for line in out.splitlines() if line.strip()]
    clean_code, clean_out, _ = run_cli(capsys, "score", str(SAMPLE), "--model", "fake", "--signed-thinking", "edit")
    assert clean_code == 0 and len(records) == len([line for line in clean_out.splitlines() if line.strip()]) > 0


def test_a_file_of_nul_bytes_is_still_not_text(tmp_path, capsys):
    path = tmp_path / "blob.jsonl"
    path.write_bytes(b"\0" * 4096)
    code, _, err = run_cli(capsys, "score", str(path), "--model", "fake")
    assert code == 2 and "not a text file" in err
