"""Every cheap command the README and docs/ show in a console block runs as shown: the exit code its
comment or output implies, and the output lines the block prints (up to any '...')."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pandas as pd
import pytest

from zoo.cli import main, parser

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "reports" / "README.md"]
CHEAP = {"show", "list", "equiv", "schema", "check"}  # seconds each; training commands are tested elsewhere


def console_commands() -> list[tuple[str, str, list[str]]]:
    """(page, command line, the output lines the block shows after it), for every `$ zoo ...` line."""
    found = []
    for page in PAGES:
        for block in re.findall(r"```console\n(.*?)```", page.read_text(), flags=re.S):
            lines = block.splitlines()
            for i, line in enumerate(lines):
                if line.startswith("$ zoo "):
                    shown = []
                    for after in lines[i + 1:]:
                        if after.startswith("$ "):
                            break
                        shown.append(after)
                    found.append((page.relative_to(ROOT).as_posix(), line[2:], shown))
    return found


CASES = [case for case in console_commands() if shlex.split(case[1], comments=True)[1] in CHEAP]


def test_the_pages_show_cheap_commands():
    assert len(CASES) >= 6 and {c[0] for c in CASES} >= {"README.md", "docs/writeups.md"}


@pytest.mark.parametrize("page, line, shown", CASES, ids=[f"{c[0]}: {c[1][:50]}" for c in CASES])
def test_a_documented_command_runs_as_shown(page, line, shown, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    words = shlex.split(line, comments=True)
    if ">" in words:  # `zoo schema > file`: the output is what matters here
        words = words[:words.index(">")]
    code = main(words[1:])
    out = capsys.readouterr()
    printed = out.out + out.err
    expected = 2 if any(s.startswith("zoo: error") for s in shown) else 1 if "NOT EQUIVALENT" in line else 0
    assert code == expected, printed
    for text in shown:
        text = text.split("...")[0].strip()
        assert " ".join(text.split()) in " ".join(printed.split()), text


def test_every_documented_command_is_one_the_cli_accepts():
    """The commands too slow to run here (training, benchmarks, reports) are at least spelled as zoo's parser
    takes them: an option renamed in the code and not on the page fails here."""
    refused = []
    for page, line, shown in console_commands():
        words = shlex.split(line, comments=True)
        if ">" in words:
            words = words[:words.index(">")]
        if any(s.startswith("zoo: error") for s in shown) or re.search(r"\[--|\w / \w", line):
            continue  # a page showing a refusal on purpose, or a synopsis ([--option], one / other)
        try:
            parser().parse_args(words[1:])
        except SystemExit:
            refused.append(f"{page}: {line}")
    assert not refused, refused


@pytest.mark.parametrize("page", PAGES + sorted((ROOT / "docs").glob("*/*/README.md"))
                         + sorted(ROOT.glob("reports/*/report.md")), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_table_row_has_as_many_cells_as_its_header(page):
    """A row with a stray cell renders as a broken table on GitHub and says nothing in the column it spills to."""
    wrong, header = [], None
    for number, line in enumerate(page.read_text().splitlines(), 1):
        if not line.startswith("|"):
            header = None
            continue
        cells = len(re.findall(r"(?<!\\)\|", _outside_code(line))) - 1
        if header is None:
            header = cells
        elif cells != header:
            wrong.append(f"line {number}: {cells} cells, the header has {header}")
    assert not wrong, f"{page.relative_to(ROOT)}: " + "; ".join(wrong)


def _outside_code(line: str) -> str:
    """The line without its `code spans`, whose | are not cell borders."""
    return re.sub(r"`[^`]*`", "", line)


def test_the_python_page_runs_as_written(tmp_path, monkeypatch):
    """docs/python.md's example, verbatim, in a folder holding the quickstart experiment and a copy of its
    committed records: `run` finds every cell recorded (so it trains nothing), and the frames and the report are
    those of the committed quickstart."""
    import contextlib
    import io
    import shutil

    block = re.search(r"```python\n(.*?)```", (ROOT / "docs" / "python.md").read_text(), flags=re.S).group(1)
    (tmp_path / "experiments").mkdir()
    shutil.copy(ROOT / "experiments" / "quickstart.toml", tmp_path / "experiments")
    shutil.copytree(ROOT / "reports" / "quickstart" / "records", tmp_path / "my-quickstart" / "records")
    from zoo import plugins

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(plugins, "_loaded", {})  # a new session's process: no plugin another test loaded
    printed, names = io.StringIO(), {"__name__": "__main__"}  # run as a script runs it: the guard holds
    with contextlib.redirect_stdout(printed):
        exec(compile(block, "docs/python.md", "exec"), names)
    frame, verdicts = names["frame"], names["verdicts"]
    committed = pd.read_csv(ROOT / "reports" / "quickstart" / "results.csv")
    assert len(frame) == len(committed) == 15 and not list(tmp_path.rglob("metrics.jsonl"))  # nothing trained
    assert list(frame["exact_match"].fillna(-1)) == list(committed["exact_match"].fillna(-1))
    placebo = verdicts.set_index("variant").loc["pre-norm-conv1d"]
    assert placebo["verdict"] == "equivalent"  # as reports/quickstart/report.md says
    assert printed.getvalue().strip().endswith("my-quickstart/report.md")
    assert (tmp_path / "my-quickstart" / "results.csv").read_text() == \
        (ROOT / "reports" / "quickstart" / "results.csv").read_text()


def test_the_readme_is_a_tool_readme_a_newcomer_reads_in_minutes():
    """At most 200 lines: what zoo is, the two commands, what you can do, plugins, trackers, data, and a pointer
    to the studies, whose results live in reports/README.md."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    for heading in ("## Two commands", "## What you can do", "## Plugins", "## Trackers", "## Data", "## The studies"):
        assert heading in text, heading


