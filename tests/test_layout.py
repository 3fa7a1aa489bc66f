"""zoo's layout shows its architecture (docs/layout.md): packages that name their parts, a root that holds only the
package's public face and what every layer shares, imports that go down the layers and never up, and functions
short enough to read at once. Imports are read from the source with `ast` (tests/import_graph.py: function-level
imports count, those under `if TYPE_CHECKING:` do not)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from import_graph import graph, zoo_modules

import zoo

ROOT = Path(zoo.__file__).parent
LAYOUT = ROOT.parent / "docs" / "layout.md"

# The modules the root keeps. The public face: the top-level API and what plugins and users import by name.
PUBLIC = {"__init__", "__main__", "api", "errors", "version", "registry", "metrics", "masks", "plugins"}
# What every layer shares, each importing only other shared modules (TIERS' first row), so that no layer reaches
# up or sideways to use it: reading config files, atomic writes, the name -> class catalogues, the run directory's
# names, the terminal's tables and warnings, the machine's hardware.
SHARED = {"atomic", "config_io", "catalogue", "rundir", "terminal", "machine"}

# Each part of zoo (a root module or a package) in its tier: a part imports only parts of its own tier or below
# (no cycle within a tier: tests/test_imports.py). Bottom first.
TIERS = [
    {"errors", "version", "atomic", "config_io", "catalogue", "rundir", "terminal", "machine", "stats", "kernels"},
    {"components", "registry", "masks", "metrics", "data"},
    {"model", "plugins"},
    {"train", "proofs", "testing"},
    {"experiment"},
    {"report", "export", "api"},
    {"cli"},
    {"zoo", "__main__"},
]


def part(module: str) -> str:
    """The root module or top package a dotted zoo module belongs to: zoo.model.spec -> model, zoo -> zoo."""
    return module.split(".")[1] if "." in module else module


def tier(name: str) -> int:
    (found,) = [i for i, names in enumerate(TIERS) if name in names]
    return found


def upward(edges: dict[str, set[str]]) -> list[str]:
    """'importer -> imported' for every import of a part from a higher tier than the importer's."""
    return sorted(f"{a} -> {b}" for a, targets in edges.items() for b in targets
                  if part(a) != part(b) and tier(part(b)) > tier(part(a)))


def importers_of(edges: dict[str, set[str]], target: str) -> set[str]:
    """The modules that import `target` or a module inside it."""
    return {a for a, targets in edges.items() for b in targets if b == target or b.startswith(target + ".")}


# -- the root and the packages (issue 58, item 7) -----------------------------------------------------------
def test_the_root_holds_only_the_public_face_and_what_every_layer_shares():
    root = {path.stem for path in ROOT.glob("*.py")}
    assert root - PUBLIC - SHARED == set(), "put these in the package of their part (docs/layout.md)"
    assert PUBLIC | SHARED <= root


def test_every_part_has_a_tier():
    parts = {part(name) for name in zoo_modules()} | {"zoo"}
    assert parts == set().union(*TIERS), "add the new part to TIERS (and to docs/layout.md)"


def test_every_package_says_its_role():
    silent = [str(path.relative_to(ROOT.parent)) for path in sorted(ROOT.rglob("__init__.py"))
              if not (ast.get_docstring(ast.parse(path.read_text())) or "").strip()]
    assert not silent, f"a package without a docstring saying its role: {silent}"


def test_the_map_names_every_package_and_root_module():
    text = LAYOUT.read_text()
    packages = sorted(f"zoo/{path.parent.relative_to(ROOT).as_posix()}/" for path in ROOT.glob("*/__init__.py"))
    modules = sorted(path.name for path in ROOT.glob("*.py"))
    missing = [name for name in packages + modules if name not in text]
    assert not missing, f"docs/layout.md does not say what these are: {missing}"


# -- the layers ---------------------------------------------------------------------------------------------
def test_imports_go_down_the_layers():
    wrong = upward(graph())
    assert not wrong, "imports from a higher tier (tests/test_layout.py's TIERS, docs/layout.md):\n" + "\n".join(wrong)


def command_line(module: str) -> bool:
    """zoo.cli and the modules inside it (zoo/cli.py and zoo/cli_*.py before they moved there)."""
    return part(module) == "cli" or part(module).startswith("cli_")


def test_the_library_never_imports_the_command_line():
    """The command line is the top: the library (the runner's live view, training's warnings) may print, through
    zoo.terminal, but never reaches into zoo.cli, whose import would bring every command with it."""
    edges = graph()
    reaching = sorted(f"{a} -> {b}" for a, targets in edges.items() for b in targets
                      if command_line(b) and not command_line(a) and a != "zoo.__main__")
    assert not reaching, "the library imports the command line:\n" + "\n".join(reaching)


def test_the_report_reads_records_not_run_directories():
    """A report is made from an experiment's records alone (zoo/experiment/record.py reads them), so it can be
    regenerated from a checkout without the runs: it never imports the run directory's module."""
    assert not {m for m in importers_of(graph(), "zoo.rundir") if part(m) in ("report", "export", "stats")}


def test_the_shared_modules_and_the_kernels_stand_on_nothing_above_them():
    """What every layer may use imports nothing from a layer that uses it: the terminal and the kernels import
    nothing from zoo at all."""
    edges = graph()
    for name in ("zoo.terminal", "zoo.kernels"):
        outside = {b for a, targets in edges.items() if a == name or a.startswith(name + ".") for b in targets
                   if not (b == name or b.startswith(name + "."))}
        assert not outside, f"{name} imports {sorted(outside)}"


def test_the_layer_check_sees_an_import_going_up():
    edges = {"zoo.experiment.view": {"zoo.cli.process", "zoo.terminal"}, "zoo.report.collect": {"zoo.rundir"},
             "zoo.cli.train": {"zoo.train.loop"}}
    assert upward(edges) == ["zoo.experiment.view -> zoo.cli.process"]
    assert importers_of(edges, "zoo.cli") == {"zoo.experiment.view"}
    assert command_line("zoo.cli.process") and command_line("zoo.cli_process") and not command_line("zoo.terminal")
    assert importers_of(edges, "zoo.rundir") == {"zoo.report.collect"}


# -- functions you can read at once ------------------------------------------------------------------------
LONGEST = 50  # lines, from `def` to the function's last line, docstring included


def long_functions(tree: ast.AST, limit: int = LONGEST) -> list[tuple[str, int]]:
    """(qualified name, lines) of every function or method over `limit` lines."""
    found = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef) and child.end_lineno - child.lineno + 1 > limit:
                    found.append((name, child.end_lineno - child.lineno + 1))
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


@pytest.mark.parametrize("path", sorted(ROOT.rglob("*.py")), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_function_is_longer_than_a_screen(path):
    long = long_functions(ast.parse(path.read_text(), str(path)))
    assert not long, f"over {LONGEST} lines: split into well-named pieces: {long}"


def test_the_length_check_counts_from_def_to_the_last_line():
    body = "\n".join(f"    x{i} = {i}" for i in range(49))
    assert long_functions(ast.parse(f"def f():\n{body}\n")) == []  # 50 lines
    assert long_functions(ast.parse(f"class C:\n    def f(self):\n    {body.replace(chr(10), chr(10) + '    ')}\n"
                                    f"        return 1\n")) == [("C.f", 51)]
