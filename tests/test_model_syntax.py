"""The model-syntax table (iclr_cli/model_syntax.py; docs/method.md, "Blocks").

Tool calls: one real example per syntax of the table, written as the model emits it inside its
reasoning; each is found, and a block holding it survives every variant verbatim and is not
counted in N. Negatives: prose, JSON and Python that only look like calls stay candidates.

Reasoning delimiters: every start and end of every reasoning parser is either read as
reasoning (``<think>``, harmony ``analysis``) or, in visible text, reported as unrecognised
(``--strict`` exits 2); a block quoting one is never edited token by token.
"""

from __future__ import annotations

import json

import pytest

from format_helpers import run_cli
from iclr_cli.inputs import load_file
from iclr_cli.blocks import holds_delimiter, is_candidate, is_protected, split_blocks
from iclr_cli.compress import Settings, compress_trajectories
from iclr_cli.model_syntax import REASONING_DELIMITERS, TOOL_CALLS, json_call, pythonic_calls, tool_call_syntaxes
from iclr_cli.policies import parse_variant
from iclr_cli.scoring.fake import FakeScorer
from iclr_cli.trajectory import Part, Step, Trajectory

# One call per row of TOOL_CALLS, in the syntax the parsers named there read (our own calls).
EXAMPLES = {
    "Hermes 2 Pro / Qwen 2.5 / Qwen 3 (JSON in tags)": '<tool_call>\n{"name": "read_file", "arguments": {"path": "report/dates.py"}}\n</tool_call>',
    "Qwen3-Coder / MiMo / Step-3.5 / Step-5 (XML functions)": "<tool_call>\n<function=read_file>\n<parameter=path>\nreport/dates.py\n</parameter>\n</function>\n</tool_call>",
    "GLM-4.5 / 4.6 / 4.7 / 5, Ling 3 (name then arg_key/arg_value)": "<tool_call>read_file\n<arg_key>path</arg_key>\n<arg_value>report/dates.py</arg_value>\n</tool_call>",
    "Poolside v1 / Spark 2.5 (arg_key/arg_value)": "<tool_call>read_file\n<arg_key>path</arg_key>\n<arg_value>report/dates.py</arg_value>\n</tool_call>",
    "ERNIE 4.5": '<tool_call>\n{"name": "read_file", "arguments": {"path": "report/dates.py"}}\n</tool_call>',
    "Granite 3.1 / Granite 4": '<tool_call>[{"name": "read_file", "arguments": {"path": "report/dates.py"}}]',
    "Granite 3.0": '<|tool_call|>[{"name": "read_file", "arguments": {"path": "report/dates.py"}}]',
    "Granite 20B function calling": '<function_call> {"name": "read_file", "arguments": {"path": "report/dates.py"}}',
    "Mistral / Magistral / Devstral": '[TOOL_CALLS]read_file[ARGS]{"path": "report/dates.py"}',
    "Llama 3.1 / 3.2 (python_tag)": '<|python_tag|>{"name": "read_file", "parameters": {"path": "report/dates.py"}}',
    "Llama 3 / 4 JSON, xLAM, JSON arrays": 'Calling it now: {"name": "read_file", "parameters": {"path": "report/dates.py"}}',
    "Llama 4 pythonic (python_start)": '<|python_start|>[read_file(path="report/dates.py")]<|python_end|>',
    "Pythonic lists (Llama 3.2 / 4, Olmo 3, ToolACE)": 'Next:\n[read_file(path="report/dates.py"), list_dir(path="tests", depth=1)]',
    "Olmo 3 (function_calls tags)": '<function_calls>\nread_file(path="report/dates.py")\n</function_calls>',
    "Kimi K2 / K2.5": '<|tool_calls_section_begin|> <|tool_call_begin|> functions.read_file:0 <|tool_call_argument_begin|> {"path": "report/dates.py"} <|tool_call_end|> <|tool_calls_section_end|>',
    "Kimi K3 (XTML)": '<|open|>tools<|sep|><|open|>call tool="read_file" index="1"<|sep|><|open|>argument key="path" type="string"<|sep|>report/dates.py<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>',
    "K2 Horizon (IFM)": "<ifm|tool_calls><ifm|tool_call>read_file<ifm|arg_key>path</ifm|arg_key><ifm|arg_value>report/dates.py</ifm|arg_value></ifm|tool_call></ifm|tool_calls>",
    "DeepSeek V3 / V3.1 / R1": '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>read_file\n```json\n{"path": "report/dates.py"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    "DeepSeek V3.2 / V4 / V4.1 (DSML)": '<｜DSML｜function_calls>\n<｜DSML｜invoke name="read_file">\n<｜DSML｜parameter name="path" string="true">report/dates.py</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>',
    "Step 3": '<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="read_file"><steptml:parameter name="path">report/dates.py</steptml:parameter></steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>',
    "MiniMax-M1": '<tool_calls>\n{"name": "read_file", "arguments": {"path": "report/dates.py"}}\n</tool_calls>',
    "MiniMax-M2": '<minimax:tool_call>\n<invoke name="read_file">\n<parameter name="path">report/dates.py</parameter>\n</invoke>\n</minimax:tool_call>',
    "MiniMax-M3": ']<]minimax[>[<tool_call>]<]minimax[>[<invoke name="read_file">]<]minimax[>[<path>report/dates.py]<]minimax[>[</path>]<]minimax[>[</invoke>]<]minimax[>[</tool_call>',
    "gpt-oss (harmony)": '<|start|>assistant<|channel|>commentary to=functions.read_file <|constrain|>json<|message|>{"path": "report/dates.py"}<|call|>',
    "Muse / Muse Glimmer (ATEM)": '<atem:function_calls>\n<atem:invoke name="read_file">\n<atem:parameter name="path">report/dates.py</atem:parameter>\n</atem:invoke>\n</atem:function_calls>',
    "InternLM 2 / Intern-S1": '<|action_start|> <|plugin|>\n{"name": "read_file", "parameters": {"path": "report/dates.py"}}<|action_end|>',
    "Phi-4-mini": 'functools[{"name": "read_file", "arguments": {"path": "report/dates.py"}}]',
    "Jamba": '<tool_calls>[{"name": "read_file", "arguments": {"path": "report/dates.py"}}]</tool_calls>',
    "Hunyuan A13B / HY v3 / HY v4": "<tool_calls:hy>\n<tool_call:hy>read_file<tool_sep:hy>\n<arg_key:hy>path</arg_key:hy>\n<arg_value:hy>report/dates.py</arg_value:hy>\n</tool_call:hy>\n</tool_calls:hy>",
    "Seed-OSS": "<seed:tool_call>\n<function=read_file>\n<parameter=path>report/dates.py</parameter>\n</function>\n</seed:tool_call>",
    "Cohere Command A (3 / 4)": '<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "read_file", "parameters": {"path": "report/dates.py"}}\n]<|END_ACTION|>',
    "Apertus": '<|tools_prefix|>[{"read_file": {"path": "report/dates.py"}}]<|tools_suffix|>',
    "LFM2": '<|tool_call_start|>[read_file(path="report/dates.py")]<|tool_call_end|>',
    "Gemma 4": '<|tool_call>call:read_file{path:<|"|>report/dates.py<|"|>}<tool_call|>',
    "FunctionGemma": "<start_function_call>call:read_file{path:<escape>report/dates.py<escape>}<end_function_call>",
    "GigaChat 3": 'function call<|role_sep|>\n{"name": "read_file", "arguments": {"path": "report/dates.py"}}',
    "GigaChat 3.5 (GCML)": '<｜GCML｜tool_calls>\n<｜GCML｜invoke name="read_file">\n<｜GCML｜parameter name="path" string="true">report/dates.py</｜GCML｜parameter>\n</｜GCML｜invoke>\n</｜GCML｜tool_calls>',
    "LongCat": '<longcat_tool_call>\n{"name": "read_file", "arguments": {"path": "report/dates.py"}}\n</longcat_tool_call>',
    "dots": '<dots_function_call>\n<invoke name="read_file">\n<parameter name="path">report/dates.py</parameter>\n</invoke>\n</dots_function_call>',
    "IQuest Q1": '<iquest_tool_call>\n{"name": "read_file", "arguments": {"path": "report/dates.py"}}\n</iquest_tool_call>',
    "MiniCPM 4 / 5 (XML functions)": '<function name="read_file"><param name="path">report/dates.py</param></function>',
    "PLaMo 3": '<|plamo:begin_tool_requests:plamo|><|plamo:begin_tool_request:plamo|><|plamo:begin_tool_name:plamo|>read_file<|plamo:end_tool_name:plamo|><|plamo:begin_tool_arguments:plamo|><|plamo:constrain|>json<|plamo:msg|>{"path": "report/dates.py"}<|plamo:end_tool_arguments:plamo|><|plamo:end_tool_request:plamo|><|plamo:end_tool_requests:plamo|>',
    "Inkling": '<|message_model|>read_file<|content_invoke_tool_json|>{"name": "read_file", "args": {"path": "report/dates.py"}}<|end_message|>',
}

