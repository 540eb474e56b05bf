"""Activation patching on the tiny random Llama: exactness of the cached patched run, the
repair at the last layer, d = 0 without reasoning, windowing, and the work a boundary costs."""

from __future__ import annotations

import json

import pytest

from format_helpers import run_cli
from tiny_llama import make_trajs, tiny, tiny_dir  # noqa: F401

torch = pytest.importorskip("torch")

from iclr_cli.analysis.boundaries import boundaries, delete_all, lay_out  # noqa: E402
from iclr_cli.analysis.patching import parse_layers, patch_trajectory, summarize  # noqa: E402
from iclr_cli.analysis.sensor import Sensor  # noqa: E402
from iclr_cli.analysis.stats import kl_bits  # noqa: E402
from iclr_cli.trajectory import Part, Step, Trajectory  # noqa: E402


def sensor(tiny, **kw):  # noqa: F811
    model, tokenizer = tiny
    kw.setdefault("max_tokens", 512)
    return Sensor(model, tokenizer, name="tiny", **kw)


def test_patching_the_last_layer_repairs_fully(tiny):  # noqa: F811
    s = sensor(tiny)
    [traj] = make_trajs(n_traj=1, n_steps=4, seed=5)
    records = list(patch_trajectory(s, traj, source="gen", layers=range(s.n_layers)))
    patched = [r for r in records if r["layer"] is not None]
    assert {r["step"] for r in records} == {0, 1, 2} and patched
    for r in patched:
        assert r["d_bits"] > 1e-3 and r["method"] == "cached" and r["context"] == "fresh"
        if r["layer"] == s.n_layers - 1:
            assert r["repair"] == pytest.approx(1.0, abs=1e-6) and r["top1_agree"]
            assert r["kl_patched_bits"] < 1e-6 * r["d_bits"]
    first = [r for r in patched if r["layer"] == 0]
    assert any(abs(r["repair"] - 1.0) > 1e-3 for r in first)  # an early layer does not repair it all


def test_the_cached_patched_run_equals_a_plain_forward_with_a_hook(tiny):  # noqa: F811
    s = sensor(tiny)
    [traj] = make_trajs(n_traj=1, n_steps=3, seed=7)
    deleted = delete_all(traj, s.tokenizer)
    for b in boundaries(traj, deleted):
        full = lay_out(b.prompt, b.full, b.head, b.head_chars, s.encode, s.max_tokens)
        dele = lay_out(b.prompt, b.deleted, b.head, b.head_chars, s.encode, s.max_tokens)
        rf, rd = s.read("f", full.ids), s.read("d", dele.ids)
        assert rd.reused > 0 or b.step == 1  # later boundaries reuse the earlier ones' prefix
        store = s._streams["d"].store
        before = store.view(0, store.length).clone()
        cached = s.patch("d", rf.residuals, range(s.n_layers))
        for layer, lp in cached.items():
            reference = s.patch_by_hook(dele.ids, layer, rf.residuals[layer])
            assert torch.allclose(lp, reference, atol=1e-5, rtol=0), (b.step, layer, float((lp - reference).abs().max()))
        # the patched runs wrote into slot n-1 of the stored cache; it is restored exactly
        assert torch.equal(store.view(0, store.length), before)
        # and the reused prefix gives what a reading from scratch gives
        assert kl_bits(rd.logprobs, s.read("fresh-" + str(b.step), dele.ids).logprobs) < 1e-6


def test_the_hook_method_gives_the_same_records(tiny):  # noqa: F811
    [traj] = make_trajs(n_traj=1, n_steps=3, seed=9)
    fast = list(patch_trajectory(sensor(tiny), traj, source="gen", layers=(0, 1)))
    slow_sensor = sensor(tiny)
    slow_sensor.shape, slow_sensor.cached = None, False  # as for a model whose caches are not managed
    slow = list(patch_trajectory(slow_sensor, traj, source="gen", layers=(0, 1)))
    assert [r["method"] for r in slow] == ["hook"] * len(slow)
    assert len(fast) == len(slow)
    for a, b in zip(fast, slow):
        assert (a["step"], a["layer"]) == (b["step"], b["layer"])
        assert a["d_bits"] == pytest.approx(b["d_bits"], abs=1e-5)
        if a["layer"] is not None:
            assert a["repair"] == pytest.approx(b["repair"], abs=1e-4)


def _no_reasoning(skip_only=False):
    steps = tuple(Step(i, (
        *((Part("reasoning", "[SKIP]", label="reasoning"),) if skip_only else ()),
        Part("action", f'{{"command": "ls {i}"}}', label="tool_call:bash"),
        Part("observation", f"file{i}.py", label="tool_result"),
    )) for i in range(4))
    return Trajectory("plain", (Part("prompt", "List the files.", label="user"),), steps)


