"""SJF-BSBF reproduction: against SJF-FFS, plain SJF and the preemptive Tiresias (2D-LAS), on the
Philly sample and on the Alibaba openb GPU-sharing sample.

    python bench/repro_sjf_bsbf.py [--part philly,openb] [--seed 0] [--policies P;P;...]

Philly: the bundled sample (2,000 consecutive jobs of a busy 29.5 h window) on 64 and 128 V100s.
openb: the bundled sample (805 GPU pods over 120 days, 284 of them asking for a fraction of one
GPU). On the `openb` cluster preset (6,212 GPUs) no pod ever waits, so every policy gives the same
JCT; that row is printed as the check. The comparison proper runs the same pods on small clusters
of openb's most common GPU type (G2, 16 GB): 16 GPUs (heavy load: the sample offers ~26.5 GPUs
on average over its 120 days, most of it in the last 284 h; nearly every pod asks for one GPU)
and 24.
Job types are drawn from Gavel's catalog (seeded); its measured co-location pairs give the sharing
slowdowns and the memory fit; 30 s restore per resumption for the preemptive Tiresias.

`sjf-bsbf:accumulate=true` forms memory-short pairs with gradient accumulation; the engine charges
each job's plan (the guest's micro-batch speed / k, the pair slowdown of the micro-batch type for
both: quanta.perf.base.allocation_rate with both plans).
`sjf-bsbf` (default) lets a job span idle GPUs and running jobs of any size (the authors' code);
`:span=false` is the former one-host-of-the-same-size rule; `:preempt=true` the authors' preemptive
default (`sjf-bsbf` in their run.py; the paper's and our default is their `sjf-bsbf-no-preempt`).

The authors' code beside ours (`--part reference`):

    git clone https://github.com/Lai-JX/Scheduler /tmp/sjfref_dev && git -C /tmp/sjfref_dev checkout dev
    python -m venv /tmp/sjfref/venv && /tmp/sjfref/venv/bin/pip install numpy grpcio protobuf cvxpy
    python bench/repro_sjf_bsbf.py --part reference --reference-dir /tmp/sjfref_dev \
        --reference-python /tmp/sjfref/venv/bin/python

Their repository is a testbed scheduler, not a simulator: `run.py` blocks until gRPC workers
register, jobs train for real (mpirun, Horovod, ImageNet / WikiText), and `jobs.py` reads
`trace-data/itertime.json` and `trace-data/ratio.json` (iteration times and the pairwise
interference table) at import, and `cluster/cluster.py` reads `cluster/node_msg.json` (their hosts),
all of which their .gitignore (`*.json`) kept out of every commit. So this
part runs their own scheduling code (`scheduler_impl/schedulers.py`: `sjf_bsbf_jobs` /
`sjf_ffs_jobs` with `jobs_placement`, `jobs_execute`; `cluster/switch.py`: `bsbf_alloc_res`,
`merge_alloc_res`, `share_check`; their job and GPU books) unchanged, on a virtual clock: their
`time.sleep` / `time.time` advance it, a stub scheduler stands for gRPC (`query_stats`: iterations
done and the iteration time now, `save_model`, the controller's `execute` / `kill` and done queue),
and each running job progresses at its trace iteration time x the largest interference factor of
the jobs sharing its GPUs (the slowest worker). The tables they lack are stand-ins, written by us
and read by both sides: `itertime.json` empty (their code then uses the trace's own iteration
times), `ratio.json` from Gavel's measured pairs for a model of the same family (REF_MODELS;
1 / PACK_FACTOR where Gavel has none). Quanta replays the same trace rows (ms -> s) with a
performance model over the same two tables (RefTables), event-driven and in 60 s rounds (their
loop decides about every 60 s), no restart cost on either side.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time

# (quanta is imported inside the functions that use it: `--part reference-run` runs in the
# reference's own environment, where quanta is not installed)

POLICIES = ("sjf-bsbf", "sjf-bsbf:span=false", "sjf-bsbf:preempt=true", "sjf-bsbf:accumulate=true",
            "sjf-bsbf:span=false,accumulate=true", "sjf-ffs", "sjf-ffs:span=false",
            "sjf-ffs:preempt=true", "sjf", "tiresias-las")
OPENB_POLICIES = ("sjf-bsbf", "sjf-bsbf:span=false", "sjf-bsbf:preempt=true",
                  "sjf-bsbf:accumulate=true", "sjf-bsbf:span=false,accumulate=true", "sjf-ffs",
                  "sjf-ffs:span=false", "sjf-ffs:preempt=true", "sjf-bsbf:fraction_cap=true",
                  "sjf-ffs:fraction_cap=true", "tiresias-las")
# (trace, cluster, load scale)
PHILLY = [("philly", "v100:8x8", 1.0), ("philly", "v100:16x8", 1.0)]
OPENB = [("openb", "openb", 1.0), ("openb", "g2:2x8", 1.0), ("openb", "g2:3x8", 1.0)]


def run(trace: str, cluster: str, policies, seed: int, load_scale: float) -> list[dict]:
    from quanta.model.presets import resolve_cluster
    from quanta.perf.catalog_model import CatalogModel
    from quanta.policies import make_policy
    from quanta.report.metrics import summary
    from quanta.runner import load_any_trace
    from quanta.sim.engine import RestartCost, Simulator
    from quanta.workloads.builder import build_workload
    c = resolve_cluster(cluster)
    perf = CatalogModel()
    wl = build_workload(load_any_trace(trace, "auto", seed), perf, seed=seed, load_scale=load_scale)
    rows = []
    for name in policies:
        t0 = time.perf_counter()
        res = Simulator(wl.specs, c, make_policy(name), perf, restart=RestartCost(30.0)).run()
        s = summary(res)
        s["shared_gpu_h"] = float((res.shared[:-1] * (res.times[1:] - res.times[:-1])).sum()) / 3600
        s["wall_s"] = time.perf_counter() - t0
        rows.append(s)
    return rows


# -- the authors' code beside ours ----------------------------------------------------------------

# their models -> the Gavel job type whose measured pairs stand in for their missing ratio.json
REF_MODELS = {"resnet18": "ResNet-18 (batch size 128)", "shufflenet_v2_x1_0": "ResNet-18 (batch size 64)",
              "vgg16": "ResNet-50 (batch size 64)", "vgg19": "ResNet-50 (batch size 128)",
              "dqn": "A3C", "a2c": "A3C", "bert": "Transformer (batch size 64)",
              "gpt2": "LM (batch size 40)"}
REF_NAMES = {"resnet18": "ResNet-18", "shufflenet_v2_x1_0": "ShuffleNet-v2", "vgg19": "VGG19",
             "vgg16": "VGG16", "dqn": "DQN", "a2c": "A2C", "bert": "BERT", "gpt2": "GPT2"}
# (their trace, their cluster spec, ours)
REF_CASES = [("trace_data_new.csv", "n2g8.csv", "v100:2x8"),
             ("trace_data_new_32.csv", "n4g8.csv", "v100:4x8"),
             ("cluster_trace.csv", "n1g8.csv", "v100:1x8")]
# their schedule -> ours
REF_POLICIES = {"sjf-bsbf-no-preempt": "sjf-bsbf", "sjf-bsbf": "sjf-bsbf:preempt=true",
                "sjf-ffs-no-preempt": "sjf-ffs", "sjf-ffs": "sjf-ffs:preempt=true"}
REF_INTERVAL = 60


def ref_ratio_table(path: str) -> None:
    """The stand-in for their ratio.json: ratio[a][b][gpus] = [xi, xi] (a slowed by b, without and
    with MPS), xi = 1 / Gavel's measured packed speed of the stand-in pair on a V100."""
    from quanta.perf.table import PACK_FACTOR, TableModel
    table = TableModel()
    out: dict = {}
    for a, ta in REF_MODELS.items():
        for b, tb in REF_MODELS.items():
            speed = table.pack_slowdown(ta, tb, "v100") or PACK_FACTOR
            out.setdefault(REF_NAMES[a], {})[REF_NAMES[b]] = {
                str(g): [1.0 / speed, 1.0 / speed] for g in (1, 2, 4, 8, 16, 32, 64)}
    with open(path, "w") as f:
        json.dump(out, f, indent=0)


