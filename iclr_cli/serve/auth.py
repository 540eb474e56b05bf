"""Client keys: who may use ``iclr serve`` (and so spend the upstream key it holds).

A gateway that spends a key authenticates its clients: LiteLLM's proxy checks a master key
and virtual keys, claude-code-router an ``APIKEY`` (``src/middleware/auth.ts``: a bearer
token or ``x-api-key``). ``iclr serve`` does the same when ``--client-key-env VAR`` (one key,
or several separated by commas or newlines) or ``--client-keys-file PATH`` (one key a line,
``#`` comments) gives it keys:

- A client presents its key the way its SDK sends an API key, so nothing but the key changes
  on the client's side: ``Authorization: Bearer KEY`` (the openai SDKs, Codex, LiteLLM; the
  anthropic SDK's ``auth_token``, Claude Code's ``ANTHROPIC_AUTH_TOKEN``) or ``x-api-key: KEY``
  (the anthropic SDK's ``api_key``, Claude Code's ``ANTHROPIC_API_KEY``). The proxy has no
  Gemini-native route (Gemini is reached through its OpenAI-compatible chat completions), so
  ``x-goog-api-key`` and ``?key=`` are not read.
- Every route needs a key except the health probes (a supervisor or load balancer asks them
  without one; they say nothing about conversations): ``/stats`` and ``/metrics`` included.
- Each presented value is compared with every configured key by ``hmac.compare_digest``, with
  no early exit, so the time taken says nothing about which key or how much of it matched.
- A missing or wrong key is answered 401 in the error shape of the API the path belongs to
  (:meth:`~iclr_cli.serve.dialect.Dialect.error_body`: Anthropic's under ``/v1/messages``,
  OpenAI's elsewhere), before the body is read; the answer never repeats what was sent.
- The client's key is the proxy's business only: :mod:`iclr_cli.serve.upstream` drops the
  client's ``Authorization`` and ``x-api-key`` and sends the ``--api-key-env`` key (or none).

:func:`check_exposure` is the start-up rule: a proxy that holds the upstream key and listens
beyond loopback must have client keys, or be told ``--allow-anyone``.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
from collections.abc import Callable, Iterable
from pathlib import Path

from iclr_cli.errors import InputError, UsageError

# Paths answered without a key: what health.py serves (a probe carries no credentials).
OPEN_PATHS = frozenset({"/health/liveliness", "/health/liveness", "/health/readiness", "/healthz"})
MISSING = "iclr serve: this proxy needs a client key; send it as the API key (Authorization: Bearer KEY, or x-api-key: KEY)"
WRONG = "iclr serve: the API key sent is not one of this proxy's client keys"
log = logging.getLogger("iclr.serve")


class ClientKeys:
    """The keys a client may present (at least one). Never shown: ``repr`` gives the count.

    Raises:
        ValueError: for no key at all.
    """

    __slots__ = ("_keys",)

    def __init__(self, keys: Iterable[str]):
        self._keys = tuple(k.encode("ascii") for k in dict.fromkeys(keys))
        if not self._keys:
            raise ValueError("no client key")

    def __len__(self) -> int:
        return len(self._keys)

    def __repr__(self) -> str:
        return f"ClientKeys({len(self._keys)} keys)"

    def accepts(self, presented: Iterable[bytes]) -> bool:
        """Whether any of the ``presented`` values (raw header bytes) is one of the keys;
        every value is compared with every key (see module docstring)."""
        ok = False
        for value in presented:
            for key in self._keys:
                ok |= hmac.compare_digest(key, value)
        return ok


def _checked(key: str, where: str, *, source: str | None = None, line: int | None = None) -> str:
    """``key`` if it can travel in a header as a token: printable ASCII, no spaces."""
    if all("!" <= c <= "~" for c in key):
        return key
    problem = "a client key is printable ASCII without spaces (an HTTP header carries it as it is)"
    if source is not None:
        raise InputError(source, problem, line=line)
    raise UsageError(f"{where}: {problem}")


def from_env(name: str, value: str | None) -> list[str]:
    """The keys in environment variable ``name`` (its ``value``): one, or several separated
    by commas or newlines; blanks around them are dropped.

    Raises:
        UsageError: the variable is not set or holds no key, or a key has a space or a
            character outside printable ASCII.
    """
    if value is None:
        raise UsageError(f"--client-key-env {name}: the environment variable is not set")
    keys = [k.strip() for k in value.replace("\n", ",").split(",")]
    keys = [_checked(k, f"--client-key-env {name}") for k in keys if k]
    if not keys:
        raise UsageError(f"--client-key-env {name}: the environment variable holds no key (one, or several separated by commas or newlines)")
    return keys


def from_file(path: Path) -> list[str]:
    """The keys in ``path``: one a line; blank lines and lines starting with ``#`` are skipped,
    blanks around a key dropped.

    Raises:
        InputError: the file cannot be read, holds no key, or a line is not one key (the
            file and line named).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(str(path), f"cannot read the client keys file ({exc.strerror if isinstance(exc, OSError) else exc})") from None
    keys = []
    for n, line in enumerate(text.splitlines(), 1):
        key = line.strip()
        if key and not key.startswith("#"):
            keys.append(_checked(key, "", source=str(path), line=n))
    if not keys:
        raise InputError(str(path), "no client key in the file (one key a line; # starts a comment)")
    return keys


