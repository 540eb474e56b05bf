"""Golden files of ``iclr diff`` / ``iclr report`` output.

Regenerate every golden after an intended change of the output with::

    UPDATE_GOLDENS=1 python -m pytest -q tests/test_diff*.py tests/test_report*.py

then review ``git diff tests/goldens``. Volatile parts (temporary paths) are normalised by
the tests before comparing.
"""

from __future__ import annotations

import os
from pathlib import Path

HERE = Path(__file__).parent


def assert_golden(name: str, actual: str) -> None:
    """Compare ``actual`` with ``tests/goldens/NAME``; with ``UPDATE_GOLDENS=1`` write it."""
    path = HERE / name
    if os.environ.get("UPDATE_GOLDENS") == "1":
        path.write_text(actual, encoding="utf-8", newline="")
        return
    assert path.exists(), f"golden {path} is missing; create it with UPDATE_GOLDENS=1 (see {__file__})"
    expected = path.read_text(encoding="utf-8")
    assert actual == expected, f"output differs from golden {name}; if intended, regenerate with UPDATE_GOLDENS=1"
