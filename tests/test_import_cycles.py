"""zoo's modules import one another without a cycle, lazy imports inside functions included. lint-imports checks
the layers between packages; a cycle inside one package (zoo.run.train importing zoo.run.scaling_cell, which
imported train back) passes it, and this test catches it."""

import pytest

grimp = pytest.importorskip("grimp")  # installed with import-linter (the dev extra)


def test_no_module_of_zoo_is_in_an_import_cycle():
    graph = grimp.build_graph("zoo")
    cycles = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is not None:
                cycles.append(" -> ".join((importer, *back)))
    assert cycles == [], "import cycles:\n" + "\n".join(cycles)