def test_what_the_readme_and_layout_say_of_the_suites_processes_is_pyprojects_config():
    """README and docs/layout.md say how `python3 -m pytest` spreads the tests; pyproject's addopts decide it."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    options = project["tool"]["pytest"]["ini_options"]["addopts"].split()
    assert (options[options.index("-n") + 1], options[options.index("--maxprocesses") + 1]) == ("logical", "4")
    assert any(need.startswith("pytest-xdist") for need in project["project"]["optional-dependencies"]["dev"])
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "runs the whole suite (ruff included), as CI does, a process per CPU." in readme
    layout = " ".join((ROOT / "docs" / "layout.md").read_text().split())
    assert ("`python3 -m pytest` runs a test process per logical CPU (pytest-xdist, at most 4; `--pdb` turns that "
            "off); `python3 -m pytest -n 0` runs every test in one process.") in layout


def test_the_presets_table_gives_each_presets_parameters_and_digest():
    """docs/writeups.md's table of presets: the count and digest `zoo show NAME` prints for each."""
    import zoo

    rows = re.findall(r"^\| `([\w-]+)` \| .* \| ([\d,]+) \| `([0-9a-f]{12})` \|$",
                      (ROOT / "docs/writeups.md").read_text(), flags=re.M)
    assert {name for name, _, _ in rows} >= {"paper-base", *(f"writeup-00{i}" for i in range(5))}
    for name, count, digest in rows:
        spec = zoo.load_spec(name)
        assert (f"{zoo.build(spec, device='meta').num_parameters():,}", spec.digest()) == (count, digest), name


def test_the_readmes_python_equivalence_line_says_what_its_comment_says():
    """It compared paper-base at d_model 512 with a spec at 128: not transplantable, so never equivalent."""
    import zoo

    text = (ROOT / "README.md").read_text()
    spec_line = next(line for line in text.splitlines() if line.startswith("spec = zoo.load_spec("))
    verdict_line = next(line for line in text.splitlines() if line.startswith("verdict = zoo.equivalence("))
    scope: dict = {"zoo": zoo}
    exec(spec_line + "\n" + verdict_line, scope)
    assert verdict_line.endswith("# equivalent: True") and scope["verdict"].equivalent, scope["verdict"]
