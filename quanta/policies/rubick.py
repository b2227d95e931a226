"""Rubick (arXiv 2408.08586; MLSys'25 artifact "Morphling"): execution plans and GPUs, CPU threads
and host memory chosen together from each job's resource-sensitivity curve, with throughput
guarantees (SLAs) for guaranteed jobs. ALGORITHMS.md section 5. Tags: [C] = as the artifact
(AlibabaPAI/reconfigurable-dl-scheduler @ 80e8524, sched/morphling_sched/policy/morphling.py)
does it; [P] = as the paper says, where the artifact does otherwise (see "Paper vs artifact");
[U] = reconstructed here, not confirmed against the paper or the artifact. Paths below are the
artifact's; `morphling.py:N` is line N of its policy.

Per round (60 s [C]):
1. Curve per job [C, performance_model.py]: for every GPU count g (1..8, then whole nodes up to
   `max_gpus` [C: 1..64], plus the requested count) and CPU threads per GPU c (`cpu_options` [U]:
   the artifact's grid is c <= 64/g on one node, 8 across nodes), the best plan's throughput
   Rmax(g, c) from the performance model (`best_plan_rate`), and the host memory that plan needs
   (`host_memory_gb`: ZeRO-Offload's optimizer states). Options are ordered by their dominant
   share cost max(g, c_total / CPUs-per-GPU, mem / memory-per-GPU of the nodes) [U: the artifact
   walks GPUs and CPUs separately]; one that gains < 1% over a cheaper option is dropped [C: the
   curve is made monotone the same way]. Options beyond the scale-out cap (`scale_cap`, R2) are
   left out, except the job's own requested GPU count. Values are normalised (`normalize`, R3):
   by the throughput of the job's request (its GPUs, plan and CPUs) [P: slope = dRmax /
   (T_orig * dGPU)], or by one constant per model [C].
2. SLA [P]: a guaranteed job (JobSpec.guaranteed) must run at least at sla x T_orig (sla 0 = 1.0:
   the throughput of its requested resources and plan); with `sla_admit` = a > 1 an option whose
   predicted rate x a reaches that is enough [C: a = 1.5]. Guaranteed jobs below it, oldest first,
   get the cheapest option that meets it, taking resources from best-effort jobs (down to zero)
   and from guaranteed jobs above their own SLA option, lowest loss per freed unit first [P; the
   artifact means to take from co-located jobs with the lowest slope but never does, R1]. A
   guaranteed job that cannot be given its SLA waits.
3. Marginal gain [C, scale-up pass + take-from-victims]: repeatedly, the job whose move to another
   option has the steepest slope (gain / dominant cost) gets it, from free resources or by taking
   from victims whose loss per freed unit is lower than the requester's gain per unit [P; R1],
   never below a guaranteed victim's SLA, never from a job restarted `max_restarts` times or more
   [C: < 5 restarts]. Moves are global over the cluster [U: the artifact works node by node, most
   free GPUs first]. Each job's cheapest shrink is kept in numpy tables, one per pattern of short
   resources, refreshed only for jobs that moved: a victim is one argmin. A job raised this round
   is not a victim and a victim does not grow again in the same round [U: guarantees the round
   ends].
4. A running job is reconfigured only for a relative gain of at least `min_gain` [U: the artifact
   relies on its restart limit alone; a 260 s restart per move is not free].
5. The plan of a job is the argmax plan of its option [C]; CPU threads and host memory follow
   from the option (CPU from the curve, memory from the plan's offload needs) [C]. Every change
   of plan, GPUs or resources is a checkpoint-restart keeping the global batch (the simulator
   charges the restart delay; the plan model keeps the global batch by construction) [C: 260 s].
6. The decision is tried through the real placement (`mechanism.dry_run`): a job that would not
   be placed (nodes without room for its GPUs, CPUs or memory) keeps what it holds, or waits if
   it held nothing [U]. The decision's state says which scale-out caps cut this round's curves
   (`Decision.state["notes"]["scale_cap"]`, one line per model family).
Homogeneous clusters as in the paper; on several GPU types each job uses its fastest allowed type
[U]. Rubick does not share GPUs and needs no job lengths.

Paper vs artifact. Each artifact behaviour is a parameter; the defaults are the paper's, except
the scale-out cap, whose default is the range the performance model was measured on.
- R1 `shrink_running` (default true; artifact: false). morphling.py:239 reads
  `if "llama" or "3B" in targeted_job or targeted_job == job: continue`: the literal "llama" is
  true, so every candidate victim is skipped and the take-from-victims loop (lines 237-307) never
  takes a GPU from another job; a guaranteed job below its SLA too only gets free GPUs. The one
  shrink left is lines 65-73: LLaMA jobs holding >= 32 GPUs are emptied each round and placed again
  by the 3D pass (lines 100-123). false: no running job is shrunk or preempted for another.
- R2 `scale_cap` (default "evidence"; artifact: "node"; "none" = every GPU count up to
  `max_gpus`, the behaviour before the cap). The artifact's curve spans 1..64 GPUs
  (performance_model.py:36), but its policy reads it only up to 8 (morphling.py:199, 271, 356
  `min(..., 8)`) and places a data-parallel job on one node (schedule_job, lines 130-160:
  alloc_per_node on a single node; adapt_execution_plan, lines 330-333, puts all its GPUs there);
  only llama7, llama30 and t5_3B go through the 3D pass, on the profiled shapes of
  sched/models/<model>.py `gpu_to_placements` (llama30: 24-48 GPUs). "evidence": per model family
  and plan class (DP-family or 3D), no more GPUs and nodes than the largest measured run of the
  artifact's data (quanta/perf/plan_evidence.py: DP-family <= 8 GPUs for every family; 3D up to
  40-64 GPUs on 8 nodes for t5, gpt2, llama7, llama30). The fitted model's multi-node error is
  already ~20% where measured (docs/perf-plan.md); beyond, nothing checks it: before this cap a
  lone 2-GPU vit job was given all 64 GPUs on 8 nodes (+28% predicted over 8 GPUs). An option whose
  best plan lies outside the range is dropped, not replaced by a lesser plan inside it [U].
  "node": DP-family plans on one node (the artifact), 3D plans as "evidence". On rubick-64 (8-GPU
  nodes) "evidence" and "node" give the same curves. Models without a measured range (not the plan
  model's families): "evidence" caps nothing, "node" keeps them on one node.
- R3 `normalize` (default "request"; artifact: "model8"). job_res_slope (morphling.py:346-361)
  divides every gain by `origin_tpt`, which simulator.py:179 sets from job.py:121
  `self.model.orig_tpt`: one constant per model, the batch over its measured iteration time on
  8 GPUs (sched/models/bert.py:17 `32 / 0.15768` = simulator/traces/bert/placements.csv line 14,
  `ga` on one 8-GPU node; the same for vit, roberta, t5, gpt2 and llama7 (ZeRO-Offload); llama30:
  4 / 2.759, its 32-GPU `442` run). "model8" here: the job type's best-plan throughput on one
  whole node (the node's CPU threads) from the performance model, one constant per model and GPU
  type [U: the model's value, not the measured one; the policy sees only the model].
- R4 (not a policy parameter): the artifact's simulator charges 260 s on every placement change,
  the first start included (simulator/job.py:218-227 `reallocate`: reallocate_time = 260 whenever
  the placement differs, () -> first placement too; spent before progress, job.py:160-163). In
  Quanta: RestartCost(260, first_start_as_restart=True); bench/repro_rubick.py
  --first-start-charge.
- SLA `sla_admit` (default 1.0; artifact: 1.5). morphling.py:243-247, 274-278, 309-313 admit a
  guaranteed job, and stop taking for it, once `res_matrix[g][1][0][0] * 1.5 >= sla_perf` (or its
  requested GPU count is reached); sla_perf is the batch over the measured iteration time of the
  request (simulator/job.py:122-125). So the artifact guarantees about 1/1.5 = 67% of the
  request's throughput; 1.0 guarantees all of it.
- (a) `fill_node` (default false; artifact: true). schedule_job (morphling.py:127-160) tries a
  job of any model but llama7, llama30 and t5_3B (lines 111, 130) on the node with the most free
  GPUs first (lines 131-137); alloc_per_node sets its target to all the free GPUs of that node plus
  what it holds there (lines 222-230) and, its take-from-victims loop never running (R1), gives it
  the curve's entry at that count (line 314: `res_matrix[alter_job[job]][1][0][2]["gpu"]`); a
  guaranteed job only if 1.5 x that entry's throughput reaches its SLA (lines 309-313). Jobs are
  taken SLA first, then by the gain of one more GPU, lowest first (lines 51-63, job_res_slope
  339-362), once per round (lines 75-89). A running data-parallel job so grows into its node's free
  GPUs each round; nothing else moves it (the scale-up pass, lines 93-99 and 176-210, only gives
  what is left on a node). The 3D models go to the largest of their profiled shapes that fits
  (lines 100-123, 389-454; quanta/perf/plan_shapes.py). true: `Round.fill` before step 1; jobs on
  the data-parallel path grow no further this round (step 2 leaves them out); 3D-model jobs keep
  only their profiled GPU counts. Kept on top [U]: `min_gain` for a running job's growth and
  `max_restarts`.
- (b) `release_3d` (default 0 = never; artifact: 32). morphling.py:65-73: a llama7 / llama30 job
  holding >= 32 GPUs is emptied at the start of every round (unless it restarted >= 7 times while
  <= 12 guaranteed jobs are active) and placed again by schedule_job / the 3D pass in its turn,
  its place in the order taken before the emptying (the gain of one more GPU, capped at 8, is
  |res_matrix[8] - res_matrix[48]|: large, so late), so the jobs scheduled before it can take its
  nodes; one that gets no shape waits (simulator/job.py:231-234). Here: a running job on a 3D plan
  holding >= release_3d GPUs releases them before step 1 (`Round.release_large_3d`); getting its
  option back is no change (the mechanism keeps its GPUs, as the artifact charges nothing for the
  same per-node counts, simulator/job.py:220). Not reproduced: in the artifact's simulator an
  emptied job that is not placed again keeps running on its old GPUs while they go to others
  (simulator.py:109 then 124-129 compare alloc_result with itself, so is_changed is always False
  and job.py:231-234 never clears the placement); here it loses them (docs/results.md, Rubick).
- Measured throughput (not a policy parameter): in the artifact's simulator a job runs at the
  measured iteration time of its placement and plan (simulator/job.py:165-171 ->
  sched/applications.py:101-130: the exact row of simulator/traces/<model>/placements.csv, else
  that placement's `ga` row, else a linear interpolation over nodes and GPUs), while the policy
  decides on the fitted model (res_matrix). bench/repro_rubick.py --run-measured does the same:
  jobs run at the measured time where the artifact has the exact (plan, placement) row
  (quanta/perf/plan_measured.py), the fitted model elsewhere; every policy decides on the fitted
  model (quanta/policies/decide_on.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.perf.base import best_plan_rate, host_memory_gb, rate_with
from quanta.policies.base import Policy
from quanta.policies.registry import register

EPS = 1e-9


@dataclass
class Options:
    """A job's curve: options (GPUs, CPU threads, host GB, plan, steps/s), cheapest first."""
    g: np.ndarray
    c: np.ndarray
    m: np.ndarray
    rate: np.ndarray
    plans: list
    floor: int = -1          # the cheapest option meeting the SLA (-1: none asked)
    note: str = ""           # the scale-out cap, when it removed options from this curve


