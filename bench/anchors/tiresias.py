"""Run Tiresias' own simulator (SymbioticLab/Tiresias, `simulator/run_sim.py`, unchanged) on a trace
and record its per-job results in the common format (bench/anchors/common.py).

    python bench/anchors/tiresias.py --tiresias PATH --trace T --schedule dlas-gpu|gittins|... \\
        --scheme count|yarn|random [--cluster-spec SPEC] [--out DIR] [--python PY2]

PATH is a Tiresias checkout, or the bare git dir that `fetch github:SymbioticLab/Tiresias` gives.
Its `simulator/` folder is exported (from the git HEAD, or copied) into
${XDG_CACHE_HOME:-~/.cache}/anchors/tiresias/src/<commit>/ and run there: the simulator reads
`yarn-gput1000.csv` from its working directory (run_sim.py:1985) and Python 2 would otherwise write
.pyc files into the checkout. Nothing in it is edited.

Interpreter: the simulator is Python 2 code (README: "python2.7 is required"; `sys.maxint`, integer
`/` in run_sim.py:936,1226,1974). Debian 12 has no Python 2 package and PyPI has no interpreter, so
a CPython 2.7 must be on the machine: --python, $TIRESIAS_PYTHON, `python2.7` on PATH, or pyenv's
~/.pyenv/versions/2.7*/bin/python2.7, in that order. The one third-party import, numpy (jobs.py:15,
used only inside a string), is installed once from PyPI (numpy==1.16.6, the last release for 2.7)
into the cache folder (py2lib/, on PYTHONPATH). lp.py's cplex imports are commented out upstream.

Schedules (run_sim.py:2030-2099): every name run_sim.py knows. All but one run as
`python2.7 run_sim.py --cluster_spec=... --print --scheme=... --trace_file=... --schedule=...
--log_path=...` exactly as the README and sim_runs.sh do. `gittins` cannot run unchanged: main()
keeps the YARN distribution in a local (run_sim.py:2075) while gittins_sim_jobs ranks jobs through
get_gittins_index(), which reads JOBS.job_dist_data (run_sim.py:1245), still None, so it dies with
"TypeError: 'NoneType' object has no attribute '__getitem__'" at run_sim.py:1246 on the first
event. For `gittins` only, a driver (written to the cache folder) imports run_sim.py as a module,
wraps parse_job_dist() so that it also stores its result in JOBS.job_dist_data (what the other
Gittins branches do, run_sim.py:2051), and calls main(); nothing else changes. `dlas-gpu-gittins`
(Discretized 2D-LAS queues with the Gittins rank inside each queue, run_sim.py:1104-1105) runs
unchanged.

Placement schemes: dlas*, gittins and dlas-gpu-gittins never call the placement code: they count
GPUs (`CLUSTER.free_gpu >= job['num_gpu']`, run_sim.py:1107,1404), so count/yarn/random give the
same schedule; the scheme changes only the logs (log.py:54,106-108).

Cluster spec (--cluster-spec): a spec CSV (num_switch,num_node_p_switch,num_gpu_p_node,
num_cpu_p_node,mem_p_node), the name of one bundled in simulator/ (cluster_spec.csv, n32g4.csv, ...),
or SxNxG (switches x nodes per switch x GPUs per node; written to the cache folder with 128 CPUs and
256 GB per node, unused by the count-based schedules). Default: the bundled cluster_spec.csv.

Output (--out, default quanta/data/reference/tiresias/): `<workload>__<schedule>_<scheme>.csv/.json`
in the common format, workload = `<trace stem>_<SxNxG>` unless --workload is given (a trace of the
simulator's folder gets Quanta's name for it, `tiresias_<stem>`, e.g. tiresias_60_job_1x2x4). Per job:
job_id (the trace's; the k-th repeat of an id gets '#k', as Quanta's readers do), application =
model_name, submit/start/end from the simulator's job.csv (log.py:339-349; start = first start,
run_sim.py:1128-1129), JCT = its `JCT` column (int(end - submit)). Jobs the simulator never
finished (cluster too small: it prints "This cluster is not large enough to run the job" and stops,
run_sim.py:975-977) are listed in the notes.
The simulator's own outputs (job.csv, cluster.csv, stdout) stay in the cache folder's runs/.
Last line of stdout: a JSON summary.
"""

from __future__ import annotations

import argparse
import csv
import glob
import gzip
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RECORDED, JobResult, RunSummary, write_run  # noqa: E402

