"""Reading and reporting on every config zoo takes: specs, training configs, tasks and experiments.

One module so that each config reads files, parses `--set KEY=VALUE` and words validation errors
the same way: a file that is not UTF-8, a YAML or JSON key given twice, or an unknown key in a
nested table is one line naming the file, the key and what is allowed. A config file is a regular
file of at most MAX_CONFIG_BYTES, and YAML aliases are refused, so no file (`/dev/zero`, a
"billion laughs" of nested aliases) can make reading it exhaust memory or time.
"""

from __future__ import annotations

import difflib
import json
import os
import stat
import tomllib
from pathlib import Path
from typing import Annotated, Any, get_args

import yaml
from pydantic import AfterValidator, AllowInfNan, BaseModel, Strict
from pydantic_core import PydanticCustomError

from zoo.errors import SpecError

# A number where a number is meant: not a boolean (`steps=true` would be 1), not inf or NaN. Every numeric
# field of every config (spec and component options, task, training, decoding, experiment) is one of these,
# so the rule lives here once; tests/test_input_checks.py checks every registered component's options.
Count = Annotated[int, Strict()]
Number = Annotated[float, Strict(), AllowInfNan(False)]


def _check_label(value: str) -> str:
    """A name printed in tables and messages stays one clean cell: a newline or a separator in it broke them."""
    if not value or value != value.strip() or not value.isprintable() or "/" in value or "\\" in value:
        raise PydanticCustomError("zoo_label", "must be non-empty printable text without leading or trailing "
                                  "spaces, control characters or path separators")
    return value


# A display name (a spec's `name`). Names that become folders (experiment names, variant and task labels)
# are stricter still: zoo.experiment.store.check_name.
Label = Annotated[str, AfterValidator(_check_label)]


MAX_CONFIG_BYTES = 4 * 1024 * 1024  # specs and experiments are a few KB; the README states this cap