def curve_options(snap: Snapshot, i: int, k: int, counts: list[int], cpu_options, sla_rate: float,
                  unit: tuple[float, float], cap=None, note: str = "") -> Options:
    """Rubick's resource-sensitivity curve of snapshot row i on GPU type k, made monotone.
    `cap(g, nodes, plan)`: whether an option is within the scale-out cap (None: no cap); `note`
    is kept on the curve when the cap removed an option."""
    spec, cl = snap.jobs.specs[i], snap.cluster
    cut = False
    gname, node_g = cl.types[k], int(cl.type_node_max[k])
    node_c, node_m = unit[0] * node_g, unit[1] * node_g
    rows = []
    for g in counts:
        nodes = cl.min_nodes(k, g)
        for cpg in (cpu_options if np.isfinite(node_c) else (0.0,)):
            c = float(cpg * g)
            if cpg * min(g, node_g) > node_c + EPS:   # more than a node holds for its GPUs there
                continue
            plan, r = best_plan_rate(snap.perf, spec, gname, g, nodes, True, c)
            if r <= 0:
                continue
            if cap is not None and not cap(g, nodes, plan):
                cut = True
                continue
            m = host_memory_gb(snap.perf, spec, plan)
            if m / nodes > node_m + EPS:
                continue
            rows.append((max(g, c / unit[0], m / unit[1]), g, c, m, r, plan))
    rows.sort(key=lambda x: (x[0], x[1], x[2]))
    keep, best = [], 0.0
    for row in rows:
        if row[4] > best * 1.01:
            keep.append(row)
            best = row[4]
    floor = -1
    if sla_rate > 0:
        meet = [row for row in rows if row[4] >= sla_rate * (1 - 1e-9)]
        if meet:
            f = meet[0]
            if f not in keep:
                keep.append(f)
                keep.sort(key=lambda x: (x[0], x[1], x[2]))
            floor = keep.index(f)
    return Options(np.array([r[1] for r in keep], dtype=np.int64), np.array([r[2] for r in keep]),
                   np.array([r[3] for r in keep]), np.array([r[4] for r in keep]),
                   [r[5] for r in keep], floor, note if cut else "")


