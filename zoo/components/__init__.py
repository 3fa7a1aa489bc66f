"""One module per component slot, each registering its implementations into the registry of slots.py.

Importing the package imports every slot file, so the `registry` it hands on holds zoo's own components
(zoo/registry.py gives it to everything that looks components up).
"""

from zoo.components import attention, embedding, ffn, init, masks, norm, output, positional, residual  # noqa: F401
from zoo.components.slots import Entry, Registry, Slot, SlotParams, register, registry

__all__ = ["Entry", "Registry", "Slot", "SlotParams", "register", "registry"]
