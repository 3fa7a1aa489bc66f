"""`zoo list`, `zoo show` and `zoo schema`: what is registered (components, presets, tasks, metrics, executors) and
what a spec holds, field by field and parameter by parameter."""

from __future__ import annotations

import argparse
import fnmatch
import json

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel

from zoo.catalogue import describe
from zoo.config_io import parse_assignments
from zoo.errors import PLUGIN_HINT, ZooError, closest
from zoo.model.build import build
from zoo.model.presets import preset_names
from zoo.model.spec import ModelSpec, load_spec
from zoo.model.summary import diff, flatten, parameter_breakdown
from zoo.registry import registry
from zoo.terminal import Table

console = Console(emoji=False)  # user text such as ":smile:" is printed as written
errors = Console(stderr=True, emoji=False)


def _spec(name: str, assignments: list[str] | None) -> ModelSpec:
    return load_spec(name, parse_assignments(assignments))


def _options(entry) -> str:
    key = registry.slot(entry.slot).key
    return _defaults({k: f for k, f in entry.config.model_fields.items() if k != key})


def _defaults(fields: dict) -> str:
    """'name=default, ...' of a pydantic model's fields (a required one by its name alone; a default made by a
    factory shown as the value it makes)."""
    return ", ".join(k if f.is_required() else f"{k}={f.get_default(call_default_factory=True)!r}"
                     for k, f in fields.items())


def _supports(entry) -> str:
    impl = entry.impl
    if entry.slot == "attention":
        return ", ".join(f"{label}: {'yes' if getattr(impl, attr) else 'no'}" for label, attr in
                         (("rezero masks", "supports_rezero"), ("incremental", "supports_incremental")))
    if entry.slot == "mask":
        fill = "-inf" if impl.fill == float("-inf") else f"{impl.fill:g}"
        return f"writeup {impl.writeup}, fill {fill}" + (", re-zeroes" if impl.rezero else "")
    return ""


def cmd_list(args: argparse.Namespace) -> int:
    pattern = args.pattern or "*"
    full = not any(sign in pattern for sign in "*?[")  # one entry asked for by name: its whole docstring
    entries = registry.entries(pattern)
    if entries:
        table = Table(title=f"Components matching {pattern!r}", title_justify="left")
        table.add_column("component", no_wrap=True)
        for column in ("what it is", "options (defaults)", "supports"):
            table.add_column(column, overflow="fold")
        for entry in entries:
            table.add_row(*map(escape, (entry.qualified, describe(entry.impl.__doc__, full), _options(entry),
                                        _supports(entry))))
        console.print(table)
    presets = [n for n in preset_names() if args.pattern is None or fnmatch.fnmatchcase(n, pattern)]
    if presets:
        table = Table(title="Presets (zoo show NAME)", title_justify="left")
        table.add_column("preset", no_wrap=True)
        table.add_column("digest")
        table.add_column("description", overflow="fold")
        broken = []
        for name in presets:
            try:
                spec = load_spec(name)
            except ZooError as err:  # one broken user preset must not hide the others
                broken.append(str(err))
                continue
            table.add_row(escape(name), spec.digest(), escape(spec.description))
        console.print(table)
        for message in broken:
            errors.print(f"zoo: preset not listed: {escape(message)}", highlight=False, soft_wrap=True)
    listed = _list_tasks_and_metrics(pattern, full)
    listed = _list_executors(pattern, full) or listed
    if not entries and not presets and not listed:
        raise ZooError(f"nothing matches {pattern!r}{closest(pattern, listable())} ('zoo list' shows everything; "
                       f"{PLUGIN_HINT})")
    return 0


def listable() -> list[str]:
    """Every name `zoo list` and `zoo check` match patterns against, and each family's wildcard ('ffn.*',
    'task.*'): what a pattern that matches nothing is compared with for a suggestion."""
    from zoo import metrics
    from zoo.data import TASKS
    from zoo.experiment.executors import EXECUTORS

    names = [entry.qualified for entry in registry.entries()] + preset_names()
    names += [f"task.{n}" for n in TASKS.names()] + [f"metric.{n}" for n in metrics.names()]
    names += [f"executor.{n}" for n in EXECUTORS.names()]
    return names + sorted({f"{name.split('.')[0]}.*" for name in names if "." in name})


def _counts_table(spec: ModelSpec, title: str) -> Table:
    model = build(spec, device="meta")
    table = Table(title=title, title_justify="left")
    table.add_column("component")
    table.add_column("trainable parameters", justify="right")
    for component, count in parameter_breakdown(model):
        table.add_row(component, f"{count:,}")
    table.add_row("[bold]total[/bold]", f"[bold]{model.num_parameters():,}[/bold]")
    return table


