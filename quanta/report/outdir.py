"""A `quanta simulate` output folder: what an earlier run left there, and its `config.yaml`.

A run never writes over an earlier run's files: `Staging` refuses a folder that holds them (one
line naming the folder and `--force`); with `force` it replaces exactly those files. Quanta's files
are the ones the earlier run's `config.yaml` lists (`files:`), and, for a folder written before
config.yaml existed, the names Quanta writes (summary.csv, report.md, queues.csv, its figures,
`<policy>/jobs.csv|timeline.csv|events.csv`). Anything else in the folder is the user's, never
deleted: beside the run it is left alone, `force` or not; inside a policy folder of the earlier
run it is a refusal under `force` (that folder goes with the run). A sub-folder that is itself an
output folder (another run, a sweep) is left alone.

A run's files land whole or not at all: they are written into a hidden folder inside the output
folder, and moved into place (an earlier run's files moved aside first, deleted last) only once
every one is written. A run that fails, or is stopped, leaves the folder as it found it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from enum import Enum
from functools import lru_cache
from pathlib import Path
from typing import Callable, Sequence

from quanta.errors import QuantaError

CONFIG = "config.yaml"
TOP_FILES = {"summary.csv", "report.md", "queues.csv", CONFIG}
POLICY_FILES = {"jobs.csv", "timeline.csv", "events.csv"}
FIG_FORMATS = ("png", "pdf", "svg")
FIGURES = ("jct_cdf", "utilisation", "queue", "jct_by_type", "ftf_cdf")
# what marks a folder as a sweep's (`quanta sweep`; cells/ before its first sweep.json)
SWEEP_MARKS = ("sweep.json", "cells")
# what marks a sub-folder as an output folder of its own (a nested run or a sweep): left alone
OWN_FOLDER_MARKS = (CONFIG, "summary.csv") + SWEEP_MARKS
# a run's hidden folders inside the output folder: `.quanta-run-<pid>-<random>`
STAGE_PREFIX = ".quanta-run-"


def _is_figure(name: str) -> bool:
    stem, dot, ext = name.rpartition(".")
    return bool(dot) and ext in FIG_FORMATS and stem in FIGURES


def listed_files(out: Path) -> set[str]:
    """Files the earlier run's config.yaml says it wrote (relative, '/'-separated)."""
    cfg = out / CONFIG
    if not cfg.is_file():
        return set()
    import yaml
    try:
        data = yaml.safe_load(cfg.read_text()) or {}
    except (OSError, ValueError, RecursionError, yaml.YAMLError):   # (not UTF-8: a ValueError)
        return set()
    files = data.get("files") if isinstance(data, dict) else None
    return {str(f) for f in files} if isinstance(files, list) else set()


def earlier_run(out: Path) -> tuple[list[Path], list[Path]]:
    """(Quanta's files from an earlier run, the user's other entries) in `out`, sorted."""
    ours: list[Path] = []
    theirs: list[Path] = []
    if not out.is_dir():
        return ours, theirs
    listed = listed_files(out)
    for entry in sorted(out.iterdir()):
        name = entry.name
        if name.startswith(STAGE_PREFIX):
            continue                      # a run's hidden folder (Staging): never the user's
        if entry.is_file() and not entry.is_symlink():
            mine = name in TOP_FILES or _is_figure(name) or name in listed
            (ours if mine else theirs).append(entry)
        elif entry.is_dir() and not entry.is_symlink():
            if any((entry / m).exists() for m in OWN_FOLDER_MARKS):
                continue                                     # another output folder: not ours
            inner = sorted(entry.iterdir())
            for f in inner:
                rel = f"{name}/{f.name}"
                mine = f.is_file() and not f.is_symlink() and (f.name in POLICY_FILES or
                                                                 rel in listed)
                (ours if mine else theirs).append(f)
            if not inner:
                theirs.append(entry)
        else:
            theirs.append(entry)
    return ours, theirs


def some_names(paths: list[Path], out: Path, most: int = 4) -> str:
    """The first `most` of `paths`, relative to `out`, and how many more."""
    rel = [p.relative_to(out).as_posix() for p in paths]
    return ", ".join(rel[:most]) + (f" and {len(rel) - most} more" if len(rel) > most else "")


