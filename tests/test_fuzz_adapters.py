"""Fuzz every adapter: any input ends in a parsed document or a clean InputError.

Bounded: hypothesis examples per adapter are capped so CI time stays small. Inputs are built
from JSON fragments that real transcripts contain, mutated, cut and glued, so the adapters'
deeper paths (not just the first parse) get exercised.
"""

import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from iclr_cli.errors import InputError
from iclr_cli.formats import registry

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=12))
KEYS = st.sampled_from([
    "role", "content", "type", "message", "id", "thinking", "signature", "reasoning_content", "tool_calls",
    "tool_use_id", "payload", "summary", "encrypted_content", "trajectory", "history", "thought", "action",
    "observation", "messages", "traj", "sessionId", "uuid", "parentUuid", "args", "source", "steps", "prompt",
    "text", "function", "arguments", "name", "response", "request", "choices", "schema", "parts", "kind",
    # Gemini and pi
    "contents", "thought", "thoughtSignature", "functionCall", "functionResponse", "inlineData", "candidates",
    "systemInstruction", "parentId", "stopReason", "thinkingSignature", "toolCallId", "api", "version", "cwd",
    # Bedrock Converse, LiteLLM spend logs, LangChain, Gemini CLI
    "reasoningContent", "reasoningText", "redactedContent", "toolUse", "toolUseId", "toolResult", "input", "output",
    "modelId", "system", "request_id", "call_type", "proxy_server_request", "data", "lc", "kwargs",
    "additional_kwargs", "response_metadata", "projectHash", "thoughts", "description", "subject", "toolCalls",
    "result", "$set", "$rewindTo",
])
VALUES = st.recursive(
    SCALARS | st.sampled_from(["assistant", "user", "tool", "thinking", "tool_use", "tool_result", "reasoning",
                               "response_item", "function_call", "agent", "iclr.trajectory/1", "a\n\nb",
                               "model", "session", "toolResult", "toolCall", "aborted", "compaction", "openai-responses",
                               "gemini", "human", "ai", "constructor", "acompletion", "AIMessage"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=5),
    max_leaves=25,
)


@st.composite
def documents(draw):
    values = draw(st.lists(VALUES, min_size=1, max_size=4))
    as_lines = draw(st.booleans())
    raw = b"\n".join(json.dumps(v).encode() for v in values) if as_lines else json.dumps(values).encode()
    mutation = draw(st.sampled_from(["none", "cut", "glue", "bytes"]))
    if mutation == "cut" and raw:
        raw = raw[: draw(st.integers(0, len(raw)))]
    elif mutation == "glue":
        raw = raw + raw
    elif mutation == "bytes":
        raw = raw + draw(st.binary(max_size=16))
    return raw


@pytest.mark.parametrize("name", registry.names())
def test_adapter_never_crashes(name):
    adapter = registry.get(name)

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(documents(), st.booleans())
    def check(data, skip_bad_lines):
        try:
            doc = adapter.load(data, "fuzz.jsonl", skip_bad_lines=skip_bad_lines)
        except InputError as exc:
            assert "fuzz.jsonl" in str(exc)
            return
        # A parsed document must write itself back unchanged.
        assert adapter.dump(doc, doc.trajectories) == data

    check()


def test_detect_never_crashes():
    @settings(max_examples=200, deadline=None)
    @given(st.binary(max_size=200) | documents())
    def check(data):
        try:
            registry.detect(data, "x")
        except InputError:
            pass

    check()


@pytest.mark.parametrize("value", [[], {}, 1, None, True])
@pytest.mark.parametrize("shape", [
    '[{{"type": {v}}}]',
    '{{"input": [{{"type": {v}}}]}}',
    '[{{"type": "message", "role": "user", "content": [{{"type": {v}}}]}}]',
    '{{"messages": [{{"role": "user", "content": [{{"type": {v}}}]}}]}}',
])
def test_a_type_field_of_any_json_type_never_crashes_detection(shape, value):
    data = shape.format(v=json.dumps(value)).encode()
    for cut in (len(data), len(data) - 2):  # whole, and cut as a head read of a longer file is
        try:
            registry.detect(data[:cut], "x")
        except InputError:
            pass
