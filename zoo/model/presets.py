"""Named presets: the TOML files in the repository's `registry/` folder.

After `pip install .` they are package data of `zoo._registry`; in a source checkout they are read
from `registry/` beside the package. `ZOO_PRESETS` (a folder) adds the user's own presets. A preset file
that cannot be read (not UTF-8, not TOML, too large) is an error only when that preset is asked for:
`zoo list` names it on one line and goes on with the others.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from zoo.config_io import read_config_file
from zoo.errors import SpecError, closest
from zoo.model.overrides import apply_overrides


def preset_dirs() -> list[Path]:
    dirs = []
    if os.environ.get("ZOO_PRESETS"):
        dirs.append(Path(os.environ["ZOO_PRESETS"]))
    package = Path(__file__).resolve().parents[1]  # zoo/
    source_tree = package.parent / "registry"
    if source_tree.is_dir():
        dirs.append(source_tree)
    packaged = package / "_registry"  # where `pip install .` puts registry/
    if packaged.is_dir():
        dirs.append(packaged)
    return dirs


def preset_paths() -> dict[str, Path]:
    by_name: dict[str, Path] = {}
    for folder in reversed(preset_dirs()):  # earlier folders win
        for path in sorted(folder.glob("*.toml")):
            by_name[path.stem] = path
    return dict(sorted(by_name.items()))


def preset_names() -> list[str]:
    return list(preset_paths())


def _dotted(changes: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A preset's own fields as dotted keys ('ffn.kind'), so that `extends` applies them as `--set` would."""
    flat: dict[str, Any] = {}
    for key, value in changes.items():
        flat.update(_dotted(value, f"{prefix}{key}.") if isinstance(value, dict) else {f"{prefix}{key}": value})
    return flat


def preset_data(name: str, seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """A preset's fields, its `extends` resolved (see with_base)."""
    paths = preset_paths()
    if name not in paths:
        raise SpecError(unknown_preset(name, paths, " (and no such spec file)"))
    return with_base(read_config_file(paths[name]), (*seen, name), source=str(paths[name]))


def unknown_preset(name: str, paths: dict[str, Path], note: str = "") -> str:
    hint = closest(name, list(paths))
    own = os.environ.get("ZOO_PRESETS")
    if own and not Path(own).is_dir():  # the user's presets were looked for, and not found: say where
        hint += f"; $ZOO_PRESETS is {own!r}, which is not a folder"
    return f"unknown preset {name!r}{note}{hint}; presets: {', '.join(paths) or 'none found'}"


def with_base(data: dict[str, Any], seen: tuple[str, ...] = (), source: str = "") -> dict[str, Any]:
    """Spec fields with `extends = "NAME"` resolved: preset NAME with these fields changed, as `--set`
    would change them (how `writeup-001-as-written` restores 001's slips without copying 001; a spec file
    may do the same). A changed slot keeps its other options, except those a switched `kind` does not
    have (`[ffn] kind = "swiglu"` drops `activation`)."""
    data = dict(data)
    base = data.pop("extends", None)
    if base is None:
        return data
    where = f"{source}: extends" if source else "extends"
    if not isinstance(base, str):
        raise SpecError(f"{where}: expected the name of a preset, got {base!r}")
    if base in seen:
        raise SpecError(f"{where}: {' -> '.join((*seen, base))} is a cycle")
    paths = preset_paths()
    if base not in paths:
        raise SpecError(f"{where}: {unknown_preset(base, paths)}")
    # the base's description and notes are about the base: a spec that gives none of its own says what it is
    own = {"description": f"{base}, with the fields this spec changes (zoo show NAME --diff {base})", "notes": ""}
    return apply_overrides({**preset_data(base, seen), **own}, _dotted(data))
