"""The package stays readable: no module over 700 lines, no function over 80 (def line to the
last line of its body, docstring included)."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tensorpose"


def _sizes():
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        yield path, len(text.splitlines()), ast.parse(text)


def test_no_module_over_700_lines():
    big = [(str(p.relative_to(PACKAGE)), n) for p, n, _ in _sizes() if n > 700]
    assert not big, big


def test_no_function_over_80_lines():
    long = []
    for path, _, tree in _sizes():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                n = node.end_lineno - first + 1
                if n > 80:
                    long.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name} {n}")
    assert not long, long
