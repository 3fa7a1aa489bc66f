"""The task registry: task name -> Task class. Each class registers next to its code, zoo's own
(zoo/data/synthetic.py, zoo/data/text.py) as a plugin's, with `register_task`:

    from zoo.data import SyntheticTask, register_task

    @register_task("rotate")
    class Rotate(SyntheticTask):
        def target(self, source): return [*source[1:], source[0]]

A registered class is found by its name; a family of names (every `CORPUS:SRC-TGT` for parallel text,
its `family`) by the class's `claims(name)`. Every command sees a plugin's task as it sees zoo's own, and
experiments, training, floors and reports treat it the same way: through the Task interface and the
metrics the class names. This module imports no task class, so TaskConfig (zoo/data/config.py) can look
names up here while the task classes, which take a TaskConfig, import it.
"""

from __future__ import annotations

from zoo.catalogue import Catalogue
from zoo.data.task import Task
from zoo.errors import closest

TASKS: Catalogue[type[Task]] = Catalogue("task", Task)
register_task = TASKS.register


def task_class(name: str) -> type[Task]:
    """The class a task name stands for; ValueError naming the valid ones (with a close match) otherwise."""
    if isinstance(name, str):
        classes = [TASKS.get(n) for n in TASKS.names()]
        if name in TASKS and TASKS.get(name).family is None:
            return TASKS.get(name)
        for task in classes:
            if task.family is not None and task.claims(name):
                return task
    plain = [n for n in TASKS.names() if TASKS.get(n).family is None]
    families = [TASKS.get(n).family for n in TASKS.names() if TASKS.get(n).family is not None]
    raise ValueError(f"name: {name!r} is not a task{closest(name, plain)} (allowed: {', '.join(plain)}"
                     + "".join(f", or {family}" for family in families)
                     + "; a task from a plugin needs the plugin loaded: --plugin, $ZOO_PLUGINS or an installed "
                     "package's entry point)")
