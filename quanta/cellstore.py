"""Finished sweep cells on disk, keyed by a hash of each cell's full configuration and the code
version, so that a re-run (or a killed sweep started again) skips what is done.

One JSON file per cell, `<sweep>/cells/<key>.json`, written whole (temporary file, then rename):
a killed sweep leaves finished cells or nothing, never half a cell.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path

import quanta


# parts of the package no simulation runs (the real runtime, the service, the job SDK, the CLI)
NOT_SIMULATION = ("runtime", "service", "job", "examples", "cli.py", "cli_jobs.py")


@lru_cache(maxsize=1)
def code_version() -> str:
    """`<version>+<hash>`: the package version and a hash of every file of the installed package
    that a simulation can run (code and bundled data: profiles, samples), so an edited checkout
    never reuses stale cells."""
    root = Path(quanta.__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if "__pycache__" in path.parts or not path.is_file() or path.suffix in (".pyc", ".pyo"):
            continue
        if path.relative_to(root).parts[0] in NOT_SIMULATION:
            continue
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return f"{quanta.__version__}+{h.hexdigest()[:12]}"


def file_digest(path: str | os.PathLike) -> str | None:
    """sha256 of a file's bytes, or None when `path` is not a file (a preset, a sample name)."""
    p = Path(path)
    try:
        if not p.is_file():
            return None
        return hashlib.sha256(p.read_bytes()).hexdigest()
    except OSError:
        return None


def cell_key(config: dict) -> str:
    blob = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


class CellStore:
    def __init__(self, folder: Path):
        self.folder = Path(folder) / "cells"

    def path(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    def get(self, key: str) -> dict | None:
        """The stored cell, or None when it is absent or unreadable (then it runs again)."""
        try:
            data = json.loads(self.path(key).read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and data.get("key") == key else None

    def put(self, key: str, data: dict) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.folder / f".{key}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps({**data, "key": key}, sort_keys=True))
        os.replace(tmp, self.path(key))
