"""HadarE (arXiv 2503.10918): Hadar plus job forking.

Each round Hadar plans every job (quanta.policies.hadar: running jobs kept, waiting ones admitted
by payoff). Then HadarE forks [U: the mechanics are not public; this reconstruction]:
1. Idle nodes. The nodes Hadar's plan leaves wholly idle now and does not reserve for the next
   round (a waiting job deferred to it) may hold copies (a copy never takes part of a node some
   gang uses: that would fragment the nodes the next gangs need). A forked job's copies are never part of Hadar's
   plan: next round Hadar sees their GPUs as free, so a job that waits for them gets them and the
   copies are withdrawn (the job is consolidated back to its own gang: one restart).
2. Forking, per node as the paper says (copies "on separate available nodes"): a running job
   whose own gang (Hadar's allocation, one GPU type) is on some nodes gets one copy on each other
   idle node of a type it may use, fastest copy first: the job's own gang size on that node (fewer
   GPUs if fewer are idle there), training the same model. A copy is added only if it pays: the
   forked job's time to finish plus a restart (adding a copy restarts the job from its
   checkpoint) is below the time of the copies it has. Jobs already forked come first and keep
   their copies while those nodes stay idle (no restart); then the longest remaining time first.
   On a homogeneous cluster with idle nodes this is what makes HadarE differ from Hadar.
3. Work split (`work_split`): the remaining steps are split among the copies in proportion to
   their throughput (the performance model's steps/s, what the runtime measures), so all copies
   reach the end of every round together.
4. Aggregation: at every round end (`period` = the round) the copies average their models: a ring
   all-reduce of the parameters over the slowest link among the copies' nodes
   (quanta.perf.base.aggregation_seconds, model size from the performance model, link from the
   nodes' `inter_bw_gbps`, 10 GbE if not given). The job progresses at sum of copy rates x
   (1 - aggregation / period) (quanta.perf.base.mixed_rate with `fork`); it completes when the
   summed work is done.
A forked job goes out as Decision.mixed (GPUs per type, copies included) with Decision.fork[row]
= period and Decision.copies[row] = GPUs per node of the copies beside the own gang. Per-node
copies need the core to place them (Decision.copies); on a core without it (`per=type`, and the
fallback), a job gets at most one copy per other GPU type (the previous reconstruction), so on a
single-type cluster HadarE equals Hadar.
Cluster resource utilisation (CRU) is the summary's `gpu_util` (busy GPU-seconds / (GPUs x
makespan)).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.perf.base import DEFAULT_AGG_BW_GBPS, Part, aggregation_seconds, model_size
from quanta.policies.base import require
from quanta.policies.hadar import Hadar, Schedule
from quanta.policies.hadar_rates import spec_of
from quanta.policies.registry import register

# whether the core places a forked job's copies per node (Decision.copies)
CORE_COPIES = "copies" in getattr(Decision, "__dataclass_fields__", {})


def work_split(remaining: float, rates: np.ndarray) -> np.ndarray:
    """Steps each copy trains: the remaining steps in proportion to the copies' throughput (all
    copies then finish together, at remaining / sum(rates))."""
    rates = np.asarray(rates, dtype=float)
    return remaining * rates / rates.sum()


@register("hadare", "HadarE: Hadar plus forking jobs into copies on idle nodes, work split by "
                    "throughput, model averaging every round; consolidated when GPUs are needed")
@dataclass
class HadarE(Hadar):
    max_copies: int = 0            # copies per job, its own gang included (0: no limit)
    per: str = "node"              # "node": a copy per idle node; "type": one per GPU type

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.per not in ("node", "type"):
            raise ValueError(f"hadare: per must be 'node' or 'type', got {self.per!r}")
        require(self.max_copies >= 0, "hadare", "max_copies", self.max_copies, "0 (no limit) or more")

    @property
    def per_node(self) -> bool:
        """Copies per node: asked for and placed by the core (Decision.copies)."""
        return self.per == "node" and CORE_COPIES

    # ------------------------------------------------------------------ own gang vs copies
    def _copies_of(self, snap: Snapshot) -> dict[int, np.ndarray]:
        """Snapshot row -> GPUs per node of its copies (everything but its own gang)."""
        j, cl = snap.jobs, snap.cluster
        if CORE_COPIES and getattr(j, "copies", None):
            return j.copies
        if not j.any_mixed:
            return {}
        forked = np.flatnonzero(j.mixed & (j.fork_s > 0))
        if forked.size == 0:
            return {}
        out = {}
        parts, place = j.parts, j.placement
        for r in forked.tolist():                 # per-type copies: the own gang's type has most
            own_k = int(np.argmax(parts[r]))
            g = place[r]
            out[r] = np.bincount(cl.gpu_node[g[cl.gpu_type_idx[g] != own_k]],
                                 minlength=len(cl.nodes))
        return out

    def own_copy(self, snap: Snapshot) -> np.ndarray:
        j, cl = snap.jobs, snap.cluster
        parts = j.parts
        cps = self._copies_of(snap)
        if not cps:
            return parts
        parts = parts.copy()
        for r, c in cps.items():
            parts[r] -= np.bincount(cl.node_type, weights=c, minlength=len(cl.types)).astype(np.int64)
        return parts

    def copy_gpus(self, snap: Snapshot) -> np.ndarray | None:
        cps = self._copies_of(snap)
        return sum(cps.values()) if cps else None

    def node_counts(self, snap: Snapshot, r: int) -> np.ndarray:
        held = super().node_counts(snap, r)
        c = self._copies_of(snap).get(r)
        return held if c is None else held - c

    # ------------------------------------------------------------------ the round
    def decide(self, snap: Snapshot) -> Decision:
        if not snap.node_free.any() and self.idle_round(snap):
            return self.keep_all(snap)             # no idle GPU to fork onto, nothing to start
        dec, copies = self.fork(snap)
        if self.per_node:
            dec.copies.update(copies)
        return dec

    def fork(self, snap: Snapshot, per_node: bool | None = None
             ) -> tuple[Decision, dict[int, np.ndarray]]:
        """Hadar's decision with the forked jobs' allocations (own gang + copies per type in
        Decision.mixed, fork period), and each forked row's copies as GPUs per node. per_node:
        copies per idle node (default: `per_node`) or one per GPU type."""
        per_node = self.per_node if per_node is None else per_node
        schedules, _, prices = self.plan(snap)
        j, cl = snap.jobs, snap.cluster
        K = len(cl.types)
        dec = Decision.empty(snap)
        single: list[Schedule] = []
        for s in schedules:
            if s.start != 0:
                continue
            counts = s.counts(cl.node_type, K)
            dec.gpus[s.job], dec.gpu_type[s.job] = int(counts.sum()), s.gtype
            if np.count_nonzero(counts) > 1:
                dec.mixed[s.job] = counts
            elif counts.sum() == j.req[s.job]:
                single.append(s)
        out: dict[int, np.ndarray] = {}
        H = prices.used.shape[1]
        planned = prices.used[:, :min(2, H)].max(axis=1)   # now, and reserved for next round
        idle = np.where(planned == 0, prices.cap, 0)     # whole idle nodes: copies never split
        self.consolidate_kept(snap, dec, np.array([s.job for s in schedules if s.kept],
                                                  dtype=np.int64))
        if not idle.any() or not single:
            return dec, out
        held = self._copies_of(snap)
        forked = j.fork_s > 0
        remaining = j.remaining
        single.sort(key=lambda s: (not forked[s.job], -remaining[s.job] / max(j.rates[s.job, s.gtype], 1e-12),
                                   int(j.rows[s.job])))
        idle_at = np.flatnonzero(idle > 0)              # (kept as idle shrinks)
        any_unknown = bool((cl.node_bw == 0).any())      # some node does not say its link
        for s in single:
            if not idle_at.size:
                break                                   # no idle GPU left: no copy for anyone
            own = self._own_nodes(snap, s)
            copies = self._fork(snap, s, own, idle, held.get(s.job), per_node,
                                float(remaining[s.job]), idle_at, any_unknown)
            if copies is None:
                continue
            idle -= copies
            idle_at = idle_at[idle[idle_at] > 0]
            total = s.counts(cl.node_type, K) + np.bincount(cl.node_type, weights=copies,
                                                           minlength=K).astype(np.int64)
            dec.gpus[s.job] = int(total.sum())
            dec.mixed[s.job] = total
            dec.fork[s.job] = float(self.interval)
            dec.defrag.discard(s.job)
            out[s.job] = copies
        return dec, out

    def _own_nodes(self, snap: Snapshot, s: Schedule) -> np.ndarray:
        """GPUs per node of a schedule's own gang (a kept job: where it is)."""
        if s.kept:
            return self.node_counts(snap, s.job)
        return s.nodes

    def _fork(self, snap: Snapshot, s: Schedule, own: np.ndarray, idle: np.ndarray,
              held: np.ndarray | None, per_node: bool, rem: float, idle_at: np.ndarray,
              any_unknown: bool) -> np.ndarray | None:
        """GPUs per node of job s.job's copies beside its own gang, or None if one gang is
        best. Greedy over the copies it could add, fastest first: a copy is taken when the job
        then finishes sooner by more than a restart. The job's rate with the copies is
        mixed_rate's (sum of the copies' rates, in the same order, times 1 - aggregation /
        period), kept as a running sum; the search stops once no slower copy can help (an upper
        bound: the next copy's rate at the best link any copy could leave). `idle_at`: the
        nodes with idle GPUs, ascending, and `any_unknown`: whether some node's link is unknown
        (the caller's, kept for the round)."""
        j, cl, perf = snap.jobs, snap.cluster, snap.perf
        r, k = s.job, s.gtype
        spec, z = spec_of(snap, r), int(j.req[r])
        allowed = j.allowed[r]
        if held is not None and s.kept and held.any() and (held <= idle).all() \
                and allowed[cl.node_type[held > 0]].all():
            return held.copy()                                  # its copies still fit: kept
        best_t = rem / max(float(j.rates[r, k]), 1e-12)
        options = self._copy_options(snap, r, own, idle, allowed, z, per_node, idle_at)
        on = s.at if not s.kept and s.at is not None else own.nonzero()[0]   # own > 0
        own_nodes = len(on)
        own_part = Part(cl.types[k], z, own_nodes, own_nodes <= cl.min_nodes(k, z))
        total = 0.0 + perf.rate(spec, own_part.gpu_type, own_part.count, own_part.nodes,
                                own_part.consolidated)
        period = float(self.interval)
        bw = cl.node_bw
        bw_on = bw[on].tolist()
        bw_min = float(min(bw_on)) if own_nodes else np.inf     # of the nodes taken so far
        unknown = 0.0 in bw_on                                   # some node does not say

        def link(lo: float, unk: bool) -> float:            # link_gbps of the nodes taken
            return 0.0 if unk or not np.isfinite(lo) else lo

        limit = (self.max_copies or len(cl.nodes) + 1) - 1
        size = None                 # bytes of the model the copies average (when one is tried)
        chosen: list[tuple[np.ndarray, np.ndarray]] = []
        n_parts = 1
        for rate, idx, cnt in options:
            if len(chosen) >= limit:
                break
            # the best any copy from here on can do: this rate (they are sorted), the best link
            best_link = link(bw_min, unknown) if np.isfinite(bw_min) else float(bw.max())
            if any_unknown and not unknown:
                best_link = max(best_link, DEFAULT_AGG_BW_GBPS) if best_link > 0 else 0.0
            if size is None:
                size = model_size(perf, spec)
            agg_lo = aggregation_seconds(perf, spec, n_parts + 1, best_link, size)
            upper = (total + rate) * max(0.0, 1.0 - agg_lo / period)
            if rem / max(upper, 1e-12) + self.restart_s >= best_t:
                break
            lo = min(bw_min, float(bw[idx].min()))
            unk = unknown or bool((bw[idx] == 0).any())
            agg = aggregation_seconds(perf, spec, n_parts + 1, link(lo, unk), size)
            t = rem / max((total + rate) * max(0.0, 1.0 - agg / period), 1e-12)
            if t + self.restart_s < best_t:
                chosen.append((idx, cnt))
                best_t, total, n_parts = t, total + rate, n_parts + 1
                bw_min, unknown = lo, unk
        if not chosen:
            return None
        out = np.zeros(len(cl.nodes), dtype=np.int64)
        for idx, cnt in chosen:
            out[idx] += cnt
        return out

    def _copy_options(self, snap: Snapshot, r: int, own: np.ndarray, idle: np.ndarray,
                      allowed: np.ndarray, z: int, per_node: bool, idle_at: np.ndarray
                      ) -> Iterable[tuple[float, np.ndarray, np.ndarray]]:
        """(rate, nodes, GPUs on each) of each copy the job could add, fastest copy first. Per
        node: every idle node of a type it may use, but those of its own gang, holds a copy of
        up to z GPUs (ties: lower node first). Per type (per=type, or a core without per-node
        copies): one copy per other type it may use, up to z of that type's idle GPUs (fullest
        idle nodes first; ties: lower type first). `idle_at`: the nodes with idle GPUs,
        ascending."""
        cl, perf, spec = snap.cluster, snap.perf, spec_of(snap, r)
        opts: list = []
        if per_node:
            h = idle_at[own[idle_at] == 0]
            h = h[allowed[cl.node_type[h]]]
            if not len(h):
                return []
            t = cl.node_type[h]
            c = np.minimum(z, idle[h])
            m = int(c.max()) + 1
            keys, inv = np.unique(t * m + c, return_inverse=True)      # rate per (type, GPUs)
            ur = np.array([perf.rate(spec, cl.types[int(key) // m], int(key) % m, 1, True)
                           for key in keys.tolist()])
            rates = ur[inv.ravel()]
            order = np.lexsort((h, -rates))
            # built as the search asks for them: it usually stops after a few
            return ((float(rates[i]), h[i:i + 1], c[i:i + 1]) for i in order.tolist())
        own_types = set(cl.node_type[own > 0].tolist())
        for t in range(len(cl.types)):
            if t in own_types or not allowed[t]:
                continue
            nodes = idle_at[cl.node_type[idle_at] == t]
            nodes = nodes[np.argsort(-idle[nodes], kind="stable")]
            take = np.minimum(idle[nodes], np.maximum(z - np.concatenate([[0], np.cumsum(
                idle[nodes])[:-1]]), 0))
            keep = take > 0
            if keep.any():
                idx, cnt = nodes[keep], take[keep]
                nd = len(idx)
                c = int(cnt.sum())
                opts.append((perf.rate(spec, cl.types[t], c, nd, nd <= cl.min_nodes(t, c)),
                             -t, idx, cnt))
        opts.sort(key=lambda o: (o[0], o[1]), reverse=True)
        return [(rate, idx, cnt) for rate, _, idx, cnt in opts]
