"""Every shape docs/FORMAT.md lists is read by the adapter it names.

The table lives in docs/FORMAT.md ("How a file's format is chosen", between the ``shapes``
markers); this test reads it, so the documentation and the test cannot drift. A new example
file with no row, a row whose file is gone, or an adapter with no row fails here.
"""

from __future__ import annotations

import re

import pytest

from format_helpers import REPO, SAMPLES, run_cli
from iclr_cli.inputs import load_file
from iclr_cli.formats import registry

FORMAT_MD = REPO / "docs" / "FORMAT.md"
SHAPES = REPO / "tests" / "shapes"
_ROW = re.compile(r"^\| (?P<shape>.+?) \| `(?P<adapter>[^`]+)` \| `(?P<file>[^`]+)` \| (?P<count>\d+) \|$")


def table() -> list[tuple[str, str, str, int]]:
    text = FORMAT_MD.read_text(encoding="utf-8")
    body = text.split("<!-- shapes:begin -->", 1)[1].split("<!-- shapes:end -->", 1)[0]
    rows = []
    for line in body.strip().splitlines()[2:]:
        m = _ROW.match(line)
        assert m, f"malformed row in docs/FORMAT.md shape table: {line!r}"
        rows.append((m["shape"], m["adapter"], m["file"], int(m["count"])))
    return rows


ROWS = table()


@pytest.mark.parametrize(("shape", "adapter", "file", "count"), ROWS, ids=[r[2].rsplit("/", 1)[-1] for r in ROWS])
def test_each_shape_is_read_by_the_adapter_format_md_names(shape, adapter, file, count):
    path = REPO / file
    data = path.read_bytes()
    found = registry.detect_why(data, file)
    assert found.adapter.name == adapter, f"{shape}: read as {found.adapter.name} ({found.match.reason})"
    read_as, doc = load_file(str(path))
    assert read_as.name == adapter
    assert sum(len(s.reasoning) for t in doc.trajectories for s in t.steps) == count
    assert doc.unrecognised == []
    # and it survives a round trip untouched
    assert read_as.dump(doc, doc.trajectories) == data


def test_every_example_file_and_every_adapter_has_a_row():
    listed = {file for _, _, file, _ in ROWS}
    on_disk = {str(p.relative_to(REPO)) for folder in (SHAPES, SAMPLES) for p in folder.iterdir() if p.is_file()}
    assert on_disk - listed == set(), "example files with no row in docs/FORMAT.md"
    assert listed - on_disk == set(), "rows whose file does not exist"
    assert set(registry.names()) - {adapter for _, adapter, _, _ in ROWS} == set(), "adapters with no shape in the table"


@pytest.mark.parametrize("name", ["bedrock_request.json", "litellm_spend_list.json", "langchain_lc_constructors.json", "gemini_cli_session.json"])
def test_new_shapes_round_trip_byte_for_byte_with_strict(capsys, tmp_path, name):
    src = SHAPES / name
    out = tmp_path / name
    code, _, err = run_cli(capsys, "prune", str(src), "--variant", "none", "--model", "fake", "--strict", "-o", str(out))
    assert code == 0, err
    assert out.read_bytes() == src.read_bytes()