@register("rubick", "Rubick: execution plans and GPUs / CPUs / memory by resource-sensitivity "
                    "curves, SLA for guaranteed jobs, best-effort jobs shrink to zero")
@dataclass
class Rubick(Policy):
    interval: float = 60.0
    min_gain: float = 0.1           # [U] relative gain a running job's reconfiguration must bring
    max_restarts: int = 5           # [C] jobs restarted this often are left alone
    max_gpus: int = 64              # [C] the curve's GPU range
    cpu_options: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 12.0, 16.0, 24.0)  # [U] threads per GPU
    # Where the artifact differs from the paper (module docstring, "Paper vs artifact"):
    shrink_running: bool = True     # R1: False = the artifact's: no job ever shrinks another
    scale_cap: str = "evidence"     # R2: evidence | node (the artifact's) | none
    normalize: str = "request"      # R3: request | model8 (the artifact's per-model constant)
    sla_admit: float = 1.0          # SLA: admitted when sla_admit x rate >= SLA (artifact 1.5)
    fill_node: bool = False         # (a): True = the artifact's: start / grow on one node's free GPUs
    release_3d: int = 0             # (b): 3D jobs on >= this many GPUs re-placed each round (artifact 32)
    _memo: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        from quanta.errors import QuantaError
        if self.scale_cap not in SCALE_CAPS:
            raise QuantaError(f"rubick: scale_cap must be one of {', '.join(SCALE_CAPS)}, "
                              f"got '{self.scale_cap}'")
        if self.normalize not in NORMALIZE:
            raise QuantaError(f"rubick: normalize must be one of {', '.join(NORMALIZE)}, "
                              f"got '{self.normalize}'")
        if not self.sla_admit > 0:
            raise QuantaError(f"rubick: sla_admit must be > 0, got {self.sla_admit}")
        if self.release_3d < 0:
            raise QuantaError(f"rubick: release_3d must be >= 0 (0: never), got {self.release_3d}")

    def decide(self, snap: Snapshot) -> Decision:
        j = snap.jobs
        n = len(j)
        if n == 0:
            return Decision.empty(snap)
        cl = snap.cluster
        k_of = np.where(j.allowed.any(axis=1), np.argmax(j.rates, axis=1), 0)
        t_orig = j.rates[np.arange(n), k_of]
        cap_c, cap_m = snap.resources
        G = cl.num_gpus
        unit = (cap_c / G if np.isfinite(cap_c) else np.inf, cap_m / G if np.isfinite(cap_m) else np.inf)
        opts = [self._options(snap, i, int(k_of[i]), float(t_orig[i]), unit) for i in range(n)]
        if self.normalize == "model8":
            norm = np.array([self._model_norm(snap, i, int(k_of[i]), unit) for i in range(n)])
            norm = np.where(norm > 0, norm, t_orig)
        else:
            norm = t_orig
        return Round(self, snap, opts, k_of, norm, unit).run()

    def _options(self, snap: Snapshot, i: int, k: int, t_orig: float, unit) -> Options:
        spec = snap.jobs.specs[i]
        sla = (spec.sla or 1.0) * t_orig / self.sla_admit if spec.guaranteed else 0.0
        cap = int(snap.cluster.capacity[k])
        key = (spec.job_type, spec.plan, spec.num_gpus, spec.cpus, k, sla, cap, unit)
        hit = self._memo.get(key)
        if hit is None:
            node_g = int(snap.cluster.type_node_max[k])
            top = min(self.max_gpus, cap)
            counts = sorted(set(range(1, min(node_g, top) + 1)) | set(range(node_g, top + 1, node_g))
                            | ({spec.num_gpus} if spec.num_gpus <= cap else set()))
            within, note = self._scale_cap(snap, spec, node_g)
            hit = curve_options(snap, i, k, counts, self.cpu_options, sla, unit, within, note)
            self._memo[key] = hit
        return hit

    def _scale_cap(self, snap: Snapshot, spec, node_g: int):
        """(whether an option (GPUs, nodes, plan) is within the cap, the cap in words) or (None, "")
        for no cap. The job's own requested GPU count is always within: the user asked for it."""
        if self.scale_cap == "none":
            return None, ""
        from quanta.perf.plan_evidence import describe, evidence_for
        ev = evidence_for(snap.perf, spec)
        if self.scale_cap == "evidence":
            if ev is None:                  # a model without a measured range: nothing to cap by
                return None, ""
            fam, rng = ev
            lim = dict(rng)
            note = describe(fam, rng)
        else:                               # "node": the artifact's DP jobs stay on one node
            lim = {"dp": (node_g, 1)}
            if ev is not None and "3d" in ev[1]:
                lim["3d"] = ev[1]["3d"]
            note = (f"{spec.job_type}: DP-family plans on one node (<= {node_g} GPUs)"
                    + (f", 3D <= {lim['3d'][0]} GPUs on <= {lim['3d'][1]} nodes" if "3d" in lim else ""))
        req = int(spec.num_gpus)

        def within(g: int, nodes: int, plan) -> bool:
            if g == req:
                return True
            got = lim.get("3d" if getattr(plan, "is_3d", False) else "dp")
            return got is not None and g <= got[0] and nodes <= got[1]

        return within, note

    def _model_norm(self, snap: Snapshot, i: int, k: int, unit) -> float:
        """R3, the artifact's normalisation: one constant per model, its throughput on one whole
        node (best plan, the node's CPU threads) [C: orig_tpt, e.g. sched/models/bert.py:17, is
        the batch over the measured 8-GPU iteration time]."""
        spec = snap.jobs.specs[i]
        key = ("norm", spec.job_type, k)
        hit = self._memo.get(key)
        if hit is None:
            cl = snap.cluster
            node_g = int(cl.type_node_max[k])
            c = float(unit[0] * node_g) if np.isfinite(unit[0]) else 0.0
            one = spec.with_(num_gpus=node_g, cpus=0.0, min_gpus=0, max_gpus=0)
            hit = float(best_plan_rate(snap.perf, one, cl.types[k], node_g, 1, True, c)[1])
            self._memo[key] = hit
        return hit


