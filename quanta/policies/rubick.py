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
A round reads the jobs, what they hold and the cluster, never the clock or the jobs' progress: a
round whose inputs are those of the last one (`reuse.round_inputs`) has the last one's answer, given
again without the greedy (on synthetic:3:300 on gavel-108, 22,330 of 23,325 rounds).
Homogeneous clusters as in the paper; on several GPU types each job uses its fastest allowed type
[U] (a running job the type it holds: a queue layer may have put it on another). Rubick does not
share GPUs and needs no job lengths.

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
- R5 network bandwidth (not allocated, as in the artifact's policy). The artifact's curves have a
  bandwidth axis (performance_model.py:38, 169-178: 0 = NVLink, 1-10 network units; its model reads
  any network bandwidth as 2, pred_throughput.py:191-192) and each node offers 10 units
  (resources.py:44-45, "hack bandwidth setting"), but its policy reads the curves at bandwidth 0
  only (morphling.py:346-359, `res_matrix[g][1][0]`): no job is given or denied bandwidth. Here a
  job spread over nodes runs at the network its placement gives it (the plan model's NIC share,
  quanta/perf/plan.py `_nic_share`); `Decision.net_gbps` (a cap the drivers charge) is left unset.
- R6 (not a policy parameter): the artifact's simulator advances its jobs and clock one interval
  before each policy call (simulator.py:76-107, `Cluster.step`), so its first call is at 60 s and
  jobs that arrive at 0 wait for it; Quanta's engine decides a round at the first arrival. In
  Quanta: Simulator(round_at_zero=False); bench/repro_rubick.py --first-round-late.
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
from quanta.perf.base import best_plan_rate, host_memory_gb
from quanta.policies.base import INF, Policy, require
from quanta.policies.registry import register
from quanta.policies.reuse import keep_decision, last_decision, round_inputs

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
                              f"got '{self.scale_cap}'", field="--policy")
        if self.normalize not in NORMALIZE:
            raise QuantaError(f"rubick: normalize must be one of {', '.join(NORMALIZE)}, "
                              f"got '{self.normalize}'", field="--policy")
        require(len(self.cpu_options) > 0 and all(0 < c < INF for c in self.cpu_options),
                "rubick", "cpu_options", "/".join(f"{c:g}" for c in self.cpu_options) or "nothing",
                "CPU threads per GPU to try: positive numbers, a/b/c")
        require(0 < self.sla_admit < INF, "rubick", "sla_admit", self.sla_admit,
                "a positive number")
        require(0 <= self.release_3d < INF, "rubick", "release_3d", self.release_3d,
                "0 (never) or more")
        require(0 <= self.min_gain < INF, "rubick", "min_gain", self.min_gain, "0 or more")
        require(self.max_restarts >= 0, "rubick", "max_restarts", self.max_restarts, "0 or more")
        require(self.max_gpus >= 1, "rubick", "max_gpus", self.max_gpus, "1 or more")

    def decide(self, snap: Snapshot) -> Decision:
        j = snap.jobs
        n = len(j)
        if n == 0:
            return Decision.empty(snap)
        inputs = round_inputs(snap)
        last = last_decision(self._memo, inputs)
        if last is not None:
            return last
        cl = snap.cluster
        # a job's curve is on its fastest type, or on the type it holds (a queue layer may have
        # put it on another; its curve on the fastest type asked for counts it cannot run at)
        fastest = np.where(j.allowed.any(axis=1), np.argmax(j.rates, axis=1), 0)
        k_of = np.where(j.running & (j.gtype >= 0), j.gtype, fastest)
        t_orig = j.rates[np.arange(n), k_of]
        t_orig = np.where(t_orig > 0, t_orig, j.rates[np.arange(n), fastest])
        cap_c, cap_m = snap.resources
        G = cl.num_gpus
        unit = (cap_c / G if np.isfinite(cap_c) else np.inf, cap_m / G if np.isfinite(cap_m) else np.inf)
        opts = [self._options(snap, i, int(k_of[i]), float(t_orig[i]), unit) for i in range(n)]
        if self.normalize == "model8":
            norm = np.array([self._model_norm(snap, i, int(k_of[i]), unit) for i in range(n)])
            norm = np.where(norm > 0, norm, t_orig)
        else:
            norm = t_orig
        from quanta.policies.rubick_round import Round
        dec = Round(self, snap, opts, k_of, norm, unit).run()
        keep_decision(self._memo, inputs, dec)
        return dec

    def _options(self, snap: Snapshot, i: int, k: int, t_orig: float, unit) -> Options:
        spec = snap.jobs.specs[i]
        sla = (spec.sla or 1.0) * t_orig / self.sla_admit if spec.guaranteed else 0.0
        cap = int(snap.cluster.capacity[k])
        key = (spec.job_type, spec.plan, spec.num_gpus, spec.cpus, spec.phase, k, sla, cap, unit)
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
        the batch over the measured 8-GPU iteration time], at the start of training (phase 0:
        for a model whose rate changes as training goes on, one constant still)."""
        spec = snap.jobs.specs[i]
        key = ("norm", spec.job_type, k)
        hit = self._memo.get(key)
        if hit is None:
            cl = snap.cluster
            node_g = int(cl.type_node_max[k])
            c = float(unit[0] * node_g) if np.isfinite(unit[0]) else 0.0
            one = spec.with_(num_gpus=node_g, cpus=0.0, min_gpus=0, max_gpus=0, phase=0)
            hit = float(best_plan_rate(snap.perf, one, cl.types[k], node_g, 1, True, c)[1])
            self._memo[key] = hit
        return hit


SCALE_CAPS = ("evidence", "node", "none")
NORMALIZE = ("request", "model8")
