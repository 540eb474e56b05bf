"""Client keys of ``iclr serve`` (:mod:`iclr_cli.serve.auth`): who may use the proxy.

Against a scripted upstream: every wire (chat completions, Responses, Messages, a passthrough
path, ``/stats``, ``/metrics``) answers 401 in its API's shape without a key or with a wrong
one, and serves the right one however the client's SDK sends it; the health probes stay open;
the upstream gets the proxy's key and never the client's; the process refuses to hold the
upstream key on the network without client keys, and never logs a key.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from iclr_cli.errors import InputError, UsageError
from iclr_cli.serve import auth
from iclr_cli.serve.auth import MISSING, WRONG, ClientKeys
from replay_fixtures import REPO, completion
from serve_fixtures import proxy, scripted_upstream, stream_of
from wire_fixtures import anthropic_reply, output_message, responses_reply, text

pytest.importorskip("starlette")

KEYS = ("ck-alpha-7f3e", "ck-beta-91d2")
UPSTREAM_KEY = "sk-upstream-SECRET-456"
WRONG_KEY = "ck-WRONG-guess-123"
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
RESPONSES = {"model": "gpt", "input": "hi"}
MESSAGES = {"model": "claude", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
OPENAI_REFUSALS = {
    "missing": {"error": {"message": MISSING, "type": "invalid_request_error", "code": "invalid_api_key"}},
    "wrong": {"error": {"message": WRONG, "type": "invalid_request_error", "code": "invalid_api_key"}},
}
ANTHROPIC_REFUSALS = {
    "missing": {"type": "error", "error": {"type": "authentication_error", "message": MISSING}},
    "wrong": {"type": "error", "error": {"type": "authentication_error", "message": WRONG}},
}
# (method, path under the root, JSON body, the refusal's shape)
ROUTES = [
    ("POST", "/v1/chat/completions", CHAT, OPENAI_REFUSALS),
    ("POST", "/chat/completions", CHAT, OPENAI_REFUSALS),
    ("POST", "/v1/responses", RESPONSES, OPENAI_REFUSALS),
    ("POST", "/v1/messages", MESSAGES, ANTHROPIC_REFUSALS),
    ("POST", "/v1/messages/count_tokens", MESSAGES, ANTHROPIC_REFUSALS),
    ("GET", "/v1/models", None, OPENAI_REFUSALS),
    ("GET", "/stats", None, OPENAI_REFUSALS),
    ("GET", "/metrics", None, OPENAI_REFUSALS),
]


def _by_path(up):
    """A script item answering each upstream path in its own wire format."""
    def reply(body, index):
        path = up.paths[index]
        if path.endswith("/responses"):
            return responses_reply([output_message("ok")])
        if path.endswith("/messages"):
            return anthropic_reply([text("ok")])
        return stream_of("ok") if body.get("stream") else completion("ok")
    return reply


def _upstream():
    up = scripted_upstream()
    fake = up.__enter__()
    fake.script = [_by_path(fake)] * 100
    return up, fake


@pytest.fixture
def guarded():
    """(root URL, scripted upstream) of a proxy with two client keys and an upstream key."""
    up_cm, up = _upstream()
    try:
        with proxy(up.url, client_keys=ClientKeys(KEYS), api_key=UPSTREAM_KEY) as (url, _):
            yield url.removesuffix("/v1"), up
    finally:
        up_cm.__exit__(None, None, None)


def _ask(root, method, path, body, headers):
    return httpx.request(method, root + path, json=body, headers=headers, timeout=20)


@pytest.mark.parametrize("method, path, body, shapes", ROUTES, ids=[r[1] for r in ROUTES])
def test_each_route_refuses_a_missing_or_wrong_key_in_its_wire_shape_and_serves_the_right_one(guarded, method, path, body, shapes):
    root, up = guarded
    missing = _ask(root, method, path, body, {})
    wrong = _ask(root, method, path, body, {"Authorization": f"Bearer {WRONG_KEY}"})
    wrong_x = _ask(root, method, path, body, {"x-api-key": WRONG_KEY})
    assert (missing.status_code, wrong.status_code, wrong_x.status_code) == (401, 401, 401)
    assert missing.json() == shapes["missing"]
    assert wrong.json() == wrong_x.json() == shapes["wrong"]
    assert missing.headers["www-authenticate"] == 'Bearer realm="iclr serve"'
    assert WRONG_KEY not in wrong.text
    assert up.paths == [] and up.get_headers == []  # nothing refused went upstream
    bearer = _ask(root, method, path, body, {"Authorization": f"Bearer {KEYS[0]}"})
    x_api_key = _ask(root, method, path, body, {"x-api-key": KEYS[1]})
    assert bearer.status_code == x_api_key.status_code == 200, bearer.text


def test_health_probes_need_no_key(guarded):
    root, _ = guarded
    for path in ("/health/liveliness", "/health/liveness", "/health/readiness", "/healthz"):
        assert httpx.get(root + path).status_code == 200, path
        assert httpx.head(root + path).status_code == 200, path


def test_the_upstream_gets_the_proxys_key_never_the_clients(guarded):
    root, up = guarded
    assert _ask(root, "POST", "/v1/chat/completions", CHAT, {"Authorization": f"Bearer {KEYS[0]}"}).status_code == 200
    assert _ask(root, "POST", "/v1/messages", MESSAGES, {"x-api-key": KEYS[1], "anthropic-version": "2023-06-01"}).status_code == 200
    # Claude Code with ANTHROPIC_AUTH_TOKEN: a bearer token to /v1/messages
    assert _ask(root, "POST", "/v1/messages", MESSAGES, {"Authorization": f"bearer {KEYS[0]}"}).status_code == 200
    assert _ask(root, "GET", "/v1/models", None, {"Authorization": f"Bearer {KEYS[1]}"}).status_code == 200
    chat, messages, token, = up.headers
    assert chat["authorization"] == f"Bearer {UPSTREAM_KEY}" and "x-api-key" not in chat
    assert messages["x-api-key"] == UPSTREAM_KEY and "authorization" not in messages
    assert messages["anthropic-version"] == "2023-06-01"
    assert token["authorization"] == f"Bearer {UPSTREAM_KEY}" and "x-api-key" not in token
    assert up.get_headers[0]["authorization"] == f"Bearer {UPSTREAM_KEY}"
    sent = repr(up.headers) + repr(up.get_headers)
    assert not any(k in sent for k in KEYS)


def test_stats_and_metrics_count_refusals_and_hold_no_key(guarded):
    root, _ = guarded
    for headers in ({}, {"x-api-key": WRONG_KEY}, {"Authorization": f"Basic {KEYS[0]}"}):  # Basic is not a bearer token
        assert _ask(root, "POST", "/v1/chat/completions", CHAT, headers).status_code == 401
    stats = httpx.get(root + "/stats", headers={"Authorization": f"Bearer {KEYS[0]}"})
    metrics = httpx.get(root + "/metrics", headers={"x-api-key": KEYS[0]}).text
    assert stats.json()["client_keys"] == 2 and stats.json()["unauthorized_requests"] == 3
    assert "iclr_serve_unauthorized_requests_total 3.0" in metrics
    assert not any(k in stats.text + metrics for k in (*KEYS, WRONG_KEY, UPSTREAM_KEY))


def test_client_keys_without_an_upstream_key_forward_no_key_at_all():
    up_cm, up = _upstream()
    try:
        with proxy(up.url, client_keys=ClientKeys(KEYS[:1])) as (url, _):
            resp = httpx.post(url + "/chat/completions", json=CHAT, headers={"Authorization": f"Bearer {KEYS[0]}", "x-api-key": KEYS[0]})
            stats = httpx.get(url.removesuffix("/v1") + "/stats", headers={"x-api-key": KEYS[0]}).json()
    finally:
        up_cm.__exit__(None, None, None)
    assert resp.status_code == 200 and stats["client_keys"] == 1
    assert "authorization" not in up.headers[0] and "x-api-key" not in up.headers[0]


def test_without_client_keys_the_client_key_is_still_forwarded():
    up_cm, up = _upstream()
    try:
        with proxy(up.url) as (url, _):
            resp = httpx.post(url + "/chat/completions", json=CHAT, headers={"Authorization": "Bearer sk-users-own"})
            stats = httpx.get(url.removesuffix("/v1") + "/stats").json()
    finally:
        up_cm.__exit__(None, None, None)
    assert resp.status_code == 200 and up.headers[0]["authorization"] == "Bearer sk-users-own"
    assert stats["client_keys"] == 0 and stats["unauthorized_requests"] == 0


# -- the real SDKs -------------------------------------------------------------------------

def test_the_openai_sdk_with_and_without_the_key(guarded):
    openai = pytest.importorskip("openai")
    root, up = guarded
    good = openai.OpenAI(base_url=root + "/v1", api_key=KEYS[0], max_retries=0)
    assert good.chat.completions.create(**CHAT).choices[0].message.content == "ok"
    assert good.responses.create(**RESPONSES).output_text == "ok"
    streamed = "".join(c.choices[0].delta.content or "" for c in good.chat.completions.create(**CHAT, stream=True) if c.choices)
    assert streamed == "ok"  # relayed chunk by chunk through the key check
    bad = openai.OpenAI(base_url=root + "/v1", api_key=WRONG_KEY, max_retries=0)  # the SDK itself refuses no key
    with pytest.raises(openai.AuthenticationError) as info:
        bad.chat.completions.create(**CHAT)
    assert info.value.status_code == 401 and info.value.code == "invalid_api_key" and info.value.body["message"] == WRONG
    with pytest.raises(openai.AuthenticationError):
        bad.responses.create(**RESPONSES)
    assert [p.rsplit("/", 1)[-1] for p in up.paths] == ["completions", "responses", "completions"]
    assert all(h["authorization"] == f"Bearer {UPSTREAM_KEY}" for h in up.headers)


def test_the_anthropic_sdk_with_an_api_key_or_an_auth_token(guarded):
    anthropic = pytest.importorskip("anthropic")
    root, up = guarded
    by_key = anthropic.Anthropic(base_url=root, api_key=KEYS[1], max_retries=0)
    by_token = anthropic.Anthropic(base_url=root, auth_token=KEYS[0], max_retries=0)
    assert by_key.messages.create(**MESSAGES).content[0].text == "ok"
    assert by_token.messages.create(**MESSAGES).content[0].text == "ok"
    with pytest.raises(anthropic.AuthenticationError) as info:
        anthropic.Anthropic(base_url=root, api_key=WRONG_KEY, max_retries=0).messages.create(**MESSAGES)
    assert info.value.status_code == 401
    assert info.value.body == {"type": "error", "error": {"type": "authentication_error", "message": WRONG}}
    # the header each SDK version puts an api_key in (x-api-key, or a bearer token) carries the upstream key
    assert len(up.paths) == 2
    for sent in up.headers:
        assert {sent.get("x-api-key"), sent.get("authorization")} - {None} <= {UPSTREAM_KEY, f"Bearer {UPSTREAM_KEY}"}
        assert "x-api-key" in sent or "authorization" in sent
    assert not any(k in repr(up.headers) for k in KEYS)


# -- the keys, read and checked ------------------------------------------------------------

def test_keys_from_the_environment_split_on_commas_and_newlines():
    assert auth.from_env("K", " ck-1 ,ck-2\nck-3\n\n") == ["ck-1", "ck-2", "ck-3"]
    with pytest.raises(UsageError, match="^--client-key-env K: the environment variable is not set$"):
        auth.from_env("K", None)
    with pytest.raises(UsageError, match="^--client-key-env K: the environment variable holds no key"):
        auth.from_env("K", " , \n")
    with pytest.raises(UsageError, match="^--client-key-env K: a client key is printable ASCII without spaces"):
        auth.from_env("K", "ck-1, two words")


def test_keys_from_a_file_skip_comments_and_name_a_bad_line(tmp_path):
    good = tmp_path / "keys"
    good.write_text("# team keys\nck-ann\n\n  ck-bob  \n#ck-old\n", encoding="utf-8")
    assert auth.from_file(good) == ["ck-ann", "ck-bob"]
    bad = tmp_path / "bad"
    bad.write_text("ck-ann\nck bob\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        auth.from_file(bad)
    assert str(info.value) == f"{bad}:2: a client key is printable ASCII without spaces (an HTTP header carries it as it is)"
    empty = tmp_path / "empty"
    empty.write_text("# none yet\n", encoding="utf-8")
    with pytest.raises(InputError, match="no client key in the file"):
        auth.from_file(empty)
    with pytest.raises(InputError, match="cannot read the client keys file"):
        auth.from_file(tmp_path / "absent")


def test_a_key_matches_only_whole_and_is_never_shown():
    keys = ClientKeys(["ck-alpha", "ck-beta", "ck-alpha"])
    assert len(keys) == 2 and repr(keys) == "ClientKeys(2 keys)"
    assert keys.accepts([b"ck-beta"]) and keys.accepts([b"nope", b"ck-alpha"])
    assert not keys.accepts([b"ck-alph"]) and not keys.accepts([b"ck-alphaX"]) and not keys.accepts([])
    assert auth.presented([(b"Authorization", b"Bearer  ck-1 "), (b"x-api-key", b"ck-2"), (b"authorization", b"Basic ck-3")]) == [b"ck-1", b"ck-2"]
    with pytest.raises(ValueError):
        ClientKeys([])


@pytest.mark.parametrize("host, loopback", [("127.0.0.1", True), ("127.0.0.2", True), ("localhost", True), ("::1", True),
                                            ("[::1]", True), ("0.0.0.0", False), ("::", False), ("192.168.1.5", False), ("myhost", False)])
def test_loopback_hosts(host, loopback):
    assert auth.is_loopback(host) is loopback


def test_the_exposure_rule():
    keys = ClientKeys(["ck-1"])
    auth.check_exposure("127.0.0.1", True, None, False)  # this machine only
    auth.check_exposure("0.0.0.0", False, None, False)  # each client brings its own key
    auth.check_exposure("0.0.0.0", True, keys, False)
    auth.check_exposure("0.0.0.0", True, None, True)
    with pytest.raises(UsageError, match="anyone who reaches this address would spend your upstream key"):
        auth.check_exposure("0.0.0.0", True, None, False)


# -- the process -------------------------------------------------------------------------------

def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ICLR_TEST_")}
    return {**env, "PYTHONPATH": str(REPO), **extra}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(*args, env=None, timeout=60):
    return subprocess.run([sys.executable, "-m", "iclr_cli", "serve", "--proxy-model", "fake", *args],
                          capture_output=True, text=True, env=env or _env(), timeout=timeout)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.5"])
def test_serve_refuses_to_hold_the_upstream_key_on_the_network_without_client_keys(host):
    proc = _serve("--upstream", "http://127.0.0.1:9/v1", "--host", host, "--api-key-env", "ICLR_TEST_KEY", env=_env(ICLR_TEST_KEY=UPSTREAM_KEY))
    assert proc.returncode == 2
    assert f"--host {host} with --api-key-env: anyone who reaches this address would spend your upstream key" in proc.stderr
    assert "--client-key-env VAR or --client-keys-file PATH" in proc.stderr and "--allow-anyone" in proc.stderr
    assert UPSTREAM_KEY not in proc.stderr + proc.stdout


def test_allow_anyone_passes_the_exposure_rule():
    # the next check (the upstream URL) is what stops it: the exposure rule let it through
    proc = _serve("--upstream", "127.0.0.1:9", "--host", "0.0.0.0", "--port", str(_free_port()), "--api-key-env", "ICLR_TEST_KEY",
                  "--allow-anyone", env=_env(ICLR_TEST_KEY=UPSTREAM_KEY))
    assert proc.returncode == 2 and "--upstream must be an http:// or https:// URL" in proc.stderr
    assert "would spend your upstream key" not in proc.stderr


@pytest.mark.parametrize("args, env, message", [
    (["--client-key-env", "ICLR_TEST_UNSET"], {}, "--client-key-env ICLR_TEST_UNSET: the environment variable is not set"),
    (["--client-key-env", "ICLR_TEST_CLIENT"], {"ICLR_TEST_CLIENT": ","}, "holds no key"),
])
def test_bad_client_key_sources_exit_2(args, env, message):
    proc = _serve("--upstream", "http://127.0.0.1:9/v1", *args, env=_env(**env))
    assert proc.returncode == 2 and message in proc.stderr


def test_a_bad_keys_file_names_its_line(tmp_path):
    path = tmp_path / "keys"
    path.write_text("ck-ann\nck bob\n", encoding="utf-8")
    proc = _serve("--upstream", "http://127.0.0.1:9/v1", "--client-keys-file", str(path))
    assert proc.returncode == 2 and f"{path}:2: a client key is printable ASCII without spaces" in proc.stderr
    assert "ck bob" not in proc.stderr


def test_serve_process_checks_keys_from_env_and_config_file_and_logs_none(tmp_path):
    keys_file = tmp_path / "client-keys"
    keys_file.write_text("# the team\nck-FILE-carol-555\n", encoding="utf-8")
    config = tmp_path / "serve.toml"
    config.write_text(f'client-keys-file = "{keys_file}"\nclient-key-env = "ICLR_TEST_CLIENT_KEYS"\n', encoding="utf-8")
    env_keys = ("ck-ENV-ann-111", "ck-ENV-bob-222")
    secrets = (*env_keys, "ck-FILE-carol-555", WRONG_KEY, UPSTREAM_KEY)
    port = _free_port()
    up_cm, up = _upstream()
    try:
        cmd = [sys.executable, "-m", "iclr_cli", "serve", "--upstream", up.url, "--port", str(port), "--proxy-model", "fake",
               "--api-key-env", "ICLR_TEST_KEY", "--config", str(config), "--state-dir", str(tmp_path / "state"), "--log-level", "debug"]
        proc = subprocess.Popen(cmd, env=_env(ICLR_TEST_KEY=UPSTREAM_KEY, ICLR_TEST_CLIENT_KEYS=",\n".join(env_keys)),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    httpx.get(base + "/healthz", timeout=2)
                    break
                except httpx.HTTPError:
                    assert proc.poll() is None, proc.stderr.read()
                    assert time.monotonic() < deadline, "iclr serve did not start"
                    time.sleep(0.2)
            answers = [httpx.post(base + "/v1/chat/completions", json=CHAT, headers=h, timeout=20).status_code for h in (
                {}, {"Authorization": f"Bearer {WRONG_KEY}"}, {"Authorization": f"Bearer {env_keys[1]}"}, {"x-api-key": "ck-FILE-carol-555"})]
            stats = httpx.get(base + "/stats", headers={"Authorization": f"Bearer {env_keys[0]}"}).json()
        finally:
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
    finally:
        up_cm.__exit__(None, None, None)
    assert answers == [401, 401, 200, 200]
    assert stats["client_keys"] == 3 and stats["unauthorized_requests"] == 2
    assert "clients must send one of 3 client keys as their API key" in err
    assert "a request to /v1/chat/completions from 127.0.0.1 was answered 401: no key" in err
    assert "a request to /v1/chat/completions from 127.0.0.1 was answered 401: a key that is not a client key" in err
    # the upstream key goes in the header the client used, as without client keys
    assert up.headers[0]["authorization"] == f"Bearer {UPSTREAM_KEY}" and up.headers[1]["x-api-key"] == UPSTREAM_KEY
    stored = b"".join(p.read_bytes() for p in (tmp_path / "state").rglob("*") if p.is_file())
    for secret in secrets:
        assert secret not in out + err, secret
        assert secret.encode() not in stored, secret
    assert proc.returncode == 130
