"""``iclr convert``: what converts, what is refused and why, and that a conversion reads back
as the same trajectory (the definition of lossless in docs/FORMAT.md)."""

import json

import pytest

from format_helpers import REALDATA, SAMPLES, parse_any, run_cli
from iclr_cli.inputs import load_file
from iclr_cli.errors import UsageError
from iclr_cli.formats import registry
from iclr_cli.formats.convert import convert_trajectories
from iclr_cli.formats.convert.anthropic import to_anthropic as _to_anthropic
from iclr_cli.formats.convert.openai import to_openai as _to_openai
from iclr_cli.trajectory import Part, Step, Trajectory, WriteBack


def to_openai(traj):
    return _to_openai(traj)[0]


def to_anthropic(traj):
    return _to_anthropic(traj)[0]


def traj(*steps, prompt=(Part("prompt", "sys", label="system"), Part("prompt", "task", label="user"))):
    return Trajectory("t1", tuple(prompt), tuple(Step(i, tuple(parts)) for i, parts in enumerate(steps)))


TOOL_STEP = [
    Part("reasoning", "Look first.\n\nThen act.", label="reasoning"),
    Part("action", "Listing files.", label="assistant"),
    Part("action", '{"command": "ls"}', label="tool_call:bash"),
    Part("action", '{"path": "a.py"}', label="tool_call:read"),
    Part("observation", "a.py", label="tool_result"),
    Part("observation", "print(1)", label="tool_result"),
]


def test_openai_messages_pair_results_with_calls_in_order():
    record = to_openai(traj(TOOL_STEP, [Part("action", "Done.", label="assistant"), Part("observation", "thanks", label="user")]))
    msgs = record["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "tool", "assistant", "user"]
    assert msgs[2]["reasoning_content"] == "Look first.\n\nThen act." and msgs[2]["content"] == "Listing files."
    assert [c["id"] for c in msgs[2]["tool_calls"]] == [m["tool_call_id"] for m in msgs[3:5]] == ["call_0_0", "call_0_1"]
    assert msgs[2]["tool_calls"][1]["function"] == {"name": "read", "arguments": '{"path": "a.py"}'}


def test_anthropic_blocks_and_tool_results():
    record = to_anthropic(traj(TOOL_STEP))
    assert record["system"] == "sys"
    assistant = record["messages"][1]["content"]
    assert [b["type"] for b in assistant] == ["thinking", "text", "tool_use", "tool_use"]
    assert "signature" not in assistant[0]
    assert [b["tool_use_id"] for b in record["messages"][2]["content"]] == ["call_0_0", "call_0_1"]


@pytest.mark.parametrize("to", ["iclr", "openai", "anthropic"])
def test_conversion_reads_back_as_the_same_trajectory(to):
    original = traj(TOOL_STEP, [Part("action", "Done.", label="assistant")])
    data = convert_trajectories([original], to)
    [again] = registry.get(to).load(data, "x").trajectories
    view = lambda t: [[(p.kind, p.label, p.text) for p in ps] for ps in [t.prompt, *[s.parts for s in t.steps]]]  # noqa: E731
    if to == "anthropic":  # tool_use input is re-serialised; compared as JSON values
        assert [[(k, lb, json.loads(x) if lb.startswith("tool_call:") else x) for k, lb, x in ps] for ps in view(again)] == [
            [(k, lb, json.loads(x) if lb.startswith("tool_call:") else x) for k, lb, x in ps] for ps in view(original)]
    else:
        assert view(again) == view(original)


@pytest.mark.parametrize(
    "step, to, reason",
    [
        ([Part("reasoning", "x", write_back=WriteBack.SIGNED)], "openai", "signed thinking"),
        ([Part("reasoning", "x", write_back=WriteBack.SIGNED)], "anthropic", "signed thinking"),
        ([Part("reasoning", "x", write_back=WriteBack.OPAQUE)], "openai", "encrypted reasoning item"),
        ([Part("reasoning", "[redacted]", write_back=WriteBack.READ_ONLY)], "anthropic", "redacted reasoning"),
        ([Part("reasoning", "a"), Part("action", "{}", label="tool_call:x"), Part("reasoning", "b")], "openai", "more than one reasoning part"),
        ([Part("observation", "out", label="tool_result")], "openai", "a tool result with no tool call"),
        ([Part("action", "[1, 2]", label="tool_call:x")], "anthropic", "not a JSON object"),
        ([Part("observation", "diff", label="exit")], "openai", "labelled 'exit' has no place"),
        ([Part("action", "Done.", label="assistant"), Part("action", "More.", label="assistant")], "openai", "labelled 'assistant' has no place"),
        ([Part("action", "   ", label="assistant")], "openai", "would be lost"),
        ([Part("action", '{"a": 1}', label="tool_call:x"), Part("action", "Later text.", label="assistant")], "openai", "part 0 (action 'tool_call:x') would read back as action 'assistant'"),
    ],
)
def test_lossy_conversions_are_refused_with_the_reason(step, to, reason):
    with pytest.raises(UsageError) as exc:
        convert_trajectories([traj(step)], to)
    assert str(exc.value).startswith(f"cannot convert t1 to {to} without losing data: step 0: ")
    assert reason in str(exc.value)
    assert exc.value.exit_code == 2


def test_prompt_label_without_a_role_is_refused():
    with pytest.raises(UsageError, match="prompt: label 'observation_log' has no OpenAI chat role"):
        convert_trajectories([traj([], prompt=(Part("prompt", "x", label="observation_log"),))], "openai")


OPENAI_TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}, {"type": "function", "function": {"name": "read_file"}}]
GEMINI_TOOLS = [{"functionDeclarations": [{"name": "get_weather", "parameters": {"type": "object"}}]}]


