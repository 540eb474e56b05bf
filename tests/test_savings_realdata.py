"""``iclr savings`` over every real file in ../shared/realdata (folder mode, delete-all, the fake
model's regex tokenizer): each file read with the usage its log recorded, checked against
counts taken from the raw files here, independently of the adapters."""

import json

import pytest

from format_helpers import REALDATA


@pytest.fixture(scope="module")
def data():
    """The JSON of one run over the whole folder (the library under the CLI, run once)."""
    if not REALDATA.is_dir():
        pytest.skip(f"real transcripts not available at {REALDATA}")
    from iclr_cli.compress import Settings
    from iclr_cli.pipeline import ScorerConfig
    from iclr_cli.policies import parse_variant
    from iclr_cli.render.savings_view import to_json
    from iclr_cli.savings.cache import SavingsCache
    from iclr_cli.savings.run import Options, SavingsRun

    run = SavingsRun(Options(Settings(parse_variant("delete-all"), score_all=False), ScorerConfig(model="fake")), SavingsCache(None))
    run.run(run.discover([str(REALDATA)]))
    return to_json(run)


def _by_file(data, name):
    return [s for s in data["data"] if s["file"].endswith(name)]


def test_every_real_file_is_read_and_only_sources_md_is_skipped(data):
    assert [k["file"].rsplit("/", 1)[1] for k in data["skipped"]] == ["SOURCES.md"]
    files = {s["file"] for s in data["data"]}
    on_disk = {str(p) for p in REALDATA.rglob("*") if p.is_file() and p.name != "SOURCES.md"}
    assert files == on_disk


def test_claude_code_usage_matches_the_raw_lines(data):
    for path in (REALDATA / "claude_code").iterdir():
        usage = {}  # message id -> the last usage written for it, main chain only
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        main = [v for v in lines if v.get("type") == "assistant" and not v.get("isSidechain")]
        for v in main or [v for v in lines if v.get("type") == "assistant"]:
            if "usage" in v["message"]:
                usage[v["message"]["id"]] = v["message"]["usage"]
        [s] = _by_file(data, path.name)
        expected = sum(u["input_tokens"] + u.get("cache_creation_input_tokens", 0) + u.get("cache_read_input_tokens", 0) for u in usage.values())
        assert (s["input_tokens"], s["requests"]) == (expected, len(usage)), path.name
        # a one-request file has no growth to find a ratio from: its deletions stay proxy tokens
        # (its recorded prompt holds Claude Code's system prompt, which the file does not)
        assert s["token_source"] == ("recorded" if s["ratio_basis"] == "growth" else "recorded, deleted: proxy"), path.name
        assert 0.5 <= s["ratio"] <= 2, path.name
        assert s["cache_read_tokens"] == sum(u.get("cache_read_input_tokens", 0) for u in usage.values())
    # all the thinking in these sessions is signed: delete-all saves nothing there, all of it is sealed
    [main_session] = _by_file(data, "spotter_258c7280_main_session_slice.jsonl")
    assert main_session["sealed"] == ["anthropic"] and main_session["sealed_tokens"] > 0
    assert main_session["input_tokens_with_writeback"] == main_session["input_tokens"]


def test_codex_token_counts_match_the_raw_events(data):
    [path] = (REALDATA / "codex_rollout").iterdir()
    inputs, last = [], None
    for line in path.read_text().splitlines():
        v = json.loads(line)
        info = v.get("payload", {}).get("info") if v.get("type") == "event_msg" and v["payload"].get("type") == "token_count" else None
        if info and info.get("total_token_usage") != last:
            last = info["total_token_usage"]
            inputs.append(info["last_token_usage"]["input_tokens"])
    [s] = _by_file(data, path.name)
    assert (s["requests"], s["input_tokens"], s["token_source"]) == (len(inputs), sum(inputs), "recorded")
    assert s["sealed"] == ["openai"]


def test_files_without_usage_count_with_the_proxy_and_save_under_delete_all(data):
    for name in ("gpt4_pydicom-1458.traj", "taubench_airline_gpt5_wiki_random.json", "github_issue.traj.json"):
        [s] = _by_file(data, name)
        assert s["token_source"] == "proxy" and s["ratio"] == 1.0
        assert 0 < s["reasoning_tokens_resent"] and s["input_tokens_with_writeback"] < s["input_tokens"]
    # each traffic-log line is the one request it logged, with the response's usage
    lines = [json.loads(x) for x in (REALDATA / "openai_chat_reasoning" / "openhands_deepseek-r1_reasoning_content_exchanges.jsonl").read_text().splitlines()]
    sessions = _by_file(data, "openhands_deepseek-r1_reasoning_content_exchanges.jsonl")
    assert [s["input_tokens"] for s in sessions] == [x["response"]["usage"]["prompt_tokens"] for x in lines]
