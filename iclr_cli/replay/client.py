"""A small OpenAI-compatible chat-completions client (DeepSeek, vLLM, SGLang, llama.cpp, OpenRouter).

Transport only: messages go out as given (provider quirks are applied before, in
:mod:`iclr_cli.replay.provider`), the reply comes back as the raw ``message`` dict plus parsed
:class:`~iclr_cli.replay.accounting.Usage`. No streaming.

Retries are the ``openai`` package's own: on connection errors, timeouts, 408, 409, 429 and
5xx, with exponential backoff (0.5 s doubling to 8 s, 0-25 % jitter) that honours
``Retry-After`` / ``retry-after-ms`` up to two minutes; ``max_retries`` retries per request.
The raw body is read with orjson so provider fields the SDK does not model
(``reasoning_content``, ``reasoning``, ``prompt_cache_hit_tokens``) are never lost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from iclr_cli.errors import IclrError
from iclr_cli.jsonio import loads
from iclr_cli.replay.accounting import Usage, parse_usage


class ApiError(IclrError):
    """The endpoint failed after all retries, or answered something that is not a completion."""


@dataclass(frozen=True)
class ClientConfig:
    """Where and how to send chat-completions requests.

    Attributes:
        base_url: endpoint root, e.g. ``https://api.deepseek.com`` or ``http://127.0.0.1:8080/v1``.
        model: the ``model`` field of every request.
        api_key: bearer token (local servers accept any non-empty string).
        timeout_s: seconds per HTTP attempt before it counts as a timeout (and is retried).
        max_retries: retries per request on 408/409/429/5xx, connection errors and timeouts.
        temperature: sampling temperature; ``None`` leaves the provider's default.
        max_output_tokens: ``max_tokens`` of each request; ``None`` leaves the provider's default.
        extra_body: provider-specific request fields merged into the body
            (e.g. ``{"thinking": {"type": "enabled"}}``).
    """

    base_url: str
    model: str
    api_key: str = "no-key"
    timeout_s: float = 300.0
    max_retries: int = 6
    temperature: float | None = None
    max_output_tokens: int | None = None
    extra_body: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class ChatResponse:
    """One completion: the first choice's ``message`` dict, why it stopped, and its usage.

    ``raw_usage`` is the provider's ``usage`` object as sent (``None`` when absent).
    """

    message: dict
    finish_reason: str | None
    usage: Usage
    raw_usage: dict | None


class ChatClient:
    """Sends chat-completions requests; thread-safe (one HTTP connection pool).

    ``http_client`` lets tests pass an ``httpx.Client`` with a mock transport.
    """

    def __init__(self, config: ClientConfig, *, http_client=None):
        import openai  # imported here so `iclr --help` stays fast

        self.config = config
        self._openai = openai
        self._client = openai.OpenAI(
            base_url=config.base_url,
            api_key=config.api_key or "no-key",
            timeout=config.timeout_s,
            max_retries=config.max_retries,
            http_client=http_client,
        )

    def complete(self, messages: Sequence[Mapping], tools: Sequence[Mapping] | None, *, seed: int | None = None) -> ChatResponse:
        """Send one request; returns the first choice. ``seed`` is sent as the request's
        ``seed`` (sampling seed on OpenAI, vLLM, llama.cpp) when given.

        Raises:
            ApiError: on a non-retryable HTTP error, when retries are exhausted, or when the
                body holds no ``choices[0].message``.
        """
        kwargs: dict = {"model": self.config.model, "messages": list(messages)}
        if tools:
            kwargs["tools"] = list(tools)
        if self.config.temperature is not None:
            kwargs["temperature"] = self.config.temperature
        if self.config.max_output_tokens is not None:
            kwargs["max_tokens"] = self.config.max_output_tokens
        if seed is not None:
            kwargs["seed"] = seed
        if self.config.extra_body:
            kwargs["extra_body"] = dict(self.config.extra_body)
        oa = self._openai
        try:
            raw = self._client.chat.completions.with_raw_response.create(**kwargs)
            body = loads(raw.content)
        except oa.APIStatusError as exc:
            detail = exc.body if exc.body is not None else exc.response.text
            raise ApiError(f"{self.config.base_url}: HTTP {exc.status_code}: {_short(str(detail))}") from exc
        except oa.APITimeoutError as exc:
            raise ApiError(f"{self.config.base_url}: timed out after {self.config.max_retries} retries") from exc
        except oa.APIConnectionError as exc:
            raise ApiError(f"{self.config.base_url}: connection failed after {self.config.max_retries} retries: {exc}") from exc
        except ValueError as exc:
            raise ApiError(f"{self.config.base_url}: response is not JSON: {exc}") from exc
        return _parse(body, self.config.base_url)


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _parse(body, where: str) -> ChatResponse:
    if not isinstance(body, dict):
        raise ApiError(f"{where}: response is not a JSON object")
    if "error" in body and "choices" not in body:
        raise ApiError(f"{where}: provider error: {_short(str(body['error']))}")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ApiError(f"{where}: response has no choices")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise ApiError(f"{where}: field 'choices[0].message': missing or not an object")
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else None
    return ChatResponse(message, choices[0].get("finish_reason"), parse_usage(usage), usage)
