"""Every counter of ``/stats`` counts what went upstream, never what was planned.

For each wire (chat completions with ``reasoning_content``, LiteLLM copies and streamed
``thinking_blocks`` fragments; Anthropic messages; OpenAI Responses) a conversation of three
tool-calling steps goes through ``iclr serve``'s state, and the counters are recomputed from the
bodies the upstream would receive: the steps whose reasoning went compressed, and the reasoning
tokens removed (proxy tokenizer, the one accounting of :mod:`iclr_cli.token_accounting`).
"""

from __future__ import annotations

import orjson
import pytest

from iclr_cli.compress import Settings
from iclr_cli.policies import parse_variant
from iclr_cli.scoring.fake import FakeScorer
from iclr_cli.serve.batching import BatchingScorer
from iclr_cli.serve.chat import CHAT
from iclr_cli.serve.messages import MessagesDialect
from iclr_cli.serve.responses import ResponsesDialect
from iclr_cli.serve.state import ServeState
from iclr_cli.token_accounting import account, token_counter

STEPS = 3


def reasoning(i: int) -> str:
    return "\n\n".join(f"Step {i}, thought {b}: {'check the file ' * (b + 1)}then decide." for b in range(5))


def _fragments(text: str) -> list[dict]:
    pieces = [{"type": "thinking", "thinking": text[k:k + 23], "signature": ""} for k in range(0, len(text), 23)]
    return pieces + [{"type": "thinking", "thinking": "", "signature": f"sig-{len(text)}"}]


def chat(n: int, shape: str) -> dict:
    messages: list[dict] = [{"role": "user", "content": "Fix the bug."}]
    for i in range(n):
        msg = {"role": "assistant", "content": None, "reasoning_content": reasoning(i),
               "tool_calls": [{"id": f"call_{i}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]}
        if shape == "litellm copies":
            msg["provider_specific_fields"] = {"reasoning_content": reasoning(i)}
        elif shape == "streamed fragments":
            msg["thinking_blocks"] = _fragments(reasoning(i))
        elif shape == "unedited copy":
            msg["metadata"] = {"raw": reasoning(i)}
        messages += [msg, {"role": "tool", "tool_call_id": f"call_{i}", "content": f"out {i}"}]
    return {"model": "deepseek-reasoner", "messages": messages}


def chat_reasoning(body: dict) -> list[str]:
    return [m["reasoning_content"] for m in body["messages"] if m["role"] == "assistant"]


def messages(n: int, _shape: str) -> dict:
    out: list[dict] = [{"role": "user", "content": "Fix the bug."}]
    for i in range(n):
        out += [{"role": "assistant", "content": [{"type": "thinking", "thinking": reasoning(i), "signature": ""},
                                                  {"type": "tool_use", "id": f"toolu_{i}", "name": "bash", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"out {i}"}]}]
    return {"model": "deepseek-reasoner", "messages": out}


def messages_reasoning(body: dict) -> list[str]:
    return [b["thinking"] for m in body["messages"] if m["role"] == "assistant" for b in m["content"] if b["type"] == "thinking"]


def responses(n: int, _shape: str) -> dict:
    items: list[dict] = [{"role": "user", "content": "Fix the bug."}]
    for i in range(n):
        items += [{"type": "reasoning", "id": f"rs_{i}", "summary": [], "content": [{"type": "reasoning_text", "text": reasoning(i)}]},
                  {"type": "function_call", "id": f"fc_{i}", "call_id": f"call_{i}", "name": "bash", "arguments": "{}"},
                  {"type": "function_call_output", "call_id": f"call_{i}", "output": f"out {i}"}]
    return {"model": "gpt-oss-20b", "input": items, "store": False}


def responses_reasoning(body: dict) -> list[str]:
    return [c["text"] for item in body["input"] if item.get("type") == "reasoning" for c in item["content"]]


WIRES = {
    "chat": (CHAT, chat, chat_reasoning, ("plain", "litellm copies", "streamed fragments", "unedited copy")),
    "messages": (MessagesDialect(sealed=False), messages, messages_reasoning, ("plain",)),
    "responses": (ResponsesDialect(), responses, responses_reasoning, ("plain",)),
}
CASES = [(wire, shape) for wire, (_, _, _, shapes) in WIRES.items() for shape in shapes]


@pytest.mark.parametrize("wire, shape", CASES)
def test_stats_count_the_bytes_the_upstream_received(wire, shape):
    dialect, build, read, _ = WIRES[wire]
    scorer = FakeScorer()
    state = ServeState(Settings(parse_variant("iclr")), BatchingScorer(scorer), scorer.tokenizer)
    sent = []
    for n in range(1, STEPS + 1):
        body = build(n, shape)
        raw = orjson.dumps(body)
        rewrite = state.rewrite(orjson.loads(raw), raw, None, dialect)
        sent.append(orjson.loads(rewrite.body))
    last = read(sent[-1])
    generated = [reasoning(i) for i in range(STEPS)]
    assert len(last) == STEPS
    total = state.stats.total.to_record()
    compressed = sum(a != b for a, b in zip(generated, last))
    assert total["steps_compressed"] == compressed
    assert compressed == (0 if shape == "unedited copy" else STEPS)
    tokens = account(token_counter(state.tokenizer), zip(generated, last))
    assert (total["reasoning_tokens_generated"], total["reasoning_tokens_removed"]) == (tokens.generated, tokens.deleted)
    assert total["steps_completed"] == STEPS and total["prefix_breaks"] == 0
    assert total["steps_unwritten"] == (STEPS if shape == "unedited copy" else 0)
