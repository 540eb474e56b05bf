"""``--context auto`` (the default): per trajectory, sliding unless fresh costs under half as
much (tokens weighted by the context each one attends to, iclr_cli.scoring.cost); the choice
is made before scoring, the same for ``score`` and ``prune``, and each result names the mode
that scored it."""

import json
import random

import pytest

pytest.importorskip("torch")

from tiny_llama import WORDS, assert_same, make_trajs, paragraph, run, scorer, tiny, tiny_dir  # noqa: F401

from iclr_cli.compress import Settings, _preview, compress_trajectories
from iclr_cli.context import render_prompt
from iclr_cli.pipeline import score_records
from iclr_cli.policies import parse_variant
from iclr_cli.trajectory import Part, Step, Trajectory

LIMIT = 160
# Every step reasoning, at a window the steps overflow steadily: fresh recomputes a window per
# step, sliding reads each token once (at 160 this test model's windows happen to align with
# the steps, and fresh costs under half)
EVERY_LIMIT = 240


def sparse_session(seed=0, steps=8):
    """Long tool outputs and reasoning in a few steps only (a Claude Code session's shape):
    the fresh window forwards a window per reasoning step, sliding reads everything."""
    rng = random.Random(seed)
    out = []
    for i in range(steps):
        reasoning = "\n\n".join(paragraph(rng, 6) for _ in range(3)) if i in (3, steps - 1) else ""
        parts = ([Part("reasoning", reasoning, label="reasoning", ref=i)] if reasoning else []) + [
            Part("action", f'{{"cmd": "cat {rng.choice(WORDS)}.py"}}', label="tool_call:bash"),
            Part("observation", " ".join(paragraph(rng, 12) for _ in range(12)), label="tool_result")]
        out.append(Step(i, tuple(parts)))
    return Trajectory("sparse", (Part("prompt", "Fix the failing test in src/app.py.", label="user"),), tuple(out))


def modes(results):
    return {r.context for res in results for r in res.steps if r.blocks and not r.skipped}


def test_auto_takes_fresh_where_it_forwards_far_fewer_tokens_and_equals_it(tiny):
    [traj] = trajs = [sparse_session()]
    auto = scorer(tiny, max_tokens=LIMIT)
    assert auto.context == "auto"
    plan = auto.plan_contexts({traj.id: _preview(traj, render_prompt(traj.prompt), Settings(parse_variant("iclr")))})
    assert plan == {"sparse": "fresh"}
    got = run(auto, trajs)
    assert modes(got) == {"fresh"} and any(r.windowed for r in got[0].steps)
    fresh = scorer(tiny, max_tokens=LIMIT, context="fresh")
    assert_same(got, run(fresh, trajs))
    assert auto.stats.forward_tokens == fresh.stats.forward_tokens
    sliding = scorer(tiny, max_tokens=LIMIT, context="sliding")
    run(sliding, trajs)
    assert fresh.stats.forward_tokens * 2 < sliding.stats.forward_tokens


def test_auto_takes_sliding_where_every_step_reasons_and_equals_it(tiny):
    trajs = make_trajs(n_traj=2, n_steps=8, seed=2)
    auto = scorer(tiny, max_tokens=EVERY_LIMIT)
    got = run(auto, trajs)
    assert modes(got) == {"sliding"} and sum(r.windowed for res in got for r in res.steps) >= 4
    assert_same(got, run(scorer(tiny, max_tokens=EVERY_LIMIT, context="sliding"), trajs))


def test_score_and_prune_plan_alike_and_records_name_the_mode(tiny):
    trajs = [sparse_session(seed=1), *make_trajs(n_traj=1, n_steps=8, seed=3)]
    planned = {}
    for score_all in (True, False):
        s = scorer(tiny, max_tokens=LIMIT)
        results = compress_trajectories(trajs, Settings(parse_variant("iclr"), score_all=score_all), s, s.tokenizer)
        planned[score_all] = dict(s._modes)
        records = list(score_records("x", results, parse_variant("iclr")))
    assert planned[True] == planned[False] == {"sparse": "fresh", "traj-0": "sliding"}
    assert {(r["trajectory"], r["context"]) for r in records if "entropy_bits" in r} == {("sparse", "fresh"), ("traj-0", "sliding")}


def test_explicit_modes_ignore_the_plan(tiny):
    traj = sparse_session()
    preview = {traj.id: _preview(traj, render_prompt(traj.prompt), Settings(parse_variant("iclr")))}
    assert scorer(tiny, max_tokens=LIMIT, context="sliding").plan_contexts(preview) == {"sparse": "sliding"}
    unplanned = scorer(tiny, max_tokens=LIMIT)
    assert unplanned.mode("never-planned") == "sliding"  # serve and replay: the future is unknown


def test_the_summary_names_the_mode_of_the_scored_steps(tiny_dir, capsys, tmp_path):
    from format_helpers import SAMPLES, run_cli, summary_value

    code, _, err = run_cli(capsys, "prune", str(SAMPLES / "openai_chat.json"), "--model", str(tiny_dir), "-o", str(tmp_path / "p.json"))
    assert code == 0, err
    mode, scored = summary_value(err, "context (scored steps)").split()
    code, out, _ = run_cli(capsys, "score", str(SAMPLES / "openai_chat.json"), "--model", str(tiny_dir))
    assert code == 0 and int(scored) >= 1
    assert {r["context"] for r in map(json.loads, out.splitlines()) if "entropy_bits" in r} == {mode}  # planned alike, named alike
    code, _, err = run_cli(capsys, "prune", str(SAMPLES / "openai_chat.json"), "--model", "fake", "-o", str(tmp_path / "f.json"))
    assert code == 0 and "context (scored steps)" not in err  # the fake scorer has no modes
