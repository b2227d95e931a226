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
  With s = the solo slowdown of the longer job after the shorter ends (1 unless it keeps an
  accumulated micro-batch), t_con = (e^_short + e^_short + s (e_long - e^_short / xi_long)) / 2.
- sjf-ffs: the first running job (arrival order) that fits in memory, no benefit test.
Gradient accumulation (`accumulate`, off by default; both drivers charge the plan: the performance
model's rate_with / shared_rate(..., plan, other_plan)): the waiting job may run its global batch B
as k micro-batches of B/k (quanta.perf.table: memory and speed of the micro-batch are the measured
ones of the same model at batch B/k). Only when the pair does not fit at the full batch, every k
the model knows is tried; those whose pair fits are scored with the slowed rates and the lowest
t_con is kept, so a memory-short pair is formed only if the accumulated pair still beats waiting. The guest keeps its
micro-batch after its partner leaves (no restart to switch back), so its solo rate then is the
accumulated one: the generalised t_con below. The choice travels as Decision.plans[guest] =
ExecutionPlan(dp=GPUs, ga_steps=k). Only the guest accumulates: the host is running, and changing
its micro-batch would restart it. [U] selection rule: the paper states the concept, not how b is chosen.
`fraction_cap` (off by default): the requests' GPU fractions (JobSpec.gpu_fraction, openb) of a
pair must add up to at most one GPU, whole-GPU requests counting 1: only fractional pods share, as
in the openb cluster itself.
Modelled differently from the paper: a multi-GPU job shares with a single partner of the same
size (the paper may combine GPUs of several running jobs).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.model.job import JobSpec
from quanta.perf.plan import ExecutionPlan
from quanta.perf.table import table_for
from quanta.policies.base import Policy
from quanta.policies.registry import register


def pair_times(e_a: float, e_b: float, xi_a: float, xi_b: float, s_a: float = 1.0,
               s_b: float = 1.0) -> tuple[float, float]:
    """(t_seq, t_con): the pair's average JCT if a waits for b, and if they run packed now.
    e = remaining time alone, xi = slowdown while packed, s = slowdown when running alone again
    after the partner ended (1 = full speed)."""
    t_seq = e_b + e_a / 2.0
    ha, hb = xi_a * e_a, xi_b * e_b
    if ha >= hb:
        end_a, end_b = hb + s_a * (e_a - hb / xi_a), hb
    else:
        end_a, end_b = ha, ha + s_b * (e_b - ha / xi_b)
    return t_seq, (end_a + end_b) / 2.0


@register("sjf-bsbf", "SJF with best-sharing-benefit-first GPU sharing (share only if the pair's "
                      "average JCT drops; accumulate=true: gradient accumulation when memory is "
                      "short); non-preemptive")
@register("sjf-ffs", "SJF with first-fit GPU sharing (share whenever memory fits); non-preemptive",
          benefit=False)
@dataclass
class SjfSharing(Policy):
    benefit: bool = True
    accumulate: bool = False       # try sub-batches with gradient accumulation for the guest
    fraction_cap: bool = False     # a pair's requested GPU fractions must add up to <= 1

    def decide(self, snap: Snapshot) -> Decision:
        j = snap.jobs
        dec = Decision.empty(snap)
        free = snap.capacity.astype(np.int64).copy()
        types = snap.cluster.types
        run = np.flatnonzero(j.running)
        held_plan = getattr(j, "plan", None)         # plans held now (cores that track them)
        for i in run.tolist():                       # non-preemptive: everyone keeps GPUs
            dec.gpus[i], dec.gpu_type[i] = j.gpus[i], j.gtype[i]
            if held_plan is not None and held_plan[i] is not None:
                dec.plans[i] = held_plan[i]          # and its plan (no reconfiguration)
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
            h, k = self._partner(snap, a, hosts, alone_time, types)
            if h is None:
                continue
            dec.gpus[a], dec.gpu_type[a] = j.req[a], j.gtype[h]
            dec.share[a] = (h, "pack")
            if k > 1:
                dec.plans[a] = ExecutionPlan(dp=int(j.req[a]), ga_steps=k)
            hosts.remove(h)
        dec.order = np.lexsort((j.rows, j.submit, alone_time))
        return dec

    def _partner(self, snap: Snapshot, a: int, hosts: list[int], alone_time: np.ndarray,
                 types: tuple[str, ...]) -> tuple[int | None, int]:
        """The running job `a` shares with and its accumulation steps k (None, 1: none)."""
        j = snap.jobs
        best, best_k, best_t = None, 1, np.inf
        spec_a = j.specs[a]
        for h in sorted(hosts, key=lambda h: (j.submit[h], int(j.rows[h]))):
            if j.gpus[h] != j.req[a] or not j.allowed[a, j.gtype[h]]:
                continue
            if self.fraction_cap and spec_a.gpu_fraction + j.specs[h].gpu_fraction > 1.0 + 1e-9:
                continue
            gpu = types[int(j.gtype[h])]
            for k, ra, rb, solo_a in self._options(snap, spec_a, j.specs[h], gpu, int(j.req[a])):
                if not self.benefit:
                    return h, k                                # first fit
                alone_a = snap.perf.rate(spec_a, gpu, int(j.req[a]))
                xi_b = snap.perf.rate(j.specs[h], gpu, int(j.req[a])) / rb
                t_seq, t_con = pair_times(float(alone_time[a]), float(alone_time[h]), alone_a / ra,
                                          xi_b, s_a=alone_a / solo_a)
                if t_con < t_seq and t_con < best_t:
                    best, best_k, best_t = h, k, t_con
        return best, best_k

    def _options(self, snap: Snapshot, a: JobSpec, b: JobSpec, gpu: str, n: int
                 ) -> Iterator[tuple[int, float, float, float]]:
        """Ways `a` can run packed beside `b` on n GPUs of `gpu`, as (k, a's packed rate, b's
        packed rate, a's rate alone with that k): the full batch (k = 1) if the pair fits in
        memory, else every accumulation k > 1 that makes it fit."""
        ra = snap.perf.shared_rate(a, b, gpu, n, mode="pack")
        rb = snap.perf.shared_rate(b, a, gpu, n, mode="pack")
        if ra > 0 and rb > 0:
            yield 1, ra, rb, snap.perf.rate(a, gpu, n)
            return                                             # fits: no accumulation
        table = table_for(snap.perf, a, b) if self.accumulate else None
        if table is None:
            return
        for k, micro in table.accumulation_steps(a.job_type)[1:]:
            fit_a = table.pack_slowdown(micro, b.job_type, gpu)
            fit_b = table.pack_slowdown(b.job_type, micro, gpu)
            if fit_a <= 0 or fit_b <= 0:
                continue                                       # still does not fit
            solo = table.accumulated_rate(a, k, micro, gpu, n)
            yield k, solo * fit_a, table.rate(b, gpu, n) * fit_b, solo
