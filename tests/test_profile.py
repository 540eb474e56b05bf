"""Scorer profiles: the fast default (window and elision) against ``--exact`` (docs/scoring.md, "Speed")."""

import json

import pytest

from format_helpers import summary_value

from tiny_llama import tiny_dir  # noqa: F401

from iclr_cli.cli.app import main
from iclr_cli.compress import Settings, compress_trajectories
from iclr_cli.context import elide_text, render_for_scoring, render_part, render_step
from iclr_cli.blocks import split_blocks
from iclr_cli.errors import UsageError
from iclr_cli.pipeline import ScorerConfig
from iclr_cli.policies import parse_variant
from iclr_cli.scoring.fake import FakeScorer
from iclr_cli.scoring.profile import EXACT, FAST, choose
from iclr_cli.trajectory import Part, Step, Trajectory

LONG = "".join(f"line {i}: " + "x" * 40 + "\n" for i in range(200))  # 9,690 characters


def test_elide_keeps_head_and_tail_and_says_how_much_went():
    out = elide_text(LONG, 512)
    assert out.startswith(LONG[:512]) and out.endswith(LONG[-512:])
    gone = len(LONG) - 1024
    assert f"\n[... {gone} characters elided ...]\n" in out
    assert len(out) == 1024 + len(f"\n[... {gone} characters elided ...]\n")
    assert elide_text(LONG, None) == LONG
    # no gain, no cut: a text barely over 2E stays whole
    near = "y" * 1030
    assert elide_text(near, 512) == near
    assert elide_text(LONG, 512) == out  # depends on the text alone


def test_only_observations_and_prompt_parts_are_elided():
    for kind, label, cut in (("observation", "tool_result", True), ("prompt", "system", True),
                             ("reasoning", "reasoning", False), ("action", "tool_call:bash", False)):
        rendered = render_part(Part(kind, LONG, label=label), 256)
        assert rendered.startswith(f"[{label}]\n")
        assert ("characters elided" in rendered) is cut, kind
        assert render_part(Part(kind, LONG, label=label)) == f"[{label}]\n{LONG}\n\n"


def test_block_spans_point_at_the_blocks_after_an_elided_observation():
    reasoning = "First I read the log.\n\nThen the error is clear."
    step = Step(0, (Part("observation", LONG, label="tool_result"), Part("reasoning", reasoning, label="reasoning", ref=0),
                    Part("action", "ls", label="tool_call:bash")))
    split = split_blocks(reasoning, "paragraph")
    rendered = render_for_scoring(step, [split], elide=512)
    assert [rendered.text[a:b] for a, b in rendered.spans] == ["First I read the log.", "Then the error is clear."]
    assert len(rendered.text) < len(LONG)
    assert "characters elided" in render_step(step, 512) and "characters elided" not in render_step(step)


def test_choose_resolves_the_profile_and_refuses_a_contradiction():
    assert choose() == FAST and FAST.max_tokens == 4096 and FAST.elide == 512
    assert choose(exact=True) == EXACT and EXACT.elide is None and EXACT.max_tokens == 42_000
    assert choose(max_tokens=2048).max_tokens == 2048 and choose(max_tokens=2048).name == "fast"
    assert choose(elide=0).elide is None and choose(elide=100).elide == 100
    assert choose(exact=True, max_tokens=1024) .max_tokens == 1024
    with pytest.raises(UsageError, match="--exact renders every tool output whole"):
        choose(exact=True, elide=100)
    assert ScorerConfig().profile == "fast" and ScorerConfig().elide == 512 and ScorerConfig().max_tokens == 4096
    config = ScorerConfig.for_profile(EXACT, model="fake")
    assert config.settings(parse_variant("iclr"), ratio=0.5) == Settings(parse_variant("iclr"), ratio=0.5, elide=None)
    assert "exact (42,000-token window, everything whole); float32" == config.describe()


def trajectory(tool_text: str) -> Trajectory:
    steps = []
    for i in range(3):
        steps.append(Step(i, (Part("reasoning", f"Idea {i} one.\n\nIdea {i} two.\n\nIdea {i} three.", label="reasoning", ref=i),
                              Part("action", f"cat file{i}", label="tool_call:bash"),
                              Part("observation", tool_text, label="tool_result"))))
    return Trajectory("t", (Part("prompt", "Fix the bug.", label="user"),), tuple(steps))