class RefTables:
    """A PerfModel over their trace and the ratio table: job_type = "model|iteration ms"; steps/s =
    1000 / iteration ms at the requested GPUs (the trace's number, wherever the GPUs are); packed
    beside `other`: divided by ratio[job][other][its GPUs]; every pair fits (48 GB GPUs)."""

    def __init__(self, ratio: dict):
        self.ratio = ratio

    def rate(self, job, gpu_type, num_gpus, num_nodes=1, consolidated=None):
        return 1000.0 / float(job.job_type.split("|")[1])

    def shared_rate(self, job, other, gpu_type, num_gpus, num_nodes=1, consolidated=None,
                    mode="pack"):
        a, b = (REF_NAMES[j.job_type.split("|")[0]] for j in (job, other))
        return self.rate(job, gpu_type, num_gpus) / self.ratio[a][b][str(job.num_gpus)][0]

    def rate_matrix(self, jobs, types):
        import numpy as np
        return np.array([[self.rate(j, t, j.num_gpus) for t in types] for j in jobs])

    def provenance(self, job, gpu_type):
        from quanta.perf.base import Provenance
        return Provenance.MEASURED


def ref_quanta(trace_csv: str, cluster: str, policy: str, ratio_path: str, interval) -> dict:
    """Quanta on their trace rows: JCT per job id."""
    from quanta.model import JobSpec
    from quanta.model.presets import resolve_cluster
    from quanta.policies import make_policy
    from quanta.sim.engine import RestartCost, Simulator
    c = resolve_cluster(cluster)
    with open(ratio_path) as f:
        perf = RefTables(json.load(f))
    specs = []
    with open(trace_csv) as f:
        for row in csv.DictReader(f):
            if int(row["num_gpu"]) > c.num_gpus:
                continue                               # as their run.py: jobs that never fit
            specs.append(JobSpec(row["job_id"], float(row["submit_time"]) / 1000.0,
                                 int(row["num_gpu"]), f"{row['model_name']}|{row['iteration_time']}",
                                 total_steps=float(row["iterations"])))
    specs.sort(key=lambda s: s.submit_time)
    pol = make_policy(policy)
    pol.interval = interval
    res = Simulator(specs, c, pol, perf, restart=RestartCost(0.0)).run()
    t = res.table
    return {s.job_id: float(t.end[i] - t.submit[i]) for i, s in enumerate(t.specs)}


