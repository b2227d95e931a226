"""Gavel's packed policy as Gavel's simulator runs it (`gavel-las-packed:programme=pairs`, pinned in
`--world gavel-sim`): the job-pair max-min programme (space_sharing.pair_max_min) and pairs of
jobs as entries of their own in Gavel's per-type priority lists (rounds.pair_round). A mixin of
the Gavel policy (quanta/policies/gavel/__init__.py), which holds the parameters it reads."""

from __future__ import annotations

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.errors import QuantaError
from quanta.policies.gavel import allocations as alloc
from quanta.policies.gavel.rounds import BIG, pair_round

PAIR_ROWS_MAX = 2500      # programme=pairs: (jobs, jobs, types) arrays, ~150 MB each at 2,500


class PairEntries:
    """`_pairs_decide`: the decision of Gavel's packed policy with pair entries."""

    def _pair_rates(self, snap: Snapshot, st: dict) -> np.ndarray:
        """(n, n, K): steps/s of job i packed with job j on type k (0 on the diagonal, for jobs
        of different GPU counts, and for multi-GPU pairs unless pack_multi_gpu: Gavel's table has
        [0, 0] for them). The unrounded rate, as Gavel's programme reads the oracle table
        (scheduler.py:2239-2251), also in a world that runs whole steps (gavel-sim's WholeSteps:
        its `unrounded_shared_rate`)."""
        j = snap.jobs
        n, types = len(j), snap.cluster.types
        perf = snap.perf
        cache = st.setdefault("pair_rate", {})
        unrounded = getattr(perf, "unrounded_shared_rate", perf.shared_rate)
        names = [s.job_type for s in j.specs]
        z = j.req.astype(np.int64)
        kinds: dict[tuple[str, int], int] = {}
        kind = np.array([kinds.setdefault((nm, int(zz)), len(kinds)) for nm, zz in zip(names, z)],
                        dtype=np.int64)
        first = {kd: i for i, kd in reversed(list(enumerate(kind.tolist())))}
        Kn = len(kinds)
        R = np.zeros((Kn, Kn, len(types)))
        for (na, za), ka in kinds.items():
            for (nb, zb), kb in kinds.items():
                if za != zb or (za > 1 and not self.pack_multi_gpu):
                    continue
                for k, t in enumerate(types):
                    key = (na, nb, za, t)
                    if key not in cache:
                        a, b = j.specs[first[ka]], j.specs[first[kb]]
                        cache[key] = float(unrounded(a, b, t, za, mode="pack"))
                    R[ka, kb, k] = cache[key]
        out = R[kind[:, None], kind[None, :]]
        out[np.arange(n), np.arange(n)] = 0.0
        out[:, :, snap.capacity <= 0] = 0.0
        return out

    def _pairs_decide(self, snap: Snapshot) -> Decision:
        """Gavel's `max_min_fairness_packed` with Gavel's mechanism for pair entries
        (stanford-futuredata/gavel @ c4fa400, scheduler/scheduler.py):

        - the programme over single jobs and every pair of jobs of equal GPU count
          (space_sharing.pair_max_min; max_min_fairness.py:274-358), recomputed as for the other
          policies (recompute_every; scheduler.py:2366-2389);
        - a pair is an entry of its own in each type's list (scheduler.py:2313-2334, called at
          job arrival, 505), with its own time received, priority and deficit (2420-2463,
          2265-2311). Its time starts at 0 when it is created (the second job's arrival,
          scheduler.py:2219), not at half a round as a job's (501-502), and restarts at half a
          round at each reset (2303-2304), when `time - half a round` is what counts as received
          (2281-2285): so a pair created after the last reset gains half a round of deficit then;
        - priority X / time (X * 1e9 at time 0, 0 outside the allocation or with a zero
          throughput: 2440-2461); a job's own time counts only its rounds alone, a pair's only
          its rounds together, credited with the longer of its two micro-tasks (3070-3076, with
          the execution times of 1296-1304);
        - every pair of live jobs (of equal GPU count, with both rates > 0 on the type) is in the
          lists, in or out of the allocation: an entry outside X still takes its GPUs, which idle
          (scheduler.py:936-938; with hold_unallocated), a pair with X = 0 in the allocation runs
          as backfill; ties keep Gavel's insertion order: a job, then its pairs with the older
          jobs in arrival order (scheduler.py:496-505, 2326-2334);
        - a job that finishes takes its pairs out of the lists (2336-2356); its pairs' shares are
          not given to anyone until the next computation (in simulation the allocation is used as
          the policy returned it, 2385-2389)."""
        j = snap.jobs
        n, K = len(j), len(snap.cluster.types)
        st = self._state(snap, K, K)
        rows = j.rows
        half = 0.5 * self.interval
        R = len(st["elapsed"])
        if R > PAIR_ROWS_MAX:
            raise QuantaError(f"gavel-las-packed programme=pairs keeps state for every pair of jobs "
                              f"(dense, jobs^2 x types): at most {PAIR_ROWS_MAX} jobs in the trace, "
                              f"got {R}; use programme=classes")
        if st.get("pR", 0) < R:                       # pair state, indexed by (lower row, higher row)
            old = st.get("pR", 0)
            for name, fill, shape in (("ptime", 0.0, (R, R, K)), ("pdef", 0.0, (R, R, K)),
                                      ("pX", 0.0, (R, R, K)), ("pin", False, (R, R))):
                a = np.full(shape, fill, dtype=bool if name == "pin" else float)
                if old:
                    a[:old, :old] = st[name]
                st[name] = a
            st["pR"] = R
        ptime, pdef, pX, pin = st["ptime"], st["pdef"], st["pX"], st["pin"]
        recv, Xs = st["recv"], st["X"]
        RA = self._pair_rates(snap, st)
        pos = {int(r): i for i, r in enumerate(rows.tolist())}
        by_progress = self.credit == "progress"
        # credit the round that just ended: a job alone on its type, a pair on its own entry
        if st["t"] is not None:
            dt = snap.now - st["t"]
            for i in np.flatnonzero(j.running).tolist():
                r, k, p = int(rows[i]), int(j.gtype[i]), int(j.partner[i])
                if p < 0:
                    got = dt
                    if by_progress:
                        rate = st["rate"][r, k]
                        if np.isnan(rate):
                            rate = st["rate"][r, k] = snap.perf.rate(
                                j.specs[i], snap.cluster.types[k], int(j.req[i]))
                        if rate > 0:
                            got = (j.progress[i] - st["progress"][r]) / rate
                    recv[r, k] += got
                elif p in pos and r < p:             # once per pair; a finished partner: none
                    m = pos[p]
                    got = dt
                    if by_progress:
                        t_i = (j.progress[i] - st["progress"][r]) / RA[i, m, k] if RA[i, m, k] > 0 else 0
                        t_m = (j.progress[m] - st["progress"][p]) / RA[m, i, k] if RA[m, i, k] > 0 else 0
                        got = max(t_i, t_m)
                    ptime[r, p, k] += got
            st["elapsed"][rows] += np.minimum(dt, snap.now - j.submit)
        z = j.req.astype(np.int64)
        ia, ib = np.triu_indices(n, 1)
        keep = z[ia] == z[ib]
        ia, ib = ia[keep], ib[keep]
        swap = rows[ia] > rows[ib]                   # first job of a pair: the older (lower row)
        ia, ib = np.where(swap, ib, ia), np.where(swap, ia, ib)
        lo, hi = rows[ia], rows[ib]
        # recompute X (same rule as the other policies; a reset of time 0 counts as none)
        key = (rows.tobytes(), snap.capacity.tobytes())
        last = st["reset_t"]
        idle = not j.running.any()
        every = self.recompute_every
        if st["key"] != key and (every <= 0 or not last or idle or snap.now - last >= every):
            if self.reset_received:                  # Gavel's _reset_time_run_so_far
                since = snap.now - (last or 0.0)
                st["deficit"][rows] = st["deficit"][rows] + Xs[rows] * since - recv[rows]
                recv[:] = 0.0
                st["elapsed"][:] = 0.0
                pdef[lo, hi] += pX[lo, hi] * since - (ptime[lo, hi] - half)
                ptime[lo, hi] = half
            T = np.where(snap.capacity[None, :] > 0, j.rates, 0.0)
            N = snap.capacity
            tau_prop = np.maximum(T @ alloc.proportional_share(N, n), 1e-12)
            coef = z / (j.weight * tau_prop)
            useful = ((RA[ia, ib] > 0) & (RA[ib, ia] > 0)).any(axis=1)
            from quanta.policies.gavel.space_sharing import pair_max_min   # (packed runs only)
            A = pair_max_min(T, z, N, coef, RA[ia[useful], ib[useful]], RA[ib[useful], ia[useful]],
                             np.column_stack([ia[useful], ib[useful]]),
                             interior=self.solution != "vertex")
            st["key"], st["reset_t"] = key, snap.now
            Xs[:] = 0.0
            st["in_X"][:] = False
            Xs[rows] = A.single
            st["in_X"][rows] = True
            pX[:] = 0.0
            pin[:] = False
            pX[lo[useful], hi[useful]] = A.pair
            pin[lo, hi] = True                       # every live pair is in Gavel's allocation
        st["t"] = snap.now
        if by_progress:
            st["progress"][:] = 0.0
            st["progress"][rows] = j.progress
        # the entries: jobs alone, then pairs, on each type they can use
        T = np.where(snap.capacity[None, :] > 0, j.rates, 0.0)
        s_i, s_k = np.nonzero(T > 0)
        X1 = Xs[rows[s_i], s_k]
        in1 = st["in_X"][rows[s_i]]
        if self.priority == "smoothed":
            p1 = X1 / (half + recv[rows[s_i], s_k])
        else:
            el = st["elapsed"][rows[s_i]]
            with np.errstate(divide="ignore", invalid="ignore"):
                share = np.where(el > 0, recv[rows[s_i], s_k] / el, 0.0)
                p1 = np.where(share > 0, X1 / share, X1 * BIG)
        p1 = np.where(in1, p1, 0.0)
        d1 = st["deficit"][rows[s_i], s_k]
        e_p, e_k = np.nonzero((RA[ia, ib] > 0) & (RA[ib, ia] > 0))
        pa, pb, plo, phi = ia[e_p], ib[e_p], lo[e_p], hi[e_p]
        X2 = pX[plo, phi, e_k]
        t2 = ptime[plo, phi, e_k]
        in2 = pin[plo, phi]
        with np.errstate(divide="ignore", invalid="ignore"):
            p2 = np.where(t2 > 0, X2 / t2, X2 * BIG)
        p2 = np.where(in2, p2, 0.0)
        d2 = pdef[plo, phi, e_k]
        W = R + 1
        a = np.concatenate([s_i, pa])
        b = np.concatenate([np.full(len(s_i), -1), pb])
        k = np.concatenate([s_k, e_k])
        prio = np.concatenate([p1, p2])
        deficit = np.concatenate([d1, d2])
        x = np.concatenate([np.where(in1, X1, 0.0), np.where(in2, X2, 0.0)])
        rank = np.concatenate([rows[s_i] * W, phi * W + plo + 1])
        allocated = np.concatenate([in1, in2]) if self.hold_unallocated else np.ones(len(a), bool)
        if not self.backfill:
            on = prio > 0
            a, b, k, prio, deficit, x, rank, allocated = (v[on] for v in (a, b, k, prio, deficit, x,
                                                                          rank, allocated))
        gpus, gtype, together = pair_round(a, b, k, prio, deficit, x, rank, allocated, z,
                                           snap.capacity, self._type_order(snap, st))
        share = {}
        for ja, jb in together:                      # an existing pair keeps its roles
            if j.is_guest[ja] and int(j.partner[ja]) == int(rows[jb]):
                share[ja] = (jb, "pack")
            else:
                share[jb] = (ja, "pack")
        return Decision(gpus, gtype, share=share, state=st)
