"""``iclr prune DIR_OR_FILES... -o OUTDIR`` and ``iclr score DIR_OR_FILES... [-o FILE | -o DIR/]``:
each file on its own, its output at its input's relative path and byte for byte what a run on
that file alone writes, one table row per file and a total, a bad file named and skipped with
exit 1 at the end, Ctrl-C keeping the finished files (docs/scoring.md, "Many files at once")."""

import json
import shutil
from pathlib import Path

import pytest

from format_helpers import run_cli
from iclr_cli import pipeline

SAMPLES = Path(__file__).resolve().parent.parent / "sample_trajectories"


def chat(steps=4, tag=""):
    """An OpenAI chat file whose every step holds four reasoning blocks (BottomK removes three)."""
    msgs = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": f"Fix the bug{tag}."}]
    for k in range(steps):
        thought = "\n\n".join(f"Step {k} idea {i}{tag}: check module_{k}_{i} for the off-by-one in loop {i * k}." for i in range(4))
        msgs += [{"role": "assistant", "reasoning_content": thought, "content": "",
                  "tool_calls": [{"id": f"c{k}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"cmd": f"ls {k}"})}}]},
                 {"role": "tool", "tool_call_id": f"c{k}", "content": f"file_{k}.py"}]
    return msgs


def write(path: Path, value) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2))
    return path


@pytest.fixture
def tree(tmp_path):
    """A projects folder as a user has it: sessions at two depths, a Claude Code session with a
    sub-agent transcript, and a note that is not a trajectory."""
    root = tmp_path / "projects"
    write(root / "a.json", chat(3, " a"))
    write(root / "deep" / "b.json", chat(2, " b"))
    (root / "cc" / "s1" / "subagents").mkdir(parents=True)
    shutil.copy(SAMPLES / "claude_code_session.jsonl", root / "cc" / "s1.jsonl")
    shutil.copy(SAMPLES / "claude_code_session.jsonl", root / "cc" / "s1" / "subagents" / "agent-x.jsonl")
    (root / "notes.md").write_text("# what I did today\n")
    return root


def single(capsys, command, path, out, *extra):
    """The output of a run on one file alone (the reference every many-file output must equal)."""
    code, _, err = run_cli(capsys, command, str(path), "--model", "fake", "-q", "-o", str(out), *extra)
    assert code == 0, err
    return Path(out).read_bytes()


def table(err: str, title: str) -> list[list[str]]:
    """The rows of the stderr table titled ``title`` (cells stripped)."""
    lines = err.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("└"):
            break
        if line.startswith("│"):
            rows.append([cell.strip() for cell in line.strip("│").split("│")])
    return rows


def test_a_folder_is_pruned_to_the_same_relative_paths_each_file_as_pruned_alone(tree, tmp_path, capsys):
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "prune", str(tree), "-o", str(out), "--model", "fake")
    assert code == 0, err
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert written == ["a.json", "cc/s1.jsonl", "cc/s1/subagents/agent-x.jsonl", "deep/b.json"]
    for rel in written:
        assert (out / rel).read_bytes() == single(capsys, "prune", tree / rel, tmp_path / ("alone_" + rel.replace("/", "_")))
    # the note is named as skipped, and does not fail the run
    assert f"skipped {tree / 'notes.md'}: not read as a trajectory: not JSON or JSONL" in err
    rows = table(err, "iclr prune: 5 files, 1 not read as a trajectory")
    assert [r[0] for r in rows] == [str(tree / "a.json"), str(tree / "cc" / "s1.jsonl"), str(tree / "cc/s1/subagents/agent-x.jsonl"),
                                    str(tree / "deep" / "b.json"), "total: 4 of 5 files"]  # the note is counted among the files found
    # file, format, steps, blocks, removed, reasoning tokens, deleted, written: as the run on a.json alone counts them
    code, _, alone = run_cli(capsys, "prune", str(tree / "a.json"), "-o", str(tmp_path / "a_alone.json"), "--model", "fake")
    summary = {r[0]: r[1] for r in table(alone, "iclr prune --variant iclr")}
    assert rows[0][1:] == ["openai", "3", "12", "9", f"{int(summary['reasoning tokens generated (regex-words)']):,}",
                           f"{int(summary['reasoning tokens deleted']):,}", str(out / "a.json")]
    assert summary["steps"] == "3" and summary["reasoning blocks"] == "12" and summary["blocks removed"] == "9"
    assert rows[-1][2:5] == ["15", "20", "15"]  # 3 + 5 + 5 + 2 steps; 12 + 0 + 0 + 8 blocks (Claude Code's are signed, sealed); 9 + 6 removed
    assert rows[-1][-1] == f"below {out}"


