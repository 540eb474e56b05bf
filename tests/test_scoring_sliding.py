"""The sliding KV window and batched streams (docs/scoring.md) on tiny random Llamas.

Tolerances (STYLE.md, 9): 1e-3 bits between paths that compute the same thing; 1e-4 where
re-rotated keys are compared with keys computed at the target position.
"""

import pytest

torch = pytest.importorskip("torch")

from tiny_llama import TOL, assert_same, flat, make_trajs, run, scorer, tiny, tiny1, tiny_dir  # noqa: F401

from iclr_cli.errors import UsageError
from iclr_cli.scoring.base import ScoreRequest
from iclr_cli.scoring.entropy import entropy_bits
from iclr_cli.scoring.kv import KVShape, KVStore, Rotary
from iclr_cli.scoring.sliding import SlidingJob, SlidingWindow
from iclr_cli.scoring.streams import common_prefix


def trajectory_tokens(s, trajs):
    from iclr_cli.context import render_prompt, render_step

    return sum(len(s.tokenizer.encode(seg)[0]) for t in trajs for seg in (*render_prompt(t.prompt), *map(render_step, t.steps)))


# -- the window rule, by hand ---------------------------------------------------------------

def test_window_rule_by_hand():
    w = SlidingWindow(16, 4, 2)  # budget 12 stream tokens, evicting 2 at a time
    assert w.budget == 12
    assert [w.start(j) for j in range(10, 20)] == [0, 0, 2, 2, 4, 4, 6, 6, 8, 8]
    assert [w.run_end(j) for j in (0, 11, 12, 13, 14)] == [12, 12, 14, 14, 16]
    # every token sees at most the limit and at least limit - step + 1 tokens, sink included
    for j in range(12, 60):
        assert 16 - 2 + 1 <= w.sink + j - w.start(j) + 1 <= 16
    assert SlidingWindow.for_prompt(300, 8192) == SlidingWindow(8192, 300, 1024)
    assert SlidingWindow.for_prompt(6000, 8192) == SlidingWindow(8192, 4096, 1024)


def test_store_drop_and_rotation_compose():
    shape = KVShape(2, 1, 4, torch.float32, torch.device("cpu"))
    store = KVStore(shape)
    kv = torch.arange(2 * 2 * 1 * 10 * 4, dtype=torch.float32).reshape(2, 2, 1, 10, 4)
    store.append(kv)
    store.drop(3, 4)  # overlapping move: tokens 7..9 land on 3..5
    assert store.length == 6
    assert torch.equal(store.view(0, 6), torch.cat([kv[:, :, :, :3], kv[:, :, :, 7:]], dim=3))
    rot = Rotary(torch.tensor([1.0, 0.01]))
    a, b = kv[0, 0].clone(), kv[0, 0].clone()
    rot.shift(a, 5)
    rot.shift(a, -12)
    rot.shift(b, -7)
    assert torch.allclose(a, b, atol=1e-4)
    rot.shift(a, 7)
    assert torch.allclose(a, kv[0, 0], atol=1e-4)


# -- sliding mode on the model --------------------------------------------------------------

def test_sliding_equals_one_plain_forward_while_everything_fits(tiny):
    model, tokenizer = tiny
    trajs = make_trajs(n_traj=2, n_steps=4, seed=5)
    sliding, fresh = scorer(tiny, context="sliding"), scorer(tiny, context="fresh")
    a = run(sliding, trajs)
    assert_same(a, run(fresh, trajs))
    assert not any(r.windowed for res in a for r in res.steps)
    # and directly against one forward pass over P + history + step
    prompt, history = ("[user]\nFix it.\n\n",), ("[reasoning]\nLook at the parser.\n\n[tool_result]\nok\n\n",)
    step = "[reasoning]\nFirst check the header.\n\nThen run the test again."
    [res] = sliding.score([ScoreRequest("x", prompt, history, step, ((12, 35), (37, len(step))))])
    ids = [i for seg in (*prompt, *history) for i in tokenizer.encode(seg)[0]]
    step_ids, offsets = tokenizer.encode(step)
    with torch.inference_mode():
        h = entropy_bits(model(torch.tensor([ids + step_ids])).logits[0])
    for (lo, hi), got in zip(((12, 35), (37, len(step))), res.blocks):
        toks = [len(ids) + k for k, (st, _) in enumerate(offsets) if lo <= st < hi]
        assert got.entropy_bits == pytest.approx(sum(h[p - 1].item() for p in toks) / len(toks), abs=TOL)


