"""A history segment larger than the window keeps its most recent tokens (docs/scoring.md, "Huge tool outputs").

Fresh window: a segment that cannot fit the history budget even alone (a huge tool output) is
no longer dropped whole (``history_kept: 0``): its last tokens are kept, cut at a token
boundary on the window grid, and the score record says how many (``history_tail_tokens``).
Only a segment's last ``limit`` tokens are ever tokenized in fresh mode (``tail_ids``), and a
long text is tokenized in pieces elsewhere (``encode_ids``, ``count_ids``): same tokens.
"""

from __future__ import annotations

import json
import random

import pytest

from format_helpers import run_cli
from iclr_cli.scoring.window import plan_window, tail_ids
from tiny_llama import WORDS, paragraph, scorer, tiny, tiny_dir  # noqa: F401


def test_a_segment_over_the_budget_keeps_its_tail_on_the_grid():
    plan = plan_window(100, [5000], 100, 1000, stride=250)  # budget 800
    assert (plan.first_history, plan.history_cut, plan.history_tail) == (0, 4250, 750)  # start: ceil(4200 / 250) * 250
    assert plan.windowed
    plan = plan_window(100, [5000, 100, 100], 100, 1000, stride=250)
    assert (plan.first_history, plan.history_cut, plan.history_tail) == (0, 4500, 500)  # 500 + 200 <= 800


def test_segments_that_could_fit_alone_are_still_dropped_whole():
    plan = plan_window(100, [700, 300], 100, 1000, stride=100)  # 700 fits alone, not beside 300
    assert (plan.first_history, plan.history_cut) == (1, 0)
    assert plan_window(100, [50, 60], 100, 1000).history_cut == 0  # everything fits
    plan = plan_window(500, [900], 500, 1000)  # no budget left at all
    assert (plan.first_history, plan.history_cut) == (1, 0)


def test_the_window_start_moves_on_the_grid_as_the_history_grows():
    starts = [plan_window(50, [4000] + [100] * n, 100, 1000, stride=200) for n in range(0, 8)]
    cuts = [p.history_cut for p in starts if p.first_history == 0]
    assert cuts and all(c % 200 == 0 for c in cuts) and cuts == sorted(cuts)


@pytest.fixture(scope="module")
def tok(tiny):
    return tiny[1]


def long_text(seed: int, lines: int) -> str:
    rng = random.Random(seed)
    out = []
    for i in range(lines):
        kind = i % 4
        if kind == 0:
            out.append(f"{i:6d}\u2192    def {rng.choice(WORDS)}_{i}(self, value={i}):  # {rng.choice(WORDS)}")
        elif kind == 1:
            out.append(json.dumps({"k": rng.choice(WORDS), "v": [i, i * 2.5, None], "s": "月末 ✓ ß"}))
        elif kind == 2:
            out.append("    " * rng.randint(0, 3) + paragraph(rng, rng.randint(3, 14)))
        else:
            out.append("=" * rng.randint(1, 60) + " " + rng.choice(WORDS) * rng.randint(1, 5))
    return "\n".join(out)


@pytest.mark.parametrize("n", [1, 37, 500])
def test_tail_ids_are_the_whole_texts_last_tokens(tok, n):
    text = long_text(1, 3000)  # ~200K characters: the suffix path
    whole = tok.encode(text)[0]
    assert len(text) > 8 * (n + 64)
    assert tail_ids(text, tok.encode, n) == whole[-n:]
    assert tail_ids("short text", tok.encode, n) == tok.encode("short text")[0][-n:]


