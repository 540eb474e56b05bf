"""The HTML report opened in headless Chromium: every plot rendered, offline.

Needs Debian's ``chromium`` (``apt-get install -y chromium``); skipped with that reason when
no Chromium is on PATH.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from goldens.rundir import write_run
from iclr_cli.cli.app import main

PLOTS = ("plot-tokens", "plot-reward", "plot-amplification", "plot-heatmap")
BROWSER = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(BROWSER is None, reason="headless Chromium not installed (Debian: apt-get install -y chromium)"),
]


def dump_dom(page, profile) -> str:
    """The DOM after the page's scripts ran, with every network feature switched off."""
    args = [
        BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}", "--virtual-time-budget=10000", "--dump-dom", page.as_uri(),
    ]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_every_plot_renders_in_headless_chromium(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_run(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(["report", "run", "--html", "report.html", "--quiet"])
    assert exc.value.code == 0
    dom = dump_dom(tmp_path / "report.html", tmp_path / "profile")
    for div in PLOTS:
        # plotly marks a graph div it drew with js-plotly-plot and fills it with main-svg layers
        match = re.search(rf'<div id="{div}" class="([^"]*)"', dom)
        assert match and "js-plotly-plot" in match.group(1), f"{div} was not drawn"
    assert dom.count('class="main-svg"') >= len(PLOTS)
    assert dom.count('class="scatterlayer') >= 3  # the three scatter plots have their points layer
    assert 'class="hm"' in dom  # the heat map's image layer
    assert re.search(r'<g class="trace scatter[^"]*"', dom)
    legend = re.findall(r'class="legendtext"[^>]*>([^<]+)<', dom)
    assert {"none", "iclr", "delete-all"} <= set(legend)
