"""``POST /v1/messages`` (Anthropic Messages): the anthropic SDK, SSE relaying, sealed upstreams,
keys and errors."""

from __future__ import annotations

import threading

import httpx
import orjson
import pytest

from serve_fixtures import proxy, scripted_upstream
from wire_fixtures import SIGNATURE, anthropic_reply, text, thinking, tool_use

from iclr_cli.compress import Settings
from iclr_cli.policies import parse_variant
from iclr_cli.scoring.fake import FakeScorer
from iclr_cli.serve.batching import BatchingScorer
from iclr_cli.serve.messages import MessagesDialect
from iclr_cli.serve.state import ServeState
from iclr_cli.token_accounting import account, token_counter

pytest.importorskip("starlette")
anthropic = pytest.importorskip("anthropic")

REASONING = "Read the task.\n\nList the files.\n\nThe bug is in parse().\n\nRun the tests after."
SYSTEM = [{"type": "text", "text": "You are an agent.", "cache_control": {"type": "ephemeral"}}]
TOOLS = [{"name": "Bash", "description": "Run a command", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]
USER = {"role": "user", "content": "Fix the bug."}


def step_blocks(i: int, reasoning: str = REASONING) -> list[dict]:
    return [thinking(reasoning), tool_use(f"toolu_{i}", "Bash", {"command": f"ls {i}"})]


def result(i: int, marker: bool = False) -> dict:
    block = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"out {i}"}
    if marker:
        block["cache_control"] = {"type": "ephemeral"}
    return {"role": "user", "content": [block]}


def sdk(url: str, key: str = "sk-ant-client") -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url.removesuffix("/v1"), api_key=key, max_retries=0, timeout=30)


def stats(url: str) -> dict:
    return httpx.get(url.removesuffix("/v1") + "/stats").json()


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_anthropic_sdk_three_steps_compressed_once_with_stable_prefixes(streamed):
    script = [anthropic_reply(step_blocks(i), stream=streamed) for i in range(3)] + [anthropic_reply([text("Fixed.")], stream=streamed)]
    with scripted_upstream(script) as up, proxy(up.url) as (url, state):
        client, messages = sdk(url), [USER]
        for i in range(4):
            kw = dict(model="claude-x", max_tokens=1000, system=SYSTEM, tools=TOOLS, messages=messages)
            if streamed:
                with client.messages.stream(**kw) as stream:
                    out = stream.get_final_message()
            else:
                out = client.messages.create(**kw)
            blocks = [b.model_dump(exclude_none=True) for b in out.content]
            if i < 3:
                assert blocks[0] == thinking(REASONING)  # the client gets the reply unchanged
                messages = messages + [{"role": "assistant", "content": blocks}, result(i)]
        seen = stats(url)
    bodies = [orjson.loads(raw) for raw in up.raw]
    assert up.paths == ["/v1/messages"] * 4
    for before, after in zip(bodies, bodies[1:]):
        assert after["messages"][: len(before["messages"])] == before["messages"]
        assert after["system"] == SYSTEM and after["tools"] == TOOLS
    sent = [m["content"][0] for m in bodies[-1]["messages"] if m["role"] == "assistant"]
    assert all(b["thinking"].count("[SKIP]") == 3 and b["signature"] == SIGNATURE for b in sent)
    assert [m["content"][1] for m in bodies[-1]["messages"] if m["role"] == "assistant"] == [step_blocks(i)[1] for i in range(3)]
    total = seen["total"]
    tokens = account(token_counter(state.tokenizer), [(REASONING, b["thinking"]) for b in sent])
    assert total["steps_compressed"] == 3 and total["requests"] == 4 and len(seen["conversations"]) == 1
    assert (total["reasoning_tokens_generated"], total["reasoning_tokens_removed"]) == (tokens.generated, tokens.deleted) and tokens.deleted > 0
    # Anthropic reports cache reads apart from input_tokens: input counts both, as replay does
    assert total["input_tokens"] == 4 * 140 and total["cache_read_tokens"] == 4 * 40 and total["output_tokens"] == 4 * 30


