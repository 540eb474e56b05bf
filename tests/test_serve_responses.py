"""``POST /v1/responses`` (OpenAI Responses): the openai SDK's ``responses`` API, server-held
history, encrypted and sealed reasoning, and the ``fc_`` rule when reasoning is dropped."""

from __future__ import annotations

import httpx
import orjson
import pytest

from serve_fixtures import proxy, scripted_upstream
from wire_fixtures import function_call, output_message, reasoning_item, responses_reply

from iclr_cli.compress import Settings
from iclr_cli.policies import parse_variant
from iclr_cli.scoring.fake import FakeScorer
from iclr_cli.serve.batching import BatchingScorer
from iclr_cli.serve.responses import ResponsesDialect
from iclr_cli.serve.state import ServeState

pytest.importorskip("starlette")
openai = pytest.importorskip("openai")

REASONING = "Read the task.\n\nList the files.\n\nThe bug is in parse().\n\nRun the tests after."
TOOLS = [{"type": "function", "name": "shell", "description": "Run a command", "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}]
USER = {"role": "user", "content": "Fix the bug."}


def step_items(i: int, **kw) -> list[dict]:
    return [reasoning_item(REASONING, f"rs_{i}", **kw), function_call(f"call_{i}", "shell", {"cmd": f"ls {i}"})]


def output(i: int) -> dict:
    return {"type": "function_call_output", "call_id": f"call_{i}", "output": f"out {i}"}


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key="sk-client", max_retries=0, timeout=30)


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_openai_sdk_responses_three_steps(streamed):
    script = [responses_reply(step_items(i, summary=i == 1), stream=streamed, response_id=f"resp_{i}") for i in range(3)]
    script.append(responses_reply([output_message("Fixed.")], stream=streamed))
    with scripted_upstream(script) as up, proxy(up.url) as (url, state):
        sdk, items = client(url), [USER]
        for i in range(4):
            kw = dict(model="gpt-test", input=items, instructions="You are an agent.", tools=TOOLS, store=False)
            if streamed:
                done = [e for e in sdk.responses.create(stream=True, **kw) if e.type == "response.completed"]
                out = done[0].response
            else:
                out = sdk.responses.create(**kw)
            if i < 3:
                got = [o.model_dump(exclude_none=True) for o in out.output]
                assert got[0]["content"][0]["text"] == REASONING  # the client gets the reply unchanged
                items = items + got + [output(i)]
        seen = httpx.get(url.removesuffix("/v1") + "/stats").json()
    bodies = [orjson.loads(raw) for raw in up.raw]
    assert up.paths == ["/v1/responses"] * 4
    for before, after in zip(bodies, bodies[1:]):
        assert after["input"][: len(before["input"])] == before["input"]
        assert after["instructions"] == "You are an agent." and after["tools"] == TOOLS
    reasoning = [i for i in bodies[-1]["input"] if i.get("type") == "reasoning"]
    assert all(r["content"][0]["text"].count("[SKIP]") == 3 for r in reasoning)
    assert reasoning[1]["summary"] == [{"type": "summary_text", "text": reasoning[1]["content"][0]["text"]}]  # kept consistent
    calls = [i for i in bodies[-1]["input"] if i.get("type") == "function_call"]
    assert [(c["id"], c["call_id"], c["arguments"]) for c in calls] == [(f"fc_call_{i}", f"call_{i}", f'{{"cmd": "ls {i}"}}') for i in range(3)]
    total = seen["total"]
    assert total["steps_compressed"] == 3 and total["requests"] == 4 and len(seen["conversations"]) == 1
    assert total["input_tokens"] == 4 * 120 and total["cache_read_tokens"] == 4 * 64


@pytest.mark.parametrize("field", [{"previous_response_id": "resp_0"}, {"store": True}, {"conversation": "conv_1"}], ids=["previous_response_id", "store", "conversation"])
def test_history_held_by_the_server_is_passed_through_and_counted(field):
    body = {"model": "gpt-test", "input": [USER, *step_items(0), output(0)], **field}
    raw = orjson.dumps(body)
    with scripted_upstream([responses_reply([output_message("ok")])]) as up, proxy(up.url) as (url, _):
        httpx.post(url + "/responses", content=raw, headers={"content-type": "application/json"}, timeout=20)
        seen = httpx.get(url.removesuffix("/v1") + "/stats").json()
    assert up.raw == [raw]  # not pruned: the server holds history the proxy cannot see
    assert seen["total"]["server_history"] == {next(iter(field)) if "store" not in field else "store: true": 1}
    assert seen["total"]["steps_compressed"] == 0


def test_sdk_previous_response_id_is_forwarded_as_sent():
    with scripted_upstream([responses_reply(step_items(0), response_id="resp_0"), responses_reply([output_message("ok")])]) as up, proxy(up.url) as (url, _):
        sdk = client(url)
        first = sdk.responses.create(model="gpt-test", input="Fix the bug.")
        sdk.responses.create(model="gpt-test", previous_response_id=first.id, input=[output(0)])
        seen = httpx.get(url.removesuffix("/v1") + "/stats").json()
    assert orjson.loads(up.raw[1]) == {"model": "gpt-test", "previous_response_id": "resp_0", "input": [output(0)]}
    assert seen["total"]["server_history_requests"] == 1


# -- the write-back without HTTP -------------------------------------------------------------

def make_state() -> ServeState:
    scorer = FakeScorer()
    return ServeState(Settings(parse_variant("iclr")), BatchingScorer(scorer), scorer.tokenizer)


def send(state: ServeState, dialect: ResponsesDialect, items: list[dict]) -> list[dict]:
    raw = orjson.dumps({"model": "m", "instructions": "You are an agent.", "input": items, "store": False})
    return orjson.loads(state.rewrite(orjson.loads(raw), raw, None, dialect).body)["input"]


def test_encrypted_reasoning_is_sealed_even_on_a_plain_upstream():
    state = make_state()
    items = [USER, *step_items(0, encrypted="gAAAA-opaque"), output(0), *step_items(1), output(1)]
    sent = send(state, ResponsesDialect(), items)
    assert sent[1] == items[1]  # encrypted: never edited
    assert "[SKIP]" in sent[4]["content"][0]["text"]  # plain reasoning_text next to it: compressed
    assert state.stats.total.sealed == {"encrypted_content (only the provider can read it)": 1}


def test_sealed_upstream_and_drop_previous_turns_strip_the_ids_of_the_turn():
    items = [USER, *step_items(0, encrypted="gAAAA-0"), output(0), output_message("Done.", "msg_a"), {"role": "user", "content": "Next task."}, *step_items(1, encrypted="gAAAA-1"), output(1)]
    state = make_state()
    assert send(state, ResponsesDialect(sealed=True), items) == items
    assert state.stats.total.sealed == {"reasoning item for a sealed upstream (encrypted or held by id; never edited)": 2}
    dropped = send(make_state(), ResponsesDialect(sealed=True, drop_previous_turns=True), items)
    assert [i.get("type") for i in dropped] == [None, "function_call", "function_call_output", "message", None, "reasoning", "function_call", "function_call_output"]
    # the earlier turn's reasoning is gone, and with it the fc_ id that pointed to it (call_id kept)
    assert dropped[1] == {k: v for k, v in items[2].items() if k != "id"} and dropped[3] == items[4]
    assert dropped[5:] == items[6:]  # the current turn: untouched


def test_a_client_that_drops_reasoning_items_is_the_same_conversation():
    state, dialect = make_state(), ResponsesDialect()
    with_rs = [USER, *step_items(0), output(0)]
    without = [USER, step_items(0)[1], output(0)]
    send(state, dialect, with_rs)
    send(state, dialect, without)
    assert len(state.conversations()) == 1


def test_custom_tool_calls_and_unknown_items_pass_through_unchanged():
    custom = [{"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_c", "name": "apply_patch", "input": "*** Begin Patch\n*** End Patch"},
              {"type": "custom_tool_call_output", "call_id": "call_c", "output": "Done!"},
              {"type": "future_item", "id": "fi_1", "payload": {"x": 1}}]
    items = [USER, reasoning_item(REASONING, "rs_0"), *custom, *step_items(1), output(1)]
    state = make_state()
    sent = send(state, ResponsesDialect(), items)
    assert sent[2:5] == custom and "[SKIP]" in sent[1]["content"][0]["text"]
    assert state.stats.total.unrecognised == 1  # the unknown item, said once
