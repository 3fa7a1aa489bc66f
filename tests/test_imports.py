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
from pathlib import Path

import zoo

ROOT = Path(zoo.__file__).parent


def _modules() -> dict[str, Path]:
    """{dotted module name: its file} for every module of the zoo package."""
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, annotations: bool = False) -> list[tuple[str, list[str], int]]:
    """(module, names imported from it, relative level) for every import statement outside TYPE_CHECKING blocks,
    and inside them too with `annotations`."""
    found = []
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and _is_type_checking(node) and not annotations:
            todo.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            found += [(alias.name, [], 0) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.module or "", [alias.name for alias in node.names], node.level))
        todo.extend(ast.iter_child_nodes(node))
    return found


def _with_packages(name: str, importer: str, modules: dict[str, Path]) -> set[str]:
    """`name` and the packages above it that importing it runs: importing zoo.a.b runs zoo.a first, unless
    the importer is inside zoo.a (then zoo.a was initialised before the importer, which the import does not
    change). A package imported by name (`from zoo.a import x` where x is not a module) is `name` itself."""
    parts = name.split(".")
    above = {".".join(parts[:i]) for i in range(2, len(parts))}
    return ({name} | {p for p in above if not importer.startswith(p + ".")}) & set(modules)


def graph(annotations: bool = False) -> dict[str, set[str]]:
    """{module: the zoo modules it imports} over the whole package (the top package `zoo` left out of the
    targets: every module is inside it, so an edge to it says nothing about layering); with `annotations`, the
    imports under `if TYPE_CHECKING:` too."""
    modules = _modules()
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for module, names, level in _imports(ast.parse(path.read_text(), str(path)), annotations):
            if level:
                base = package.split(".")
                base = base[: len(base) - level + 1]
                module = ".".join([*base, module] if module else base)
            if module != "zoo" and not module.startswith("zoo."):
                continue
            targets = {f"{module}.{n}" for n in names if f"{module}.{n}" in modules}
            if not targets or len(targets) < len(names):  # some names are attributes of `module` itself
                targets.add(module)
            for target in targets:
                edges[name] |= _with_packages(target, name, modules)
        edges[name].discard(name)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


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
    modules = _modules()

    def imports_the_package(module: str, names: list[str]) -> bool:
        return (module == "zoo" and "components" in names) or (module == "zoo.components" and (
            not names or any(f"zoo.components.{name}" not in modules for name in names)))

    importers = {name for name, path in modules.items() if not name.startswith("zoo.components") and any(
        imports_the_package(module, names) for module, names, _ in _imports(ast.parse(path.read_text())))}
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
