"""One token-accounting definition for every command (docs/method.md, "Token counts"; iclr_cli/token_accounting.py).

deleted / generated is the deletion ratio; [SKIP] markers are counted apart; generated =
kept + deleted and written = kept + marker tokens hold exactly; prune, score, diff and replay
report the same numbers for the same edit.
"""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from format_helpers import SAMPLES, run_cli, summary_value
from iclr_cli.inputs import load_file
from iclr_cli.blocks import SKIP
from iclr_cli.scoring.fake import RegexTokenizer
from iclr_cli.token_accounting import ReasoningTokens, account, token_counter

COUNT = token_counter(RegexTokenizer())  # words, punctuation marks and whitespace runs


def test_definitions_on_a_worked_example():
    generated = "Read the file.\n\nIt is empty.\n\nWrite hi."
    written = f"{SKIP}\n\nIt is empty.\n\n{SKIP}"
    t = account(COUNT, [(generated, written)])
    # generated: Read,_,the,_,file,.,\n\n,It,_,is,_,empty,.,\n\n,Write,_,hi,. = 18 tokens
    # written: [,SKIP,],\n\n,It,_,is,_,empty,.,\n\n,[,SKIP,] = 14 tokens, 2 markers of 3 tokens
    assert t == ReasoningTokens(generated=18, written=14, kept=8, deleted=10, markers=2, marker_tokens=6)
    assert t.deletion_ratio == 10 / 18


def test_dropped_and_kept_items_count_as_all_and_nothing():
    assert account(COUNT, [("a b", "")]) == ReasoningTokens(3, 0, 0, 3, 0, 0)
    assert account(COUNT, [("a b", "a b")]) == ReasoningTokens(3, 3, 3, 0, 0, 0)
    assert account(COUNT, []).deletion_ratio is None


def test_markers_already_in_the_input_are_kept_text():
    t = account(COUNT, [(f"{SKIP}\n\nx y", f"{SKIP}\n\n{SKIP}")])
    assert t.markers == 1 and t.marker_tokens == 3
    assert t.kept == 4  # the old marker and the separator
    assert t.generated == t.kept + t.deleted


TEXT = st.lists(st.sampled_from(["a", "bc", " ", "\n\n", ".", SKIP, "é"]), max_size=30).map("".join)


@given(st.lists(st.tuples(TEXT, TEXT), max_size=5))
def test_identities_hold_for_any_texts(pairs):
    t = account(COUNT, pairs)
    assert t.generated == t.kept + t.deleted
    assert t.written == t.kept + t.marker_tokens
    assert t == sum((account(COUNT, [p]) for p in pairs), ReasoningTokens())


def _prune(capsys, tmp_path, name, *args):
    out = tmp_path / f"pruned-{name}"
    code, _, err = run_cli(capsys, "prune", str(SAMPLES / name), "--model", "fake", "-o", str(out), *args)
    assert code == 0, err
    return out, err


def _numbers(err: str) -> tuple[int, int, int, int, str]:
    return (
        int(summary_value(err, "reasoning tokens generated (regex-words)")),
        int(summary_value(err, "reasoning tokens deleted")),
        int(summary_value(err, "reasoning tokens kept")),
        int(summary_value(err, "reasoning tokens written")),
        summary_value(err, "deletion ratio (deleted / generated)"),
    )


# codex_rollout: two of its reasoning items carry encrypted_content, which prune drops whole
# when edited; score's summary counts what prune writes, so it says the same.
@pytest.mark.parametrize("name", ["openai_chat.json", "claude_code_session.jsonl", "mini_swe_agent.traj.json", "swe_agent.traj", "codex_rollout.jsonl"])
def test_prune_score_and_diff_report_the_same_accounting(capsys, tmp_path, name):
    # the Claude Code sample's thinking is all Anthropic-signed: sealed unless edited on request
    # (sealed reasoning counts as generated and kept, as diff counts it)
    edit = ("--signed-thinking", "edit") if name == "claude_code_session.jsonl" else ()
    pruned, err = _prune(capsys, tmp_path, name, "--variant", "iclr", *edit)
    generated, deleted, kept, written, ratio = _numbers(err)
    assert generated == kept + deleted and deleted > 0
    code, _, score_err = run_cli(capsys, "score", str(SAMPLES / name), "--model", "fake", *edit, "-o", str(tmp_path / "scores.jsonl"))
    assert code == 0
    assert _numbers(score_err) == (generated, deleted, kept, written, ratio)
    code, out, _ = run_cli(capsys, "diff", str(SAMPLES / name), str(pruned), "--model", "fake", "--json")
    assert code == 0
    s = orjson.loads(out)["summary"]
    assert (s["reasoning_tokens_generated"], s["reasoning_tokens_deleted"], s["reasoning_tokens_kept"], s["reasoning_tokens_written"]) == (generated, deleted, kept, written)
    assert f"{s['deletion_ratio']:.3f}" == ratio
    code, out, _ = run_cli(capsys, "diff", str(SAMPLES / name), str(pruned), "--model", "fake", "--no-pager", "--width", "120")
    assert f"deletion ratio (deleted / generated) │ {ratio}" in " ".join(out.split()).replace("│ │", "│")


