"""The code version that keys sweep cells and goes into config.yaml: a hash of the package's
simulation files, remembered in the package's __pycache__ while no file changes."""

import hashlib
import json
import os
from pathlib import Path

import pytest

import quanta
from quanta import cellstore
from quanta.cellstore import code_version

OLD = 1_700_000_000          # an mtime well in the past (seconds)


def full_hash(root: Path) -> str:
    """The definition, computed the slow way: every file but __pycache__, .pyc and the parts no
    simulation runs, in sorted-Path order, name and content digest."""
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if "__pycache__" in path.parts or not path.is_file() or path.suffix in (".pyc", ".pyo"):
            continue
        parts = path.relative_to(root).parts
        if any("/".join(parts[:i]) in cellstore.NOT_SIMULATION for i in range(1, len(parts) + 1)):
            continue
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return f"{quanta.__version__}+{h.hexdigest()[:12]}"


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A small package tree standing in for Quanta's, every file last changed long ago."""
    root = tmp_path / "pkg"
    files = {"__init__.py": "x = 1\n", "a-b.py": "", "a/b.py": "y = 2\n", "a_b/c.json": "{}",
             "data/t.csv": "1,2\n", "cli.py": "skipped\n", "runtime/r.py": "skipped\n",
             "data/reference/gavel/r.csv": "skipped\n", "data/reference.csv": "1\n",
             "a/m.pyc": "bytecode", "a/__pycache__/b.cpython-311.pyc": "bytecode"}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    for path in root.rglob("*"):
        os.utime(path, (OLD, OLD))
    monkeypatch.setattr(quanta, "__file__", str(root / "__init__.py"))
    return root


def memo(root):
    return root / "__pycache__" / "quanta-code-version.json"


def test_version_is_the_hash_of_the_files_and_is_remembered(package):
    v = code_version.__wrapped__()
    assert v == full_hash(package)
    assert json.loads(memo(package).read_text())["version"] == v
    assert code_version.__wrapped__() == v           # from the memo: same answer


def test_a_changed_file_changes_the_version_even_at_the_same_size(package):
    v = code_version.__wrapped__()
    f = package / "a" / "b.py"
    f.write_text("y = 3\n")                          # same size
    os.utime(f, (OLD + 5, OLD + 5))
    assert code_version.__wrapped__() == full_hash(package) != v
    (package / "a" / "new.py").write_text("")        # a new file
    os.utime(package / "a" / "new.py", (OLD, OLD))
    assert code_version.__wrapped__() == full_hash(package)
    (package / "a" / "new.py").unlink()
    assert code_version.__wrapped__() == full_hash(package)


def test_the_memo_is_used_while_stats_hold_and_not_trusted_for_young_files(package):
    v = code_version.__wrapped__()
    # a memo that lies about the version is believed while no stat changed: the proof it is used
    data = json.loads(memo(package).read_text())
    memo(package).write_text(json.dumps({**data, "version": f"{quanta.__version__}+memo"}))
    assert code_version.__wrapped__() == f"{quanta.__version__}+memo"
    # a file changed just now: hashed, and not remembered (a change within the same mtime tick
    # could follow), so the lying memo stays and is no longer matched
    (package / "a" / "b.py").write_text("y = 4\n")
    assert code_version.__wrapped__() == full_hash(package) != v
    assert json.loads(memo(package).read_text())["version"] == f"{quanta.__version__}+memo"


@pytest.mark.parametrize("text", ["", "{", "[]", '{"stamp": 1}', '{"stamp": "x", "version": 3}'])
def test_an_unreadable_memo_is_rewritten(package, text):
    memo(package).parent.mkdir(exist_ok=True)
    memo(package).write_text(text)
    assert code_version.__wrapped__() == full_hash(package)
    assert json.loads(memo(package).read_text())["version"] == full_hash(package)


def test_a_package_where_the_memo_cannot_be_written_still_answers(package):
    (package / "__pycache__").write_text("a file where the folder would be")
    assert code_version.__wrapped__() == full_hash(package)
    assert code_version.__wrapped__() == full_hash(package)


def test_the_installed_package_version_matches_its_definition():
    assert code_version.__wrapped__() == full_hash(Path(quanta.__file__).resolve().parent)


def test_what_no_simulation_runs_or_reads_is_left_out(package):
    """The runtime, the CLI and the reference simulators' recorded runs (quanta/data/reference:
    compared against by `quanta reproduce`, never read by a simulation) do not move the version;
    other data does."""
    v = code_version.__wrapped__()
    for rel in ("cli.py", "runtime/r.py", "data/reference/gavel/r.csv"):
        (package / rel).write_text("changed\n")
        os.utime(package / rel, (OLD + 5, OLD + 5))
        assert code_version.__wrapped__() == v, rel
    (package / "data" / "reference.csv").write_text("2\n")
    os.utime(package / "data" / "reference.csv", (OLD + 5, OLD + 5))
    assert code_version.__wrapped__() == full_hash(package) != v
