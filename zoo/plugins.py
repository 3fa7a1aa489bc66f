"""Plugins: a user's own components, tasks and metrics, loaded before anything is validated, so that every
command sees them as it sees zoo's own.

A plugin is a Python file (`my_components.py`), a folder with `__init__.py`, or an importable module
(`mypkg.zoo_ext`). It registers what it brings at import time (`@zoo.register("ffn", "glu", ...)`,
`@register_task("rotate")`, `@register_metric("edit_accuracy")`, `@register_dataset("my-corpus")`).
A plugin reached two ways (installed, and by its folder) is one plugin when its files hold the same bytes.
Plugins come from, in this order:

    installed packages' entry points in the group `zoo.plugins` (`pip install` a plugin package)
    $ZOO_PLUGINS                  paths or modules separated by os.pathsep (':' on POSIX)
    --plugin PATH_OR_MODULE       on any command, repeatable
    plugins = [...]               in an experiment file (paths relative to the file)

A plugin's source is part of what defines a run, and it is everything the plugin brought in: its file (and the
other .py files of a file plugin's folder) or its package, and every module first imported while it loaded that
is the user's own rather than the environment's (not the standard library, site-packages or zoo): a helper it
put on sys.path and imported, say. `fingerprint` hashes them all (sha256). A cell whose component, task or metric
any of them defines has that hash in its definition, and so has a cell using a class the plugin changed while it
loaded (`LinearFFN.forward = ...`, seen by comparing zoo's modules and classes before and after): a changed
registered class, or a base of one, stales the cells using it or a class deriving from it; a change elsewhere
in the code behind a cell's numbers (zoo.model, zoo.train, ..., and torch's layers, functional and Tensor) stales
every cell; a function's `__code__` replaced in place counts. Data files a plugin declares it reads
(`ZOO_READS`, relative to its file) are part of its source too. So editing any of it makes
those cells stale, like any other change; when unsure, more cells go stale, never fewer. (Changes made later,
by a plugin's function when it runs, or inside a container such as a dict, are not seen; the modules it imports
when it runs are recorded with each cell: zoo/experiment/executed.py.)

A plugin that cannot be loaded (missing path, an exception or sys.exit() while importing, a name already
registered, a class of the wrong base) is a PluginError with one line naming the plugin, raised before anything
trains. Only Ctrl-C passes through as itself, and os._exit() cannot be caught.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import pkgutil
import site
import sys
import sysconfig
from dataclasses import dataclass
from functools import cache
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
    sha256: str  # of its source files (see the module docstring)
    modules: tuple[str, ...] = ()  # the modules it brought in, its own first: what they define is the plugin's
    patched: tuple[type, ...] = ()  # the registered classes (or their bases) it changed while loading
    unpinned: bool = False  # it changed other code behind a cell's numbers (zoo.model, zoo.train, ...)
    identity: str = ""  # its top-level name and the fingerprint of its own files: the same plugin, however reached

    def touches(self, cls: type) -> bool:
        """Whether `cls` runs this plugin's code: the plugin defines it, or changed it or a class it derives from."""
        return (cls.__module__ in self.modules or cls.__module__.startswith(self.module + ".")
                or any(base in self.patched for base in cls.__mro__))

    @property
    def label(self) -> str:
        """How definitions and provenance name it: a path plugin by its file or folder name, a module by its
        name. The same in every process and from any working directory (a worker loads it by its resolved path;
        `--plugin sub/my.py` from one folder is `--plugin my.py` from another), so neither stales a cell."""
        return Path(self.where).name if Path(self.where).is_absolute() else self.name


_loaded: dict[str, Plugin] = {}  # key: resolved path or module name (a plugin reached two ways: both keys)


def _is_path(name: str, base: Path | None = None) -> bool:
    """A file or folder (`my_ext` beside an experiment file is one), rather than a module name."""
    return name.endswith(".py") or os.sep in name or "/" in name or ((base or Path()) / name).exists()


def files(module: ModuleType) -> list[Path]:
    """The source files of a loaded plugin: the module's file, or every .py file of its package folder."""
    origin = getattr(module, "__file__", None)
    if not origin:
        return []
    path = Path(origin)
    if path.name == "__init__.py":
        return _python_files(path.parent, recursive=True)
    return [path]


def _python_files(folder: Path, recursive: bool = False) -> list[Path]:
    found = folder.rglob("*.py") if recursive else folder.glob("*.py")
    return sorted(p for p in found if "__pycache__" not in p.parts and p.is_file())


