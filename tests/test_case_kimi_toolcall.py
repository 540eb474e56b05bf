"""Field case ../shared/cases/turn3/05-kimi-toolcall-in-reasoning.json (docs/method.md, "Blocks").

Kimi K2 writes its tool call inside ``reasoning_content`` between
``<|tool_calls_section_begin|>`` and ``<|tool_calls_section_end|>``. That block survives every
variant verbatim and does not count in N, exactly like the GLM-style ``<tool_call>`` block of
step 1: in ``prune`` (delete-all, iclr), ``score`` and as a ``--dataset`` row. Outputs are
checked byte for byte.
"""

from __future__ import annotations

import copy
import json

import datasets
import pytest

from corpus_data import write_parquet
from format_helpers import CASES, run_cli, summary_value
from iclr_cli.blocks import SKIP, split_blocks

CASE = CASES / "turn3" / "05-kimi-toolcall-in-reasoning.json"
KIMI = ('Reading the helper now. <|tool_calls_section_begin|> <|tool_call_begin|> functions.read_file:0 '
        '<|tool_call_argument_begin|> {"path": "report/dates.py"} <|tool_call_end|> <|tool_calls_section_end|>')
GLM = "Requesting it: <tool_call>read_file\n<arg_key>path</arg_key>\n<arg_value>tests/test_dates.py</arg_value>\n</tool_call>"
ASSISTANT = (2, 4, 6)


@pytest.fixture
def case():
    if not CASE.is_file():
        pytest.skip(f"field case not available at {CASE}")
    return json.loads(CASE.read_bytes())


def as_file(value) -> bytes:
    """The layout of the case file (indent 2, newline at the end), which prune keeps."""
    return (json.dumps(value, indent=2) + "\n").encode()


def prune(capsys, tmp_path, *args: str) -> tuple[bytes, str]:
    out = tmp_path / "out.json"
    code, stdout, err = run_cli(capsys, "prune", str(CASE), "--model", "fake", "-o", str(out), *args)
    assert (code, stdout) == (0, ""), err
    return out.read_bytes(), err


def score(capsys) -> list[dict]:
    code, stdout, err = run_cli(capsys, "score", str(CASE), "--model", "fake", "-q")
    assert code == 0, err
    return [json.loads(line) for line in stdout.splitlines()]


def test_delete_all_keeps_exactly_the_two_call_blocks(case, capsys, tmp_path):
    assert case["messages"][2]["reasoning_content"].count("\n\n") == 3
    want = copy.deepcopy(case)
    want["messages"][2]["reasoning_content"] = KIMI
    want["messages"][4]["reasoning_content"] = GLM
    want["messages"][6]["reasoning_content"] = ""
    data, err = prune(capsys, tmp_path, "--variant", "delete-all")
    assert data == as_file(want)
    assert summary_value(err, "reasoning blocks") == "9"  # 3 + 3 + 3: the call blocks are not counted
    assert summary_value(err, "blocks removed") == "9"


def test_score_numbers_three_candidates_per_step_and_never_the_calls(case, capsys):
    records = score(capsys)
    assert [(r["step"], r["block"], r["n_blocks"]) for r in records] == [(s, b, 3) for s in range(3) for b in range(3)]
    assert not any("tool_call" in r["text"] for r in records)


def test_iclr_replaces_floor_of_rho_n_and_writes_what_score_selected(case, capsys, tmp_path):
    records = score(capsys)
    want = copy.deepcopy(case)
    for step, i in enumerate(ASSISTANT):
        text = case["messages"][i]["reasoning_content"]
        split = split_blocks(text)
        cands = [b for b, block in enumerate(split.blocks) if "tool_call" not in block]
        chosen = {cands[r["block"]]: SKIP for r in records if r["step"] == step and r["selected"]}
        assert len(chosen) == 2  # floor(0.8 * 3)
        want["messages"][i]["reasoning_content"] = split.edit(chosen)
    data, err = prune(capsys, tmp_path, "--variant", "iclr")
    assert data == as_file(want)
    out = json.loads(data)
    assert KIMI in out["messages"][2]["reasoning_content"] and GLM in out["messages"][4]["reasoning_content"]
    assert summary_value(err, "blocks removed") == "6"


@pytest.mark.parametrize("variant", ["step-only", "random-40", "random-100"])
def test_no_variant_touches_either_call_block(case, capsys, tmp_path, variant):
    out = json.loads(prune(capsys, tmp_path, "--variant", variant)[0])
    assert KIMI in out["messages"][2]["reasoning_content"]
    assert GLM in out["messages"][4]["reasoning_content"]
    assert [m for i, m in enumerate(out["messages"]) if i not in ASSISTANT] == [m for i, m in enumerate(case["messages"]) if i not in ASSISTANT]


def test_as_a_dataset_row_the_same_as_the_file(case, capsys, tmp_path):
    folder = write_parquet(tmp_path / "rows", [{"name": CASE.name, "doc": CASE.read_text(encoding="utf-8")}])
    code, stdout, err = run_cli(capsys, "score", "--dataset", str(folder), "--column", "doc", "--id-column", "name", "--model", "fake", "-q")
    assert code == 0, err
    strip = lambda r: {k: v for k, v in r.items() if k not in ("trajectory", "row", "source")}
    assert [strip(json.loads(line)) for line in stdout.splitlines()] == [strip(r) for r in score(capsys)]
    for variant in ("delete-all", "iclr"):
        out_dir = tmp_path / f"pruned-{variant}"
        code, _, err = run_cli(capsys, "prune", "--dataset", str(folder), "--column", "doc", "--variant", variant, "--model", "fake", "-o", str(out_dir), "-q")
        assert code == 0, err
        [row] = datasets.load_dataset(str(out_dir), split="train").data.table.to_pylist()
        assert row["doc"].encode() == prune(capsys, tmp_path, "--variant", variant)[0]
