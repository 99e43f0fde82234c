"""zoo/data stays in small pieces (issue 47): every module at most 300 lines, every function at most 50."""

import ast
from pathlib import Path

import zoo.data

DATA = Path(zoo.data.__file__).parent


def test_data_modules_and_functions_are_small():
    """The house rules' limits: a file's lines; a function's, from its def line to its last line (decorators
    not counted)."""
    big, long = [], []
    for path in sorted(DATA.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > 300:
            big.append(f"{path.relative_to(DATA)}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 50:
                long.append(f"{path.relative_to(DATA)}::{node.name}: {node.end_lineno - node.lineno + 1} lines")
    assert (big, long) == ([], [])
