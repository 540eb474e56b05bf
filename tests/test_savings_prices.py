"""``iclr savings`` in dollars: list prices from genai-prices, cache reads and writes billed as
each provider bills them, pi's recorded usage, Claude Code sub-agents counted with their
session, recorded thinking tokens, and a run without the price package."""

import json
from datetime import datetime, timezone
import os
import sys

import pytest

from format_helpers import REALDATA, run_cli
from iclr_cli.inputs import load_file
from iclr_cli.formats.usage import anthropic_usage, openai_usage, pi_usage
from iclr_cli.savings.estimate import RequestEstimate
from iclr_cli.savings.prices import PriceBook, after_writeback

try:
    import genai_prices
except ImportError:  # the savings extra is not installed: the dollars are said to be unavailable
    genai_prices = None
needs_prices = pytest.mark.skipif(genai_prices is None, reason="genai-prices is not installed (pip install -e '.[savings]')")

# Anthropic's list prices of Claude Opus 4.6 per million tokens (platform.claude.com pricing):
# input $5, output $25, cache read $0.50 (0.1x), 5-minute cache write $6.25 (1.25x), 1-hour
# cache write $10 (2x).
OPUS = {"input": 5.0, "output": 25.0, "read": 0.5, "write_5m": 6.25, "write_1h": 10.0}


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ICLR_CACHE_DIR", str(tmp_path / "cache"))


def savings_json(capsys, *args):
    code, out, err = run_cli(capsys, "savings", *args, "--model", "fake", "--json")
    assert code == 0, err
    return json.loads(out), err


def real(*parts):
    path = REALDATA.joinpath(*parts)
    if not path.is_file():
        pytest.skip(f"real transcripts not available at {REALDATA}")
    return path


# --- the usage each provider records ------------------------------------------------------

def test_claude_code_usage_reads_the_1h_cache_writes_and_thinking_tokens():
    usage = anthropic_usage({"input_tokens": 3, "cache_creation_input_tokens": 13835, "cache_read_input_tokens": 11515,
                             "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 13835},
                             "output_tokens": 130, "output_tokens_details": {"thinking_tokens": 40}}, "message.usage")
    assert (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (3 + 13835 + 11515, 11515, 13835)
    assert (usage.cache_write_1h_tokens, usage.output_tokens, usage.reasoning_tokens) == (13835, 130, 40)


def test_openai_usage_keeps_cached_tokens_inside_the_input_and_reads_reasoning_tokens():
    chat = openai_usage({"prompt_tokens": 1000, "completion_tokens": 300, "prompt_tokens_details": {"cached_tokens": 800},
                         "completion_tokens_details": {"reasoning_tokens": 256}}, "usage")
    assert (chat.input_tokens, chat.cache_read_tokens, chat.output_tokens, chat.reasoning_tokens) == (1000, 800, 300, 256)
    codex = openai_usage({"input_tokens": 3587, "cached_input_tokens": 2560, "output_tokens": 229, "reasoning_output_tokens": 128}, "t")
    assert (codex.input_tokens, codex.cache_read_tokens, codex.reasoning_tokens) == (3587, 2560, 128)
    # newer Codex releases record the cache writes too (inside input_tokens, as the reads)
    newer = openai_usage({"input_tokens": 935040, "cached_input_tokens": 875306, "cache_write_input_tokens": 57610,
                          "output_tokens": 11150, "reasoning_output_tokens": 1141}, "t")
    assert (newer.input_tokens, newer.cache_read_tokens, newer.cache_write_tokens, newer.reasoning_tokens) == (935040, 875306, 57610, 1141)


@pytest.mark.parametrize("api, usage, expected", [
    # Anthropic: pi's input is Anthropic's uncached input_tokens
    ("anthropic-messages", {"input": 5, "output": 90, "cacheRead": 12000, "cacheWrite": 800, "totalTokens": 12895}, (12805, 12000, 800)),
    # OpenAI chat completions: pi stores prompt_tokens - cached_tokens as input
    ("openai-completions", {"input": 200, "output": 40, "cacheRead": 800, "cacheWrite": 0, "totalTokens": 1040}, (1000, 800, 0)),
    # Gemini API: pi stores promptTokenCount, which already holds the cached part
    ("google-generative-ai", {"input": 3300, "output": 58, "cacheRead": 2048, "cacheWrite": 0, "totalTokens": 3358}, (3300, 2048, 0)),
])
def test_pi_usage_is_the_whole_prompt_whatever_the_provider(api, usage, expected):
    got = pi_usage({**usage, "cost": {"total": 0.01}}, api, "message.usage")
    assert (got.input_tokens, got.cache_read_tokens, got.cache_write_tokens) == expected
    assert got.output_tokens == usage["output"]


def test_pi_usage_of_zeros_is_nothing_recorded():
    zeros = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0}
    assert pi_usage(zeros, "anthropic-messages", "u") is None and pi_usage({"output": 3}, "x", "u") is None