def ref_reference(ref_dir: str, trace_csv: str, spec_csv: str, schedule: str,
                  ratio_path: str) -> dict:
    """Their scheduling loop for `schedule` on a virtual clock (see the module docstring): JCT per
    job id. Runs in their environment (numpy, cvxpy, grpc), not quanta's."""
    import contextlib
    import io
    with contextlib.redirect_stdout(io.StringIO()):  # (their code prints a lot)
        return _ref_reference(ref_dir, trace_csv, spec_csv, schedule, ratio_path)


def _ref_reference(ref_dir: str, trace_csv: str, spec_csv: str, schedule: str,
                   ratio_path: str) -> dict:
    import queue
    import shutil
    import threading
    import types
    work = tempfile.mkdtemp(prefix="sjfref-")
    os.makedirs(os.path.join(work, "trace-data"))
    shutil.copy(ratio_path, os.path.join(work, "trace-data", "ratio.json"))
    with open(os.path.join(work, "trace-data", "itertime.json"), "w") as f:
        json.dump({}, f)                              # their code then takes the trace's times
    os.makedirs(os.path.join(work, "cluster"))
    with open(os.path.join(work, "cluster", "node_msg.json"), "w") as f:
        json.dump({}, f)                              # their testbed's hosts (only to launch)
    os.chdir(work)                                    # (they read ./trace-data/*.json)
    sys.path.insert(0, ref_dir)
    stub = types.ModuleType("runtime.rpc_stubs.master_to_worker_pb2")
    stub.JobInfo = object                             # gRPC messages: not sent here
    sys.modules["runtime.rpc_stubs.master_to_worker_pb2"] = stub
    import flags
    scheme = "bsbf" if "bsbf" in schedule else "merge"
    with open(os.path.join(ref_dir, "cluster_specs", spec_csv)) as f:
        spec = next(csv.DictReader(f))
    for name, value in [("trace_file", trace_csv), ("log_path", work), ("scheme", scheme),
                        ("schedule", schedule)]:
        flags.DEFINE_string(name, value, "")
    for name in ("num_switch", "num_node_p_switch", "num_gpu_p_node", "num_cpu_p_node",
                 "mem_p_gpu"):
        flags.DEFINE_integer(name, int(spec[name]), "")
    flags.DEFINE_integer("num_gpu_all", int(spec["num_switch"]) * int(spec["num_node_p_switch"]) *
                         int(spec["num_gpu_p_node"]), "")
    flags.DEFINE_integer("schedule_interval", REF_INTERVAL, "")
    flags.DEFINE_boolean("print", False, "")
    flags.DEFINE_boolean("flush_stdout", False, "")
    flags.FLAGS._parse_flags([])
    import jobs
    import log
    from cluster import cluster
    from scheduler_impl import schedulers
    JOBS, CLUSTER, LOG = jobs.JOBS, cluster.CLUSTER, log.LOG
    CLUSTER.init_infra()
    with open(trace_csv) as f:                        # their run.parse_job_file, in short
        for row in csv.DictReader(f):
            if int(row["num_gpu"]) <= CLUSTER.num_gpu:
                JOBS.add_job(row)
    JOBS.sort_all_jobs()
    JOBS.prepare_job_start_events()
    names = jobs.JOBS.job_name_map
    with open(ratio_path) as f:
        ratio = json.load(f)
    clock = {"now": 0.0}
    base = {j["job_idx"]: j["iteration_time"] for j in JOBS.job_list}
    left = {j["job_idx"]: float(j["iterations"]) for j in JOBS.job_list}
    done_iters = {j["job_idx"]: 0.0 for j in JOBS.job_list}
    running: dict[int, dict] = {}
    ends: dict[int, float] = {}
    done_q: queue.Queue = queue.Queue()

    def itertime(job) -> float:
        xi = 1.0
        for pl in job["placements"]:
            for nd in pl["nodes"]:
                for gpu in nd["gpu_list"]:
                    for other in gpu.job_list:
                        if other["job_idx"] != job["job_idx"] and other["job_idx"] in running:
                            xi = max(xi, ratio[names[job["model_name"]]][names[other["model_name"]]]
                                     [str(job["num_gpu"])][0])
        return base[job["job_idx"]] * xi

    def advance(dt: float) -> None:
        until = clock["now"] + dt
        while running:
            speed = {i: 1.0 / itertime(j) for i, j in running.items()}
            first = min(left[i] / v for i, v in speed.items())
            step = min(first, until - clock["now"])
            for i, v in speed.items():
                left[i] -= v * step
                done_iters[i] += v * step
            clock["now"] += step
            over = [i for i in running if left[i] <= 1e-9 * max(1.0, done_iters[i])]
            if not over:
                break
            for i in over:                            # its trainer reports the end
                del running[i]
                left[i] = 0.0
                done_q.put((clock["now"], i, 0, [], 0))
        clock["now"] = until

    class FakeTime:
        @staticmethod
        def sleep(dt):
            advance(float(dt))

        @staticmethod
        def time():
            return clock["now"]

    class Trainer:
        def __init__(self, idx):
            self.idx = idx

        def query_stats(self):
            n, done_iters[self.idx] = done_iters[self.idx], 0.0
            return n, itertime(JOBS.job_list[self.idx]) if self.idx in running else base[self.idx]

        def save_model(self):
            return True

    class Controller:
        done_queue = done_q
        done_queue_lock = threading.Lock()

        def set_start_time(self):
            pass

        def get_time(self):
            return clock["now"]

        def execute(self, job):
            running[job["job_idx"]] = JOBS.job_list[job["job_idx"]]
            sched._trainers[job["job_idx"]] = Trainer(job["job_idx"])

        def kill(self, job):
            running.pop(job["job_idx"], None)

        def kill_workers(self):
            pass

    class Logger:
        def info(self, *a, **k):
            pass

    class Scheduler:
        def __init__(self):
            self._controller, self._logger, self._trainers = Controller(), Logger(), {}
            self.finished_job_cnt = 0

        def get_time(self):
            return clock["now"]

        def has_ready_jobs(self, t):
            return bool(JOBS.job_events) and JOBS.job_events[0]["time"] <= t

        def query_stats(self, ids):
            return self._trainers[max(ids)].query_stats()

        def save_model(self, ids):
            return self._trainers[max(ids)].save_model()

    JOBS.job_list.sort(key=lambda j: j["job_idx"])   # (job_idx = position, as add_job gave it)
    JOBS.to_jobinfo = lambda job, is_packing=False: job
    LOG.checkpoint = lambda *a, **k: None
    LOG.job_complete = lambda job, t: ends.__setitem__(job["job_idx"], t)
    schedulers.time = FakeTime
    sched = Scheduler()
    loop = schedulers.sjf_bsbf_jobs if "bsbf" in schedule else schedulers.sjf_ffs_jobs
    loop(sched, is_preempt="no-preempt" not in schedule)
    return {str(j["job_id"]): ends[j["job_idx"]] - j["submit_time"] for j in JOBS.job_list}


