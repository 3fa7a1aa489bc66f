"""The component registry, slot -> name -> implementation, with zoo's own components registered.

Everything that looks a component up (specs, build, the CLI, the contracts) and every plugin that registers
one imports the registry from here:

    from zoo.registry import SlotParams, register, registry

It comes from the package zoo.components, which imports every slot file first, so zoo's own components are
registered before anything can ask for one, and nothing imports components for their side effect. How slots
are declared and implementations registered (typed options, duplicates and wrong base classes refused):
zoo/components/slots.py, which the slot files import, and which imports none of them (no import cycle).
"""

from zoo.components import Entry, Registry, Slot, SlotParams, register, registry

__all__ = ["Entry", "Registry", "Slot", "SlotParams", "register", "registry"]