def test_files_given_are_written_under_their_names_and_a_session_brings_its_subagents(tree, tmp_path, capsys):
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "prune", str(tree / "deep" / "b.json"), str(tree / "cc" / "s1.jsonl"), "-o", str(out), "--model", "fake", "-q")
    assert code == 0, err
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == ["b.json", "s1.jsonl", "s1/subagents/agent-x.jsonl"]
    assert (out / "b.json").read_bytes() == single(capsys, "prune", tree / "deep" / "b.json", tmp_path / "b_alone.json")


def test_one_file_with_an_output_folder_is_written_inside_it(tmp_path, capsys):
    path = write(tmp_path / "in" / "c.json", chat(2))
    (tmp_path / "out").mkdir()
    code, _, err = run_cli(capsys, "prune", str(path), "-o", str(tmp_path / "out"), "--model", "fake", "-q")
    assert code == 0, err
    assert (tmp_path / "out" / "c.json").read_bytes() == single(capsys, "prune", path, tmp_path / "alone.json")


def test_a_bad_file_is_named_and_skipped_the_others_written_and_the_run_exits_1(tree, tmp_path, capsys):
    cut = tree / "deep" / "cut.json"
    cut.write_text((tree / "a.json").read_text()[:300])
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "prune", str(tree), "-o", str(out), "--model", "fake")
    assert code == 1
    assert not (out / "deep" / "cut.json").exists()
    assert (out / "a.json").read_bytes() == single(capsys, "prune", tree / "a.json", tmp_path / "a_alone.json")
    assert (out / "deep" / "b.json").exists() and (out / "cc" / "s1.jsonl").exists()
    line = cut.read_text().count("\n") + 1  # the error names the last line, where the document stops
    assert f"warning: not pruned: {cut}:{line}: truncated JSON document" in err
    last = err.strip().splitlines()[-1]
    assert last == f"iclr: error: 1 of 5 files could not be pruned and were skipped ({cut}); 4 written below {out}"
    row = next(r for r in table(err, "iclr prune: 6 files, 1 not read as a trajectory") if r[0] == str(cut))
    assert row[1:] == ["-"] * 6 + ["not written: error below"]


def test_a_bad_record_found_while_pruning_leaves_no_output_of_that_file(tmp_path, capsys):
    good = write(tmp_path / "in" / "good.json", chat(2))
    bad = chat(2)
    bad[2]["tool_calls"][0]["function"]["arguments"] = 7  # valid JSON: only the adapter finds it
    bad_path = write(tmp_path / "in" / "bad.json", bad)
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "prune", str(bad_path), str(good), "-o", str(out), "--model", "fake", "-q")
    assert code == 1 and f"not pruned: {bad_path}" not in err  # -q: the warning is quiet, the error is not
    assert f"1 of 2 files could not be pruned and were skipped ({bad_path}); 1 written below {out}" in err
    assert sorted(p.name for p in out.iterdir()) == ["good.json"]


