"""An -o that names the command's own input is refused (exit 2) unless --in-place asks for it;
--in-place writes the input atomically with its mode kept. Also `iclr --version`."""

import json
import os

import pytest

from iclr_cli import __version__
from iclr_cli.cli.app import main

CHAT = [
    {"role": "system", "content": "You are an agent."},
    {"role": "user", "content": "Fix it."},
    {"role": "assistant", "reasoning_content": "First idea.\n\nSecond idea.\n\nThird idea.\n\nFourth idea.", "content": "Done.",
     "x_unknown": {"kept": True}},
]


def run_cli(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    captured = capsys.readouterr()
    return exc.value.code, captured.out, captured.err


@pytest.fixture
def chat(tmp_path):
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(CHAT, indent=2))
    return path


@pytest.mark.parametrize("name", ["same", "relative", "symlink", "hardlink"])
def test_prune_refuses_an_output_that_is_its_input(chat, tmp_path, capsys, monkeypatch, name):
    before = chat.read_bytes()
    target = {"same": str(chat), "relative": "./chat.json", "symlink": str(tmp_path / "l.json"), "hardlink": str(tmp_path / "h.json")}[name]
    if name == "symlink":
        os.symlink(chat, target)
    if name == "hardlink":
        os.link(chat, target)
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(["prune", str(chat), "--model", "fake", "-o", target], capsys)
    assert code == 2 and out == ""
    assert f"iclr: error: -o {target} is an input file" in err and "pass --in-place to edit it in place" in err
    assert chat.read_bytes() == before


def test_prune_in_place_replaces_the_input_atomically_and_keeps_its_mode(chat, tmp_path, capsys):
    os.chmod(chat, 0o640)
    code, out, _ = run_cli(["prune", str(chat), "--model", "fake", "--variant", "delete-all", "--in-place", "-q"], capsys)
    assert code == 0 and out == ""
    written = json.loads(chat.read_text())
    assert written[2]["reasoning_content"] == "" and written[2]["x_unknown"] == {"kept": True}
    assert (chat.stat().st_mode & 0o777) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chat.json"]  # no temp file left beside it


def test_prune_in_place_with_o_naming_the_input_is_the_same_request(chat, capsys):
    code, _, _ = run_cli(["prune", str(chat), "--model", "fake", "--variant", "delete-all", "-i", "-o", str(chat), "-q"], capsys)
    assert code == 0 and json.loads(chat.read_text())[2]["reasoning_content"] == ""


@pytest.mark.parametrize("args, message", [
    (["-i", "-o", "OTHER"], "--in-place writes"),
    (["-i", "-o", "-"], "--in-place writes"),
])
def test_prune_in_place_contradictions_are_usage_errors(chat, tmp_path, capsys, args, message):
    before = chat.read_bytes()
    args = [str(tmp_path / "other.json") if a == "OTHER" else a for a in args]
    code, out, err = run_cli(["prune", str(chat), "--model", "fake", *args], capsys)
    assert code == 2 and message in err and out == ""
    assert chat.read_bytes() == before and not (tmp_path / "other.json").exists()


def test_prune_in_place_of_stdin_is_a_usage_error(capsys):
    code, _, err = run_cli(["prune", "-", "--model", "fake", "--in-place"], capsys)
    assert code == 2 and "--in-place needs a file to write back to, not stdin" in err


@pytest.mark.parametrize("command", [["score"], ["convert"], ["analyze", "externalization"]])
def test_other_commands_refuse_an_output_over_their_input(chat, capsys, command):
    before = chat.read_bytes()
    extra = ["--model", "fake"] if command == ["score"] else []
    code, _, err = run_cli([*command, str(chat), *extra, "-o", str(chat)], capsys)
    assert code == 2 and f"-o {chat} is an input file: the output would replace it; give another -o" in err
    assert chat.read_bytes() == before


def test_diff_refuses_an_output_over_either_input(chat, tmp_path, capsys):
    copy = tmp_path / "copy.json"
    copy.write_bytes(chat.read_bytes())
    code, _, err = run_cli(["diff", str(chat), str(copy), "--json", "-o", str(copy)], capsys)
    assert code == 2 and f"-o {copy} is an input file" in err and copy.read_bytes() == chat.read_bytes()


def test_dev_null_is_never_the_input(chat, capsys):
    code, _, _ = run_cli(["prune", str(chat), "--model", "fake", "-q", "-o", os.devnull], capsys)
    assert code == 0


def test_version(capsys):
    for flag in ("--version", "-V"):
        code, out, err = run_cli([flag], capsys)
        assert (code, out, err) == (0, f"iclr {__version__}\n", "")


def test_version_is_the_installed_distribution_version():
    from importlib.metadata import version

    assert version("iclr-cli") == __version__
