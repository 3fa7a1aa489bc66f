"""Plugins: a user's own components, tasks and metrics, loaded before anything is validated, so that every
command sees them as it sees zoo's own.

A plugin is a Python file (`my_components.py`), a folder with `__init__.py`, or an importable module
(`mypkg.zoo_ext`). It registers what it brings at import time (`@zoo.register("ffn", "glu", ...)`,
`@register_task("rotate")`, `@register_metric("edit_accuracy")`).
Plugins come from, in this order:

    installed packages' entry points in the group `zoo.plugins` (`pip install` a plugin package)
    $ZOO_PLUGINS                  paths or modules separated by os.pathsep (':' on POSIX)
    --plugin PATH_OR_MODULE       on any command, repeatable
    plugins = [...]               in an experiment file (paths relative to the file)

A plugin's source is part of what defines a run: `fingerprint` hashes its files (sha256), so editing
a plugin makes the cells that used it stale, like any other change. A plugin that cannot be loaded
(missing path, import error, a name already registered, a class of the wrong base) is a PluginError
with one line naming the plugin, raised before anything trains.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Iterable

from zoo.errors import ZooError

ENV = "ZOO_PLUGINS"
GROUP = "zoo.plugins"


class PluginError(ZooError):
    """A plugin could not be found or loaded; the message names the plugin and the reason."""


@dataclass(frozen=True)
class Plugin:
    name: str  # as the user gave it: a path or a module name
    where: str  # how another process loads it: the resolved path, or the module name
    module: str  # the module it was imported as
    version: str  # of the installed distribution that provides it, else 'unversioned'
    sha256: str  # of its source files (see `files`)

    @property
    def label(self) -> str:
        """How definitions and provenance name it: a path plugin by its file or folder name, a module by its
        name. The same in every process and from any working directory (a worker loads it by its resolved path;
        `--plugin sub/my.py` from one folder is `--plugin my.py` from another), so neither stales a cell."""
        return Path(self.where).name if Path(self.where).is_absolute() else self.name


_loaded: dict[str, Plugin] = {}  # key: resolved path or module name


def _is_path(name: str) -> bool:
    return name.endswith(".py") or os.sep in name or "/" in name or Path(name).exists()


def files(module: ModuleType) -> list[Path]:
    """The source files of a loaded plugin: the module's file, or every .py file of its package folder."""
    origin = getattr(module, "__file__", None)
    if not origin:
        return []
    path = Path(origin)
    if path.name == "__init__.py":
        return sorted(p for p in path.parent.rglob("*.py") if "__pycache__" not in p.parts)
    return [path]


def fingerprint(paths: Iterable[Path]) -> str:
    """sha256 over the files' names (relative to their common folder) and bytes."""
    paths = sorted(Path(p) for p in paths)
    digest = hashlib.sha256()
    root = Path(os.path.commonpath([str(p.parent) for p in paths])) if paths else Path()
    for path in paths:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _version(module: str) -> str:
    top = module.split(".")[0]
    for dist in importlib.metadata.packages_distributions().get(top, []):
        try:
            return f"{dist} {importlib.metadata.version(dist)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unversioned"


def _import_path(name: str, base: Path | None) -> tuple[str, ModuleType]:
    path = Path(name).expanduser()
    if base is not None and not path.is_absolute():
        path = base / path
    if not path.exists():
        raise PluginError(f"plugin {name!r}: {path} does not exist")
    path = path.resolve()
    target = path / "__init__.py" if path.is_dir() else path
    if not target.is_file():
        raise PluginError(f"plugin {name!r}: {path} is neither a .py file nor a folder with __init__.py")
    for module in list(sys.modules.values()):  # already imported another way (an installed package's entry point)
        if getattr(module, "__file__", None) == str(target):
            return str(path), module
    tag = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    module_name = f"zoo_plugin_{tag}_{path.stem.replace('-', '_')}"
    spec = importlib.util.spec_from_file_location(module_name, target,
                                                  submodule_search_locations=[str(path)] if path.is_dir() else None)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    return str(path), module


def load(name: str, base: Path | None = None) -> Plugin:
    """Import one plugin (once per process; loading it again returns the first load's Plugin).
    `base`: the folder relative paths are taken from (an experiment file's folder), else the working directory."""
    name = str(name).strip()
    if not name:
        raise PluginError("plugin: an empty name; give a .py file, a folder or a module name")
    key = str(((base or Path()) / Path(name).expanduser()).resolve()) if _is_path(name) else name
    if key in _loaded:
        return _loaded[key]
    try:
        if _is_path(name):
            _, module = _import_path(name, base)
        else:
            module = importlib.import_module(name)
    except PluginError:
        raise
    except ZooError as err:  # a duplicate name, a class of the wrong base: the registry says which
        raise PluginError(f"plugin {name!r}: {err}") from None
    except ModuleNotFoundError as err:
        if _is_path(name) or not err.name or not name.startswith(err.name):  # the plugin's own import failed
            raise PluginError(f"plugin {name!r}: importing it failed: ModuleNotFoundError: {err}") from None
        raise PluginError(f"plugin {name!r}: cannot import it ({err}); is it installed, or is it a path?") from None
    except Exception as err:  # noqa: BLE001 - any failure of user code at import is reported, in one line
        raise PluginError(f"plugin {name!r}: importing it failed: {type(err).__name__}: {err}") from None
    source = files(module)
    plugin = Plugin(name, key, module.__name__, _version(module.__name__) if not _is_path(name) else "unversioned",
                    fingerprint(source) if source else "")
    _loaded[key] = plugin
    return plugin


def load_all(names: Iterable[str] = (), base: Path | None = None, *, environment: bool = True,
             entry_points: bool = True) -> list[Plugin]:
    """Entry points, then $ZOO_PLUGINS, then `names`: every plugin loaded, in that order."""
    plugins = []
    if entry_points:
        for point in importlib.metadata.entry_points(group=GROUP):
            plugins.append(load(point.value.split(":")[0]))
    if environment:
        plugins += [load(part) for part in os.environ.get(ENV, "").split(os.pathsep) if part.strip()]
    plugins += [load(name, base) for name in names]
    return plugins


def sources_of(modules: Iterable[str]) -> dict[str, str]:
    """{plugin name: sha256 of its sources} for the loaded plugins that define any of `modules` (the modules
    of the classes a run uses): what a cell's definition must include, so that editing them makes it stale."""
    modules = set(modules)
    return {p.label: p.sha256 for p in _loaded.values()
            if any(m == p.module or m.startswith(p.module + ".") for m in modules)}


def loaded() -> list[Plugin]:
    """Every plugin loaded in this process, in load order (for provenance)."""
    return list(_loaded.values())
