"""A run's output folder (`--out`): it describes itself, is never mixed with another run's or a
sweep's, and a run that fails or is stopped leaves the earlier run in it whole."""

import contextlib
import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from test_cli_output import ENV, ROOT, TINY, one_line_error, quanta

def test_a_runs_files_and_a_sweeps_never_share_a_folder(tmp_path):
    """`simulate --out` a sweep's folder wrote beside its tables (and --force then called them
    files Quanta did not write); `sweep --out` a run's folder the same: refused either way,
    one line, nothing written; a sweep still resumes in its own."""
    sweep = ["sweep", "--rate", "3", "--jobs", "10", "--cluster", "v100:1x8", "-p", "fifo",
             "--seeds", "0", "-j", "1", "-q", "--out"]
    run = ["simulate", *TINY, "--no-plots", "--out"]
    assert quanta(*sweep, str(tmp_path / "s")).returncode == 0
    before = sorted(p.name for p in (tmp_path / "s").rglob("*"))
    for force in ([], ["--force"]):
        line = one_line_error(quanta(*run, str(tmp_path / "s"), *force))
        assert "holds a sweep's results (sweep.json, cells)" in line
    assert sorted(p.name for p in (tmp_path / "s").rglob("*")) == before
    assert quanta(*sweep, str(tmp_path / "s")).returncode == 0         # resumed in its own
    assert quanta(*run, str(tmp_path / "r")).returncode == 0
    line = one_line_error(quanta(*sweep, str(tmp_path / "r")))
    assert "holds a `quanta simulate` run's files (its config.yaml lists them)" in line
    assert not (tmp_path / "r" / "cells").exists() and not (tmp_path / "r" / "sweep.json").exists()
    (tmp_path / "mine").mkdir()                # a user's own config.yaml: no run's (it lists none)
    (tmp_path / "mine" / "config.yaml").write_text("lr: 0.1\n")
    assert quanta(*sweep, str(tmp_path / "mine")).returncode == 0


def test_output_folder_describes_itself_and_is_never_mixed(tmp_path):
    out = tmp_path / "o"
    args = ["simulate", *TINY, "--policy", "las:backfill=false", "--policy", "fifo", "--seed", "3",
            "--until-h", "500", "--window", "2:18", "--no-plots", "--out", str(out)]
    r = quanta(*args)
    assert r.returncode == 0, r.stderr
    cfg = yaml.safe_load((out / "config.yaml").read_text())
    assert "--policy las:backfill=false" in cfg["command"] and cfg["command"].startswith("quanta ")
    assert cfg["trace"]["spec"] == "synthetic:3:20" and cfg["trace"]["jobs"] == 20
    assert cfg["cluster"]["spec"] == "v100:1x8" and cfg["cluster"]["gpus"] == 8
    assert [p["policy"] for p in cfg["policies"]] == ["las:backfill=false", "fifo"]
    assert cfg["policies"][0]["parameters"]["backfill"] is False
    assert cfg["policies"][1]["parameters"]["backfill"] is True
    assert (cfg["seed"], cfg["world"], cfg["window"], cfg["until_h"]) == (3, "quanta", "2:18", 500)
    assert cfg["quanta_version"] and cfg["code_version"].startswith(cfg["quanta_version"])
    from quanta.cellstore import code_version
    assert cfg["code_version"] == code_version.__wrapped__()
    if (ROOT / ".git").exists():                    # run from a checkout: its git describe
        described = subprocess.run(["git", "describe", "--always", "--dirty", "--tags"],
                                   cwd=ROOT, capture_output=True, text=True).stdout.strip()
        assert cfg["git"] == described and described
    assert {"summary.csv", "report.md", "config.yaml", "fifo/jobs.csv",
            "las_backfill=false/timeline.csv"} <= set(cfg["files"])
    assert all((out / f).is_file() for f in cfg["files"])
    before = (out / "summary.csv").read_bytes()

    # the same folder again: refused, one line naming the folder and --force; nothing touched
    line = one_line_error(quanta(*args))
    assert str(out) in line and "--force" in line
    assert (out / "summary.csv").read_bytes() == before

    # --force with other policies: the earlier run's files go, other output folders stay
    nested = out / "nested"
    nested.mkdir()
    (nested / "config.yaml").write_text("files: []\n")
    (nested / "summary.csv").write_text("kept\n")
    r = quanta("simulate", *TINY, "--policy", "srtf", "--no-plots", "--out", str(out), "--force")
    assert r.returncode == 0, r.stderr
    assert not (out / "las_backfill=false").exists() and not (out / "fifo").exists()
    assert [row["policy"] for row in csv.DictReader(open(out / "summary.csv"))] == ["srtf"]
    assert (nested / "summary.csv").read_text() == "kept\n"
    assert yaml.safe_load((out / "config.yaml").read_text())["policies"][0]["policy"] == "srtf"

    # a file Quanta did not write: --force refuses and deletes nothing
    (out / "srtf" / "my-notes.txt").write_text("mine")
    line = one_line_error(quanta("simulate", *TINY, "--policy", "fifo", "--no-plots", "--out",
                                 str(out), "--force"))
    assert "my-notes.txt" in line
    assert (out / "srtf" / "my-notes.txt").read_text() == "mine"
    assert (out / "srtf" / "jobs.csv").exists() and (out / "summary.csv").exists()

    # ... beside the run, the user's files stay, and --force replaces the run (a run written
    # into a folder that held some could never be replaced)
    ud = out.parent / "ud"
    ud.mkdir()
    (ud / "notes.txt").write_text("mine")
    for force in ((), ("--force",)):
        r = quanta("simulate", *TINY, "--policy", "fifo", "--no-plots", "--out", str(ud), *force)
        assert r.returncode == 0, r.stderr
    assert (ud / "notes.txt").read_text() == "mine" and (ud / "fifo" / "jobs.csv").exists()