def test_sse_events_are_relayed_one_by_one():
    held = anthropic_reply(step_blocks(0), stream=True)
    held.hold = True
    with scripted_upstream([held]) as up, proxy(up.url) as (url, _):
        body = {"model": "claude-x", "max_tokens": 100, "messages": [USER], "stream": True}
        with httpx.stream("POST", url + "/messages?beta=true", json=body, headers={"anthropic-version": "2023-06-01"}, timeout=20) as resp:
            assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
            lines = resp.iter_lines()
            first = [next(lines), next(lines)]
            assert not held.finished.is_set()  # the upstream holds the rest: this event came on its own
            held.release.set()
            rest = [line for line in lines if line]
    assert first[0] == "event: message_start" and orjson.loads(first[1].removeprefix("data: ")) == held.events[0]
    names = [line.removeprefix("event: ") for line in [first[0], *rest] if line.startswith("event: ")]
    assert names == [e["type"] for e in held.events]
    assert {"thinking_delta", "signature_delta", "input_json_delta"} <= {e["delta"]["type"] for e in held.events if e["type"] == "content_block_delta"}
    assert up.paths == ["/v1/messages?beta=true"]


def test_keys_and_anthropic_headers():
    def post(url: str, **headers) -> None:
        httpx.post(url + "/messages", json={"model": "m", "max_tokens": 5, "messages": [USER]}, headers=headers, timeout=20)

    beta = {"anthropic-version": "2023-06-01", "anthropic-beta": "interleaved-thinking-2025-05-14"}
    with scripted_upstream([anthropic_reply([text("hi")])] * 4) as up, proxy(up.url) as (url, _):
        sdk(url, key="sk-ant-from-sdk").messages.create(model="claude-x", max_tokens=10, messages=[USER], extra_headers=beta)
        post(url, **{"x-api-key": "sk-ant-client"})
        post(url, authorization="Bearer sk-bearer")
    # the SDK's own key header (whichever it uses), the versions and betas: as sent
    assert "sk-ant-from-sdk" in (up.headers[0].get("x-api-key", "") + up.headers[0].get("authorization", ""))
    assert up.headers[0]["anthropic-version"] == "2023-06-01" and up.headers[0]["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    assert up.headers[1]["x-api-key"] == "sk-ant-client" and up.headers[2]["authorization"] == "Bearer sk-bearer"
    with scripted_upstream([anthropic_reply([text("hi")])] * 4) as up, proxy(up.url, api_key="sk-from-proxy") as (url, _):
        post(url, **{"x-api-key": "sk-ant-client"})
        post(url, authorization="Bearer sk-bearer")
        post(url)
    # --api-key-env replaces the key in the header the client used; none sent: x-api-key
    assert up.headers[0]["x-api-key"] == "sk-from-proxy" and "authorization" not in up.headers[0]
    assert up.headers[1]["authorization"] == "Bearer sk-from-proxy" and "x-api-key" not in up.headers[1]
    assert up.headers[2]["x-api-key"] == "sk-from-proxy"
    assert "sk-ant-client" not in repr(up.headers) and "sk-bearer" not in repr(up.headers)


def test_errors_in_anthropic_shape_and_count_tokens_passed_through():
    with scripted_upstream([anthropic_reply([text("x")])]) as up, proxy(up.url, max_body_bytes=3000) as (url, _):
        with pytest.raises(anthropic.APIStatusError) as big:
            sdk(url).messages.create(model="claude-x", max_tokens=10, messages=[{"role": "user", "content": "x" * 5000}])
        counted = httpx.post(url + "/messages/count_tokens", json={"model": "m", "messages": [USER]}, timeout=20)
    assert big.value.status_code == 413 and big.value.body == {"type": "error", "error": {"type": "request_too_large", "message": "request body over 3000 bytes (iclr serve --max-body-mb)"}}
    assert counted.status_code == 200 and up.paths == ["/v1/messages/count_tokens"]
    with proxy("http://127.0.0.1:9/v1") as (url, _):
        with pytest.raises(anthropic.APIStatusError) as down:
            sdk(url).messages.create(model="claude-x", max_tokens=10, messages=[USER])
    assert down.value.status_code == 502 and down.value.body["type"] == "error" and down.value.body["error"]["type"] == "api_error"


# -- the write-back without HTTP: sealed upstreams, redacted thinking, moved cache markers ----

def make_state() -> ServeState:
    scorer = FakeScorer()
    return ServeState(Settings(parse_variant("iclr")), BatchingScorer(scorer), scorer.tokenizer)


def send(state: ServeState, dialect: MessagesDialect, messages: list[dict]) -> dict:
    raw = orjson.dumps({"model": "m", "system": SYSTEM, "tools": TOOLS, "messages": messages})
    return orjson.loads(state.rewrite(orjson.loads(raw), raw, None, dialect).body)


def conversation(steps: int, *, marker_last: bool = False) -> list[dict]:
    out = [USER]
    for i in range(steps):
        out += [{"role": "assistant", "content": step_blocks(i)}, result(i, marker=marker_last and i == steps - 1)]
    return out


def test_moved_cache_markers_are_the_same_conversation_and_steps():
    state, dialect = make_state(), MessagesDialect()
    first = send(state, dialect, conversation(1, marker_last=True))
    second = send(state, dialect, conversation(2, marker_last=True))
    assert len(state.conversations()) == 1 and state.stats.total.steps_compressed == 2  # step 0 not compressed again
    assert second["messages"][1] == first["messages"][1] and "[SKIP]" in first["messages"][1]["content"][0]["thinking"]
    assert second["messages"][2] == result(0) and first["messages"][2] == result(0, marker=True)  # markers as the client sent them


def test_sealed_upstream_never_edits_thinking_and_counts_it():
    state = make_state()
    redacted = {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}
    messages = [USER, {"role": "assistant", "content": [thinking(REASONING), redacted, tool_use("toolu_0", "Bash", {})]}, result(0)]
    sent = send(state, MessagesDialect(sealed=True), messages)
    assert sent["messages"] == messages
    assert state.stats.total.sealed == {"thinking block signed for a sealed upstream (its signature is checked against the text)": 1, "redacted_thinking (encrypted data, no text)": 1}
    # on a plain upstream the same thinking is compressed; redacted_thinking still untouched
    plain = send(make_state(), MessagesDialect(), messages)
    assert "[SKIP]" in plain["messages"][1]["content"][0]["thinking"] and plain["messages"][1]["content"][1] == redacted


def test_drop_previous_turns_leaves_out_only_thinking_outside_the_tool_loop():
    dialect = MessagesDialect(sealed=True, drop_previous_turns=True)
    state = make_state()
    loop = conversation(2)
    assert send(state, dialect, loop)["messages"] == loop  # one tool loop: every block is needed
    answer = {"role": "assistant", "content": [thinking("Done thinking."), text("Fixed.")]}
    later = [*loop, answer, {"role": "user", "content": "Now add a test."}, {"role": "assistant", "content": step_blocks(5)}, result(5)]
    sent = send(state, dialect, later)["messages"]
    assert [b["type"] for m in sent[:7] if m["role"] == "assistant" for b in m["content"]] == ["tool_use", "tool_use", "text"]
    assert sent[8] == later[8]  # the current tool loop keeps its signed thinking
    assert [m for m in sent if m["role"] != "assistant"] == [m for m in later if m["role"] != "assistant"]


def test_a_first_reply_gives_the_conversation_its_id_when_streamed():
    with scripted_upstream([anthropic_reply(step_blocks(0), stream=True)] * 2) as up, proxy(up.url) as (url, state):
        client = sdk(url)
        with client.messages.stream(model="claude-x", max_tokens=100, messages=[USER]) as stream:
            out = stream.get_final_message()
        ids = {c.id for c in state.conversations()}
        again = [USER, {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in out.content]}, result(0)]
        with client.messages.stream(model="claude-x", max_tokens=100, messages=again) as stream:
            stream.get_final_message()
        assert {c.id for c in state.conversations()} == ids and len(ids) == 1
    assert "[SKIP]" in orjson.loads(up.raw[1])["messages"][1]["content"][0]["thinking"]


