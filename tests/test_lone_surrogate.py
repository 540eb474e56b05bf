"""A lone UTF-16 surrogate (``"\\ud83d"``, a tool output cut inside an emoji) reaches the
tokenizer as text it takes, and the file is written back byte for byte."""

from __future__ import annotations

import json

import pytest

from format_helpers import run_cli
from iclr_cli.jsonio import dumps_like, loads
from iclr_cli.scoring.tokenizer import ProxyTokenizer, tokenizable

THINK = "The output was cut.\n\nRead it again with a larger limit.\n\nThen compare the two runs."


def session(tmp_path, command_extra: str = "") -> tuple:
    lines = [
        '{"type":"user","sessionId":"s","uuid":"u1","parentUuid":null,"isSidechain":false,"message":{"role":"user","content":"why?"}}',
        json.dumps({"type": "assistant", "sessionId": "s", "uuid": "a1", "parentUuid": "u1", "isSidechain": False,
                    "message": {"model": "deepseek-chat", "id": "m1", "role": "assistant",
                                "content": [{"type": "thinking", "thinking": THINK, "signature": ""},
                                            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "cat log" + command_extra}}]}},
                   separators=(",", ":")),
        # written by Claude Code when a tool output is cut inside an emoji
        '{"type":"user","sessionId":"s","uuid":"u2","parentUuid":"a1","isSidechain":false,"message":{"role":"user","content":[{"tool_use_id":"t1","type":"tool_result","content":"done \\ud83d"}]}}',
        json.dumps({"type": "assistant", "sessionId": "s", "uuid": "a2", "parentUuid": "u2", "isSidechain": False,
                    "message": {"model": "deepseek-chat", "id": "m2", "role": "assistant",
                                "content": [{"type": "thinking", "thinking": THINK, "signature": ""}, {"type": "text", "text": "ok"}]}},
                   separators=(",", ":")),
    ]
    path = tmp_path / "s.jsonl"
    path.write_bytes(("\n".join(lines) + "\n").encode())
    return path, lines


def test_tokenizable_replaces_lone_surrogates_one_for_one():
    assert tokenizable("plain") == "plain"
    text = "a \ud83d b \udc00"
    out = tokenizable(text)
    assert out == "a \ufffd b \ufffd" and len(out) == len(text)
    out.encode("utf-8")  # valid Unicode now


def test_proxy_tokenizer_takes_a_lone_surrogate_with_offsets_into_the_original():
    tokenizers = pytest.importorskip("tokenizers")
    backend = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0, "done": 1}, unk_token="[UNK]"))
    backend.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    with pytest.raises(TypeError):
        backend.encode("done \ud83d", add_special_tokens=False)  # what the tokenizer does with it raw
    tok = ProxyTokenizer(backend, "tiny", None)
    text = "done \ud83d tail"
    spans = tok.token_spans(text)
    assert [text[s:e] for s, e in spans] == ["done", "\ud83d", "tail"]
    assert tok.ids(text)[0] == 1 and tok.encode(text)[1] == spans


def test_score_and_prune_keep_the_line_byte_for_byte(tmp_path, capsys):
    path, lines = session(tmp_path)
    code, stdout, err = run_cli(capsys, "score", str(path), "--model", "fake", "-q")
    assert code == 0, err
    out = tmp_path / "o.jsonl"
    code, _, err = run_cli(capsys, "prune", str(path), "--model", "fake", "--variant", "delete-all", "-o", str(out))
    assert code == 0, err
    written = out.read_bytes().decode("utf-8").split("\n")
    assert written[2] == lines[2] and written[0] == lines[0]
    assert json.loads(written[1])["message"]["content"][0] == {"type": "thinking", "thinking": "", "signature": ""}


def test_an_edited_line_holding_a_lone_surrogate_is_written_with_its_escape(tmp_path, capsys):
    path, _ = session(tmp_path, command_extra=" \ud83d")
    out = tmp_path / "o.jsonl"
    code, _, err = run_cli(capsys, "prune", str(path), "--model", "fake", "--variant", "delete-all", "-o", str(out))
    assert code == 0, err
    raw = out.read_bytes()
    raw.decode("utf-8")  # valid UTF-8: the surrogate is not written raw
    edited = raw.split(b"\n")[1]
    assert b'"thinking":""' in edited and b'"command":"cat log \\ud83d"' in edited
    value = loads(b'{"a":"x\\ud83d"}')
    assert dumps_like(value, b'{"a":"\xc3\xa9"}') == b'{"a":"x\\ud83d"}'


@pytest.mark.model
def test_score_with_the_real_proxy(tmp_path, capsys):
    path, _ = session(tmp_path)
    code, stdout, err = run_cli(capsys, "score", str(path), "-q")
    assert code == 0, err
    assert len(stdout.splitlines()) == 6
