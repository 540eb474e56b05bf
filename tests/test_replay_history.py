"""replay's History on the message-level API: each reasoning shape a reply may leave in the
canonical message is compressed where it sits, once, and the saved files read back alike."""

from __future__ import annotations

from iclr_cli.formats.openai_messages import read_messages
from iclr_cli.policies import parse_variant
from iclr_cli.replay.history import Compressor, History
from iclr_cli.scoring.fake import RegexTokenizer

PROMPT = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
CALL = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
R = "One.\n\nTwo.\n\nThree."


def history(variant: str = "delete-all") -> History:
    return History("t", PROMPT, TOOLS, Compressor(parse_variant(variant), None, RegexTokenizer()))


def test_each_shape_is_compressed_where_it_sits_and_earlier_steps_never_change():
    h = history()
    h.complete_step({"role": "assistant", "content": None, "tool_calls": [CALL], "reasoning_content": R}, [{"role": "tool", "tool_call_id": "c1", "content": "a"}])
    first = h.request_messages()
    h.complete_step({"role": "assistant", "content": R + "\n</think>\n\nAnswer."}, [{"role": "user", "content": "more"}])
    harmony = "<|channel|>analysis<|message|>" + R + "<|end|><|start|>assistant<|channel|>final<|message|>Done.<|return|>"
    h.complete_step({"role": "assistant", "content": harmony}, [{"role": "user", "content": "ok"}])
    sent = h.request_messages()
    assert sent[: len(first)] == first  # a step is compressed once; its bytes never change after
    assert sent[2]["reasoning_content"] == ""
    assert sent[4]["content"] == "</think>\n\nAnswer."
    assert sent[6]["content"] == harmony.replace(R, "")
    assert [r.tokens_before > 0 and r.tokens_after == 0 for r in h.reports] == [True, True, True]
    generated = h.generated_messages()
    assert (generated[2]["reasoning_content"], generated[4]["content"], generated[6]["content"]) == (R, R + "\n</think>\n\nAnswer.", harmony)


def test_prompt_is_the_one_read_messages_builds():
    h = history("none")
    assert h.prompt == read_messages(PROMPT, tools=TOOLS, traj_id="t").prompt
    assert [p.label for p in h.prompt] == ["system", "tools", "user"]
