"""zoo's modules import each other without cycles.

A cycle makes the import order matter (a name read from a half-initialised module), hides which layer depends
on which, and tempts a deferred import inside a function, which hides the cycle without breaking it. So every
import counts here, function-level ones included. Those under `if TYPE_CHECKING:` never run, so they cannot
break the import order, but a circle through them is still two layers that each need the other (zoo.data had
config <-> task and config <-> text so): the graph is checked with them too. `from zoo.x import y` is an edge
to the module zoo.x.y when there is one, else to zoo.x; importing zoo.a.b also runs the package zoo.a, so from
outside zoo.a it is an edge to zoo.a too; a package's `__init__` importing its submodules and a submodule
importing its package by name (`from zoo.a import name`) are both edges.
"""

from __future__ import annotations

import ast

from import_graph import cycles, graph, import_statements, zoo_modules


def test_the_graph_sees_function_level_imports_and_packages():
    edges = graph()
    assert "zoo.experiment.store" in edges["zoo.experiment.runner"]
    assert "zoo.report" in edges["zoo.export"]  # importing zoo.report.collect runs zoo.report first
    assert "zoo.components" not in edges["zoo.components.ffn"]  # its package was initialised before it
    assert "zoo.data.config" not in edges["zoo.data.text"]  # only for its annotations, under TYPE_CHECKING
    assert "zoo.data.config" in graph(annotations=True)["zoo.data.text"]


def test_the_registry_imports_its_own_built_ins():
    """Only zoo.registry imports the package of components to register them; nothing else (spec.py did)
    imports it for that side effect."""
    modules = zoo_modules()

    def imports_the_package(module: str, names: list[str]) -> bool:
        return (module == "zoo" and "components" in names) or (module == "zoo.components" and (
            not names or any(f"zoo.components.{name}" not in modules for name in names)))

    importers = {name for name, path in modules.items() if not name.startswith("zoo.components") and any(
        imports_the_package(module, names) for module, names, _ in import_statements(ast.parse(path.read_text())))}
    assert importers == {"zoo.registry"}


def test_cycles_are_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_zoo_has_no_import_cycle():
    loops = cycles(graph())
    assert not loops, "import cycles:\n" + "\n".join("  " + " <-> ".join(component) for component in loops)


def test_zoo_has_no_import_cycle_even_through_annotations():
    loops = cycles(graph(annotations=True))
    assert not loops, "import cycles, counting imports under TYPE_CHECKING:\n" + "\n".join(
        "  " + " <-> ".join(component) for component in loops)
