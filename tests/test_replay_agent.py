"""The agent loop against a scripted OpenAI-compatible server: tools, online write-back,
provider reasoning rules, text-protocol fallback, sliding window and limits."""

from __future__ import annotations

import json

import pytest

from replay_fixtures import call, completion, error, fake_openai, make_session, submit

from iclr_cli.replay.suite import load_tasks

REASONING = "Plan: read the file.\n\nThe file may be empty.\n\nI will write hi.\n\nThen submit.\n\nDone thinking."


@pytest.fixture
def hello_task(tmp_path):
    folder = tmp_path / "tasks" / "hello"
    (folder / "files").mkdir(parents=True)
    (folder / "files" / "seed.txt").write_text("seed\n")
    (folder / "task.toml").write_text('domain = "office"\ndescription = "Write hi"\ninstruction = "Write hi into out.txt."\n')
    (folder / "check.py").write_text("def check(ctx):\n    p = ctx.workspace / 'out.txt'\n    return 1.0 if p.exists() and p.read_text().strip() == 'hi' else 0.0\n")
    return load_tasks(tmp_path / "tasks")


def _run(tmp_path, script, tasks, variants, **kw):
    with fake_openai(script) as srv:
        session = make_session(tmp_path, srv.url, tasks=tasks, variants=variants, **kw)
        session.run(kw.pop("jobs", 1))
    out = tmp_path / "out"
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return srv.requests, records, out


def _assistants(request):
    return [m for m in request["messages"] if m["role"] == "assistant"]


def test_bash_tool_runs_in_the_workspace_and_result_is_paired(tmp_path, hello_task):
    script = [
        completion(None, [call("bash", {"command": "cat seed.txt; echo hi > out.txt; echo HOME=$HOME; echo KEY=${OPENAI_API_KEY:-unset}"}, "c1")]),
        submit("ok"),
    ]
    requests, [record], _ = _run(tmp_path, script, hello_task, ["none"])
    tool = requests[1]["messages"][-1]
    assert tool["role"] == "tool" and tool["tool_call_id"] == "c1"
    assert tool["content"].startswith("exit code: 0\nseed\n")
    assert "KEY=unset" in tool["content"]  # the caller's environment does not leak in
    assert (record["reward"], record["status"], record["requests"], record["steps"]) == (1.0, "submitted", 2, 2)
    assert record["submission"] == "ok"


SEVEN = "\n\n".join(f"Thought {k}: check file part {k} before writing anything." for k in range(7))


def test_online_loop_compresses_only_the_completed_step_once_and_never_restores(tmp_path, hello_task):
    """7 blocks per step: one compression leaves 5 [SKIP] and 2 candidates,
    a second would leave 6. Request k must repeat every assistant and tool message of request
    k-1 byte for byte and add only the step just completed, compressed once."""
    from iclr_cli.replay.runner import SYSTEM_PROMPT

    script = [completion(None, [call("bash", {"command": f"echo {i}"}, f"c{i}")], reasoning_content=SEVEN.replace("Thought", f"S{i}")) for i in range(4)]
    script.append(completion(None, [call("bash", {"command": "echo hi > out.txt"}, "c4")], reasoning_content=SEVEN))
    script.append(submit())
    requests, [record], _ = _run(tmp_path, script, hello_task, ["iclr"])
    # the first request is P exactly as the task defines it: nothing to compress yet
    assert requests[0]["messages"] == [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "Write hi into out.txt."},
    ]
    for k in range(1, len(requests)):
        before, now = requests[k - 1]["messages"], requests[k]["messages"]
        assert json.dumps(now[: len(before)]) == json.dumps(before)  # earlier steps byte-identical
        added = now[len(before) :]
        assert [m["role"] for m in added] == ["assistant", "tool"]
        sent = added[0]["reasoning_content"]
        assert sent.count("[SKIP]") == 5 and len(sent.split("\n\n")) == 7
        kept = [b for b in sent.split("\n\n") if b != "[SKIP]"]
        assert all(b in script[k - 1].body["choices"][0]["message"]["reasoning_content"] for b in kept)
    assert record["steps"] == 6 and record["requests"] == 6