@cache
def _environment() -> tuple[Path, ...]:
    """Folders whose modules are the environment's, not a plugin's: the standard library, site-packages
    (installed distributions) and zoo itself. Their versions are provenance, not a plugin's source."""
    paths = sysconfig.get_paths()
    roots = [paths.get(key) for key in ("stdlib", "platstdlib", "purelib", "platlib")]
    roots += [*site.getsitepackages(), site.getusersitepackages(), str(Path(__file__).parent)]
    return tuple(Path(root).resolve() for root in roots if root)


def brought_in(before: set[str]) -> dict[str, Path]:
    """{module: its file} for every module imported since `before` (names in sys.modules) that is the user's own: a
    helper a plugin imports as it loads, or as its code runs (zoo/experiment/executed.py), decides the numbers too."""
    found = {}
    for name in sorted(set(sys.modules) - before):
        origin = getattr(sys.modules.get(name), "__file__", None)
        path = Path(origin).resolve() if origin else None
        if path and path.is_file() and not any(path.is_relative_to(root) for root in _environment()):
            found[name] = path
    return found


def fingerprint(paths: Iterable[Path]) -> str:
    """sha256 over the files' names (relative to their common folder) and bytes."""
    paths = sorted(Path(p) for p in paths)
    digest = hashlib.sha256()
    root = Path(os.path.commonpath([str(p.parent) for p in paths])) if paths else Path()
    for path in paths:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


# The code that decides a cell's numbers: components, tasks, metrics, the model, training, decoding, scoring.
NUMBERS = ("zoo.components", "zoo.data", "zoo.metrics", "zoo.model.seq2seq", "zoo.model.build", "zoo.masks",
           "zoo.kernels.loss", "zoo.train", "zoo.model.decode")  # zoo.train holds evaluate.py (scoring)


@cache
def _watched() -> tuple[str, ...]:
    """NUMBERS and every module inside them, all imported now: each process watches the same modules whatever it
    had imported before (`zoo run`, a worker process), so both see the same changes and agree on definitions.
    (By name: none of them imports zoo.plugins, directly or not, so no import cycle hides here.)"""
    names = []
    for package in map(importlib.import_module, NUMBERS):
        inside = getattr(package, "__path__", [])
        names += [package.__name__, *(info.name for info in pkgutil.walk_packages(inside, package.__name__ + "."))]
    for name in names:
        importlib.import_module(name)
    return tuple(names)


def _registered() -> set[type]:
    """Every registered component, task and metric class and every class it derives from (but `object`)."""
    from zoo.data import TASKS
    from zoo.metrics import METRICS
    from zoo.registry import registry

    classes = [entry.impl for entry in registry.entries()]
    classes += [TASKS.get(name) for name in TASKS.names()] + [METRICS.get(name) for name in METRICS.names()]
    return {base for cls in classes for base in cls.__mro__ if base is not object}


@dataclass(frozen=True)
class _Snapshot:
    """The attributes of zoo's watched modules, of the classes they define and of the registered classes (and
    their bases), by identity, before a plugin loads."""

    attributes: tuple[tuple[object, dict[str, object]], ...]
    registered: frozenset[type]

    @classmethod
    def take(cls) -> _Snapshot:
        modules = [sys.modules[name] for name in (*_watched(), *_torch_watched())]
        registered = _registered()
        defined = {value for module in modules for value in vars(module).values()
                   if isinstance(value, type) and value.__module__ == module.__name__}
        import torch

        owners = [*modules, *(registered | defined), torch.Tensor]
        return cls(tuple((owner, _bindings(owner)) for owner in owners), frozenset(registered))

    def changes(self) -> tuple[tuple[type, ...], bool]:
        """(the registered classes or their bases whose attributes changed since, whether anything else changed:
        a module's function, a class no registered one derives from, which cannot be pinned on a component)."""
        changed = [owner for owner, before in self.attributes if _differs(owner, before)]
        return tuple(c for c in changed if c in self.registered), any(c not in self.registered for c in changed)


_ABSENT = object()


@cache
def _torch_watched() -> tuple[str, ...]:
    """torch's code behind every model's numbers: torch, torch.nn.functional, torch.nn.init and the layer modules
    (torch.nn.modules.*, whose classes `nn.Linear.forward = ...` would change), all imported now."""
    import torch.nn.modules

    names = ["torch", "torch.nn.functional", "torch.nn.init", "torch.nn.modules",
             *(info.name for info in pkgutil.iter_modules(torch.nn.modules.__path__, "torch.nn.modules."))]
    for name in names:
        importlib.import_module(name)
    return tuple(names)