def test_long_texts_tokenized_in_pieces_give_the_same_tokens(tok):
    from iclr_cli.scoring import tokenizer as tk

    text = long_text(2, 1500)
    pieces = list(tk.pieces(tok, text, size=2000))
    assert len(pieces) > 20 and "".join(pieces) == text
    ids = tok.encode(text)[0]
    assert [i for p in pieces for i in tok.ids(p)] == ids
    assert sum(len(tok.ids(p)) for p in pieces) == len(ids) == tk.count_ids(tok, text)
    assert list(tk.encode_ids(tok, text)) == ids
    minified = json.dumps([{"id": i, "name": f"{WORDS[i % len(WORDS)]}{i}", "v": [i, i / 3]} for i in range(800)], separators=(",", ":"))
    parts = list(tk.pieces(tok, minified, size=3000))  # one line, few spaces: cut after any token
    assert len(parts) > 5 and [i for p in parts for i in tok.ids(p)] == tok.encode(minified)[0]


def _session(huge: str):
    from iclr_cli.trajectory import Part, Step, Trajectory

    rng = random.Random(3)
    steps = []
    for i in range(3):
        reasoning = "\n\n".join(paragraph(rng, 8) for _ in range(3))
        observation = huge if i == 0 else paragraph(rng, 6)
        steps.append(Step(i, (Part("reasoning", reasoning, label="reasoning", ref=i),
                              Part("action", '{"cmd": "cat big.log"}', label="tool_call:bash"),
                              Part("observation", observation, label="tool_result"))))
    return Trajectory("huge", (Part("prompt", "Fix the failing test.", label="user"),), tuple(steps))


def test_fresh_window_shows_the_most_recent_tokens_of_a_huge_output(tiny):
    from iclr_cli.compress import Settings, _prepare
    from iclr_cli.context import render_prompt, render_step
    from iclr_cli.policies import parse_variant
    from tiny_llama import run

    huge = long_text(4, 4000)  # ~60K tokens, the window is 400
    traj = _session(huge)
    s = scorer(tiny, max_tokens=400, context="fresh")
    [res] = run(s, [traj])
    step1 = res.steps[1]
    assert step1.history_kept == 1 and step1.history_tail and step1.windowed
    assert step1.context_tokens <= 400
    # The proxy saw P, then exactly the last history_tail tokens of step 0, then step 1.
    prompt = render_prompt(traj.prompt)
    req = _prepare(traj.id, prompt, [render_step(res.compressed.steps[0])], traj.steps[1], Settings(parse_variant("iclr"))).request
    lay = s._lay_out(req)
    encode = lambda t: s.tokenizer.encode(t)[0]
    p_ids = [i for seg in prompt for i in encode(seg)]
    assert list(lay.ids) == p_ids + encode(req.history[0])[-step1.history_tail:] + encode(req.step)
    # Cached and uncached runs see the same input (prefix reuse changes no result).
    uncached = scorer(tiny, max_tokens=400, context="fresh", prefix_cache=False)
    [again] = run(uncached, [traj])
    assert [(r.history_kept, r.history_tail) for r in again.steps] == [(r.history_kept, r.history_tail) for r in res.steps]
    for a, b in zip(res.steps, again.steps):
        for x, y in zip(a.blocks, b.blocks):
            assert x.entropy_bits is None and y.entropy_bits is None or abs(x.entropy_bits - y.entropy_bits) < 1e-3


def test_score_records_carry_the_tail(capsys, tmp_path):
    rows = [{"role": "user", "content": "Fix it."},
            {"role": "assistant", "reasoning_content": "Read the log.\n\nThen decide.", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": " ".join(f"line{i}" for i in range(3000))},
            {"role": "assistant", "reasoning_content": "The log ends in an error.\n\nFix the parser.", "content": "Done."}]
    src = tmp_path / "c.json"
    src.write_text(json.dumps(rows))
    # the fast window's own tail: a near tie rescored as --exact would see the log whole
    code, out, err = run_cli(capsys, "score", str(src), "--model", "fake", "--max-tokens", "300", "--recheck-below", "0", "-q")
    assert code == 0, err
    records = [json.loads(line) for line in out.splitlines()]
    second = [r for r in records if r["step"] == 1]
    assert second and all(r["history_kept"] == 1 and 0 < r["history_tail_tokens"] < 300 for r in second)
    assert all("history_tail_tokens" not in r for r in records if r["step"] == 0)