@pytest.mark.parametrize("opaque", ["drop", "keep"])
def test_score_summary_counts_what_prune_writes_for_encrypted_items(capsys, tmp_path, opaque):
    _, err = _prune(capsys, tmp_path, "codex_rollout.jsonl", "--encrypted-reasoning", opaque)
    code, _, score_err = run_cli(capsys, "score", str(SAMPLES / "codex_rollout.jsonl"), "--model", "fake",
                                 "--encrypted-reasoning", opaque, "-o", str(tmp_path / "s.jsonl"))
    assert code == 0 and _numbers(score_err) == _numbers(err)
    assert "could not be applied as asked" in score_err and "could not be applied as asked" in err


def test_codex_keep_counts_what_was_written_not_what_was_asked(capsys, tmp_path):
    """The accounting half of the write-back rule: with --encrypted-reasoning keep, an edited encrypted
    item is written unedited, so it counts as nothing deleted. The sample has two encrypted
    items (one with two summary parts) and one plain one: only the plain one's deletion is
    counted."""

    out, err = _prune(capsys, tmp_path, "codex_rollout.jsonl", "--variant", "random-10", "--encrypted-reasoning", "keep")
    generated, deleted, kept, written, ratio = _numbers(err)
    adapter, before = load_file(str(SAMPLES / "codex_rollout.jsonl"))
    after = adapter.load(out.read_bytes(), "out").trajectories
    pairs = [(o.text, n.text) for t0, t1 in zip(before.trajectories, after) for s0, s1 in zip(t0.steps, t1.steps) for o, n in zip(s0.reasoning, s1.reasoning)]
    assert len(pairs) == 4  # one encrypted item holds two summary parts
    changed = [(o, n) for o, n in pairs if o != n]
    assert len(changed) == 1  # the plain item; the encrypted ones were left as generated
    assert (generated, deleted, kept, written) == (428, account(COUNT, pairs).deleted, 428 - deleted, written)
    assert 0 < deleted < 0.1 * generated + len(pairs)


def test_replay_record_uses_the_same_accounting(tmp_path):
    from replay_fixtures import call, completion, fake_openai, make_session, submit

    from iclr_cli.replay.suite import load_tasks

    folder = tmp_path / "tasks" / "t"
    (folder / "files").mkdir(parents=True)
    (folder / "task.toml").write_text('domain = "office"\ndescription = "d"\ninstruction = "Say hi."\n')
    (folder / "check.py").write_text("def check(ctx):\n    return 1.0\n")
    reasoning = "Read the file.\n\nIt is empty.\n\nWrite hi.\n\nThen submit.\n\nDone."
    script = [completion(None, [call("bash", {"command": "ls"})], reasoning_content=reasoning), submit()]
    with fake_openai(script) as srv:
        make_session(tmp_path, srv.url, tasks=load_tasks(tmp_path / "tasks"), variants=["iclr"]).run(1)
    [record] = [json.loads(x) for x in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    saved = json.loads((tmp_path / "out" / record["trajectory"]).read_text())
    sent = [m for m in saved["messages"] if m["role"] == "assistant"][0]["reasoning_content"]
    expected = account(COUNT, [(reasoning, sent)])
    assert sent.count(SKIP) == 4
    assert record["reasoning_tokens_generated"] == expected.generated
    assert record["reasoning_tokens_removed"] == expected.deleted
    assert record["reasoning_tokens_kept"] == expected.kept
    assert (record["skip_markers"], record["skip_marker_tokens"]) == (4, 12)
    requests = [json.loads(x) for x in (tmp_path / "out" / record["requests_log"]).read_text().splitlines()]
    assert requests[0]["reasoning_tokens_deleted"] == expected.deleted and requests[0]["skip_markers"] == 4