def test_sliding_eviction_matches_a_hand_computed_case(tiny1):
    """One layer: a token's keys and values depend on the token and its position only, so the
    entropy at stream index j is that of one plain forward over the sink followed by the
    stream tokens start(j) .. j, numbered from 0. The windows below are worked out by hand
    for a 16-token limit, a 4-token sink and evictions of 2 (SlidingWindow(16, 4, 2))."""
    model, tokenizer = tiny1
    s = scorer(tiny1, max_tokens=16, context="sliding")
    ids = tokenizer.encode("Fix the failing test in the loader. " * 8)[0][:40]
    window = SlidingWindow(16, 4, 2)
    assert SlidingWindow.for_prompt(4, 16) == window
    by_hand = {10: 0, 11: 0, 12: 2, 13: 2, 14: 4, 20: 10, 27: 16, 35: 24}  # stream index -> window start
    # keep_from = 40: the next request resumes at the end at the earliest (no write-back)
    job = SlidingJob(None, ids, list(range(3, 40)), window, 40, s._shape, s._rotary, common_prefix)
    s._run([job])
    for j, start in by_hand.items():
        assert window.start(j) == start
        seen = ids[:4] + ids[4 + start : 4 + j + 1]
        with torch.inference_mode():
            ref = entropy_bits(model(torch.tensor([seen])).logits[0, -1]).item()
        assert job.entropies[4 + j] == pytest.approx(ref, abs=1e-4), j
    # stored: the sink and the window of the next token, stream index 36 (start 26): 4 + 10
    assert (job.state.lo, job.state.store.length) == (26, 14)


def test_sliding_cached_uncached_and_batched_agree_with_write_back(tiny):
    trajs = make_trajs(n_traj=3, n_steps=8, seed=2)
    kw = dict(max_tokens=160, context="sliding")
    cached = scorer(tiny, batch_size=1, **kw)
    batched = scorer(tiny, batch_size=8, **kw)
    naive = scorer(tiny, prefix_cache=False, **kw)
    ref = run(naive, trajs)
    assert_same(run(cached, trajs), ref)
    assert_same(run(batched, trajs), ref)
    reports = [r for res in ref for r in res.steps]
    assert sum(r.windowed for r in reports) >= 8 and any(b.selected for r in reports for b in r.blocks)
    assert all(r.context_tokens <= 160 for r in reports if not r.skipped)
    # every token once, plus what write-back changed: far below recomputing each step
    assert cached.stats.forward_tokens <= 1.5 * trajectory_tokens(cached, trajs) < naive.stats.forward_tokens
    assert batched.stats.batches < cached.stats.batches and batched.stats.forward_tokens == cached.stats.forward_tokens


def test_sliding_and_fresh_differ_once_windowed(tiny):
    trajs = make_trajs(n_traj=1, n_steps=8, seed=2)
    a = flat(run(scorer(tiny, max_tokens=160, context="sliding"), trajs))
    b = flat(run(scorer(tiny, max_tokens=160, context="fresh"), trajs))
    windowed = [(x, y) for x, y in zip(a, b) if x[3] and x[8] is not None]
    assert windowed and max(abs(x[8] - y[8]) for x, y in windowed) > 0.01


def test_sliding_needs_keys_that_rotate_as_rope_does(tiny, monkeypatch):
    from transformers.models.llama import modeling_llama

    def interleaved(x):  # GPT-J's pairing (2i, 2i+1): a rotation too, but not the one Rotary undoes
        return torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)

    monkeypatch.setattr(modeling_llama, "rotate_half", interleaved)
    with pytest.raises(UsageError, match="--context sliding.*rotate"):
        scorer(tiny, context="sliding")
    assert scorer(tiny, context="fresh").prefix_cache  # fresh needs no re-rotation
    monkeypatch.undo()
    monkeypatch.setattr(tiny[0].model.rotary_emb, "rope_type", "dynamic", raising=False)
    with pytest.raises(UsageError, match="static RoPE"):
        scorer(tiny, context="sliding")
    with pytest.raises(UsageError):
        scorer(tiny, context="rolling")


# -- batched streams ------------------------------------------------------------------------

def test_batched_streams_with_different_prefix_lengths_equal_batch_one(tiny):
    # different lengths: trajectories of 2, 5 and 8 steps, so cached pasts differ step by step
    trajs = [make_trajs(n_traj=1, n_steps=n, seed=n)[0] for n in (2, 5, 8)]
    trajs = [t.__class__(f"t{i}", t.prompt, t.steps) for i, t in enumerate(trajs)]
    for kw in (dict(context="fresh"), dict(context="fresh", max_tokens=160), dict(context="sliding", max_tokens=160)):
        one, many = scorer(tiny, batch_size=1, **kw), scorer(tiny, batch_size=16, **kw)
        assert_same(run(many, trajs), run(one, trajs))
        assert many.stats.batches < one.stats.batches and many.stats.pad_tokens > 0
        assert many.stats.reused_tokens == one.stats.reused_tokens > 0


def test_cache_budget_bounds_kept_streams_and_callers_can_schedule_by_it(tiny):
    s = scorer(tiny, max_tokens=160, context="sliding", cache_tokens=700)
    assert s.stream_tokens == 2 * 160 + 20 and s.stream_capacity == 2
    trajs = make_trajs(n_traj=4, n_steps=6, seed=7)
    ref = run(scorer(tiny, max_tokens=160, context="sliding", prefix_cache=False), trajs)
    assert_same(run(s, trajs), ref)
    assert sum(e[1] for e in s._streams._entries.values()) <= 700