def _tree(folder: Path) -> dict[str, bytes]:
    return {f.relative_to(folder).as_posix(): f.read_bytes()
            for f in sorted(folder.rglob("*")) if f.is_file()}


@contextlib.contextmanager
def _long_run(out: Path):
    """A `quanta simulate` of 20,000 jobs (minutes) into `out`, --force; killed on leaving,
    whatever happened (no run left behind by a failure)."""
    # (the run starts with Ctrl-C at its default, as from a terminal: a process started while
    # SIGINT is ignored in its parent inherits that, and Python then never raises
    # KeyboardInterrupt; twice in this session's whole-suite runs a press went unanswered)
    proc = subprocess.Popen([sys.executable, "-m", "quanta.cli", "simulate", "--trace",
                             "synthetic:30:20000", "--policy", "las", "--no-plots", "-q", "--out",
                             str(out), "--force"], cwd=ROOT, env=ENV,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _staged_by(proc: subprocess.Popen, out: Path, within: float = 120.0) -> None:
    """Wait until the run has made its hidden folder in `out` (its simulation comes next)."""
    deadline = time.monotonic() + within
    while not (out.is_dir() and any(p.name.startswith(".quanta-run-") for p in out.iterdir())):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)


def _interrupted(proc: subprocess.Popen, within: float = 60.0) -> int:
    """Ctrl-C, pressed again every 10 s as a user would, until the process ends: its exit code.
    (Once, in a suite run on a loaded machine, one press went unanswered for 60 s; it was not
    seen again in some 70 trials since, loaded or not.)"""
    deadline = time.monotonic() + within
    while True:
        proc.send_signal(signal.SIGINT)
        try:
            return proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            assert time.monotonic() < deadline, \
                f"Ctrl-C went unanswered (SIGINT here: {signal.getsignal(signal.SIGINT)})"