def _list_tasks_and_metrics(pattern: str, full: bool) -> bool:
    """Tables of the registered tasks ('task.NAME') and metrics ('metric.NAME') matching `pattern`, with their whole
    docstrings where `full`; whether any is listed."""
    from zoo import metrics
    from zoo.data import TASKS

    tasks = [n for n in TASKS.names() if fnmatch.fnmatchcase(f"task.{n}", pattern)]
    if tasks:
        table = Table(title=escape("Tasks (an experiment's [[tasks]] name)"), title_justify="left")
        for column in ("task", "what it is", "metrics (first: default primary)"):
            table.add_column(column, overflow="fold")
        for name in tasks:
            task = TASKS.get(name)
            shown = f"{name} ({task.family})" if task.family else name
            table.add_row(*map(escape, (shown, describe(task.__doc__, full), ", ".join(task.metrics))))
        console.print(table)
    names = [n for n in metrics.names() if fnmatch.fnmatchcase(f"metric.{n}", pattern)]
    if names:
        table = Table(title="Metrics (a task's primary)", title_justify="left")
        for column in ("metric", "what it is", "better", "bounds", "stall floor"):
            table.add_column(column, overflow="fold")
        for name in names:
            metric = metrics.get(name)
            table.add_row(*map(escape, (name, describe(type(metric).__doc__, full), "higher" if metric.higher_is_better
                                        else "lower", f"{metric.bounds[0]:g}..{metric.bounds[1]:g}",
                                        f"{metric.stall_floor:g}")))
        console.print(table)
    return bool(tasks or names)


def _list_executors(pattern: str, full: bool) -> bool:
    """A table of the registered executors ('executor.NAME') matching `pattern`, with their whole docstrings where
    `full`; whether any is listed."""
    from zoo.experiment.executors import EXECUTORS

    names = [n for n in EXECUTORS.names() if fnmatch.fnmatchcase(f"executor.{n}", pattern)]
    if names:
        table = Table(title="Executors (zoo run --executor NAME)", title_justify="left")
        for column in ("executor", "what it is", "options (defaults)"):
            table.add_column(column, overflow="fold")
        for name in names:
            executor = EXECUTORS.get(name)
            table.add_row(*map(escape, (name, describe(executor.__doc__, full),
                                        _defaults(executor.Options.model_fields))))
        console.print(table)
    return bool(names)


def cmd_show(args: argparse.Namespace) -> int:
    spec = _spec(args.spec, args.set)
    console.print(Panel(f"[bold]{escape(spec.name)}[/bold]  digest [cyan]{spec.digest()}[/cyan]\n"
                        f"{escape(spec.description)}", expand=False))
    if args.diff:
        other = _spec(args.diff, args.set_other)
        rows = diff(spec, other)
        console.print(escape(f"{spec.name} vs {other.name}: {len(rows)} field(s) differ"))
        table = Table()
        table.add_column("field", no_wrap=True)
        for column in (spec.name, other.name):
            table.add_column(escape(column))
        for field, a, b in rows:
            table.add_row(escape(field), escape(json.dumps(a)), escape(json.dumps(b)))
        console.print(table)
        a_count, b_count = build(spec, device="meta").num_parameters(), build(other, device="meta").num_parameters()
        console.print(f"trainable parameters: {a_count:,} vs {b_count:,} ({b_count - a_count:+,})")
        return 0
    table = Table(title="Resolved spec", title_justify="left")
    table.add_column("field", no_wrap=True)
    table.add_column("value")
    for field, value in flatten(spec).items():
        table.add_row(escape(field), escape(json.dumps(value)))
    console.print(table)
    console.print(_counts_table(spec, "Parameters per component"))
    if spec.notes:
        console.print(Panel(escape(" ".join(spec.notes.split())), title="notes", title_align="left"))
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    print(json.dumps(ModelSpec.model_json_schema(), indent=2))
    return 0


def add_commands(sub) -> None:
    """`zoo list`, `zoo show` and `zoo schema`: what is registered and what a spec holds."""
    p = sub.add_parser("list", help="list registered components, presets, tasks, metrics and executors",
                       description="List registered components (slot.name), presets, tasks (task.name), metrics "
                       "(metric.name) and executors (executor.name); PATTERN is a shell-style wildcard, e.g. "
                       "'attention.*', '*norm*' or 'task.*'; a name without wildcards (e.g. 'attention.torch-mha') "
                       "shows the whole docstring of what it names.")
    p.add_argument("pattern", nargs="?", metavar="PATTERN", help="which entries (default: all), e.g. 'ffn.*'")
    p.set_defaults(run=cmd_list)

    p = sub.add_parser("show", help="show a resolved spec, its parameters per component, or a diff",
                       description="Show a resolved spec (preset name or spec file) with its digest and parameter "
                       "count per component, or with --diff the fields in which another spec differs.")
    p.add_argument("spec", metavar="SPEC", help="preset name or .toml/.yaml/.json spec file")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a field, e.g. --set ffn.kind=conv1d")
    p.add_argument("--diff", metavar="OTHER", help="compare against another preset or spec file")
    p.add_argument("--set-other", action="append", metavar="KEY=VALUE", help="override a field of OTHER")
    p.set_defaults(run=cmd_show)

    p = sub.add_parser("schema", help="print the JSON schema of a model spec")
    p.set_defaults(run=cmd_schema)
