"""Presets must load after a plain (non-editable) `pip install .`: they ship as package data."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import zoo
from zoo.errors import DISTRIBUTION

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_wheel_ships_every_preset(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path), str(ROOT)], check=True)
    wheel = next(tmp_path.glob("transformer_zoo-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    presets = sorted(p.name for p in (ROOT / "registry").glob("*.toml"))
    assert presets and all(f"zoo/_registry/{name}" in names for name in presets)
    modules = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "zoo").rglob("*.py"))
    missing = [m for m in modules if m not in names]
    assert not missing, f"not in the wheel (add the package to pyproject.toml): {missing}"


@pytest.mark.slow
def test_presets_load_from_an_installed_copy(tmp_path):
    """Install into a separate target folder and load presets from there, away from the source tree."""
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-q",
                    "--target", str(target), str(ROOT)], check=True)
    code = ("import zoo, sys; from zoo.experiment.provenance import zoo_commit; "
            "assert zoo.__file__.startswith(sys.argv[1]), zoo.__file__; "
            "print(len(zoo.preset_names()), zoo.load_spec('writeup-001').name, zoo_commit())")
    result = subprocess.run([sys.executable, "-c", code, str(target)], capture_output=True, text=True,
                            cwd=tmp_path, env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    count, name, commit = result.stdout.split()
    assert [count, name] == [str(len(zoo.preset_names())), "writeup-001"]  # every preset ships
    # no checkout around the installed copy: the commit is the clone's it was installed from, never 'unknown'
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert commit.startswith(head) and commit.endswith("+installed"), commit


def test_the_distribution_has_a_name_of_its_own():
    """`zoo` on PyPI is an unrelated RPC framework: an install hint naming it installs the wrong thing. The
    distribution is `transformer-zoo`, and every hint zoo prints or documents names it (or a clone's `.`)."""
    import importlib.metadata
    import tomllib

    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"] == DISTRIBUTION != "zoo"
    assert importlib.metadata.distribution(DISTRIBUTION).entry_points.select(name="zoo")  # the command stays
    files = [*(ROOT / "zoo").rglob("*.py"), ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    wrong = [str(f.relative_to(ROOT)) for f in files if "zoo[" in f.read_text().replace(f"{DISTRIBUTION}[", "")]
    assert not wrong, f"install hints naming PyPI's unrelated `zoo`: {wrong}"


@pytest.mark.parametrize("in_venv", [False, True])
def test_setup_sh_warns_outside_a_virtual_environment(tmp_path, in_venv):
    """setup.sh installs into whatever Python it runs; outside a venv it says so (and how to make one), inside one
    it is quiet. A stand-in `python3` answers setup.sh's questions and records the pip commands it was given."""
    fake = tmp_path / "python3"
    log = tmp_path / "pip.log"
    fake.write_text(f"""#!/usr/bin/env bash
case "$*" in
  *base_prefix*) exit {0 if in_venv else 1} ;;  # the venv check: exit 0 inside one
  *"print(sys.prefix)"*) echo /usr ;;
  *"-m pip"*) echo "$*" >> {log} ;;
esac
exit 0
""")
    fake.chmod(0o755)
    result = subprocess.run(["bash", str(ROOT / "setup.sh")], capture_output=True, text=True,
                            env={"PYTHON": str(fake), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    warned = "no virtual environment is active" in result.stderr
    assert warned != in_venv
    if warned:
        assert "python3 -m venv .venv && . .venv/bin/activate" in result.stderr and "/usr" in result.stderr
    assert "install" in log.read_text()  # it installed all the same


def test_the_version_names_torchs_build(capsys):
    import torch

    from zoo.cli import main

    with pytest.raises(SystemExit):
        main(["--version"])
    out = capsys.readouterr().out
    build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU"
    assert out.startswith(f"zoo {zoo.__version__}") and f"torch {torch.__version__} ({build} build)" in out