def _bindings(owner: object) -> dict[str, object]:
    """`owner`'s attributes, each with its function's code object where it has one: rebinding an attribute, and
    replacing a function's `__code__` in place, both show."""
    return {key: (value, getattr(value, "__code__", None)) for key, value in vars(owner).items()}


def _differs(owner: object, before: dict[str, object]) -> bool:
    """Whether an attribute of `owner` was bound, rebound or deleted since `before`, or its function's code
    replaced; in a module, not the binding of a submodule imported since nor a dunder such as __warningregistry__
    (written by the warnings module)."""
    now = _bindings(owner)
    keys = set(before) | set(now)
    if isinstance(owner, ModuleType):
        keys = {key for key in keys if not (key.startswith("__") and key.endswith("__"))
                and not (isinstance(now.get(key, (None,))[0], ModuleType)
                         and now[key][0].__name__ == f"{owner.__name__}.{key}")}
    return any(before.get(key, (_ABSENT,))[0] is not now.get(key, (_ABSENT,))[0]
               or before.get(key, (None, None))[1] is not now.get(key, (None, None))[1] for key in keys)


def _version(module: str) -> str:
    top = module.split(".")[0]
    for dist in importlib.metadata.packages_distributions().get(top, []):
        try:
            return f"{dist} {importlib.metadata.version(dist)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unversioned"


def _import_path(name: str, base: Path | None) -> ModuleType:
    path = Path(name).expanduser()
    if base is not None and not path.is_absolute():
        path = base / path
    if not path.exists():
        raise PluginError(f"plugin {name!r}: {path} does not exist")
    path = path.resolve()
    target = path / "__init__.py" if path.is_dir() else path
    if not target.is_file() or target.suffix != ".py":
        raise PluginError(f"plugin {name!r}: {path} is neither a .py file nor a folder with __init__.py")
    for module in list(sys.modules.values()):  # already imported another way (an installed package's entry point)
        if getattr(module, "__file__", None) == str(target):
            return module
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
    return module


def _identity(name: str, key: str, path: bool) -> str:
    """'<top-level name>:<fingerprint of its own files>', found without importing it ('' when it cannot be).
    `pip install ./examples` copies the package into site-packages, and an experiment may name the same package by
    its folder: two files, one plugin. Equal names and bytes say so where file paths cannot."""
    if path:
        where = Path(key)
        own = _python_files(where, recursive=True) if where.is_dir() else [where] if where.is_file() else []
        top = where.stem
    else:
        if "." in name:  # finding a submodule would import its parents: only top-level packages are compared
            return ""
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            return ""
        origin = Path(spec.origin) if spec and spec.origin and spec.has_location else None
        own = (_python_files(origin.parent, recursive=True) if origin and origin.name == "__init__.py"
               else [origin] if origin else [])
        top = name
    return f"{top}:{fingerprint(own)}" if own else ""


def load(name: str, base: Path | None = None) -> Plugin:
    """Import one plugin (once per process; loading it again, by any path or module name that reaches the same
    files, returns the first load's Plugin). `base`: the folder relative paths are taken from (an experiment
    file's folder), else the working directory."""
    name = str(name).strip()
    if not name:
        raise PluginError("plugin: an empty name; give a .py file, a folder or a module name")
    path = _is_path(name, base)
    key = str(((base or Path()) / Path(name).expanduser()).resolve()) if path else name
    if key in _loaded:
        return _loaded[key]
    identity = _identity(name, key, path)
    twin = next((p for p in _loaded.values() if identity and p.identity == identity), None)
    if twin is not None:
        _loaded[key] = twin
        return twin
    namesake = next((p for p in _loaded.values() if identity and p.identity.split(":")[0] == identity.split(":")[0]),
                    None)
    try:
        return _load_new(name, base, path, key, identity)
    except PluginError as err:
        if namesake is None or "already registered" not in str(err):
            raise
        raise PluginError(f"{err}; {namesake.name!r} ({namesake.version}) is loaded already with other source "
                          f"files than {name!r}: reinstall the one or drop the other") from None


