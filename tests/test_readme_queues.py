"""The README's "Queues and quotas" commands, verbatim from the repository root."""

import csv
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "120",
       "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def test_readme_queues_section_verbatim():
    text = (ROOT / "README.md").read_text()
    sec = re.search(r"## Queues and quotas\n(.*?)\n## ", text, re.S).group(1)
    bash = re.search(r"```bash\n(.*?)```", sec, re.S).group(1)
    lines = [ln.strip() for ln in bash.splitlines() if ln.strip()]
    assert len(lines) == 2
    assert lines[0].endswith("--out quanta-out/queues")
    # this test's own output folder: a second run into it would be refused (no --force)
    shutil.rmtree(ROOT / "quanta-out" / "queues", ignore_errors=True)
    sim = subprocess.run(["bash", "-c", lines[0]], cwd=ROOT, env=ENV, capture_output=True,
                         text=True, timeout=600)
    assert sim.returncode == 0, sim.stderr
    assert "las+queues" in sim.stdout and "gavel-las+queues" in sim.stdout
    rows = list(csv.DictReader(open(ROOT / "quanta-out" / "queues" / "queues.csv")))
    assert {r["policy"] for r in rows} >= {"las+queues", "gavel-las+queues"}
    listing = subprocess.run(["bash", "-c", lines[1]], cwd=ROOT, env=ENV, capture_output=True,
                             text=True, timeout=120)
    assert listing.returncode == 0, listing.stderr
    assert "teams" in listing.stdout or "cohort" in listing.stdout.lower()
    # the table's title on one line, however narrow the table (rich wrapped it at its width)
    title = listing.stdout.splitlines()[0]
    assert title.rstrip().endswith("per GPU type") and "nominal / most" in title, listing.stdout