def test_scoring_runs_off_the_event_loop_for_messages():
    entered, release = threading.Event(), threading.Event()

    class Slow(FakeScorer):
        def score(self, requests):
            entered.set()
            release.wait(20)
            return super().score(requests)

    slow = Slow()
    with scripted_upstream([anthropic_reply([text("ok")])]) as up, proxy(up.url, scorer=slow, tokenizer=slow.tokenizer) as (url, _):
        body = {"model": "m", "max_tokens": 5, "messages": conversation(1)}
        worker = threading.Thread(target=lambda: httpx.post(url + "/messages", json=body, timeout=30))
        worker.start()
        assert entered.wait(20)
        assert httpx.get(url.removesuffix("/v1") + "/healthz", timeout=10).status_code == 200
        release.set()
        worker.join(30)
    assert "[SKIP]" in orjson.loads(up.raw[0])["messages"][1]["content"][0]["thinking"]


def test_an_error_event_mid_stream_is_relayed_and_nothing_is_recorded():
    from serve_fixtures import Stream

    events = [{"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": [], "usage": {"input_tokens": 5}}},
              {"type": "ping"}, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}]
    with scripted_upstream([Stream(events, named=True)]) as up, proxy(up.url) as (url, state):
        with httpx.stream("POST", url + "/messages", json={"model": "m", "max_tokens": 5, "messages": [USER], "stream": True}, timeout=20) as resp:
            names = [line.removeprefix("event: ") for line in resp.iter_lines() if line.startswith("event: ")]
        assert names == ["message_start", "ping", "error"]
        assert state.conversations() == []  # a broken-off answer gives no conversation id


