"""Rubick-style white-box performance model over execution plans (DP/TP/PP, ZeRO, ZeRO-Offload,
gradient accumulation, gradient checkpointing) on A800-80GB nodes.

Units: time in ms, parameter counts in Mi-params (2**20), bandwidths in GB/s (taken as MB/ms).

Iteration time of a data-parallel family plan (ga, gc, zero-dp, zero-offload[+gc]) on d GPUs:
    F      = profiled forward time of the global batch on d GPUs (power law fwd1 * d**-a, fitted on the
             profile's forward times; a ~ 1: each GPU runs 1/d of the batch)
    bwd    = k_bwd * F
    sync   = ((V/B)**g + bwd**g)**(1/g),   g = k_sync,  V = 8 P (d-1)/d  (fp32 ring all-reduce;
             ZeRO-2's reduce-scatter + all-gather moves the same volume)
    off    = 4 P / d / B_pcie                          (ZeRO-Offload gradient/param traffic)
    opt    = k_opt P (plain DP) | k_opt P / d (ZeRO) | k_os_offload P / (d c)  (CPU Adam, c threads/GPU)
    T_iter = F + (alpha_f - 1) F + sync [+ k_off + off] + opt [+ k_swap] + k_const
with alpha_f = 2 under gradient checkpointing (the forward is recomputed in the backward).
3D plans (pp, tp, dp), Megatron order (tp innermost, then dp, then pp), one micro-batch per replica
(the measured Rubick runs do not get faster with PP: the pipeline carries one micro-batch):
    s = B/dp samples per replica, F = fwd1 * s / B / tp
    T_iter = F + ((V_dp/B_dp)**g + (k_bwd F)**g)**(1/g) + k_opt P/(tp pp) + k_const + T_tp + T_pp
    V_dp = 8 P/(tp pp) (dp-1)/dp,  T_tp = 32 s seqhid L (tp-1)/tp / B_tp,  T_pp = 4 s seqhid/tp (pp-1) / B_pp
    (the artifact: T_pp = 16 s seqhid/tp pp / 20 GB/s; PP_TRAFFIC below)
B is the model's effective NVLink bus bandwidth when the group sits in one node, else the network
times the group's share of each node's NICs (`_nic_share`: all groups of one dimension communicate at
once, so a group holding g of a node's n GPUs gets g/n of that node's NIC bandwidth).
ZeRO-Offload with checkpointing: the recompute ((alpha_f - 1) F) runs while the gradients are copied
to the host on a side stream, so the two combine by the same overlap form,
((k_off + off)**g + ((alpha_f - 1) F)**g)**(1/g), instead of adding (no change without checkpointing).

Bandwidths: the per-model effective NVLink and PCIe bandwidths are the artifact's measured constants
(`env_B_nvlink`, `env_B_pcie` in model_specs_simulator.csv: 30-160 GB/s all-reduce bus bandwidth,
well under the 400 GB/s NVLink peak). Between nodes: 12.5 GB/s per NIC (the testbed's "100 GB/s RDMA"
read as 100 Gb/s; an all-reduce over 100 Gb/s cannot beat 12.5 GB/s), with one NIC per 2 GPUs of the
job's smallest node share, at most 4 (NCCL runs one ring per NIC rail).

Memory (per GPU, bytes; mixed-precision Adam = 2 fp16 weights + 2 fp16 grads + 12 fp32 master/m/v):
    states: no ZeRO 16 P; ZeRO-1 4 P + 12 P/d; ZeRO-2 2 P + 14 P/d; ZeRO-3 16 P/d;
            ZeRO-Offload 2 P (fp16 weights stay; grads + optimizer go to host: 16 P/d per GPU in host RAM);
            3D 16 P/(tp pp)
    activations: 34 seq hidden bytes per layer per sample (Korthikanti et al., flash attention),
            2 seq hidden per layer + one full layer with checkpointing; micro-batch 1 for GA plans,
            B/d for gc; 3D: s samples over L/pp layers, divided by tp
    + 3 GB runtime/workspace; feasible when <= 80 GB per GPU and the host states <= 1600 GB per node.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from quanta.paths import PROFILES_DIR

RUBICK_DIR = PROFILES_DIR / "rubick"
GPU_MEM_GB = 80.0
HOST_MEM_GB = 1600.0
GPUS_PER_NODE = 8
NIC_GBPS = 12.5            # one 100 Gb/s RDMA NIC, GB/s
RUNTIME_GB = 3.0
DEFAULT_THREADS_PER_GPU = 4  # the profiles' CPU threads per GPU for offload runs
MIB = 2 ** 20

DP_KINDS = ("ga", "gc", "zero-dp", "zero-offload", "zero-offload+gc")


# -- execution plans ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ExecutionPlan:
    dp: int = 1
    tp: int = 1
    pp: int = 1
    zero: int = 0              # 0 none, 1/2/3 ZeRO stage
    offload: bool = False      # ZeRO-Offload (optimizer on CPU)
    ga_steps: int = 1          # 1 = no accumulation, 0 = accumulate as needed (micro-batch 1)
    checkpointing: bool = False
    megatron: bool = False     # written as 3 digits (pp, tp, dp)

    @property
    def num_gpus(self) -> int:
        return self.dp * self.tp * self.pp

    @property
    def is_3d(self) -> bool:
        return self.megatron or self.tp > 1 or self.pp > 1

    def label(self) -> str:
        if self.megatron:
            return f"{self.pp}{self.tp}{self.dp}"
        if self.tp > 1 and self.pp == 1:
            return "tp+ga" if self.ga_steps != 1 else f"tp{self.tp}"
        if self.offload:
            return "zero-offload+gc" if self.checkpointing else "zero-offload"
        if self.zero:
            name = "zero-dp" if self.zero == 2 else f"zero{self.zero}-dp"
            return name + ("+gc" if self.checkpointing else "")
        return "gc" if self.checkpointing else "ga"

    def family(self) -> str:
        """The paper's table-2 plan family."""
        if self.is_3d:
            return "DP+TP+PP" if self.dp > 1 else "TP+PP"
        if self.offload:
            return "ZeRO-Offload+GC" if self.checkpointing else "ZeRO-Offload"
        if self.zero:
            return "ZeRO-DP+GA"
        return "GC" if self.checkpointing else "DP"


