"""The README's simulator commands as a user types them, one after another in one folder laid out
as the repository root: the first `quanta simulate` (bundled defaults), then the Use section's
examples, the Queues block and the Sweeps block. Each block is also tested alone
(test_readme_queues.py, test_readme_sweeps.py); here the order counts: a command that refuses a
folder an earlier one wrote (the examples did, until each got its own --out) fails here."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def section(title: str) -> str:
    text = (ROOT / "README.md").read_text()
    return re.search(rf"## {re.escape(title)}\n(.*?)\n## ", text, re.S).group(1)


def commands(block: str) -> list[str]:
    lines = [ln.split("#", 1)[0].strip() for ln in block.splitlines()]
    return [ln for ln in lines if ln]


def bash_blocks(title: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", section(title), re.S)


def test_readme_simulator_commands_in_order_in_one_folder(tmp_path):
    assert "Then `quanta simulate` replays the bundled Philly sample" in section("Set up (two commands)")
    use = bash_blocks("Use")
    examples = commands(use[1])
    assert examples and all(ln.startswith("quanta simulate") for ln in examples)
    lines = (["quanta simulate"] + examples + commands(bash_blocks("Queues and quotas")[0])
             + commands(bash_blocks("Sweeps")[0]))
    (tmp_path / "quanta").symlink_to(ROOT / "quanta")          # the repository's relative paths
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "120",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for line in lines:
        r = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0 and "Traceback" not in r.stderr, (line, r.stderr[-2000:])
    out = tmp_path / "quanta-out"
    assert (out / "summary.csv").is_file() and (out / "jct_cdf.png").is_file()
    for ln in examples:
        assert (tmp_path / ln.split("--out ")[1].split()[0] / "summary.csv").is_file(), ln
    assert (out / "queues" / "queues.csv").is_file() and (out / "sweep" / "results.csv").is_file()


def test_readme_and_help_name_every_policy_and_trace_format():
    """The README's policy table and format list, and `simulate --help`, keep up with the
    registries (gavel-fifo-agnostic and rubick were missing)."""
    from quanta.policies.registry import POLICIES
    from quanta.workloads.formats import known_formats
    table = section("Policies")
    named = set(re.findall(r"`([a-z][a-z0-9-]*)`", table))
    assert set(POLICIES) <= named, sorted(set(POLICIES) - named)
    formats = [f.strip() for f in known_formats().split(",")]
    usage = re.search(r"--format (auto\|[a-z|]+)", section("Use")).group(1).split("|")
    assert set(formats) <= set(usage), sorted(set(formats) - set(usage))
    r = subprocess.run([sys.executable, "-m", "quanta.cli", "simulate", "--help"],
                       capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    helptext = " ".join(r.stdout.split())
    said = re.search(r"trace format \(auto, ([a-z, ]+)\)", helptext).group(1).split(", ")
    assert set(formats) <= set(said), sorted(set(formats) - set(said))