def reference_part(ref_dir: str, ref_python: str) -> None:
    """Their code and ours on their traces (see the module docstring): average JCT in seconds."""
    work = tempfile.mkdtemp(prefix="sjfref-tables-")
    ratio = os.path.join(work, "ratio.json")
    ref_ratio_table(ratio)
    print("| trace | cluster | jobs | their schedule | theirs: avg JCT (s) | quanta policy | quanta "
          "event-driven (s) | quanta 60 s rounds (s) | same JCT as theirs (60 s rounds, +-1 s) | "
          "quanta span=false, 60 s rounds (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for trace, spec, cluster in REF_CASES:
        path = os.path.join(ref_dir, "trace-data", trace)
        for theirs, ours in REF_POLICIES.items():
            out = subprocess.run([ref_python, os.path.abspath(__file__), "--part", "reference-run",
                                  "--reference-dir", ref_dir, "--trace", path, "--spec", spec,
                                  "--schedule", theirs, "--ratio", ratio],
                                 capture_output=True, text=True, check=True)
            ref = json.loads(out.stdout.strip().splitlines()[-1])
            q_event = ref_quanta(path, cluster, ours, ratio, None)
            q_round = ref_quanta(path, cluster, ours, ratio, float(REF_INTERVAL))
            q_one = ref_quanta(path, cluster, ours.replace("sjf-ffs", "sjf-ffs:span=false")
                               .replace("sjf-bsbf", "sjf-bsbf:span=false").replace(":span=false:",
                                                                                   ":span=false,"),
                               ratio, float(REF_INTERVAL))
            assert set(q_event) == set(ref)
            avg = [sum(d.values()) / len(d) for d in (ref, q_event, q_round, q_one)]
            same = sum(abs(q_round[k] - ref[k]) <= 1.0 for k in ref)
            print(f"| {trace} | {spec} ({cluster}) | {len(ref)} | {theirs} | {avg[0]:.0f} | {ours} | "
                  f"{avg[1]:.0f} | {avg[2]:.0f} | {same} of {len(ref)} | {avg[3]:.0f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", default="philly,openb",
                    help="philly, openb (comma-separated), reference, or reference-run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--policies", default="", help="';'-separated policies (default: the lists above)")
    ap.add_argument("--reference-dir", default="/tmp/sjfref_dev")
    ap.add_argument("--reference-python", default="/tmp/sjfref/venv/bin/python")
    ap.add_argument("--trace", default="")
    ap.add_argument("--spec", default="")
    ap.add_argument("--schedule", default="")
    ap.add_argument("--ratio", default="")
    a = ap.parse_args()
    if a.part == "reference-run":
        print(json.dumps(ref_reference(os.path.abspath(a.reference_dir), a.trace, a.spec,
                                       a.schedule, a.ratio)))
        return
    if a.part == "reference":
        reference_part(os.path.abspath(a.reference_dir), a.reference_python)
        return
    cases = (PHILLY if "philly" in a.part else []) + (OPENB if "openb" in a.part else [])
    print("| trace | cluster | load x | policy | avg JCT (h) | p50 (h) | avg queue (h) | preemptions "
          "| shared GPU-h | BSBF lower by |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for trace, cluster, scale in cases:
        pols = a.policies.split(";") if a.policies else \
            OPENB_POLICIES if trace == "openb" else POLICIES
        rows = run(trace, cluster, pols, a.seed, scale)
        bsbf = rows[0]["avg_jct_s"]
        for r in rows:
            gain = "" if r is rows[0] else f"{100 * (1 - bsbf / r['avg_jct_s']):.0f}%"
            print(f"| {trace} | {cluster} | {scale:g} | {r['policy']} | {r['avg_jct_s'] / 3600:.2f} | "
                  f"{r['p50_jct_s'] / 3600:.2f} | {r['avg_queue_s'] / 3600:.2f} | {r['preemptions']} | "
                  f"{r['shared_gpu_h']:.0f} | {gain} |", flush=True)


if __name__ == "__main__":
    main()
