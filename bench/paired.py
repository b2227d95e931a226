"""Paired timing: one `quanta` command run by the code here and by an earlier commit, in
alternation (the order flips every repeat), so that both see the same machine load; then
whether their outputs are byte-identical.

    python bench/paired.py --baseline REF [--repeat 5] -- simulate --trace synthetic:3:300 \
        --cluster gavel-108 --policy sia --no-plots --quiet

REF is a git commit of this repository, exported with `git archive` to a temporary folder; each
side's folder goes first on the process' sys.path (ahead of the working folder, which `python -m`
would put first, and of the installed Quanta), so each imports its own code. Each process
gets its own `--out` folder (do not pass one); OMP_NUM_THREADS=1; bytecode cached as in a normal
install (PYTHONDONTWRITEBYTECODE removed, after one untimed warm-up process per side that writes
the caches: otherwise every process compiles Quanta's ~100 modules, ~0.2 s). Prints every
repeat's wall and CPU time (user + system), the median and minimum per side, their ratio, both
sides' code versions, and the files that differ between the two sides' outputs (every output
file but report.md and config.yaml, which record timings, the command line, the output folder
and the code's commit).
This machine's load moves single runs by up to 25%: read the medians of several repeats.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP = {"report.md", "config.yaml"}   # timings, the command line, the folder, the commit


def export(ref: str, into: Path) -> None:
    """The tree of commit `ref` into `into`."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], capture_output=True)
    if archive.returncode != 0:
        sys.exit(f"paired.py: --baseline {ref}: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(args: list[str], out: Path, pythonpath: str) -> tuple[float, float]:
    """(wall, CPU) seconds of one `python -m quanta.cli ARGS --out OUT` process."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    # `python -m` would put the working folder first on sys.path, ahead of PYTHONPATH: run from
    # this checkout, both sides would import its Quanta. The checkout goes first instead.
    boot = (f"import runpy, sys; sys.path.insert(0, {pythonpath!r}); sys.argv[0] = 'quanta'; "
            "runpy.run_module('quanta.cli', run_name='__main__', alter_sys=True)")
    c0, t0 = _cpu(), time.perf_counter()
    p = subprocess.run([sys.executable, "-c", boot, *args, "--out", str(out)],
                       env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    if p.returncode != 0:
        sys.exit(f"paired.py: `quanta {' '.join(args)}` failed ({p.returncode}): "
                 f"{(p.stderr or p.stdout).strip().splitlines()[-1:]}")
    return wall, cpu


def code_version(out: Path) -> str:
    """The code version an output folder's config.yaml records (a hash of Quanta's sources)."""
    for line in (out / "config.yaml").read_text().splitlines():
        if line.startswith("code_version:"):
            return line.split(":", 1)[1].strip()
    return "?"


def differing(a: Path, b: Path) -> list[str]:
    """Output files (relative paths) that differ or exist on one side only."""
    names = {p.relative_to(a) for p in a.rglob("*") if p.is_file()} | \
            {p.relative_to(b) for p in b.rglob("*") if p.is_file()}
    return sorted(str(n) for n in names if n.name not in SKIP and not (
        (a / n).is_file() and (b / n).is_file() and filecmp.cmp(a / n, b / n, shallow=False)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", required=True, help="git commit to compare with")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- then quanta's arguments")
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        sys.exit("paired.py: no quanta command given (after --)")
    if "--out" in cmd:
        sys.exit("paired.py: do not pass --out: each process gets its own")
    if a.repeat < 1:
        sys.exit("paired.py: --repeat must be at least 1")
    with tempfile.TemporaryDirectory(prefix="paired-") as tmp:
        work = Path(tmp)
        base = work / "baseline"
        base.mkdir()
        export(a.baseline, base)
        times: dict[str, list[float]] = {"new": [], "baseline": []}
        cpus: dict[str, list[float]] = {"new": [], "baseline": []}
        for side in ("new", "baseline"):        # untimed: writes the bytecode caches
            run(cmd, work / f"warm-{side}", str(base) if side == "baseline" else str(ROOT))
        for r in range(a.repeat):
            order = ["new", "baseline"] if r % 2 == 0 else ["baseline", "new"]
            for side in order:
                out = work / f"{side}{r}"
                wall, cpu = run(cmd, out, str(base) if side == "baseline" else str(ROOT))
                times[side].append(wall)
                cpus[side].append(cpu)
                print(f"  [{r}] {side:8s} {wall:7.3f} s wall {cpu:7.3f} s CPU", flush=True)
        print(f"quanta {' '.join(cmd)}")
        for what, d in (("wall", times), ("CPU", cpus)):
            for side in ("baseline", "new"):
                t = d[side]
                print(f"{what:4s} {side:8s} median {statistics.median(t):.3f} s  min "
                      f"{min(t):.3f} s  ({', '.join(f'{x:.3f}' for x in t)})")
            ratio = statistics.median(d["baseline"]) / statistics.median(d["new"])
            print(f"{what:4s} speed-up (baseline / new): medians {ratio:.2f}x, minima "
                  f"{min(d['baseline']) / min(d['new']):.2f}x")
        versions = {side: code_version(work / f"{side}0") for side in ("new", "baseline")}
        print(f"code: new {versions['new']}, baseline {versions['baseline']}")
        if versions["new"] == versions["baseline"]:
            print("warning: both sides ran the same code")
        diff = differing(work / "new0", work / "baseline0")
        print("outputs: byte-identical" if not diff else
              f"outputs differ: {', '.join(diff[:10])}{' ...' if len(diff) > 10 else ''}")


if __name__ == "__main__":
    main()
