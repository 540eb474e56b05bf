"""Shared checks for the format adapter tests: paths, a CLI runner and JSON views that
ignore reasoning, so a test can assert that pruning changed nothing but reasoning."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from iclr_cli.cli.app import main

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "sample_trajectories"
# ../shared beside the checkout; a git worktree under wt/ finds it one level further up.
SHARED = next((p / "shared" for p in (REPO.parent, REPO.parent.parent) if (p / "shared").is_dir()), REPO.parent / "shared")
REALDATA = SHARED / "realdata"
CASES = SHARED / "cases"

_THINK_BODY = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)


def field_case(name: str, turn: str = "turn2") -> Path:
    """``../shared/cases/<turn>/<name>``; the test is skipped when it is absent."""
    path = CASES / turn / name
    if not path.is_file():
        pytest.skip(f"field case not available at {path}")
    return path


def realdata(folder: str) -> list[Path]:
    """Every file of ``../shared/realdata/<folder>``; the test is skipped when it is absent."""
    base = REALDATA / folder
    if not base.is_dir():
        pytest.skip(f"real transcripts not available at {base}")
    return sorted(p for p in base.iterdir() if p.is_file())


def realdata_ids(folder: str) -> list[str]:
    """File names in a realdata folder (for parametrize ids; empty when absent)."""
    base = REALDATA / folder
    return sorted(p.name for p in base.iterdir() if p.is_file()) if base.is_dir() else []


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    """Run ``iclr ARGS`` in-process; returns (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out, err = capsys.readouterr()
    code = exc.value.code
    return (0 if code is None else int(code)), out, err


def parse_any(data: bytes):
    """A whole JSON document, or a list with one parsed value per non-blank JSONL line."""
    try:
        return json.loads(data)
    except ValueError:
        return [json.loads(line) for line in data.splitlines() if line.strip()]


def without_reasoning(value):
    """``value`` with every reasoning carrier removed: Anthropic ``thinking`` blocks, string
    ``reasoning_content`` / ``reasoning`` fields, ``<think>`` bodies. Everything else (tool
    calls, results, ids, ``redacted_thinking``, unknown fields) is kept for comparison."""
    if isinstance(value, dict):
        return {
            k: without_reasoning(v)
            for k, v in value.items()
            if not (k in ("reasoning_content", "reasoning") and isinstance(v, str))
        }
    if isinstance(value, list):
        return [without_reasoning(v) for v in value if not (isinstance(v, dict) and v.get("type") == "thinking")]
    if isinstance(value, str):
        return _THINK_BODY.sub("<think/>", value)
    return value


def tool_ids(value) -> list[str]:
    """Tool call and tool result ids in document order (Anthropic and OpenAI shapes)."""
    found: list[str] = []

    def walk(v):
        if isinstance(v, dict):
            if v.get("type") in ("tool_use", "server_tool_use") and "id" in v:
                found.append(f"use:{v['id']}")
            if v.get("type") == "tool_result" and "tool_use_id" in v:
                found.append(f"result:{v['tool_use_id']}")
            if v.get("type") == "function" and "id" in v:
                found.append(f"call:{v['id']}")
            if v.get("role") == "tool" and "tool_call_id" in v:
                found.append(f"result:{v['tool_call_id']}")
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(value)
    return found


def thinking_blocks(value) -> list[dict]:
    """Every Anthropic ``thinking`` block in document order."""
    found: list[dict] = []

    def walk(v):
        if isinstance(v, dict):
            if v.get("type") == "thinking":
                found.append(v)
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(value)
    return found


def assert_signatures_follow_edits(before, after) -> int:
    """Thinking blocks pair up in order (no block removed): an edited one has no
    ``signature``, an unedited one is unchanged. Returns how many were edited."""
    old, new = thinking_blocks(before), thinking_blocks(after)
    assert len(old) == len(new)
    edited = 0
    for o, n in zip(old, new):
        if o["thinking"] == n["thinking"]:
            assert n == o
        else:
            edited += 1
            assert "signature" not in n
            assert {k: v for k, v in n.items() if k != "thinking"} == {k: v for k, v in o.items() if k not in ("thinking", "signature")}
    return edited


def summary_value(stderr: str, name: str) -> str:
    """The value column of row ``name`` in a summary table printed on stderr, its wrapped
    lines joined (its prose values wrap: :data:`~iclr_cli.render.output.PROSE_WIDTH`)."""
    found: list[str] | None = None
    for line in stderr.splitlines():
        cells = [c.strip() for c in line.strip("│┃ ").split("│")]
        if found is not None:
            more = [c.strip() for c in line.split("│")]  # a wrapped line: "│ <blank> │ rest │"
            if len(more) == 4 and not more[0] and not more[1] and more[2]:
                found.append(more[2])
                continue
            break
        if len(cells) == 2 and cells[0] == name:
            found = [cells[1]]
    if found is None:
        raise AssertionError(f"no row {name!r} in:\n{stderr}")
    return " ".join(found)
