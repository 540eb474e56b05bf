"""``iclr savings`` as users run it: token sources, folders, the cache, Ctrl-C, --since, JSON."""

import json
import re

import orjson
import pytest

from format_helpers import field_case, run_cli, summary_value
from iclr_cli.inputs import load_file

# Regex-tokenizer counts (--model fake) of the session below, by hand: each part renders as
# "[label]\ntext\n\n", i.e. "[", label, "]", "\n", the text's tokens, "\n\n" (5 + text tokens).
# P: system "Sys", user "Task": 6 + 6 = 12. Step 0: reasoning "alpha beta" (3 tokens: alpha,
# " ", beta) 8, answer "A0" 6, user "ok" 6: 20. Step 1: reasoning "gamma delta epsilon"
# (5) 10 + 6 + 6 = 22. Step 2: reasoning "zeta" (1) 6 + 6 = 12.
CHAT3 = [
    {"role": "system", "content": "Sys"},
    {"role": "user", "content": "Task"},
    {"role": "assistant", "reasoning_content": "alpha beta", "content": "A0"},
    {"role": "user", "content": "ok"},
    {"role": "assistant", "reasoning_content": "gamma delta epsilon", "content": "A1"},
    {"role": "user", "content": "ok"},
    {"role": "assistant", "reasoning_content": "zeta", "content": "A2"},
]


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    """Every test gets its own savings cache (the fake scorer needs no model cache)."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("ICLR_CACHE_DIR", str(folder))
    return folder


def savings_json(capsys, *args):
    code, out, err = run_cli(capsys, "savings", *args, "--model", "fake", "--json")
    assert code == 0, err
    return json.loads(out), err


def write(path, value):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value))
    return path


def write_lines(path, values):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(v) + "\n" for v in values))
    return path


def test_hand_computed_three_steps_delete_all(tmp_path, capsys):
    path = write(tmp_path / "chat3.json", CHAT3)
    report, _ = savings_json(capsys, str(path), "--variant", "delete-all")
    [s] = report["data"]
    # requests 0, 1, 2 carry P, P + step 0, P + steps 0-1: 12 + 32 + 54 = 98 proxy tokens.
    # delete-all empties each step's reasoning: request 1 saves step 0's 3 tokens, request 2
    # steps 0 and 1's 3 + 5: 11 in all (j <= k would give 20, j < k - 1 would give 3).
    assert (s["requests"], s["input_tokens"], s["reasoning_tokens_resent"], s["input_tokens_with_writeback"]) == (3, 98, 11, 87)
    assert s["token_source"] == "proxy" and s["cache_read_tokens"] is None
    assert report["summary"]["input_change_percent"] == pytest.approx(-100 * 11 / 98)


def test_table_says_static_estimate_and_each_rows_source(tmp_path, capsys):
    path = write(tmp_path / "chat3.json", CHAT3)
    code, out, err = run_cli(capsys, "savings", str(path), "--variant", "delete-all", "--model", "fake", "--quiet")
    assert code == 0 and err == ""  # the table is the result: stdout, even with --quiet
    assert "static estimate" in out.splitlines()[0]
    row = next(line for line in out.splitlines() if "chat3.json" in line)
    assert "98" in row and "87 (-11.2%)" in row and "proxy" in row
    assert "trajectory amplification" in out and "iclr replay" in out


# --- token sources -----------------------------------------------------------------------

def claude_line(kind, uuid, parent, day, message, **extra):
    return {"type": kind, "sessionId": "sess-1", "uuid": uuid, "parentUuid": parent, "timestamp": f"{day}T10:00:00Z", "message": message, **extra}


def claude_session(signature="", usages=((3, 1000, 0), (4, 200, 1000), (5, 300, 1300))):
    """Three assistant messages with usage (input, cache write, cache read); reasoning of four
    blocks each."""
    thinking = "one two\n\nthree four\n\nfive six\n\nseven eight"
    lines = [claude_line("user", "u0", None, "2025-05-01", {"role": "user", "content": "Fix the bug"})]
    for k, (inp, write_, read) in enumerate(usages):
        lines.append(claude_line("assistant", f"a{k}", f"u{k}", "2025-05-01", {
            "id": f"msg_{k}", "role": "assistant", "model": "claude-test",
            "content": [{"type": "thinking", "thinking": thinking, "signature": signature},
                        {"type": "tool_use", "id": f"t{k}", "name": "Bash", "input": {"command": "ls"}}],
            "usage": {"input_tokens": inp, "cache_creation_input_tokens": write_, "cache_read_input_tokens": read, "output_tokens": 9},
        }))
        lines.append(claude_line("user", f"u{k + 1}", f"a{k}", "2025-05-01",
                                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{k}", "content": "a.py b.py"}]}))
    return lines


def test_claude_code_message_usage_is_the_recorded_input(tmp_path, capsys):
    path = write_lines(tmp_path / "session.jsonl", claude_session())
    report, _ = savings_json(capsys, str(path), "--variant", "delete-all")
    [s] = report["data"]
    # input = input + cache creation + cache read of each message
    assert s["input_tokens"] == 1003 + 1204 + 1605
    assert s["cache_read_tokens"] == 2300
    # the recorded input grows by 201 and 401 for steps of a few dozen proxy tokens: no
    # tokenizer's ratio, so deletions stay proxy tokens (and the row says so)
    assert (s["token_source"], s["recorded_requests"], s["ratio_basis"], s["ratio"]) == ("recorded, deleted: proxy", 3, "unconverted", 1.0)
    assert s["ratio_rejected"] > 2
    assert s["model"] == "claude-test" and s["sealed"] == []
    # delete-all takes each step's 15 reasoning tokens (one two, three four, ... with their
    # spaces and blank lines, regex tokens): request 1 re-sends step 0's, request 2 steps 0 and 1's
    assert s["reasoning_tokens_resent"] == 45
    assert s["input_tokens_with_writeback"] == s["input_tokens"] - 45
    # step 0 ends at 1204 recorded tokens (request 1's input), inside request 2's 1300-token
    # cache read; step 1 ends at 1605, outside it: only step 0's 15 come off a cache read
    assert s["cache_read_tokens_with_writeback"] == 2300 - 15


def test_claude_code_system_prompt_not_in_the_file_never_scales_reasoning(tmp_path, capsys):
    # Claude Code's usage counts its system prompt and tool schemas (~14k tokens), which the
    # session file does not hold. Each request here records 14,000 tokens more than the file's
    # prompt, and the input then grows by about 1.2 recorded tokens per proxy token of the
    # steps added. Reasoning re-sent is the 15 proxy tokens of each earlier step's reasoning
    # (0 + 15 + 30 = 45) times the growth ratio; the old whole-prompt ratio made it 45 times
    # ~14,000 / (the prompt's proxy tokens).
    from iclr_cli.context import render_part
    from iclr_cli.scoring.fake import RegexTokenizer

    probe = write_lines(tmp_path / "probe.jsonl", claude_session())
    _, doc = load_file(str(probe))
    [traj] = doc.trajectories
    count = RegexTokenizer().token_spans
    steps = [sum(len(count(render_part(p))) for p in step.parts) for step in traj.steps]
    grown = [round(1.2 * steps[0]), round(1.2 * steps[1])]
    inputs = [14000, 14000 + grown[0], 14000 + grown[0] + grown[1]]
    ratio = sum(grown) / (steps[0] + steps[1])
    assert 1.15 < ratio < 1.25
    path = write_lines(tmp_path / "session.jsonl", claude_session(usages=[(i, 0, 0) for i in inputs]))
    report, _ = savings_json(capsys, str(path), "--variant", "delete-all")
    [s] = report["data"]
    assert (s["ratio_basis"], s["token_source"]) == ("growth", "recorded")
    assert s["ratio"] == pytest.approx(ratio)
    assert s["reasoning_tokens_resent"] == round(45 * ratio)
    assert s["input_tokens_with_writeback"] == round(sum(inputs) - 45 * ratio)


def test_signed_thinking_is_sealed_not_saved(tmp_path, capsys):
    path = write_lines(tmp_path / "session.jsonl", claude_session(signature="c2lnbmF0dXJl"))
    report, err = savings_json(capsys, str(path), "--variant", "delete-all")
    [s] = report["data"]
    assert s["sealed"] == ["anthropic"] and s["sealed_tokens"] > 0
    assert s["input_tokens_with_writeback"] == s["input_tokens"]
    # the rule of the provider table (iclr_cli.providers), with the provider's docs
    rule = report["sealed_rules"]["anthropic"]
    assert "signature" in rule and "https://platform.claude.com/docs" in rule


def codex_lines():
    def item(payload):
        return {"timestamp": "2025-09-25T02:12:23Z", "type": "response_item", "payload": payload}

    def count(total, last):
        return {"timestamp": "2025-09-25T02:12:24Z", "type": "event_msg", "payload": {"type": "token_count", "info": {
            "total_token_usage": {"input_tokens": total}, "last_token_usage": {"input_tokens": last, "cached_input_tokens": last // 2, "output_tokens": 7}}}}

    reasoning = {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Look first.\n\nThen act."}]}
    return [
        {"timestamp": "2025-09-25T02:12:23Z", "type": "session_meta", "payload": {"id": "codex-1"}},
        item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Do it"}]}),
        count(1000, 1000),  # older CLIs: the request's count before its answer's items
        item(reasoning),
        item({"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"}),
        item({"type": "function_call_output", "call_id": "c1", "output": "done"}),
        item(reasoning),
        item({"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c2"}),
        count(2400, 1400),  # newer CLIs: after its answer's items
        count(2400, 1400),  # a repeat: not a request
        item({"type": "function_call_output", "call_id": "c2", "output": "done"}),
    ]


def test_codex_token_count_events_map_to_their_steps_in_either_order(tmp_path):
    path = write_lines(tmp_path / "rollout.jsonl", codex_lines())
    _, doc = load_file(str(path))
    [traj] = doc.trajectories
    assert [(r.step, r.usage.input_tokens, r.usage.cache_read_tokens) for r in traj.requests] == [(0, 1000, 500), (1, 1400, 700)]
    assert {r.usage.source for r in traj.requests} == {"token_count"}


def openhands_events():
    def action(eid, rid, thought, usage, metrics=None):
        event = {"id": eid, "timestamp": "2025-01-20T20:29:35", "source": "agent", "action": "run",
                 "args": {"command": "ls", "thought": thought},
                 "tool_call_metadata": {"function_name": "execute_bash", "tool_call_id": f"call{eid}", "model_response": {
                     "id": rid, "choices": [{"message": {"role": "assistant", "content": thought, "tool_calls": [
                         {"id": f"call{eid}", "type": "function", "function": {"name": "execute_bash", "arguments": "{\"command\": \"ls\"}"}}]}}],
                     "usage": usage}}}
        if metrics:
            event["llm_metrics"] = {"accumulated_token_usage": {}, "token_usages": metrics}
        return event

    def observation(eid, cause):
        return {"id": eid, "timestamp": "2025-01-20T20:29:36", "source": "agent", "observation": "run", "cause": cause, "content": "a.py", "extras": {}}

    usage = {"prompt_tokens": 500, "completion_tokens": 9, "prompt_tokens_details": {"cached_tokens": 100}}
    return [
        {"id": 0, "timestamp": "2025-01-20T20:29:30", "source": "user", "action": "message", "args": {"content": "Do it"}},
        action(1, "r1", "First look.\n\nThen list.", usage,
               metrics=[{"prompt_tokens": 777, "completion_tokens": 9, "cache_read_tokens": 300, "cache_write_tokens": 0, "response_id": "r1"}]),
        observation(2, 1),
        action(3, "r2", "Now read.\n\nThen edit.", {"prompt_tokens": 900, "completion_tokens": 9, "cache_read_input_tokens": 700}),
        observation(4, 3),
    ]


def test_openhands_llm_metrics_then_model_response_usage(tmp_path):
    path = write(tmp_path / "events.json", openhands_events())
    _, doc = load_file(str(path))
    [traj] = doc.trajectories
    got = [(r.step, r.usage.input_tokens, r.usage.cache_read_tokens, r.usage.source) for r in traj.requests]
    assert got == [(0, 777, 300, "llm_metrics"), (1, 900, 700, "model_response.usage")]


def test_openai_traffic_log_line_is_the_one_request_it_logged(tmp_path, capsys):
    messages = CHAT3[:6]
    line = {"request": {"model": "deepseek-r1", "messages": messages},
            "response": {"choices": [{"message": CHAT3[6]}], "usage": {"prompt_tokens": 162, "completion_tokens": 20, "prompt_cache_hit_tokens": 64}}}
    path = write_lines(tmp_path / "exchanges.jsonl", [line])
    report, _ = savings_json(capsys, str(path), "--variant", "delete-all")
    [s] = report["data"]
    # one request (the answer is step 2): no growth between two recorded requests, so no
    # ratio; steps 0 and 1 lose their 3 + 5 proxy tokens, not scaled by the whole prompt's
    # 162 recorded / 54 proxy tokens (it may hold text the log does not)
    assert (s["requests"], s["input_tokens"], s["cache_read_tokens"]) == (1, 162, 64)
    assert (s["ratio"], s["ratio_basis"]) == (1.0, "unconverted")
    assert s["input_tokens_with_writeback"] == 162 - 8


def test_openai_responses_request_response_pair(tmp_path):
    pair = {"request": {"model": "gpt-5", "instructions": "Be brief", "input": [
                {"role": "user", "content": "Fix"},
                {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Look.\n\nThen act."}]},
                {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "shell", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "ok"}]},
            "response": {"object": "response", "output": [
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Fixed"}]}],
                "usage": {"input_tokens": 900, "input_tokens_details": {"cached_tokens": 512}, "output_tokens": 30}}}
    _, doc = load_file(str(write_lines(tmp_path / "responses.jsonl", [pair])))
    [traj] = doc.trajectories
    assert [(r.step, r.usage.input_tokens, r.usage.cache_read_tokens) for r in traj.requests] == [(1, 900, 512)]


def test_anthropic_messages_with_usage(tmp_path):
    messages = [{"role": "user", "content": "Hi"},
                {"role": "assistant", "content": [{"type": "thinking", "thinking": "a\n\nb", "signature": ""}, {"type": "text", "text": "Yes"}],
                 "usage": {"input_tokens": 10, "cache_read_input_tokens": 90, "output_tokens": 3}},
                {"role": "user", "content": "More"},
                {"role": "assistant", "content": [{"type": "text", "text": "Done"}]}]
    _, doc = load_file(str(write(tmp_path / "anthropic.json", messages)), "anthropic")
    [traj] = doc.trajectories
    assert [(r.step, r.usage and r.usage.input_tokens) for r in traj.requests] == [(0, 100), (1, None)]


def replay_run(root, variant="none"):
    run = root / "runs" / "task-a" / variant / "seed0"
    doc = {"messages": CHAT3, "tools": [], "meta": {"task": "task-a", "variant": variant, "seed": 0}}
    write(run / "generated.json", doc)
    write(run / "trajectory.json", doc)
    write_lines(run / "requests.jsonl", [{"step": k, "input_tokens": n, "output_tokens": 5, "cache_read_tokens": None} for k, n in enumerate((24, 64, 108))])
    write_lines(run / "block_scores.jsonl", [])
    return run


def test_replay_run_reads_generated_with_its_request_log_once(tmp_path, capsys):
    replay_run(tmp_path / "out")
    report, err = savings_json(capsys, str(tmp_path / "out"), "--variant", "delete-all")
    [s] = report["data"]
    assert s["file"].endswith("generated.json")
    # recorded 24, 64, 108 against proxy 12, 32, 54: growth (40 + 44) / (20 + 22) = 2
    assert (s["input_tokens"], s["token_source"], s["ratio"]) == (196, "recorded", 2.0)
    assert s["input_tokens_with_writeback"] == 196 - 2 * 11
    skipped = {(k["file"].rsplit("/", 1)[1], k["reason"].split(":")[0]) for k in report["skipped"]}
    assert skipped == {("trajectory.json", "replay run"), ("requests.jsonl", "replay run"), ("block_scores.jsonl", "replay run")}


def test_replay_of_a_compressing_variant_falls_back_to_the_proxy(tmp_path, capsys):
    replay_run(tmp_path / "out", variant="iclr")
    report, _ = savings_json(capsys, str(tmp_path / "out"), "--variant", "delete-all")
    [s] = report["data"]
    assert s["token_source"] == "proxy" and "variant iclr" in s["note"]


# --- folders, unknown files, dates, cache, Ctrl-C -------------------------------------------

def test_folder_skips_unknown_files_with_one_line(tmp_path, capsys):
    write(tmp_path / "a" / "chat3.json", CHAT3)
    (tmp_path / "a" / "notes.md").write_text("# not a session\n")
    (tmp_path / "a" / "b").mkdir()
    (tmp_path / "a" / "b" / "empty.json").write_text("")
    (tmp_path / "a" / "b" / "broken.jsonl").write_text('{"role": "user", "content": "x"\n')
    code, out, err = run_cli(capsys, "savings", str(tmp_path / "a"), "--variant", "delete-all", "--model", "fake")
    assert code == 0
    lines = [line for line in out.splitlines() if line.startswith("skipped")]
    assert len(lines) == 1 and lines[0].startswith("skipped 3 files not read as a session")
    report, _ = savings_json(capsys, str(tmp_path / "a"), "--variant", "delete-all")
    assert report["files"] == {"candidates": 4, "read": 0, "cached": 1, "filtered": 0, "filtered_sessions": 0, "skipped": 3}
    reasons = {k["file"].rsplit("/", 1)[1]: k["reason"] for k in report["skipped"]}
    assert reasons["notes.md"].startswith("not JSON or JSONL: line 1 is text")
    assert reasons["empty.json"] == "file is empty"
    assert "\n" not in "".join(reasons.values())


def test_a_file_named_explicitly_that_no_format_reads_is_an_input_error(tmp_path, capsys):
    path = tmp_path / "notes.md"
    path.write_text("# not a session\n")
    code, _, err = run_cli(capsys, "savings", str(path), "--model", "fake")
    assert code == 2 and "notes.md" in err
    code, _, err = run_cli(capsys, "savings", str(tmp_path / "missing"), "--model", "fake")
    assert code == 2 and "no such file or folder" in err
    (tmp_path / "empty").mkdir()  # an empty folder is not an estimate of nothing, as for score and prune
    code, out, err = run_cli(capsys, "savings", str(tmp_path / "empty"), "--model", "fake")
    assert code == 2 and f"no files to read in {tmp_path / 'empty'}" in err and out == ""


def test_since_and_until_filter_on_the_last_activity(tmp_path, capsys):
    old, new = claude_session(), claude_session()
    for line in new:
        line["timestamp"] = line["timestamp"].replace("2025-05-01", "2025-06-10")
        line["sessionId"] = "sess-2"
    write_lines(tmp_path / "s" / "old.jsonl", old)
    write_lines(tmp_path / "s" / "new.jsonl", new)
    report, _ = savings_json(capsys, str(tmp_path / "s"), "--variant", "delete-all", "--since", "20250601")
    assert [s["session"] for s in report["data"]] == ["sess-2"] and report["files"]["filtered"] == 1
    assert report["data"][0]["last_activity"].startswith("2025-06-10")
    report, _ = savings_json(capsys, str(tmp_path / "s"), "--variant", "delete-all", "--until", "2025-05-31")
    assert [s["session"] for s in report["data"]] == ["sess-1"]
    code, _, err = run_cli(capsys, "savings", str(tmp_path / "s"), "--since", "June", "--model", "fake")
    assert code == 2 and "YYYYMMDD" in err


def test_second_run_takes_every_session_from_the_cache(tmp_path, capsys, monkeypatch):
    write(tmp_path / "f" / "chat3.json", CHAT3)
    write_lines(tmp_path / "f" / "session.jsonl", claude_session())
    first, _ = savings_json(capsys, str(tmp_path / "f"))
    assert (first["files"]["read"], first["files"]["cached"]) == (2, 0)

    import iclr_cli.savings.run as run

    def no_scoring(*_a, **_k):
        raise AssertionError("a cached file was scored again")

    monkeypatch.setattr(run, "compress_trajectories", no_scoring)
    second, _ = savings_json(capsys, str(tmp_path / "f"))
    assert (second["files"]["read"], second["files"]["cached"]) == (0, 2)
    assert second["data"] == first["data"] and second["summary"] == first["summary"]
    # the first run estimated the upper bound (delete-all) as well: served, the same figures
    third, _ = savings_json(capsys, str(tmp_path / "f"), "--variant", "delete-all")
    assert (third["files"]["read"], third["files"]["cached"]) == (0, 2)
    assert {k: third["summary"][k] for k in ("input_tokens", "input_tokens_with_writeback", "sealed_tokens")} == \
        {k: first["upper_bound"][k] for k in ("input_tokens", "input_tokens_with_writeback", "sealed_tokens")}
    # another variant is another key: it is estimated, not served
    monkeypatch.undo()
    monkeypatch.setenv("ICLR_CACHE_DIR", str(tmp_path / "cache"))
    third, _ = savings_json(capsys, str(tmp_path / "f"), "--variant", "random-10")
    assert (third["files"]["read"], third["files"]["cached"]) == (2, 0)
    fourth, _ = savings_json(capsys, str(tmp_path / "f"), "--no-cache")
    assert (fourth["files"]["read"], fourth["files"]["cached"]) == (2, 0)


def test_changed_content_is_estimated_again(tmp_path, capsys):
    path = write(tmp_path / "chat3.json", CHAT3)
    savings_json(capsys, str(path), "--variant", "delete-all")
    write(path, [*CHAT3, {"role": "user", "content": "more"}])
    report, _ = savings_json(capsys, str(path), "--variant", "delete-all")
    assert (report["files"]["read"], report["files"]["cached"]) == (1, 0)


def test_ctrl_c_prints_the_table_so_far_and_exits_130(tmp_path, capsys, monkeypatch):
    import iclr_cli.savings.run as run

    for i in range(3):
        chat = [dict(m) for m in CHAT3]
        chat[1]["content"] = f"Task {i}"
        chat[2]["reasoning_content"] = "alpha\n\nbeta"  # two blocks: step 0 is scored
        write(tmp_path / "f" / f"chat{i}.json", chat)
    monkeypatch.setattr(run, "BATCH_TRAJECTORIES", 1)  # one file per batch
    real = run.compress_trajectories
    calls = []

    def interrupt_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(run, "compress_trajectories", interrupt_second)
    code, out, err = run_cli(capsys, "savings", str(tmp_path / "f"), "--variant", "delete-all", "--model", "fake")
    assert code == 130
    assert "interrupted: 1 of 3 files" in out
    assert "chat0.json" in out and "chat1.json" not in out
    assert err.rstrip().splitlines()[-1].startswith("iclr: interrupted after 1 of 3 files")
    # the finished file was cached: the same command goes on from there
    calls.clear()
    monkeypatch.setattr(run, "compress_trajectories", real)
    report, _ = savings_json(capsys, str(tmp_path / "f"), "--variant", "delete-all")
    assert (report["files"]["cached"], report["files"]["read"]) == (1, 2)


def test_json_schema(tmp_path, capsys):
    write(tmp_path / "f" / "chat3.json", CHAT3)
    write_lines(tmp_path / "f" / "session.jsonl", claude_session())
    report, _ = savings_json(capsys, str(tmp_path / "f"), "--variant", "delete-all")
    assert set(report) == {"type", "estimate", "variant", "ratio", "complete", "data", "summary", "files", "skipped", "unfinished", "sealed_rules",
                           "price_source", "prices_unavailable", "reasoning", "block_notes"}
    assert (report["type"], report["estimate"], report["variant"], report["complete"]) == ("savings", "static", "delete-all", True)
    ints = {"requests", "recorded_requests", "input_tokens", "reasoning_tokens_resent", "input_tokens_with_writeback", "sealed_tokens"}
    maybe_int = {"cache_read_tokens", "cache_read_tokens_with_writeback"}
    maybe_float = {"input_change_percent", "cache_read_change_percent"}
    for record in report["data"]:
        assert set(record) == ints | maybe_int | maybe_float | {
            "session", "file", "format", "model", "sealed", "token_source", "ratio", "ratio_basis", "ratio_rejected", "proxy_tokenizer",
            "first_activity", "last_activity", "activity_from", "note", "cost_usd", "cost_usd_with_writeback", "cost_saved_usd",
            "priced_requests", "unpriced_requests", "price_models", "unknown_models", "thinking_tokens_recorded", "subagents",
            "parent_session_file", "title", "steps_with_reasoning", "one_block_steps", "compressed_steps"}
        assert all(isinstance(record[k], int) for k in ints)
        assert all(record[k] is None or isinstance(record[k], int) for k in maybe_int)
        assert all(record[k] is None or isinstance(record[k], float) for k in maybe_float)
        assert record["proxy_tokenizer"] == "regex-words"
    summary = report["summary"]
    assert summary["sessions"] == 2
    assert summary["input_tokens"] == sum(r["input_tokens"] for r in report["data"])
    assert summary["cache_read_tokens"] == 2300  # only the Claude Code session records one
    assert report["block_notes"] == []  # no step already compressed; delete-all ranks no blocks, so no one-block hint
    orjson.dumps(report)  # plain JSON types only


def test_variants_are_checked(tmp_path, capsys):
    path = write(tmp_path / "chat3.json", CHAT3)
    code, _, err = run_cli(capsys, "savings", str(path), "--variant", "sliding-window-3", "--model", "fake")
    assert code == 2 and "replay" in err
    none, _ = savings_json(capsys, str(path), "--variant", "none")
    assert none["summary"]["input_tokens_with_writeback"] == none["summary"]["input_tokens"]


def test_prune_summary_has_the_static_resent_row(tmp_path, capsys):
    path = write(tmp_path / "chat3.json", CHAT3)
    code, _, err = run_cli(capsys, "prune", str(path), "--variant", "delete-all", "--model", "fake", "-o", str(tmp_path / "out.json"))
    assert code == 0
    row = next(line for line in err.splitlines() if "input tokens re-sent, static" in line)
    assert "98 -> 87 (-11.2%)" in row


def test_prune_summary_names_sealed_reasoning(tmp_path, capsys):
    path = write_lines(tmp_path / "session.jsonl", claude_session(signature="c2lnbmF0dXJl"))
    code, _, err = run_cli(capsys, "prune", str(path), "--variant", "delete-all", "--model", "fake", "-o", str(tmp_path / "out.jsonl"))
    assert code == 0
    # signed thinking is left sealed before any variant runs (formats/sealing.py): nothing of it is
    # re-sent less, all of it is sealed as 'iclr savings' counts it, and the summary says how
    # many parts were left sealed
    report, _ = savings_json(capsys, str(path), "--variant", "delete-all")
    [s] = report["data"]
    assert s["sealed_tokens"] == s["reasoning_tokens_resent"] > 0
    assert summary_value(err, "input tokens re-sent, static") == \
        f"{s['input_tokens']:,} -> {s['input_tokens']:,} (0%); sealed reasoning not counted: {s['sealed_tokens']:,}"
    assert summary_value(err, "reasoning parts left sealed (provider rule)") == "3 (anthropic signed 3)"
    code, _, err = run_cli(capsys, "prune", str(path), "--variant", "delete-all", "--model", "fake", "--signed-thinking", "edit", "-o", str(tmp_path / "out.jsonl"))
    # edited on request: the file now holds the emptied thinking, so the static estimate takes
    # it off (nothing is left sealed to count apart)
    row = summary_value(err, "input tokens re-sent, static")
    assert code == 0 and row == "3,812 -> 3,767 (-1.2%)"


def test_report_html_of_a_tiny_session_is_small_self_contained_and_holds_its_content(tmp_path, capsys):
    # plotly.js inlined made this page 4.8 MB; drawn as inline SVG its size follows the content
    pytest.importorskip("plotly")
    path = write(tmp_path / "chat3.json", CHAT3)
    page = tmp_path / "report.html"
    code, _, err = run_cli(capsys, "report", str(path), "--variant", "delete-all", "--model", "fake", "--html", str(page))
    assert code == 0, err
    text = page.read_text()
    assert page.stat().st_size < 30_000
    # opens offline: nothing to run, nothing fetched (no src/href, no url() in styles)
    assert "<script" not in text and not re.search(r"\b(src|href)\s*=|url\(|@import", text)
    # the content: the savings row, and one point per request for both lines with its value
    assert "<tr><td>chat3.json</td><td>3</td><td>98</td><td>11</td><td>87 (-11.2%)</td>" in text
    svg = re.search(r'<div id="plot-savings" class="plot">(<svg.*?</svg>)</div>', text).group(1)
    tips = re.findall(r"<title>([^<]+)</title></circle>", svg)
    assert [t.split(" ", 1)[1].split(")")[0] + ")" for t in tips] == ["as recorded: (1, 12)", "as recorded: (2, 32)", "as recorded: (3, 54)",
                                                                      "with write-back: (1, 12)", "with write-back: (2, 29)", "with write-back: (3, 46)"]


def test_report_html_for_a_file_plots_input_per_request_recorded_and_with_writeback(tmp_path, capsys):
    pytest.importorskip("plotly")
    path = write(tmp_path / "chat3.json", CHAT3)
    page = tmp_path / "report.html"
    code, out, err = run_cli(capsys, "report", str(path), "--variant", "delete-all", "--model", "fake", "--html", str(page))
    assert code == 0, err
    assert "87 (-11.2%)" in out  # the savings table on stdout
    text = page.read_text()
    assert 'id="section-plot-savings"' in text and "static estimate" in text

    from iclr_cli.compress import Settings
    from iclr_cli.pipeline import ScorerConfig
    from iclr_cli.policies import parse_variant
    from iclr_cli.render.report_html import savings_figures
    from iclr_cli.savings.cache import SavingsCache
    from iclr_cli.savings.run import Options, SavingsRun

    run = SavingsRun(Options(Settings(parse_variant("delete-all"), score_all=False), ScorerConfig(model="fake")), SavingsCache(None))
    run.run(run.discover([str(path)]))
    [(div, _, fig)] = savings_figures(run.sessions)
    recorded, after = fig.data
    assert div == "plot-savings"
    assert list(recorded.y) == [12, 32, 54] and list(after.y) == [12, 29, 46]
    assert recorded.name.endswith("as recorded") and after.line.dash == "dash"


@pytest.mark.parametrize(("rows", "calls"), [(None, [3]), (1, [1, 1, 1]), (2, [2, 1])])
def test_files_are_batched_as_wide_as_the_scorer_forwards(tmp_path, capsys, monkeypatch, rows, calls):
    import iclr_cli.savings.run as run
    from iclr_cli.scoring.fake import FakeScorer

    for i in range(3):
        chat = [dict(m) for m in CHAT3]
        chat[1]["content"] = f"Task {i}"
        chat[2]["reasoning_content"] = "alpha\n\nbeta"  # two blocks: step 0 is scored
        write(tmp_path / "f" / f"chat{i}.json", chat)

    def engines(variant, config):
        scorer = FakeScorer()
        if rows is not None:
            scorer.batch_size = rows  # a real scorer's rows per forward (1 on a CPU)
        return scorer, scorer.tokenizer

    seen = []
    real = run.compress_trajectories

    def spy(trajectories, settings, *args, **kwargs):
        if settings.variant.needs_scores:  # not the upper bound's (delete-all, no scorer)
            seen.append(len(trajectories))
        return real(trajectories, settings, *args, **kwargs)

    monkeypatch.setattr(run, "build_engines", engines)
    monkeypatch.setattr(run, "compress_trajectories", spy)
    report, _ = savings_json(capsys, str(tmp_path / "f"), "--no-cache")
    assert seen == calls
    assert len(report["data"]) == 3


def test_codex_total_token_usage_differences_when_last_token_usage_is_missing(tmp_path):
    # older CLIs log only the running sum: request 0 read 1000 tokens, request 1 the
    # 2500 - 1000 = 1500 the sum grew by; step 2's request logged no event: no usage
    def item(payload):
        return {"timestamp": "2025-09-25T02:12:23Z", "type": "response_item", "payload": payload}

    def total(n, cached):
        return {"timestamp": "2025-09-25T02:12:24Z", "type": "event_msg", "payload": {"type": "token_count", "info": {
            "total_token_usage": {"input_tokens": n, "cached_input_tokens": cached, "output_tokens": 7}}}}

    reasoning = item({"type": "reasoning", "summary": [{"type": "summary_text", "text": "Look first.\n\nThen act."}]})
    lines = [
        {"timestamp": "2025-09-25T02:12:23Z", "type": "session_meta", "payload": {"id": "s1"}},
        item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Do it"}]}),
        total(1000, 0), reasoning, item({"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"}),
        item({"type": "function_call_output", "call_id": "c1", "output": "done"}),
        total(2500, 900), total(2500, 900),  # the second is a repeat
        reasoning, item({"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c2"}),
        item({"type": "function_call_output", "call_id": "c2", "output": "done"}),
        reasoning, item({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}),
    ]
    path = write_lines(tmp_path / "rollout.jsonl", lines)
    _, doc = load_file(str(path))
    [traj] = doc.trajectories
    assert len(traj.steps) == 3
    got = [(r.step, r.usage and (r.usage.input_tokens, r.usage.cache_read_tokens)) for r in traj.requests]
    assert got == [(0, (1000, 0)), (1, (1500, 900)), (2, None)]
    assert traj.requests[1].usage.source == "token_count total_token_usage difference"


def test_codex_sample_with_sparse_token_counts_is_one_request_per_step(capsys):
    # the sample logs one token_count with only total_token_usage (4210 input) and one with
    # info null, for 4 steps: 4 requests, the first recorded
    report, _ = savings_json(capsys, "sample_trajectories/codex_rollout.jsonl", "--variant", "delete-all")
    [s] = report["data"]
    assert (s["requests"], s["recorded_requests"], s["token_source"]) == (4, 1, "recorded 1/4 + proxy, deleted: proxy")
    assert s["input_tokens"] > 4 * 4210 and s["reasoning_tokens_resent"] > 0


def test_litellm_spend_rows_are_one_recorded_request_each(capsys):
    # two rows, each one API call recording prompt_tokens 1000; row 2's history (row 1's
    # request and reply) is its own prompt, not a second request
    path = field_case("04-litellm-spend-logs.jsonl", "turn3")
    report, _ = savings_json(capsys, str(path), "--variant", "delete-all")
    got = [(s["requests"], s["recorded_requests"], s["input_tokens"], s["token_source"]) for s in report["data"]]
    assert got == [(1, 1, 1000, "recorded, deleted: proxy")] * 2
    # the file's dates come from the rows' startTime / endTime (not its modification time)
    assert {(s["first_activity"], s["last_activity"]) for s in report["data"]} == {("2026-05-02T09:01:00+00:00", "2026-05-02T09:02:05+00:00")}
    assert {s["activity_from"] for s in report["data"]} == {"content"}
    # row 1 re-sends nothing; row 2 re-sends row 1's reasoning, all of it deleted (deepseek: plain)
    assert report["data"][0]["reasoning_tokens_resent"] == 0
    row2 = report["data"][1]
    assert row2["reasoning_tokens_resent"] > 0 and row2["sealed_tokens"] == 0
    assert row2["input_tokens_with_writeback"] == 1000 - row2["reasoning_tokens_resent"]


def test_litellm_spend_sample_reads_cache_and_provider(capsys):
    report, _ = savings_json(capsys, "sample_trajectories/litellm_spend_logs.jsonl", "--variant", "delete-all")
    got = [(s["requests"], s["input_tokens"], s["cache_read_tokens"], s["sealed"]) for s in report["data"]]
    # prompt_tokens 1400 each; metadata.additional_usage_values.cache_read_input_tokens 1024;
    # custom_llm_provider anthropic: its signed thinking_blocks are Anthropic's, sealed
    assert got == [(1, 1400, 1024, ["anthropic"])] * 2
    assert report["data"][1]["sealed_tokens"] == report["data"][1]["reasoning_tokens_resent"] > 0


def test_openrouter_signed_entry_of_a_claude_model_is_sealed_alike_in_savings_and_prune(capsys, tmp_path):
    # anthropic/claude-* through OpenRouter: the signed reasoning.text entry is Anthropic's, so
    # the provider rule seals it (formats/sealing.py) in prune and in the estimate alike; with
    # --signed-thinking edit prune empties it and removes its signature
    path = field_case("02-openrouter-reasoning-details.json")
    report, _ = savings_json(capsys, str(path), "--variant", "delete-all")
    [s] = report["data"]
    assert s["sealed"] == ["anthropic", "openai"] and s["sealed_tokens"] > 0
    assert s["input_tokens"] == s["input_tokens_with_writeback"]
    code, _, err = run_cli(capsys, "prune", str(path), "--variant", "delete-all", "--model", "fake", "-o", str(tmp_path / "out.json"))
    assert code == 0
    assert summary_value(err, "input tokens re-sent, static") == \
        f"{s['input_tokens']:,} -> {s['input_tokens_with_writeback']:,} (0%); sealed reasoning not counted: {s['sealed_tokens']:,}"
    assert summary_value(err, "reasoning parts left sealed (provider rule)") == "2 (anthropic encrypted 1, anthropic signed 1)"
    assert (tmp_path / "out.json").read_bytes() == path.read_bytes()
    code, _, err = run_cli(capsys, "prune", str(path), "--variant", "delete-all", "--model", "fake", "--signed-thinking", "edit", "-o", str(tmp_path / "out.json"))
    assert code == 0
    entry = json.loads((tmp_path / "out.json").read_text())["messages"][2]["reasoning_details"][0]
    assert entry["text"] == "" and "signature" not in entry


def test_file_time_dates_are_marked(tmp_path, capsys):
    write(tmp_path / "chat3.json", CHAT3)
    code, out, _ = run_cli(capsys, "savings", str(tmp_path / "chat3.json"), "--variant", "delete-all", "--model", "fake", "--no-cache")
    assert code == 0
    assert "(file time)" in out and "modification time" in out
    code, out, _ = run_cli(capsys, "savings", "--help")
    assert "modification time" in " ".join(out.split())