def test_a_failed_or_stopped_run_leaves_the_earlier_run_whole(tmp_path):
    out = tmp_path / "o"
    r = quanta("simulate", *TINY, "--policy", "las", "--policy", "fifo", "--no-plots", "--out",
               str(out))
    assert r.returncode == 0, r.stderr
    before = _tree(out)
    # --force, then an error found only once the simulation starts (a job that never fits):
    # one line, and the earlier run is as it was (it used to be deleted first)
    bad = tmp_path / "nofit.csv"
    bad.write_text("job_id,submit_time_s,num_gpus,duration_s\nj1,0,1,100\nj2,10,99,100\n")
    line = one_line_error(quanta("simulate", "--trace", str(bad), "--cluster", "v100:1x8",
                                 "--policy", "srtf", "--no-plots", "-q", "--out", str(out),
                                 "--force"))
    assert "nofit.csv:3" in line and "num_gpus" in line
    assert _tree(out) == before and sorted(p.name for p in out.iterdir()) == \
        ["config.yaml", "fifo", "las", "report.md", "summary.csv"]
    # interrupted (Ctrl-C) in the middle of the simulation: the same
    with _long_run(out) as proc:
        _staged_by(proc, out)
        time.sleep(0.5)
        assert _interrupted(proc) != 0
    assert _tree(out) == before and not any(p.name.startswith(".") for p in out.iterdir())
    # killed outright: its hidden folder is left, and the next run clears it
    with _long_run(out) as proc:            # (SIGKILL as it leaves: no cleanup runs)
        _staged_by(proc, out)
    assert proc.returncode == -signal.SIGKILL and _tree(out) == before
    r = quanta("simulate", *TINY, "--policy", "srtf", "--no-plots", "--out", str(out), "--force")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["config.yaml", "report.md", "srtf",
                                                     "summary.csv"]


def _earlier_run(out: Path) -> None:
    """An earlier run's files in `out`, with the config.yaml that lists them."""
    (out / "las").mkdir(parents=True)
    for f in ("summary.csv", "report.md", "las/jobs.csv", "las/timeline.csv"):
        (out / f).write_text(f"old {f}\n")
    (out / "config.yaml").write_text("files: [config.yaml, report.md, summary.csv, las/jobs.csv, "
                                     "las/timeline.csv]\n")


def _staged(out: Path, force: bool = True):
    from quanta.report.outdir import Staging
    stage = Staging(out, force, ["fifo"])
    (stage.dir / "fifo").mkdir()
    for f in ("summary.csv", "report.md", "config.yaml", "fifo/jobs.csv"):
        (stage.dir / f).write_text(f"new {f}\n")
    return stage


def test_staging_puts_everything_back_when_stopped_among_its_moves(tmp_path, monkeypatch):
    import quanta.report.outdir as outdir
    out = tmp_path / "o"
    _earlier_run(out)
    before = _tree(out)
    for stop_at in range(1, 9):            # Ctrl-C at each move in turn: the folder as it was
        stage = _staged(out)
        calls = []
        real = os.replace

        def replace(a, b):
            calls.append(a)
            if len(calls) == stop_at:
                raise KeyboardInterrupt
            real(a, b)
        monkeypatch.setattr(outdir.os, "replace", replace)
        with pytest.raises(KeyboardInterrupt):
            stage.commit()
        monkeypatch.setattr(outdir.os, "replace", real)
        stage.abort()
        assert _tree(out) == before, stop_at
        assert not [p.name for p in out.iterdir() if p.name.startswith(".")], stop_at
    stage = _staged(out)
    stage.commit()
    assert _tree(out) == {"config.yaml": b"new config.yaml\n", "report.md": b"new report.md\n",
                          "summary.csv": b"new summary.csv\n", "fifo/jobs.csv": b"new fifo/jobs.csv\n"}


def test_a_folder_changed_by_another_run_meanwhile_is_not_mixed(tmp_path):
    from quanta.errors import QuantaError
    out = tmp_path / "o"
    stage = _staged(out, force=False)       # an empty folder when the run started ...
    _earlier_run(out)                       # ... written by another run meanwhile
    before = {k: v for k, v in _tree(out).items() if not k.startswith(".")}
    with pytest.raises(QuantaError, match="changed while this run ran .*nothing of this run"):
        stage.commit()
    stage.abort()
    assert _tree(out) == before
    stage = _staged(out)                    # --force: it replaces them ...
    (out / "las" / "jobs.csv").unlink()     # ... but another run took one away meanwhile
    with pytest.raises(QuantaError, match="changed while this run ran"):
        stage.commit()