# the plan strings parse_plan reads
PLAN_FORMS = "ga, gc, zero-dp, zero1-dp, zero3-dp, zero-offload[+gc], tp+ga, or three digits PP TP DP"


def parse_plan(text: str, num_gpus: int) -> ExecutionPlan:
    """Parse a Rubick plan string (PLAN_FORMS); three digits 'abc' = PP a, TP b, DP c (for the
    3-digit form num_gpus is not used)."""
    t = text.strip().lower()
    n = max(int(num_gpus), 1)
    if len(t) == 3 and t.isdigit():
        pp, tp, dp = (int(ch) for ch in t)
        if min(pp, tp, dp) < 1:
            raise ValueError(f"bad 3D plan {text!r} (three digits PP TP DP, each 1 or more)")
        return ExecutionPlan(dp=dp, tp=tp, pp=pp, megatron=True)
    parts = set(t.split("+"))
    gc = "gc" in parts
    if t in ("ga", "dp", ""):
        return ExecutionPlan(dp=n, ga_steps=0)
    if t == "gc":
        return ExecutionPlan(dp=n, checkpointing=True)
    if "tp" in parts:
        return ExecutionPlan(tp=n, ga_steps=0 if "ga" in parts else 1, checkpointing=gc)
    if "zero-offload" in parts:
        return ExecutionPlan(dp=n, zero=2, offload=True, ga_steps=0, checkpointing=gc)
    for stage, name in ((2, "zero-dp"), (1, "zero1-dp"), (2, "zero2-dp"), (3, "zero3-dp")):
        if name in parts:
            return ExecutionPlan(dp=n, zero=stage, ga_steps=0, checkpointing=gc)
    raise ValueError(f"unknown execution plan {text!r} ({PLAN_FORMS})")


