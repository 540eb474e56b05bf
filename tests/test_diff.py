"""``iclr diff ORIGINAL PRUNED``: block alignment, score files, views, goldens of the painted
and JSON output (console width pinned, colours forced / plain / NO_COLOR)."""

from __future__ import annotations

import io
import json
import re

import orjson
import pytest

from format_helpers import REALDATA
from goldens import assert_golden
from iclr_cli.blocks import SKIP
from iclr_cli.cli.app import main
from iclr_cli.render import blockalign, diff_view, diffdata
from iclr_cli.token_accounting import ReasoningTokens

THOUGHTS = [
    "Read the failing test first.\n\nThe traceback points at parse() in parser.py.\n\nMaybe the regex is too greedy.\n\nCheck the fixture file as well.\n\nThen run the suite again.",
    "The regex matches across lines.\n\nUse a non-greedy quantifier.",
    "",
    "Tests pass now.\n\nWrap up and submit.\n\nNothing else to change.",
]


def chat(thoughts=THOUGHTS):
    msgs = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Fix the failing test in parser.py."}]
    for i, thought in enumerate(thoughts):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": f"step {i}"})}}
        msg = {"role": "assistant", "content": None, "tool_calls": [call]}
        if thought:
            msg["reasoning_content"] = thought
        msgs.append(msg)
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"output of step {i}\nsecond line"})
    return msgs


