"""What each upstream does with reasoning sent back to it: one table, from the providers' own docs.

The paper's method (METHOD.md, "Provider rules") edits reasoning the model re-reads as plain
text. Some providers instead bind what they returned to a signature or encrypt it; editing it
there is refused by the API (or silently breaks it), so it is **sealed**: passed through
byte for byte, counted in ``iclr serve``'s ``/stats``, and only what the provider documents
as legal to leave out may be left out, behind an explicit option (:attr:`UpstreamKind.legal_drop`).

- ``plain``: thinking text (``reasoning_content``, ``thinking`` blocks, Responses
  ``reasoning_text``) is read back by the model as text; the block-level BottomK is written in
  place. A ``signature`` on a plain upstream is not verified against the text, so an edited
  block keeps the keys the wire format requires.
- ``sealed``: Anthropic ``thinking`` blocks (signature-checked; on preserved-thinking models
  bound to the whole prefix) and OpenAI ``encrypted_content`` reasoning items: never edited.

:func:`guess` picks a kind from the upstream URL (a loopback or private address is a local
server: plain); ``iclr serve --upstream-kind`` overrides it. ``redacted_thinking`` blocks
carry no text and are never touched on any upstream.

Other modules import :data:`KINDS` (``iclr serve``; the savings report's "sealed" column).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

Reasoning = Literal["plain", "sealed"]


@dataclass(frozen=True)
class UpstreamKind:
    """One kind of upstream and its reasoning rule.

    Attributes:
        name: the ``--upstream-kind`` value.
        title: who it is, for humans.
        reasoning: ``plain`` (edited in place) or ``sealed`` (never edited).
        apis: the wire APIs it serves that carry reasoning (``chat``, ``messages``,
            ``responses``).
        rule: what the provider's docs say, and what ``iclr serve`` therefore does.
        docs: the provider's own documentation the rule comes from.
        legal_drop: what the docs allow a client to leave out of a request (offered by
            ``--sealed drop-previous-turns``), or ``None``.
        hosts: host names (or suffixes after a dot) that :func:`guess` maps to this kind.
    """

    name: str
    title: str
    reasoning: Reasoning
    apis: tuple[str, ...]
    rule: str
    docs: tuple[str, ...]
    legal_drop: str | None = None
    hosts: tuple[str, ...] = ()

    @property
    def sealed(self) -> bool:
        return self.reasoning == "sealed"


KINDS: tuple[UpstreamKind, ...] = (
    UpstreamKind(
        "anthropic",
        "Anthropic API (Claude)",
        "sealed",
        ("messages",),
        "thinking blocks carry a signature the API checks: a thinking or redacted_thinking block of the latest "
        "assistant message cannot be modified, and during tool use the whole sequence of thinking blocks must "
        "be sent back as generated. Claude Opus 4.5+ and Sonnet 4.6+ keep earlier turns' thinking in context. "
        "iclr serve never edits them and counts them as sealed.",
        (
            "https://platform.claude.com/docs/en/build-with-claude/extended-thinking",
            "https://platform.claude.com/docs/en/build-with-claude/context-windows",
        ),
        "thinking and redacted_thinking blocks of assistant turns before the current tool loop (the docs: "
        "'you can omit thinking blocks from prior assistant role turns'; only the current tool-use cycle "
        "must be passed back)",
        ("api.anthropic.com",),
    ),
    UpstreamKind(
        "openai",
        "OpenAI API (Responses)",
        "sealed",
        ("responses",),
        "reasoning items are encrypted (encrypted_content with store: false and include "
        "['reasoning.encrypted_content']) or held by id; their summary is not what the model re-reads. "
        "An fc_/msg_ item sent without the rs_ reasoning item it came with is rejected. iclr serve "
        "never edits reasoning items and counts them as sealed.",
        (
            "https://platform.openai.com/docs/guides/reasoning",
            "https://platform.openai.com/docs/api-reference/responses/create",
            "https://cookbook.openai.com/examples/responses_api/reasoning_items",
        ),
        "reasoning items of turns before the last user message (the cookbook: reasoning items from previous "
        "turns are ignored and removed by the API), with the ids of the items of the same response, which "
        "the API would otherwise pair with the missing reasoning item",
        ("api.openai.com", "openai.azure.com"),
    ),
    UpstreamKind(
        "deepseek",
        "DeepSeek (chat completions and the Anthropic-compatible API)",
        "plain",
        ("chat", "messages"),
        "reasoning_content (chat) and thinking blocks (/anthropic) are plain text the model re-reads; both "
        "must be passed back on turns with tool calls, so a fully deleted reasoning_content is sent as \"\" "
        "and an emptied thinking block keeps an empty block. redacted_thinking is not supported by the "
        "Anthropic-compatible API.",
        (
            "https://api-docs.deepseek.com/guides/thinking_mode",
            "https://api-docs.deepseek.com/guides/anthropic_api",
        ),
        hosts=("api.deepseek.com",),
    ),
    UpstreamKind(
        "anthropic-compatible",
        "Other hosted Anthropic-compatible endpoints (MiniMax, Kimi, GLM, Qwen)",
        "plain",
        ("messages",),
        "thinking blocks are the model's plain-text reasoning, sent back whole so the reasoning chain "
        "continues (MiniMax: append the full response.content, thinking included); edited in place. Only "
        "MiniMax's and DeepSeek's docs were read for this rule; if an endpoint rejects edited blocks, it "
        "verifies signatures: use --upstream-kind anthropic.",
        ("https://platform.minimax.io/docs/api-reference/text-anthropic-api",),
        hosts=("api.minimax.io", "api.minimaxi.com", "api.moonshot.ai", "api.moonshot.cn", "api.kimi.com", "api.z.ai", "open.bigmodel.cn", "dashscope.aliyuncs.com", "dashscope-intl.aliyuncs.com"),
    ),
    UpstreamKind(
        "openrouter",
        "OpenRouter (chat completions)",
        "plain",
        ("chat",),
        "reasoning in reasoning and reasoning_details; text entries are edited with the plain field and lose "
        "their signature, encrypted entries of the old text are dropped, summaries kept consistent.",
        ("https://openrouter.ai/docs/use-cases/reasoning-tokens",),
        hosts=("openrouter.ai",),
    ),
    UpstreamKind(
        "local",
        "A local server: vLLM, SGLang, llama.cpp, Ollama, LM Studio",
        "plain",
        ("chat", "messages", "responses"),
        "the reasoning parser puts the model's thinking in reasoning_content / reasoning (chat), thinking "
        "blocks (/v1/messages) or reasoning items with reasoning_text content (/v1/responses); the chat "
        "template renders what is sent back as plain text. Edited in place; a Responses summary that "
        "holds the same text is edited with it.",
        (
            "https://docs.vllm.ai/en/stable/features/reasoning_outputs/",
            "https://docs.vllm.ai/en/stable/serving/openai_compatible_server/",
            "https://docs.sglang.ai/advanced_features/separate_reasoning.html",
            "https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md",
            "https://docs.ollama.com/capabilities/thinking",
            "https://lmstudio.ai/docs/developer/openai-compat",
        ),
    ),
    UpstreamKind(
        "litellm",
        "LiteLLM proxy in front of open models",
        "plain",
        ("chat", "messages", "responses"),
        "reasoning_content plus thinking_blocks (kept equal) for open models; in front of Anthropic or "
        "OpenAI models the provider's own rule applies: choose --upstream-kind anthropic or openai.",
        ("https://docs.litellm.ai/docs/reasoning_content",),
    ),
    UpstreamKind(
        "unknown",
        "An upstream this table does not know",
        "sealed",
        ("chat", "messages", "responses"),
        "plain reasoning fields (reasoning_content, reasoning, <think>) are compressed as always; signed "
        "thinking blocks and encrypted reasoning items are left sealed, since nothing says the upstream "
        "does not verify them. Name the kind with --upstream-kind.",
        (),
    ),
)

_BY_NAME = {k.name: k for k in KINDS}


def names() -> list[str]:
    """Values ``--upstream-kind`` accepts."""
    return [k.name for k in KINDS]


def get(name: str) -> UpstreamKind:
    """The kind called ``name``.

    Raises:
        KeyError: for an unknown name.
    """
    return _BY_NAME[name]


def _is_local(host: str) -> bool:
    if host in ("localhost",) or host.endswith((".localhost", ".local", ".internal")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


def guess(url: str) -> tuple[UpstreamKind, str]:
    """The kind of the upstream at ``url`` and why: a known host, a loopback or private
    address (``local``: plain), or ``unknown``."""
    host = (urlsplit(url).hostname or "").lower()
    for kind in KINDS:
        if any(host == h or host.endswith("." + h) for h in kind.hosts):
            return kind, f"host {host}"
    if _is_local(host):
        return _BY_NAME["local"], f"{host} is a loopback or private address"
    return _BY_NAME["unknown"], f"{host} is not in the table"