# Ordinary reasoning that talks about tools, JSON and Python without calling anything.
NEGATIVES = [
    "I should call the read_file tool next, once I know the path.",
    'The config is {"name": "report", "version": 3}: no arguments there.',
    'The schema lists {"name": "read_file", "arguments": 3}; arguments must be an object.',
    "The list [1, 2, 3] is sorted, and [a, b] are the two ends.",
    "See [the docs](https://example.org/dates) for the month rules.",
    "[x.strip() for x in lines] drops the blanks; [len(a)] is one number.",
    "functools.partial(f, x=1) binds the argument early.",
    "The tool functions are in tools/functions.py; I send to=user when done.",
    "A <function> tag and a <tool> tag are not calls.",
    "- [ ] check the 31st\n- [x] read the helper",
]


def test_every_row_has_an_example_and_every_example_a_row():
    assert {row.family for row in TOOL_CALLS} == set(EXAMPLES)
    assert len({row.family for row in TOOL_CALLS}) == len(TOOL_CALLS)


@pytest.mark.parametrize("row", TOOL_CALLS, ids=lambda row: row.family)
def test_each_syntax_is_found_by_its_own_row(row):
    block = f"I will read the helper before changing it. {EXAMPLES[row.family]}"
    assert is_protected(block) and not is_candidate(block)
    assert row.family in tool_call_syntaxes(block)


