"""Request bodies a client compressed (``Content-Encoding``, :mod:`iclr_cli.serve.encoding`).

Codex sends zstd bodies to the ChatGPT backend and so to a proxy in its place; other clients
gzip. Each coding is decoded, the request compressed as any other, and sent upstream as
identity without the header; a coding no decoder here reads is forwarded as sent, logged and
counted; a body that does not decode is a 400 in the API's error shape; one that inflates past
``--max-body-mb`` a 413. The bytes the upstream received, the headers and ``/stats`` are checked.
"""

from __future__ import annotations

import gzip
import logging
import zlib

import httpx
import orjson
import pytest
import zstandard

from serve_fixtures import proxy, scripted_upstream
from test_serve_eager import responder

from iclr_cli.serve.encoding import Undecodable, codings, decode

pytest.importorskip("starlette")

REASONING = "Look at the file first.\n\nMaybe grep for it.\n\nThe answer is in line 3.\n\nCheck the tests too.\n\nThen run them."


def _history(steps: int) -> dict:
    messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Fix the bug."}]
    for i in range(steps):
        messages += [{"role": "assistant", "content": None, "reasoning_content": REASONING,
                      "tool_calls": [{"id": f"call_{i}", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]},
                     {"role": "tool", "tool_call_id": f"call_{i}", "content": f"out {i}"}]
    return {"model": "fake-model", "messages": messages}


COMPRESS = {
    "gzip": gzip.compress,
    "deflate": zlib.compress,
    "zstd": lambda data: zstandard.ZstdCompressor().compress(data),
    "gzip, zstd": lambda data: zstandard.ZstdCompressor().compress(gzip.compress(data)),
}


@pytest.mark.parametrize("coding", list(COMPRESS))
def test_a_compressed_body_is_decoded_compressed_and_sent_as_identity(coding):
    plain = orjson.dumps(_history(2))
    with scripted_upstream(responder(5)) as up, proxy(up.url) as (url, _):
        for body in (orjson.dumps(_history(1)), plain):
            answer = httpx.post(url + "/chat/completions", content=COMPRESS[coding](body),
                                headers={"content-type": "application/json", "content-encoding": coding}, timeout=30)
            assert answer.status_code == 200, answer.text
        stats = httpx.get(url.removesuffix("/v1") + "/stats").json()
    sent = orjson.loads(up.raw[-1])  # plain JSON: the upstream parsed it
    assert "content-encoding" not in up.headers[-1]
    assert [m["reasoning_content"].count("[SKIP]") for m in sent["messages"] if m["role"] == "assistant"] == [4, 4]
    assert stats["request_bodies"] == {coding: {"decoded": 2}}
    assert stats["total"]["steps_compressed"] >= 1


def test_a_coding_without_a_decoder_is_forwarded_as_sent_logged_and_counted(caplog):
    body = orjson.dumps(_history(1))
    with caplog.at_level(logging.WARNING, logger="iclr.serve"), scripted_upstream(responder(5)) as up, proxy(up.url) as (url, _):
        for _ in range(2):
            answer = httpx.post(url + "/chat/completions", content=body, headers={"content-type": "application/json", "content-encoding": "compress"}, timeout=30)
            assert answer.status_code == 200
        stats = httpx.get(url.removesuffix("/v1") + "/stats").json()
    assert up.raw == [body, body] and up.headers[-1]["content-encoding"] == "compress"
    assert stats["request_bodies"] == {"compress": {"passed_through": 2}}
    said = [r.getMessage() for r in caplog.records if "Content-Encoding compress" in r.getMessage()]
    assert len(said) == 1 and "forwarded as sent and not compressed" in said[0]


@pytest.mark.parametrize("path, shape", [("/chat/completions", "openai"), ("/messages", "anthropic")])
def test_a_body_that_does_not_decode_is_a_400_in_the_apis_shape(path, shape):
    broken = gzip.compress(orjson.dumps(_history(1)))[:-12]  # cut short
    with scripted_upstream(responder(5)) as up, proxy(up.url) as (url, _):
        answer = httpx.post(url + path, content=broken, headers={"content-type": "application/json", "content-encoding": "gzip"}, timeout=30)
        stats = httpx.get(url.removesuffix("/v1") + "/stats").json()
    assert answer.status_code == 400 and not up.raw
    error = answer.json()
    if shape == "anthropic":
        assert error["type"] == "error" and "does not decode" in error["error"]["message"]
    else:
        assert error["error"]["code"] == "bad_content_encoding" and "Content-Encoding: gzip" in error["error"]["message"]
    assert stats["request_bodies"] == {"gzip": {"corrupt": 1}}


def test_a_body_that_inflates_past_the_cap_is_a_413():
    bomb = gzip.compress(b" " * (3 * 1024 * 1024))  # 3 MiB of spaces in a few KB
    with scripted_upstream(responder(5)) as up, proxy(up.url, max_body_bytes=1024 * 1024) as (url, _):
        answer = httpx.post(url + "/chat/completions", content=bomb, headers={"content-encoding": "gzip"}, timeout=30)
    assert answer.status_code == 413 and not up.raw and len(bomb) < 64 * 1024


def test_the_decoder_reads_codings_in_order_and_names_what_fails():
    data = b'{"a": 1}'
    assert codings("gzip, identity, zstd") == ["gzip", "zstd"] and decode(data, None, 100) is None and decode(data, "identity", 100) is None
    assert decode(zstandard.ZstdCompressor().compress(gzip.compress(data)), "gzip, zstd", 100) == data
    assert decode(zlib.compress(data)[2:-4], "deflate", 100) == data  # raw deflate, as some clients send it
    with pytest.raises(Undecodable) as exc:
        decode(b"not zstd", "zstd", 100)
    assert (exc.value.coding, exc.value.kind) == ("zstd", "corrupt")
    with pytest.raises(Undecodable) as exc:
        decode(gzip.compress(b"x" * 1000), "gzip", 100)
    assert (exc.value.coding, exc.value.kind) == ("gzip", "too_large")
