"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1, for replay tests.

Each test gives a script: a list of replies served in order, each either a
:class:`Reply` or a function ``(request_body, index) -> Reply``. When the script runs out the
server answers with a ``submit`` tool call, so every agent run ends. Every request body is
recorded in ``server.requests`` (parsed JSON), in arrival order.
"""

from __future__ import annotations

import contextlib
import http.server
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

_ids = itertools.count()


@dataclass
class Reply:
    """One HTTP answer: status, JSON body, extra headers, and a delay before answering."""

    body: dict
    status: int = 200
    headers: dict = field(default_factory=dict)
    delay_s: float = 0.0


def usage(prompt: int = 100, completion: int = 20, **extra) -> dict:
    """A ``usage`` object; extra keys (``prompt_tokens_details``...) are merged in."""
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion, **extra}


def call(name: str, arguments: dict | str, call_id: str | None = None) -> dict:
    """One OpenAI tool call."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id or f"call_{next(_ids)}", "type": "function", "function": {"name": name, "arguments": args}}


def completion(
    content: str | None = None,
    tool_calls: list[dict] | None = None,
    *,
    reasoning_content: str | None = None,
    reasoning: str | None = None,
    usage_: dict | None = None,
    finish_reason: str | None = None,
) -> Reply:
    """A 200 chat.completion reply with one choice."""
    message: dict = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    if reasoning_content is not None:
        message["reasoning_content"] = reasoning_content
    if reasoning is not None:
        message["reasoning"] = reasoning
    body = {
        "id": f"chatcmpl-{next(_ids)}",
        "object": "chat.completion",
        "created": 0,
        "model": "fake-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop")}],
    }
    if usage_ is not False:
        body["usage"] = usage_ or usage()
    return Reply(body)


def error(status: int, message: str = "try again", **headers) -> Reply:
    """An error reply; pass ``retry_after_ms="1"`` style headers as keyword arguments."""
    return Reply({"error": {"message": message, "type": "error"}}, status=status, headers={k.replace("_", "-"): v for k, v in headers.items()})


def submit(answer: str = "") -> Reply:
    return completion(None, [call("submit", {"answer": answer})])


class FakeOpenAI:
    """The server (see module docstring); ``url`` is the base URL to give the client."""

    def __init__(self, script: list[Reply | Callable[[dict, int], Reply]] | None = None):
        self.script = list(script or [])
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.url = ""

    def next_reply(self, body: dict) -> Reply:
        with self.lock:
            index = len(self.requests)
            self.requests.append(body)
            item = self.script[index] if index < len(self.script) else submit("done")
        return item(body, index) if callable(item) else item

    @property
    def chat_requests(self) -> list[dict]:
        return self.requests

    def handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                reply = server.next_reply(body)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                data = json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)

        return Handler


@contextlib.contextmanager
def fake_openai(script: list | None = None) -> Iterator[FakeOpenAI]:
    """Start a :class:`FakeOpenAI` on a free port; ``server.url`` ends in ``/v1``."""
    fake = FakeOpenAI(script)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), fake.handler())
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    try:
        yield fake
    finally:
        httpd.shutdown()
        httpd.server_close()


REPO = Path(__file__).resolve().parents[1]


def make_session(tmp_path: Path, url: str, *, tasks, variants, seeds: int = 1, max_steps: int = 6, proxy_model: str = "fake", **kwargs):
    """A :class:`iclr_cli.replay.session.Session` against ``url`` writing to ``tmp_path/out``."""
    from iclr_cli.render.output import Output
    from iclr_cli.replay.session import build_run

    options = dict(ratio=0.8, max_tokens=42_000, overflow="window", dtype="float32", device=None, split="paragraph")
    kwargs.setdefault("max_retries", 2)
    kwargs.setdefault("request_timeout", 10.0)
    return build_run(
        Output(None, quiet=True),
        tasks=tasks,
        variants=variants,
        model="fake-model",
        base_url=url,
        api_key_env=None,
        seeds=seeds,
        max_steps=max_steps,
        out=tmp_path / "out",
        proxy_model=proxy_model,
        scorer_options=options,
        **kwargs,
    )


LLAMA_SERVER_FLAG = "bash scripts/setup.sh --with-llama-server"


def skip_without_llama_server(reason: str, module_level: bool = False) -> None:
    """Skip (or, where ``ICLR_WITH_LLAMA_SERVER=1`` asked for it, fail) a test that needs
    ``llama_cpp.server``, naming the set-up flag that builds it.

    scripts/setup.sh builds llama-cpp-python[server] only with ``--with-llama-server`` (a source
    build of 5-45 minutes that scoring does not need); .ci/run sets ``ICLR_WITH_LLAMA_SERVER=1``,
    so in CI a missing server is a failure, never a silent skip.
    """
    import os

    import pytest

    message = f"{reason}; it is built only on request: {LLAMA_SERVER_FLAG} (or ICLR_WITH_LLAMA_SERVER=1)"
    if os.environ.get("ICLR_WITH_LLAMA_SERVER") == "1":
        pytest.fail(f"ICLR_WITH_LLAMA_SERVER=1 but {message}")
    pytest.skip(message, allow_module_level=module_level)
