"""zoo/stats is the pure layer of the report: numbers in, numbers out. It imports nothing else from zoo, so its
tests can be checked by simulation on their own and the report's other layers depend on it, never the reverse."""

import ast
from pathlib import Path

import pytest

STATS = Path(__file__).resolve().parents[1] / "zoo" / "stats"


def zoo_imports(path: Path) -> list[str]:
    """Every module under zoo that `path` imports (at any depth: a deferred import counts too)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # a relative import stays inside zoo.stats only if it does not climb out of it
                module = "zoo." + module if node.level > 1 else "zoo.stats." + module
            names.append(module)
    return [n for n in names if n == "zoo" or n.startswith("zoo.")]


@pytest.mark.parametrize("path", sorted(STATS.glob("*.py")), ids=lambda p: p.name)
def test_the_statistics_import_nothing_else_from_zoo(path):
    outside = [name for name in zoo_imports(path) if name != "zoo.stats" and not name.startswith("zoo.stats.")]
    assert not outside, f"{path.name} imports {outside}: zoo/stats must import nothing from zoo outside zoo.stats"


def test_the_check_sees_an_import_from_outside(tmp_path):
    module = tmp_path / "leaky.py"
    module.write_text("import math\n\ndef f():\n    from zoo.report import analysis\n    from . import welch\n"
                      "    from .. import metrics\n")
    assert zoo_imports(module) == ["zoo.report", "zoo.stats.", "zoo."]
