"""A JSON document's own line ends survive a write-back (:func:`iclr_cli.jsonio.dumps_document_like`).

A session saved on Windows (or by a tool that writes CRLF) must come back with CRLF: with LF
every line of the file would differ, and a diff of what ``prune`` changed would show the whole
file. JSONL keeps each line's own end already; this is the whole-file document's counterpart.
"""

from __future__ import annotations

import json
from pathlib import Path

from format_helpers import run_cli

from iclr_cli.jsonio import dumps_document_like

SAMPLE = Path(__file__).resolve().parents[1] / "sample_trajectories" / "openai_chat.json"


def test_prune_keeps_a_documents_crlf_line_ends(tmp_path, capsys):
    crlf = tmp_path / "session.json"
    crlf.write_bytes(SAMPLE.read_bytes().replace(b"\n", b"\r\n"))
    out = tmp_path / "pruned.json"
    code, _, err = run_cli(capsys, "prune", str(crlf), "--model", "fake", "-o", str(out))
    assert code == 0, err
    before, after = crlf.read_bytes().split(b"\r\n"), out.read_bytes().split(b"\r\n")
    assert b"\n" not in b"".join(after) and len(after) == len(before)  # every line end is CRLF, no line added or lost
    changed = [i for i, (a, b) in enumerate(zip(before, after)) if a != b]
    assert changed and all(b"[SKIP]" in after[i] for i in changed)  # only the pruned reasoning lines differ
    assert json.loads(out.read_bytes()) != json.loads(crlf.read_bytes())


def test_newlines_inside_strings_stay_escaped_and_lf_documents_stay_lf():
    value = {"a": "two\nlines", "b": [1, 2]}
    crlf = json.dumps(value, indent=2).replace("\n", "\r\n").encode() + b"\r\n"
    assert dumps_document_like(value, crlf) == crlf
    lf = json.dumps(value, indent=2).encode() + b"\n"
    assert dumps_document_like(value, lf) == lf
