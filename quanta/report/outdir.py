"""A `quanta simulate` output folder: what an earlier run left there, and its `config.yaml`.

A run never writes over an earlier run's files: `check_out_folder` refuses a folder that holds
them (one line naming the folder and `--force`); with `force` it deletes exactly those files
first. Quanta's files are the ones the earlier run's `config.yaml` lists (`files:`), and, for a
folder written before config.yaml existed, the names Quanta writes (summary.csv, report.md,
queues.csv, its figures, `<policy>/jobs.csv|timeline.csv|events.csv`). Anything else in the
folder is the user's: left alone when there is no earlier run to replace, and a refusal (never a
deletion) under `force`. A sub-folder that is itself an output folder (another run, a sweep) is
left alone.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Callable

from quanta.errors import QuantaError

CONFIG = "config.yaml"
TOP_FILES = {"summary.csv", "report.md", "queues.csv", CONFIG}
POLICY_FILES = {"jobs.csv", "timeline.csv", "events.csv"}
FIG_FORMATS = ("png", "pdf", "svg")
FIGURES = ("jct_cdf", "utilisation", "queue", "jct_by_type", "ftf_cdf")
# what marks a sub-folder as an output folder of its own (a nested run or a sweep): left alone
OWN_FOLDER_MARKS = (CONFIG, "summary.csv", "sweep.json")


def _is_figure(name: str) -> bool:
    stem, dot, ext = name.rpartition(".")
    return bool(dot) and ext in FIG_FORMATS and stem in FIGURES


def _listed(out: Path) -> set[str]:
    """Files the earlier run's config.yaml says it wrote (relative, '/'-separated)."""
    cfg = out / CONFIG
    if not cfg.is_file():
        return set()
    import yaml
    try:
        data = yaml.safe_load(cfg.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return set()
    files = data.get("files") if isinstance(data, dict) else None
    return {str(f) for f in files} if isinstance(files, list) else set()


def earlier_run(out: Path) -> tuple[list[Path], list[Path]]:
    """(Quanta's files from an earlier run, the user's other entries) in `out`, sorted."""
    ours: list[Path] = []
    theirs: list[Path] = []
    if not out.is_dir():
        return ours, theirs
    listed = _listed(out)
    for entry in sorted(out.iterdir()):
        name = entry.name
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


def _names(paths: list[Path], out: Path, most: int = 4) -> str:
    rel = [p.relative_to(out).as_posix() for p in paths]
    return ", ".join(rel[:most]) + (f" and {len(rel) - most} more" if len(rel) > most else "")


def check_out_folder(out: Path, force: bool) -> None:
    """Refuse a folder holding an earlier run's files (QuantaError, one line) unless `force`,
    which deletes those files (and policy folders left empty). Under `force`, files Quanta did
    not write are never deleted: the run is refused instead."""
    if out.exists() and not out.is_dir():
        raise QuantaError(f"output folder {out} is a file", field="--out")
    ours, theirs = earlier_run(out)
    if not ours:
        return
    if not force:
        raise QuantaError(f"output folder {out}/ holds an earlier run's files "
                          f"({_names(ours, out)}): use --force to replace them, or another --out",
                          field="--out")
    if theirs:
        raise QuantaError(f"output folder {out}/ holds files Quanta did not write "
                          f"({_names(theirs, out)}): --force deletes only an earlier run's "
                          f"files; move those away or use another --out", field="--out")
    for f in ours:
        f.unlink()
    for d in sorted({f.parent for f in ours if f.parent != out}):
        if d.is_dir() and not any(d.iterdir()):
            d.rmdir()


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
    """A value YAML can write as it is (tuples as lists, other objects as their repr)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "item") and not isinstance(value, (list, tuple, dict)):
        return plain(value.item())
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return repr(value)


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