@pytest.mark.parametrize("skip_only", [False, True], ids=["no reasoning", "only [SKIP] markers"])
def test_d_is_zero_when_the_history_held_no_reasoning(tiny, skip_only):  # noqa: F811
    records = list(patch_trajectory(sensor(tiny), _no_reasoning(skip_only), source="gen", layers=(0, 1)))
    assert len(records) == 3
    for r in records:
        assert r["d_bits"] == 0.0 and r["below_floor"] and r["layer"] is None and r["tokens_full"] == r["tokens_deleted"]


def test_over_the_limit_the_records_state_the_window(tiny):  # noqa: F811
    s = sensor(tiny, max_tokens=160)
    [traj] = make_trajs(n_traj=1, n_steps=6, seed=2)
    records = list(patch_trajectory(s, traj, source="gen", layers=(1,)))
    late = [r for r in records if r["step"] == 4][0]
    assert late["window"]["full"]["windowed"] and late["tokens_full"] <= 160
    assert late["window"]["full"]["history_kept"] < 5
    skip = sensor(tiny, max_tokens=160, overflow="skip")
    skipped = [r for r in patch_trajectory(skip, traj, source="gen", layers=(1,)) if "skipped" in r]
    assert skipped and "--overflow skip" in skipped[-1]["skipped"] and skipped[-1]["layer"] is None


def test_a_boundary_costs_two_readings_plus_one_token_per_layer(tiny):  # noqa: F811
    s = sensor(tiny)
    [traj] = make_trajs(n_traj=1, n_steps=6, seed=4)
    records = list(patch_trajectory(s, traj, source="gen", layers=range(s.n_layers)))
    by_boundary = {r["step"]: r for r in records}
    patched = {r["step"] for r in records if r["layer"] is not None}
    last = by_boundary[max(by_boundary)]
    # Prefix reuse: each stream runs about its last input once, plus a few tokens a boundary.
    assert s.forwarded <= last["tokens_full"] + last["tokens_deleted"] + 8 * len(by_boundary)
    assert s.patch_runs == s.n_layers * len(patched)
    plain = sum(r["tokens_full"] + (s.n_layers + 1) * r["tokens_deleted"] for r in by_boundary.values())
    assert s.forwarded * 3 < plain


def test_summary_and_layer_parsing():
    records = [{"trajectory": "t", "step": i, "layer": layer, "repair": rep, "top1_agree": layer == 1}
               for i in range(3) for layer, rep in ((0, 0.1 * i), (1, 1.0))]
    first, second = summarize(records)
    assert (first.layer, first.n, first.repair) == (0, 3, pytest.approx(0.1)) and first.top1 == 0.0
    assert second.repair == 1.0 and second.repair_ci == (1.0, 1.0) and second.top1 == 1.0
    assert parse_layers("all", 4) == (0, 1, 2, 3) and parse_layers("3,-1, 0", 4) == (3, 0)
    with pytest.raises(ValueError, match="0..3"):
        parse_layers("4", 4)
    with pytest.raises(ValueError, match="not a layer"):
        parse_layers("x", 4)


def test_cli_writes_records_table_and_html(tiny_dir, tmp_path, capsys):  # noqa: F811
    pytest.importorskip("plotly")
    [traj] = make_trajs(n_traj=1, n_steps=3, seed=1)
    src = tmp_path / "t.iclr.jsonl"
    src.write_text(json.dumps(_canonical(traj)) + "\n")
    out, page = tmp_path / "patch.jsonl", tmp_path / "patch.html"
    code, _, err = run_cli(capsys, "analyze", "patch", str(src), "--model", str(tiny_dir), "--max-tokens", "512",
                           "--layers", "0,-1", "-o", str(out), "--html", str(page))
    assert code == 0, err
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["layer"] for r in records} == {0, 1} and all(r["source"] == str(src) for r in records)
    assert "mean repair" in err and "2 patched" in err
    html = page.read_text()
    assert 'id="plot-repair"' in html and 'id="plot-top1"' in html and html.count("<svg") == 2 and "<script" not in html


def test_cli_refuses_the_fake_model_and_bad_layers(tiny_dir, tmp_path, capsys):  # noqa: F811
    src = tmp_path / "t.iclr.jsonl"
    src.write_text(json.dumps(_canonical(make_trajs(n_traj=1, n_steps=2)[0])) + "\n")
    code, _, err = run_cli(capsys, "analyze", "patch", str(src), "--model", "fake")
    assert code == 2 and "hidden states" in err
    code, _, err = run_cli(capsys, "analyze", "patch", str(src), "--model", str(tiny_dir), "--layers", "7")
    assert code == 2 and "layers 0..1" in err


