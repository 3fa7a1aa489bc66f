"""Every table zoo prints stays readable at 80 columns: no word of a cell or header is split across lines.

rich narrows a table wider than the terminal by shrinking columns whatever their words ('Normalizatio' / 'n',
'dete…'); zoo.terminal.Table gives each column at least its longest word, or prints a block per row. The
commands' tests record every cell and header their tables get (add_row, add_column) and look for each word,
whole, on one line of what was printed at 80 columns.
"""

from __future__ import annotations

import io
import shutil
from argparse import Namespace
from pathlib import Path

import pytest
from rich import table as rich_table
from rich.console import Console
from rich.text import Text

from zoo import terminal
from zoo.cli import main

ROOT = Path(__file__).resolve().parent.parent
WIDTH = 80


def words(cell: str | Text) -> list[str]:
    return (cell if isinstance(cell, Text) else Text.from_markup(cell)).plain.split()


def assert_readable(cells: list, printed: str) -> None:
    """Every word of `cells` is whole on one printed line (rich crops what is wider than the console, so a
    word cut at its edge is missing too)."""
    lines = printed.splitlines()
    assert cells, "no table was printed"
    split = sorted({word for cell in cells for word in words(cell) if not any(word in line for line in lines)})
    assert not split, f"split across lines or cut: {split}"


@pytest.fixture
def recorded(monkeypatch):
    """The cells and headers of every zoo.terminal.Table filled while the test runs, printed at 80 columns (not
    the first column's header, which a block per row leaves out: each block opens with that column's cell)."""
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    cells = []
    add_row, add_column = terminal.Table.add_row, terminal.Table.add_column

    def row(self, *renderables, **options):
        cells.extend(renderables)
        return add_row(self, *renderables, **options)

    def column(self, header="", *args, **options):
        cells.extend([header] if self.columns else [])
        return add_column(self, header, *args, **options)

    monkeypatch.setattr(terminal.Table, "add_row", row)
    monkeypatch.setattr(terminal.Table, "add_column", column)
    return cells


def render(renderable, width: int) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def filled(cls: type, rows: list[list[str]], no_wrap_first: bool = True) -> rich_table.Table:
    table = cls(title="a title", title_justify="left")
    for i, header in enumerate(["name", "description", "options", "count"]):
        table.add_column(header, no_wrap=no_wrap_first and i == 0, justify="right" if i == 3 else "left")
    for row in rows:
        table.add_row(*row)
    return table


PROSE = "Query-Key Normalization for Transformers: queries and keys L2-normalised per head"
ROWS = [["attention.qk-norm", PROSE, "dropout=None, share_self_cross=False, dropout_in_eval=False", "1,234,567"],
        ["positional.sinusoidal-pad-aware", "001's table with an all-zero row for PAD", "dropout=None", "12"]]


def test_a_table_that_fits_is_laid_out_exactly_as_rich_lays_it_out():
    short = [["a", "b c", "d", "1"]]
    assert render(filled(terminal.Table, short), WIDTH) == render(filled(rich_table.Table, short), WIDTH)


@pytest.mark.parametrize("width", [60, 80, 100, 140])
def test_no_word_is_split_at_any_width(width):
    printed = render(filled(terminal.Table, ROWS), width)
    assert_readable([cell for row in ROWS for cell in row], printed)


def test_rich_alone_splits_these_words_at_80_columns():
    """The check above can fail: rich's own layout of the same table breaks words at 80 columns."""
    with pytest.raises(AssertionError, match="split across lines"):
        assert_readable([cell for row in ROWS for cell in row], render(filled(rich_table.Table, ROWS), WIDTH))


def test_a_table_whose_words_do_not_fit_becomes_a_block_per_row():
    printed = render(filled(terminal.Table, ROWS), 60)
    assert "┃" not in printed and "│" not in printed  # no table: its longest words need more than 60 columns
    lines = printed.splitlines()
    assert lines[0].strip() == "a title" and lines[1].strip() == "attention.qk-norm"
    assert lines[2].startswith("  description: Query-Key")
    assert "  count: 1,234,567" in lines