# --- prices ------------------------------------------------------------------------------------

@needs_prices
def test_a_real_claude_code_request_is_priced_with_its_1h_cache_writes(capsys):
    path = real("claude_code", "spotter_short.jsonl")  # one request: 3 uncached, 13,835 written for 1 h, 11,515 read, 13 out
    report, _ = savings_json(capsys, str(path), "--variant", "delete-all")
    [s] = report["data"]
    expected = (3 * OPUS["input"] + 13835 * OPUS["write_1h"] + 11515 * OPUS["read"] + 13 * OPUS["output"]) / 1e6
    assert (s["priced_requests"], s["unpriced_requests"], s["price_models"]) == (1, 0, ["claude-opus-4-6"])
    assert s["cost_usd"] == pytest.approx(expected, abs=1e-6) == pytest.approx(0.1444475, abs=1e-6)


def _request(**kw):
    base = dict(step=3, input=100_000.0, reasoning=0.0, saved=0.0, cache_read=80_000.0, cache_saved=0.0, sealed=0.0, recorded=True,
                cache_write=15_000.0, cache_write_1h=None, output=2_000.0, model="claude-opus-4-6", provider="anthropic")
    return RequestEstimate(**{**base, **kw})


def test_write_back_takes_the_saving_off_the_cache_read_then_the_writes_then_the_uncached_rest():
    # 100k prompt: 80k read, 15k written (5 min), 5k uncached; 12k saved, 4k of it inside the read
    after = after_writeback(_request(saved=12_000.0, cache_saved=4_000.0))
    assert after == {"input": 88_000.0, "cache_read": 76_000.0, "cache_write": 7_000.0, "cache_write_1h": 0.0}
    # more saved outside the read than was written: the writes go, then the uncached rest
    after = after_writeback(_request(saved=18_000.0, cache_saved=0.0))
    assert after == {"input": 82_000.0, "cache_read": 80_000.0, "cache_write": 0.0, "cache_write_1h": 0.0}
    # the 1-hour share of the writes is kept
    assert after_writeback(_request(saved=5_000.0, cache_write_1h=10_000.0))["cache_write_1h"] == pytest.approx(10_000 * 10 / 15)


@needs_prices
def test_dollars_before_and_after_match_anthropics_rates_by_hand():
    book = PriceBook.load()
    before, after, model = book.request(_request(saved=12_000.0, cache_saved=4_000.0), "claude-opus-4-6", "anthropic", None)
    by_hand = lambda read, write, plain: (read * OPUS["read"] + write * OPUS["write_5m"] + plain * OPUS["input"] + 2000 * OPUS["output"]) / 1e6
    assert model == "claude-opus-4-6"
    assert before == pytest.approx(by_hand(80_000, 15_000, 5_000))
    assert after == pytest.approx(by_hand(76_000, 7_000, 5_000))


@needs_prices
def test_a_litellm_style_model_name_is_found_without_its_provider_prefix():
    book = PriceBook.load()
    found = book.request(_request(model=None, provider=None, cache_write=None), "openai/gpt-5-mini", None, None)
    assert found is not None and found[2] == "gpt-5-mini"
    assert book.request(_request(), "no-such-model-xyz", None, None) is None


# --- pi ----------------------------------------------------------------------------------------