# -- models and resources ----------------------------------------------------------------------
@dataclass(frozen=True)
class ModelSpec:
    name: str                  # family key (vit, roberta, bert, t5, gpt2, llama7, llama30)
    params: float              # parameter count
    seq: int
    hidden: int
    layers: int
    batch: int                 # global batch per iteration (kept across reconfigurations)
    fwd1_ms: float             # forward time of the global batch on one GPU
    fwd_exp: float = 1.0       # F(d) = fwd1 * d**-fwd_exp (fitted on the profiled forward times)
    b_nvlink: float = 150.0    # effective intra-node all-reduce bandwidth, GB/s
    b_pcie: float = 10.0       # effective host<->GPU bandwidth for offload, GB/s
    kinds: tuple[str, ...] = DP_KINDS   # DP-family plans this model runs
    allow_3d: bool = False

    @property
    def p_mib(self) -> float:
        return self.params / MIB

    @property
    def seqhid(self) -> float:
        return float(self.seq * self.hidden)

    def forward_ms(self, d: int | np.ndarray) -> np.ndarray:
        return self.fwd1_ms * np.asarray(d, dtype=float) ** -self.fwd_exp


@dataclass(frozen=True)
class Resources:
    gpus: int
    placement: tuple[int, ...] = ()      # GPUs per node; () = consolidated in 8-GPU nodes
    cpu_threads: int = 0                 # total CPU threads; 0 = DEFAULT_THREADS_PER_GPU per GPU
    host_mem_gb: float = HOST_MEM_GB     # per node
    nvlink_gbps: float = 400.0           # nominal; scales the model's effective NVLink bandwidth
    network_gbps: float = NIC_GBPS       # per NIC
    net_cap_gbps: float = 0.0            # network GB/s a node grants the job (its least); 0 = no cap

    def nodes(self) -> tuple[int, ...]:
        return self.placement or consolidated(self.gpus)

    def threads_per_gpu(self) -> float:
        return self.cpu_threads / self.gpus if self.cpu_threads else float(DEFAULT_THREADS_PER_GPU)


def consolidated(n: int, per_node: int = GPUS_PER_NODE) -> tuple[int, ...]:
    full, rest = divmod(int(n), per_node)
    return (per_node,) * full + ((rest,) if rest else ())


def spread(n: int, nodes: int) -> tuple[int, ...]:
    base, rest = divmod(int(n), max(nodes, 1))
    out = (base + (1 if i < rest else 0) for i in range(max(nodes, 1)))
    return tuple(x for x in out if x > 0)


def parse_placement(text: str) -> tuple[int, ...]:
    return tuple(int(ch) for ch in str(text).strip())


