"""The `zoo` command at its edges: a place that cannot be written, an output that cannot take what is printed,
an empty selection, a stop by SIGTERM. Each is one line on stderr with the path or flag named, never a traceback."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from smoke_runs import ENV, TRAIN, experiment_file

import zoo.cli.listing
from zoo import rundir
from zoo.atomic import TEMP_SUFFIX
from zoo.cli import main
from zoo.cli.process import Output, OutputError, terminate
from zoo.experiment import floors, load_experiment
from zoo.experiment.grid import cells

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "experiments" / "quickstart.toml"


def one_line(capsys, *argv, progress: bool = False) -> tuple[int, str]:
    """(exit code, last line of stderr) of `zoo ARGV`, after checking that stderr is that line (or, with
    `progress`, what the command says as it starts, then that line) and no traceback."""
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert "Traceback" not in err and (progress or len(lines) == 1), err
    return code, lines[-1]


TRAIN_TWO_STEPS = [*TRAIN[3:], "--train", "steps=2"]


def store_flags(root: Path) -> list[str]:
    return ["--runs", root / "runs", "--out", root / "out", "--no-live"]


# -- places that cannot be written ------------------------------------------------------------------
@pytest.mark.parametrize("flag", ["--out", "--runs"])
@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]])
def test_a_folder_flag_given_a_file_is_one_line_before_anything_is_written(tmp_path, capsys, flag, dry_run):
    path = experiment_file(tmp_path)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    argv = {"--runs": tmp_path / "runs", "--out": tmp_path / "out", flag: blocker}
    code, err = one_line(capsys, "run", path, *[x for pair in argv.items() for x in pair], *dry_run)
    assert code == 2 and err == f"zoo: error: {flag} {blocker}: is a file, not a folder"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "smoke.toml"]


@pytest.mark.parametrize("command", ["report", "floors"])
def test_report_and_floors_say_their_out_is_a_file(tmp_path, capsys, command):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert one_line(capsys, command, experiment_file(tmp_path), "--out", blocker) == (
        2, f"zoo: error: --out {blocker}: is a file, not a folder")


def test_a_read_only_report_folder_names_the_folder_not_the_temporary_file(tmp_path, capsys, monkeypatch):
    """What a read-only file system does to the floors written first (root ignores permission bits, so the
    write is made to fail as the kernel would)."""
    def read_only(path, data):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path.parent / f".{path.name}.k2x9{TEMP_SUFFIX}"))

    monkeypatch.setattr(floors, "atomic_write", read_only)
    code, err = one_line(capsys, "run", experiment_file(tmp_path), *store_flags(tmp_path))
    assert code == 2
    assert err == f"zoo: error: cannot write {tmp_path / 'out' / 'records' / floors.FOLDER}: Read-only file system"


def test_a_file_above_the_out_folder_is_named(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code, err = one_line(capsys, "run", experiment_file(tmp_path), "--runs", tmp_path / "runs", "--out", blocker / "x")
    assert code == 2 and err.startswith(f"zoo: error: {blocker / 'x'}") and err.endswith(
        f": {blocker} is a file, not a folder")


def test_zoo_train_into_a_read_only_folder_or_under_a_file_is_one_line(tmp_path, capsys, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code, err = one_line(capsys, *TRAIN_TWO_STEPS, "--out", blocker / "run", progress=True)
    assert (code, err) == (2, f"zoo: error: {blocker / 'run'}: {blocker} is a file, not a folder")
    read_only, mkdir = tmp_path / "read-only", Path.mkdir

    def refuse(self, *args, **kwargs):
        if self.is_relative_to(read_only):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))
        return mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", refuse)
    code, err = one_line(capsys, *TRAIN_TWO_STEPS, "--out", read_only / "run", progress=True)
    assert (code, err) == (2, f"zoo: error: cannot write {read_only / 'run'}: Read-only file system")


def test_an_export_into_a_file_or_under_one_is_one_line(tmp_path, capsys):
    pytest.importorskip("tensorboard")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for tracker in ("tensorboard", "mlflow"):
        assert one_line(capsys, "export", QUICKSTART, "--to", tracker, blocker) == (
            2, f"zoo: error: --to {tracker} {blocker}: is a file, not a folder")
    code, err = one_line(capsys, "export", QUICKSTART, "--to", "tensorboard", blocker / "tb")
    assert code == 2 and err.startswith(f"zoo: error: {blocker / 'tb'}") and err.endswith(
        f": {blocker} is a file, not a folder")


@pytest.mark.parametrize("error, line", [
    (PermissionError(errno.EACCES, "Permission denied", "/srv/x"), "zoo: error: /srv/x: Permission denied"),
    (OSError(errno.ENOSPC, "No space left on device", "/srv/x"),
     "zoo: error: cannot write /srv/x: No space left on device"),
    (OSError(errno.ENOSPC, "No space left on device"), "zoo: error: No space left on device"),
    (OSError(errno.EXDEV, "Invalid cross-device link", "/a", None, "/b"),
     "zoo: error: /a -> /b: Invalid cross-device link"),
    (UnicodeEncodeError("ascii", "Δ", 0, 1, "ordinal not in range(128)"),
     "zoo: error: cannot encode 'Δ' in ascii; set PYTHONIOENCODING=utf-8"),
])
def test_an_os_error_that_ends_a_command_is_one_line(capsys, monkeypatch, error, line):
    def fail(args):
        raise error

    monkeypatch.setattr(zoo.cli.listing, "cmd_schema", fail)
    assert one_line(capsys, "schema") == (2, line)


def test_a_programming_error_is_not_swallowed(monkeypatch):
    def fail(args):
        raise RuntimeError("a bug")

    monkeypatch.setattr(zoo.cli.listing, "cmd_schema", fail)
    with pytest.raises(RuntimeError, match="a bug"):
        main(["schema"])


# -- an output that cannot be written ---------------------------------------------------------------
class Full:
    """A stream on a full disk."""

    encoding, errors = "utf-8", "strict"

    def write(self, text):
        raise OSError(errno.ENOSPC, "No space left on device")

    def flush(self):
        pass


def test_an_output_that_cannot_be_written_is_left_to_run_to_say(monkeypatch):
    """main() does not take a full standard output for a file zoo writes: run() says it, once."""
    monkeypatch.setattr(sys, "stdout", Output(Full()))
    with pytest.raises(OutputError):
        main(["schema"])


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_zoo_list_into_dev_full_is_one_line_and_exit_2():
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "zoo", "list"], stdout=full, stderr=subprocess.PIPE, text=True,
                              env=ENV, timeout=120)
    assert (done.returncode, done.stderr) == (2, "zoo: error: cannot write the output: No space left on device\n")


def test_an_output_that_cannot_encode_unicode_gets_question_marks_not_a_traceback():
    env = {**ENV, "PYTHONIOENCODING": "ascii", "LC_ALL": "C"}
    done = subprocess.run([sys.executable, "-m", "zoo", "run", str(QUICKSTART), "--dry-run"], capture_output=True,
                          env=env, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr.decode()
    assert b"nothing left to train" in done.stdout and b"Traceback" not in done.stderr
    done.stdout.decode("ascii")  # every character it could not encode is a '?'


# -- SIGTERM: the way Ctrl-C ends a command ---------------------------------------------------------
def wait_for_training(metrics: list[Path]) -> None:
    deadline = time.time() + 120
    while time.time() < deadline and not any(rundir.read_metrics(m) for m in metrics if m.exists()):
        time.sleep(0.2)


@pytest.mark.slow
def test_sigterm_leaves_no_traceback_from_a_worker_waiting_for_work(tmp_path):
    """Two workers, one short cell and one long: once the short one is recorded, its worker waits for work that
    will not come. A SIGTERM then ends the parent, and that worker found its pipe closed: it printed an EOFError
    traceback under the one line saying how to resume."""
    path = experiment_file(tmp_path, **{"seeds = [0, 1]": "seeds = [0]",
                                        'set = {"residual.kind" = "pre-norm"}':
                                        'set = {"residual.kind" = "pre-norm"}\ntrain = {steps = 4000}'})
    command = [sys.executable, "-m", "zoo", "run", str(path), *map(str, store_flags(tmp_path)), "--workers", "2"]
    process = subprocess.Popen(command, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    short = tmp_path / "out" / "records" / "post-norm" / "copy" / "seed-0.json"
    grid = cells(load_experiment(path), tmp_path / "runs", tmp_path / "out" / "records")
    deadline = time.time() + 120
    while time.time() < deadline and not short.exists():
        time.sleep(0.2)
    wait_for_training([cell.out / rundir.METRICS for cell in grid if cell.variant == "pre-norm"])
    time.sleep(1.0)  # the short cell's worker is back in its loop, waiting
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert short.exists() and process.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err and "EOFError" not in err, err


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["1", "2"])
def test_sigterm_stops_a_grid_with_the_line_that_says_how_to_resume(tmp_path, workers):
    path = experiment_file(tmp_path, **{"steps = 40": "steps = 4000"})
    command = [sys.executable, "-m", "zoo", "run", str(path), *map(str, store_flags(tmp_path)), "--workers", workers]
    process = subprocess.Popen(command, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    grid = cells(load_experiment(path), tmp_path / "runs", tmp_path / "out" / "records")
    wait_for_training([cell.out / rundir.METRICS for cell in grid])
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGTERM, err
    assert ("zoo: terminated (SIGTERM); checkpoints and finished results are kept: running the same command again "
            "resumes from the last checkpoint") in err, err
    assert "Traceback" not in err and "terminate called" not in err, err
    deadline = time.time() + 10  # workers see their parent gone within half a second
    while time.time() < deadline and any(cell.lock.holder() is not None for cell in grid):
        time.sleep(0.2)
    assert all(cell.lock.holder() is None for cell in grid)


@pytest.mark.slow
def test_sigterm_stops_zoo_train_with_the_line_that_says_resume(tmp_path):
    out = tmp_path / "run"
    process = subprocess.Popen([*TRAIN, "--out", str(out), "--train", "steps=100000"], env=ENV,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_for_training([out / rundir.METRICS])
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 143, err
    assert "zoo: terminated (SIGTERM)" in err and "running the same command again with --resume continues" in err
    assert "Traceback" not in err, err


def test_sigterm_and_sighup_handlers_are_restored_and_an_ignored_one_stays_ignored(monkeypatch):
    before = signal.getsignal(signal.SIGTERM)
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under `nohup`
    try:
        seen = {}

        def look(args):
            seen.update(term=signal.getsignal(signal.SIGTERM), hup=signal.getsignal(signal.SIGHUP))
            return 0

        monkeypatch.setattr(zoo.cli.listing, "cmd_schema", look)
        assert main(["schema"]) == 0
        assert seen == {"term": terminate, "hup": signal.SIG_IGN}
        assert signal.getsignal(signal.SIGTERM) is before
    finally:
        signal.signal(signal.SIGHUP, previous)


def test_a_sigterm_in_process_is_one_line_and_exit_143(capsys, monkeypatch):
    def terminated(args):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises before this ends
        return 0

    def unhandled(signum, frame):  # what the test suite does with a SIGTERM zoo leaves alone: not die
        raise AssertionError("zoo did not handle SIGTERM")

    monkeypatch.setattr(zoo.cli.listing, "cmd_schema", terminated)
    previous = signal.signal(signal.SIGTERM, unhandled)
    try:
        assert one_line(capsys, "schema") == (143, "zoo: terminated (SIGTERM)")
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_mistyped_experiment_name_gets_the_close_one(capsys, monkeypatch):
    """`zoo run quickstrt` said only 'cannot read the file'."""
    monkeypatch.chdir(Path(__file__).resolve().parent.parent)
    assert main(["run", "quickstrt", "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("nor experiments/quickstrt.toml; did you mean 'quickstart'?") and len(err.splitlines()) == 1


def test_evaluate_on_a_folder_that_is_not_there_says_so(tmp_path, capsys):
    """It said 'no spec.json; is this a run directory', of a folder that does not exist."""
    assert main(["evaluate", str(tmp_path / "nope")]) == 2
    assert f"{tmp_path / 'nope'}: no such folder" in capsys.readouterr().err


def test_report_from_another_folder_finds_the_records_run_wrote(tmp_path, monkeypatch, capsys):
    """The default report folder is reports/<name> in the repository holding the experiment file (its nearest
    folder above with a pyproject.toml or .git), not in the working folder: `zoo report` run from elsewhere finds
    what `zoo run` wrote, and writes the report beside those records."""
    import shutil

    from fake_study import write_study

    from zoo.cli import main

    project = tmp_path / "project"
    (project / "experiments").mkdir(parents=True)
    (project / "pyproject.toml").write_text("")
    experiment, root = write_study(project / "experiments")
    shutil.move(root, project / "reports" / experiment.name / "records")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["report", str(project / "experiments" / "fake.toml")]) == 0
    report = project / "reports" / experiment.name / "report.md"
    assert report.is_file() and not (elsewhere / "reports").exists()
    assert "zoo report experiments/fake.toml" in report.read_text()  # the command as typed at the project's root
    capsys.readouterr()