def with_tools(definitions) -> Trajectory:
    prompt = (Part("prompt", "sys", label="system"), Part("prompt", json.dumps(definitions), label="tools"), Part("prompt", "task", label="user"))
    return traj([Part("reasoning", "Think.", label="reasoning"), Part("action", "Done.", label="assistant")], prompt=prompt)


def test_tools_go_to_openai_tools_and_are_refused_elsewhere_naming_them():
    [record] = [json.loads(x) for x in convert_trajectories([with_tools(OPENAI_TOOLS)], "openai").splitlines()]
    assert record["tools"] == OPENAI_TOOLS and [m["role"] for m in record["messages"]] == ["system", "user", "assistant"]
    [record] = [json.loads(x) for x in convert_trajectories([with_tools(OPENAI_TOOLS)], "iclr").splitlines()]
    assert record["prompt"][1] == {"kind": "prompt", "label": "tools", "text": json.dumps(OPENAI_TOOLS)}
    with pytest.raises(UsageError) as exc:
        convert_trajectories([with_tools(OPENAI_TOOLS)], "anthropic")
    assert str(exc.value).startswith("cannot convert t1 to anthropic without losing data: prompt: part 1 (prompt 'tools': bash, read_file): tool definitions are not carried")
    assert exc.value.exit_code == 2
    with pytest.raises(UsageError, match=r"prompt: part 1 \(prompt 'tools': get_weather\): tool definitions not in OpenAI's form"):
        convert_trajectories([with_tools(GEMINI_TOOLS)], "openai")
    two = with_tools(OPENAI_TOOLS)
    two = Trajectory(two.id, (*two.prompt[:2], two.prompt[1], two.prompt[2]), two.steps)
    with pytest.raises(UsageError, match=r"part 2 \(prompt 'tools': bash, read_file\): a second tools part has no place"):
        convert_trajectories([two], "openai")


def test_cli_openai_file_with_tools_to_anthropic_exits_2_naming_them(capsys, tmp_path):
    src = tmp_path / "run.json"
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}, {"role": "assistant", "content": "ok", "reasoning_content": "Think."}]
    src.write_text(json.dumps({"messages": messages, "tools": OPENAI_TOOLS}))
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"keep me")
    code, stdout, err = run_cli(capsys, "convert", str(src), "--to", "anthropic", "-o", str(out))
    assert code == 2 and stdout == ""
    assert "part 1 (prompt 'tools': bash, read_file): tool definitions are not carried to Anthropic" in err
    assert out.read_bytes() == b"keep me"


