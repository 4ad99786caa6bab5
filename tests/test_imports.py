"""The layers of the house, as DESIGN.md draws them: no folder outside tests/ imports tests (the
benchmarks and the demo take what they share with the tests from devkit/), and no product package
imports devkit, bench or demo (they are not shipped)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PRODUCT = ("kvq", "exporter", "enforcer", "spark")
NOT_SHIPPED = ("devcluster", "devkit", "bench", "demo")


def imported_packages(path: Path) -> set[str]:
    """The top-level packages `path` imports, at any depth (imports inside functions too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def importers(packages: tuple[str, ...], forbidden: set[str]) -> list[str]:
    return sorted(
        f"{path.relative_to(REPO)} imports {', '.join(sorted(imported & forbidden))}"
        for package in packages
        for path in (REPO / package).rglob("*.py")
        if (imported := imported_packages(path)) & forbidden
    )


@pytest.mark.parametrize(
    ("packages", "forbidden"),
    [
        (PRODUCT + NOT_SHIPPED, {"tests"}),
        (PRODUCT, {"devkit", "bench", "demo"}),
    ],
    ids=["nothing-imports-tests", "the-product-imports-no-dev-tools"],
)
def test_no_folder_imports_a_layer_above_it(packages, forbidden) -> None:
    assert importers(packages, forbidden) == []


def test_the_check_sees_an_import_inside_a_function(tmp_path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from tests.kafka_support import usable_bytes\n")
    assert imported_packages(module) == {"tests"}