@pytest.mark.parametrize("text", NEGATIVES)
def test_prose_json_and_python_that_call_nothing_stay_candidates(text):
    assert tool_call_syntaxes(text) == []
    assert is_candidate(text) and not is_protected(text)


def test_json_and_pythonic_shapes_are_precise():
    assert json_call('[{"name": "a", "arguments": "{}"}]')  # arguments as a JSON string (OpenAI style)
    assert not json_call('{"name": "", "arguments": {}}')  # no name
    assert not json_call('{"name": "a", "arguments": {"x": 1}')  # not closed: not a JSON object
    assert json_call('{"outer": {"name": "a", "parameters": {}}}') is False  # the call must be the object that starts at the brace
    assert pythonic_calls("  [f()]  ")
    assert pythonic_calls('[api.search(q="dates", limit=5)]')
    assert not pythonic_calls('[f(x)]')  # positional argument
    assert not pythonic_calls('[f(x=g())]')  # not a literal
    assert not pythonic_calls('prefix [f(x=1)]')  # not a whole line


def _trajectory(reasoning: str) -> Trajectory:
    steps = tuple(
        Step(i, (Part("reasoning", reasoning, label="reasoning", ref=i), Part("action", "{}", label="tool_call:read_file"),
                 Part("observation", "ok", label="tool_result")))
        for i in range(2)
    )
    return Trajectory("t", (Part("prompt", "Fix the month-end crash.", label="user"),), steps)


@pytest.mark.parametrize("variant", ["iclr", "step-only", "delete-all", "random-100"])
def test_every_variant_keeps_every_syntax_verbatim_and_out_of_n(variant):
    calls = list(EXAMPLES.values())
    reasoning = "\n\n".join(f"Thought {i} about the dates.\n\n{call}" for i, call in enumerate(calls))
    scorer = FakeScorer()
    [res] = compress_trajectories([_trajectory(reasoning)], Settings(parse_variant(variant)), scorer, scorer.tokenizer)
    for step, report in zip(res.compressed.steps, res.steps):
        kept = split_blocks(step.reasoning[0].text).blocks
        assert [b for b in kept if is_protected(b)] == [b for b in split_blocks(reasoning).blocks if is_protected(b)]
        assert all(call in step.reasoning[0].text for call in calls)
        assert len(report.blocks) == len(calls)  # N counts the thoughts only


