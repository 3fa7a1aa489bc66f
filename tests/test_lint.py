"""The repository stays `ruff check` clean (rules and exclusions in pyproject.toml's [tool.ruff])."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_check_is_clean():
    pytest.importorskip("ruff", reason="ruff is not installed (it comes with the dev extra)")
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"ruff check found problems:\n{result.stdout}{result.stderr}"
