"""One reasoning stored in two places counts its blocks once, wherever it is stored, and every
stored form says the same after prune, or the file is refused (exit 2) naming both fields
(docs/FORMAT.md, "One reasoning, counted once"). A table over adapters with inputs of our own,
then the rules behind it: the exact nested-copy check and Codex's echo events."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from format_helpers import REALDATA, realdata, run_cli, summary_value
from iclr_cli.blocks import SKIP, split_blocks
from iclr_cli.formats import registry
from iclr_cli.formats.think import copy_kept_alike, think_elements
from iclr_cli.formats.writeback import Site, TextRef, UnregisteredCopy, apply_edits
from iclr_cli.trajectory import Part, Step, Trajectory

R = "Read the loader before the fixtures.\n\nThe cache is keyed by the path only.\n\nA rewritten file hits the stale entry.\n\nKey it by path and mtime."
N_R = 4  # paragraphs of R
PADDED = f"<think>\n{R}\n</think>\n\n"
CALL = {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{\"path\": \"loader.py\"}"}}


def core(text: str, k: int = 0) -> str:
    """The reasoning of the k-th <think> element of ``text``, whitespace around it aside."""
    return think_elements(text)[k].inner(text).strip()


def dig(value, *path):
    for key in path:
        value = value[key]
    return value


# -- the inputs: one reasoning held twice, per adapter ------------------------------------------

def openai_chat():
    return {"model": "Qwen3-30B-A3B-Q4_K_M.gguf", "messages": [
        {"role": "user", "content": "Why is the test flaky?"},
        {"role": "assistant", "content": PADDED + "Reading the loader.", "reasoning_content": R, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "_CACHE = {}"},
        {"role": "assistant", "content": "Keyed by path only."}]}


def mini_v1():
    return [{"role": "system", "content": "Reply with one mswea_bash_command block."}, {"role": "user", "content": "Fix the stale cache."},
            {"role": "assistant", "content": PADDED + "THOUGHT: read the loader.\n\n```bash\ncat loader.py\n```", "reasoning_content": R},
            {"role": "user", "content": "_CACHE = {}"},
            {"role": "assistant", "content": "Done.\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"}]


def mini_v2():
    reply = {"role": "assistant", "content": PADDED + "Reading the loader.", "reasoning_content": R, "tool_calls": [CALL]}
    msg = {**reply, "extra": {"response": {"choices": [{"message": dict(reply)}], "usage": {"prompt_tokens": 90, "completion_tokens": 60}}}}
    return {"trajectory_format": "mini-swe-agent-1.1", "instance_id": "cache-1", "messages": [
        {"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "Fix the stale cache."}, msg,
        {"role": "tool", "tool_call_id": "call_1", "content": "_CACHE = {}"}, {"role": "exit", "content": "", "extra": {"exit_status": "Submitted"}}]}


def swe_agent():
    thought = PADDED + "I'll read the loader.\n\n"
    response = thought + "```\ncat loader.py\n```"
    assistant = {"role": "assistant", "content": response, "thought": thought, "action": "cat loader.py", "agent": "main", "reasoning_content": R}
    history = [{"role": "system", "content": "You are SWE-agent.", "agent": "main"}, {"role": "user", "content": "Fix the stale cache.", "agent": "main"},
               assistant, {"role": "user", "content": "_CACHE = {}", "agent": "main"}]
    second = {"role": "assistant", "content": "Done.\n\n```\nsubmit\n```", "thought": "Done.\n\n", "action": "submit", "agent": "main"}
    return {"trajectory": [
        {"thought": thought, "action": "cat loader.py", "observation": "_CACHE = {}", "response": response, "state": {}, "query": history[:2]},
        {"thought": "Done.\n\n", "action": "submit", "observation": "", "response": second["content"], "state": {}, "query": [dict(m) for m in history]},
    ], "history": [*history, second], "info": {}}


def openhands_v0(thought: str):
    message = {"role": "assistant", "content": thought, "reasoning_content": R, "tool_calls": [{**CALL, "function": {"name": "execute_bash", "arguments": "{\"command\": \"cat loader.py\"}"}}]}
    meta = {"function_name": "execute_bash", "tool_call_id": "call_1", "model_response": {"id": "resp-1", "choices": [{"message": message}]}, "total_calls_in_response": 1}
    return [
        {"id": 0, "source": "user", "action": "message", "args": {"content": "Fix the stale cache."}},
        {"id": 1, "source": "agent", "action": "run", "args": {"command": "cat loader.py", "thought": thought}, "tool_call_metadata": meta},
        {"id": 2, "source": "environment", "observation": "run", "content": "_CACHE = {}", "cause": 1, "tool_call_metadata": meta},
        {"id": 3, "source": "agent", "action": "finish", "args": {"final_thought": "Keyed by path only."}},
    ]


def openhands_v1():
    return [
        {"kind": "MessageEvent", "id": "e1", "source": "user", "llm_message": {"role": "user", "content": [{"type": "text", "text": "Fix the stale cache."}]}},
        {"kind": "ActionEvent", "id": "e2", "source": "agent", "thought": [{"type": "text", "text": PADDED + "Let me look."}], "reasoning_content": R,
         "thinking_blocks": [], "tool_name": "terminal", "tool_call_id": "call_1",
         "tool_call": {"id": "call_1", "name": "terminal", "arguments": "{\"command\": \"cat loader.py\"}", "origin": "completion"},
         "llm_response_id": "resp-1", "action": {"kind": "TerminalAction", "command": "cat loader.py"}},
        {"kind": "ObservationEvent", "id": "e3", "source": "environment", "tool_name": "terminal", "tool_call_id": "call_1", "action_id": "e2",
         "observation": {"kind": "TerminalObservation", "content": [{"type": "text", "text": "_CACHE = {}"}]}},
    ]


def litellm_spend():
    msgs = openai_chat()["messages"][:3]
    return [{"request_id": "req-1", "call_type": "acompletion", "model": "Qwen3-30B-A3B-Q4_K_M.gguf", "messages": msgs,
             "proxy_server_request": {"model": "Qwen3-30B-A3B-Q4_K_M.gguf", "messages": json.loads(json.dumps(msgs))},
             "response": {"choices": [{"message": {"role": "assistant", "content": "Keyed by path only."}}]}}]


def langchain():
    return [{"type": "human", "data": {"content": "Fix the stale cache.", "additional_kwargs": {}}},
            {"type": "ai", "data": {"content": PADDED + "Reading the loader.", "additional_kwargs": {"reasoning_content": R},
                                    "tool_calls": [{"name": "read", "args": {"path": "loader.py"}, "id": "call_1", "type": "tool_call"}]}},
            {"type": "tool", "data": {"content": "_CACHE = {}", "tool_call_id": "call_1"}},
            {"type": "ai", "data": {"content": "Keyed by path only.", "additional_kwargs": {}}}]


def gemini_cli():
    meta = {"sessionId": "s-1", "projectHash": "p-1", "startTime": "t0", "lastUpdated": "t0"}
    msg = {"id": "g1", "timestamp": "t", "type": "gemini", "model": "gemini-2.5-pro",
           "content": [{"text": "**Cache**\n\n" + R, "thought": True}, {"text": "Keyed by path only."}],
           "thoughts": [{"subject": "Cache", "description": R, "timestamp": "t"}]}
    return [meta, {"id": "u1", "timestamp": "t", "type": "user", "content": [{"text": "Why is the test flaky?"}]}, msg,
            {**msg, "tokens": {"input": 90, "output": 60}}]  # gemini-cli writes the record again when the tokens come


def codex_summary():
    return [{"type": "session_meta", "payload": {"id": "s-1"}},
            {"type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Why is the test flaky?"}]}},
            {"type": "response_item", "payload": {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": R}]}},
            {"type": "event_msg", "payload": {"type": "agent_reasoning", "text": R}},
            {"type": "response_item", "payload": {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"}},
            {"type": "response_item", "payload": {"type": "function_call_output", "call_id": "c1", "output": "_CACHE = {}"}},
            {"type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Keyed by path."}]}}]


def codex_message():
    text = PADDED + "Keyed by path only."
    return [{"type": "session_meta", "payload": {"id": "s-1"}},
            {"type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Why is the test flaky?"}]}},
            {"type": "event_msg", "payload": {"type": "agent_message", "message": text}},
            {"type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}}]


def pi_copy():
    return [{"type": "session", "id": "s1", "version": 3, "timestamp": "t", "cwd": "/w"},
            {"type": "message", "id": "m1", "parentId": None, "timestamp": "t", "message": {"role": "user", "content": "Why is the test flaky?"}},
            {"type": "message", "id": "m2", "parentId": "m1", "timestamp": "t", "message": {
                "role": "assistant", "api": "openai-completions", "provider": "deepseek", "model": "deepseek-reasoner", "stopReason": "stop",
                "content": [{"type": "thinking", "thinking": R, "thinkingSignature": "reasoning_content"}, {"type": "text", "text": "Keyed by path only."}],
                "x_raw": {"reasoning_content": R}}}]


def bedrock_copy():
    return {"modelId": "deepseek.r1-v1:0", "messages": [
        {"role": "user", "content": [{"text": "Why is the test flaky?"}]},
        {"role": "assistant", "content": [{"reasoningContent": {"reasoningText": {"text": R}, "x_raw": R}}, {"text": "Keyed by path only."}]}]}


@dataclass(frozen=True)
class Case:
    make: Callable[[], object]
    name: str  # file name (its extension says JSON or JSONL)
    fmt: str
    n_blocks: int  # candidate blocks of the step that holds R: R's paragraphs counted once, plus a visible thought read as reasoning
    forms: Callable[[object], list[str]] | None  # every stored form of R in the output (stripped); None: refused
    refused: tuple[str, str] = ("", "")  # the copy's field and the reasoning's field named on exit 2


CASES = {
    "openai (llama.cpp deepseek-legacy)": Case(openai_chat, "o.json", "openai", N_R,
                                               lambda v: [v["messages"][1]["reasoning_content"], core(v["messages"][1]["content"])]),
    "mini-swe-agent v1": Case(mini_v1, "m.traj.json", "mini-swe-agent", N_R + 1, lambda v: [v[2]["reasoning_content"], core(v[2]["content"])]),
    "mini-swe-agent v2 (extra.response copy)": Case(mini_v2, "m2.traj.json", "mini-swe-agent", N_R + 1, lambda v: [
        dig(v, "messages", 2, "reasoning_content"), core(dig(v, "messages", 2, "content")),
        dig(v, "messages", 2, "extra", "response", "choices", 0, "message", "reasoning_content"),
        core(dig(v, "messages", 2, "extra", "response", "choices", 0, "message", "content"))]),
    "swe-agent (history, response, query copies)": Case(swe_agent, "s.traj", "swe-agent", N_R + 1, lambda v: [
        core(v["trajectory"][0]["thought"]), core(v["trajectory"][0]["response"]), core(v["history"][2]["thought"]),
        core(v["history"][2]["content"]), v["history"][2]["reasoning_content"], core(v["trajectory"][1]["query"][2]["thought"]),
        core(v["trajectory"][1]["query"][2]["content"]), v["trajectory"][1]["query"][2]["reasoning_content"]]),
    "openhands v0 (<think> in the thought)": Case(lambda: openhands_v0(PADDED + "Let me read it."), "h.json", "openhands", N_R, lambda v: [
        core(v[1]["args"]["thought"]), core(dig(v[1], "tool_call_metadata", "model_response", "choices", 0, "message", "content")),
        dig(v[1], "tool_call_metadata", "model_response", "choices", 0, "message", "reasoning_content"),
        dig(v[2], "tool_call_metadata", "model_response", "choices", 0, "message", "reasoning_content"),
        core(dig(v[2], "tool_call_metadata", "model_response", "choices", 0, "message", "content"))]),
    "openhands v0 (the thought is reasoning_content)": Case(lambda: openhands_v0(R), "h.json", "openhands", N_R, lambda v: [
        v[1]["args"]["thought"], dig(v[1], "tool_call_metadata", "model_response", "choices", 0, "message", "reasoning_content"),
        dig(v[1], "tool_call_metadata", "model_response", "choices", 0, "message", "content")]),
    "openhands v1": Case(openhands_v1, "h1.json", "openhands", N_R, lambda v: [v[1]["reasoning_content"], core(v[1]["thought"][0]["text"])]),
    "litellm spend log (two request copies)": Case(litellm_spend, "l.jsonl", "litellm-spend", N_R, lambda v: [
        v[0]["messages"][1]["reasoning_content"], core(v[0]["messages"][1]["content"]),
        v[0]["proxy_server_request"]["messages"][1]["reasoning_content"], core(v[0]["proxy_server_request"]["messages"][1]["content"])]),
    "langchain": Case(langchain, "lc.json", "langchain", N_R, lambda v: [v[1]["data"]["additional_kwargs"]["reasoning_content"], core(v[1]["data"]["content"])]),
    "gemini-cli (content thought, summary, re-written record)": Case(gemini_cli, "g.jsonl", "gemini-cli", N_R, lambda v: [
        v[2]["thoughts"][0]["description"], v[3]["thoughts"][0]["description"],
        v[2]["content"][0]["text"].removeprefix("**Cache**").strip(), v[3]["content"][0]["text"].removeprefix("**Cache**").strip()]),
    "codex (agent_reasoning echo)": Case(codex_summary, "c.jsonl", "codex", N_R, lambda v: [v[2]["payload"]["summary"][0]["text"], v[3]["payload"]["text"]]),
    "codex (agent_message echo of <think>)": Case(codex_message, "c2.jsonl", "codex", N_R, lambda v: [
        core(v[2]["payload"]["message"]), core(v[3]["payload"]["content"][0]["text"])]),
    "pi (a copy the adapter does not edit)": Case(pi_copy, "p.jsonl", "pi", N_R, None, ("message.x_raw.reasoning_content", "message.content[0].thinking")),
    "bedrock (a copy the adapter does not edit)": Case(bedrock_copy, "b.json", "bedrock", N_R, None,
                                                       ("messages[1].content[0].reasoningContent.x_raw", "messages[1].content[0].reasoningContent.reasoningText.text")),
    "openhands v0 (reasoning_content inside a longer thought)": Case(lambda: openhands_v0(R + "\n\nNow the command."), "h.json", "openhands", 2 * N_R + 1, None,
                                                                     ("[1].args.thought", "[1].tool_call_metadata.model_response.choices[0].message.reasoning_content")),
}


def write(tmp_path, case: Case):
    value = case.make()
    path = tmp_path / case.name
    if case.name.endswith(".jsonl"):
        path.write_text("".join(json.dumps(v) + "\n" for v in value))
    else:
        path.write_text(json.dumps(value, indent=2) + "\n")
    return path


def load_out(path, name: str):
    data = path.read_bytes()
    return [json.loads(x) for x in data.splitlines() if x.strip()] if name.endswith(".jsonl") else json.loads(data)


@pytest.mark.parametrize("name", CASES)
def test_one_reasoning_counts_its_blocks_once(tmp_path, capsys, name):
    case = CASES[name]
    src = write(tmp_path, case)
    assert registry.detect(src.read_bytes(), str(src)).name == case.fmt
    code, stdout, err = run_cli(capsys, "score", str(src), "--model", "fake", "-q")
    if case.forms is None and code == 2:  # score reports the reasoning as written: a refused write refuses it too
        assert f"field '{case.refused[0]}'" in " ".join(err.split())
        return
    assert code == 0, err
    rows = [json.loads(x) for x in stdout.splitlines()]
    holding = [r for r in rows if r["text"] in split_blocks(R).blocks]
    step = holding[0]["step"]
    assert {r["n_blocks"] for r in rows if r["step"] == step} == {case.n_blocks}


@pytest.mark.parametrize("variant", ["iclr", "delete-all", "random-40"])
@pytest.mark.parametrize("name", CASES)
def test_every_stored_form_says_the_same_or_the_file_is_refused(tmp_path, capsys, name, variant):
    case = CASES[name]
    src = write(tmp_path, case)
    out = tmp_path / ("out" + src.suffix)
    code, _, err = run_cli(capsys, "prune", str(src), "--model", "fake", "--variant", variant, "-o", str(out))
    flat = " ".join(err.split())
    if case.forms is None:
        if code == 0:  # consistent by chance (both copies emptied): then they say the same
            assert variant == "delete-all"
            return
        copy_field, site_field = case.refused
        assert code == 2 and not out.exists()
        assert f"field '{copy_field}'" in flat and f"reasoning at '{site_field}'" in flat, flat
        return
    assert code == 0, err
    forms = [f.strip() for f in case.forms(load_out(out, case.name))]
    assert len(set(forms)) == 1, forms
    assert forms[0] != R  # edited, everywhere alike
    if variant == "delete-all":
        assert forms[0] == ""


# -- the nested-copy check is exact -------------------------------------------------------------

def _pair(outer_text: str):
    values = [{"reasoning_content": R, "content": outer_text}]
    inner = Part("reasoning", R, ref=TextRef((Site((0, "reasoning_content")),)))
    outer = Part("reasoning", outer_text, ref=TextRef((Site((0, "content")),)))
    return values, Trajectory("t", (), (Step(0, (inner, outer)),)), inner, outer


def test_an_outer_text_that_merely_contains_the_inner_result_is_refused():
    outer_text = PADDED + "THOUGHT: read the loader."
    values, traj, inner, outer = _pair(outer_text)
    inner_new = split_blocks(R).edit({0: None, 1: None, 2: None})  # "Key it by path and mtime."
    # the outer copy compressed on its own: its <think> says something else, yet it contains inner_new
    outer_new = f"<think>\n{SKIP}\n\n{SKIP}\n\n{SKIP}\n\nKey it by path and mtime.\n</think>\n\n{SKIP}"
    assert inner_new in outer_new and not copy_kept_alike(outer_text, R, outer_new, inner_new)
    edited = traj.with_steps([Step(0, (Part("reasoning", inner_new, ref=inner.ref), Part("reasoning", outer_new, ref=outer.ref)))])
    with pytest.raises(UnregisteredCopy) as err:
        apply_edits(values, [traj], [edited])
    assert err.value.path == (0, "content") and err.value.site == Site((0, "reasoning_content"))
    # the same element holding the same compression, the visible thought edited on its own: one compression
    alike = f"<think>\n{inner_new}\n</think>\n\n{SKIP}"
    assert copy_kept_alike(outer_text, R, alike, inner_new)
    apply_edits(values, [traj], [traj.with_steps([Step(0, (Part("reasoning", inner_new, ref=inner.ref), Part("reasoning", alike, ref=outer.ref)))])])


@pytest.mark.parametrize("outer, outer_new, inner_new, alike", [
    (f"Notes: {R} End.", f"Notes: {SKIP} End.", SKIP, True),  # the copy replaced, nothing else changed
    (f"Notes: {R} End.", f"{SKIP} {R} End.", R, True),  # the copy intact, the inner unchanged
    (f"Notes: {R} End.", f"{SKIP} {SKIP} End.", SKIP, False),  # no markup to find it by: the rest must not change
    (f"Notes: {R} End.", "", "", True),  # both gone
    (f"Notes: {R} End.", "", SKIP, False),
    (PADDED + "THOUGHT.", PADDED + SKIP, R, True),  # the element untouched, the thought edited
    (PADDED + "THOUGHT.", f"<think>\n{SKIP}\n</think>\n\nTHOUGHT.", R, False),
])
def test_copy_kept_alike(outer, outer_new, inner_new, alike):
    assert copy_kept_alike(outer, R, outer_new, inner_new) is alike


def test_two_blocks_saying_the_same_words_are_two_reasonings_not_a_copy(tmp_path, capsys):
    """Two thinking blocks of one message that differ only in whitespace are two parts, as two
    equal ones are: neither is a copy inside the other (found by test_property_prune)."""
    doc = {"model": "claude-test", "messages": [{"role": "user", "content": "0"}, {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "00000000000000000000"}, {"type": "thinking", "thinking": "00000000000000000000\n"}]}]}
    src = tmp_path / "a.json"
    src.write_text(json.dumps(doc))
    code, _, err = run_cli(capsys, "prune", str(src), "--model", "fake", "--variant", "iclr", "-o", str(tmp_path / "o.json"))
    assert code == 0, err
    # two parts of one block each: BottomK removes one of N = 2 (floor(0.8 * 2) = 1); were the
    # second a copy of the first, both would read the same edit
    blocks = json.loads((tmp_path / "o.json").read_text())["messages"][1]["content"]
    assert [b["thinking"] for b in blocks] in (["[SKIP]", "00000000000000000000\n"], ["00000000000000000000", "[SKIP]\n"])
    assert summary_value(err, "blocks removed") == "1"


# -- mini-swe-agent and SWE-agent: the <think> copy joined, and what a fallback does ------------

def test_mini_swe_agent_think_copy_is_one_part_with_the_field():
    data = json.dumps(mini_v2()).encode()
    doc = registry.get("mini-swe-agent").load(data, "m.traj.json")
    [step] = doc.trajectories[0].steps
    texts = [p.text for p in step.reasoning]
    assert texts == [R, "\n\nReading the loader."]
    sites = [(s.path[1:], s.how) for s in step.reasoning[0].ref.sites]
    assert sites == [(("messages", 2, "reasoning_content"), "whole"),
                     (("messages", 2, "extra", "response", "choices", 0, "message", "reasoning_content"), "whole"),
                     (("messages", 2, "content"), "think_core:0"),
                     (("messages", 2, "extra", "response", "choices", 0, "message", "content"), "think_core:0")]


def test_a_think_left_open_up_to_the_command_is_one_part_and_refused_when_written_apart(tmp_path, capsys):
    msgs = mini_v1()
    msgs[2]["content"] = f"<think>\n{R}\n\nTHOUGHT: read the loader.\n\n```bash\ncat loader.py\n```"
    src = tmp_path / "m.traj.json"
    src.write_text(json.dumps(msgs))
    code, _, err = run_cli(capsys, "prune", str(src), "--model", "fake", "--variant", "iclr", "-o", str(tmp_path / "o.json"))
    flat = " ".join(err.split())
    assert code == 2 and "field '[2].content'" in flat and "reasoning at '[2].reasoning_content'" in flat


def test_swe_agent_query_copies_are_sites_of_the_thought(tmp_path, capsys):
    """SWE-agent 1.x keeps the messages of every step in ``query``: before, any edit of a
    thought they repeat refused the whole file as half-edited."""
    value = swe_agent()
    value["history"][2].pop("reasoning_content")
    value["trajectory"][1]["query"][2].pop("reasoning_content")
    thought = "I'll read the loader.\n\nThe cache is keyed by the path only.\n\n"
    for holder in (value["trajectory"][0], value["history"][2], value["trajectory"][1]["query"][2]):
        holder["thought"] = thought
        holder["content" if "content" in holder else "response"] = thought + "```\ncat loader.py\n```"
    value["trajectory"][0]["response"] = thought + "```\ncat loader.py\n```"
    src = tmp_path / "s.traj"
    src.write_text(json.dumps(value))
    out = tmp_path / "o.traj"
    code, _, err = run_cli(capsys, "prune", str(src), "--model", "fake", "--variant", "delete-all", "-o", str(out))
    assert code == 0, err
    got = json.loads(out.read_text())
    for holder in (got["trajectory"][0], got["history"][2], got["trajectory"][1]["query"][2]):
        assert holder["thought"] == ""
    assert got["trajectory"][1]["query"][2]["content"] == got["history"][2]["content"] == "```\ncat loader.py\n```"


# -- Codex: echo events say what their item says, or go with it ---------------------------------

def codex_lines(encrypted: bool, content: bool) -> list[dict]:
    item = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "**Cache**"}]}
    if content:
        item["content"] = [{"type": "reasoning_text", "text": R}]
    else:
        item["summary"] = [{"type": "summary_text", "text": R}]
    if encrypted:
        item["encrypted_content"] = "gAAAAB-opaque"
    echoes = [{"type": "event_msg", "payload": {"type": "agent_reasoning", "text": item["summary"][0]["text"]}}]
    if content:
        echoes.append({"type": "event_msg", "payload": {"type": "agent_reasoning_raw_content", "text": R}})
    return [{"type": "session_meta", "payload": {"id": "s-1"}},
            {"type": "turn_context", "payload": {"model": "gpt-oss-120b"}},
            {"type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Why is the test flaky?"}]}},
            {"type": "response_item", "payload": item}, *echoes,
            {"type": "response_item", "payload": {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"}},
            {"type": "response_item", "payload": {"type": "function_call_output", "call_id": "c1", "output": "_CACHE = {}"}}]


def _echo_texts(lines: list[dict]) -> dict[str, str]:
    return {v["payload"]["type"]: v["payload"]["text"] for v in lines if v["type"] == "event_msg"}


def _item(lines: list[dict]) -> dict | None:
    return next((v["payload"] for v in lines if v["type"] == "response_item" and v["payload"]["type"] == "reasoning"), None)


@pytest.mark.parametrize("content", [False, True], ids=["summary", "raw-content"])
@pytest.mark.parametrize("encrypted, mode", [(False, None), (True, "drop"), (True, "keep"), (True, "seal")])
@pytest.mark.parametrize("variant", ["iclr", "delete-all"])
def test_codex_echoes_follow_their_item(tmp_path, capsys, content, encrypted, mode, variant):
    lines = codex_lines(encrypted, content)
    src = tmp_path / "r.jsonl"
    src.write_text("".join(json.dumps(v) + "\n" for v in lines))
    out = tmp_path / "o.jsonl"
    args = ["--encrypted-reasoning", mode] if mode else []
    code, _, err = run_cli(capsys, "prune", str(src), "--model", "fake", "--variant", variant, "-o", str(out), *args)
    assert code == 0, err
    after = [json.loads(x) for x in out.read_bytes().splitlines()]
    if mode in ("keep", "seal"):
        assert out.read_bytes() == src.read_bytes()  # the item as generated, its echoes with it
        return
    if mode == "drop":
        assert _item(after) is None and _echo_texts(after) == {}  # the echoes went with the item
        return
    item, echoes = _item(after), _echo_texts(after)
    raw = item["content"][0]["text"] if content else item["summary"][0]["text"]
    assert raw != R and echoes["agent_reasoning_raw_content" if content else "agent_reasoning"] == raw
    if content:  # the summary of raw content: cleared with it when all of it goes, echo alike
        assert echoes["agent_reasoning"] == item["summary"][0]["text"] == ("" if variant == "delete-all" else "**Cache**")


def test_a_codex_echo_the_reader_cannot_match_refuses_the_file(tmp_path, capsys):
    lines = codex_lines(False, False)
    lines[4]["payload"]["text"] = "Summary so far: " + R  # not the item's text: no site
    src = tmp_path / "r.jsonl"
    src.write_text("".join(json.dumps(v) + "\n" for v in lines))
    out = tmp_path / "o.jsonl"
    code, _, err = run_cli(capsys, "prune", str(src), "--model", "fake", "--variant", "iclr", "-o", str(out))
    flat = " ".join(err.split())
    assert code == 2 and not out.exists()
    assert f"{src}:5: field 'payload.text'" in flat and "reasoning at 'payload.summary[0].text'" in flat


def test_real_codex_rollout_drops_each_echo_with_its_item(tmp_path, capsys):
    realdata("codex_rollout")
    src = REALDATA / "codex_rollout" / "agentcmd_rollout-2025-09-24T20-12-23.jsonl"
    before = [json.loads(x) for x in src.read_bytes().splitlines()]
    out = tmp_path / "o.jsonl"
    for mode, gone in (("keep", 0), ("drop", 34)):
        code, _, err = run_cli(capsys, "prune", str(src), "--model", "fake", "--variant", "delete-all", "--encrypted-reasoning", mode, "-o", str(out))
        assert code == 0, err
        after = [json.loads(x) for x in out.read_bytes().splitlines()]
        assert len(before) - len(after) == gone  # 17 reasoning items and their 17 agent_reasoning echoes
        summaries = {e["text"] for v in after if v["type"] == "response_item" and v["payload"]["type"] == "reasoning" for e in v["payload"]["summary"]}
        echoes = {v["payload"]["text"] for v in after if v["type"] == "event_msg" and v["payload"]["type"] == "agent_reasoning"}
        assert echoes == summaries  # every echo left says what a kept item says


# -- the real files: no reasoning held twice, none left anywhere after delete-all -----------------

def _real_files() -> list[str]:
    return sorted(str(p.relative_to(REALDATA)) for p in REALDATA.rglob("*") if p.is_file() and p.suffix != ".md") if REALDATA.is_dir() else []


@pytest.mark.parametrize("name", _real_files())
def test_real_files_count_each_reasoning_once_and_delete_all_leaves_no_copy(tmp_path, capsys, name):
    src = REALDATA / name
    data = src.read_bytes()
    doc = registry.detect(data, str(src)).load(data, str(src))
    texts, others = [], []
    for traj in doc.trajectories:
        for step in traj.steps:
            mine = [p.text for p in step.parts if p.kind == "reasoning"]
            for i, a in enumerate(mine):  # no reasoning of a step inside another of the same step
                assert not any(j != i and len(a.strip()) >= 20 and a.strip() in b for j, b in enumerate(mine))
            texts += mine
            others += [p.text for p in step.parts if p.kind != "reasoning"]
    out = tmp_path / ("out" + src.suffix)
    code, _, err = run_cli(capsys, "prune", str(src), "--model", "fake", "--variant", "delete-all", "--signed-thinking", "edit",
                           "--encrypted-reasoning", "drop", "-o", str(out), "-q")
    assert code == 0, err
    written = out.read_bytes().decode()
    for text in (t.strip() for t in texts):
        if len(text) >= 20 and not any(text in other for other in others):  # an answer repeating it is the answer
            assert text not in written and json.dumps(text, ensure_ascii=False)[1:-1] not in written