def _net_bw(nodes: Sequence[int], network: float) -> float:
    rails = min(4, max(1, min(nodes) // 2))
    return network * rails


def _group_in_node(nodes: Sequence[int], size: int, stride: int, total: int) -> bool:
    """Whether every group of `size` ranks `stride` apart stays inside one node."""
    owner = np.repeat(np.arange(len(nodes)), nodes)[:total]
    ranks = np.arange(total)
    base = ranks - (ranks // stride % size) * stride      # first member of each rank's group
    return bool(np.all(owner[ranks] == owner[base]))


def _nic_share(nodes: Sequence[int], size: int, stride: int, total: int) -> float:
    """Share of a node's NIC bandwidth one group of `size` ranks `stride` apart gets when every
    group of that kind communicates at once (the groups of a 3D plan's DP, TP or PP dimension run
    their collectives in the same phase): a node's NICs are split over its GPUs, so a group holding
    g of a node's n GPUs gets g / n of them; the group's ring is as fast as its worst node."""
    k = len(nodes)
    owner = np.repeat(np.arange(k), nodes)[:total]
    ranks = np.arange(total)
    base = ranks - (ranks // stride % size) * stride      # first member of each rank's group
    pairs, counts = np.unique(base * k + owner, return_counts=True)   # (group, node) -> ranks
    group, node = pairs // k, pairs % k
    spans = np.bincount(group, minlength=total)[group] > 1
    if not spans.any():
        return 1.0
    return float(np.min(counts[spans] / np.asarray(nodes)[node[spans]]))


# 3D plans' pipeline traffic: "boundaries" (Quanta: fp16 activations forward and their gradients
# back, 2 + 2 bytes an element of a replica's s x seqhid / tp, across each of the pp - 1 stage
# boundaries at the PP group's bandwidth) or "artifact" (Rubick's pred_throughput.py
# throughput_3D: 16 bytes an element, times pp, at a fixed 20 GB/s). Read by `features` (cached:
# set before the first model is fitted; bench/accuracy_plan.py --pp-traffic).
PP_TRAFFIC = "boundaries"
ARTIFACT_PP_GBPS = 20.0


@lru_cache(maxsize=4096)
def features(spec: ModelSpec, plan: ExecutionPlan, nodes: tuple[int, ...], threads: float,
             nvlink_scale: float = 1.0, network: float = NIC_GBPS,
             net_cap: float = 0.0) -> tuple[float, ...]:
    """(is3d, F, alpha_f, comm, extra, offl, off, opt_units, os_units) for the vectorised model.
    `net_cap` > 0: the node network bandwidth the job's groups see is at most that (GB/s)."""
    p = spec.p_mib
    bnv = spec.b_nvlink * nvlink_scale
    bnet = min(bnv, _net_bw(nodes, network))
    if net_cap > 0:
        bnet = min(bnet, net_cap)
    d = plan.num_gpus
    if not plan.is_3d:
        F = float(spec.forward_ms(d))
        comm = 8.0 * p * (d - 1) / d / (bnv if len(nodes) == 1 else bnet)
        off = 4.0 * p / d / spec.b_pcie if plan.offload else 0.0
        opt_units = p if plan.zero == 0 else p / d
        os_units = p / (d * max(threads, 1e-9))
        return (0.0, F, 2.0 if plan.checkpointing else 1.0, comm, 0.0,
                float(plan.offload), off, opt_units, os_units)
    pp, tp, dp = plan.pp, plan.tp, plan.dp
    s = spec.batch / dp
    F = spec.fwd1_ms * s / spec.batch / tp
    tp_bw = bnv if _group_in_node(nodes, tp, 1, d) else bnet * _nic_share(nodes, tp, 1, d)
    dp_bw = bnv if _group_in_node(nodes, dp, tp, d) else bnet * _nic_share(nodes, dp, tp, d)
    pp_bw = bnv if _group_in_node(nodes, pp, tp * dp, d) else bnet * _nic_share(nodes, pp, tp * dp, d)
    comm = 8.0 * p / (tp * pp) * (dp - 1) / dp / dp_bw
    t_tp = 32.0 * s * spec.seqhid * spec.layers * (tp - 1) / tp / MIB / tp_bw
    if PP_TRAFFIC == "artifact":     # pred_throughput.py throughput_3D: 20 GB/s, times pp
        t_pp = 16.0 * s * spec.seqhid / tp / ARTIFACT_PP_GBPS / MIB * pp if pp > 1 else 0.0
    else:
        t_pp = 4.0 * s * spec.seqhid / tp * (pp - 1) / MIB / pp_bw
    alpha = 2.0 if plan.checkpointing else 1.0
    return (1.0, F, alpha, comm, t_tp + t_pp, 0.0, 0.0, p / (tp * pp), 0.0)


def _overlap(a: np.ndarray, b: np.ndarray, g: float) -> np.ndarray:
    """(a**g + b**g)**(1/g), overflow-safe."""
    hi = np.maximum(a, b)
    lo = np.minimum(a, b)
    safe = np.where(hi > 0, hi, 1.0)
    return np.where(hi > 0, hi * (1.0 + (lo / safe) ** g) ** (1.0 / g), 0.0)


def predict_components(params: Sequence[float], X: np.ndarray):
    """X: (n, 9) features. Returns (sync part, optimizer part, iteration time) in ms.
    The sync part is what the profiles call overlap_sync: backward + sync (+ recompute, + offload
    transfer) for DP plans; everything but the optimizer for 3D plans (their forward is not split)."""
    k_bwd, k_sync, k_opt, k_os, k_const, k_off, k_swap = params
    is3d, F, alpha, comm, extra, offl, off, opt_u, os_u = X.T
    core = _overlap(comm, k_bwd * F, k_sync) + extra
    rec, xfer = (alpha - 1.0) * F, offl * (k_off + off)
    # ZeRO-Offload copies gradients to the host on a side stream while the backward runs; the
    # checkpointing recompute is GPU work that proceeds during that copy: same overlap form
    rec_xfer = np.where(offl > 0, _overlap(rec, xfer, k_sync), rec + xfer)
    opt = np.where(offl > 0, k_os * os_u + k_swap, k_opt * opt_u)
    it = F + core + rec_xfer + opt + k_const
    sync_part = np.where(is3d > 0, F + core + rec_xfer, core + rec_xfer)
    return sync_part, opt, it


# -- memory --------------------------------------------------------------------------------------
def memory_gb(spec: ModelSpec, plan: ExecutionPlan) -> tuple[float, float]:
    """(GPU memory per GPU, host memory for the whole job) in GB, see the module docstring."""
    P, d = spec.params, plan.num_gpus
    layer_act = 34.0 * spec.seq * spec.hidden
    if plan.is_3d:
        states = 16.0 * P / (plan.tp * plan.pp)
        s = spec.batch / plan.dp
        layers = spec.layers / plan.pp
        act = (2.0 * spec.seq * spec.hidden * layers + layer_act) if plan.checkpointing \
            else layer_act * layers
        act = act * s / plan.tp
        host = 0.0
    else:
        if plan.offload:
            states, host = 2.0 * P, 16.0 * P
        else:
            states = {0: 16.0 * P, 1: 4.0 * P + 12.0 * P / d, 2: 2.0 * P + 14.0 * P / d,
                      3: 16.0 * P / d}[plan.zero]
            host = 0.0
        if plan.checkpointing:
            mb = spec.batch / d if plan.ga_steps == 1 else 1.0
            act = mb * (2.0 * spec.seq * spec.hidden * spec.layers + layer_act)
        else:
            act = layer_act * spec.layers        # micro-batch 1 with accumulation
    return states / 1e9 + act / 1e9 + RUNTIME_GB, host / 1e9


def feasible(spec: ModelSpec, plan: ExecutionPlan, res: Resources | None = None) -> bool:
    gpu, host = memory_gb(spec, plan)
    nodes = res.nodes() if res is not None else consolidated(plan.num_gpus)
    host_cap = (res.host_mem_gb if res is not None else HOST_MEM_GB) * len(nodes)
    if gpu > GPU_MEM_GB or host > host_cap:
        return False
    if plan.is_3d:
        return (spec.batch % plan.dp == 0 and plan.pp <= spec.layers
                and plan.tp <= min(nodes))
    return spec.batch % plan.num_gpus == 0


# -- plan search ---------------------------------------------------------------------------------
def candidate_plans(spec: ModelSpec, gpus: int, nodes: Sequence[int]) -> list[ExecutionPlan]:
    out = [parse_plan(k, gpus) for k in spec.kinds]
    if spec.allow_3d:
        for pp in range(1, gpus + 1):
            if gpus % pp:
                continue
            for tp in range(1, min(nodes) + 1):
                if (gpus // pp) % tp or (pp == 1 and tp == 1):
                    continue
                out.append(ExecutionPlan(dp=gpus // pp // tp, tp=tp, pp=pp, megatron=True))
    return out


@dataclass
class PlanModel:
    """A model family with its fitted parameters (DP family and, where fitted, 3D)."""
    spec: ModelSpec
    params: np.ndarray
    params_3d: np.ndarray | None = None

    def iteration_ms(self, plans: Sequence[ExecutionPlan], res: Resources) -> np.ndarray:
        nodes, th = res.nodes(), res.threads_per_gpu()
        scale = res.nvlink_gbps / 400.0
        X = np.array([features(self.spec, p, nodes, th, scale, res.network_gbps, res.net_cap_gbps)
                      for p in plans])
        out = np.full(len(plans), np.inf)
        for flag, prm in ((0.0, self.params), (1.0, self.params_3d)):
            m = X[:, 0] == flag
            if m.any() and prm is not None and np.all(np.isfinite(prm)):
                out[m] = predict_components(prm, X[m])[2]
        return out


def best_plan(model: PlanModel, resources: Resources) -> tuple[ExecutionPlan | None, float]:
    """The feasible plan with the highest throughput (samples/s) on `resources`; (None, 0.0) if
    nothing fits."""
    nodes = resources.nodes()
    plans = [p for p in candidate_plans(model.spec, resources.gpus, nodes)
             if feasible(model.spec, p, resources)]
    if not plans:
        return None, 0.0
    t = model.iteration_ms(plans, resources)
    i = int(np.argmin(t))
    if not np.isfinite(t[i]):
        return None, 0.0
    return plans[i], model.spec.batch * 1000.0 / float(t[i])


@dataclass
class SensitivityCurve:
    """Rmax over (GPUs, CPU threads per GPU): best samples/s and its plan, made monotone."""
    gpus: list[int]
    cpus: list[int]
    throughput: np.ndarray            # (len(gpus), len(cpus))
    plans: list[list[ExecutionPlan | None]] = field(default_factory=list)
    alloc: list[list[tuple[int, int]]] = field(default_factory=list)   # the entry's (g, c)

    def at(self, g: int, c: int | None = None) -> float:
        j = 0 if c is None else self.cpus.index(c)
        return float(self.throughput[self.gpus.index(g), j])


def sensitivity_curve(model: PlanModel, gpus_range: Sequence[int],
                      cpu_range: Sequence[int] = (DEFAULT_THREADS_PER_GPU,)) -> SensitivityCurve:
    """Rubick's resource-sensitivity curve: for each GPU count (consolidated) and CPU threads per
    GPU, the best plan's throughput; an entry gaining < 1% over a smaller neighbour (one unit less
    of GPUs or threads) reuses that neighbour's entry, so the curve never falls."""
    gs, cs = sorted(gpus_range), sorted(cpu_range)
    R = np.zeros((len(gs), len(cs)))
    plans: list[list] = [[None] * len(cs) for _ in gs]
    alloc = [[(g, c) for c in cs] for g in gs]
    for i, g in enumerate(gs):
        for j, c in enumerate(cs):
            plan, r = best_plan(model, Resources(g, cpu_threads=g * c))
            R[i, j], plans[i][j] = r, plan
            nb = [(R[i - 1, j], i - 1, j)] if i else []
            nb += [(R[i, j - 1], i, j - 1)] if j else []
            if nb:
                val, a, b = max(nb)
                if r < val * 1.01:
                    R[i, j], plans[i][j], alloc[i][j] = val, plans[a][b], alloc[a][b]
    return SensitivityCurve(gs, cs, R, plans, alloc)


def marginal_slope(curve: SensitivityCurve, g: int, delta: int, orig_throughput: float,
                   c: int | None = None) -> float:
    """|Rmax(g + delta) - Rmax(g)| / (T_orig * delta), T_orig = throughput of the original request."""
    if delta == 0 or orig_throughput <= 0:
        return 0.0
    return abs(curve.at(g + delta, c) - curve.at(g, c)) / (orig_throughput * abs(delta))


# -- catalog files -------------------------------------------------------------------------------
def read_csv(path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8-sig") as fh:
        return list(csv.DictReader(fh))

