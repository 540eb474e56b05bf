"""``iclr serve --config FILE`` (:mod:`iclr_cli.serve.config`): TOML keys named like the flags,
every flag on the command line winning over the file, and exit 2 naming the file, the line and
the key for anything the file gets wrong."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import httpx
import pytest
import typer

from iclr_cli.cli.app import build_app, main
from iclr_cli.serve.config import from_file

pytest.importorskip("starlette")

GOOD = """\
# options set once
upstream = "https://api.anthropic.com/v1"
upstream-kind = "anthropic"
port = 8790
eager-scoring = false
keepalive = 20
sealed = "drop-previous-turns"
"""


def _context(*args: str):
    """The serve command's click context after parsing ``args`` (nothing is run)."""
    serve = typer.main.get_command(build_app()).commands["serve"]
    return serve.make_context("serve", list(args))


def test_the_file_fills_flags_not_given_and_the_command_line_wins(tmp_path):
    config = tmp_path / "serve.toml"
    config.write_text(GOOD)
    ctx = _context("--config", str(config), "--port", "9000", "--eager-scoring")
    params = ctx.params
    assert params["upstream"] == "https://api.anthropic.com/v1"  # a required flag, given by the file only
    assert params["upstream_kind"].value == "anthropic" and params["sealed"].value == "drop-previous-turns"
    assert params["keepalive"] == 20.0
    assert params["port"] == 9000 and params["eager_scoring"] is True  # the command line wins
    assert params["host"] == "127.0.0.1" and params["variant"] == "iclr"  # neither: the defaults
    used, overridden = from_file(ctx)
    assert sorted(used) == ["keepalive", "sealed", "upstream", "upstream-kind"]
    assert sorted(overridden) == ["eager-scoring", "port"]


def test_without_a_config_nothing_comes_from_a_file():
    ctx = _context("--upstream", "http://127.0.0.1:9/v1")
    assert ctx.params["keepalive"] == 15.0 and ctx.default_map is None and from_file(ctx) == ([], [])


@pytest.mark.parametrize("text, line, message", [
    ('upstream = "http://x/v1"\n# max body\nmax_body_mb = 3\n', 3, "unknown key 'max_body_mb' (did you mean max-body-mb?)"),
    ('no-eager-scoring = true\n', 1, "unknown key 'no-eager-scoring' (write eager-scoring = false)"),
    ('bogus = 1\n', 1, "unknown key 'bogus' (the keys are iclr serve's flags without the dashes: allow-anyone, api-key-env, "),
    ('config = "other.toml"\n', 1, "unknown key 'config' (a config file cannot name another one)"),
    ('upstream = "http://x/v1"\n[serve]\nport = 1\n', 2, "table [serve]: iclr serve reads only top-level keys"),
    ('host = ["a", "b"]\n', 1, "key 'host': a list is not a value of --host"),
    ('port = true\n', 1, "key 'port': --port takes a value, not true or false"),
    ('restore-reasoning = "yes"\n', 1, "key 'restore-reasoning': --restore-reasoning is a switch, so its value is true or false"),
    ('port = 99999\n', 1, "key 'port': "),
    ('sealed = "nope"\n', 1, "key 'sealed': "),
])
def test_a_bad_key_or_value_exits_2_naming_the_file_line_and_key(tmp_path, capsys, text, line, message):
    config = tmp_path / "serve.toml"
    config.write_text(text)
    with pytest.raises(SystemExit) as info:
        main(["serve", "--config", str(config)])
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert f"{config}:{line}: {message}" in err, err


def test_a_file_that_is_not_toml_or_is_missing_exits_2(tmp_path, capsys):
    config = tmp_path / "serve.toml"
    config.write_text('upstream = \n')
    with pytest.raises(SystemExit) as info:
        main(["serve", "--config", str(config)])
    assert info.value.code == 2 and f"{config}: not valid TOML: " in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["serve", "--config", str(tmp_path / "missing.toml")])
    assert info.value.code == 2 and "missing.toml" in capsys.readouterr().err


def test_serve_started_from_a_config_file_says_where_it_listens_and_is_ready(tmp_path):
    from serve_fixtures import scripted_upstream
    from test_serve_cli import _env, _free_port

    port = _free_port()
    with scripted_upstream() as up:
        config = tmp_path / "serve.toml"
        config.write_text(f'upstream = "{up.url}"\nproxy-model = "fake"\nport = 1\n')
        proc = subprocess.Popen([sys.executable, "-m", "iclr_cli", "serve", "--config", str(config), "--port", str(port)],
                                env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    ready = httpx.get(f"http://127.0.0.1:{port}/health/readiness", timeout=2)
                    break
                except httpx.HTTPError:
                    assert proc.poll() is None, proc.stderr.read()
                    assert time.monotonic() < deadline, "iclr serve did not start"
                    time.sleep(0.2)
        finally:
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=30)
    assert ready.status_code == 200 and ready.json()["status"] == "healthy"
    assert f"iclr serve: settings from {config}: upstream, proxy-model (the command line wins for port)" in err
    assert f"iclr serve: listening on 127.0.0.1 port {port}, this machine only (--host to listen elsewhere)" in err
