"""One streamed block kept as one ``thinking_blocks`` entry per delta (case
``../shared/cases/turn6/08a``, formats/fragments.py): the fragments are one reasoning, on the
OpenAI chat reader, the agent-log reader (mini-swe-agent) and the wire through ``iclr serve``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from format_helpers import run_cli
from iclr_cli.formats.fragments import streamed_blocks
from test_chat_reasoning import delete_all, mini
from iclr_cli.formats.adapters.mini_swe_agent import ADAPTER as MINI

CASE = Path(__file__).resolve().parents[2] / "shared" / "cases" / "turn6" / "08a-litellm-streamed-thinking-blocks-minimax.json"


def case() -> dict:
    if not CASE.exists():
        pytest.skip(f"{CASE} is not beside the repository")
    return json.loads(CASE.read_text())


def fragments(text: str, signature: str | None = "sig-1", width: int = 29) -> list[dict]:
    """``text`` as LiteLLM's streamed chunks keep it: ``width``-character deltas with
    ``"signature": ""`` and, with ``signature``, a last signature-only entry."""
    out = [{"type": "thinking", "thinking": text[i:i + width], "signature": ""} for i in range(0, len(text), width)]
    return out + ([{"type": "thinking", "thinking": "", "signature": signature}] if signature else [])


def test_groups_are_found_by_their_shape():
    text = "one paragraph here.\n\nanother one there."
    assert [(g.pieces, g.text, g.signed) for g in streamed_blocks(fragments(text, width=10))] == [((0, 1, 2, 3), text, 4)]
    # blocks returned whole, each with its own signature: no group
    whole = [{"type": "thinking", "thinking": "a b", "signature": "s1"}, {"type": "thinking", "thinking": "c d", "signature": "s2"}]
    assert streamed_blocks(whole) == []
    # deltas with no signature at all (an open model): one group, unsigned
    assert [(g.pieces, g.signed) for g in streamed_blocks(fragments(text, None, width=20))] == [((0, 1), None)]
    # two streamed blocks, each closed by its signature, with a redacted block between
    two = fragments("first block text", "s1", 8) + [{"type": "redacted_thinking", "data": "X"}] + fragments("second block", "s2", 8)
    assert [(g.members, g.text, g.signed) for g in streamed_blocks(two)] == [((0, 1, 2), "first block text", 2),
                                                                              ((4, 5, 6), "second block", 6)]


def _joined(msg: dict) -> str:
    return "".join(b["thinking"] for b in msg["thinking_blocks"])


def test_the_case_counts_paragraphs_and_skips_them_whole(capsys, tmp_path):
    data = case()
    src = tmp_path / "chat.json"
    src.write_text(json.dumps(data))
    code, out, err = run_cli(capsys, "prune", str(src), "--model", "fake", "-o", str(tmp_path / "out.json"))
    assert code == 0, err
    said = out + err
    assert "│ reasoning blocks" in said and [line for line in said.splitlines() if "│ reasoning blocks" in line][0].split("│")[2].strip() == "8"
    written = json.loads((tmp_path / "out.json").read_text())
    for before, after in zip(data["messages"], written["messages"]):
        if not before.get("thinking_blocks"):
            assert after == before
            continue
        assert len(after["thinking_blocks"]) == len(before["thinking_blocks"])
        assert after["thinking_blocks"][-1] == before["thinking_blocks"][-1]  # the signature entry, as it was (MiniMax does not check it)
        assert _joined(after) == after["reasoning_content"] != before["reasoning_content"]
        paragraphs = after["reasoning_content"].split("\n\n")
        originals = before["reasoning_content"].split("\n\n")
        assert len(paragraphs) == len(originals) == 4
        assert [p for p in paragraphs if p != "[SKIP]"] == [o for o, p in zip(originals, paragraphs) if p != "[SKIP]"]
        assert paragraphs.count("[SKIP]") == 3  # floor(0.8 * 4)


def test_the_case_on_claude_is_sealed_and_written_back_byte_for_byte(capsys, tmp_path):
    data = case()
    data["model"] = "anthropic/claude-sonnet-4-5"
    for msg in data["messages"]:
        for block in msg.get("thinking_blocks", []):
            if block["signature"]:
                block["signature"] = "EqQBCkYIBxgCKkD" + block["signature"]
    src = tmp_path / "chat.json"
    src.write_text(json.dumps(data))
    code, _, err = run_cli(capsys, "prune", str(src), "--model", "fake", "-o", str(tmp_path / "out.json"))
    assert code == 0, err
    assert (tmp_path / "out.json").read_bytes() == src.read_bytes()
    assert "2 reasoning parts signed for anthropic left sealed" in err


def test_an_agent_log_reads_the_fragments_as_one_reasoning():
    text = "Read the key function first.\n\nThen change the handler.\n\nThen add a test."
    data = mini({"role": "assistant", "content": None, "reasoning_content": text, "thinking_blocks": fragments(text), "tool_calls": []})
    doc = MINI.load(data, "m.json")
    [part] = doc.trajectories[0].steps[0].reasoning
    assert part.text == text and doc.unrecognised == []
    out = json.loads(delete_all(MINI, doc).data)["messages"][2]
    for msg in (out, out["extra"]["response"]["choices"][0]["message"]):
        assert msg["reasoning_content"] == "" and _joined(msg) == ""
        assert len(msg["thinking_blocks"]) == len(fragments(text))


REASONING = "Look at the file first.\n\nMaybe grep for it.\n\nThe answer is in line 3.\n\nCheck the tests too.\n\nThen run them."


def _wire_history(steps: int, model: str) -> dict:
    messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Fix the bug."}]
    for i in range(steps):
        messages += [{"role": "assistant", "content": None, "reasoning_content": REASONING, "thinking_blocks": fragments(REASONING, f"sig-{i}"),
                      "tool_calls": [{"id": f"call_{i}", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]},
                     {"role": "tool", "tool_call_id": f"call_{i}", "content": f"out {i}"}]
    return {"model": model, "messages": messages}


@pytest.mark.server
@pytest.mark.parametrize("model", ["minimax/MiniMax-M2", "anthropic/claude-sonnet-4-5"])
def test_serve_compresses_the_fragments_as_one_reasoning_and_counts_what_it_sent(model):
    pytest.importorskip("starlette")
    import httpx
    import orjson

    from serve_fixtures import proxy, scripted_upstream
    from test_serve_eager import responder

    body = _wire_history(2, model)
    with scripted_upstream(responder(5)) as up, proxy(up.url) as (url, _):
        answer = httpx.post(url + "/chat/completions", json=body, timeout=60)
        assert answer.status_code == 200, answer.text
        stats = httpx.get(url.removesuffix("/v1") + "/stats").json()
    sent = orjson.loads(up.raw[-1])
    assistants = [m for m in sent["messages"] if m["role"] == "assistant"]
    total = stats["total"]
    if model.startswith("anthropic/"):  # the signature covers the fragments and Anthropic checks it: sent as it came
        assert sent["messages"] == body["messages"]
        assert total["steps_compressed"] == 0 and total["reasoning_tokens_removed"] == 0 and sum(total["sealed"].values()) == 2
        return
    for i, msg in enumerate(assistants):
        assert msg["reasoning_content"].split("\n\n").count("[SKIP]") == 4  # one reasoning of 5 blocks, floor(0.8 * 5)
        assert _joined(msg) == msg["reasoning_content"]
        assert len(msg["thinking_blocks"]) == len(fragments(REASONING)) and msg["thinking_blocks"][-1]["signature"] == f"sig-{i}"
    assert total["steps_compressed"] == 2 and total["reasoning_tokens_removed"] > 0
