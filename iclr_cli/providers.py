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

Files follow the same table (:func:`for_record`): the model, provider or base URL a transcript
records names the kind whose rule applies to its reasoning (a Claude Code session that switched
to DeepSeek's Anthropic endpoint is DeepSeek's for those turns), and
:mod:`iclr_cli.formats.sealing` applies it.

A signature **bound to a tool call** is not a copy of the reasoning text and stays, value for
value, while its call stays, on every upstream and in every file: Gemini's thought signature
(``extra_content.google.thought_signature`` on an OpenAI-compatible tool call, a
``reasoning.encrypted`` entry of OpenRouter's ``reasoning_details`` whose ``id`` is the call's
id). Google: "you must return these signatures back to the model in your request exactly as
they were received" (https://ai.google.dev/gemini-api/docs/thought-signatures); OpenRouter:
pass ``reasoning_details`` back unmodified
(https://openrouter.ai/docs/use-cases/reasoning-tokens#preserving-reasoning-blocks).

Other modules import :data:`KINDS` (``iclr serve``; the savings report's "sealed" column).
"""

from __future__ import annotations

import ipaddress
import re
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
        models: regular expressions (searched, case-insensitive) for model names whose
            reasoning this kind's rule governs wherever they are served (:func:`for_model`).
        checks_signatures: a signature on this kind's reasoning is verified against it (or
            must come back exactly as received), so signed reasoning is sealed in files by
            default (:mod:`iclr_cli.formats.sealing`); a plain kind's signature is not checked
            and an edited block keeps it.
    """

    name: str
    title: str
    reasoning: Reasoning
    apis: tuple[str, ...]
    rule: str
    docs: tuple[str, ...]
    legal_drop: str | None = None
    hosts: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    checks_signatures: bool = False

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
        # Claude through Bedrock, Vertex, OpenRouter or LiteLLM: the signature is still Anthropic's
        (r"claude",),
        checks_signatures=True,
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
        (r"(?:^|[/:])(?:gpt-(?!oss)|o[1-9](?:$|-)|codex|chatgpt|computer-use)",),
        checks_signatures=True,
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
        models=(r"deepseek",),
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
        "their signature, encrypted entries of the old text are dropped, summaries kept consistent. A "
        "reasoning.encrypted entry whose id is a tool call's id is that call's thought signature (Gemini), not "
        "a copy of the text: it stays, value for value, with its call. reasoning_details are passed back "
        "unmodified (preserving reasoning blocks).",
        (
            "https://openrouter.ai/docs/use-cases/reasoning-tokens",
            "https://openrouter.ai/docs/use-cases/reasoning-tokens#preserving-reasoning-blocks",
        ),
        hosts=("openrouter.ai",),
    ),
    UpstreamKind(
        "google",
        "Google Gemini (the OpenAI-compatible endpoint)",
        "plain",
        ("chat",),
        "the reasoning text is the model's thought summary, edited in place; what Gemini re-reads is its thought "
        "signature, which must come back exactly as received: on a tool call in extra_content.google."
        "thought_signature (a missing one is a 400 'Function call is missing a thought_signature'). "
        "iclr never edits, moves or drops a signature bound to a call.",
        (
            "https://ai.google.dev/gemini-api/docs/thought-signatures",
            "https://ai.google.dev/gemini-api/docs/openai",
        ),
        hosts=("generativelanguage.googleapis.com",),
        models=(r"gemini",),
        checks_signatures=True,
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
        # open-weight families: their reasoning is plain text wherever they are served
        models=(r"gpt-oss|qwen|qwq|glm|kimi|moonshot|minimax|llama|mistral|magistral|gemma|phi-\d|nemotron|olmo|granite|hermes|seed-oss|ernie|hunyuan|exaone|smollm",),
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
        checks_signatures=True,
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


_MODELS = [(re.compile(pattern, re.IGNORECASE), kind) for kind in KINDS for pattern in kind.models]
# Providers as transcripts name them (LiteLLM ``custom_llm_provider``, pi's ``provider``).
_PROVIDER_NAMES = {
    "anthropic": "anthropic", "bedrock": "anthropic", "vertex_ai": "anthropic", "amazon-bedrock": "anthropic",
    "openai": "openai", "azure": "openai", "openai-codex": "openai", "deepseek": "deepseek", "openrouter": "openrouter",
    "gemini": "google", "google": "google", "ollama": "local", "lm_studio": "local", "vllm": "local", "hosted_vllm": "local",
    "aws_bedrock": "anthropic", "azure_openai": "openai",  # Goose's provider_name values
}


def for_model(model: str) -> UpstreamKind | None:
    """The kind whose rule governs reasoning written by ``model`` wherever it is served
    (``claude-*``: Anthropic's signature, also through Bedrock or OpenRouter; ``deepseek-*``:
    plain), or ``None`` when the name says nothing."""
    return next((kind for pattern, kind in _MODELS if pattern.search(model)), None)


def for_record(model: str | None = None, base_url: str | None = None, provider: str | None = None) -> tuple[UpstreamKind | None, str]:
    """The kind whose rule applies to reasoning a transcript records, and why: the model
    first (a router passes the model's own signatures through), then the provider name, then
    the base URL. ``(None, why)`` when none of them tells.

    The same table as ``iclr serve`` (:func:`guess`), read from what a file records instead
    of the upstream URL.
    """
    if model and (kind := for_model(model)) is not None:
        return kind, f"model {model}"
    if provider and provider.lower() in _PROVIDER_NAMES:
        return _BY_NAME[_PROVIDER_NAMES[provider.lower()]], f"provider {provider}"
    if base_url:
        kind, why = guess(base_url)
        if kind.name != "unknown":
            return kind, f"base URL {base_url} ({why})"
    said = ", ".join(f"{k} {v}" for k, v in (("model", model), ("provider", provider), ("base URL", base_url)) if v)
    return None, (f"{said} is not in the table" if said else "the file names no model, provider or base URL")
