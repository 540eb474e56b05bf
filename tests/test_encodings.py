"""UTF-16 and UTF-32 files with a byte order mark: read by every adapter,
and written back in the same encoding with the same mark, byte for byte where unchanged."""

from __future__ import annotations

import codecs
import json

import pytest

from format_helpers import SAMPLES, run_cli
from iclr_cli.jsonio import decode_input, output_encoder

ENCODINGS = {
    "utf-16-le": codecs.BOM_UTF16_LE,
    "utf-16-be": codecs.BOM_UTF16_BE,
    "utf-32-le": codecs.BOM_UTF32_LE,
    "utf-32-be": codecs.BOM_UTF32_BE,
}
CHAT = {"messages": [
    {"role": "user", "content": "Le rapport plante le 31 — corrige-le. 月末"},
    {"role": "assistant", "reasoning_content": "The helper keeps the day.\n\nShort months break: 31 → 30.", "content": "Je lis le module."},
    {"role": "user", "content": "Vas-y."},
    {"role": "assistant", "reasoning_content": "Clamp with calendar.monthrange.\n\nThen test 31 January.", "content": "Fait ✓"},
]}


def sources(tmp_path):
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps(CHAT, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return {"openai": chat, "claude_code": SAMPLES / "claude_code_session.jsonl", "anthropic": SAMPLES / "anthropic_messages.json"}


def encoded(src, tmp_path, codec):
    path = tmp_path / codec / src.name  # same name: same trajectory ids
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(ENCODINGS[codec] + src.read_bytes().decode("utf-8").encode(codec))
    return path


def run(capsys, *args):
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    return out


@pytest.mark.parametrize("codec", ENCODINGS)
@pytest.mark.parametrize("fmt", ["openai", "claude_code", "anthropic"])
def test_read_and_written_back_in_the_same_encoding(capsys, tmp_path, codec, fmt):
    src = sources(tmp_path)[fmt]
    if not src.is_file():
        pytest.skip(f"{src} missing")
    wide = encoded(src, tmp_path, codec)
    out = tmp_path / "out"
    run(capsys, "prune", str(wide), "--variant", "none", "--model", "fake", "-q", "-o", str(out))
    assert out.read_bytes() == wide.read_bytes()  # unchanged: byte for byte, mark included
    for variant in ("delete-all", "iclr"):
        run(capsys, "prune", str(src), "--variant", variant, "--model", "fake", "-q", "-o", str(tmp_path / "utf8"))
        run(capsys, "prune", str(wide), "--variant", variant, "--model", "fake", "-q", "-o", str(out))
        assert out.read_bytes() == ENCODINGS[codec] + (tmp_path / "utf8").read_bytes().decode("utf-8").encode(codec)
    strip = lambda text: [{k: v for k, v in json.loads(line).items() if k != "source"} for line in text.splitlines()]
    assert strip(run(capsys, "score", str(wide), "--model", "fake", "-q")) == strip(run(capsys, "score", str(src), "--model", "fake", "-q"))


def test_convert_writes_the_input_encoding(capsys, tmp_path):
    src = sources(tmp_path)["openai"]
    wide = encoded(src, tmp_path, "utf-16-le")
    run(capsys, "convert", str(src), "--to", "iclr", "-q", "-o", str(tmp_path / "a.jsonl"))
    run(capsys, "convert", str(wide), "--to", "iclr", "-q", "-o", str(tmp_path / "b.jsonl"))
    assert (tmp_path / "b.jsonl").read_bytes() == codecs.BOM_UTF16_LE + (tmp_path / "a.jsonl").read_bytes().decode().encode("utf-16-le")


def test_broken_utf16_is_an_input_error_naming_the_file(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_bytes(codecs.BOM_UTF16_LE + json.dumps(CHAT).encode("utf-16-le")[:-1])  # one byte short
    code, _, err = run_cli(capsys, "prune", str(bad), "--model", "fake", "-o", str(tmp_path / "o"))
    assert code == 2 and f"{bad}: starts with a UTF-16-LE byte order mark but is not valid UTF-16-LE text" in err


def test_decode_and_encode_are_inverse_and_utf8_passes_through():
    text = '{"a": "x ✓ 月 \\ud800"}\n'
    for codec, bom in ENCODINGS.items():
        data = bom + text.encode(codec)
        utf8, enc = decode_input(data, "f")
        assert utf8 == text.encode() and enc.codec == codec and enc.bom == bom
        encode = output_encoder(enc)
        assert encode(utf8[:5]) + encode(b"") + encode(utf8[5:]) == data  # the mark once, chunks in order
    assert decode_input(b"\xef\xbb\xbf{}", "f") == (b"\xef\xbb\xbf{}", None)  # UTF-8 (with its BOM): untouched
    assert output_encoder(None)(b"{}") == b"{}"
