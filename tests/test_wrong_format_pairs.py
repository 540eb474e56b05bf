"""Every format's file read with every other ``--format``: the error says the file does not
look like the format named, what it looks like instead and how to read it that way (never a
silent read that scores nothing, a misleading reason or a crash); read with its own format
it is scored as it is without ``--format``. One small file per registered adapter, so a new
adapter must bring one. The few pairs where the format named reads the file too are listed
with their reason (SAME_READING, ALSO_SNIFFED)."""

from __future__ import annotations

import json

import pytest

from format_helpers import REPO, SAMPLES, run_cli
from iclr_cli.inputs import load_file
from iclr_cli.errors import InputError
from iclr_cli.formats import registry

SHAPES = REPO / "tests" / "shapes"

# the smallest file of each format in the repository (tests/shapes/ where
# sample_trajectories/ has none)
FILES = {
    "claude_code": SAMPLES / "claude_code_session.jsonl",
    "qwen_code": SAMPLES / "qwen_code_session.jsonl",
    "pi": SAMPLES / "pi_session.jsonl",
    "goose": SAMPLES / "goose_session.jsonl",
    "opencode": SAMPLES / "opencode_session.json",
    "kilo": SAMPLES / "kilo_session.json",
    "iclr": SAMPLES / "canonical.iclr.jsonl",
    "codex": SAMPLES / "codex_rollout.jsonl",
    "mini-swe-agent": SAMPLES / "mini_swe_agent.traj.json",
    "swe-agent": SAMPLES / "swe_agent.traj",
    "openhands": SAMPLES / "openhands_events.json",
    "gemini-cli": SAMPLES / "gemini_cli_session.jsonl",
    "pydantic-ai": SAMPLES / "pydantic_ai_messages.json",
    "ai-sdk": SAMPLES / "ai_sdk_model_messages.json",
    "litellm-spend": SAMPLES / "litellm_spend_logs.jsonl",
    "sharegpt": SHAPES / "sharegpt.json",
    "langchain": SAMPLES / "langchain_messages.json",
    "gemini": SAMPLES / "gemini_contents.json",
    "openai-responses": SHAPES / "openai_responses_item_list.json",
    "bedrock": SAMPLES / "bedrock_converse.json",
    "anthropic": SAMPLES / "anthropic_messages.json",
    "chat-lines": SHAPES / "chat_lines.jsonl",
    "openai": SAMPLES / "openai_chat.json",
}

# (owner, forced): the forced format reads the owner's file exactly as the owner does
SAME_READING: dict[tuple[str, str], str] = {
    ("opencode", "kilo"): "Kilo is an OpenCode fork: the same export JSON, read by the same reader",
    ("kilo", "opencode"): "Kilo is an OpenCode fork: the same export JSON, read by the same reader",
    ("openai", "mini-swe-agent"): "mini-swe-agent v2 messages are OpenAI chat (tool_calls, reasoning fields)",
}

# (owner, forced): the forced format's sniff matches the owner's file too (the detection note
# offers it), so the error says what reading it so misses rather than that it looks unlike it
ALSO_SNIFFED: dict[tuple[str, str], str] = {
    ("mini-swe-agent", "openai"): "a v1 trajectory is an OpenAI message list; only mini-swe-agent reads its THOUGHTs",
    ("ai-sdk", "openai"): "ModelMessages are {role, content} messages; only ai-sdk reads their reasoning parts",
    ("litellm-spend", "openai"): "rows carry OpenAI request messages; only litellm-spend reads the rows without them",
}


def score(capsys, path, fmt: str) -> tuple[int, str, str]:
    # signed thinking edited, so that every reasoning part is scored whatever its provider
    return run_cli(capsys, "score", str(path), "--model", "fake", "-q", "--signed-thinking", "edit", "--format", fmt)


def test_every_registered_format_has_a_file():
    assert sorted(FILES) == sorted(registry.names())


@pytest.mark.parametrize("owner", list(FILES))
def test_each_file_is_detected_as_its_own_format(owner):
    path = FILES[owner]
    assert registry.detect(path.read_bytes(), str(path)).name == owner


@pytest.mark.parametrize("pair", sorted(ALSO_SNIFFED))
def test_the_formats_said_to_sniff_a_file_too_do(pair):
    owner, forced = pair
    path = FILES[owner]
    others = registry.detect_why(path.read_bytes(), str(path)).others
    assert forced in [adapter.name for adapter, _ in others]


@pytest.mark.parametrize("forced", list(FILES))
@pytest.mark.parametrize("owner", list(FILES))
def test_a_file_read_as_another_format_is_said_to_look_like_its_own(capsys, owner, forced):
    path = FILES[owner]
    code, out, err = score(capsys, path, forced)
    if forced == owner:
        assert code == 0, err
        blocks = [json.loads(line) for line in out.splitlines()]
        assert blocks and {b["source"] for b in blocks} == {str(path)}
        assert run_cli(capsys, "score", str(path), "--model", "fake", "-q", "--signed-thinking", "edit")[1] == out
        return
    if (owner, forced) in SAME_READING:
        assert code == 0, err
        assert out == score(capsys, path, owner)[1]  # the very records its own format gives
        return
    assert code == 2, err
    lead = "read as" if (owner, forced) in ALSO_SNIFFED else "does not look like"
    assert f"{path}: {lead} {forced} (" in err
    assert f"it looks like {owner} (" in err and f"use --format {owner}" in err


# what each kind of wrong reading is said to miss, in the samples' own numbers
SHORTFALLS = {
    ("bedrock", "openai"): "Read as openai: 0 reasoning part(s), where bedrock reads 2",
    # 4: two content parts, and two messages of role "tool", a role the Messages API does not have
    ("ai-sdk", "anthropic"): "Read as anthropic: 4 part(s) or field(s) left unread, where ai-sdk leaves none unread",
    ("openai", "anthropic"): "Read as anthropic: 2 part(s) or field(s) left unread, where openai leaves none unread",  # its role "tool" messages
    ("mini-swe-agent", "openai"): "but it holds no reasoning part: nothing to score or prune; it looks like mini-swe-agent (mini-swe-agent prompt markers (mswea_bash_command) in a message list): use --format mini-swe-agent, or leave --format out (4 reasoning part(s) read so)",
    ("litellm-spend", "openai"): "but line 3: no message list found (expected a list of messages, 'messages', 'traj', or request/response); it looks like litellm-spend (",
}


@pytest.mark.parametrize("pair", sorted(SHORTFALLS))
def test_the_error_says_what_the_wrong_reading_misses(capsys, pair):
    owner, forced = pair
    code, out, err = score(capsys, FILES[owner], forced)
    assert (code, out) == (2, "")
    assert SHORTFALLS[pair] in err


def test_registry_load_refuses_the_wrong_reading_too():
    path = FILES["openai"]
    with pytest.raises(InputError) as exc:
        load_file(str(path), "anthropic")
    assert exc.value.problem.startswith("does not look like anthropic (")
    assert load_file(str(path), "mini-swe-agent")[0].name == "mini-swe-agent"  # the same reading