def test_a_session_database_is_refused_with_its_export_command_and_the_others_are_written(tmp_path, capsys):
    from opencode_fixtures import export, to_db

    folder = tmp_path / "share"
    folder.mkdir()
    to_db(str(folder / "opencode.db"), [export()])
    write(folder / "c.json", chat(2))
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "prune", str(folder), "-o", str(out), "--model", "fake")
    assert code == 1 and sorted(p.name for p in out.iterdir()) == ["c.json"]
    assert f"not pruned: {folder / 'opencode.db'}: a session database (opencode)" in err and "opencode export" in err
    code, stdout, err = run_cli(capsys, "score", str(folder), "--model", "fake", "-q")  # score reads it as it is
    assert code == 0 and {json.loads(line)["source"] for line in stdout.splitlines()} == {str(folder / "opencode.db"), str(folder / "c.json")}


@pytest.mark.parametrize("args, message", [
    (lambda t, o: [str(t / "a.json"), str(t / "deep" / "b.json")], "several inputs or a folder: give -o OUTDIR"),
    (lambda t, o: [str(t), "-o", str(t / "a.json")], "is a file: with several inputs or a folder, -o names a folder"),
    (lambda t, o: [str(t), "-o", str(t)], "is the input folder"),
    (lambda t, o: [str(t), "-", "-o", str(o)], "standard input ('-') cannot be one of many inputs"),
    (lambda t, o: [str(t), "--in-place"], "--in-place edits one trajectory file"),
])
def test_usage_errors_are_refused_before_anything_is_written(tree, tmp_path, capsys, args, message):
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "prune", *args(tree, out), "--model", "fake")
    assert code == 2 and message in err and not out.exists()


def test_two_inputs_with_the_same_output_are_refused_up_front(tmp_path, capsys):
    one = write(tmp_path / "x" / "s.json", chat(2, " x"))
    two = write(tmp_path / "y" / "s.json", chat(2, " y"))
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "prune", str(one), str(two), "-o", str(out), "--model", "fake")
    assert code == 2 and f"{one} and {two} would both be written to {out / 's.json'}" in err and not out.exists()
    # a file reached twice (its folder and itself) is one input, pruned once
    code, _, err = run_cli(capsys, "prune", str(tmp_path / "x"), str(one), "-o", str(out), "--model", "fake", "-q")
    assert code == 0 and [p.name for p in out.iterdir()] == ["s.json"]


def test_an_output_folder_inside_the_input_folder_is_left_out_of_the_walk(tree, capsys):
    out = tree / "pruned"
    assert run_cli(capsys, "prune", str(tree), "-o", str(out), "--model", "fake", "-q")[0] == 0
    code, _, err = run_cli(capsys, "prune", str(tree), "-o", str(out), "--model", "fake")
    assert code == 0 and f"skipped {out / 'a.json'}: below -o {out}: an output of this command" in err
    assert not (out / "pruned").exists()


class Counting:
    """The fake scorer counting steps, raising KeyboardInterrupt (Ctrl-C) at its ``stop_at``-th call."""

    def __init__(self, scorer, stop_at):
        self.scorer, self.stop_at, self.calls, self.steps = scorer, stop_at, 0, 0

    def __getattr__(self, name):
        return getattr(self.scorer, name)

    def score(self, requests):
        self.calls += 1
        if self.stop_at is not None and self.calls == self.stop_at:
            raise KeyboardInterrupt
        self.steps += len(requests)
        return self.scorer.score(requests)


