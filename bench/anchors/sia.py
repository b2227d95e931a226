#!/usr/bin/env python3
"""Run Sia's own simulator (siasosp23/artifacts, ``sia-simulator/``, unchanged) on a Sia-format workload
and record its per-job results in the common format (``bench/anchors/common.py``).

Usage::

    python bench/anchors/sia.py --sia PATH --workload W --policy sia|pollux|gavel
                                [--cluster aws:6,rtx:3,dgx-ext:2] [--max-jobs N] [--seed 0]
                                [--solver cbc|highs] [--out DIR] [--reuse]

``PATH`` is a checkout of siasosp23/artifacts (or its ``sia-simulator/`` folder) or the bare git dir
that ``fetch github:siasosp23/artifacts`` gives. ``W`` is a workload CSV in Sia's format
(``name,time,application,num_replicas,batch_size``), or a name: ``sia_philly_workload-1`` (bundled in
``quanta/data/traces/`` if there, else read from the reference's own ``workloads/philly/workload-1.csv``)
or ``philly/workload-1`` (the reference's folder). ``--max-jobs N`` keeps the first N jobs (a short
slice for regression tests; the run is then named ``<workload>_first<N>``).

What is run (the arguments of the reference's own ``sia-simulator/run_experiment.sh``, lines 4, 9 and
14, which its README points to for the paper's experiments):

- ``sia``:    ``multi_simulator.py W --policy=sia --policy_p_val=-0.5 --mip_lambda_a=0.01
  --mip_lambda_n=1.1 --interval=60 --project_throughput --share_max_replicas --output=LOG``
- ``gavel``:  ``multi_simulator.py W --policy=gavel --interval=360 --output=LOG``
- ``pollux``: ``multi_simulator_unaware.py W --policy=pollux --interval=60 --policy_p_val=-1 --output=LOG``

on Sia's default cluster (``simulator_config.py`` line 11: 6 ``aws`` nodes x 4 T4, 3 ``rtx`` x 8 RTX
2080Ti, 2 ``dgx-ext`` x 8 A100 = 64 GPUs). The simulator's source is not edited. It is started through
a few lines of driver (``python -c``) that, before running the script with ``runpy`` exactly as
``python SCRIPT ARGS`` would: (1) seed Python's and NumPy's global RNGs with ``--seed`` (Pollux's
genetic algorithm, ``pollux_unaware.py`` lines 347-398, draws from ``np.random`` and the reference never
seeds it, so unseeded runs differ from one another); (2) only when ``--cluster`` differs from the
default, replace the node counts in ``simulator_config.cluster_nnodes`` (the module dict that
``multi_simulator*.py`` read; the reference offers no command-line option for this but
``--cluster_scale``); (3) only with ``--solver highs``, hand the integer programmes that ``sia.py``
line 1034 gives CBC to HiGHS instead (cvxpy's ``SCIPY`` interface, ``mip_rel_gap`` = CBC's
``allowablePercentageGap`` / 100): an experiment on how much the solver's choice among tied optima
moves the results, Quanta solving with HiGHS (the run is then named ``..._highs``). ``PYTHONHASHSEED=0`` and ``OMP_NUM_THREADS=1`` are set for the child. Nothing else.

First use exports the simulator into ``~/.cache/anchors/sia/src/<commit>/`` (from a bare mirror with
``git archive``, leaving out blobs the mirror lacks: ``traces/helios_saturn.csv``, which the simulator
does not read) and builds a venv in ``~/.cache/anchors/sia/venv`` from ``sia_requirements.txt`` beside
this script (``--no-deps``, pinned). Each run keeps, in ``~/.cache/anchors/sia/runs/<run>/``: the workload
CSV it ran, the simulator's own per-round log (``sim.log.gz``, the ``--output`` JSON lines), its stdout
(``stdout.txt.gz``) and ``meta.json`` (command, commit, wall time, exit code).

Results (``--out``, default ``quanta/data/reference/sia/``): ``<run>__<policy>.csv/.json`` in the common
format (``<run>__<policy>__s<seed>`` for a seed other than 0, ``..._highs`` with ``--solver highs``).
From the simulator's own last log record (``cluster.py`` ``step_log``): ``submit_s`` =
``submission_time`` (the workload's ``time``), ``end_s`` = ``completion_time``, ``jct_s`` = end - submit
(= ``Cluster.get_jcts``, ``cluster.py`` lines 519-525; the per-job JCTs the simulator prints and puts in
``summary.json``). ``start_s``: the simulator never sets ``Job.start_time`` (``job.py`` line 62; it is
``null`` in every record), so it is read from the per-round log: the timestamp of the first record in
which the job's ``placement`` is non-empty, i.e. the end of the first round whose allocation gave it
GPUs (it then first pays its restart delay). ``num_gpus`` = the workload's ``num_replicas`` (replicas at
submission). Makespan, as Sia's ``utils/print_run_stats.py`` lines 86-98 define it: max(submit + JCT) -
min(submit) over the workload's jobs, which is what ``common.write_run`` computes. The notes add the
per-application average JCT, Sia's p99 (``print_run_stats.py`` lines 110-116: ``sorted(jcts)[int(0.99 * n)]``)
and the mean number of restarts.

The reference is a tool for comparison, not a dependency of Quanta. Run one at a time (the machine is
small; a 160-job Sia run takes tens of minutes).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import RECORDED, REPO_ROOT, JobResult, RunSummary, write_run  # noqa: E402

ME = "sia.py"
REFERENCE_REPO = "https://github.com/siasosp23/artifacts"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "anchors" / "sia"
REQUIREMENTS = HERE / "sia_requirements.txt"
BUNDLED_TRACES = REPO_ROOT / "quanta" / "data" / "traces"
SIM_DIR = "sia-simulator"

# simulator_config.py line 11 (cluster_nnodes, "default for experiments") and line 9 (GPUs per node).
DEFAULT_CLUSTER = {"aws": 6, "rtx": 3, "dgx-ext": 2}
GPUS_PER_NODE = {"aws": 4, "azure": 8, "dgx": 8, "dgx-ext": 8, "quad": 4, "rtx": 8}
APPLICATIONS = {"bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"}
COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")

# run_experiment.sh line 4 (Sia), line 9 (Gavel), line 14 (Pollux).
POLICIES = {
    "sia": ("multi_simulator.py", ["--policy=sia", "--policy_p_val=-0.5", "--mip_lambda_a=0.01",
                                   "--mip_lambda_n=1.1", "--interval=60", "--project_throughput",
                                   "--share_max_replicas"]),
    "gavel": ("multi_simulator.py", ["--policy=gavel", "--interval=360"]),
    "pollux": ("multi_simulator_unaware.py", ["--policy=pollux", "--interval=60", "--policy_p_val=-1"]),
}

# Runs SCRIPT ARGS as `python SCRIPT ARGS` would, after seeding the global RNGs and (if given) setting
# the simulated cluster's node counts in the simulator_config module. Edits no file.
DRIVER = """\
import json, random, runpy, sys
import numpy
cluster, seed, solver, script = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
if cluster is not None:
    import simulator_config
    simulator_config.cluster_nnodes.clear()
    simulator_config.cluster_nnodes.update(cluster)