def run_cli(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    captured = capsys.readouterr()
    return exc.value.code, captured.out, captured.err


@pytest.fixture
def files(tmp_path, monkeypatch, capsys):
    """orig.json and its iclr-pruned copy (fake scorer), relative names in a temp folder."""
    monkeypatch.chdir(tmp_path)
    for name in ("NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "orig.json").write_text(json.dumps(chat(), indent=1))
    code, _, err = run_cli(["prune", "orig.json", "--model", "fake", "-o", "pruned.json", "-q"], capsys)
    assert code == 0, err
    return tmp_path


# -- alignment ---------------------------------------------------------------------------


def test_align_one_skip_per_removed_block():
    original = "a one\n\nb two\n\nc three"
    pruned = f"a one\n\n{SKIP}\n\n{SKIP}"
    assert blockalign.align_blocks(original, pruned) == [("kept", 0, None), ("removed", 1, None), ("removed", 2, None)]


def test_align_delete_all_removes_every_block():
    assert [s for s, _, _ in blockalign.align_blocks("a\n\nb\n\nc", "")] == ["removed"] * 3


def test_align_merged_skip_covers_a_run_of_blocks():
    got = blockalign.align_blocks("a\n\nb\n\nc\n\nd", f"a\n\n{SKIP}\n\nd")
    assert got == [("kept", 0, None), ("removed", 1, None), ("removed", 2, None), ("kept", 3, None)]


def test_align_token_deletions_show_as_changed_with_new_text():
    got = blockalign.align_blocks("keep this\n\nthe quick brown fox", "keep this\n\nthe brown fox")
    assert got == [("kept", 0, None), ("changed", 1, "the brown fox")]


def test_align_block_only_in_pruned_is_added():
    assert blockalign.align_blocks("a", "a\n\nnew") == [("kept", 0, None), ("added", None, "new")]


# -- two files ---------------------------------------------------------------------------


def test_json_marks_what_prune_replaced(files, capsys):
    code, out, err = run_cli(["diff", "orig.json", "pruned.json", "--model", "fake", "--json"], capsys)
    assert code == 0, err
    doc = orjson.loads(out)
    pruned = json.loads((files / "pruned.json").read_text())
    reasoning = [m.get("reasoning_content") for m in pruned if m["role"] == "assistant"]
    steps = doc["trajectories"][0]["steps"]
    for step, text in zip(steps, reasoning):
        removed = [b for b in step["blocks"] if b["removed"]]
        assert len(removed) == (text or "").count(SKIP)
        assert [b["block"] for b in step["blocks"]] == list(range(len(step["blocks"])))
    # floor(0.8 * N) per step: 5 -> 4, 2 -> 1, 0, 3 -> 2
    assert [sum(b["removed"] for b in s["blocks"]) for s in steps] == [4, 1, 0, 2]
    assert doc["summary"]["removed"] == 7 and doc["summary"]["kept"] == 3
    assert doc["summary"]["tokens_after"] < doc["summary"]["tokens_before"]
    assert steps[0]["folded"][0] == {"kind": "action", "label": "tool_call:bash", "text": '{"command": "step 0"}', "new_text": None}


def test_score_flag_entropies_equal_the_score_command(files, capsys):
    run_cli(["score", "orig.json", "--model", "fake", "-o", "scores.jsonl", "-q"], capsys)
    records = [orjson.loads(line) for line in (files / "scores.jsonl").read_text().splitlines()]
    code, out, _ = run_cli(["diff", "orig.json", "pruned.json", "--model", "fake", "--score", "--json"], capsys)
    assert code == 0
    blocks = [(s["step"], b["block"], b["entropy_bits"], b["removed"]) for s in orjson.loads(out)["trajectories"][0]["steps"] for b in s["blocks"]]
    assert blocks == [(r["step"], r["block"], r["entropy_bits"], r["selected"]) for r in records]


def test_scores_option_reads_entropies_from_a_score_file(files, capsys):
    run_cli(["score", "orig.json", "--model", "fake", "-o", "scores.jsonl", "-q"], capsys)
    _, computed, _ = run_cli(["diff", "orig.json", "pruned.json", "--model", "fake", "--score", "--json"], capsys)
    code, read, err = run_cli(["diff", "orig.json", "pruned.json", "--model", "fake", "--scores", "scores.jsonl", "--json"], capsys)
    assert code == 0, err
    assert orjson.loads(read)["trajectories"] == orjson.loads(computed)["trajectories"]
    assert orjson.loads(read)["scores"] == "scores.jsonl"
    code, _, err = run_cli(["diff", "orig.json", "pruned.json", "--model", "fake", "--score", "--scores", "scores.jsonl"], capsys)
    assert code == 2 and "not both" in err


def test_the_precision_the_scores_were_computed_in_is_named(files, capsys, tmp_path):
    run_cli(["score", "orig.json", "--model", "fake", "-o", "scores.jsonl", "-q"], capsys)
    records = [orjson.loads(line) for line in open("scores.jsonl", "rb")]
    assert {r["precision"] for r in records} == {"float32"}  # the fake proxy's, as score writes it
    for name, edit in (("bf16.jsonl", {"precision": "bfloat16"}), ("old.jsonl", None)):
        with open(name, "wb") as f:
            for r in records:
                r = {k: v for k, v in r.items() if k != "precision"} if edit is None else {**r, **edit}
                f.write(orjson.dumps(r) + b"\n")
    code, out, err = run_cli(["diff", "orig.json", "pruned.json", "--model", "fake", "--scores", "bf16.jsonl", "--json"], capsys)
    assert code == 0, err
    assert orjson.loads(out)["precision"] == "bfloat16"
    code, out, _ = run_cli(["diff", "orig.json", "bf16.jsonl", "--model", "fake", "--no-pager"], capsys)
    assert code == 0 and re.search(r"proxy precision\s+.\s+bfloat16", out)
    code, out, _ = run_cli(["diff", "orig.json", "pruned.json", "--model", "fake", "--scores", "old.jsonl", "--json"], capsys)
    assert code == 0 and orjson.loads(out)["precision"] is None
    code, out, _ = run_cli(["diff", "orig.json", "pruned.json", "--model", "fake", "--scores", "old.jsonl", "--no-pager"], capsys)
    assert "proxy precision" not in out


def test_golden_plain_text(files, capsys):
    code, out, _ = run_cli(["diff", "orig.json", "pruned.json", "--model", "fake", "--score", "--width", "100", "--all"], capsys)
    assert code == 0
    assert "\x1b[" not in out
    assert_golden("diff_plain.txt", out)


@pytest.mark.parametrize("width", [[], ["--width", "60"]])
def test_step_headings_are_whole_when_stdout_is_not_a_terminal(files, capsys, width):
    # `iclr diff A B | cat`: rich's 80-column rule would cut "52 deleted" off with an ellipsis
    code, out, _ = run_cli(["diff", "orig.json", "pruned.json", "--model", "fake", "--all", "--no-pager", *width], capsys)
    assert code == 0
    headings = [line for line in out.splitlines() if line.startswith("step ")]
    assert headings[:2] == [
        "step 0 \u00b7 4/5 blocks removed \u00b7 reasoning 66 -> 26 tokens incl. 4 [SKIP], 52 deleted \u2500",
        "step 1 \u00b7 1/2 blocks removed \u00b7 reasoning 21 -> 14 tokens incl. 1 [SKIP], 10 deleted \u2500",
    ]
    assert "\u2026" not in out
    # block text still wraps at the console's width
    assert max(len(line) for line in out.splitlines() if line.startswith(("-  ", "   "))) <= (int(width[1]) if width else 80)


def test_golden_colours_forced(files, capsys, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLORTERM", "truecolor")
    code, out, _ = run_cli(["diff", "orig.json", "pruned.json", "--model", "fake", "--score", "--width", "100", "--no-pager"], capsys)
    assert code == 0
    assert "\x1b[9m" in out or ";9m" in out  # strike-through of removed blocks
    assert "38;2;" in out  # truecolor heat tags
    assert_golden("diff_colour.ansi", out)


def test_no_color_keeps_strike_through_but_drops_colours(files, capsys, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("NO_COLOR", "1")
    code, out, _ = run_cli(["diff", "orig.json", "pruned.json", "--model", "fake", "--score", "--width", "100", "--no-pager"], capsys)
    assert code == 0
    assert "38;2;" not in out and "48;2;" not in out and "\x1b[31m" not in out
    assert re.search(r"\x1b\[[0-9;]*9m", out)


def test_golden_json(files, capsys):
    code, out, _ = run_cli(["diff", "orig.json", "pruned.json", "--model", "fake", "--score", "--json", "--step", "1"], capsys)
    assert code == 0
    assert [s["step"] for s in orjson.loads(out)["trajectories"][0]["steps"]] == [1]
    assert_golden("diff_step1.json", out)


def test_context_folds_unchanged_steps_into_a_gap(files, capsys):
    # only step 3 loses blocks: every step but the last keeps its reasoning
    thoughts = ["Only one block here."] * 3 + [THOUGHTS[0]]
    (files / "orig.json").write_text(json.dumps(chat(thoughts)))
    run_cli(["prune", "orig.json", "--model", "fake", "-o", "pruned.json", "-q"], capsys)
    code, out, _ = run_cli(["diff", "orig.json", "pruned.json", "--model", "fake", "--context", "1", "--width", "100"], capsys)
    assert code == 0
    assert "... steps 0-1 unchanged (2 steps) ..." in out
    assert "step 2 · 0/1 blocks removed" in out and "step 3 · 4/5 blocks removed" in out
    code, out, _ = run_cli(["diff", "orig.json", "pruned.json", "--model", "fake", "--context", "0", "--width", "100"], capsys)
    assert "... steps 0-2 unchanged (3 steps) ..." in out


@pytest.mark.parametrize("variant,status", [("delete-all", "removed"), ("random-40", "changed")])
def test_other_variants(files, capsys, variant, status):
    run_cli(["prune", "orig.json", "--model", "fake", "--variant", variant, "-o", "other.json", "-q"], capsys)
    code, out, _ = run_cli(["diff", "orig.json", "other.json", "--model", "fake", "--json"], capsys)
    assert code == 0
    statuses = {b["status"] for s in orjson.loads(out)["trajectories"][0]["steps"] for b in s["blocks"]}
    assert status in statuses and "added" not in statuses
    if variant == "delete-all":
        assert statuses == {"removed"}
        assert orjson.loads(out)["summary"]["tokens_after"] == 0


def test_files_that_are_not_original_and_pruned_copy(files, capsys):
    (files / "short.json").write_text(json.dumps(chat(THOUGHTS[:2])))
    code, _, err = run_cli(["diff", "orig.json", "short.json", "--model", "fake"], capsys)
    assert code == 2
    assert "short.json: trajectory short.json#0 has 2 steps, orig.json#0 in orig.json has 4" in err


# -- score output plus its input ---------------------------------------------------------


def test_score_file_and_input_in_either_order(files, capsys):
    run_cli(["score", "orig.json", "--model", "fake", "-o", "scores.jsonl", "-q"], capsys)
    selected = sum(orjson.loads(line)["selected"] for line in (files / "scores.jsonl").read_text().splitlines())
    for args in (["scores.jsonl", "orig.json"], ["orig.json", "scores.jsonl"]):
        code, out, _ = run_cli(["diff", *args, "--model", "fake", "--json"], capsys)
        assert code == 0
        doc = orjson.loads(out)
        assert doc["summary"]["removed"] == selected == 7
        assert doc["scores"] == "scores.jsonl"
        assert all(b["entropy_bits"] is not None for s in doc["trajectories"][0]["steps"] for b in s["blocks"])


def test_score_file_from_another_input_is_refused_with_line_and_field(files, capsys):
    run_cli(["score", "orig.json", "--model", "fake", "-o", "scores.jsonl", "-q"], capsys)
    lines = (files / "scores.jsonl").read_text().splitlines()
    rec = orjson.loads(lines[2])
    rec["text"] = "something else"
    lines[2] = orjson.dumps(rec).decode()
    (files / "scores.jsonl").write_text("\n".join(lines) + "\n")
    code, _, err = run_cli(["diff", "scores.jsonl", "orig.json", "--model", "fake"], capsys)
    assert code == 2
    assert "scores.jsonl:3: field 'text': block 2 of orig.json#0 step 0 is not the block of that number in orig.json" in err


def test_bad_score_record_names_line_and_field(files, capsys):
    (files / "scores.jsonl").write_text('{"trajectory": "orig.json#0", "step": 0, "block": 0, "entropy_bits": 1.0}\n{"trajectory": "orig.json#0", "step": "one", "block": 1, "entropy_bits": 2.0}\n')
    code, _, err = run_cli(["diff", "scores.jsonl", "orig.json", "--model", "fake"], capsys)
    assert code == 2 and "scores.jsonl:2: field 'step': expected int, got str" in err


# -- painting ----------------------------------------------------------------------------


def test_heat_colour_runs_cold_to_hot():
    assert diff_view.heat_colour(1.0, 1.0, 5.0) == diff_view.HEAT[0]
    assert diff_view.heat_colour(5.0, 1.0, 5.0) == diff_view.HEAT[-1]
    assert diff_view.heat_colour(3.0, 3.0, 3.0) == diff_view.HEAT[len(diff_view.HEAT) // 2]


def test_changed_block_shows_old_struck_and_new_text():
    traj = diffdata.TrajectoryDiff("t", (diffdata.StepDiff("t", 0, (diffdata.BlockDiff(0, 0, "changed", "the quick fox", "the fox"),), ReasoningTokens(4, 3, 3, 1)),))
    diff = diffdata.Diff("a", "b", "regex-words", None, (traj,), diffdata.summarize([traj]))
    buf = io.StringIO()
    diff_view.show(diff_view.make_console(file=buf, width=80), diff, [(traj, list(traj.steps))])
    lines = buf.getvalue().splitlines()
    assert "~  the quick fox" in lines and "+  the fox" in lines
    assert "step 0 · 0/1 blocks removed, 1 changed · reasoning 4 -> 3 tokens" in lines[0]


def test_long_output_on_a_terminal_goes_through_the_pager(monkeypatch):
    import rich.pager

    shown = []
    monkeypatch.setattr(rich.pager.SystemPager, "show", lambda self, content: shown.append(content))
    steps = tuple(diffdata.StepDiff("t", i, (diffdata.BlockDiff(0, 0, "removed", f"block {i}"),), ReasoningTokens(2, 1, 0, 2, 1, 1)) for i in range(30))
    traj = diffdata.TrajectoryDiff("t", steps)
    diff = diffdata.Diff("a", "b", "regex-words", None, (traj,), diffdata.summarize([traj]))
    buf = io.StringIO()
    console = diff_view.Console(file=buf, width=80, height=20, force_terminal=True, color_system="truecolor")
    diff_view.show(console, diff, [(traj, list(steps))])
    assert len(shown) == 1 and "block 29" in shown[0] and "\x1b[" in shown[0]
    assert buf.getvalue() == ""
    shown.clear()
    diff_view.show(console, diff, [(traj, list(steps))], pager=False)
    assert shown == [] and "block 29" in buf.getvalue()


REAL = REALDATA / "claude_code" / "spotter_258c7280_main_session_slice.jsonl"


@pytest.mark.skipif(not REAL.exists(), reason=f"real transcripts not present at {REAL}")
def test_real_claude_code_session(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    # every thinking block of the session is signed by Anthropic: sealed unless edited on request
    run_cli(["prune", str(REAL), "--model", "fake", "--signed-thinking", "edit", "-o", "pruned.jsonl", "-q"], capsys)
    run_cli(["score", str(REAL), "--model", "fake", "--signed-thinking", "edit", "-o", "scores.jsonl", "-q"], capsys)
    records = [orjson.loads(line) for line in (tmp_path / "scores.jsonl").read_text().splitlines()]
    code, out, err = run_cli(["diff", str(REAL), "pruned.jsonl", "--model", "fake", "--json"], capsys)
    assert code == 0, err
    summary = orjson.loads(out)["summary"]
    assert summary["steps"] == 103
    assert summary["blocks"] == len(records) and summary["changed"] == summary["added"] == 0
    assert summary["removed"] == sum(r["selected"] for r in records) > 0
    code, text, _ = run_cli(["diff", "scores.jsonl", str(REAL), "--model", "fake", "--context", "0", "--width", "100"], capsys)
    assert code == 0
    assert text.count("\n- [") == summary["removed"]
