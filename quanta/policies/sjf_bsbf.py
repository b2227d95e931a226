"""SJF-BSBF (Luo et al.): shortest job first, with GPU sharing decided by its benefit; and the
baseline SJF-FFS (first-fit sharing).

Non-preemptive: running jobs keep their GPUs. Waiting jobs go in SJF order (remaining time
alone, oracle lengths). A job takes idle GPUs if there are enough. Otherwise it may run packed
with one running job b of the same GPU count that shares with nobody (at most two jobs per GPU)
and fits in GPU memory with it (performance model: measured pair, or the memory rule):
- sjf-bsbf: only if sharing now lowers the pair's average JCT. With e = remaining time alone,
  xi = slowdown factor when packed (alone rate / packed rate), e^ = xi * e:
    t_seq = e_b + e_a / 2                                  (a waits until b ends)
    t_con = e_a / 2 + (1 - 1/(2 xi_a)) e^_b   if e^_a >= e^_b
            e_b / 2 + (1 - 1/(2 xi_b)) e^_a   otherwise
  share iff t_con < t_seq; among beneficial partners, the lowest t_con (best benefit first).
- sjf-ffs: the first running job (arrival order) that fits in memory, no benefit test.
Modelled differently from the paper: a multi-GPU job shares with a single partner of the same
size (the paper may combine GPUs of several running jobs); no sub-batch / gradient accumulation
yet when a pair does not fit in memory (such a pair is simply not formed).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.policies.base import Policy
from quanta.policies.registry import register


def pair_times(e_a: float, e_b: float, xi_a: float, xi_b: float) -> tuple[float, float]:
    """(t_seq, t_con): the pair's average JCT if a waits for b, and if they run packed now."""
    t_seq = e_b + e_a / 2.0
    ha, hb = xi_a * e_a, xi_b * e_b
    if ha >= hb:
        t_con = e_a / 2.0 + (1.0 - 1.0 / (2.0 * xi_a)) * hb
    else:
        t_con = e_b / 2.0 + (1.0 - 1.0 / (2.0 * xi_b)) * ha
    return t_seq, t_con


@register("sjf-bsbf", "SJF with best-sharing-benefit-first GPU sharing (share only if the pair's "
                      "average JCT drops); non-preemptive")
@register("sjf-ffs", "SJF with first-fit GPU sharing (share whenever memory fits); non-preemptive",
          benefit=False)
@dataclass
class SjfSharing(Policy):
    benefit: bool = True

    def decide(self, snap: Snapshot) -> Decision:
        j = snap.jobs
        dec = Decision.empty(snap)
        free = snap.capacity.astype(np.int64).copy()
        types = snap.cluster.types
        run = np.flatnonzero(j.running)
        for i in run.tolist():                       # non-preemptive: everyone keeps GPUs
            dec.gpus[i], dec.gpu_type[i] = j.gpus[i], j.gtype[i]
            if not j.is_guest[i]:
                free[j.gtype[i]] -= j.gpus[i]
        pos = {int(r): i for i, r in enumerate(j.rows.tolist())}
        for g in np.flatnonzero(j.running & j.is_guest).tolist():   # pairs stay as they are
            dec.share[g] = (pos[int(j.partner[g])], "pack")
        paired = {h for h, _m in dec.share.values()}
        # possible hosts: running owners with no partner yet
        hosts = [i for i in run.tolist() if not j.is_guest[i] and i not in paired]
        remaining = j.remaining
        alone_time = remaining / np.maximum(np.where(j.running, j.rate, j.best_rate), 1e-12)
        waiting = np.flatnonzero(~j.running)
        waiting = waiting[np.lexsort((j.rows[waiting], j.submit[waiting], alone_time[waiting]))]
        for a in waiting.tolist():
            room = j.allowed[a] & (free >= j.req[a])
            if room.any():
                t = int(np.argmax(np.where(room, j.rates[a], -1.0)))
                dec.gpus[a], dec.gpu_type[a] = j.req[a], t
                free[t] -= j.req[a]
                continue
            h = self._partner(snap, a, hosts, alone_time, types)
            if h is None:
                continue
            dec.gpus[a], dec.gpu_type[a] = j.req[a], j.gtype[h]
            dec.share[a] = (h, "pack")
            hosts.remove(h)
        dec.order = np.lexsort((j.rows, j.submit, alone_time))
        return dec

    def _partner(self, snap: Snapshot, a: int, hosts: list[int], alone_time: np.ndarray,
                 types: tuple[str, ...]) -> int | None:
        j = snap.jobs
        best, best_t = None, np.inf
        for h in sorted(hosts, key=lambda h: (j.submit[h], int(j.rows[h]))):
            if j.gpus[h] != j.req[a] or not j.allowed[a, j.gtype[h]]:
                continue
            gpu = types[int(j.gtype[h])]
            n = int(j.req[a])
            ra = snap.perf.shared_rate(j.specs[a], j.specs[h], gpu, n, mode="pack")
            rb = snap.perf.shared_rate(j.specs[h], j.specs[a], gpu, n, mode="pack")
            if ra <= 0 or rb <= 0:
                continue                               # does not fit in memory together
            if not self.benefit:
                return h                               # first fit
            xi_a = snap.perf.rate(j.specs[a], gpu, n) / ra
            xi_b = snap.perf.rate(j.specs[h], gpu, n) / rb
            t_seq, t_con = pair_times(float(alone_time[a]), float(alone_time[h]), xi_a, xi_b)
            if t_con < t_seq and t_con < best_t:
                best, best_t = h, t_con
        return best
