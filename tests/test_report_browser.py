"""The HTML report opened in headless Chromium: every plot drawn, offline.

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
        # each plot is inline SVG with its marks: points, lines or heat-map cells
        match = re.search(rf'<div id="{div}" class="plot"><svg[^>]*>(.*?)</svg></div>', dom, re.S)
        assert match and re.search(r"<(circle|polyline|rect) ", match.group(1)), f"{div} was not drawn"
    assert "<script" not in dom
    heat = re.search(r'<div id="plot-heatmap" class="plot">(.*?)</div>', dom, re.S).group(1)
    assert heat.count("<title>x ") == 20  # one cell per scored block: 4 blocks in each of 5 steps
    legend = re.findall(r'<g class="legend-entry">.*?<text[^>]*>([^<]+)</text>', dom)
    assert {"none", "iclr", "delete-all"} <= set(legend)