REPO = "SymbioticLab/Tiresias"
EXPECTED_COMMIT = "959f9b08f44fa1b4f2b3aed79b01e4d439264a94"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "anchors" / "tiresias"
NUMPY_REQ = "numpy==1.16.6"
SCHEDULES = ("fifo", "fjf", "sjf", "lpjf", "shortest", "shortest-expected", "shortest-gpu", "dlas",
             "dlas-gpu", "dlas-gpu-gittins", "dlas-gpu-gittins-1", "dlas-gpu-gittins-2",
             "dlas-gpu-gittins-4", "dlas-gpu-gittins-8", "dlas-gpu-05", "dlas-gpu-1", "dlas-gpu-2",
             "dlas-gpu-4", "dlas-gpu-8", "dlas-gpu-10", "dlas-gpu-100", "dlas-gpu-1000", "gittins")
SCHEMES = ("count", "yarn", "random")
SPEC_FIELDS = ("num_switch", "num_node_p_switch", "num_gpu_p_node", "num_cpu_p_node", "mem_p_node")
NEEDS_DRIVER = {"gittins"}

# Run only for `gittins` (see the module docstring): the simulator imported as a module, with
# parse_job_dist() also storing its result where get_gittins_index() reads it.
DRIVER = '''\
import sys
simdir, args = sys.argv[1], sys.argv[2:]
sys.path.insert(0, simdir)
sys.argv = ["run_sim.py"] + args
import run_sim
_parse_job_dist = run_sim.parse_job_dist
def parse_job_dist():
    data = _parse_job_dist()
    run_sim.JOBS.job_dist_data = data
    return data
run_sim.parse_job_dist = parse_job_dist
run_sim.main()
'''


class Fail(Exception):
    """A one-line error for the user."""


def sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


