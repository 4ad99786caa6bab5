"""No product function above cyclomatic complexity 20, as radon measures it (`radon cc`): a longer
chain of decisions is split into named steps. Methods and nested functions are measured one by one
(radon leaves a nested function's decisions out of the function around it)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from radon.visitors import ComplexityVisitor

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("kvq", "exporter", "enforcer", "spark", "devcluster", "devkit", "bench", "demo")
MAX_COMPLEXITY = 20

Function = ast.FunctionDef | ast.AsyncFunctionDef


def functions(node: ast.AST, prefix: str = "") -> Iterator[tuple[str, Function]]:
    """Every function at any depth with its qualified name (`Class.method`, `outer.inner`)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            yield prefix + child.name, child
            yield from functions(child, f"{prefix}{child.name}.")
        elif isinstance(child, ast.ClassDef):
            yield from functions(child, f"{prefix}{child.name}.")
        else:
            yield from functions(child, prefix)


def complexity(function: Function) -> int:
    visitor = ComplexityVisitor.from_ast(ast.Module(body=[function], type_ignores=[]))
    return visitor.functions[0].complexity


def above_the_limit() -> dict[tuple[str, str], str]:
    """(file, qualified name) -> "file:line name: complexity" of every product function above
    MAX_COMPLEXITY."""
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            file = path.relative_to(REPO).as_posix()
            tree = ast.parse(path.read_text(encoding="utf-8"), file)
            for name, function in functions(tree):
                score = complexity(function)
                if score > MAX_COMPLEXITY:
                    found[file, name] = f"{file}:{function.lineno} {name}: {score}"
    return found


def test_no_product_function_is_above_complexity_20():
    offenders = list(above_the_limit().values())
    assert not offenders, (
        f"cyclomatic complexity above {MAX_COMPLEXITY} (split into named steps):\n"
        + "\n".join(offenders)
    )
