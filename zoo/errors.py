"""Every error a user can cause is a ZooError: the CLI prints its message on one line and exits 2."""

import difflib

#: The distribution's name in `pip show` (`zoo` on PyPI is an unrelated RPC framework); the import name and the
#: `zoo` command stay `zoo`. It installs from a clone or a wheel built there, not from PyPI.
DISTRIBUTION = "transformer-zoo"


def install_hint(extra: str) -> str:
    """How to install an optional extra (one line for error messages): its packages, read from the installed
    distribution's metadata (a wheel installed away from the clone has no '.[extra]' to point at), and the
    clone's form."""
    from importlib import metadata

    try:
        requires = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        requires = []
    marker = f'extra == "{extra}"'
    packages = [r.split(";")[0].strip() for r in requires if marker in r.replace("'", '"')]
    clone = f"pip install '.[{extra}]' in zoo's clone"
    return f"pip install {' '.join(repr(p) for p in packages)} (or {clone})" if packages else clone


PLUGIN_HINT = ("a name from a plugin needs the plugin loaded: --plugin, $ZOO_PLUGINS or an installed package's "
               "entry point")


def closest(name: object, names: list[str]) -> str:
    """'; did you mean 'X'?' for the registered name closest to `name`, or '' when none is close."""
    close = difflib.get_close_matches(str(name), names, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def not_found(name: object, names: list[str]) -> str:
    """What follows 'unknown X NAME' in every lookup error: the closest name, and where names come from (a
    plugin that is not loaded is the usual reason a name is missing)."""
    return f"{closest(name, names)} (valid: {', '.join(names)}; {PLUGIN_HINT})"


class ZooError(Exception):
    """Base class for errors caused by user input (specs, presets, overrides, pairings)."""


class SpecError(ZooError, ValueError):
    """A spec, preset name or override is invalid; the message names the field and what is allowed."""


class RegistryError(ZooError, KeyError):
    """A registry lookup or registration failed (unknown slot or name, duplicate name, wrong base class)."""

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0]) if self.args else ""


class IncompatibleComponents(SpecError):
    """Two components cannot be combined (e.g. an attention kind that cannot honour a mask convention)."""


class NotTransplantable(ZooError):
    """Weights cannot be mapped from one layout into another; `parameters` names those without a counterpart."""

    def __init__(self, message: str, parameters: list[str] | None = None):
        super().__init__(message)
        self.parameters = list(parameters or [])


class NotExpressible(ZooError):
    """A spec cannot be expressed with torch.nn.Transformer; the message says which choice prevents it."""


class DataError(ZooError, ValueError):
    """A task name, task setting or data file is invalid; the message names the file or field and what is allowed."""


class ExportError(ZooError):
    """An export cannot be written (missing extra, unusable destination)."""


class RunError(ZooError):
    """A run directory is missing, incomplete, or belongs to another spec/config; or its checkpoint is unreadable."""