def _load_new(name: str, base: Path | None, path: bool, key: str, identity: str) -> Plugin:
    snapshot = _Snapshot.take()
    before = set(sys.modules)
    module = _import(name, base, path)
    brought = brought_in(before)
    source = set(files(module)) | set(brought.values()) | set(_declared_reads(name, module))
    if path and Path(key).is_file():  # a file plugin: the files beside it may be its helpers
        source |= set(_python_files(Path(key).parent))
    plugin = Plugin(name, key, module.__name__, "unversioned" if path else _version(module.__name__),
                    fingerprint(source) if source else "", tuple(dict.fromkeys([module.__name__, *brought])),
                    *snapshot.changes(), identity=identity)
    _loaded[key] = plugin
    return plugin


READS = "ZOO_READS"  # a plugin module's list of the data files it reads (paths relative to its own file)


def _declared_reads(name: str, module: ModuleType) -> list[Path]:
    """The files a plugin declares it reads (`ZOO_READS = ["constants.json"]`, relative to its module's file): part
    of its source, so that editing one stales the cells using the plugin. A declared file that is not there is a
    PluginError: a dependency the definition cannot see is worse than none declared."""
    declared = getattr(module, READS, [])
    if isinstance(declared, (str, Path)) or not all(isinstance(p, (str, Path)) for p in declared):
        raise PluginError(f"plugin {name!r}: {READS} must be a list of paths, got {declared!r}")
    folder = Path(module.__file__).parent if getattr(module, "__file__", None) else Path()
    found = []
    for entry in declared:
        path = (folder / Path(entry).expanduser()).resolve()
        if not path.is_file():
            raise PluginError(f"plugin {name!r}: {READS} names {entry!r}, which is not a file ({path})")
        found.append(path)
    return found


def _import(name: str, base: Path | None, path: bool) -> ModuleType:
    """The plugin's module, imported; whatever its import raises or exits with is a one-line PluginError naming it
    (but Ctrl-C)."""
    try:
        if path:
            return _import_path(name, base)
        return importlib.import_module(name)
    except (PluginError, KeyboardInterrupt):
        raise
    except ZooError as err:  # a duplicate name, a class of the wrong base: the registry says which
        raise PluginError(f"plugin {name!r}: {one_line(err)}") from None
    except ModuleNotFoundError as err:
        if path or not err.name or not name.startswith(err.name):  # the plugin's own import failed
            raise PluginError(f"plugin {name!r}: importing it failed: ModuleNotFoundError: {one_line(err)}") from None
        raise PluginError(f"plugin {name!r}: cannot import it ({one_line(err)}); is it installed, or is it a path?") \
            from None
    except SystemExit as err:  # sys.exit() in a plugin would end any command silently, with its exit code
        raise PluginError(f"plugin {name!r}: importing it called sys.exit({one_line(repr(err.code))})") from None
    except BaseException as err:  # noqa: BLE001 - any failure of user code at import is reported, in one line
        raise PluginError(f"plugin {name!r}: importing it failed: {type(err).__name__}: {one_line(err)}") from None


def one_line(value: object) -> str:
    """`value` as text on one line; an exception of user code whose str() itself fails is named by its type."""
    try:
        text = str(value)
    except Exception:  # noqa: BLE001 - a broken __str__ must not hide the failure it describes
        text = f"<{type(value).__name__}>"
    return " ".join(text.split())


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


def sources_of(used: Iterable[type]) -> dict[str, str]:
    """{plugin label: sha256 of its sources} for the loaded plugins that any of the classes `used` (the components,
    task and metrics of a run) touch, and those that changed code no class can be pinned with: what a cell's
    definition must include, so that editing them makes it stale. Two plugins of one label (ext.py in two
    folders) share its entry: the sha256 of their sorted hashes, so that editing either one shows."""
    used = list(used)
    hashes: dict[str, set[str]] = {}
    for plugin in _loaded.values():
        if plugin.unpinned or any(plugin.touches(c) for c in used):
            hashes.setdefault(plugin.label, set()).add(plugin.sha256)
    return {label: found.pop() if len(found) == 1 else hashlib.sha256("".join(sorted(found)).encode()).hexdigest()
            for label, found in hashes.items()}


def touching(cls: type) -> list[Plugin]:
    """The loaded plugins whose code `cls` runs (see `Plugin.touches`)."""
    return [p for p in _loaded.values() if p.touches(cls)]


def loaded() -> list[Plugin]:
    """Every plugin loaded in this process, in load order (for provenance)."""
    return list(_loaded.values())
