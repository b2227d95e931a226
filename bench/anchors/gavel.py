"""Run Gavel's own simulator and trace generator (stanford-futuredata/gavel, unchanged) and record
their results in the common format (bench/anchors/common.py).

    python bench/anchors/gavel.py --gavel PATH run --trace T --policy P [--cluster 36:36:36]
                                  [--seed N] [--out DIR] [--name NAME]
    python bench/anchors/gavel.py --gavel PATH generate --rate R --jobs N --seed S [--multi-gpu]
                                  --out FILE

PATH is a Gavel checkout (a folder with scheduler/scheduler.py) or the bare git dir that
`fetch github:stanford-futuredata/gavel` gives; a bare dir's HEAD is exported once into
~/.cache/anchors/gavel/src-<commit> (files whose blobs the mirror lacks, none of them used by the
simulator, are left out and listed in .gavel_missing_from_mirror there). The first use builds a
venv in ~/.cache/anchors/gavel/venv from gavel_requirements.txt beside this script (PyPI, pinned);
it is rebuilt when that file changes. Neither Gavel nor its venv is a dependency of Quanta.

`run` runs Gavel's scripts/drivers/simulate_scheduler_with_trace.py as __main__ with
    -t TRACE -p POLICY -c CLUSTER --throughputs_file <gavel>/scheduler/simulation_throughputs.json
    --seed SEED --solver ECOS --time_per_iteration 360 --num_gpus_per_server 1:1:1
(Gavel's defaults and its sweeps' settings: run_sweep_continuous.py passes ECOS, 360 s rounds, one
GPU per server), and writes <out>/<name>__<policy>.{csv,json}: per job its Gavel id, the reader's
id (`gavel-<row>`, as quanta.workloads.readers.gavel names it), model, GPUs, arrival, start (the
simulated time of its first "[Micro-task scheduled]" line in Gavel's log), end (arrival + JCT)
and JCT (Gavel's `_job_completion_times`, the numbers behind its "Job N: ..." lines). Gavel's full
log goes to ~/.cache/anchors/gavel/runs/ (gzipped), never into the project.

`generate` runs Gavel's scripts/utils/generate_trace.py (its own code, not a re-implementation)
with --num_jobs N --lam 3600/R --seed S [--generate-multi-gpu-jobs] --throughputs_file <gavel's
simulation_throughputs.json>: R jobs per hour as Gavel's sweeps convert it
(run_sweep_continuous.py: lam = 3600.0 / throughput). Job durations are the generator's defaults
(uniform over 1, 2, 3, 4 h on a V100) unless --min-hours/--max-hours/--num-durations are given.

What is stubbed (nothing in Gavel's tree is edited): scheduler.py imports, at module level,
runtime.rpc.scheduler_server and scheduler_client, and runtime/__init__.py then imports all four
gRPC modules of Gavel's physical cluster (runtime.rpc.{scheduler_server, scheduler_client,
worker_server, worker_client}). They need grpc and protobuf stubs that only Gavel's `make`
generates, and the simulator never calls them (scheduler.py uses them only under
`if not self._simulate`). They are replaced, through sys.modules, by empty modules whose every
attribute access raises. The only hook is a wrapper around Scheduler.simulate that keeps a
reference to the scheduler (to read its results) and times the loop; it calls the original.

Experiments only (never a reference run; the notes say so): `run --scheduler-arg KEY=VALUE`
passes a keyword to Gavel's Scheduler constructor (e.g. minimum_time_between_allocation_resets=0,
enable_global_queue=True) to measure what one of Gavel's mechanisms is worth in its own world.

One-line errors (exit status 2) for bad input.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "gavel_requirements.txt"
REPO = "stanford-futuredata/gavel"
DRIVER = "scheduler/scripts/drivers/simulate_scheduler_with_trace.py"
GENERATOR = "scheduler/scripts/utils/generate_trace.py"
POLICIES = ("allox", "fifo", "fifo_perf", "fifo_packed", "finish_time_fairness",
            "finish_time_fairness_perf", "finish_time_fairness_packed", "gandiva", "isolated",
            "max_min_fairness", "max_min_fairness_perf", "max_min_fairness_packed",
            "max_min_fairness_water_filling", "max_min_fairness_water_filling_perf",
            "max_min_fairness_water_filling_packed", "max_sum_throughput_perf",
            "max_sum_throughput_normalized_by_cost_perf",
            "max_sum_throughput_normalized_by_cost_perf_SLOs",
            "max_sum_throughput_normalized_by_cost_packed_SLOs", "min_total_duration",
            "min_total_duration_perf", "min_total_duration_packed")   # utils.get_available_policies()
CVXOPT = "cvxopt==1.3.3"   # GLPK_MI, only for the water-filling policies


class Fail(Exception):
    """A one-line error for the user."""


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "anchors" / "gavel"


def _git(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], capture_output=True, text=True)


# -- the source tree ------------------------------------------------------------------------------
def resolve_source(path: str) -> tuple[Path, str]:
    """(Gavel's scheduler/ folder, commit) for a checkout or a bare git dir."""
    p = Path(path).expanduser()
    if not p.exists():
        raise Fail(f"--gavel {path}: no such file or folder")
    if (p / "scheduler" / "scheduler.py").is_file():
        r = _git(["-C", str(p), "rev-parse", "HEAD"])
        commit = r.stdout.strip() if r.returncode == 0 else "unknown (not a git checkout)"
        return (p / "scheduler").resolve(), commit
    r = _git(["--git-dir", str(p), "rev-parse", "--verify", "-q", "HEAD^{commit}"])
    if r.returncode != 0:
        raise Fail(f"--gavel {path}: neither a Gavel checkout (no scheduler/scheduler.py) nor a "
                   f"git dir with a HEAD commit")
    commit = r.stdout.strip()
    src = cache_dir() / f"src-{commit[:12]}"
    if not (src / ".gavel_commit").is_file():
        _export(p, commit, src)
    if not (src / "scheduler" / "scheduler.py").is_file():
        raise Fail(f"--gavel {path}: commit {commit[:12]} has no scheduler/scheduler.py (not Gavel?)")
    return src / "scheduler", commit


def _export(gitdir: Path, commit: str, dest: Path) -> None:
    """git archive of `commit` into dest, leaving out paths whose blobs the mirror lacks."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    tree = _git(["--git-dir", str(gitdir), "ls-tree", "-r", commit])
    if tree.returncode != 0:
        raise Fail(f"cannot list {commit[:12]} in {gitdir}: {tree.stderr.strip()[:200]}")
    entries = [ln.split("\t", 1) for ln in tree.stdout.splitlines() if "\t" in ln]
    objs = "\n".join(meta.split()[2] for meta, _ in entries) + "\n"
    chk = subprocess.run(["git", "--git-dir", str(gitdir), "cat-file", "--batch-check"],
                         input=objs, capture_output=True, text=True)
    missing = [name for (_, name), line in zip(entries, chk.stdout.splitlines())
               if line.endswith(" missing")]
    spec = ["."] + [f":(exclude,literal){m}" for m in missing]
    arch = subprocess.Popen(["git", "--git-dir", str(gitdir), "archive", commit, "--", *spec],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    untar = subprocess.run(["tar", "-x", "-C", str(tmp)], stdin=arch.stdout, capture_output=True)
    arch.stdout.close()
    err = arch.stderr.read().decode(errors="replace")
    if arch.wait() != 0 or untar.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise Fail(f"git archive of {commit[:12]} failed: {(err or untar.stderr.decode())[:200]}")
    (tmp / ".gavel_commit").write_text(commit + "\n")
    (tmp / ".gavel_missing_from_mirror").write_text("".join(m + "\n" for m in missing))
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)


# -- the venv -------------------------------------------------------------------------------------
def ensure_venv(need_cvxopt: bool = False) -> Path:
    venv = cache_dir() / "venv"
    py = venv / "bin" / "python"
    want = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    stamp = venv / ".req_sha"
    if not (py.is_file() and stamp.is_file() and stamp.read_text().strip() == want):
        print(f"gavel.py: building the venv in {venv} (once)", file=sys.stderr)
        shutil.rmtree(venv, ignore_errors=True)
        venv.parent.mkdir(parents=True, exist_ok=True)
        r = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True)
        if r.returncode != 0:
            raise Fail(f"cannot make a venv with {sys.executable}: {r.stderr.strip()[-200:]}")
        log = cache_dir() / "pip.log"
        with log.open("w") as f:
            r = subprocess.run([str(py), "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS)],
                               stdout=f, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
            raise Fail(f"pip install -r {REQUIREMENTS.name} failed (log: {log})")
        stamp.write_text(want + "\n")
    if need_cvxopt:
        r = subprocess.run([str(py), "-c", "import cvxopt"], capture_output=True)
        if r.returncode != 0:
            r = subprocess.run([str(py), "-m", "pip", "install", "-q", CVXOPT], capture_output=True)
            if r.returncode != 0:
                raise Fail(f"cannot install {CVXOPT} (GLPK_MI, needed by water-filling policies)")
    return py


def _env() -> dict:
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PYTHONHASHSEED"] = "0"     # Gavel iterates over sets of worker-type names
    env.pop("PYTHONPATH", None)
    return env


# -- trace ----------------------------------------------------------------------------------------
def read_trace(path: Path) -> list[dict]:
    """The 10 columns of Gavel's trace format (utils.parse_trace)."""
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        f = line.split("\t")
        if len(f) != 10:
            raise Fail(f"{path}:{n}: a Gavel trace line has 10 tab-separated fields "
                       f"(utils.parse_trace), this one has {len(f)}")
        try:
            rows.append({"job_type": f[0], "total_steps": int(f[5]), "scale_factor": int(f[6]),
                         "arrival": float(f[9])})
        except ValueError as e:
            raise Fail(f"{path}:{n}: {e}") from None
    if not rows:
        raise Fail(f"{path}: no jobs")
    if any(b["arrival"] < a["arrival"] for a, b in zip(rows, rows[1:])):
        raise Fail(f"{path}: arrival times must not decrease (Gavel's simulate() asserts it)")
    return rows


def _cluster(spec: str) -> str:
    if not re.fullmatch(r"\d+:\d+:\d+", spec) or sum(int(x) for x in spec.split(":")) == 0:
        raise Fail(f"--cluster {spec}: expected V100:P100:K80 GPU counts, e.g. 36:36:36")
    return spec


SCHED_RE = re.compile(r"\[(-?[0-9.e+]+)\] \[Micro-task scheduled\]\tJob ID: (\(?[0-9, ]+\)?)\t")


def first_starts(log_path: Path) -> dict[int, float]:
    """Simulated time of each job's first "[Micro-task scheduled]" line (Gavel logs one per job
    and round when it dispatches the round, prefixed by the simulated clock)."""
    starts: dict[int, float] = {}
    opener = gzip.open if log_path.suffix == ".gz" else open
    with opener(log_path, "rt", errors="replace") as f:
        for line in f:
            if "[Micro-task scheduled]" not in line:
                continue
            m = SCHED_RE.search(line)
            if not m:
                continue
            t = float(m.group(1))
            for j in re.findall(r"\d+", m.group(2)):
                starts.setdefault(int(j), t)
    return starts


# -- run ------------------------------------------------------------------------------------------
def cmd_run(a: argparse.Namespace) -> None:
    trace = Path(a.trace).expanduser()
    if not trace.is_file():
        raise Fail(f"--trace {a.trace}: no such file")
    if a.policy not in POLICIES:
        raise Fail(f"--policy {a.policy}: not one of Gavel's policies ({', '.join(POLICIES)})")
    cluster = _cluster(a.cluster)
    if a.seed < 0:
        raise Fail("--seed must be >= 0")
    overrides = {}
    for kv in a.scheduler_arg or []:
        k, sep, v = kv.partition("=")
        if not sep or not re.fullmatch(r"[a-z_]+", k):
            raise Fail(f"--scheduler-arg {kv}: expected KEY=VALUE (a Scheduler keyword)")
        try:
            overrides[k] = json.loads(v)
        except json.JSONDecodeError:
            overrides[k] = v
    rows = read_trace(trace)
    sched_dir, commit = resolve_source(a.gavel)
    py = ensure_venv(need_cvxopt="water_filling" in a.policy)
    from common import RECORDED, JobResult, RunSummary, write_run   # noqa: E402 (bench/anchors)

    name = a.name or trace.stem
    if not re.fullmatch(r"[A-Za-z0-9_.=-]+", name):
        raise Fail(f"--name {name}: letters, digits and _ . = - only")
    out = Path(a.out).expanduser() if a.out else RECORDED / "gavel"
    runs = cache_dir() / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    prefix = runs / f"{name}__{a.policy}__{cluster.replace(':', '-')}_s{a.seed}"
    gavel_args = ["-t", str(trace.resolve()), "-p", a.policy, "-c", cluster,
                  "--throughputs_file", str(sched_dir / "simulation_throughputs.json"),
                  "--seed", str(a.seed), "--solver", "ECOS", "--time_per_iteration", "360",
                  "--num_gpus_per_server", "1:1:1"]
    log = prefix.with_suffix(".log")
    t0 = time.perf_counter()
    with log.open("w") as f:
        r = subprocess.run([str(py), str(Path(__file__).resolve()), "_driver", str(sched_dir),
                            str(prefix), json.dumps(overrides), "--", *gavel_args],
                           cwd=sched_dir, stdout=f, stderr=subprocess.STDOUT, env=_env())
    wall = time.perf_counter() - t0
    res_path = prefix.with_suffix(".result.json")
    if r.returncode != 0 or not res_path.is_file():
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
        raise Fail(f"Gavel's simulator failed (exit {r.returncode}): {tail[0][:200]} (log: {log})")
    starts = first_starts(log)
    with log.open("rb") as src, gzip.open(str(log) + ".gz", "wb", compresslevel=1) as dst:
        shutil.copyfileobj(src, dst)
    log.unlink()
    res = json.loads(res_path.read_text())
    jct = {int(k): v for k, v in res["jct"].items()}
    jobs = []
    for i, row in enumerate(rows):
        if i not in jct:
            continue
        sub = row["arrival"]
        jobs.append(JobResult(str(i), f"gavel-{i:06d}", row["job_type"], row["scale_factor"], sub,
                              starts.get(i), sub + jct[i], jct[i]))
    try:
        trace_arg = str(trace.resolve().relative_to(HERE.parents[1]))
    except ValueError:
        trace_arg = str(trace)
    command = (f"python bench/anchors/gavel.py --gavel <{REPO} @ {commit[:12]}> run --trace "
               f"{trace_arg} --policy {a.policy} --cluster {cluster} --seed {a.seed}"
               + "".join(f" --scheduler-arg {kv}" for kv in a.scheduler_arg or [])
               + f"  [Gavel: python {DRIVER.split('/', 1)[1]} "
               + " ".join(x if not x.startswith("/") else Path(x).name for x in gavel_args) + "]")
    notes = [f"Gavel's simulator unchanged (runtime.rpc gRPC modules stubbed, unused in simulation); "
             f"Python {res['versions'].get('python')}, numpy {res['versions'].get('numpy')}, "
             f"cvxpy {res['versions'].get('cvxpy-base')}, ecos {res['versions'].get('ecos')}",
             f"seed {a.seed} (Gavel's Scheduler and policy RNGs: FIFO's random type, the agnostic "
             f"policies' worker-type shuffle)",
             "jct_s = Gavel's _job_completion_times (last micro-task end - arrival); "
             "start_s = first '[Micro-task scheduled]' in Gavel's log; end_s = submit_s + jct_s",
             f"makespan (Gavel's 'Total duration', last completion on its clock) "
             f"{res['total_duration_s']:.3f} s; cluster utilization {res['utilization']}; "
             f"lease extensions {res['lease_extensions'][0]} of {res['lease_extensions'][1]} "
             f"opportunities; simulate() {res['sim_s']:.1f} s",
             f"trace: {trace.name}, {len(rows)} jobs, sha256 "
             f"{hashlib.sha256(trace.read_bytes()).hexdigest()[:16]}"]
    if res["dropped"]:
        notes.append(f"jobs Gavel dropped after {5} failed micro-tasks (no JCT): {res['dropped']}")
    if overrides:
        notes.insert(0, f"EXPERIMENT, not a reference run: Scheduler({overrides})")
    run = RunSummary(system="gavel", workload=name, policy=a.policy, cluster=cluster,
                     reference_repo=REPO, reference_commit=commit, command=command, wall_s=wall,
                     notes=notes)
    csv_path, json_path = write_run(out, run, jobs)
    avg = sum(j.jct_s for j in jobs) / len(jobs) if jobs else float("nan")
    print(json.dumps({"policy": a.policy, "workload": name, "jobs": len(jobs),
                      "avg_jct_h": round(avg / 3600, 6), "wall_s": round(wall, 3),
                      "csv": str(csv_path), "log": str(log) + ".gz"}))


# -- generate -------------------------------------------------------------------------------------
def cmd_generate(a: argparse.Namespace) -> None:
    if not a.rate > 0:
        raise Fail("--rate must be > 0 (jobs per hour)")
    if a.jobs < 1:
        raise Fail("--jobs must be >= 1")
    if a.seed < 0:
        raise Fail("--seed must be >= 0")
    out = Path(a.out).expanduser()
    if not out.parent.is_dir():
        raise Fail(f"--out {a.out}: no folder {out.parent}")
    sched_dir, commit = resolve_source(a.gavel)
    py = ensure_venv()
    lam = 3600.0 / a.rate
    args = ["--num_jobs", str(a.jobs), "--lam", repr(lam), "--seed", str(a.seed),
            "--throughputs_file", str(sched_dir / "simulation_throughputs.json")]
    for flag, v in (("--min_duration", a.min_hours), ("--max_duration", a.max_hours),
                    ("--num_durations", a.num_durations)):
        if v is not None:
            args += [flag, repr(v)]
    if a.multi_gpu:
        args.append("--generate-multi-gpu-jobs")
    tmp = out.with_name(out.name + ".tmp")
    r = subprocess.run([str(py), str(sched_dir.parent / GENERATOR), *args,
                        "--output_file", str(tmp.resolve())],
                       cwd=sched_dir, capture_output=True, text=True, env=_env())
    if r.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        last = (r.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise Fail(f"Gavel's generate_trace.py failed (exit {r.returncode}): {last[:200]}")
    tmp.replace(out)
    shown = " ".join(x if not x.startswith("/") else Path(x).name for x in args)
    print(json.dumps({"trace": str(out), "jobs": a.jobs, "gavel_commit": commit,
                      "generator": f"{GENERATOR} {shown} --output_file {out.name}"}))


# -- the driver, run inside the venv --------------------------------------------------------------
def _stub(name: str):
    import types
    mod = types.ModuleType(name)
    mod.__doc__ = "bench/anchors/gavel.py stub: physical-cluster gRPC module, unused in simulation"

    def __getattr__(attr):
        raise RuntimeError(f"{name}.{attr} is stubbed by bench/anchors/gavel.py (physical cluster only)")
    mod.__getattr__ = __getattr__
    return mod


def driver(argv: list[str]) -> None:
    """Inside the venv: run Gavel's driver as __main__ and dump what it computed."""
    import platform
    import runpy
    from importlib import metadata
    sched_dir, prefix, overrides = argv[0], argv[1], json.loads(argv[2])
    assert argv[3] == "--"
    gavel_args = argv[4:]
    sys.path.insert(0, sched_dir)
    for sub in ("scheduler_server", "scheduler_client", "worker_server", "worker_client"):
        sys.modules["runtime.rpc." + sub] = _stub("runtime.rpc." + sub)
    import runtime.rpc  # noqa: F401  Gavel's own packages; their imports get the stubs
    import scheduler as gavel_scheduler  # Gavel's scheduler.py, unchanged
    captured = {}
    orig_simulate = gavel_scheduler.Scheduler.simulate
    orig_init = gavel_scheduler.Scheduler.__init__

    def simulate(self, *args, **kwargs):
        captured["sched"] = self
        t0 = time.perf_counter()
        try:
            return orig_simulate(self, *args, **kwargs)
        finally:
            captured["sim_s"] = time.perf_counter() - t0
    gavel_scheduler.Scheduler.simulate = simulate
    if overrides:      # experiments only: a keyword of Scheduler's own constructor
        def init(self, *args, **kwargs):
            kwargs.update(overrides)
            orig_init(self, *args, **kwargs)
        gavel_scheduler.Scheduler.__init__ = init
    driver_path = os.path.join(sched_dir, "scripts", "drivers", "simulate_scheduler_with_trace.py")
    sys.argv = [driver_path] + gavel_args
    runpy.run_path(driver_path, run_name="__main__")
    sched = captured["sched"]
    jct, dropped = {}, []
    for job_id in sorted(sched._job_completion_times):
        t = sched._job_completion_times[job_id]
        if t is None:
            dropped.append(job_id[0])
        else:
            jct[str(job_id[0])] = t
    with open(os.devnull, "w") as devnull:
        saved, sys.stdout = sys.stdout, devnull
        try:
            util = sched.get_cluster_utilization()
        finally:
            sys.stdout = saved
    versions = {"python": platform.python_version()}
    for pkg in ("numpy", "scipy", "cvxpy-base", "ecos", "cvxopt"):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    with open(prefix + ".result.json", "w") as f:
        json.dump({"jct": jct, "dropped": dropped, "total_duration_s": sched._current_timestamp,
                   "utilization": None if util is None else float(util),
                   "lease_extensions": [sched._num_lease_extensions,
                                        sched._num_lease_extension_opportunities],
                   "sim_s": captured["sim_s"], "versions": versions}, f)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_driver"]:
        driver(argv[1:])
        return 0
    sys.path.insert(0, str(HERE))
    ap = argparse.ArgumentParser(prog="gavel.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--gavel", required=True, help="Gavel checkout or bare git dir")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run Gavel's simulator on a trace")
    r.add_argument("--trace", required=True)
    r.add_argument("--policy", required=True)
    r.add_argument("--cluster", default="36:36:36", help="V100:P100:K80 GPU counts")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--out", help="results folder (default quanta/data/reference/gavel)")
    r.add_argument("--name", help="workload name in the file names (default: the trace's stem)")
    r.add_argument("--scheduler-arg", action="append", metavar="KEY=VALUE",
                   help="experiments only: a keyword for Gavel's Scheduler()")
    g = sub.add_parser("generate", help="make a trace with Gavel's generate_trace.py")
    g.add_argument("--rate", type=float, required=True, help="jobs per hour")
    g.add_argument("--jobs", type=int, required=True)
    g.add_argument("--seed", type=int, required=True)
    g.add_argument("--multi-gpu", action="store_true")
    g.add_argument("--min-hours", type=float)
    g.add_argument("--max-hours", type=float)
    g.add_argument("--num-durations", type=int)
    g.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    try:
        cmd_run(a) if a.cmd == "run" else cmd_generate(a)
    except Fail as e:
        print(f"gavel.py: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