def pi_session(turns=6):
    """A pi session with DeepSeek-R1 (deepseek-reasoner over the chat-completions API): plain
    reasoning, a growing prompt and DeepSeek's automatic prefix cache. Recorded counts as pi
    writes them: ``input`` is the uncached part (prompt_tokens - prompt_cache_hit_tokens)."""
    lines = [{"type": "session", "version": 3, "id": "9c1d2e3f-0000-4000-8000-000000000001", "timestamp": "2026-03-02T09:00:00.000Z", "cwd": "/home/dev/api"},
             {"type": "model_change", "id": "m0", "parentId": None, "timestamp": "2026-03-02T09:00:01.000Z", "provider": "deepseek", "modelId": "deepseek-reasoner"},
             {"type": "message", "id": "u0", "parentId": "m0", "timestamp": "2026-03-02T09:00:02.000Z",
              "message": {"role": "user", "content": [{"type": "text", "text": "The /orders endpoint returns 500 when the cart is empty. Find the cause and fix it."}], "timestamp": 1772442002000}}]
    parent, prompt, cached = "u0", 2100, 0
    for k in range(turns):
        thinking = " ".join(f"Step {k} thought {i}: the handler reads cart.items[0] before checking the cart, so an empty cart raises IndexError." for i in range(8))
        usage_input = prompt - cached
        output = 400 + 30 * k
        lines.append({"type": "message", "id": f"a{k}", "parentId": parent, "timestamp": f"2026-03-02T09:{k + 1:02d}:00.000Z",
                      "message": {"role": "assistant", "content": [
                          {"type": "thinking", "thinking": thinking, "thinkingSignature": "reasoning_content"},
                          {"type": "toolCall", "id": f"call_{k}", "name": "bash", "arguments": {"command": f"grep -n items api/orders.py # {k}"}}],
                          "api": "openai-completions", "provider": "deepseek", "model": "deepseek-reasoner",
                          "usage": {"input": usage_input, "output": output, "cacheRead": cached, "cacheWrite": 0,
                                    "totalTokens": usage_input + output + cached, "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
                          "stopReason": "toolUse", "timestamp": 1772442060000 + 60000 * k}})
        lines.append({"type": "message", "id": f"r{k}", "parentId": f"a{k}", "timestamp": f"2026-03-02T09:{k + 1:02d}:30.000Z",
                      "message": {"role": "toolResult", "toolCallId": f"call_{k}", "toolName": "bash",
                                  "content": [{"type": "text", "text": f"api/orders.py:{40 + k}:    first = cart.items[0]"}], "isError": False,
                                  "timestamp": 1772442090000 + 60000 * k}})
        parent = f"r{k}"
        cached = prompt // 64 * 64  # DeepSeek caches whole 64-token units of the prefix it saw
        prompt += output + 60  # the answer and the tool result join the prompt
    return lines


@needs_prices
def test_pi_session_reads_the_usage_it_records_and_prices_it(tmp_path, capsys):
    lines = pi_session()
    path = tmp_path / "2026-03-02T09-00-00-000Z_9c1d2e3f.jsonl"
    path.write_text("".join(json.dumps(v) + "\n" for v in lines))
    report, _ = savings_json(capsys, str(path), "--variant", "delete-all")
    [s] = report["data"]
    usages = [v["message"]["usage"] for v in lines if v.get("message", {}).get("role") == "assistant"]
    assert s["token_source"] == "recorded" and s["requests"] == len(usages) == 6
    assert s["input_tokens"] == sum(u["input"] + u["cacheRead"] for u in usages)  # not the proxy count
    assert s["cache_read_tokens"] == sum(u["cacheRead"] for u in usages)  # the cache column is filled
    assert s["input_tokens_with_writeback"] < s["input_tokens"]
    # at the session's own time: DeepSeek's price depends on the hour (off-peak discount), so
    # rates "now" made this test pass or fail by the time of day it ran
    when = datetime(2026, 3, 2, 9, 1, tzinfo=timezone.utc)
    rates = genai_prices.calc_price(genai_prices.Usage(input_tokens=1), "deepseek-reasoner", provider_id="deepseek",
                                    genai_request_timestamp=when).model_price
    by_hand = sum(u["input"] * float(rates.input_mtok) + u["cacheRead"] * float(rates.cache_read_mtok) + u["output"] * float(rates.output_mtok)
                  for u in usages) / 1e6
    assert s["cost_usd"] == pytest.approx(by_hand, abs=1e-6) and s["priced_requests"] == 6 and s["price_models"] == ["deepseek-reasoner"]
    assert 0 < s["cost_saved_usd"] < s["cost_usd"]
    assert s["cost_usd_with_writeback"] == pytest.approx(s["cost_usd"] - s["cost_saved_usd"], abs=2e-6)  # each rounded to 1e-6
    assert report["price_source"].startswith(f"genai-prices {genai_prices.__version__}")


def test_an_aborted_pi_turn_that_recorded_usage_is_billed_but_is_no_step(tmp_path):

    lines = pi_session(turns=2)  # header, model change, user, a0, r0, a1, r1
    aborted = json.loads(json.dumps(lines[5]))  # a1 cancelled half-way, then asked again
    aborted["id"], aborted["message"]["stopReason"] = "x1", "aborted"
    lines[5]["parentId"] = "x1"
    lines.insert(5, aborted)
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(v) + "\n" for v in lines))
    traj = load_file(str(path), None)[1].trajectories[0]
    assert len(traj.steps) == 2
    assert [r.step for r in traj.requests] == [0, 1, 1]
    assert [r.model for r in traj.requests] == ["deepseek-reasoner"] * 3