# -- reading ---------------------------------------------------------------------------------------
class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml.safe_load keeps the last of two equal keys; a config that says two things is refused. Aliases
    (`*name`) are refused too: nested ones expand exponentially (a 450-byte file hung `zoo show`)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, f"alias *{event.anchor} is not allowed in a zoo config; "
                                              "write the value out", event.start_mark)
        return super().compose_node(parent, index)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, (list, dict)) or key in seen:
                what = "is not a plain key" if isinstance(key, (list, dict)) else "is given twice"
                raise yaml.constructor.ConstructorError(None, None, f"key {key!r} {what}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


def _unique_json_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    for key in keys:
        if keys.count(key) > 1:
            raise ValueError(f"key {key!r} is given twice")
    return dict(pairs)


def read_config_file(path: Path) -> dict[str, Any]:
    """Parse a TOML, YAML or JSON file (spec, training config or experiment) into a dict, not yet validated."""
    path = Path(path)
    try:
        text = _read_capped(path).decode("utf-8")
    except OSError as err:
        raise SpecError(f"{path}: cannot read the file ({err.strerror})") from None
    except UnicodeDecodeError as err:
        raise SpecError(f"{path}: not UTF-8 text (byte {err.start}: {err.reason}); "
                        "config files must be UTF-8") from None
    try:
        if path.suffix == ".toml":
            data = tomllib.loads(text)
        elif path.suffix in (".yaml", ".yml"):
            data = yaml.load(text, Loader=_UniqueKeyLoader)
        elif path.suffix == ".json":
            data = json.loads(text, object_pairs_hook=_unique_json_keys)
        else:
            raise SpecError(f"{path}: unknown file format {path.suffix!r}; use .toml, .yaml, .yml or .json")
    except (tomllib.TOMLDecodeError, yaml.YAMLError, ValueError, RecursionError) as err:
        mark = getattr(err, "problem_mark", None)
        if isinstance(err, yaml.MarkedYAMLError) and mark is not None:  # PyYAML's str() spans lines with a caret
            detail = f"line {mark.line + 1}, column {mark.column + 1}: {err.problem}"
        else:
            detail = " ".join(str(err).split())
        raise SpecError(f"{path}: not valid {path.suffix.lstrip('.').upper()}: {detail}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: the file must hold a table of fields, not {type(data).__name__}")
    _check_plain(data, path)
    return data


def _check_plain(value: Any, path: Path, where: str = "") -> None:
    """Only what JSON can hold: a TOML date or a YAML !!binary, !!set or !!timestamp is refused here, naming
    the key, instead of failing as a TypeError wherever the config is copied or hashed."""
    if isinstance(value, dict):
        for key, item in value.items():
            _check_plain(item, path, f"{where}.{_key(key)}" if where else _key(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_plain(item, path, f"{where}[{i}]")
    elif value is not None and not isinstance(value, (str, int, float)):
        raise SpecError(f"{path}: {where or 'the file'}: a {type(value).__name__} is not a config value "
                        f"(got {_short(value)}); write a string, number, boolean, list or table")


def _read_capped(path: Path) -> bytes:
    """The bytes of a regular file of at most MAX_CONFIG_BYTES (checked on the open file, and by reading
    one byte more than the cap, so a file that grows or a device cannot slip past; opened non-blocking, so
    a FIFO is refused, not waited on)."""
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise SpecError(f"{path}: not a regular file; a config must be a file, not a device, pipe or folder")
        data = handle.read(MAX_CONFIG_BYTES + 1)
    if len(data) > MAX_CONFIG_BYTES:
        raise SpecError(f"{path}: larger than {MAX_CONFIG_BYTES // 2**20} MB, the limit for a config file")
    return data


def parse_value(text: str) -> Any:
    """A CLI override value: TOML scalar or array syntax (1, 0.1, true, "x", [..]) or a bare string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def parse_assignments(items: list[str] | None, flag: str = "--set", example: str = "ffn.kind=conv1d") -> dict[str, Any]:
    """['ffn.kind=conv1d', 'd_model=128'] -> {'ffn.kind': 'conv1d', 'd_model': 128}. `flag` and `example`: how
    the error for an item without '=' names the option it was given with."""
    overrides: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SpecError(f"{flag} {item!r}: expected KEY=VALUE, e.g. {flag} {example}")
        overrides[key.strip()] = parse_value(value.strip())
    return overrides


# -- errors ----------------------------------------------------------------------------------------
def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside an annotation (Variant in list[Variant], X in X | None), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        model = _model_in(arg)
        if model is not None:
            return model
    return None


def _fields_at(model: type[BaseModel] | None, path: tuple) -> dict[str, Any]:
    """The fields of the table at `path` ('variants', 1) below `model`: what an unknown key there could be."""
    for part in path:
        if model is None:
            return {}
        if isinstance(part, int):  # a list index: same model
            continue
        field = model.model_fields.get(str(part))
        model = _model_in(field.annotation) if field is not None else None
    return dict(model.model_fields) if model is not None else {}


def describe_error(error: dict[str, Any], model: type[BaseModel] | None = None, prefix: tuple = ()) -> str:
    """One pydantic error as 'dotted.field: what is wrong (got value)'; an unknown key lists the keys of
    the table it was found in (a nested one included) and suggests the closest."""
    loc = ".".join(_key(p) for p in (*prefix, *error["loc"]))
    if error["type"] == "zoo_slot":
        return error["msg"]
    if error["type"] == "extra_forbidden":
        fields = _fields_at(model, tuple(error["loc"][:-1]))
        name = _key(error["loc"][-1])
        close = difflib.get_close_matches(name, list(fields), n=1, cutoff=0.6)
        suggestion = ".".join(_key(p) for p in (*prefix, *error["loc"][:-1], *close[:1]))
        hint = f"; did you mean {suggestion!r}?" if close else ""
        valid = f" (valid keys: {', '.join(sorted(fields))})" if fields else ""
        return f"{loc}: unknown key{hint}{valid}"
    message = " ".join(str(error["msg"]).split())
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
        return message if message.split(":")[0].strip() else f"{loc}: {message}"
    return f"{loc}: {message} (got {_short(error.get('input'))})" if loc else message


def _key(part: Any) -> str:
    """A key as an error names it: as written, or quoted when it is empty or holds a newline or another
    unprintable character (the message stays one line)."""
    text = str(part)
    return text if text and text.isprintable() else repr(text)


def _short(value: Any) -> str:
    """repr of a value, cut so that one bad field cannot turn the error into a page."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
