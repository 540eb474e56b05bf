"""First-day rough edges a new user meets on the command line.

Ctrl-C exits 130 with one line saying what was kept (a real SIGINT to a real subprocess);
``-o`` follows symlinks, keeps modes and refuses read-only files without ``--force``; fixed
option choices are enums (exit 2 before anything runs); the bfloat16 precision warning;
summary tables keep their full width when stderr is not a terminal.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from format_helpers import run_cli, summary_value

REPO = Path(__file__).resolve().parents[1]


def _chat(n_steps: int = 2, tag: str = "") -> dict:
    msgs = [{"role": "user", "content": f"Fix the bug {tag}."}]
    for i in range(n_steps):
        reasoning = "\n\n".join(f"Thought {tag} {i}.{k}: the loader reads the cache path twice." for k in range(3))
        msgs.append({"role": "assistant", "content": None, "reasoning_content": reasoning,
                     "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": "a.py b.py"})
    return {"messages": msgs}


@pytest.fixture
def chat_file(tmp_path):
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(_chat()["messages"], indent=2))
    return path


def _iclr(*args: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen([sys.executable, "-m", "iclr_cli", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


# -- Ctrl-C --------------------------------------------------------------------------------------


def _wait_for_reader(fifo: Path, proc: subprocess.Popen) -> int:
    """Open the write end of ``fifo`` once ``proc`` has opened it for reading (then the
    command is inside its own code, blocked on its input)."""
    while True:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise
        assert proc.poll() is None, proc.stderr.read().decode()
        time.sleep(0.05)


@pytest.mark.parametrize("command", ["prune", "score"])
def test_ctrl_c_while_reading_exits_130_and_leaves_the_output_file_as_it_was(tmp_path, command):
    fifo = tmp_path / "input.jsonl"
    os.mkfifo(fifo)
    out = tmp_path / "out.jsonl"
    out.write_text("previous result\n")
    proc = _iclr(command, str(fifo), "--format", "openai", "--model", "fake", "-o", str(out))
    writer = _wait_for_reader(fifo, proc)
    try:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        os.close(writer)
    assert proc.returncode == 130
    # a progress line (one every 30 s) may come first on a loaded machine; the rest is this one line
    lines = [line for line in err.decode().strip().splitlines() if not line.startswith(("pruning (", "scoring ("))]
    assert lines == [f"iclr: interrupted after 0 trajectories{' (0 block records)' if command == 'score' else ''}; nothing written, {out} is as it was"]
    assert out.read_text() == "previous result\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []  # no temp file left


@pytest.mark.parametrize("command", ["prune", "score"])
def test_ctrl_c_mid_run_on_stdout_says_how_far_it_got(tmp_path, command):
    """The command streams 256 trajectories at a time to a pipe nobody reads after the first
    line, so it is certainly mid-run (blocked writing) when SIGINT arrives."""
    path = tmp_path / "many.jsonl"
    path.write_text("".join(json.dumps(_chat(3, str(i))) + "\n" for i in range(1500)))
    proc = _iclr(command, str(path), "--model", "fake", "--variant", "iclr", "-q")
    first = proc.stdout.readline()
    assert first.strip()
    time.sleep(0.5)  # let it fill the pipe and block; any moment before it finishes will do
    proc.send_signal(signal.SIGINT)
    rest, err = proc.communicate(timeout=120)
    assert proc.returncode == 130
    [line] = err.decode().strip().splitlines()
    assert line.startswith("iclr: interrupted after ")
    assert line.endswith("; what went to stdout before the interrupt is incomplete")
    done = int(line.split("interrupted after ")[1].split(" ")[0])
    assert done < 1500
    assert len((first + rest).splitlines()) > 0


def test_ctrl_c_in_replay_keeps_finished_runs_and_says_so(tmp_path):
    from replay_fixtures import Reply, completion, fake_openai, submit

    tasks = tmp_path / "tasks"
    for name in ("a", "b"):
        folder = tasks / name
        (folder / "files").mkdir(parents=True)
        (folder / "task.toml").write_text(f'domain = "office"\ndescription = "{name}"\ninstruction = "Say hi."\n')
        (folder / "check.py").write_text("def check(ctx):\n    return 1.0\n")

    def slow(body, index):  # the second run's first request hangs until the test is done
        return Reply(completion("thinking").body, delay_s=30.0) if index >= 1 else submit("hi")

    with fake_openai([slow] * 5) as srv:
        out = tmp_path / "out"
        proc = _iclr("replay", "--tasks", str(tasks), "--variant", "none", "--model", "m", "--base-url", srv.url,
                     "--proxy-model", "fake", "--out", str(out), "--request-timeout", "5", "--max-retries", "0")
        results = out / "results.jsonl"
        deadline = time.monotonic() + 120
        while not (results.is_file() and results.read_text().count("\n") >= 1 and len(srv.requests) >= 2):
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the replay never got to its second run"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130
    last = err.decode().strip().splitlines()[-1]
    assert last == (f"iclr: interrupted: 1 run(s) finished in this session, 1 in all are kept in {results}; "
                    "runs in progress were not recorded; run the same command again to resume")
    assert [json.loads(x)["task"] for x in results.read_text().splitlines()] == ["a"]


# -- replay against a server that is down ---------------------------------------------------


def test_replay_against_a_server_that_is_down_prints_the_reason_and_exits_1(tmp_path, capsys):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    code, _, err = run_cli(capsys, "replay", "--task", "code-median", "--variant", "none", "--variant", "delete-all",
                           "--model", "m", "--base-url", f"http://127.0.0.1:{port}/v1", "--proxy-model", "fake",
                           "--out", str(tmp_path / "out"), "--max-retries", "0", "--request-timeout", "5")
    assert code == 1
    reason_lines = [line for line in err.splitlines() if "code-median" in line and "error" in line]
    assert len(reason_lines) == 2 and all("connect" in line.lower() for line in reason_lines)
    assert err.strip().splitlines()[-1].startswith("iclr: error: every run failed (2 of 2); first reason: ")


# -- -o, symlinks, modes, --force ---------------------------------------------------------------


def test_output_through_a_symlink_writes_the_target_and_keeps_the_link(chat_file, tmp_path, capsys):
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    code, _, err = run_cli(capsys, "prune", str(chat_file), "--variant", "delete-all", "--model", "fake", "-o", str(link), "-q")
    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert json.loads(target.read_text())[1]["reasoning_content"] == ""


def test_output_keeps_the_mode_of_an_existing_file(chat_file, tmp_path, capsys):
    out = tmp_path / "out.json"
    out.write_text("old")
    os.chmod(out, 0o640)
    code, _, _ = run_cli(capsys, "prune", str(chat_file), "--variant", "none", "--model", "fake", "-o", str(out), "-q")
    assert code == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert out.read_bytes() == chat_file.read_bytes()


def test_read_only_output_is_refused_without_force_and_replaced_with_it(chat_file, tmp_path, capsys):
    out = tmp_path / "out.json"
    out.write_text("keep me")
    os.chmod(out, 0o444)
    code, _, err = run_cli(capsys, "prune", str(chat_file), "--variant", "delete-all", "--model", "fake", "-o", str(out), "-q")
    assert code == 2
    assert f"{out} is read-only; pass --force to replace it (its mode 444 is kept)" in err
    assert out.read_text() == "keep me"
    code, _, err = run_cli(capsys, "prune", str(chat_file), "--variant", "delete-all", "--model", "fake", "-o", str(out), "--force", "-q")
    assert code == 0, err
    assert json.loads(out.read_text())[1]["reasoning_content"] == ""
    assert stat.S_IMODE(out.stat().st_mode) == 0o444


def test_read_only_target_behind_a_symlink_is_refused_too(chat_file, tmp_path, capsys):
    target = tmp_path / "real.json"
    target.write_text("keep me")
    os.chmod(target, 0o444)
    link = tmp_path / "link.json"
    link.symlink_to(target)
    code, _, err = run_cli(capsys, "score", str(chat_file), "--model", "fake", "-o", str(link), "-q")
    assert code == 2 and f"{target} (through the link {link}) is read-only" in err
    assert target.read_text() == "keep me"


def test_output_to_a_named_pipe_writes_into_it_and_leaves_it_a_pipe(chat_file, tmp_path, capsys):
    # As /dev/null is written: in place. A temp file renamed over it replaced the device with a
    # plain file (as root, /dev/null itself). A FIFO stands in for the device here.
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    code, _, err = run_cli(capsys, "prune", str(chat_file), "--variant", "none", "--model", "fake", "-o", str(fifo), "-q")
    reader.join(30)
    assert code == 0, err
    assert stat.S_ISFIFO(fifo.stat().st_mode) and got == [chat_file.read_bytes()]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".pipe")] == []


def test_new_output_file_gets_the_umask_mode(chat_file, tmp_path, capsys):
    out = tmp_path / "new.jsonl"
    umask = os.umask(0o022)
    try:
        code, _, _ = run_cli(capsys, "score", str(chat_file), "--model", "fake", "-o", str(out), "-q")
    finally:
        os.umask(umask)
    assert code == 0 and stat.S_IMODE(out.stat().st_mode) == 0o644


# -- option choices, precision warning, tables ------------------------------------------------------


@pytest.mark.parametrize("args, option", [
    (["score", "--overflow", "clip"], "--overflow"),
    (["score", "--dtype", "int8"], "--dtype"),
    (["score", "--block-split", "words"], "--block-split"),
    (["score", "--variant", "delete-all"], "--variant"),
    (["prune", "--encrypted-reasoning", "strip"], "--encrypted-reasoning"),
    (["replay", "--tool-protocol", "xml", "--out", "x"], "--tool-protocol"),
    (["replay", "--send-reasoning", "inline", "--out", "x"], "--send-reasoning"),
])
def test_fixed_choices_are_checked_by_the_cli_and_listed(chat_file, capsys, args, option):
    code, _, err = run_cli(capsys, *args[:1], *( [str(chat_file)] if args[0] != "replay" else []), *args[1:], "--model", "fake")
    assert code == 2
    assert option in err and "is not one of" in err


def test_choices_show_in_help(capsys):
    code, out, _ = run_cli(capsys, "score", "--help")
    assert code == 0
    for text in ("window", "skip", "float32", "bfloat16", "paragraph", "sentence", "step-only"):
        assert text in out


def test_library_callers_get_the_same_validation():
    from iclr_cli.errors import UsageError
    from iclr_cli.pipeline import ScorerConfig, check_splitter

    with pytest.raises(UsageError, match="--overflow must be one of window, skip, not 'clip'"):
        ScorerConfig(overflow="clip")
    with pytest.raises(UsageError, match="--dtype must be one of auto, float32, bfloat16, float16"):
        ScorerConfig(dtype="int8")
    with pytest.raises(UsageError, match="--block-split must be one of paragraph, line, sentence"):
        check_splitter("words")


@pytest.mark.parametrize("dtype, warned", [("bfloat16", True), ("float16", True), ("float32", False), ("auto", False)])
def test_precision_warning_for_forced_dtypes_below_float32(chat_file, capsys, dtype, warned):
    """auto takes bf16 only where it is native and is named, not warned about (METHOD.md, "Precision")."""
    code, _, err = run_cli(capsys, "score", str(chat_file), "--model", "fake", "--dtype", dtype)
    assert code == 0
    warning = (f"warning: --dtype {dtype}: entropies differ from float32 (block means ~0.05 bits on average, single tokens "
               "up to ~1.8 bits, measured on the default proxy); selections may change")
    assert (warning in " ".join(err.split())) is warned


def test_summary_table_is_whole_and_log_wide_when_stderr_is_not_a_terminal(chat_file, tmp_path):
    out = tmp_path / "o.json"
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "40"}
    env.pop("FORCE_COLOR", None)
    proc = subprocess.run([sys.executable, "-m", "iclr_cli", "prune", str(chat_file), "--model", "fake", "-o", str(out)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    row = next(line for line in proc.stderr.splitlines() if "deletion ratio (deleted / generated)" in line)
    assert row.rstrip().endswith("│") and len(row) > 40


def test_a_summarys_prose_value_wraps_when_stderr_is_not_a_terminal(capsys):
    """The scorer profile is a 200-character cell: in a CI log it wraps instead of pushing every
    number of the summary two hundred columns to the right."""
    from iclr_cli.render.output import PROSE_WIDTH, Output

    out = Output(None)
    prose = "fast (4,096-token window, long tool outputs cut to 512 chars at each end) " * 3
    label = "deletion ratio (deleted / generated)"
    out.table("iclr score --variant iclr", ["", "value"], [(label, "0.800"), ("scorer profile", prose)], wrap_last=True)
    table = [line for line in capsys.readouterr().err.splitlines() if line.startswith(("┃", "│", "┏", "└"))]
    assert max(len(line) for line in table) == len(label) + PROSE_WIDTH + 7  # two cells, their padding and borders
    row = next(line for line in table if "deletion ratio (deleted / generated)" in line)
    assert row.rstrip().endswith("0.800 │")


def test_width_option_sets_the_table_width(tmp_path, capsys):
    from iclr_cli.render.output import Output

    narrow = Output(None, width=60)
    assert narrow.console.width == 60
    assert Output(None).console.width > 1000  # pytest's stderr is not a terminal: full width


def test_summary_accounting_adds_up(chat_file, capsys, tmp_path):
    code, _, err = run_cli(capsys, "prune", str(chat_file), "--model", "fake", "-o", str(tmp_path / "o.json"))
    assert code == 0
    generated = int(summary_value(err, "reasoning tokens generated (regex-words)"))
    deleted = int(summary_value(err, "reasoning tokens deleted"))
    kept = int(summary_value(err, "reasoning tokens kept"))
    written = int(summary_value(err, "reasoning tokens written"))
    markers, marker_tokens = summary_value(err, "[SKIP] markers added (tokens)").replace("(", "").replace(")", "").split()
    assert generated == kept + deleted and written == kept + int(marker_tokens)
    assert int(markers) == 4  # two steps, 3 blocks each: floor(0.8 * 3) = 2 per step
    assert summary_value(err, "deletion ratio (deleted / generated)") == f"{deleted / generated:.3f}"


def test_replay_imports_nothing_from_cli():
    """The replay library stands on its own (serve and tests use it)."""
    import ast

    for path in sorted((REPO / "iclr_cli" / "replay").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names] if isinstance(node, ast.Import) else []
            assert not any(n == "iclr_cli.cli" or n.startswith("iclr_cli.cli.") for n in names), f"{path.name} imports {names}"


def test_sigint_stops_a_command_started_with_sigint_ignored(tmp_path):
    """A shell starts background jobs with SIGINT ignored; iclr still stops on it."""
    fifo = tmp_path / "input.json"
    os.mkfifo(fifo)
    out = tmp_path / "out.json"
    proc = _iclr("prune", str(fifo), "--format", "openai", "--model", "fake", "-o", str(out),
                 preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    writer = _wait_for_reader(fifo, proc)
    try:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        os.close(writer)
    assert proc.returncode == 130
    assert err.decode().strip() == f"iclr: interrupted after 0 trajectories; nothing written, {out} was not created"
    assert not out.exists()