def test_ctrl_c_keeps_the_finished_files_says_which_and_the_same_command_resumes(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ICLR_CHECKPOINT_DIR", str(tmp_path / "checkpoints"))
    folder = tmp_path / "in"
    write(folder / "1.json", chat(3, " one"))
    write(folder / "2.json", chat(3, " two"))
    write(folder / "3.json", chat(3, " three"))
    built, plan, real = [], {"stop_at": None}, pipeline.build_engines

    def build(variant, config):
        scorer, tokenizer = real(variant, config)
        built.append(Counting(scorer, plan["stop_at"]))
        return built[-1], tokenizer

    monkeypatch.setattr(pipeline, "build_engines", build)
    reference = tmp_path / "reference"
    assert run_cli(capsys, "prune", str(folder), "-o", str(reference), "--model", "fake", "-q")[0] == 0
    out = tmp_path / "out"
    plan["stop_at"] = 5  # 3 steps of 1.json, then the 2nd step of 2.json
    code, _, err = run_cli(capsys, "prune", str(folder), "-o", str(out), "--model", "fake")
    assert code == 130
    assert err.strip().splitlines()[-1] == (
        f"iclr: interrupted while pruning {folder / '2.json'}; 1 file(s) finished and written ({folder / '1.json'}); "
        f"{out / '2.json'} was not written; 1 scored step kept: the same command resumes from them; finished files resume from their checkpoints")
    assert sorted(p.name for p in out.iterdir()) == ["1.json"]
    assert (out / "1.json").read_bytes() == (reference / "1.json").read_bytes()
    plan["stop_at"] = None
    code, _, err = run_cli(capsys, "prune", str(folder), "-o", str(out), "--model", "fake")
    assert code == 0, err
    assert built[-1].steps == 5  # 2 steps of 2.json and 3 of 3.json: nothing finished is scored again
    for name in ("1.json", "2.json", "3.json"):
        assert (out / name).read_bytes() == (reference / name).read_bytes()
    assert list((tmp_path / "checkpoints").glob("*.sqlite3")) == []  # the finished run keeps none


def records(data: bytes) -> list[dict]:
    return [json.loads(line) for line in data.splitlines()]


def test_score_of_a_folder_goes_to_one_jsonl_with_each_file_as_scored_alone(tree, tmp_path, capsys):
    out = tmp_path / "all.jsonl"
    code, _, err = run_cli(capsys, "score", str(tree), "-o", str(out), "--model", "fake")
    assert code == 0, err
    expected = b"".join(single(capsys, "score", tree / rel, tmp_path / f"{n}.jsonl")
                        for n, rel in enumerate(["a.json", "cc/s1.jsonl", "cc/s1/subagents/agent-x.jsonl", "deep/b.json"]))
    assert out.read_bytes() == expected
    assert [r[-2:] for r in table(err, "iclr score: 5 files, 1 not read as a trajectory")] == [["12", str(out)], ["0", str(out)], ["0", str(out)], ["8", str(out)],
                                                                    ["20", f"to {out}"]]


def test_score_into_a_folder_writes_one_scores_file_per_input(tree, tmp_path, capsys):
    out = tmp_path / "scores"
    code, _, err = run_cli(capsys, "score", str(tree), "-o", f"{out}/", "--model", "fake", "-q")
    assert code == 0, err
    names = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert names == ["a.scores.jsonl", "cc/s1.scores.jsonl", "cc/s1/subagents/agent-x.scores.jsonl", "deep/b.scores.jsonl"]
    assert (out / "deep" / "b.scores.jsonl").read_bytes() == single(capsys, "score", tree / "deep" / "b.json", tmp_path / "b.jsonl")
    assert (out / "cc" / "s1.scores.jsonl").read_bytes() == b""  # all its reasoning is signed and sealed: no block to score


def test_score_skips_a_bad_file_keeps_the_records_of_the_others_and_exits_1(tmp_path, capsys):
    good = write(tmp_path / "in" / "good.json", chat(2))
    bad = tmp_path / "in" / "bad.json"
    bad.write_text("[{\"role\": \"user\", \"content\": \"hi\"}")
    out = tmp_path / "all.jsonl"
    code, _, err = run_cli(capsys, "score", str(good), str(bad), "-o", str(out), "--model", "fake")
    assert code == 1 and f"not scored: {bad}:1: truncated JSON document" in err
    assert out.read_bytes() == single(capsys, "score", good, tmp_path / "alone.jsonl") and len(records(out.read_bytes())) == 8


@pytest.mark.parametrize("command", ["prune", "score"])
def test_an_empty_folder_is_a_usage_error_not_a_run_that_succeeded(tmp_path, capsys, command):
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run_cli(capsys, command, str(empty), "--model", "fake", "-o", str(tmp_path / "out"))
    assert code == 2 and f"no files to read in {empty}" in err
    assert not (tmp_path / "out").exists()