if solver == "highs":
    import cvxpy
    _solve = cvxpy.Problem.solve
    def solve(self, *args, **kw):
        if kw.get("solver") == cvxpy.CBC:
            gap = kw.pop("allowablePercentageGap")
            kw.pop("numberThreads", None)
            kw.update(solver=cvxpy.SCIPY, scipy_options={"mip_rel_gap": gap / 100})
        return _solve(self, *args, **kw)
    cvxpy.Problem.solve = solve
random.seed(seed)
numpy.random.seed(seed)
sys.argv = [script] + sys.argv[5:]
runpy.run_path(script, run_name="__main__")
"""


class InputError(Exception):
    pass


def die(msg: str, rc: int = 2) -> None:
    print(f"{ME}: error: {msg}", file=sys.stderr)
    sys.exit(rc)


# ---------------------------------------------------------------------------------------------------
# reference source and venv

def _git(args: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], capture_output=True, text=True, **kw)


def locate_source(path: Path) -> tuple[str, Path | None, str]:
    """(kind, folder, commit): kind 'dir' (a checkout; folder = its sia-simulator) or 'bare'."""
    if not path.exists():
        raise InputError(f"--sia {path}: no such file or folder")
    for cand in (path / SIM_DIR, path):
        if (cand / "multi_simulator.py").is_file() and (cand / "applications.py").is_file():
            r = _git(["-C", str(cand), "rev-parse", "HEAD"])
            commit = r.stdout.strip() if r.returncode == 0 else "unknown (not a git checkout)"
            return "dir", cand, commit
    r = _git(["--git-dir", str(path), "rev-parse", "--verify", "-q", "HEAD^{commit}"])
    if r.returncode == 0:
        commit = r.stdout.strip()
        ls = _git(["--git-dir", str(path), "ls-tree", "--name-only", "HEAD", f"{SIM_DIR}/multi_simulator.py"])
        if not ls.stdout.strip():
            raise InputError(f"--sia {path}: a git dir, but its HEAD has no {SIM_DIR}/multi_simulator.py "
                             "(is it siasosp23/artifacts?)")
        return "bare", None, commit
    raise InputError(f"--sia {path}: neither a checkout of siasosp23/artifacts (with {SIM_DIR}/) nor its bare git dir")


def export_source(path: Path) -> tuple[Path, str, list[str]]:
    """Export the simulator into the cache; return (its folder, commit, notes)."""
    kind, folder, commit = locate_source(path)
    key = commit[:12] if re.fullmatch(r"[0-9a-f]{40}", commit) else "local-" + hashlib.sha256(
        str(path.resolve()).encode()).hexdigest()[:12]
    dest = CACHE / "src" / key
    notes: list[str] = []
    done = dest / ".exported"
    if done.is_file():
        return dest / SIM_DIR, commit, json.loads(done.read_text())
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    if kind == "dir":
        shutil.copytree(folder, dest / SIM_DIR, ignore=shutil.ignore_patterns("__pycache__", ".git"))
        notes.append(f"simulator copied from the checkout {folder}")
    else:
        tree = _git(["--git-dir", str(path), "ls-tree", "-r", "HEAD", SIM_DIR])
        if tree.returncode != 0:
            die(f"cannot list {path}'s HEAD: {tree.stderr.strip()}", 1)
        rows = [ln.split("\t", 1) for ln in tree.stdout.splitlines() if ln]
        shas = "\n".join(r[0].split()[2] for r in rows) + "\n"
        chk = _git(["--git-dir", str(path), "cat-file", "--batch-check"], input=shas)
        missing = [r[1] for r, c in zip(rows, chk.stdout.splitlines()) if c.endswith(" missing")]
        ex = [f":(exclude,literal){m}" for m in missing]
        with tempfile.TemporaryFile() as tar:
            arch = subprocess.run(["git", "--git-dir", str(path), "archive", "HEAD", SIM_DIR, *ex],
                                  stdout=tar, stderr=subprocess.PIPE, text=False)
            if arch.returncode != 0:
                die(f"git archive failed: {arch.stderr.decode(errors='replace').strip()}", 1)
            tar.seek(0)
            subprocess.run(["tar", "-x", "-C", str(dest)], stdin=tar, check=True)
        if missing:
            notes.append("blobs absent from the mirror, left out of the export (not read by the simulator): "
                         + ", ".join(missing))
    done.write_text(json.dumps(notes))
    return dest / SIM_DIR, commit, notes


def ensure_venv() -> Path:
    venv = CACHE / "venv"
    py = venv / "bin" / "python"
    want = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    stamp = venv / ".requirements.sha256"
    if py.is_file() and stamp.is_file() and stamp.read_text().strip() == want:
        return py
    if venv.exists():
        shutil.rmtree(venv)
    print(f"{ME}: building the venv {venv} from {REQUIREMENTS.name} ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    lines = [ln.strip() for ln in REQUIREMENTS.read_text().splitlines()]
    pkgs = [ln for ln in lines if ln and not ln.startswith("#")]
    first = [p for p in pkgs if not p.startswith("pymoo")]
    late = [p for p in pkgs if p.startswith("pymoo")]   # sdist: built against the numpy installed first
    env = dict(os.environ, OMP_NUM_THREADS="1")
    pip = [str(py), "-m", "pip", "install", "-q", "--no-deps"]
    subprocess.run(pip + first, check=True, env=env)
    if late:   # built here without isolation: the venv needs a setuptools with bdist_wheel
        subprocess.run(pip + ["setuptools>=70.1", "packaging", "wheel"], check=True, env=env)
        subprocess.run(pip + ["--no-build-isolation"] + late, check=True, env=env)
    stamp.write_text(want + "\n")
    return py


# ---------------------------------------------------------------------------------------------------
# inputs

def parse_cluster(spec: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in spec.split(","):
        m = re.fullmatch(r"\s*([a-z-]+)\s*:\s*(\d+)\s*", part)
        if not m:
            raise InputError(f"--cluster {spec!r}: want TYPE:NODES[,TYPE:NODES...], e.g. aws:6,rtx:3,dgx-ext:2")
        name, n = m.group(1), int(m.group(2))
        if name not in GPUS_PER_NODE:
            raise InputError(f"--cluster: unknown GPU type {name!r} (Sia's simulator knows {', '.join(GPUS_PER_NODE)})")
        if n < 1 or name in out:
            raise InputError(f"--cluster: {name} given twice or with 0 nodes")
        out[name] = n
    return out


def resolve_workload(spec: str, sim: Path) -> tuple[Path, str]:
    """(csv path, run label)."""
    p = Path(spec)
    if p.suffix == ".csv" and p.is_file():
        return p.resolve(), p.stem
    m = re.fullmatch(r"sia_([a-z]+)_(workload-\d+)", spec) or re.fullmatch(r"([a-z]+)/(workload-\d+)", spec)
    if m:
        label = f"sia_{m.group(1)}_{m.group(2)}"
        bundled = BUNDLED_TRACES / f"{label}.csv"
        if bundled.is_file():
            return bundled, label
        ref = sim / "workloads" / m.group(1) / f"{m.group(2)}.csv"
        if ref.is_file():
            return ref, label
        raise InputError(f"--workload {spec}: neither {bundled} nor the reference's {ref.relative_to(sim)} exists")
    raise InputError(f"--workload {spec}: not a .csv file nor a name like sia_philly_workload-1 or philly/workload-1")


def read_workload(path: Path, max_jobs: int | None) -> list[dict]:
    with path.open(newline="") as f:
        rd = csv.DictReader(f)
        cols = tuple(rd.fieldnames or ())
        if not set(COLUMNS) <= set(cols):
            raise InputError(f"{path}: not a Sia workload (columns {', '.join(cols)}; need {', '.join(COLUMNS)})")
        rows = list(rd)
    if not rows:
        raise InputError(f"{path}: no jobs")
    names = set()
    for i, r in enumerate(rows, 2):
        if r["application"] not in APPLICATIONS:
            raise InputError(f"{path}:{i}: application {r['application']!r} unknown to Sia's simulator "
                             f"({', '.join(sorted(APPLICATIONS))})")
        try:
            t, n, b = float(r["time"]), int(r["num_replicas"]), int(r["batch_size"])
        except ValueError:
            raise InputError(f"{path}:{i}: time, num_replicas, batch_size must be numbers") from None
        if t < 0 or n < 1 or b < 1:
            raise InputError(f"{path}:{i}: negative time or non-positive replicas/batch size")
        if r["name"] in names:
            raise InputError(f"{path}:{i}: duplicate job name {r['name']!r}")
        names.add(r["name"])
    if max_jobs is not None:
        rows = rows[:max_jobs]
    return rows


# ---------------------------------------------------------------------------------------------------
# run and convert

def run_reference(py: Path, sim: Path, wl_csv: Path, policy: str, cluster: dict[str, int], seed: int,
                  run_dir: Path, reuse: bool, solver: str = "cbc") -> dict:
    script, args = POLICIES[policy]
    log = run_dir / "sim.log"
    cl = None if cluster == DEFAULT_CLUSTER else cluster
    sim_cmd = [script, str(wl_csv), *args, f"--output={log}"]
    argv = [str(py), "-c", DRIVER, json.dumps(cl), str(seed), solver, *sim_cmd]
    meta_path = run_dir / "meta.json"
    if reuse and meta_path.is_file():
        meta = json.loads(meta_path.read_text())
        if meta.get("simulator_argv") == sim_cmd and meta.get("rc") == 0 and meta.get("cluster") == cluster \
                and meta.get("seed") == seed and meta.get("solver", "cbc") == solver and (run_dir / "sim.log.gz").is_file():
            print(f"{ME}: --reuse: converting the finished run in {run_dir}", file=sys.stderr)
            return meta
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               PYTHONHASHSEED="0")
    env.pop("PYTHONPATH", None)
    out_path = run_dir / "stdout.txt"
    print(f"{ME}: running {policy} on {wl_csv.name} in {sim} (log in {run_dir}) ...", file=sys.stderr)
    t0 = time.time()
    with out_path.open("wb") as out:
        rc = subprocess.run(argv, cwd=sim, stdout=out, stderr=subprocess.STDOUT, env=env).returncode
    wall = time.time() - t0
    for f in (out_path, log):
        if f.is_file():
            with f.open("rb") as src, gzip.open(str(f) + ".gz", "wb") as dst:
                shutil.copyfileobj(src, dst)
            f.unlink()
    meta = {"simulator_argv": sim_cmd, "cwd": str(sim), "cluster": cluster, "seed": seed, "solver": solver,
            "rc": rc,
            "wall_s": round(wall, 2), "python": str(py),
            "env": {"OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0"},
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    meta_path.write_text(json.dumps(meta, indent=1) + "\n")
    if rc != 0:
        tail = gzip.open(str(out_path) + ".gz", "rt", errors="replace").read()[-2000:]
        print(tail, file=sys.stderr)
        die(f"the simulator exited with {rc} after {wall:.0f} s (output in {out_path}.gz)", 1)
    return meta


def read_log(log_gz: Path) -> tuple[dict, dict, float, int]:
    """(last record's jobs by name, first time each had a placement, last timestamp, rounds)."""
    first_placed: dict[str, float] = {}
    last = None
    rounds = 0
    with gzip.open(log_gz, "rt") as f:
        for line in f:
            rec = json.loads(line)
            rounds += 1
            t = rec["timestamp"]
            for j in rec["submitted_jobs"]:
                if j["placement"] and j["name"] not in first_placed:
                    first_placed[j["name"]] = float(t)
            last = rec
    if last is None:
        raise InputError(f"{log_gz}: empty log")
    return {j["name"]: j for j in last["submitted_jobs"]}, first_placed, float(last["timestamp"]), rounds


def convert(rows: list[dict], run_dir: Path) -> tuple[list[JobResult], list[str]]:
    jobs_last, first_placed, t_last, rounds = read_log(run_dir / "sim.log.gz")
    out, notes, missing = [], [], []
    for r in rows:
        j = jobs_last.get(r["name"])
        if j is None or j["completion_time"] is None:
            missing.append(r["name"])
            continue
        sub, end = float(j["submission_time"]), float(j["completion_time"])
        if sub != float(r["time"]):
            raise InputError(f"{r['name']}: submission_time {sub} in the log differs from the workload's {r['time']}")
        out.append(JobResult(job_id=r["name"], name=r["name"], application=r["application"],
                             num_gpus=int(r["num_replicas"]), submit_s=sub,
                             start_s=first_placed.get(r["name"]), end_s=end, jct_s=end - sub))
    if missing:
        notes.append(f"{len(missing)} jobs did not complete in the log: {', '.join(missing[:10])}")
    jcts = sorted(j.jct_s for j in out)
    per_app: dict[str, list[float]] = {}
    for j in out:
        per_app.setdefault(j.application, []).append(j.jct_s)
    restarts = [jobs_last[j.job_id]["num_restarts"] or 0 for j in out]
    notes += [
        "per-application average JCT (s): " + json.dumps(
            {a: round(sum(v) / len(v), 1) for a, v in sorted(per_app.items())}),
        "per-application job count: " + json.dumps({a: len(v) for a, v in sorted(per_app.items())}),
        f"p99 JCT (s), Sia's definition (utils/print_run_stats.py:110-116, sorted(jcts)[int(0.99*n)]): "
        f"{jcts[int(0.99 * len(jcts))] if jcts else None}",
        f"mean restarts per job (the log's num_restarts; the first start is not counted): "
        f"{sum(restarts) / len(restarts) if restarts else 0:.3f}",
        f"simulated rounds: {rounds}, last round ends at t={t_last:.0f} s",
        "start_s = end of the first round whose allocation gave the job GPUs (the log's first non-empty "
        "placement); Job.start_time is never set by the simulator",
    ]
    return out, notes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=ME, description=__doc__.split("\n\n")[0])
    ap.add_argument("--sia", required=True, help="checkout of siasosp23/artifacts (or its sia-simulator/), or its bare git dir")
    ap.add_argument("--workload", required=True, help="Sia-format CSV, or sia_<family>_workload-N, or <family>/workload-N")
    ap.add_argument("--policy", required=True, help="sia, pollux or gavel")
    ap.add_argument("--cluster", default="aws:6,rtx:3,dgx-ext:2", help="TYPE:NODES,... (default Sia's: aws:6,rtx:3,dgx-ext:2)")
    ap.add_argument("--max-jobs", type=int, default=None, help="keep only the first N jobs (a short slice)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the global RNGs (Pollux's GA; default 0)")
    ap.add_argument("--out", default=str(RECORDED / "sia"), help="results folder (default quanta/data/reference/sia)")
    ap.add_argument("--solver", default="cbc", choices=("cbc", "highs"),
                    help="the integer programmes' solver: cbc (the reference's, sia.py:1034) or highs "
                         "(HiGHS through cvxpy's SCIPY interface, same relative gap; Quanta's solver)")
    ap.add_argument("--reuse", action="store_true", help="if this exact run already finished in the cache, only convert it")
    a = ap.parse_args(argv)
    try:
        if a.policy not in POLICIES:
            raise InputError(f"--policy {a.policy!r}: choose sia, pollux or gavel")
        if a.max_jobs is not None and a.max_jobs < 1:
            raise InputError("--max-jobs must be at least 1")
        cluster = parse_cluster(a.cluster)
        sim, commit, src_notes = export_source(Path(a.sia).expanduser())
        wl_path, label = resolve_workload(a.workload, sim)
        rows = read_workload(wl_path, a.max_jobs)
        if a.max_jobs is not None:
            label += f"_first{a.max_jobs}"
        cl_label = "" if cluster == DEFAULT_CLUSTER else "__" + "-".join(f"{k}{v}" for k, v in cluster.items())
        run_name = f"{label}{cl_label}"
        run_dir = CACHE / "runs" / (f"{run_name}__{a.policy}" + ("" if a.seed == 0 else f"__s{a.seed}")
                                    + ("" if a.solver == "cbc" else f"__{a.solver}"))
        run_dir.mkdir(parents=True, exist_ok=True)
        wl_copy = run_dir / "workload.csv"
        with wl_copy.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()), lineterminator="\n")
            w.writeheader()
            w.writerows(rows)
        py = ensure_venv()
        meta = run_reference(py, sim, wl_copy, a.policy, cluster, a.seed, run_dir, a.reuse, a.solver)
        jobs, notes = convert(rows, run_dir)
    except InputError as e:
        die(str(e))
    script, args = POLICIES[a.policy]
    sim_cmd = " ".join([f"python {script} workload.csv", *args, "--output=sim.log"])
    bench_cmd = " ".join(["python bench/anchors/sia.py --sia PATH", f"--workload {a.workload}",
                          f"--policy {a.policy}"] + ([f"--cluster {a.cluster}"] if cluster != DEFAULT_CLUSTER else [])
                         + ([f"--max-jobs {a.max_jobs}"] if a.max_jobs else []) + ([f"--seed {a.seed}"] if a.seed else [])
                         + ([f"--solver {a.solver}"] if a.solver != "cbc" else []))
    notes = [f"simulator command (cwd sia-simulator/): {sim_cmd}",
             f"run through bench/anchors/sia.py's driver: global random/numpy RNGs seeded with {a.seed}, "
             "PYTHONHASHSEED=0, OMP_NUM_THREADS=1" + ("" if cluster == DEFAULT_CLUSTER else
                                                      f", simulator_config.cluster_nnodes set to {cluster}")
             + ("" if a.solver == "cbc" else ", CBC's integer programmes solved by HiGHS (cvxpy SCIPY, "
                "mip_rel_gap = the reference's allowablePercentageGap / 100)"),
             f"workload: {wl_path.name}" + (f", first {a.max_jobs} jobs" if a.max_jobs else "")] + src_notes + notes
    summary = RunSummary(system="sia", workload=run_name, policy=a.policy,
                         cluster=",".join(f"{k}:{v}x{GPUS_PER_NODE[k]}" for k, v in cluster.items()),
                         reference_repo=REFERENCE_REPO, reference_commit=commit, command=bench_cmd,
                         wall_s=meta["wall_s"], notes=notes)
    # another seed or solver than the recorded default's: its own files beside it
    suffix = ("" if a.seed == 0 else f"__s{a.seed}") + ("" if a.solver == "cbc" else f"__{a.solver}")
    csv_path, json_path = write_run(Path(a.out), summary, jobs, suffix)
    s = json.loads(json_path.read_text())
    print(json.dumps({"workload": run_name, "policy": a.policy, "jobs": s["jobs"],
                      "avg_jct_h": round(s["avg_jct_s"] / 3600, 4) if s["avg_jct_s"] else None,
                      "makespan_h": round(s["makespan_s"] / 3600, 4) if s["makespan_s"] else None,
                      "wall_s": s["wall_s"], "csv": str(csv_path)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