# --- reasoning delimiters -------------------------------------------------------------------

UNREAD = [d for d in REASONING_DELIMITERS if not d.read]


def _concrete(tag: str) -> str:
    return tag.replace("SUFFIX", "hy")


@pytest.mark.parametrize("delim", REASONING_DELIMITERS, ids=lambda d: f"{d.family}:{d.start}")
def test_a_block_quoting_any_delimiter_is_never_edited_token_by_token(delim):
    for tag in (delim.start, delim.end):
        if tag:
            assert holds_delimiter(f"The parser splits here:\n{_concrete(tag)}\nand goes on.")


def _chat(content: str) -> bytes:
    return json.dumps({"messages": [{"role": "user", "content": "Fix it."}, {"role": "assistant", "content": content}]}).encode()


@pytest.mark.parametrize("delim", UNREAD, ids=lambda d: f"{d.family}:{d.start}")
def test_unread_delimiters_in_visible_text_are_reported(delim, tmp_path):
    content = f"{_concrete(delim.start)}The helper keeps the day.{_concrete(delim.end)}\nI will clamp the day."
    if delim.family.startswith("Granite"):
        content = f"{delim.start}\nThe helper keeps the day.\n{delim.end}\nI will clamp the day."
    path = tmp_path / "chat.json"
    path.write_bytes(_chat(content))
    _, doc = load_file(str(path))
    assert doc.format == "openai"
    [note] = doc.unrecognised  # one note per delimiter, start and end together
    assert note.field == "messages[1].content" and "kept as the answer" in note.what
    assert not any(p.kind == "reasoning" for t in doc.trajectories for s in t.steps for p in s.parts)


def test_quoted_delimiters_in_code_are_not_reported(tmp_path):
    path = tmp_path / "chat.json"
    path.write_bytes(_chat("Magistral writes `[THINK]` and `[/THINK]`; Seed writes ```\n<seed:think>\n```."))
    assert load_file(str(path))[1].unrecognised == []


@pytest.mark.parametrize("content", ["<think>The helper keeps the day.</think>I will clamp the day.",
                                     "<|channel|>analysis<|message|>The helper keeps the day.<|end|><|start|>assistant<|channel|>final<|message|>I will clamp the day."])
def test_read_delimiters_are_read_as_reasoning(content, tmp_path):
    path = tmp_path / "chat.json"
    path.write_bytes(_chat(content))
    _, doc = load_file(str(path))
    [step] = doc.trajectories[0].steps
    assert [p.text for p in step.reasoning] == ["The helper keeps the day."]
    assert doc.unrecognised == []


@pytest.mark.parametrize("tag", [("[THINK]", "[/THINK]"), ("◁think▷", "◁/think▷"), ("<|START_THINKING|>", "<|END_THINKING|>")])
def test_strict_refuses_unread_delimiters(capsys, tmp_path, tag):
    path = tmp_path / "chat.json"
    path.write_bytes(_chat(f"{tag[0]}The helper keeps the day.{tag[1]}I will clamp the day."))
    code, _, err = run_cli(capsys, "prune", str(path), "--model", "fake", "--strict", "-o", str(tmp_path / "out.json"))
    assert code == 2 and "(--strict)" in err and tag[0] in err
    assert not (tmp_path / "out.json").exists()


def test_anthropic_and_codex_text_report_unread_delimiters_too(tmp_path):
    anthropic = tmp_path / "a.json"
    anthropic.write_bytes(json.dumps([{"role": "user", "content": "Fix it."},
                                      {"role": "assistant", "content": [{"type": "text", "text": "[THINK]keeps the day[/THINK]Clamp it."}]}]).encode())
    _, doc = load_file(str(anthropic), "anthropic")
    assert [u.field for u in doc.unrecognised] == ["[1].content[0].text"]
    codex = tmp_path / "rollout.jsonl"
    lines = [{"type": "session_meta", "payload": {"id": "s"}},
             {"type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix it."}]}},
             {"type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "<seed:think>keeps the day</seed:think>Clamp it."}]}}]
    codex.write_bytes(b"".join(json.dumps(x).encode() + b"\n" for x in lines))
    _, doc = load_file(str(codex), "codex")
    assert [(u.line, u.field) for u in doc.unrecognised] == [(3, "payload.content[0].text")]
