"""The Python API from a script, as docs/python.md shows it: under the spawn start method each worker process
imports the script it was started from, so a script without an `if __name__ == "__main__":` guard starts the grid
again in every worker. zoo starts no worker where nothing is to train, and where workers are needed says why in
one error instead of a flood of multiprocessing tracebacks."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _script(tmp_path: Path, experiment: str, guarded: bool) -> subprocess.CompletedProcess:
    calls = (f"study = zoo.study({str(ROOT / 'experiments' / experiment)!r}, out='out', runs='runs')\n"
             "study.run(workers=2)\nprint('done')\n")
    body = "import zoo\n" + ("if __name__ == '__main__':\n" + "".join(f"    {line}\n" for line in calls.splitlines())
                             if guarded else calls)
    (tmp_path / "script.py").write_text(body)
    return subprocess.run([sys.executable, "script.py"], cwd=tmp_path, capture_output=True, text=True, timeout=600)


def test_an_unguarded_script_with_nothing_to_train_starts_no_worker(tmp_path):
    shutil.copytree(ROOT / "reports" / "quickstart" / "records", tmp_path / "out" / "records")
    done = _script(tmp_path, "quickstart.toml", guarded=False)
    assert done.returncode == 0 and done.stdout.strip() == "done", done.stderr
    assert "Traceback" not in done.stderr and "complete: 10  stalled: 5" in done.stderr


def test_an_unguarded_script_that_needs_workers_is_one_error_and_records_nothing(tmp_path):
    done = _script(tmp_path, "smoke.toml", guarded=False)
    assert done.returncode == 1 and "done" not in done.stdout
    assert done.stderr.count("Traceback") == 1  # the script's own exception, not one per worker
    assert "put the script's calls under `if __name__ == \"__main__\":`, or run with workers=1" in done.stderr
    assert not list((tmp_path / "out").rglob("seed-*.json"))  # no cell was recorded as failed


def test_a_guarded_script_trains_with_workers(tmp_path):
    done = _script(tmp_path, "smoke.toml", guarded=True)
    assert done.returncode == 0 and done.stdout.strip() == "done", done.stderr
    assert len(list((tmp_path / "out" / "records").rglob("seed-*.json"))) == 4