def test_where_the_words_fit_it_stays_a_table_with_each_column_at_least_its_longest_word():
    printed = render(filled(terminal.Table, ROWS), 100)
    assert "┃ name" in printed and "positional.sinusoidal-pad-aware" in printed  # a table, the no_wrap name whole


def test_every_table_zoo_prints_is_a_zoo_terminal_table():
    """A table built from rich's own Table would break words again at 80 columns."""
    users = [path.relative_to(ROOT).as_posix() for path in sorted((ROOT / "zoo").rglob("*.py"))
             if "rich.table" in path.read_text() and path.name != "terminal.py"]
    assert not users, f"use zoo.terminal.Table in {users}"


# -- the commands' tables at 80 columns ---------------------------------------------------------------
@pytest.mark.parametrize("argv", [["list"], ["list", "attention.torch-mha"], ["show", "writeup-003"],
                                  ["show", "paper-base", "--diff", "writeup-001"]])
def test_zoo_list_and_show_are_readable_at_80_columns(recorded, capsys, argv):
    assert main(argv) == 0
    assert_readable(recorded, capsys.readouterr().out)


@pytest.fixture(scope="module")
def quickstart_out(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("quickstart")
    shutil.copytree(ROOT / "reports" / "quickstart" / "records", out / "records")
    return out


@pytest.mark.parametrize("command", [["report"], ["plan"], ["run", "--dry-run"], ["floors"]])
def test_the_experiment_commands_tables_are_readable_at_80_columns(recorded, capsys, quickstart_out, tmp_path,
                                                                   command):
    argv = [command[0], str(ROOT / "experiments" / "quickstart.toml"), "--out", str(quickstart_out), *command[1:]]
    if command[0] == "run":
        argv += ["--runs", str(tmp_path / "runs")]
    assert main(argv) == 0
    assert_readable(recorded, capsys.readouterr().out)


def test_the_benchmark_and_training_tables_are_readable_at_80_columns(recorded, capsys):
    from zoo.cli import train as cli_train

    results = {"device": "cpu", "threads": 16, "batch_target_tokens": 24881.8,
               "decode_cached_tok_s": 12345.6, "decode_uncached_tok_s": 2345.6,
               "decode_cache_ratio": 5.26, "processes": [{"processes": 4, "aggregate_tok_s": 123456.0,
                                                          "per_process_median_tok_s": 30864.0, "scaling": 3.91}]}
    for precision in ("fp32", "bf16"):
        results |= {f"train_{precision}_{key}": value for key, value in (
            ("zoo_tok_s", 123456.7), ("fast_tok_s", 234567.8), ("torch_tok_s", 111111.1), ("ratio", 1.11),
            ("fast_ratio", 1.9), ("fast_torch_ratio", 2.11), ("achieved_flop_s", 1.23e12), ("peak_fraction", 0.42),
            ("fast_achieved_flop_s", 2.34e12), ("fast_peak_fraction", 0.81))}
        results[f"matmul_{precision}_peak_flop_s"] = 2.9e12
    args = Namespace(spec="paper-base", d_model=512, layers=6, vocab=32000, batch=1000, process_steps=20,
                     process_path="fast")
    for table in (cli_train._bench_table(args, results), cli_train._processes_table(args, results)):
        cli_train.console.print(table)
    cli_train._print_metrics("runs/x: complete after 4,000 steps", {"test_exact_match": 99.5})
    assert_readable(recorded, capsys.readouterr().out)


def test_the_live_grid_of_zoo_run_is_readable_at_80_columns(recorded, tmp_path, monkeypatch):
    from zoo.experiment import load_experiment, view
    from zoo.experiment.grid import cells

    experiment = load_experiment(ROOT / "experiments" / "quickstart.toml")
    grid = cells(experiment, tmp_path / "runs", tmp_path / "records")
    tasks = {task.key: task for task in experiment.config.tasks}
    monkeypatch.setattr(view, "view_state", lambda cell, task, stale=None: "failed")
    monkeypatch.setattr(view, "read_record", lambda path: None)
    reason = "cannot write /work/main/runs/quickstart/pre-norm-conv1d/copy/seed-0/checkpoint.pt.tmp: disk full"
    assert_readable(recorded, render(view.GridView("quickstart", grid, tasks, {c.name: reason for c in grid}), WIDTH))
