"""Start-up time of the command line: `quanta --help`, `quanta simulate --help`,
`quanta --version`, a tiny `quanta simulate` run, and the time from process start to the first
simulated event (the first decision) of the default `quanta simulate` (the bundled Philly sample
on gavel-108 under fifo, sjf, srtf and las; the process stops at that event).

    python bench/startup.py [--repeats 7] [--root DIR] [--no-pyc-cache]
    python bench/startup.py --floor "SIMULATE ARGS" [--repeats 15]

`--floor` times what a `quanta simulate SIMULATE ARGS` process costs before Quanta's own work, a
layer at a time, in fresh processes taken in turn (so that each row sees the same machine): a bare
interpreter, then `import numpy`, then `import typer` too, then the Quanta modules that run
imports (read from one untimed run of it), then the whole run; each row with its cost over the
row above.

Each case runs `--repeats` times in a fresh process (the `quanta` script installed beside this
Python, else `python -m quanta.cli`), with the code of `--root` (default: this repository) first
on PYTHONPATH, so an older checkout can be timed the same way. Prints median and min wall
seconds and the median CPU seconds of the process (user + system: steadier than wall time when
the cores are shared). Bytecode: an installed package has its .pyc files; where
PYTHONDONTWRITEBYTECODE is set every run would compile Quanta's sources again, so by default the
runs share a private bytecode cache (PYTHONPYCACHEPREFIX in a temporary folder) warmed by one
untimed run per case; `--no-pyc-cache` times the environment as it is.
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Runs `quanta simulate ARGS...` in this process and exits at the first decision of the
# simulation, printing the seconds since the parent started the process (argv[1]).
FIRST_EVENT = r"""
import os, sys, time
t0 = float(sys.argv[1])
import quanta.core.loop as loop
step = loop.DecisionLoop.step
def first(self, *a, **k):
    print(f"FIRST_EVENT {time.time() - t0:.6f}", flush=True)
    os._exit(0)
loop.DecisionLoop.step = first
sys.argv = ["quanta", "simulate"] + sys.argv[2:]
from quanta.cli import main
main()
print("no simulated event", file=sys.stderr)
sys.exit(3)
"""


# Runs `quanta simulate ARGS...` to its end in this process and prints the Quanta modules it
# imported.
RUN_MODULES = r"""
import sys
sys.argv = ["quanta", "simulate"] + sys.argv[1:]
from quanta.cli import main
try:
    main()
except SystemExit as e:
    if e.code:
        raise
print("MODULES " + ",".join(sorted(m for m in sys.modules if m.split(".")[0] == "quanta")))
"""


def quanta_command() -> list[str]:
    script = Path(sys.executable).parent / "quanta"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "quanta.cli"]


def run_once(argv: list[str], env: dict, cwd: Path) -> tuple[float, float, str]:
    """(wall seconds, child CPU seconds, stdout) of one process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    argv = [a.replace("{t0}", repr(t0)) for a in argv]
    r = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    wall = time.time() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({r.returncode}): {r.stderr.strip()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, r.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--root", type=Path, default=ROOT, help="checkout whose code is timed")
    ap.add_argument("--no-pyc-cache", action="store_true",
                    help="no private bytecode cache: time the environment as it is")
    ap.add_argument("--floor", metavar="SIMULATE_ARGS",
                    help="time the layers below this `quanta simulate` run instead (one string)")
    args = ap.parse_args()
    root = args.root.resolve()
    tmp = Path(tempfile.mkdtemp(prefix="quanta-startup-"))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "80",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    if not args.no_pyc_cache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    if args.floor is not None:
        try:
            floor(shlex.split(args.floor), args.repeats, env, root, tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return
    q = quanta_command()
    tiny = ["simulate", "--trace", "synthetic:3:20", "--cluster", "v100:1x8", "--policy", "fifo",
            "--no-plots", "--quiet", "--out"]
    cases = [
        ("quanta --help", lambda i: q + ["--help"], None),
        ("quanta simulate --help", lambda i: q + ["simulate", "--help"], None),
        ("quanta --version", lambda i: q + ["--version"], None),
        ("quanta simulate (tiny: synthetic:3:20, v100:1x8, fifo, --no-plots)",
         lambda i: q + tiny + [str(tmp / f"tiny{i}")], None),
        ("start to first simulated event, default quanta simulate",
         lambda i: [sys.executable, "-c", FIRST_EVENT, "{t0}", "--out", str(tmp / f"d{i}")],
         "FIRST_EVENT"),
    ]
    print(f"code: {root}; {len(cases)} cases x {args.repeats} runs (+1 warm-up); "
          f"{'environment bytecode as is' if args.no_pyc_cache else 'bytecode cached'}; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    print()
    print("| case | median wall s | min wall s | median CPU s |")
    print("|---|---:|---:|---:|")
    try:
        for name, argv, marker in cases:
            run_once(argv(-1), env, root)                        # warm-up (bytecode, disk cache)
            walls, cpus = [], []
            for i in range(args.repeats):
                wall, cpu, out = run_once(argv(i), env, root)
                if marker is not None:                           # the child's own clock
                    wall = float(out.split(marker, 1)[1].split()[0])
                walls.append(wall)
                cpus.append(cpu)
            print(f"| {name} | {statistics.median(walls):.3f} | {min(walls):.3f} | "
                  f"{statistics.median(cpus):.3f} |", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def floor(sim_args: list[str], repeats: int, env: dict, root: Path, tmp: Path) -> None:
    """The `--floor` table: each layer's median and min wall, and its cost over the layer above."""
    py = sys.executable
    out = ["--out", str(tmp / "run")]
    r = subprocess.run([py, "-c", RUN_MODULES] + sim_args + out, env=env, cwd=root,
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0 or "MODULES " not in r.stdout:
        last = (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"startup.py: --floor: quanta simulate {shlex.join(sim_args)} failed "
                         f"({r.returncode}): {last}")
    mods = r.stdout.split("MODULES ", 1)[1].split()[0].split(",")
    load = "import importlib\nfor m in %r: importlib.import_module(m)" % (mods,)
    cases = [
        ("bare interpreter (python -c pass)", [py, "-c", "pass"]),
        ("+ import numpy", [py, "-c", "import numpy"]),
        ("+ import typer", [py, "-c", "import numpy, typer"]),
        (f"+ the {len(mods)} Quanta modules the run imports (and what they import)",
         [py, "-c", "import numpy, typer\n" + load]),
        ("the whole run: quanta simulate " + " ".join(sim_args),
         [py, "-m", "quanta.cli", "simulate"] + sim_args + out),
    ]
    walls: dict[str, list[float]] = {name: [] for name, _ in cases}
    for _ in range(repeats + 1):                  # the first round untimed (bytecode, disk cache)
        for name, argv in cases:
            shutil.rmtree(tmp / "run", ignore_errors=True)
            walls[name].append(run_once(argv, env, root)[0])
    print(f"code: {root}; {len(cases)} layers x {repeats} rounds (+1 warm-up), taken in turn; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    print()
    print("| layer | median wall s | min wall s | over the layer above (median) |")
    print("|---|---:|---:|---:|")
    before = 0.0
    for name, _ in cases:
        w = walls[name][1:]
        med = statistics.median(w)
        print(f"| {name} | {med:.3f} | {min(w):.3f} | {med - before:+.3f} |")
        before = med


if __name__ == "__main__":
    main()