# --- Claude Code sub-agents ------------------------------------------------------------------

@pytest.fixture
def project(tmp_path):
    """A Claude Code project folder laid out as Claude Code writes it, from the real session
    and its compaction sub-agent: <session>.jsonl and <session>/subagents/agent-*.jsonl."""
    main = real("claude_code", "spotter_258c7280_main_session_slice.jsonl")
    agent = real("claude_code", "spotter_258c7280_agent-acompact.jsonl")
    folder = tmp_path / "project"
    sid = "258c7280-ae70-4798-800f-63464d01a85d"
    (folder / sid / "subagents").mkdir(parents=True)
    os.symlink(main, folder / f"{sid}.jsonl")
    os.symlink(agent, folder / sid / "subagents" / "agent-acompact-fffbd0.jsonl")
    return folder, sid


@needs_prices
def test_subagent_transcripts_are_counted_with_their_session(project, capsys):
    folder, sid = project
    alone, _ = savings_json(capsys, str(folder / sid / "subagents" / "agent-acompact-fffbd0.jsonl"), "--variant", "delete-all")
    for given in (str(folder), str(folder / f"{sid}.jsonl")):  # the folder, or the session file named alone
        report, _ = savings_json(capsys, given, "--variant", "delete-all")
        [record] = report["data"]
        [sub] = record["subagents"]
        assert record["file"].endswith(f"{sid}.jsonl") and sub["file"].endswith("agent-acompact-fffbd0.jsonl")
        assert sub["input_tokens"] == alone["summary"]["input_tokens"] == 169_248  # its one request: 3 + 2,487 + 166,758
        assert record["requests"] == 103 + 1
        assert record["input_tokens"] == report["summary"]["input_tokens"] == 12_187_060 + 169_248
        assert record["cost_usd"] == pytest.approx(report["summary"]["cost_usd"])
        assert report["summary"]["sessions"] == 1 and report["summary"]["transcripts"] == 2
    code, out, _ = run_cli(capsys, "savings", str(folder), "--variant", "delete-all", "--model", "fake")
    assert code == 0
    assert f"{sid}.jsonl (+1 sub-agent)" in out and "1 sub-agent transcript (<session>/subagents/*.jsonl) counted with their session" in out


def test_a_subagent_without_its_session_is_shown_alone(project, capsys):
    folder, sid = project
    code, out, _ = run_cli(capsys, "savings", str(folder / sid), "--variant", "delete-all", "--model", "fake")
    assert code == 0 and f"agent-acompact-fffbd0.jsonl (sub-agent of {sid}.jsonl)" in out


def test_thinking_tokens_recorded_are_reported(tmp_path, capsys):
    usage = {"input_tokens": 10, "cache_read_input_tokens": 1000, "output_tokens": 100, "output_tokens_details": {"thinking_tokens": 40}}
    lines = [
        {"type": "user", "sessionId": "s", "uuid": "u1", "parentUuid": None, "timestamp": "2026-10-01T10:00:00Z",
         "message": {"role": "user", "content": "Go."}},
        {"type": "assistant", "sessionId": "s", "uuid": "a1", "parentUuid": "u1", "timestamp": "2026-10-01T10:00:05Z",
         "message": {"id": "m1", "role": "assistant", "model": "claude-opus-4-6", "usage": usage,
                     "content": [{"type": "thinking", "thinking": "Plan it.", "signature": ""}, {"type": "text", "text": "Done."}]}},
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(v) + "\n" for v in lines))
    report, _ = savings_json(capsys, str(path), "--variant", "delete-all")
    assert report["data"][0]["thinking_tokens_recorded"] == 40


def test_without_genai_prices_the_tokens_are_reported_and_the_dollars_said_unavailable(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "genai_prices", None)  # import genai_prices raises ImportError
    path = real("claude_code", "spotter_short.jsonl")
    report, _ = savings_json(capsys, str(path), "--variant", "delete-all")
    assert report["price_source"] is None and "genai-prices package is not installed" in report["prices_unavailable"]
    assert report["data"][0]["cost_usd"] is None and report["data"][0]["input_tokens"] == 25_353
    code, out, _ = run_cli(capsys, "savings", str(path), "--variant", "delete-all", "--model", "fake", "--no-cache")
    assert code == 0 and "cost: prices unavailable: the genai-prices package is not installed" in out