def _replaced(out: Path, force: bool) -> list[Path]:
    """The earlier run's files a new run in `out` replaces; a QuantaError (one line) if there are
    some and not `force`, or, under `force`, if the folder holds files Quanta did not write."""
    marks = [m for m in SWEEP_MARKS if (out / m).exists()]
    if marks:                   # (--force or not: they are no run's files to replace)
        raise QuantaError(f"output folder {out}/ holds a sweep's results ({', '.join(marks)}): "
                          f"use another --out", field="--out")
    ours, theirs = earlier_run(out)
    if not ours:
        return []
    if not force:
        raise QuantaError(f"output folder {out}/ holds an earlier run's files "
                          f"({some_names(ours, out)}): use --force to replace them, or another "
                          f"--out",
                          field="--out")
    # the user's files beside the run stay as they are (a run into a folder that held some could
    # never be replaced); inside a policy folder the earlier run wrote, they are refused: the
    # folder they are in goes with the run
    inside = [f for f in theirs if f.parent != out]
    if inside:
        raise QuantaError(f"output folder {out}/ holds files Quanta did not write in the earlier "
                          f"run's folders ({some_names(inside, out)}): --force deletes only an "
                          f"earlier run's files; move those away or use another --out",
                          field="--out")
    return ours


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


class Staging:
    """A run's output folder, written whole or not at all.

    Made before the simulation, so that a refusal (an earlier run's files without --force, the
    user's files under --force) or a folder that cannot be made or written costs no work. The
    run writes its files into `dir`, a hidden folder inside `out`; `commit` moves the earlier
    run's files aside, the new ones into place, then deletes the old (a move that fails puts
    everything back); `abort` removes the hidden folder, and `out` itself if this run made it
    and it is empty. Hidden folders left by a killed run (its process gone) are removed."""

    def __init__(self, out: Path, force: bool, folders: Sequence[str] = ()):
        """`folders`: the sub-folders the run writes (one per policy)."""
        if out.is_symlink() and not out.exists():
            raise QuantaError(f"output folder {out} is a link to a missing folder", field="--out")
        if out.exists() and not out.is_dir():
            raise QuantaError(f"output folder {out} is a file", field="--out")
        for name in folders:
            sub = out / name
            if sub.is_symlink() or sub.exists() and not sub.is_dir():
                raise QuantaError(f"output folder {out}/ holds {name}, which is not a folder, where "
                                  f"this run writes policy folder {name}/: move it away or use "
                                  f"another --out", field="--out")
            if sub.is_dir() and any((sub / m).exists() for m in OWN_FOLDER_MARKS):
                raise QuantaError(f"output folder {out}/ holds another run in {name}/, the folder "
                                  f"this run's policy {name} writes: use another --out",
                                  field="--out")
        names = [*TOP_FILES, *(f"{stem}.{ext}" for stem in FIGURES for ext in FIG_FORMATS),
                 *(f"{d}/{f}" for d in folders for f in POLICY_FILES)]
        blocked = [n for n in names if (out / n).is_dir()]
        if blocked:
            raise QuantaError(f"output folder {out}/ holds a folder {blocked[0]}/ where this run "
                              f"writes the file {blocked[0]}: move it away or use another --out",
                              field="--out")
        real = out.resolve()
        if out.exists() and any(f.startswith(f"{real.name}/") for f in listed_files(real.parent)):
            raise QuantaError(f"output folder {out}/ is policy folder {real.name}/ of an earlier "
                              f"run in {real.parent}/: use another --out", field="--out")
        self.out = out
        self.replace = _replaced(out, force)
        self.made = not out.exists()
        try:
            out.mkdir(parents=True, exist_ok=True)
            self._clear_stale()
            self.dir = Path(tempfile.mkdtemp(prefix=f"{STAGE_PREFIX}{os.getpid()}-", dir=out))
        except OSError as e:
            self._remove_made()
            raise QuantaError(f"cannot write the output folder {out}: "
                              f"{e.strerror or e}", field="--out") from None

    def _clear_stale(self) -> None:
        for entry in self.out.iterdir():
            name = entry.name
            if not (name.startswith(STAGE_PREFIX) and entry.is_dir() and not entry.is_symlink()):
                continue
            pid = name[len(STAGE_PREFIX):].partition("-")[0]
            if pid.isdigit() and not _pid_alive(int(pid)):
                shutil.rmtree(entry, ignore_errors=True)

    def _remove_made(self) -> None:
        if self.made:
            try:
                self.out.rmdir()          # only if empty
            except OSError:
                pass

    def commit(self) -> None:
        """Move the files written under `dir` into `out` (replacing the earlier run's); QuantaError
        (one line) and nothing changed if a move fails."""
        written = sorted(f for f in self.dir.rglob("*") if not f.is_dir())
        targets = [self.out / f.relative_to(self.dir) for f in written]
        # the folder as it was found: another run (or a hand) may have written it meanwhile
        replaced = set(self.replace)
        changed = [f for f in self.replace if not f.is_file()] + \
            [t for t in targets if t not in replaced and (t.exists() or t.is_symlink())]
        if changed:
            raise QuantaError(f"output folder {self.out}/ changed while this run ran "
                              f"({some_names(changed, self.out)}): nothing of this run was written; "
                              f"run it again", field="--out")
        aside = Path(tempfile.mkdtemp(prefix=f"{STAGE_PREFIX}{os.getpid()}-", dir=self.out)) \
            if self.replace else None
        moved: list[tuple[Path, Path]] = []          # (from, to), in the order done
        made: list[Path] = []                        # policy folders made for the new files
        try:
            for f in self.replace:
                dst = aside / f.relative_to(self.out)
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.replace(f, dst)
                moved.append((f, dst))
            for f, dst in zip(written, targets):
                if not dst.parent.is_dir():
                    dst.parent.mkdir(parents=True)
                    made.append(dst.parent)
                os.replace(f, dst)
                moved.append((f, dst))
        except BaseException as e:         # (Ctrl-C among the moves too: all put back)
            for src, dst in reversed(moved):
                os.replace(dst, src)
            for d in reversed(made):
                d.rmdir()
            if aside is not None:
                shutil.rmtree(aside, ignore_errors=True)
            if not isinstance(e, OSError):
                raise
            raise QuantaError(f"cannot write the output folder {self.out}: {e.strerror or e} "
                              f"(nothing in it was changed)", field="--out") from None
        for d in sorted({f.parent for f in self.replace if f.parent != self.out}, reverse=True):
            if d.is_dir() and not any(d.iterdir()):
                d.rmdir()                  # policy folders only the earlier run used
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)
        shutil.rmtree(self.dir, ignore_errors=True)

    def abort(self) -> None:
        """The run failed or was stopped: its hidden folder goes, the earlier run stays."""
        shutil.rmtree(self.dir, ignore_errors=True)
        self._remove_made()


