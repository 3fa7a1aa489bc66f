"""What zoo prints in a terminal, for the command line and the library alike (the runner's live view, which
`zoo.study(...).run()` shows too; training's warnings): rich's Table, laid out so that no word is ever split, and
the one form a warning takes (`warn`). It imports nothing from zoo, so any layer may use it.

The Table: rich narrows a table that is wider than the terminal by shrinking its widest wrappable columns, whatever
their words: at 80 columns `zoo list` broke 'Normalization' into 'Normalizatio' / 'n', and the verdict table cut
'detectable' to 'dete…' and '100%' to '(100…'. This Table keeps rich's own layout where the table fits as it is.
Where it does not, each column gets at least its longest word (a no_wrap column: its longest cell), and the width
left over goes first to the columns that need least more to be whole. Where even that does not fit (many columns,
or long names, on a narrow terminal), it prints a block per row instead: the first cell on a line, then 'header:
value' for each other cell, wrapped at the terminal's width.
"""

from __future__ import annotations

import copy
import dataclasses

from rich import table as rich_table
from rich.console import Console, ConsoleOptions, RenderResult
from rich.markup import escape
from rich.measure import Measurement
from rich.padding import Padding
from rich.text import Text


class Table(rich_table.Table):
    """rich.table.Table that never splits a word (see the module docstring); built and filled the same way."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        ranges = [_content_widths(console, options, column) for column in self.columns]
        spare = options.max_width - self._extra_width - sum(self._get_padding_width(i) for i in
                                                             range(len(self.columns)))
        if sum(most for _, most in ranges) <= spare:
            yield from super().__rich_console__(console, options)
        elif sum(least for least, _ in ranges) <= spare:
            fitted = copy.copy(self)
            fitted.columns = [dataclasses.replace(column, width=width)
                              for column, width in zip(self.columns, _share(ranges, spare))]
            yield from super(Table, fitted).__rich_console__(console, options)
        else:
            yield from self._blocks(console)

    def _blocks(self, console: Console) -> RenderResult:
        """A block per row: its first cell, then an indented 'header: value' line for every other non-empty
        cell (the table's layout where no table fits)."""
        if self.title:
            yield _text(console, self.title, "table.title")
        (_, first), *others = [(_text(console, column.header), list(column.cells)) for column in self.columns]
        for row in range(self.row_count):
            yield _text(console, first[row], "bold")
            for header, cells in others:
                value = _text(console, cells[row])
                if value.plain.strip():
                    yield Padding(Text.assemble(header, ": ", value), (0, 0, 0, 2), expand=False)


def _text(console: Console, cell: str | Text, style: str = "") -> Text:
    """A cell (a markup string, or Text) as Text."""
    return console.render_str(cell, style=style) if isinstance(cell, str) else Text.assemble(cell, style=style)


def _content_widths(console: Console, options: ConsoleOptions, column: rich_table.Column) -> tuple[int, int]:
    """(least, most) width of a column's content, header included: its longest word (its longest cell where
    it does not wrap), and its longest cell."""
    sizes = [Measurement.get(console, options, cell) for cell in (column.header, *column.cells)]
    most = max(size.maximum for size in sizes)
    return (most if column.no_wrap else max(size.minimum for size in sizes)), most


def _share(ranges: list[tuple[int, int]], spare: int) -> list[int]:
    """Column widths within `spare`: each column's least, then the rest to the columns that need the least more
    to be whole first, in equal shares where it cannot make them all whole: short cells (numbers, options)
    stay on one line and the longest prose wraps."""
    widths = [least for least, _ in ranges]
    left = spare - sum(widths)
    order = sorted(range(len(ranges)), key=lambda i: ranges[i][1] - ranges[i][0])
    for done, i in enumerate(order):
        more = min(ranges[i][1] - widths[i], left // (len(order) - done))
        widths[i] += more
        left -= more
    return widths


def warn(errors: Console, line: str | None) -> None:
    """'zoo: warning: LINE' on the `errors` console (nothing for None), the line printed as written, not as markup."""
    if line:
        errors.print(f"[yellow]zoo: warning:[/] {escape(line)}", soft_wrap=True)