def is_loopback(host: str) -> bool:
    """Whether ``--host`` keeps the proxy on this machine (``localhost``, 127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a name: it may resolve to anything
        return False


def check_exposure(host: str, holds_key: bool, keys: ClientKeys | None, allow_anyone: bool) -> None:
    """Refuse to serve the upstream key to anyone who reaches ``host``.

    Raises:
        UsageError: ``holds_key`` (``--api-key-env``) and ``host`` beyond loopback, without
            client keys or ``allow_anyone``.
    """
    if holds_key and keys is None and not allow_anyone and not is_loopback(host):
        raise UsageError(
            f"--host {host} with --api-key-env: anyone who reaches this address would spend your upstream key. "
            "Give clients keys (--client-key-env VAR or --client-keys-file PATH; they send one as their API key), "
            "listen on 127.0.0.1, or add --allow-anyone if everyone who can reach it may use the key")


def presented(headers: Iterable[tuple[bytes, bytes]]) -> list[bytes]:
    """The values a request offers as its key (raw ASGI headers): a bearer token of
    ``Authorization`` and the whole of ``x-api-key``."""
    out = []
    for name, value in headers:
        name = name.lower()
        if name == b"authorization":
            scheme, _, token = value.strip().partition(b" ")
            if scheme.lower() == b"bearer" and token.strip():
                out.append(token.strip())
        elif name == b"x-api-key" and value.strip():
            out.append(value.strip())
    return out


class RequireClientKey:
    """ASGI middleware: a request to any path but :data:`OPEN_PATHS` without one of ``keys``
    gets 401 with ``error_body(path, message)`` (JSON bytes) and ``refused()`` is called;
    the rest go to ``app`` untouched (streamed answers included: nothing is buffered)."""

    def __init__(self, app, keys: ClientKeys, error_body: Callable[[str, str], bytes], refused: Callable[[], None] = lambda: None):
        self.app = app
        self.keys = keys
        self.error_body = error_body
        self.refused = refused

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            return await self.app(scope, receive, send)
        offered = presented(scope["headers"])
        if self.keys.accepts(offered):
            return await self.app(scope, receive, send)
        self.refused()
        client = scope.get("client") or ("?", 0)
        # the path and the client's address only: never a header's value
        log.info("a request to %s from %s was answered 401: %s", scope["path"], client[0], "a key that is not a client key" if offered else "no key")
        body = self.error_body(scope["path"], WRONG if offered else MISSING)
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", b'Bearer realm="iclr serve"')]})
        await send({"type": "http.response.body", "body": body})
