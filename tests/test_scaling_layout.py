"""zoo.scaling's fit and grid rooms stay in small pieces (issue 47): each module at most 300 lines, each function
at most 50, each split-out module opened by a one-line docstring, and every name defined in one module only."""

import ast
import importlib
from pathlib import Path

import pytest

import zoo.scaling

SCALING = Path(zoo.scaling.__file__).parent
FIT = ("law", "huber", "bootstrap", "fit")  # the law and its closed forms; the Huber fit; the bootstrap; the steps
GRID = ("sizes", "design", "grid")  # a size's shapes and budgets; the design's checks; cells and resolvers


@pytest.mark.parametrize("name", FIT + GRID)
def test_module_and_its_functions_are_small(name):
    """The house rules' limits: a file's lines; a function's, from its def line to its last line."""
    text = (SCALING / f"{name}.py").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    long = [
        f"{node.name}: {node.end_lineno - node.lineno + 1} lines"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 50
    ]
    assert long == []


@pytest.mark.parametrize("name", ("law", "huber", "bootstrap", "sizes", "design"))
def test_a_split_out_module_says_what_it_holds_in_one_line(name):
    doc = ast.get_docstring(ast.parse((SCALING / f"{name}.py").read_text(encoding="utf-8")))
    assert doc and "\n" not in doc and len(doc) <= 120


def test_each_name_is_defined_in_one_module_and_imported_from_it():
    """No module re-exports another's name as its own (no shim): each public function or class of the rooms
    says it lives where it is defined, and no two of the modules define the same name."""
    homes = {}
    for name in FIT + GRID:
        module = importlib.import_module(f"zoo.scaling.{name}")
        tree = ast.parse((SCALING / f"{name}.py").read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                assert node.name not in homes, f"{node.name} in {homes.get(node.name)} and {name}"
                homes[node.name] = name
                assert getattr(module, node.name).__module__ == module.__name__
    assert homes["fit_scaling_law"] == "fit" and homes["check_design"] == "design" and homes["cells"] == "grid"