def git_describe_later() -> Callable[[], str | None]:
    """`git describe --always --dirty --tags` of the checkout Quanta runs from, started now in a
    child process so that it runs beside the simulation; call the result for the answer (None
    if Quanta is not run from a checkout or git fails)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return lambda: None
    try:
        proc = subprocess.Popen(["git", "describe", "--always", "--dirty", "--tags"], cwd=root,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    except (OSError, subprocess.SubprocessError):
        return lambda: None

    @lru_cache(maxsize=1)
    def answer() -> str | None:
        try:
            out, _ = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return None
        return out.strip() or None if proc.returncode == 0 else None
    return answer


def command_line() -> str:
    """The command as the user typed it (`quanta ...` for the console script or -m quanta.cli)."""
    argv = list(sys.argv)
    prog = os.path.basename(argv[0]) if argv else ""
    if prog in ("quanta", "cli.py", "__main__.py") or prog.endswith("quanta"):
        argv[0] = "quanta"
    return shlex.join(argv)


def plain(value):
    """A value YAML can write as it is, the same in every process: tuples as lists, sets as
    sorted lists (not in their hash order), functions and classes by their qualified names,
    an Enum member by its name, other objects as their repr (one that holds a memory address: the
    type's qualified name)."""
    if isinstance(value, Enum):
        return value.name
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "item") and not isinstance(value, (list, tuple, dict)):
        return plain(value.item())
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((plain(v) for v in value), key=repr)
    if isinstance(value, Path):
        return str(value)
    if callable(value) and hasattr(value, "__module__") and hasattr(value, "__qualname__"):
        return f"{value.__module__}.{value.__qualname__}"
    text = repr(value)
    if " at 0x" in text:
        kind = type(value)
        return f"<{kind.__module__}.{kind.__qualname__}>"
    return text


def write_config(out: Path, config: dict, files: list[Path]) -> None:
    """`out/config.yaml`: every input of the run, then the files it wrote (what --force may
    delete next time)."""
    from quanta.report.plainyaml import dump
    rel = sorted({f.relative_to(out).as_posix() for f in files} | {CONFIG})
    data = plain({**config, "files": rel})
    body = dump(data)             # (PyYAML's text, without its import where the data allow)
    if body is None:
        import yaml
        body = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
    (out / CONFIG).write_text("# Every input of this `quanta simulate` run; re-run it with the "
                              "command below (add --force to replace these files).\n" + body)