def test_first_request_uncompressed_later_ones_carry_compressed_reasoning(tmp_path, hello_task):
    script = [
        completion(None, [call("bash", {"command": "echo hi > out.txt"})], reasoning_content=REASONING),
        completion(None, [call("bash", {"command": "ls"})], reasoning_content="Check.\n\nLooks fine."),
        submit(),
    ]
    requests, [record], out = _run(tmp_path, script, hello_task, ["iclr"])
    assert _assistants(requests[0]) == []
    sent = _assistants(requests[1])[0]["reasoning_content"]
    assert sent.count("[SKIP]") == 4  # floor(0.8 * 5 blocks)
    assert sent != REASONING and [b for b in sent.split("\n\n") if b != "[SKIP]"][0] in REASONING
    assert _assistants(requests[2])[0]["reasoning_content"] == sent  # never restored
    saved = json.loads((out / record["trajectory"]).read_text())
    original = json.loads((out / record["generated"]).read_text())
    assert [m for m in saved["messages"] if m["role"] == "assistant"][0]["reasoning_content"] == sent
    assert [m for m in original["messages"] if m["role"] == "assistant"][0]["reasoning_content"] == REASONING
    assert record["reasoning_tokens_removed"] > 0
    assert record["reasoning_tokens_generated"] > record["reasoning_tokens_removed"]
    scores = [json.loads(line) for line in (out / record["block_scores"]).read_text().splitlines()]
    assert sum(s["selected"] for s in scores if s["step"] == 0) == 4


def test_delete_all_sends_empty_reasoning_content_deepseek_rule(tmp_path, hello_task):
    script = [completion(None, [call("bash", {"command": "echo hi > out.txt"})], reasoning_content=REASONING), submit()]
    requests, [record], _ = _run(tmp_path, script, hello_task, ["delete-all"])
    first = _assistants(requests[1])[0]
    assert "reasoning_content" in first and first["reasoning_content"] == ""
    assert record["reasoning_tokens_removed"] == record["reasoning_tokens_generated"] > 0


def test_none_sends_reasoning_back_unchanged(tmp_path, hello_task):
    script = [completion(None, [call("bash", {"command": "echo hi > out.txt"})], reasoning_content=REASONING), submit()]
    requests, [record], _ = _run(tmp_path, script, hello_task, ["none"])
    assert _assistants(requests[1])[0]["reasoning_content"] == REASONING
    assert record["reasoning_tokens_removed"] == 0


def test_inline_think_goes_back_inline(tmp_path, hello_task):
    content = f"<think>{REASONING}</think>\nWriting the file."
    script = [completion(content, [call("bash", {"command": "echo hi > out.txt"})]), submit()]
    requests, _, _ = _run(tmp_path, script, hello_task, ["none"])
    assert _assistants(requests[1])[0]["content"] == content
    assert "reasoning_content" not in _assistants(requests[1])[0]
    requests, _, _ = _run(tmp_path / "b", script, hello_task, ["delete-all"])
    assert _assistants(requests[1])[0]["content"] == "\nWriting the file."


def test_reasoning_field_provider_gets_reasoning_field(tmp_path, hello_task):
    script = [completion(None, [call("bash", {"command": "echo hi > out.txt"})], reasoning=REASONING), submit()]
    requests, _, _ = _run(tmp_path, script, hello_task, ["random-40"])
    sent = _assistants(requests[1])[0]
    assert "reasoning_content" not in sent
    assert len(sent["reasoning"]) < len(REASONING)


def test_text_protocol_fallback_and_no_action_note(tmp_path, hello_task):
    script = [
        completion("I will think first."),
        completion('<tool_call>{"name": "bash", "arguments": {"command": "echo hi > out.txt && echo written"}}</tool_call>'),
        completion('```bash\ncat out.txt\n```'),
        completion('<tool_call>{"name": "submit", "arguments": {"answer": "fine"}}</tool_call>'),
    ]
    requests, [record], _ = _run(tmp_path, script, hello_task, ["none"], tool_protocol="text")
    assert "tools" not in requests[0]
    assert "<tool_call>" in requests[0]["messages"][0]["content"]  # protocol explained in P
    assert requests[1]["messages"][-1]["content"].startswith("No tool call found")
    assert requests[2]["messages"][-1] == {"role": "user", "content": "[bash result]\nexit code: 0\nwritten\n"}
    assert requests[3]["messages"][-1]["content"] == "[bash result]\nexit code: 0\nhi\n"
    assert (record["status"], record["submission"], record["reward"]) == ("submitted", "fine", 1.0)


