"""The import graph of the zoo package, read from its source with `ast`: what test_imports checks for cycles, and
what test_plugin_sources checks zoo.plugins' watched modules against. The rules for what counts as an edge are in
test_imports' docstring."""

from __future__ import annotations

import ast
from pathlib import Path

import zoo

ROOT = Path(zoo.__file__).parent


def zoo_modules() -> dict[str, Path]:
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


def import_statements(tree: ast.AST, annotations: bool = False) -> list[tuple[str, list[str], int]]:
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
    modules = zoo_modules()
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for module, names, level in import_statements(ast.parse(path.read_text(), str(path)), annotations):
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