def _canonical(traj):
    """The trajectory as one line of the canonical iclr JSONL (docs/FORMAT.md)."""
    return {
        "schema": "iclr.trajectory/1", "id": traj.id,
        "prompt": [{"kind": p.kind, "label": p.label, "text": p.text} for p in traj.prompt],
        "steps": [{"index": s.index, "parts": [{"kind": p.kind, "label": p.label, "text": p.text} for p in s.parts]} for s in traj.steps],
    }


@pytest.mark.model
def test_the_default_proxy_on_a_real_trajectory():
    """SmolLM2 on the first boundaries of a real mini-SWE-agent run: the cached patched run is
    the hooked forward's, and the last layer repairs fully."""
    from format_helpers import realdata
    from iclr_cli.analysis.inputs import read_paths
    from iclr_cli.errors import UsageError
    from iclr_cli.scoring.loading import load_model

    [path] = [p for p in realdata("mini_swe_agent") if p.name == "github_issue.traj.json"]
    try:
        model, tokenizer, _ = load_model("smollm2", dtype="float32", device="cpu")
    except UsageError as exc:
        pytest.skip(str(exc))
    s = Sensor(model, tokenizer, name="smollm2", max_tokens=8192)
    traj = read_paths([str(path)]).sources[0].trajectory
    traj = traj.with_steps(traj.steps[:3])
    records = list(patch_trajectory(s, traj, source=str(path), layers=(0, 15, s.n_layers - 1)))
    patched = [r for r in records if r["layer"] is not None]
    assert patched and all(r["repair"] == pytest.approx(1.0, abs=1e-6) for r in patched if r["layer"] == s.n_layers - 1)
    deleted = delete_all(traj, s.tokenizer)
    b = boundaries(traj, deleted)[0]
    full = lay_out(b.prompt, b.full, b.head, b.head_chars, s.encode, s.max_tokens)
    dele = lay_out(b.prompt, b.deleted, b.head, b.head_chars, s.encode, s.max_tokens)
    rf, _ = s.read("f", full.ids), s.read("d", dele.ids)
    for layer, lp in s.patch("d", rf.residuals, (3, 20)).items():
        assert torch.allclose(lp, s.patch_by_hook(dele.ids, layer, rf.residuals[layer]), atol=1e-4, rtol=0)


def test_a_history_segment_over_the_budget_is_cut_to_its_tail_within_the_limit(tiny):  # noqa: F811
    from iclr_cli.analysis.boundaries import lay_out

    def encode(text):
        words = text.split(" ")
        offsets, pos = [], 0
        for w in words:
            offsets.append((pos, pos + len(w)))
            pos += len(w) + 1
        return list(range(len(words))), offsets

    huge = " ".join(["w"] * 500)
    lay = lay_out(["p p"], [huge, "a b c", "d e"], "h", 1, encode, 100)
    assert len(lay.ids) <= 100
    assert lay.plan.history_tail > 0 and lay.describe()["history_tail_tokens"] == lay.plan.history_tail
    assert lay.history_starts[0] == 2  # right after P's two tokens


def test_a_new_stream_starts_from_the_prefix_another_stream_holds(tiny):  # noqa: F811
    """P is read once per sensor: the deleted stream and every later trajectory with the same P
    take its keys and values, and read exactly what a sensor that ran everything reads."""
    model, tokenizer = tiny
    prompt = [int(t) for t in torch.randint(5, 200, (150,), generator=torch.Generator().manual_seed(1))]
    a = prompt + [7, 8, 9, 10, 11]
    b = prompt + [12, 13, 14]
    shared = sensor(tiny)
    shared.read("a", a)
    got = shared.read("b", b, {"all": list(range(150, len(b)))})
    assert shared.shared_tokens == 150 and got.forwarded == len(b) - 150
    alone = sensor(tiny).read("b", b, {"all": list(range(150, len(b)))})
    assert torch.allclose(got.logprobs, alone.logprobs, atol=1e-4)
    assert torch.allclose(got.residuals, alone.residuals, atol=1e-4)
    assert torch.allclose(got.pooled["all"], alone.pooled["all"], atol=1e-4)
    # the donor is untouched: reading it again from its own state gives the same
    again = shared.read("a", a)
    assert torch.allclose(again.logprobs, sensor(tiny).read("a", a).logprobs, atol=1e-4)
    # a pool inside the shared prefix is run, not copied
    fresh = sensor(tiny)
    fresh.read("a", a)
    fresh.read("c", b, {"early": [100, 120]})
    assert fresh.shared_tokens == 100
    # too short a common prefix is run, not copied
    few = sensor(tiny)
    few.read("a", a)
    few.read("d", b, {"early": [20]})
    assert few.shared_tokens == 0
