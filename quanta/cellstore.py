"""Finished sweep cells on disk, keyed by a hash of each cell's full configuration and the code
version, so that a re-run (or a killed sweep started again) skips what is done.

One JSON file per cell, `<sweep>/cells/<key>.json`, written whole (temporary file, then rename):
a killed sweep leaves finished cells or nothing, never half a cell. A policy is known in a key by
its spec, or a Policy object by its class, field values and the digest of its class's file (of
its code, for a class with no file: a notebook's).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
from functools import lru_cache
from operator import itemgetter
from pathlib import Path

import quanta
from quanta.statmemo import kept


# parts of the package no simulation runs (the real runtime, the service, the job SDK, the CLI)
# or reads (the reference simulators' recorded runs, which `quanta reproduce` compares against:
# 365 of the package's ~680 files, whose stats took most of the walk below)
NOT_SIMULATION = ("runtime", "service", "job", "examples", "cli.py", "cli_jobs.py",
                  "data/reference")
_SKIPPED = frozenset(tuple(p.split("/")) for p in NOT_SIMULATION)


@lru_cache(maxsize=1)
def code_version() -> str:
    """`<version>+<hash>`: the package version and a hash of every file of the installed package
    that a simulation can run (code and bundled data: profiles, samples), so an edited checkout
    never reuses stale cells.

    Hashing the files' bytes (7 MB) costs ~25 ms, a tenth of a small `quanta simulate`; so the
    answer is kept in the package's __pycache__ with the files' (path, size, mtime) and reused
    while none of them changed (quanta/statmemo.py: a file younger than 2 s is never trusted
    so)."""
    root = Path(quanta.__file__).resolve().parent
    files = _simulation_files(str(root))
    stamp = hashlib.sha256(repr([quanta.__version__] + [(rel, st.st_size, st.st_mtime_ns)
                                                        for rel, st in files]).encode()).hexdigest()

    def version() -> str:
        h = hashlib.sha256()
        for rel, _st in files:
            h.update(rel.encode() + b"\0")
            h.update(hashlib.sha256((root / rel).read_bytes()).digest())
        return f"{quanta.__version__}+{h.hexdigest()[:12]}"
    # (a read-only install: hashed every time)
    return kept(root / "__pycache__" / "quanta-code-version.json", stamp,
                (st for _rel, st in files), version,
                lambda stamp, v: json.dumps({"stamp": stamp, "version": v}).encode(),
                lambda data: itemgetter("stamp", "version")(json.loads(data)))


# the libraries a simulation's numbers can depend on (random streams, solvers)
LIBRARIES = ("numpy", "scipy", "ecos")


@lru_cache(maxsize=1)
def library_versions() -> dict[str, str | None]:
    """The installed version of each of LIBRARIES (None: not installed), read from the
    packages' metadata (scipy is not imported for it)."""
    from importlib.metadata import PackageNotFoundError, version
    out: dict[str, str | None] = {}
    for name in LIBRARIES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def _simulation_files(root: str) -> list[tuple[str, os.stat_result]]:
    """(posix path under `root`, stat) of each of the package's files a simulation can run, in
    path order (by components, as sorted Paths compare)."""
    found: list[tuple[tuple[str, ...], os.stat_result]] = []

    def walk(folder: str, rel: tuple[str, ...]) -> None:
        with os.scandir(folder) as it:
            for entry in it:
                name = entry.name
                path = rel + (name,)
                if path in _SKIPPED or name == "__pycache__":
                    continue
                if entry.is_dir():
                    walk(entry.path, path)
                elif entry.is_file() and not name.endswith((".pyc", ".pyo")):
                    found.append((path, entry.stat()))
    walk(root, ())
    found.sort(key=lambda f: f[0])
    return [("/".join(parts), st) for parts, st in found]


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


# -- what identifies a policy in a cell's key ------------------------------------------------
def policy_config(p) -> dict:
    """What identifies a policy in a cell's key: its spec (and its module's bytes if a plugin),
    or a Policy object's class, module bytes and field values."""
    from quanta.policies.registry import policy_info, split_spec
    from quanta.report.outdir import plain
    if not isinstance(p, str):        # a Policy object
        cls = type(p)
        # (each value as it is in every process: a function by its name, not its address)
        state = sorted((k, repr(plain(v))) for k, v in vars(p).items())
        return {"object": f"{cls.__module__}.{cls.__qualname__}", "fields": state,
                "module": class_digest(cls)}
    info = policy_info(split_spec(p)[0])
    return {"spec": p.strip(), "module": class_digest(info.cls) if info.origin else None}


def class_digest(cls: type) -> str:
    """The digest of the file that defines the class, or of its code where no file can be read
    (a notebook's class, `python -`, `python -c`)."""
    try:
        path = inspect.getsourcefile(cls)
    except (TypeError, OSError):
        path = None
    digest = file_digest(path) if path else None
    return digest if digest is not None else _code_digest(cls)


def _code_digest(cls: type) -> str:
    """A class without a source file (a notebook's, `python -`): a digest of what it holds, its
    methods' code and its other class attributes, so that a class edited and defined again gets
    cells of its own (it had the digest None: a sweep reused the cells of its old code)."""
    def code_text(code) -> str:
        consts = [code_text(c) if inspect.iscode(c) else
                  repr(sorted(map(repr, c))) if isinstance(c, frozenset) else repr(c)
                  for c in code.co_consts]
        return repr((code.co_code.hex(), code.co_names, code.co_varnames, consts))

    from quanta.report.outdir import plain
    parts = []
    for name, value in sorted(vars(cls).items()):
        if name in ("__dict__", "__weakref__", "__module__", "__doc__", "__dataclass_fields__",
                    "__dataclass_params__", "__match_args__", "__annotations__"):
            continue
        func = getattr(value, "__func__", getattr(value, "fget", value))
        code = getattr(func, "__code__", None)
        parts.append((name, code_text(code) if code is not None else repr(plain(value))))
    parts.append(("__bases__", [f"{b.__module__}.{b.__qualname__}" for b in cls.__bases__]))
    return "code:" + hashlib.sha256(repr(parts).encode()).hexdigest()
