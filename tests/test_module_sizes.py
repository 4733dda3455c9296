"""The package stays readable. About 700 lines a module and 80 a function (def line to the last
line of its body, docstring included) are where a reviewer looks twice, never a reason to split
a concept; these tests only catch a runaway: a module over 1200 lines, a function over 150."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tensorpose"


def _sizes():
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        yield path, len(text.splitlines()), ast.parse(text)


def test_no_runaway_module():
    big = [(str(p.relative_to(PACKAGE)), n) for p, n, _ in _sizes() if n > 1200]
    assert not big, big


def test_no_runaway_function():
    long = []
    for path, _, tree in _sizes():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                n = node.end_lineno - first + 1
                if n > 150:
                    long.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name} {n}")
    assert not long, long