def test_text_protocol_thought_is_reasoning_and_compressed(tmp_path, hello_task):
    reply = "I should look first.\n\nThe file is small.\n\n```bash\necho hi > out.txt\n```"
    script = [completion(reply), submit()]
    requests, [record], out = _run(tmp_path, script, hello_task, ["none"], tool_protocol="text")
    assert _assistants(requests[1])[0]["content"] == reply  # sent back exactly as generated
    requests, [record], out = _run(tmp_path / "b", script, hello_task, ["delete-all"], tool_protocol="text")
    assert _assistants(requests[1])[0]["content"] == "```bash\necho hi > out.txt\n```"
    assert record["reasoning_tokens_removed"] == record["reasoning_tokens_generated"] > 0
    saved = json.loads((out / record["generated"]).read_text())
    first = [m for m in saved["messages"] if m["role"] == "assistant"][0]
    assert first["reasoning_content"] + first["content"] == reply


def test_sliding_window_keeps_prompt_and_last_k_steps(tmp_path, hello_task):
    script = [completion(None, [call("bash", {"command": f"echo {i}"}, f"c{i}")]) for i in range(3)] + [submit()]
    requests, _, out = _run(tmp_path, script, hello_task, ["sliding-window-1"])
    assert [len(r["messages"]) for r in requests] == [2, 4, 4, 4]
    assert requests[3]["messages"][2]["tool_calls"][0]["id"] == "c2"
    assert requests[3]["messages"][3]["tool_call_id"] == "c2"
    saved = json.loads((out / "runs/hello/sliding-window-1/seed0/trajectory.json").read_text())
    assert len(saved["messages"]) == 2 + 2 * 4  # the saved trajectory is never windowed


def test_step_limit_and_api_failure_statuses(tmp_path, hello_task):
    script = [completion(None, [call("bash", {"command": "true"})])] * 5
    _, [record], _ = _run(tmp_path, script, hello_task, ["none"], max_steps=2)
    assert (record["status"], record["requests"], record["reward"]) == ("step_limit", 2, 0.0)
    _, [record], _ = _run(tmp_path / "b", [error(500)] * 3, hello_task, ["none"], max_retries=0)
    assert record["status"] == "error" and "HTTP 500" in record["message"]
    assert record["requests"] == 0


def test_cache_reads_from_both_field_names_are_summed(tmp_path, hello_task):
    script = [
        completion(None, [call("bash", {"command": "echo hi > out.txt"})], usage_={"prompt_tokens": 500, "completion_tokens": 40, "prompt_tokens_details": {"cached_tokens": 384}}),
        completion(None, [call("submit", {})], usage_={"prompt_tokens": 700, "completion_tokens": 10, "prompt_cache_hit_tokens": 512, "completion_tokens_details": {"reasoning_tokens": 7}}),
    ]
    _, [record], out = _run(tmp_path, script, hello_task, ["none"])
    assert (record["input_tokens"], record["output_tokens"], record["cache_read_tokens"], record["api_reasoning_tokens"]) == (1200, 50, 896, 7)
    assert record["unreported_usage"] == []
    log = [json.loads(line) for line in (out / record["requests_log"]).read_text().splitlines()]
    assert [r["cache_read_tokens"] for r in log] == [384, 512]


def test_bad_tool_arguments_come_back_as_an_observation(tmp_path, hello_task):
    script = [completion(None, [call("bash", "{not json", "c1"), call("read_file", {"path": "../../etc/passwd"}, "c2")])]
    requests, _, _ = _run(tmp_path, script, hello_task, ["none"])
    results = {m["tool_call_id"]: m["content"] for m in requests[1]["messages"] if m["role"] == "tool"}
    assert results["c1"].startswith("error: arguments are not valid JSON")
    assert "outside the workspace" in results["c2"]


def test_send_seed_puts_the_run_seed_in_every_request(tmp_path, hello_task):
    script = [completion(None, [call("bash", {"command": "true"})])] * 2 + [submit()] * 4
    requests, records, _ = _run(tmp_path, script, hello_task, ["none"], seeds=2, send_seed=True, temperature=0.7)
    assert sorted(r["seed"] for r in requests) == [0, 0, 0, 1]  # seed 0: two calls + submit; seed 1: submit
    assert all(r["temperature"] == 0.7 for r in requests)
    requests, _, _ = _run(tmp_path / "b", [submit()], hello_task, ["none"])
    assert "seed" not in requests[0] and "temperature" not in requests[0]