def run(traj, elide):
    scorer = FakeScorer(record_requests=True)
    [res] = compress_trajectories([traj], Settings(parse_variant("iclr"), elide=elide), scorer, scorer.tokenizer)
    return res, scorer.requests_seen


def test_elision_shortens_the_scorer_input_but_never_the_history_written_back():
    traj = trajectory(LONG)
    fast, fast_requests = run(traj, 512)
    exact, exact_requests = run(traj, None)
    assert all("characters elided" in "".join(r.history) for r in fast_requests[1:])
    assert not any("characters elided" in "".join(r.history) for r in exact_requests)
    assert sum(map(len, fast_requests[-1].history)) < sum(map(len, exact_requests[-1].history)) / 4
    # the trajectory written back holds the whole tool output either way
    assert [p.text for s in fast.compressed.steps for p in s.parts if p.kind == "observation"] == [LONG] * 3
    # short outputs: nothing to elide, the same requests and selections
    short = trajectory("3 files changed")
    a, ra = run(short, 512)
    b, rb = run(short, None)
    assert ra == rb and a.compressed == b.compressed


def write_chat(path, tool_text):
    messages = [{"role": "user", "content": "Fix the bug."}]
    for i in range(3):
        messages.append({"role": "assistant", "content": "", "reasoning_content": f"Idea {i} one.\n\nIdea {i} two.\n\nIdea {i} three.",
                         "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"cmd": f"cat f{i}"})}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": tool_text})
    path.write_text(json.dumps(messages))


def score(tmp_path, capsys, *options):
    chat = tmp_path / "chat.json"
    write_chat(chat, LONG)
    with pytest.raises(SystemExit) as exc:
        main(["score", str(chat), "--model", "fake", *options])
    captured = capsys.readouterr()
    return exc.value.code, [json.loads(line) for line in captured.out.splitlines()], captured.err


def test_score_records_and_summary_name_the_profile(tmp_path, capsys):
    code, fast, err = score(tmp_path, capsys, "--recheck-below", "0")
    assert code == 0 and {r["profile"] for r in fast} == {"fast"}
    assert "fast (4,096-token window, long tool outputs cut to 512 chars at each end); float32" == summary_value(err, "scorer profile")
    code, exact, err = score(tmp_path, capsys, "--exact")
    assert code == 0 and {r["profile"] for r in exact} == {"exact"}
    assert "exact (42,000-token window, everything whole)" in " ".join(err.split())
    # the same blocks; the last step's context is far shorter with the tool outputs elided
    assert [(r["step"], r["block"]) for r in fast] == [(r["step"], r["block"]) for r in exact]
    assert fast[-1]["context_tokens"] * 3 < exact[-1]["context_tokens"]


def test_exact_with_elide_is_a_usage_error(tmp_path, capsys):
    code, records, err = score(tmp_path, capsys, "--exact", "--elide", "100")
    assert code == 2 and records == []
    assert err.strip() == "iclr: error: --exact renders every tool output whole; drop --elide, or drop --exact"


def test_a_checkpoint_of_one_profile_is_not_resumed_by_the_other():
    from iclr_cli.checkpoint import settings_of

    variant = parse_variant("iclr")
    fast = ScorerConfig(model="fake")
    exact = ScorerConfig.for_profile(EXACT, model="fake")
    a = settings_of("score", fast.settings(variant), fast, None, False)
    b = settings_of("score", exact.settings(variant), exact, None, False)
    assert {k for k in a if a[k] != b[k]} == {"profile", "elide", "max_tokens", "recheck_below"}


def test_the_summary_says_when_the_proxy_caps_the_exact_window(tiny_dir, capsys, tmp_path):
    """--exact asks for 42,000 tokens; a proxy of 512 positions (the test model; SmolLM2: 8,192)
    scores in 512, and the summary says so instead of promising the asked-for window."""
    from format_helpers import SAMPLES, run_cli, summary_value

    code, _, err = run_cli(capsys, "score", str(SAMPLES / "openai_chat.json"), "--model", str(tiny_dir), "--exact", "-o", str(tmp_path / "s.jsonl"))
    assert code == 0, err
    assert summary_value(err, "scorer profile") == \
        "exact (42,000-token window, capped at 512 by the proxy, everything whole); float32"
    assert ScorerConfig.chosen(True, model="fake").describe() == "exact (42,000-token window, everything whole); float32"