def test_cli_refuses_signed_thinking_and_writes_nothing(capsys, tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"keep me")
    code, stdout, err = run_cli(capsys, "convert", str(SAMPLES / "codex_rollout.jsonl"), "--to", "openai", "-o", str(out))
    assert code == 2
    assert "encrypted reasoning item" in err and stdout == ""
    assert out.read_bytes() == b"keep me"


def test_cli_unknown_target_is_a_usage_error(capsys):
    code, _, err = run_cli(capsys, "convert", str(SAMPLES / "swe_agent.traj"), "--to", "yaml")
    assert code == 2 and "--to" in err and "is not one of" in err and "'anthropic'" in err


def test_targets_show_in_help(capsys):
    code, out, _ = run_cli(capsys, "convert", "--help")
    assert code == 0 and "iclr|openai|anthropic" in out.replace(" ", "")


def test_library_callers_get_the_same_check():
    with pytest.raises(UsageError, match="--to must be one of iclr, openai, anthropic, not 'yaml'"):
        convert_trajectories([traj([])], "yaml")


SOURCES = [SAMPLES / n for n in ("swe_agent.traj", "mini_swe_agent.traj.json", "codex_rollout.jsonl", "openhands_events.json", "canonical.iclr.jsonl")]
REAL = [REALDATA / d for d in ("swe_agent", "mini_swe_agent", "codex_rollout", "openhands_events")]
REAL_FILES = sorted(p for d in REAL if d.is_dir() for p in d.iterdir())


@pytest.mark.parametrize("path", SOURCES + REAL_FILES, ids=lambda p: p.name)
def test_cli_to_iclr_always_works_and_reads_back(capsys, tmp_path, path):
    out = tmp_path / "c.jsonl"
    code, _, err = run_cli(capsys, "convert", str(path), "--to", "iclr", "-o", str(out))
    assert code == 0, err
    _, source = load_file(str(path))
    records = parse_any(out.read_bytes())
    records = records if isinstance(records, list) else [records]
    assert [r["id"] for r in records] == [t.id for t in source.trajectories]
    assert [len(r["steps"]) for r in records] == [len(t.steps) for t in source.trajectories]
    assert load_file(str(out))[0].name == "iclr"


@pytest.mark.parametrize(
    "name, to, ok",
    [
        ("swe_agent/gpt4_pydicom-1458.traj", "openai", True),
        ("swe_agent/marshmallow-1867_function_calling.traj", "anthropic", True),
        ("mini_swe_agent/github_issue.traj.json", "openai", True),
        ("openhands_events/basic_gui_mode.json", "openai", True),
        ("codex_rollout/agentcmd_rollout-2025-09-24T20-12-23.jsonl", "openai", False),  # encrypted items
        ("mini_swe_agent/liveswe_gpt-5-mini_django__django-11133.traj.json", "openai", False),  # exit message
    ],
)
def test_cli_real_files_convert_or_refuse(capsys, tmp_path, name, to, ok):
    path = REALDATA / name
    if not path.exists():
        pytest.skip("real transcripts not available")
    out = tmp_path / "c.jsonl"
    code, _, err = run_cli(capsys, "convert", str(path), "--to", to, "-o", str(out))
    assert code == (0 if ok else 2), err
    if ok:
        adapter, doc = load_file(str(out), to)
        _, source = load_file(str(path))
        assert [len(t.steps) for t in doc.trajectories] == [len(t.steps) for t in source.trajectories]


@pytest.mark.parametrize("sample", ["openai_chat.json", "claude_code_session.jsonl"])
def test_a_lone_surrogate_converts_and_comes_back_as_its_escape(tmp_path, capsys, sample):
    """A string cut inside an emoji (``\\ud83d`` alone) is not UTF-8: converting writes it as the
    escape it was read from instead of failing."""
    raw = (SAMPLES / sample).read_bytes()
    key = b'"content": "' if b'"content": "' in raw else b'"content":"'
    path = tmp_path / sample
    path.write_bytes(raw.replace(key, key + b"\\ud83d", 1))
    code, out, err = run_cli(capsys, "convert", str(path), "--to", "iclr")
    assert code == 0, err
    assert "\\ud83d" in out