def test_folders_a_run_would_write_into_are_checked_before_it(tmp_path):
    c = tmp_path / "c"
    r = quanta("simulate", *TINY, "--policy", "las", "--no-plots", "--out", str(c / "fifo"))
    assert r.returncode == 0, r.stderr
    line = one_line_error(quanta("simulate", *TINY, "--policy", "fifo", "--out", str(c)))
    assert "holds another run in fifo/" in line
    # the other way round: into an earlier run's policy folder (its files mixed with this run's)
    d = tmp_path / "d"
    assert quanta("simulate", *TINY, "--policy", "fifo", "--no-plots", "--out",
                  str(d)).returncode == 0
    for force in ([], ["--force"]):
        line = one_line_error(quanta("simulate", *TINY, "--policy", "sjf", "--out", str(d / "fifo"),
                                     *force))
        assert "is policy folder fifo/ of an earlier run" in line
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "fifo").write_text("mine")
    line = one_line_error(quanta("simulate", *TINY, "--policy", "fifo", "--out",
                                 str(tmp_path / "g")))
    assert "holds fifo, which is not a folder" in line
    # a folder where the run writes a file: said before the run (it ran, then said the folder
    # "changed while this run ran", and again on every try)
    for name in ("summary.csv", "fifo/jobs.csv"):
        (tmp_path / "fold" / name).mkdir(parents=True)
        line = one_line_error(quanta("simulate", *TINY, "--policy", "fifo", "--out",
                                     str(tmp_path / "fold"), "--force"))
        assert f"holds a folder {name}/ where this run writes the file {name}" in line
        (tmp_path / "fold" / name).rmdir()
    # an earlier config.yaml that is not UTF-8, or nests deeper than the parser goes: no run's
    # list of files (tracebacks before)
    for text in (b"\x90\xff" * 200, b"a: " + b"[" * 100_000):
        (tmp_path / "k").mkdir(exist_ok=True)
        (tmp_path / "k" / "config.yaml").write_bytes(text)
        line = one_line_error(quanta("simulate", *TINY, "--policy", "fifo", "--out",
                                     str(tmp_path / "k")))
        assert "holds an earlier run's files (config.yaml)" in line
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    line = one_line_error(quanta("simulate", *TINY, "--out", str(tmp_path / "dangling")))
    assert "is a link to a missing folder" in line
    # stopped by SIGTERM (`timeout`): as Ctrl-C, the folder as it was, no hidden folder left
    out = tmp_path / "t"
    assert quanta("simulate", *TINY, "--no-plots", "--out", str(out)).returncode == 0
    before = _tree(out)
    with _long_run(out) as proc:
        _staged_by(proc, out)
        proc.terminate()
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    assert _tree(out) == before and not any(p.name.startswith(".") for p in out.iterdir())
    # SIGHUP (a closed terminal) likewise; a new folder is not left holding a hidden one
    new = tmp_path / "h"
    with _long_run(new) as proc:
        _staged_by(proc, new)
        proc.send_signal(signal.SIGHUP)
        assert proc.wait(timeout=60) == 128 + signal.SIGHUP
    assert not new.exists() or not any(new.iterdir())


def test_an_output_folder_that_cannot_be_made_is_refused_before_the_run(tmp_path):
    (tmp_path / "afile").write_text("x")
    line = one_line_error(quanta("simulate", *TINY, "--out", str(tmp_path / "afile" / "sub")))
    assert "--out" in line and "afile/sub" in line and "Not a directory" in line
    line = one_line_error(quanta("simulate", *TINY, "--out", ""))
    assert "--out" in line and "empty" in line
    line = one_line_error(quanta("simulate", "--trace", "", "--out", str(tmp_path / "o")))
    assert "--trace" in line and "empty" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]