def test_inline_think_is_sealed_too_on_a_sealed_upstream():
    messages = [USER, {"role": "assistant", "content": [text(f"<think>{REASONING}</think>Running ls."), tool_use("toolu_0", "Bash", {})]}, result(0)]
    state = make_state()
    assert send(state, MessagesDialect(sealed=True), messages)["messages"] == messages
    assert sum(state.stats.total.sealed.values()) == 1
    plain = send(make_state(), MessagesDialect(), messages)["messages"][1]["content"][0]["text"]
    assert plain.startswith("<think>") and plain.endswith("</think>Running ls.") and plain.count("[SKIP]") == 3


def test_restart_with_state_dir_sends_identical_messages_bytes(tmp_path):
    from iclr_cli.scoring.fake import RegexTokenizer

    class Broken:
        """A scorer that always fails: after the restart nothing may need scoring."""

        name, max_tokens, overflow, tokenizer = "fake", 42_000, "window", RegexTokenizer()

        def score(self, requests):
            raise RuntimeError("not loaded")

    history = conversation(2)
    sent = []
    for scorer in (None, Broken()):
        extra = {"scorer": scorer, "tokenizer": scorer.tokenizer} if scorer else {}
        with scripted_upstream([anthropic_reply([text("ok")])] * 3) as up, proxy(up.url, state_dir=str(tmp_path), **extra) as (url, state):
            for n in (1, 3, 5):
                httpx.post(url + "/messages", json={"model": "m", "max_tokens": 5, "messages": history[:n]}, timeout=20)
            sent.append(list(up.raw))
            assert state.stats.total.scorer_failures == 0
    assert sent[0] == sent[1] and b"[SKIP]" in sent[0][2]