SCALE_CAPS = ("evidence", "node", "none")
NORMALIZE = ("request", "model8")


class Round:
    """One round's greedy over (job, option) moves; see the module docstring."""

    def __init__(self, pol: Rubick, snap: Snapshot, opts: list[Options], k_of, norm, unit):
        self.pol, self.snap, self.opts, self.k_of = pol, snap, opts, k_of
        j = snap.jobs
        n = len(j)
        self.n = n
        O = max([len(o.g) for o in opts] + [1]) + 1      # + the current allocation, if off-curve
        self.G = np.zeros((n, O))
        self.C = np.zeros((n, O))
        self.M = np.zeros((n, O))
        self.V = np.full((n, O), -np.inf)                 # value: rate / T_orig (-inf: no option)
        self.plans = [list(o.plans) + [None] * (O - len(o.plans)) for o in opts]
        self.at = np.full(n, -1, dtype=np.int64)          # option held / targeted (-1: none)
        self.floor_v = np.zeros(n)
        self.floor_at = np.full(n, -1, dtype=np.int64)
        norm = np.where(norm > 0, norm, 1.0)
        for i, o in enumerate(opts):
            L = len(o.g)
            self.G[i, :L], self.C[i, :L], self.M[i, :L] = o.g, o.c, o.m
            self.V[i, :L] = o.rate / norm[i]
            if o.floor >= 0:
                self.floor_at[i] = o.floor
                self.floor_v[i] = self.V[i, o.floor] * (1 - 1e-9)
        if pol.fill_node:                   # (a): the artifact's two placement paths
            self.one_node = self._artifact_paths(opts)
        self.unit = np.array([1.0, unit[0], unit[1]])
        self.modelled = np.flatnonzero(np.isfinite(self.unit)).tolist()   # resources costed
        # the current allocation of running jobs: an extra option (their plan and resources)
        run = np.flatnonzero(j.running)
        cl = snap.cluster
        for i in run.tolist():
            g, c, m, plan = int(j.gpus[i]), float(j.cpus[i]), float(j.mem_gb[i]), j.plan[i]
            nodes = len(np.unique(cl.gpu_node[j.placement[i]]))
            r = rate_with(snap.perf, j.specs[i], cl.types[int(j.gtype[i])], g, nodes,
                          bool(j.consolidated[i]), plan, c, m)
            self.G[i, O - 1], self.C[i, O - 1], self.M[i, O - 1] = g, c, m
            self.V[i, O - 1] = r / norm[i]
            self.plans[i][O - 1] = plan
            self.k_of[i] = int(j.gtype[i]) if int(j.gtype[i]) >= 0 else self.k_of[i]
            self.at[i] = O - 1
        self.cur = self.at.copy()
        self.was_running = j.running.copy()
        self.frozen = j.restarts >= pol.max_restarts
        K = len(cl.types)
        self.free_g = snap.capacity.astype(float) - np.bincount(
            self.k_of[run], weights=j.gpus[run], minlength=K)
        self.free_c = snap.resources[0] - float(j.cpus[run].sum())
        self.free_m = snap.resources[1] - float(j.mem_gb[run].sum())
        self.raised = np.zeros(n, dtype=bool)
        self.shrunk = np.zeros(n, dtype=bool)
        self.R = np.stack([self.G, self.C, self.M], axis=2)   # (job, option, resource)
        self.finite = np.isfinite(self.V)
        if pol.release_3d > 0:
            self.release_large_3d(sum(s.guaranteed for s in j.specs))
        # never a victim: a running job restarted max_restarts times, or any running job when
        # running jobs are not shrunk for others (R1, the artifact)
        self.pinned = self.was_running & (self.frozen | (not pol.shrink_running))
        self._shrink: dict = {}

    # -- helpers ---------------------------------------------------------------------------------
    def held(self, i: int) -> np.ndarray:
        a = self.at[i]
        return np.zeros(3) if a < 0 else np.array([self.G[i, a], self.C[i, a], self.M[i, a]])

    def value(self, i: int) -> float:
        return 0.0 if self.at[i] < 0 else float(self.V[i, self.at[i]])

    def cost(self, delta: np.ndarray) -> np.ndarray:
        """Dominant normalised cost of a resource change (last axis: GPUs, CPUs, memory; resources
        the cluster does not model cost nothing)."""
        out = np.full(delta.shape[:-1], EPS)
        for r in self.modelled:
            np.maximum(out, np.maximum(delta[..., r], 0.0) / self.unit[r], out=out)
        return out

    def short(self, i: int, need: np.ndarray) -> np.ndarray:
        free = np.array([self.free_g[self.k_of[i]], self.free_c, self.free_m])
        return need - free

    def move(self, i: int, o: int) -> None:
        d = (np.array([self.G[i, o], self.C[i, o], self.M[i, o]]) if o >= 0 else np.zeros(3)) - self.held(i)
        self.free_g[self.k_of[i]] -= d[0]
        self.free_c -= d[1]
        self.free_m -= d[2]
        self.at[i] = o

    def _fits(self, i: int, o: int) -> bool:
        need = np.array([self.G[i, o], self.C[i, o], self.M[i, o]]) - self.held(i)
        return bool(np.all(self.short(i, need) <= EPS))

    def may_change(self, i: int) -> bool:
        return not (self.frozen[i] and self.was_running[i])

    def shrink_table(self, pattern: tuple[bool, bool, bool]) -> tuple[np.ndarray, np.ndarray]:
        """Every job's cheapest way to free some of the resources flagged in `pattern` (GPUs,
        CPUs, memory short): (loss per freed unit, option; -1 = down to nothing, -2 = none) per job.
        Kept per pattern and recomputed only for the jobs whose option or `raised` flag changed
        since (a job's best shrink depends on nothing else)."""
        t = self._shrink.get(pattern)
        if t is None:
            t = self._shrink[pattern] = [np.full(self.n, np.inf), np.full(self.n, -2, dtype=np.int64),
                                         np.full(self.n, -3, dtype=np.int64), self.raised.copy()]
        ratio, opt, at_c, raised_c = t
        rows = np.flatnonzero((self.at != at_c) | (self.raised != raised_c))
        if rows.size:
            at_c[rows], raised_c[rows] = self.at[rows], self.raised[rows]
            # never a victim (holds nothing, was raised this round, or pinned): no shrink
            none = (self.at[rows] < 0) | self.raised[rows] | self.pinned[rows]
            ratio[rows[none]], opt[rows[none]] = np.inf, -2
            rows = rows[~none]
            if rows.size:
                ratio[rows], opt[rows] = self._shrink_rows(rows, np.array(pattern))
        return ratio, opt

    def _shrink_rows(self, rows: np.ndarray, short: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Vectorised over `rows` x options: candidates are the other options at or above the
        job's SLA floor (and nothing at all when it has no floor) that free some short resource and
        take none; the best has the lowest loss per freed unit (rounded to 1e-9), then the
        smaller step, then the lower option index with "nothing" last."""
        m, O = rows.size, self.V.shape[1]
        a = self.at[rows]
        has = a >= 0
        held = np.where(has[:, None], self.R[rows, np.maximum(a, 0)], 0.0)           # (m, 3)
        res = np.concatenate([self.R[rows], np.zeros((m, 1, 3))], axis=1)             # (m, O+1, 3)
        v = np.concatenate([np.where(self.finite[rows], self.V[rows], 0.0), np.zeros((m, 1))], axis=1)
        cand = np.concatenate([self.finite[rows] & (np.arange(O) != a[:, None])
                               & (self.V[rows] >= self.floor_v[rows, None]),
                               (self.floor_at[rows] < 0)[:, None]], axis=1)
        cand &= (has & ~self.raised[rows] & ~self.pinned[rows])[:, None]
        freed = held[:, None, :] - res
        cand &= ((freed > EPS) & short).any(axis=2) & ~(res > held[:, None, :] + EPS).any(axis=2)
        size = self.cost(freed)
        v0 = np.where(has, self.V[rows, np.maximum(a, 0)], 0.0)
        ratio = (v0[:, None] - v) / size
        key = np.where(cand, np.round(ratio, 9), np.inf)
        tie = cand & (key == key.min(axis=1, keepdims=True))
        step = np.where(tie, size, np.inf)
        pick = np.argmax(tie & (step == step.min(axis=1, keepdims=True)), axis=1)
        found = cand.any(axis=1)
        out_r = np.where(found, ratio[np.arange(m), pick], np.inf)
        out_o = np.where(found, np.where(pick == O, -1, pick), -2)
        return out_r, out_o

    def fund(self, i: int, need: np.ndarray, limit: float) -> bool:
        """Take resources from victims (loss per unit < limit) until `need` fits; undo if not.
        Victim: the lowest loss per freed unit over all jobs (ties: the lower row)."""
        undo: list[tuple[int, int]] = []
        k = int(self.k_of[i])
        while np.any((s := self.short(i, need)) > EPS):
            ratio, opt = self.shrink_table(tuple((s > EPS).tolist()))
            r = ratio.copy()
            r[i] = np.inf
            if s[0] > 0:
                r[self.k_of != k] = np.inf
            v = int(np.argmin(r))
            if not r[v] < limit:
                for vv, oo in reversed(undo):
                    self.move(vv, oo)
                    self.shrunk[vv] = False
                return False
            undo.append((v, int(self.at[v])))
            self.move(v, int(opt[v]))
            self.shrunk[v] = True
        return True

    # -- the artifact's node-by-node behaviours ((a) fill_node, (b) release_3d) ----------------------
    def _artifact_paths(self, opts: list[Options]) -> np.ndarray:
        """(a) [C: morphling.py:111, 130]: per job, whether the artifact places it data-parallel on
        one node (every model but its 3D ones); a job of a 3D model keeps only the options on the
        artifact's GPU counts for it (quanta/perf/plan_shapes.py), its SLA floor moved to the
        cheapest of those that meets it."""
        from quanta.perf.plan_shapes import artifact_3d_gpus
        one = np.ones(self.n, dtype=bool)
        for i, spec in enumerate(self.snap.jobs.specs):
            counts = artifact_3d_gpus(spec.job_type)
            if counts is None:
                continue
            one[i] = False
            L = len(opts[i].g)
            self.V[i, :L] = np.where(np.isin(self.G[i, :L], counts), self.V[i, :L], -np.inf)
            if self.floor_at[i] >= 0:
                meet = np.flatnonzero(np.isfinite(self.V[i, :L]) & (self.V[i, :L] >= self.floor_v[i]))
                self.floor_at[i] = meet[0] if meet.size else -1
        return one

    def release_large_3d(self, n_guaranteed: int) -> None:
        """(b) [C: morphling.py:65-73]: a running job on a 3D plan holding >= `release_3d` GPUs gives
        them all back before anything is decided, unless it restarted 7 times or more while at most
        12 guaranteed jobs are active; it is then placed again like a pending job (keeping its
        option again is no change: it keeps its GPUs). Not left alone for `max_restarts`: the
        artifact re-places it regardless."""
        j = self.snap.jobs
        for i in np.flatnonzero(self.was_running & (j.gpus >= self.pol.release_3d)).tolist():
            if getattr(j.plan[i], "is_3d", False) and (j.restarts[i] < 7 or n_guaranteed > 12):
                self.move(i, -1)
                self.frozen[i] = False

    def node_free(self) -> np.ndarray:
        """(nodes, 3): free GPUs, CPU threads and host GB per node, given what jobs hold now (a
        running job's CPUs and memory counted on its nodes in proportion to its GPUs there)."""
        snap, j, cl = self.snap, self.snap.jobs, self.snap.cluster
        up = np.asarray(snap.node_up, dtype=bool)
        free = np.zeros((len(cl.nodes), 3))
        free[:, 0] = np.where(up, cl.node_gpus, 0)
        for r, u in ((1, "cpus"), (2, "mem_gb")):
            free[:, r] = ([float(getattr(nd, u)) if up[x] else 0.0 for x, nd in enumerate(cl.nodes)]
                          if np.isfinite(self.unit[r]) else np.inf)
        for i in np.flatnonzero(self.at >= 0).tolist():
            cnt = np.bincount(cl.gpu_node[j.placement[i]], minlength=len(cl.nodes)).astype(float)
            free -= self.R[i, self.at[i]][None, :] * (cnt / max(cnt.sum(), 1.0))[:, None]
        return free

    def value_within(self, i: int, g: int) -> float:
        """The best value of job i on at most g GPUs (0: none); the artifact's res_matrix[g]."""
        ok = self.finite[i] & (self.G[i] <= g)
        return float(self.V[i, ok].max()) if ok.any() else 0.0

    def best_within(self, i: int, budget: np.ndarray) -> int:
        """Job i's best option (cheapest of the best) within `budget` (GPUs, CPUs, GB) and at or
        above its SLA floor; -1 if none."""
        ok = self.finite[i] & np.all(self.R[i] <= budget[None, :] + EPS, axis=1) & \
            (self.V[i] >= self.floor_v[i]) & (self.G[i] > 0)
        if not ok.any():
            return -1
        v = np.where(ok, self.V[i], -np.inf)
        return int(np.argmax(v >= v.max() * (1 - 1e-12)))

    def fill(self, guaranteed: np.ndarray) -> None:
        """(a) [C: morphling.py:75-89 schedule_job, 127-160, alloc_per_node 212-319]: jobs are taken
        guaranteed first, then by the value one more GPU would add, lowest first (job_list, lines
        51-63; one more GPU capped at a node, job_res_slope lines 339-362). A job on the one-node
        path (`_artifact_paths`) holding nothing is offered all the free GPUs (CPUs, memory) of
        the node with the most free GPUs (lines 131-136, 222-229) and takes the best option within
        them (line 314); one running on one node is offered its own plus that node's free ones
        (lines 224-226) and grows if that gains at least `min_gain` [U: the artifact has no such
        bar]. A guaranteed job starts only where that option meets its SLA (sla_admit; lines
        309-313). A job of a 3D model holding nothing gets the first of the artifact's GPU counts
        for it that fits (`_fill_span`; lines 161-173, 389-454); it grows later in the
        steepest-gain pass (the artifact's 3D scale-up, lines 100-123). Jobs on the one-node path
        grow no further this round (`run`)."""
        j, cl = self.snap.jobs, self.snap.cluster
        free = self.node_free()
        # the order is taken on what jobs held at the start of the round, before (b) [C: lines
        # 46-63 before 65-73]; a 3D-model job's gain is 0 (its res_matrix is -1 at every count in
        # the artifact: it comes first, by submission)
        was = self.cur >= 0
        more = np.array([0.0 if not self.one_node[i] else
                         abs(self.value_within(i, min(int(self.G[i, self.cur[i]]) + 1 if was[i] else 1,
                                                      int(cl.type_node_max[self.k_of[i]])))
                             - (self.V[i, self.cur[i]] if was[i] else 0.0)) for i in range(self.n)])
        held = self.at >= 0
        order = np.lexsort((j.rows, j.submit, more, ~guaranteed))
        for i in order.tolist():
            if not self.may_change(i) or (held[i] and not self.one_node[i]):
                continue
            mine = np.flatnonzero(cl.node_type == self.k_of[i])
            if held[i]:
                where = np.unique(cl.gpu_node[j.placement[i]])
                if self.at[i] != self.cur[i] or where.size != 1:
                    continue
                n = int(where[0])
                o = self.best_within(i, free[n] + self.held(i))
                if o < 0 or not self.V[i, o] > self.value(i) * (1 + self.pol.min_gain) + 1e-9:
                    continue
                take = {n: self.R[i, o] - self.held(i)}
            else:
                by_free = mine[np.argsort(-free[mine, 0], kind="stable")]
                if self.one_node[i]:
                    o = self.best_within(i, free[by_free[0]])
                    take = {int(by_free[0]): self.R[i, o]} if o >= 0 else {}
                else:
                    o, take = self._fill_span(i, free, by_free)
                if o < 0:
                    continue
            self.move(i, o)
            self.raised[i] = True
            for n, d in take.items():
                free[n] -= d

    def _fill_span(self, i: int, free: np.ndarray, by_free: np.ndarray) -> tuple[int, dict]:
        """(a) for a job of a 3D model: the first of the artifact's GPU counts for it, in its order,
        whose best option (at or above the SLA floor) fits the free GPUs of its fewest nodes, most
        free first; (option, {node: (GPUs, CPUs, GB) taken}) or (-1, {})."""
        from quanta.perf.plan_shapes import artifact_3d_gpus
        cl = self.snap.cluster
        ok = self.finite[i] & (self.V[i] >= self.floor_v[i])
        for g in artifact_3d_gpus(self.snap.jobs.specs[i].job_type):
            at = np.flatnonzero(ok & (self.G[i] == g))
            if not at.size:
                continue
            o = int(at[np.argmax(self.V[i, at])])
            nodes = by_free[:cl.min_nodes(int(self.k_of[i]), g)]
            left, take = float(g), {}
            for n in nodes.tolist():
                k = min(left, free[n, 0])
                take[n] = self.R[i, o] * (k / g)
                left -= k
            if left <= EPS and all(np.all(free[n] >= t - EPS) for n, t in take.items()):
                return o, take
        return -1, {}

    # -- the round ---------------------------------------------------------------------------------
    def run(self) -> Decision:
        j = self.snap.jobs
        guaranteed = np.array([s.guaranteed for s in j.specs], dtype=bool)
        order = np.lexsort((j.rows, j.submit, ~guaranteed))
        if self.pol.fill_node:                  # (a) the artifact's node-by-node start first
            self.fill(guaranteed)
        # 1. SLAs of guaranteed jobs, oldest first
        for i in order.tolist():
            f = int(self.floor_at[i])
            if f < 0 or self.value(i) >= self.floor_v[i] and self.at[i] >= 0:
                continue
            need = np.array([self.G[i, f], self.C[i, f], self.M[i, f]]) - self.held(i)
            if self.fund(i, need, np.inf):
                self.move(i, f)
                self.raised[i] = True
        # 2. steepest marginal gain (a job's best move depends on its own state only: cached)
        slope = np.zeros(self.n)
        best_o = np.full(self.n, -1, dtype=np.int64)
        grows = ~self.one_node if self.pol.fill_node else np.ones(self.n, dtype=bool)  # (a)
        rows = np.flatnonzero(~(self.frozen & self.was_running) & ~self.shrunk & grows)
        slope[rows], best_o[rows] = self._best_moves(rows)
        for _ in range(8 * self.n + 16):
            bi = int(np.argmax(slope))
            best, bo = float(slope[bi]), int(best_o[bi])
            if best <= 0:
                break
            need = np.array([self.G[bi, bo], self.C[bi, bo], self.M[bi, bo]]) - self.held(bi)
            before = self.at.copy()
            if self.fund(bi, need, best):
                self.move(bi, bo)
                self.raised[bi] = True
                (slope[bi],), (best_o[bi],) = self._best_moves(np.array([bi]))
                slope[(self.at != before) & self.shrunk] = 0.0
            else:
                slope[bi] = 0.0
        return self._decision(order)

    def _best_moves(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each row's steepest move: (value gained per unit of dominant cost, option); (0, -1)
        where no option gains (a running job kept as it is must gain `min_gain`)."""
        a = self.at[rows]
        has = a >= 0
        a0 = np.maximum(a, 0)
        V = self.V[rows]
        v0 = np.where(has, V[np.arange(rows.size), a0], 0.0)
        ok = self.finite[rows].copy()
        ok[np.flatnonzero(has), a[has]] = False
        kept = self.was_running[rows] & (a == self.cur[rows])
        need_gain = np.where(kept, self.pol.min_gain * v0, 0.0)
        ok &= (V > (v0 + np.maximum(need_gain, 1e-9))[:, None]) & (V >= self.floor_v[rows, None])
        held = np.where(has[:, None], self.R[rows, a0], 0.0)                          # (m, 3)
        delta = self.R[rows] - held[:, None, :]                                       # (m, O, 3)
        slope = np.where(ok, (V - v0[:, None]) / self.cost(delta), -np.inf)
        o = np.argmax(slope, axis=1)
        found = ok.any(axis=1)
        return (np.where(found, slope[np.arange(rows.size), o], 0.0),
                np.where(found, o, -1))

    def _decision(self, order: np.ndarray) -> Decision:
        snap = self.snap
        from quanta.core.mechanism import dry_run
        n = self.n
        for _ in range(4):
            dec = Decision.empty(snap)
            dec.order = order
            dec.cpus = np.zeros(n)
            dec.mem_gb = np.zeros(n)
            for i in np.flatnonzero(self.at >= 0).tolist():
                a = self.at[i]
                dec.gpus[i] = int(self.G[i, a])
                dec.gpu_type[i] = int(self.k_of[i])
                dec.cpus[i], dec.mem_gb[i] = self.C[i, a], self.M[i, a]
                dec.plans[i] = self.plans[i][a]
                dec.consolidate.add(i)    # the curves assume the fewest nodes: that, or wait
            placed = dry_run(snap, dec)
            miss = np.flatnonzero((self.at >= 0) & ~placed)
            if miss.size == 0:
                return self._noted(dec)
            for i in miss.tolist():       # keeps what it holds if that still fits, or waits
                back = int(self.cur[i]) if self.at[i] != self.cur[i] else -1
                self.move(i, -1)
                if back >= 0 and self._fits(i, back):
                    self.move(i, back)
        dec.gpus[~placed] = 0
        dec.gpu_type[~placed] = -1
        dec.cpus[~placed] = 0.0
        dec.mem_gb[~placed] = 0.0
        return self._noted(dec)

    def _noted(self, dec: Decision) -> Decision:
        """R2: the decision says which scale-out caps cut this round's curves (Decision.state
        "notes" -> "scale_cap": one line per model family; empty when none did)."""
        if self.pol.scale_cap != "none":
            dec.state = {"notes": {"scale_cap": sorted({o.note for o in self.opts if o.note})}}
        return dec
