"""`python -m zoo ...` is the `zoo` command."""

from zoo.cli import run

run()
