"""Every real transcript in ../shared/realdata and every sample in sample_trajectories/ comes
back byte for byte from ``iclr prune --variant none``, and every adapter reads all of its
assistant text (``--strict`` passes)."""

import pytest

from format_helpers import REALDATA, SAMPLES, run_cli

REAL = sorted(p for p in REALDATA.glob("*/*") if p.is_file() and p.name != "SOURCES.md") if REALDATA.is_dir() else []
FILES = REAL + sorted(p for p in SAMPLES.iterdir() if p.is_file())


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.name}" for p in FILES])
def test_prune_none_is_byte_identical_and_strict(capsys, tmp_path, path):
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "prune", str(path), "--variant", "none", "--model", "fake", "--strict", "-o", str(out))
    assert code == 0, err
    assert out.read_bytes() == path.read_bytes()
