"""Imports run with the grain of the layers (STYLE.md: data flows one way).

The core pipeline (``iclr_cli/pipeline.py``) does not reach up into ``savings/``: the sum over
requests that both use lives below them in ``iclr_cli/resent.py``. The views in ``render/`` do
not reach into ``analysis/``: they format what the analyses computed, with their own helpers.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "iclr_cli"


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_the_pipeline_does_not_import_savings():
    assert [m for m in _imports(PKG / "pipeline.py") if m.startswith("iclr_cli.savings")] == []


def test_render_does_not_import_analysis():
    found = {p.name: m for p in (PKG / "render").glob("*.py") for m in _imports(p) if m.startswith("iclr_cli.analysis")}
    assert found == {}


def test_the_neutral_sum_imports_nothing_of_iclr():
    assert [m for m in _imports(PKG / "resent.py") if m.startswith("iclr_cli")] == []


def test_totals_is_one_class_wherever_it_is_imported_from():
    from iclr_cli.resent import Totals
    from iclr_cli.savings.estimate import Totals as FromSavings

    assert FromSavings is Totals
    assert (Totals(requests=1, input=10.0, saved=4.0) + Totals(requests=2, input=5.0, cache_read=3.0)) == Totals(
        requests=3, input=15.0, saved=4.0, cache_read=3.0)


def _module(path: Path) -> str:
    return ".".join(path.relative_to(PKG.parent).with_suffix("").parts).removesuffix(".__init__")


def test_no_two_modules_import_each_other():
    """A pair of modules that import each other (even inside a function) hides which one is
    the lower layer: ``scoring.loading`` / ``scoring.precision`` share ``scoring.device``, and
    reading a file by name (``inputs.load_file``) sits above the format registry."""
    imports = {}
    for path in PKG.rglob("*.py"):
        names = _imports(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):  # "from pkg import module" names a module too
            if isinstance(node, ast.ImportFrom) and node.module:
                names.update(f"{node.module}.{a.name}" for a in node.names)
        imports[_module(path)] = names
    pairs = sorted({tuple(sorted((a, b))) for a, names in imports.items() for b in names if b != a and a in imports.get(b, ())})
    assert pairs == []


def test_the_format_kit_does_not_import_the_adapters():
    """The adapters (formats/adapters/) use the kit (formats/); the kit knows them only
    through the registry's list (docs/FORMAT.md, "Adding a format")."""
    kit = [p for p in (PKG / "formats").glob("*.py") if p.name != "registry.py"]
    found = {p.name: m for p in kit for m in _imports(p) if m.startswith("iclr_cli.formats.adapters")}
    assert found == {}
