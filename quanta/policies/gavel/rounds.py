"""Gavel's round-based mechanism: realise a time-fraction allocation X with whole rounds.

Each round, job j's priority on type k is X[j,k] / f[j,k], f = the share of its time it has
received on k, ties broken by a deficit, then by X, then by arrival (row). Going down that list,
a job is scheduled on k if it is not scheduled yet, may use k, and z_j GPUs of k are left. Jobs
that keep their type keep their GPUs (the mechanism's lease extension), so only real changes pay a
restart. `priority_round` takes the priorities and deficits ready-made, so that the policy can use
Quanta's (one list over every type; f = time received / time active) or Gavel's simulator's
(scheduler.py:766-855: one list per type, the lists taken one after another; f counted from half a
round, scheduler.py:2420-2463).
"""

from __future__ import annotations

import numpy as np

BIG = 1e9


def priority_round(X: np.ndarray, T: np.ndarray, z: np.ndarray, N: np.ndarray, prio: np.ndarray,
                   deficit: np.ndarray, rank: np.ndarray, type_order: np.ndarray | None = None,
                   backfill: bool = False, allocated: np.ndarray | None = None,
                   eps: float = 1e-6, tie_types: np.ndarray | None = None,
                   picked: list[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """One round: (gpus, type) per job.

    Entries are the (job, type) pairs with T > 0 and X > eps, sorted by priority, then deficit,
    then X (all descending), then `rank` (ascending: arrival order). With `type_order` (type
    indexes) there is one such list per type, taken in that order (Gavel's per-type queues);
    without, one list over all types. `backfill`: after a type's own entries come the jobs with no
    share of it (priority 0), by deficit, so that no GPU idles while a job that can use it waits
    (Gavel's mechanism does this for every policy but FIFO: scheduler.py:810-850).
    `allocated` (bool per job, default all): a job outside the allocation (Gavel: one that arrived
    after the allocation was computed) still takes its place in the lists with priority 0, and the
    GPUs it takes stay idle for the round (scheduler.py:936-938).
    `tie_types` (type indexes; one list only): entries equal in priority, deficit and X go type by
    type in that order, then by `rank`, as Sia's simulator's stable sort of a list built type by
    type leaves them (sia-simulator gavel.py:293-305); without it, by `rank`, then type index.
    `picked`: if given, the jobs that run are appended to it in the order the walk chose them."""
    n, K = X.shape
    pos = X > eps
    cand = (T > 0) & (pos | backfill)
    j_idx, k_idx = np.nonzero(cand)
    on = pos[j_idx, k_idx]
    p = np.where(on, prio[j_idx, k_idx], 0.0)
    d = deficit[j_idx, k_idx]
    x = np.where(on, X[j_idx, k_idx], 0.0)
    keys = [rank[j_idx], -x, -d, -p]
    if tie_types is not None:
        tie_of = np.empty(K, dtype=np.int64)
        tie_of[np.asarray(tie_types, dtype=np.int64)] = np.arange(K)
        keys.insert(1, tie_of[k_idx])
    if type_order is not None:
        pos_of = np.empty(K, dtype=np.int64)
        pos_of[np.asarray(type_order, dtype=np.int64)] = np.arange(K)
        keys.append(pos_of[k_idx])
    order = np.lexsort(keys)
    # the walk down the list, on Python ints (a few hundred entries; numpy per entry is slower)
    zl = np.asarray(z).tolist()
    free = N.astype(np.int64).tolist()
    gpus = [0] * n
    gtype = [-1] * n
    placed = [False] * n
    zmin = min(zl) if n else 0
    runs = [True] * n if allocated is None else np.asarray(allocated).tolist()
    for j, k in zip(j_idx[order].tolist(), k_idx[order].tolist()):
        if placed[j] or free[k] < zl[j]:
            continue
        placed[j] = True
        free[k] -= zl[j]
        if runs[j]:
            gpus[j], gtype[j] = zl[j], k
            if picked is not None:
                picked.append(j)
        if free[k] < zmin and max(free) < zmin:     # (no type has room for any job: done)
            break
    return np.array(gpus, dtype=np.int64), np.array(gtype, dtype=np.int64)


def round_assignment(X: np.ndarray, T: np.ndarray, z: np.ndarray, N: np.ndarray,
                     received: np.ndarray, elapsed: np.ndarray, eps: float = 1e-6,
                     backfill: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Quanta's round: one list over all types; priority X / (received / elapsed) (X * 1e9 for a
    type the job has not run on yet), deficit X * elapsed - received. Returns (gpus, type)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(elapsed[:, None] > 0, received / elapsed[:, None], 0.0)
        prio = np.where(share > 0, X / share, X * BIG)
    deficit = X * elapsed[:, None] - received
    return priority_round(X, T, z, N, prio, deficit, np.arange(X.shape[0]), backfill=backfill,
                          eps=eps)


def packed_round(single: np.ndarray, pair_tot: np.ndarray, pair_pref: dict[tuple[int, int], list[int]],
                 cls: np.ndarray, T: np.ndarray, z: np.ndarray, N: np.ndarray,
                 recv_single: np.ndarray, recv_pair: np.ndarray, elapsed: np.ndarray,
                 current_host: np.ndarray, eps: float = 1e-6
                 ) -> tuple[np.ndarray, np.ndarray, dict[int, int]]:
    """One round of a space-sharing allocation. Entries are (job, type, alone | packed) with
    targets single[j,k] and pair_tot[j,k] (time packed with anyone on k); priority = target /
    share received, ties by deficit then target. A packed entry takes the waiting job of the
    partner class the allocation pairs it with most (pair_pref[(class, k)], best first).
    Returns (gpus, type, guest -> host) over job indexes; current_host[j] = index of the job
    whose guest j is now (-1), so an existing pair keeps its roles (and its GPUs)."""
    n, K = single.shape
    E = elapsed[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        targets = np.concatenate([single, pair_tot], axis=1)
        recv = np.concatenate([recv_single, recv_pair], axis=1)
        share = np.where(E > 0, recv / E, 0.0)
        prio = np.where(share > 0, targets / share, targets * BIG)
    deficit = targets * E - recv
    j_idx, e_idx = np.nonzero(targets > eps)
    order = np.lexsort((-targets[j_idx, e_idx], -deficit[j_idx, e_idx], -prio[j_idx, e_idx]))
    members: dict[int, list[int]] = {}
    for j in np.argsort(-prio.max(axis=1), kind="stable").tolist():
        members.setdefault(int(cls[j]), []).append(j)
    gpus = np.zeros(n, dtype=np.int64)
    gtype = np.full(n, -1, dtype=np.int64)
    guest_of: dict[int, int] = {}
    free = N.astype(np.int64).copy()
    for e in order.tolist():
        j, col = int(j_idx[e]), int(e_idx[e])
        k, packed = col % K, col >= K
        if gpus[j] or free[k] < z[j] or T[j, k] <= 0:
            continue
        mate = -1
        if packed:
            for b in pair_pref.get((int(cls[j]), k), []):
                mate = next((m for m in members.get(b, []) if m != j and not gpus[m]
                             and T[m, k] > 0 and z[m] == z[j]), -1)
                if mate >= 0:
                    break
            if mate < 0:
                continue
        gpus[j], gtype[j] = z[j], k
        free[k] -= z[j]
        if mate >= 0:
            gpus[mate], gtype[mate] = z[mate], k
            host, guest = (mate, j) if current_host[j] == mate else (j, mate)
            guest_of[guest] = host
    return gpus, gtype, guest_of


def pair_round(a: np.ndarray, b: np.ndarray, k: np.ndarray, prio: np.ndarray,
               deficit: np.ndarray, x: np.ndarray, rank: np.ndarray, allocated: np.ndarray,
               z: np.ndarray, N: np.ndarray, type_order: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """One round of Gavel's mechanism over entries that are single jobs (b = -1) or pairs of
    jobs (a, b), each on one type k (stanford-futuredata/gavel @ c4fa400,
    scheduler/scheduler.py:766-855):

    - one list per type, taken in `type_order` (lines 783-808; v100, p100, k80 for the packing
      policy, never shuffled: lines 871-881), each sorted by (priority, deficit, X) descending,
      ties in `rank` order (Python's stable sort over the priority dict's insertion order);
    - going down the lists, an entry is skipped if its type has no GPU left (line 811), if it or
      either job of the pair is already placed (lines 814-819), or if it does not fit (lines
      835-849); the caller leaves out entries with a zero throughput (lines 821-827);
    - a pair takes z GPUs of its type for both jobs at once (line 849: both jobs are placed);
    - an entry outside the allocation (`allocated` False: a job or pair created after X was
      computed) still takes its GPUs, which then idle for the round (lines 936-938).
    Returns (gpus, type) per job and the pairs (a, b) that run together."""
    n = len(z)
    K = len(N)
    pos_of = np.empty(K, dtype=np.int64)
    pos_of[np.asarray(type_order, dtype=np.int64)] = np.arange(K)
    order = np.lexsort((rank, -x, -deficit, -prio, pos_of[k]))
    zl = np.asarray(z).tolist()
    free = np.asarray(N).astype(np.int64).tolist()
    zmin = min(zl) if n else 0
    gpus = [0] * n
    gtype = [-1] * n
    placed = [False] * n
    together: list[tuple[int, int]] = []
    al, bl, kl, runs = a.tolist(), b.tolist(), k.tolist(), np.asarray(allocated).tolist()
    for e in order.tolist():
        ja, jb, kk = al[e], bl[e], kl[e]
        if free[kk] == 0 or placed[ja] or (jb >= 0 and placed[jb]) or zl[ja] > free[kk]:
            continue
        free[kk] -= zl[ja]
        placed[ja] = True
        if jb >= 0:
            placed[jb] = True
        if runs[e]:
            gpus[ja], gtype[ja] = zl[ja], kk
            if jb >= 0:
                gpus[jb], gtype[jb] = zl[jb], kk
                together.append((ja, jb))
        if free[kk] < zmin and max(free) < zmin:    # (no type has room for any job: done)
            break
    return np.array(gpus, dtype=np.int64), np.array(gtype, dtype=np.int64), together
