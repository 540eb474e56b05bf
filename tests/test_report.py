"""``iclr report``: per-variant summary of a replay run, its table, and the HTML report."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import orjson
import pytest

from goldens import assert_golden
from goldens.rundir import RUNS, write_run
from iclr_cli.cli.app import main
from iclr_cli.render import report_html, runs


def run_cli(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    captured = capsys.readouterr()
    return exc.value.code, captured.out, captured.err


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES"):
        monkeypatch.delenv(name, raising=False)
    return write_run(tmp_path)


def _total(key):
    _, inputs, outputs, _, _ = RUNS[key]
    return sum(inputs) + sum(outputs)


def test_json_summary_numbers(run_dir, capsys):
    code, out, _ = run_cli(["report", "run", "--json"], capsys)
    assert code == 0
    rows = {r["variant"]: r for r in orjson.loads(out)}
    assert list(rows) == ["none", "iclr", "delete-all"]
    iclr = rows["iclr"]
    assert (iclr["wins"], iclr["ties"], iclr["losses"]) == (1, 1, 0)
    assert iclr["mean_reward"] == 1.0 and rows["none"]["mean_reward"] == 0.75
    base = _total(("fix-bug", "none", 0)) + _total(("csv-sum", "none", 0))
    mine = _total(("fix-bug", "iclr", 0)) + _total(("csv-sum", "iclr", 0))
    assert iclr["change"]["total_tokens"] == pytest.approx((mine - base) / base)
    assert iclr["amplification"] == pytest.approx((mine - base) / (240 + 96))
    assert iclr["deletion_ratio"] == pytest.approx((240 + 96) / (100 * 5 + 100 * 2))
    assert rows["delete-all"]["deletion_ratio"] == 1.0 and rows["delete-all"]["losses"] == 1
    assert rows["none"]["cache_read_tokens"] is None


def test_terminal_table_golden(run_dir, capsys):
    code, out, err = run_cli(["report", "run", "--width", "150"], capsys)
    assert code == 0, err
    assert re.search(r"iclr\s+│\s+2\s+│\s+1\.000\s+│\s+1/1/0", out)
    assert_golden("report_table.txt", out)


class _Outline(HTMLParser):
    """Headings, section/div ids, notes, table cells and scripts of the report, in order."""

    def __init__(self):
        super().__init__()
        self.lines: list[str] = []
        self._tag: str | None = None
        self._row: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self._tag = tag
        if tag in ("section", "div") and attrs.get("id"):
            self.lines.append(f"<{tag} id={attrs['id']}>")
        if tag == "svg":
            self.lines.append("svg")
        if tag == "tr":
            self._row = []

    def handle_endtag(self, tag):
        if tag == "tr":
            self.lines.append("row: " + " | ".join(self._row))
        self._tag = None

    def handle_data(self, data):
        if self._tag in ("h1", "h2"):
            self.lines.append(f"{self._tag}: {data}")
        elif self._tag == "p":
            self.lines.append(f"note: {data}")
        elif self._tag in ("td", "th"):
            self._row.append(data)
        elif self._tag == "script":
            self.lines.append("script")  # there should be none: the plots are inline SVG


def _figures_text(run_dir):
    """The data of every figure, one trace per line (what the plots draw, independent of
    the plotly version that renders them)."""
    from iclr_cli.render.diffinput import read_scores

    records = runs.load_run(str(run_dir))
    heat = report_html.heat_map("t", read_scores((run_dir / "runs" / "fix-bug" / "iclr" / "seed0" / "block_scores.jsonl").read_bytes(), "s"))
    lines = []
    for div_id, title, fig in report_html.build_figures(records, heat):
        lines.append(f"{div_id}: {title}")
        if isinstance(fig, str):
            lines.append(f"  note: {fig}")
            continue
        for trace in fig.to_plotly_json()["data"]:
            picked = {k: trace[k] for k in ("type", "name", "x", "y", "z") if k in trace}
            lines.append("  " + json.dumps(picked, default=list))
    return "\n".join(lines) + "\n"


def test_html_structure_golden(run_dir, capsys):
    code, _, err = run_cli(["report", "run", "--html", "report.html", "--quiet"], capsys)
    assert code == 0, err
    page = (run_dir.parent / "report.html").read_text()
    # nothing to fetch: no external script, style sheet or image
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", page)
    outline = _Outline()
    outline.feed(page)
    text = "\n".join(outline.lines) + "\n"
    assert "script" not in text and "<script" not in page  # drawn as inline SVG, nothing to run or fetch
    for div in ("plot-tokens", "plot-reward", "plot-amplification", "plot-heatmap"):
        assert f"<div id={div}>\nsvg\n" in text
    assert_golden("report_outline.txt", text)
    assert_golden("report_figures.txt", _figures_text(run_dir))


def test_heat_map_scored_with_model_when_the_run_saved_none(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_run(tmp_path, block_scores=False)
    code, _, err = run_cli(["report", "run", "--html", "r.html", "--model", "fake", "--heatmap", "fix-bug/iclr/0"], capsys)
    assert code == 0
    assert "scoring fix-bug/iclr/seed 0 with fake" in err
    page = (tmp_path / "r.html").read_text()
    assert re.search(r'<div id="plot-heatmap" class="plot"><svg[^>]*>.*<rect[^>]+fill="#[0-9a-f]{6}"><title>x 0, y 0: ', page)
    assert "no scored trajectory" not in page


def test_heat_map_cells_and_removed_marks(run_dir):
    from iclr_cli.render.diffinput import read_scores

    scores = read_scores((run_dir / "runs" / "fix-bug" / "iclr" / "seed0" / "block_scores.jsonl").read_bytes(), "s")
    heat = report_html.heat_map("t", scores)
    assert heat.steps == (0, 1, 2, 3, 4)
    assert heat.z[3][2] == pytest.approx(1.0 + 1.5 + 0.5)
    assert len(heat.removed) == 15 and (4, 3) not in heat.removed


def test_heat_map_skips_replays_whose_saved_scores_are_empty(run_dir, capsys):
    """The first iclr replay produced no reasoning block: the next one with scores is shown."""
    fix = run_dir / "runs" / "fix-bug" / "iclr" / "seed0" / "block_scores.jsonl"
    csv = run_dir / "runs" / "csv-sum" / "iclr" / "seed0" / "block_scores.jsonl"
    csv.write_text(fix.read_text())
    fix.write_text("")
    lines = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    for rec in lines:
        if (rec["task"], rec["variant"]) == ("csv-sum", "iclr"):
            rec["block_scores"] = "runs/csv-sum/iclr/seed0/block_scores.jsonl"
    (run_dir / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    code, _, err = run_cli(["report", "run", "--html", "r.html", "--quiet"], capsys)
    assert code == 0, err
    page = (run_dir.parent / "r.html").read_text()
    assert "<h2>Block entropy per step: csv-sum/iclr/seed 0</h2>" in page


def test_table_keeps_its_full_width_when_stdout_is_not_a_terminal(run_dir, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    code, out, _ = run_cli(["report", "run"], capsys)
    assert code == 0
    header = next(line for line in out.splitlines() if "variant" in line and "amplification" in line)
    assert len(header) > 80  # one row per line, not folded into 60 or 80 columns
