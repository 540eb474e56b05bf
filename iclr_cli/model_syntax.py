"""Text-encoded tool calls and reasoning delimiters of open-weight models: one table.

Where the table comes from. Every row is a syntax that the tool-call parsers or the reasoning
parsers of two inference servers recognise, read in their sources at:

- vLLM 0.33.0 (commit ``4ba787ec9``): ``vllm/tool_parsers/`` (the ``_TOOL_PARSERS_TO_REGISTER``
  registry and each parser), ``vllm/parser/`` (the engine parsers' token constants) and
  ``vllm/reasoning/`` (the ``_REASONING_PARSERS_TO_REGISTER`` registry); plus the
  MiniMax-M1 ``minimax`` parser of earlier releases (``vllm/tool_parsers/minimax_tool_parser.py``);
- SGLang 0.5.23: ``sglang/srt/function_call/`` (``FunctionCallParser.ToolCallParserEnum`` and
  each detector's ``bot_token``) and ``sglang/srt/parser/reasoning_parser.py``
  (``ReasoningParser.DetectorMap``).

Parsers without a fixed syntax are not rows: vLLM's ``hf`` and ``beam`` and SGLang's ``beam``
and ``response_template`` read the markers from the checkpoint's response template.

Two uses, one table each:

- :data:`TOOL_CALLS` decides the block rule of :mod:`iclr_cli.blocks`: a reasoning block that
  holds a text-encoded tool call in any of these syntaxes is never removed and does not count
  in N (agent frameworks parse the call out of the reasoning; removing it removes an action).
  A syntax with a marker of its own (``<tool_call>``, ``[TOOL_CALLS]``, special tokens) matches
  wherever the marker occurs. Three syntaxes are bare JSON or Python, so a precise shape is
  required instead (prose mentions braces and brackets all the time):

  * JSON call (Llama 3/4 JSON, xLAM, SGLang's JSON array): a ``{`` that starts a JSON object
    which parses (``json.JSONDecoder.raw_decode``) and has a string ``name`` and an
    ``arguments`` or ``parameters`` member holding an object or a string. Inside a JSON list
    (``[{"name": ...}]``) or a code fence it is found the same way.
  * Pythonic list (vLLM ``pythonic``, ``llama4_pythonic``, ``olmo3``; SGLang ``pythonic``): a
    whole line that is a Python list of calls (``[get_weather(city="Paris"), f()]``): each
    element a call of a name or dotted name, keyword arguments only, each value a literal.

- :data:`REASONING_DELIMITERS` lists every start/end syntax of the reasoning parsers. ``read``
  rows are read as reasoning by this project (``<think>`` by :mod:`iclr_cli.formats.think`,
  gpt-oss harmony channels by :mod:`iclr_cli.formats.markup`); every other delimiter found in
  visible text is reported as unrecognised (never silently taken for the answer), and a block
  that mentions any of them is removed whole or kept whole, never edited token by token.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class ToolCallSyntax:
    """One model family's text-encoded tool call.

    ``family`` names the models; ``parsers`` the parser names in vLLM and SGLang that read
    it; ``markers`` are literal strings that start a call; ``patterns`` are regular
    expressions for markers with a variable part; ``shape`` is a precise check for syntaxes
    that have no marker (``text -> bool``, see the module docstring).
    """

    family: str
    parsers: str
    markers: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()
    shape: Callable[[str], bool] | None = None


@dataclass(frozen=True)
class ReasoningDelimiter:
    """The start and end markup of one reasoning parser.

    ``pattern`` is the regular expression that finds either delimiter (tags ignore case);
    ``read`` says whether this project reads the markup as reasoning.
    """

    family: str
    parsers: str
    start: str
    end: str
    read: bool = False
    pattern: str = ""

    def regex(self) -> str:
        if self.pattern:
            return self.pattern
        return "(?i:" + "|".join(re.escape(t) for t in (self.start, self.end) if t) + ")"


_CALL_KEYS = ("arguments", "parameters")
_OBJECT_START = re.compile(r'\{\s*"')
_DECODER = json.JSONDecoder()


def _is_call(value: object) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("name"), str)
        and bool(value["name"].strip())
        and any(isinstance(value.get(k), (dict, str)) for k in _CALL_KEYS)
    )


def json_call(text: str) -> bool:
    """True when ``text`` holds a JSON object with a string ``name`` and ``arguments`` or
    ``parameters`` (an object or a string): Llama 3 JSON, xLAM, JSON arrays of calls."""
    if '"name"' not in text or not any(f'"{k}"' in text for k in _CALL_KEYS):
        return False
    end = -1
    for m in _OBJECT_START.finditer(text):
        if m.start() < end:
            continue  # inside an object already decoded
        try:
            value, end = _DECODER.raw_decode(text, m.start())
        except ValueError:
            continue
        if _is_call(value):
            return True
    return False


def _literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _callee(node: ast.AST) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def pythonic_calls(text: str) -> bool:
    """True when a line of ``text`` is a Python list of calls with keyword arguments only,
    each a literal (``[get_weather(city="Paris", days=3)]``): the pythonic tool-call syntax."""
    if "(" not in text or "[" not in text:
        return False
    for line in text.splitlines():
        line = line.strip()
        if not (line.startswith("[") and line.endswith("]") and "(" in line):
            continue
        try:
            tree = ast.parse(line, mode="eval")
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            continue
        body = tree.body
        if isinstance(body, ast.List) and body.elts and all(
            isinstance(e, ast.Call) and _callee(e.func) and not e.args
            and all(k.arg is not None and _literal(k.value) for k in e.keywords)
            for e in body.elts
        ):
            return True
    return False


# fmt: off
TOOL_CALLS: tuple[ToolCallSyntax, ...] = (
    ToolCallSyntax("Hermes 2 Pro / Qwen 2.5 / Qwen 3 (JSON in tags)", "vllm hermes, qwen3_json; sglang hermes, qwen25, trinity", ("<tool_call>",)),
    ToolCallSyntax("Qwen3-Coder / MiMo / Step-3.5 / Step-5 (XML functions)", "vllm qwen3_coder, qwen3_xml, mimo, step3p5, step5; sglang qwen3_coder, mimo, step3p5, nanbeige", ("<tool_call>", "<function=")),
    ToolCallSyntax("GLM-4.5 / 4.6 / 4.7 / 5, Ling 3 (name then arg_key/arg_value)", "vllm glm45, glm47, ling3; sglang glm45, glm47, ling3", ("<tool_call>", "<arg_key>")),
    ToolCallSyntax("Poolside v1 / Spark 2.5 (arg_key/arg_value)", "vllm poolside_v1; sglang poolside_v1, spark25", ("<tool_call>",)),
    ToolCallSyntax("ERNIE 4.5", "vllm ernie45", ("<tool_call>",)),
    ToolCallSyntax("Granite 3.1 / Granite 4", "vllm granite, granite4", ("<tool_call>",)),
    ToolCallSyntax("Granite 3.0", "vllm granite", ("<|tool_call|>",)),
    ToolCallSyntax("Granite 20B function calling", "vllm granite-20b-fc", ("<function_call>",)),
    ToolCallSyntax("Mistral / Magistral / Devstral", "vllm mistral; sglang mistral", ("[TOOL_CALLS]",)),
    ToolCallSyntax("Llama 3.1 / 3.2 (python_tag)", "vllm llama3_json; sglang llama3", ("<|python_tag|>",)),
    ToolCallSyntax("Llama 3 / 4 JSON, xLAM, JSON arrays", "vllm llama3_json, llama4_json, xlam; sglang llama3 (JsonArrayParser)", shape=json_call),
    ToolCallSyntax("Llama 4 pythonic (python_start)", "vllm llama4_pythonic", ("<|python_start|>",)),
    ToolCallSyntax("Pythonic lists (Llama 3.2 / 4, Olmo 3, ToolACE)", "vllm pythonic, llama4_pythonic, olmo3; sglang pythonic", shape=pythonic_calls),
    ToolCallSyntax("Olmo 3 (function_calls tags)", "vllm olmo3", ("<function_calls>",)),
    ToolCallSyntax("Kimi K2 / K2.5", "vllm kimi_k2; sglang kimi_k2", ("<|tool_calls_section_begin|>", "<|tool_call_begin|>")),
    ToolCallSyntax("Kimi K3 (XTML)", "vllm kimi_k3; sglang kimi_k3", ("<|open|>tools<|sep|>", "<|open|>call")),
    ToolCallSyntax("K2 Horizon (IFM)", "vllm k2_horizon; sglang k2_horizon", ("<ifm|tool_calls>", "<ifm|tool_call")),
    ToolCallSyntax("DeepSeek V3 / V3.1 / R1", "vllm deepseek_v3, deepseek_v31; sglang deepseekv3, deepseekv31", ("<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>")),
    ToolCallSyntax("DeepSeek V3.2 / V4 / V4.1 (DSML)", "vllm deepseek_v32, deepseek_v4, deepseek_v41; sglang deepseekv32, deepseekv4, deepseekv41", patterns=(r"<｜DSML｜ ?(?:function_calls|tool_calls|calls|invoke)",)),
    ToolCallSyntax("Step 3", "vllm step3; sglang step3", ("<｜tool_calls_begin｜>", "<｜tool_call_begin｜>", "<steptml:invoke")),
    ToolCallSyntax("MiniMax-M1", "vllm minimax (earlier releases)", ("<tool_calls>",)),
    ToolCallSyntax("MiniMax-M2", "vllm minimax_m2; sglang minimax-m2", ("<minimax:tool_call>",)),
    ToolCallSyntax("MiniMax-M3", "vllm minimax_m3; sglang minimax-m3", ("]<]minimax[>[<tool_call>",)),
    ToolCallSyntax("gpt-oss (harmony)", "vllm openai; sglang gpt-oss", patterns=(r"\bto=functions\.\w",)),
    ToolCallSyntax("Muse / Muse Glimmer (ATEM)", "vllm muse, muse_glimmer; sglang muse", ("<atem:function_calls>", "<atem:invoke")),
    ToolCallSyntax("InternLM 2 / Intern-S1", "vllm internlm; sglang interns1", patterns=(r"<\|action_start\|>\s*<\|plugin\|>",)),
    ToolCallSyntax("Phi-4-mini", "vllm phi4_mini_json", ("functools[",)),
    ToolCallSyntax("Jamba", "vllm jamba", ("<tool_calls>",)),
    ToolCallSyntax("Hunyuan A13B / HY v3 / HY v4", "vllm hunyuan_a13b, hy_v3, hy_v4; sglang hunyuan", patterns=(r"<tool_calls?(?::[^\s<>]+)?>",)),
    ToolCallSyntax("Seed-OSS", "vllm seed_oss", ("<seed:tool_call>",)),
    ToolCallSyntax("Cohere Command A (3 / 4)", "vllm cohere_command3, cohere_command4; sglang cohere_command4", ("<|START_ACTION|>",)),
    ToolCallSyntax("Apertus", "vllm apertus; sglang apertus2509", ("<|tools_prefix|>",)),
    ToolCallSyntax("LFM2", "vllm lfm2; sglang lfm2", ("<|tool_call_start|>",)),
    ToolCallSyntax("Gemma 4", "vllm gemma4; sglang gemma4", ("<|tool_call>",)),
    ToolCallSyntax("FunctionGemma", "vllm functiongemma", ("<start_function_call>",)),
    ToolCallSyntax("GigaChat 3", "vllm gigachat3; sglang gigachat3", ("<|function_call|>", "function call<|role_sep|>")),
    ToolCallSyntax("GigaChat 3.5 (GCML)", "sglang gigachat35", ("<｜GCML｜tool_calls>", "<｜GCML｜invoke")),
    ToolCallSyntax("LongCat", "vllm longcat", ("<longcat_tool_call>",)),
    ToolCallSyntax("dots", "vllm dots; sglang dots", ("<dots_function_call>",)),
    ToolCallSyntax("IQuest Q1", "sglang iquest_q1", ("<iquest_tool_call>",)),
    ToolCallSyntax("MiniCPM 4 / 5 (XML functions)", "vllm minicpm5; sglang minicpm5", patterns=(r"<function\s+name=",)),
    ToolCallSyntax("PLaMo 3", "vllm plamo3", ("<|plamo:begin_tool_requests:plamo|>", "<|plamo:begin_tool_request:plamo|>")),
    ToolCallSyntax("Inkling", "vllm inkling; sglang inkling", ("<|content_invoke_tool_json|>", "<|content_invoke_tool_text|>")),
)

REASONING_DELIMITERS: tuple[ReasoningDelimiter, ...] = (
    ReasoningDelimiter("DeepSeek R1 / V3 / V4, Qwen 3, GLM, Kimi K2, MiniMax-M2, Step, Olmo 3, ERNIE, Nemotron, MiMo and others", "vllm deepseek_r1, qwen3, glm45, kimi_k2, minimax_m2, ...; sglang deepseek-r1, qwen3, glm45, kimi_k2, ...", "<think>", "</think>", read=True),
    ReasoningDelimiter("gpt-oss (harmony analysis channel)", "vllm openai_gptoss; sglang gpt-oss", "<|channel|>analysis<|message|>", "<|end|>", read=True),
    ReasoningDelimiter("Kimi (VL, thinking)", "sglang kimi", "◁think▷", "◁/think▷"),
    ReasoningDelimiter("Seed-OSS", "vllm seed_oss", "<seed:think>", "</seed:think>"),
    ReasoningDelimiter("Mistral / Magistral", "vllm mistral; sglang mistral", "[THINK]", "[/THINK]"),
    ReasoningDelimiter("MiniMax-M3", "vllm minimax_m3; sglang minimax-m3", "<mm:think>", "</mm:think>"),
    ReasoningDelimiter("Cohere Command A Reasoning", "vllm cohere_command3, cohere_command4; sglang cohere_command4", "<|START_THINKING|>", "<|END_THINKING|>"),
    ReasoningDelimiter("Gemma 4", "vllm gemma4; sglang gemma4", "<|channel>", "<channel|>"),
    ReasoningDelimiter("Apertus", "vllm apertus; sglang apertus2509", "<|inner_prefix|>", "<|inner_suffix|>"),
    ReasoningDelimiter("K2 Horizon (IFM)", "vllm k2_horizon; sglang k2_horizon", "<ifm|think>", "</ifm|think>", pattern=r"</?ifm\|think(?:_fast|_faster)?>"),
    ReasoningDelimiter("Kimi K3 (XTML)", "vllm kimi_k3; sglang kimi_k3", "<|open|>think<|sep|>", "<|close|>think<|sep|>"),
    ReasoningDelimiter("PLaMo 3", "vllm plamo3", "<|plamo:begin_think:plamo|>", "<|plamo:end_think:plamo|>"),
    ReasoningDelimiter("Inkling", "vllm inkling; sglang inkling", "<|content_thinking|>", ""),
    ReasoningDelimiter("Muse (self channel)", "vllm muse; sglang muse", "to=self<|message|>", "<|eom|>", pattern=r"\bto=self<\|message\|>|<\|eom\|>"),
    ReasoningDelimiter("HY v4 (suffixed think tags)", "vllm hy_v4", "<think:SUFFIX>", "</think:SUFFIX>", pattern=r"</?think:[^\s<>]+>"),
    ReasoningDelimiter("Granite 3.2 (plain-text headers)", "vllm granite", "Here is my thought process:", "Here is my response:", pattern=r"(?m:^[ \t]*(?:Here's|Here is) my (?:thought process|response):)"),
    # Not from the two servers: tags models are prompted to use, and Sky-T1's thought markers.
    ReasoningDelimiter("prompted tags", "(none)", "<thinking>", "</thinking>"),
    ReasoningDelimiter("prompted tags", "(none)", "<reasoning>", "</reasoning>"),
    ReasoningDelimiter("prompted tags", "(none)", "<thought>", "</thought>"),
    ReasoningDelimiter("Sky-T1 / Bespoke", "(none)", "<|begin_of_thought|>", "<|end_of_thought|>"),
)
# fmt: on


def _marker_regex() -> re.Pattern[str]:
    sources = [re.escape(m) for row in TOOL_CALLS for m in row.markers] + [p for row in TOOL_CALLS for p in row.patterns]
    return re.compile("|".join(dict.fromkeys(sources)))


_MARKERS = _marker_regex()
_SHAPES = tuple(row.shape for row in TOOL_CALLS if row.shape is not None)


def holds_tool_call(text: str) -> bool:
    """True when ``text`` holds a text-encoded tool call in a syntax of :data:`TOOL_CALLS`."""
    return _MARKERS.search(text) is not None or any(shape(text) for shape in _SHAPES)


def tool_call_syntaxes(text: str) -> list[str]:
    """The families of :data:`TOOL_CALLS` whose syntax occurs in ``text`` (for reports and tests)."""
    found = []
    for row in TOOL_CALLS:
        literal = any(m in text for m in row.markers)
        if literal or any(re.search(p, text) for p in row.patterns) or (row.shape is not None and row.shape(text)):
            found.append(row.family)
    return found


FOREIGN_REASONING = re.compile("|".join(d.regex() for d in REASONING_DELIMITERS if not d.read))
"""Reasoning delimiters this project does not read (``read`` False) in one expression."""

_ROWS = [(re.compile(d.regex()), d) for d in REASONING_DELIMITERS]


def delimiter_of(tag: str) -> ReasoningDelimiter | None:
    """The row of :data:`REASONING_DELIMITERS` whose start or end ``tag`` is, or None."""
    return next((d for rx, d in _ROWS if rx.fullmatch(tag)), None)

# The harmony tokens that frame any gpt-oss message, and the think tags: a block quoting one
# must not be edited token by token (see iclr_cli.blocks.holds_delimiter).
_HARMONY_TOKENS = r"<\|(?:start|channel|message|end|return|call|constrain)\|>"
ANY_REASONING = re.compile("|".join([r"</?think>", _HARMONY_TOKENS, FOREIGN_REASONING.pattern]))
"""Every reasoning delimiter of :data:`REASONING_DELIMITERS`, read or not, and the harmony tokens."""

READ_MARKUP = re.compile(
    r"</?think>"
    r"|(?:<\|start\|>[^<]*)?<\|channel\|>[^<]*?(?:<\|constrain\|>[^<]*)?<\|message\|>"  # a whole harmony header
    r"|" + _HARMONY_TOKENS
)
"""The markup of the delimiters this project reads (``read`` rows: ``<think>`` tags, harmony
headers and tokens): structure that a format's parser pairs, so it is never the text of a
block (:func:`iclr_cli.blocks.split_blocks`)."""


_TICKS = re.compile(r"`+")


def code_spans(text: str) -> list[tuple[int, int]]:
    """Offsets of the Markdown code spans in ``text``: a run of N backticks up to the next run
    of exactly N. Spans of one or two backticks stop at a blank line (a paragraph break);
    runs of three or more (fences) do not. An unmatched run is literal text."""
    spans: list[tuple[int, int]] = []
    runs = list(_TICKS.finditer(text))
    i = 0
    while i < len(runs):
        run = runs[i]
        n = len(run.group())
        close = None
        for j in range(i + 1, len(runs)):
            if n < 3 and "\n\n" in text[run.end() : runs[j].start()]:
                break
            if len(runs[j].group()) == n:
                close = j
                break
        if close is None:
            i += 1
            continue
        spans.append((run.start(), runs[close].end()))
        i = close + 1
    return spans
