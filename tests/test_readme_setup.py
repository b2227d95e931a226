"""The README's set-up: CI (.ci/run) runs its install command and its test commands, in that
order; `pytest -q` (the fast set) leaves the tests marked slow out (`pytest -q -m slow` runs
them; a test file named on the command line runs whole), as the README says."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def ci_commands() -> list[str]:
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]


def test_ci_runs_the_readmes_install_and_test_commands_in_order():
    text = (ROOT / "README.md").read_text()
    setup = re.search(r"## Set up \(two commands\)\n(.*?)\n## ", text, re.S).group(1)
    block = re.search(r"```bash\n(.*?)```", setup, re.S).group(1).split("\n")
    install, test = [ln for ln in block if ln.strip()]
    slow = re.search(r"`(pytest -q -m slow)`", setup).group(1)
    ci = ci_commands()
    assert [c for c in ci if c in (install, test, slow)] == [install, test, slow]


def collected(*args: str) -> tuple[set[str], str]:
    """The tests `pytest --collect-only -q ARGS` would run, as typed from the repository root,
    and its summary line."""
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p",
                        "no:cacheprovider", *args], cwd=ROOT, capture_output=True, text=True)
    lines = r.stdout.splitlines()
    return {ln.split("::", 1)[1] for ln in lines if "::" in ln}, lines[-1]


def test_pytest_q_leaves_the_slow_tests_out_unless_named():
    slow = "test_two_rank_jobs_that_finish_exit_cleanly"      # (tests/test_job_sdk.py, slow)
    fast, summary = collected()
    assert slow not in fast and "test_example_jobs_really_train[mlp]" in fast
    assert "deselected" in summary
    named, _ = collected("tests/test_job_sdk.py")              # a file named runs whole
    assert slow in named and "test_example_jobs_really_train[mlp]" in named
