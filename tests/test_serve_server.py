"""End to end: the openai SDK -> ``iclr serve`` -> a real llama.cpp server (llama-cpp-python)
serving the embedded SmolLM2-135M GGUF on 127.0.0.1.

The history holds an earlier assistant turn with inline ``<think>`` reasoning of several
blocks; the proxy compresses it before llama.cpp sees it, and llama.cpp's own usage reaches
``/stats``. Skipped with the reason (naming ``scripts/setup.sh --with-llama-server``) when
``llama_cpp.server`` cannot be imported.
"""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.server

from replay_fixtures import skip_without_llama_server  # noqa: E402

try:
    import llama_cpp.server  # noqa: F401
except Exception as exc:  # not installed, or still building in the shared venv
    skip_without_llama_server(f"llama_cpp.server is not importable ({type(exc).__name__}: {exc})", module_level=True)
pytest.importorskip("starlette")
openai = pytest.importorskip("openai")

from serve_fixtures import proxy  # noqa: E402
from test_replay_server import llama_server  # noqa: E402,F401  (the module-scoped server fixture)

THINK = "The user wants a greeting.\n\nI could say hello.\n\nOr I could say hi.\n\nHello is friendlier."
HISTORY = [
    {"role": "system", "content": "You are a helpful assistant. Answer in a few words."},
    {"role": "user", "content": "Greet me."},
    {"role": "assistant", "content": f"<think>{THINK}</think>Hello!"},
    {"role": "user", "content": "Now say goodbye."},
]


def test_openai_sdk_through_serve_to_llama_cpp(llama_server):  # noqa: F811
    with proxy(llama_server, variant="iclr") as (url, state):
        sdk = openai.OpenAI(base_url=url, api_key="no-key", max_retries=0, timeout=120)
        assert [m.id for m in sdk.models.list().data]  # passed through
        out = sdk.chat.completions.create(model="any", messages=HISTORY, max_tokens=16, temperature=0)
        assert out.choices[0].message.content
        chunks = list(sdk.chat.completions.create(model="any", messages=HISTORY, max_tokens=16, temperature=0, stream=True))
        assert len(chunks) > 2 and "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        stats = httpx.get(url.removesuffix("/v1") + "/stats").json()
    (conv,) = [c for c in stats["conversations"].values() if c["steps_compressed"]]
    assert conv["steps_compressed"] == 1 and conv["reasoning_tokens_removed"] > 0  # compressed once, reused
    assert conv["requests"] == 2 and conv["input_tokens"] > 0  # llama.cpp's own usage
    stored = next(iter(state.conversations()[-1].steps.values()))
    assert stored.texts[0].count("[SKIP]") == 3 and stored.failure is None


def test_llama_cpp_python_serves_neither_messages_nor_responses(llama_server):  # noqa: F811
    """llama-cpp-python's server has no /v1/messages or /v1/responses route (llama.cpp's own
    llama-server has /v1/messages): its 404 reaches the client through the proxy unchanged, so
    Claude Code and Codex need another local server (docs/serve.md, "Each provider's reasoning rules")."""
    with proxy(llama_server, variant="iclr") as (url, state):
        messages = httpx.post(url + "/messages", json={"model": "any", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}, timeout=60)
        responses = httpx.post(url + "/responses", json={"model": "any", "input": "hi"}, timeout=60)
        stats = httpx.get(url.removesuffix("/v1") + "/stats").json()
    assert messages.status_code == 404 and responses.status_code == 404
    assert stats["total"]["upstream_errors"] == 2 and stats["upstream_kind"] == "local"