# -- the reference's source ----------------------------------------------------------------------
def export_source(path: Path) -> tuple[Path, str]:
    """The simulator folder in the cache, and the commit it came from."""
    if not path.exists():
        raise Fail(f"no Tiresias checkout or git dir at {path}")
    git_dir = None
    if (path / "HEAD").is_file() and (path / "objects").is_dir():
        git_dir = path
    elif (path / ".git").exists():
        git_dir = path / ".git"
    if git_dir is not None:
        r = sh(["git", "--git-dir", str(git_dir), "rev-parse", "HEAD^{commit}"])
        if r.returncode:
            raise Fail(f"{git_dir} is not a readable git dir: {r.stderr.strip().splitlines()[-1:]}")
        commit = r.stdout.strip()
        dest = CACHE / "src" / commit
        if (dest / ".complete").exists():
            return dest / "simulator", commit
        tmp = Path(tempfile.mkdtemp(prefix="src.", dir=CACHE))
        arch = subprocess.Popen(["git", "--git-dir", str(git_dir), "archive", commit, "simulator"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        tar = subprocess.run(["tar", "-x", "-C", str(tmp)], stdin=arch.stdout, capture_output=True)
        arch.stdout.close()
        err = arch.stderr.read().decode(errors="replace").strip()
        if arch.wait() or tar.returncode:
            shutil.rmtree(tmp, ignore_errors=True)
            raise Fail(f"git archive of simulator/ failed: {err or tar.stderr.decode().strip()}")
    else:
        sim = path / "simulator" if (path / "simulator" / "run_sim.py").is_file() else path
        if not (sim / "run_sim.py").is_file():
            raise Fail(f"{path} has no simulator/run_sim.py (want a Tiresias checkout or git dir)")
        commit = "unknown (copied from a checkout without git)"
        dest = CACHE / "src" / ("copy-" + re.sub(r"[^A-Za-z0-9]+", "_", str(sim.resolve())))
        tmp = Path(tempfile.mkdtemp(prefix="src.", dir=CACHE))
        shutil.copytree(sim, tmp / "simulator", ignore=shutil.ignore_patterns("*.pyc"))
    for f in ("run_sim.py", "jobs.py", "cluster.py", "yarn-gput1000.csv"):
        if not (tmp / "simulator" / f).is_file():
            shutil.rmtree(tmp, ignore_errors=True)
            raise Fail(f"the export lacks simulator/{f}")
    (tmp / ".commit").write_text(commit + "\n")
    (tmp / ".complete").write_text("")
    shutil.rmtree(dest, ignore_errors=True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp.rename(dest)
    return dest / "simulator", commit


# -- the interpreter -----------------------------------------------------------------------------
def is_py27(exe: str) -> bool:
    try:
        r = sh([exe, "-c", "import sys; sys.stdout.write('%d.%d' % sys.version_info[:2])"], timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0 and r.stdout.strip() == "2.7"


def find_python(given: str | None) -> str:
    if given:
        if not is_py27(given):
            raise Fail(f"--python {given} is not a working Python 2.7")
        return given
    cands = [os.environ.get("TIRESIAS_PYTHON", ""), shutil.which("python2.7") or "",
             *sorted(glob.glob(str(Path.home() / ".pyenv" / "versions" / "2.7*" / "bin" / "python2.7")),
                     reverse=True)]
    for c in cands:
        if c and is_py27(c):
            return c
    raise Fail("no Python 2.7 found (Tiresias' simulator needs it): install one, e.g. "
               "`pyenv install 2.7.18`, and pass --python or set TIRESIAS_PYTHON")


def py2lib(python: str) -> Path:
    """numpy for the simulator's `import numpy`, installed once into the cache folder."""
    lib = CACHE / "py2lib"
    mark = lib / ".installed"
    if mark.is_file() and mark.read_text().strip() == NUMPY_REQ:
        return lib
    shutil.rmtree(lib, ignore_errors=True)
    r = sh([python, "-m", "pip", "install", "--disable-pip-version-check", "-q", "--no-cache-dir",
            "--target", str(lib), NUMPY_REQ])
    if r.returncode:
        last = [ln for ln in r.stderr.splitlines() if ln.strip() and "DEPRECATION" not in ln][-1:]
        raise Fail(f"cannot install {NUMPY_REQ} for {python}: {' '.join(last) or 'pip failed'}")
    mark.write_text(NUMPY_REQ + "\n")
    return lib


# -- inputs --------------------------------------------------------------------------------------
def resolve_file(name: str, simdir: Path, what: str) -> Path:
    p = Path(name).expanduser()
    if p.is_file():
        return p.resolve()
    if (simdir / name).is_file():
        return (simdir / name).resolve()
    raise Fail(f"no {what} file {name} (neither a path nor a file in Tiresias' simulator/)")


def read_trace(path: Path) -> list[dict]:
    """Check the trace as run_sim.py will read it (jobs.py:177-185: digit strings become ints)."""
    if path.suffix not in (".csv", ".txt"):
        raise Fail(f"trace {path.name}: Tiresias reads only *.csv (or space-separated *.txt)")
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f, delimiter="," if path.suffix == ".csv" else " "))
    if not rows:
        raise Fail(f"trace {path} has no jobs")
    need = ("job_id", "num_gpu", "submit_time", "duration")
    missing = [c for c in need if c not in rows[0]]
    if missing:
        raise Fail(f"trace {path} lacks column(s) {', '.join(missing)} (Tiresias needs {', '.join(need)})")
    for i, r in enumerate(rows, start=2):
        for c in ("num_gpu", "submit_time"):
            if not (r[c] or "").strip().isdigit():
                raise Fail(f"trace {path} line {i}: {c} '{r[c]}' is not a whole number "
                           "(run_sim.py would keep it as a string)")
        if int(r["num_gpu"]) < 1:
            raise Fail(f"trace {path} line {i}: num_gpu must be at least 1")
        try:
            if float(r["duration"]) < 0:
                raise ValueError
        except ValueError:
            raise Fail(f"trace {path} line {i}: duration '{r['duration']}' is not a number >= 0") from None
    return rows


def resolve_spec(spec: str, simdir: Path) -> tuple[Path, tuple[int, int, int]]:
    m = re.fullmatch(r"(\d+)x(\d+)x(\d+)", spec)
    if m:
        s, n, g = (int(x) for x in m.groups())
        if min(s, n, g) < 1:
            raise Fail(f"--cluster-spec {spec}: every count must be at least 1")
        path = CACHE / "specs" / f"s{s}n{n}g{g}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(",".join(SPEC_FIELDS) + f"\n{s},{n},{g},128,256\n")
        return path, (s, n, g)
    path = resolve_file(spec, simdir, "cluster spec")
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    if len(rows) != 1 or any(k not in rows[0] for k in SPEC_FIELDS):
        raise Fail(f"cluster spec {path} must have one row with {','.join(SPEC_FIELDS)}")
    try:
        dims = tuple(int(rows[0][k]) for k in SPEC_FIELDS[:3])
    except ValueError:
        raise Fail(f"cluster spec {path}: counts must be whole numbers") from None
    if min(dims) < 1:
        raise Fail(f"cluster spec {path}: every count must be at least 1")
    return path, dims  # type: ignore[return-value]


# -- running and reading back --------------------------------------------------------------------
def run(a: argparse.Namespace) -> dict:
    CACHE.mkdir(parents=True, exist_ok=True)
    simdir, commit = export_source(Path(a.tiresias).expanduser().resolve())
    python = find_python(a.python)
    lib = py2lib(python)
    trace = resolve_file(a.trace, simdir, "trace")
    rows = read_trace(trace)
    spec, (s, n, g) = resolve_spec(a.cluster_spec, simdir)
    label = f"{s}x{n}x{g}"
    # the authors' own traces are bundled in Quanta as tiresias_<name> (quanta/data/traces)
    stem = f"tiresias_{trace.stem}" if trace.parent == simdir.resolve() else trace.stem
    workload = a.workload or f"{stem}_{label}"
    policy = f"{a.schedule}_{a.scheme}"
    rundir = CACHE / "runs" / f"{workload}__{policy}"
    shutil.rmtree(rundir, ignore_errors=True)
    rundir.mkdir(parents=True)
    sim_args = [f"--cluster_spec={spec}", "--print", f"--scheme={a.scheme}", f"--trace_file={trace}",
                f"--schedule={a.schedule}", f"--log_path={rundir / 'log'}"]
    if a.schedule in NEEDS_DRIVER:
        driver = CACHE / "gittins_driver.py"
        driver.write_text(DRIVER)
        cmd = [python, str(driver), str(simdir)] + sim_args
    else:
        cmd = [python, "run_sim.py"] + sim_args
    env = dict(os.environ, PYTHONPATH=str(lib), PYTHONDONTWRITEBYTECODE="1", PYTHONHASHSEED="0",
               OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    t0 = time.perf_counter()
    with (rundir / "stdout.log").open("w") as out:
        rc = subprocess.run(cmd, cwd=simdir, env=env, stdout=out, stderr=subprocess.STDOUT).returncode
    wall = time.perf_counter() - t0
    log_text = (rundir / "stdout.log").read_text(errors="replace")
    with (rundir / "stdout.log").open("rb") as src, gzip.open(rundir / "stdout.log.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    (rundir / "stdout.log").unlink()
    if rc != 0:
        tail = [ln for ln in log_text.splitlines() if ln.strip()][-1:]
        raise Fail(f"Tiresias' simulator failed (exit {rc}): {' '.join(tail)} (log: {rundir}/stdout.log.gz)")
    job_csv = rundir / "log" / "job.csv"
    if not job_csv.is_file():
        raise Fail(f"Tiresias' simulator wrote no job.csv (log: {rundir}/stdout.log.gz)")

    # the trace, in the simulator's order (stable sort by submit_time, jobs.py:339-349)
    order = sorted(range(len(rows)), key=lambda i: int(rows[i]["submit_time"]))
    model = {}
    for i in order:
        model.setdefault(rows[i]["job_id"].strip(), rows[i].get("model_name") or "")
    with job_csv.open(newline="") as f:
        done = list(csv.DictReader(f))
    seen: dict[str, int] = {}
    jobs, preempt, resume, promote = [], 0, 0, 0
    for r in done:
        jid = r["job_id"].strip()
        k = seen.get(jid, 0)
        seen[jid] = k + 1
        submit, start, end = float(r["submit_time"]), float(r["start_time"]), float(r["end_time"])
        jobs.append(JobResult(jid if k == 0 else f"{jid}#{k + 1}", jid, model.get(jid, ""), int(r["num_gpu"]),
                              submit, start, end, float(r["JCT"])))
        preempt += int(r.get("preempt") or 0)
        resume += int(r.get("resume") or 0)
        promote += int(r.get("promote") or 0)
    notes = [f"Tiresias run_sim.py --schedule={a.schedule} --scheme={a.scheme}, cluster spec "
             f"{spec.name} = {s} switch(es) x {n} nodes x {g} GPUs ({s * n * g} GPUs)",
             f"preemptions {preempt}, resumptions {resume if a.scheme == 'count' else 'n/a (not logged)'}, "
             f"promotions {promote} (sums of job.csv's columns)",
             "times are whole seconds (the simulator keeps int times); JCT = int(end - submit) (log.py:345)"]
    if a.schedule in NEEDS_DRIVER:
        notes.append("run through a driver that only makes parse_job_dist() also set JOBS.job_dist_data "
                     "(run_sim.py:2075 keeps it in a local; get_gittins_index reads JOBS.job_dist_data, "
                     "run_sim.py:1245): unchanged, the simulator dies at run_sim.py:1246")
    missing = len(rows) - len(done)
    if missing:
        ids = sorted(set(r["job_id"].strip() for r in rows) - set(seen),
                     key=lambda x: (0, int(x), "") if x.isdigit() else (1, 0, x))
        notes.append(f"{missing} job(s) never finished (the simulator stops when nothing runs or "
                     f"arrives: 'This cluster is not large enough to run the job', run_sim.py:975-977): "
                     f"{', '.join(ids[:20])}{' ...' if len(ids) > 20 else ''}")
    us = ["python", "bench/anchors/tiresias.py", "--tiresias", "<Tiresias checkout or git dir>",
          "--trace", a.trace, "--schedule", a.schedule, "--scheme", a.scheme,
          "--cluster-spec", a.cluster_spec] + (["--workload", a.workload] if a.workload else [])
    ref_cmd = ["python2.7", "gittins_driver.py <simulator dir>" if a.schedule in NEEDS_DRIVER
               else "run_sim.py"] + [x.replace(str(rundir / "log"), "<log dir>")
                                     .replace(str(trace), trace.name).replace(str(spec), spec.name)
                                     for x in sim_args]
    run_summary = RunSummary(system="tiresias", workload=workload, policy=policy,
                             cluster=f"{label} ({s * n * g} GPUs; switches x nodes x GPUs)",
                             reference_repo=REPO, reference_commit=commit,
                             command=(shlex.join(us) + "  # runs, in Tiresias' simulator/: "
                                      + " ".join(ref_cmd)),
                             wall_s=wall, notes=notes)
    out = Path(a.out) if a.out else RECORDED / "tiresias"
    csv_path, json_path = write_run(out, run_summary, jobs)
    summary = json.loads(json_path.read_text())
    if commit != EXPECTED_COMMIT and not commit.startswith("unknown"):
        print(f"note: Tiresias at {commit}, not {EXPECTED_COMMIT}", file=sys.stderr)
    print(f"# outputs: {csv_path} (+ .json); the simulator's own logs: {rundir}")
    return {"workload": workload, "policy": policy, "jobs": summary["jobs"], "unfinished": missing,
            "avg_jct_s": None if summary["avg_jct_s"] is None else round(summary["avg_jct_s"], 3),
            "makespan_s": summary["makespan_s"], "preemptions": preempt, "wall_s": round(wall, 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiresias", required=True, help="Tiresias checkout or bare git dir")
    ap.add_argument("--trace", required=True,
                    help="trace CSV (a path, or a file in simulator/, e.g. 60_job.csv)")
    ap.add_argument("--schedule", required=True,
                    help="run_sim.py --schedule: dlas-gpu, gittins, dlas-gpu-gittins, ...")
    ap.add_argument("--scheme", default="count",
                    help="placement scheme: count, yarn or random (default count)")
    ap.add_argument("--cluster-spec", default="cluster_spec.csv",
                    help="spec CSV, a bundled spec name, or SxNxG (default: the bundled cluster_spec.csv)")
    ap.add_argument("--out", default=None,
                    help="results folder (default quanta/data/reference/tiresias)")
    ap.add_argument("--workload", default=None,
                    help="workload name in the outputs (default <trace stem>_<SxNxG>)")
    ap.add_argument("--python", default=None, help="a Python 2.7 interpreter")
    a = ap.parse_args(argv)
    me = "tiresias.py"
    try:
        if a.schedule not in SCHEDULES:
            raise Fail(f"unknown schedule '{a.schedule}' (one of: {', '.join(SCHEDULES)})")
        if a.scheme not in SCHEMES:
            raise Fail(f"unknown scheme '{a.scheme}' (one of: {', '.join(SCHEMES)})")
        if a.workload is not None and not re.fullmatch(r"[A-Za-z0-9._-]+", a.workload):
            raise Fail("--workload may use only letters, digits, '.', '_' and '-'")
        print(json.dumps(run(a)))
        return 0
    except Fail as e:
        print(f"{me}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
