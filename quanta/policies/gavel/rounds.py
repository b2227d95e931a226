"""Gavel's round-based mechanism: realise a time-fraction allocation X with whole rounds.

Each round, job j's priority on type k is X[j,k] / f[j,k], f = the share of its time it has
received on k (X * 1e9 when it has received none), ties broken by the deficit (time it should
have had minus time received), then by X. Going down that list, a job is scheduled on k if it is
not scheduled yet, may use k, and z_j GPUs of k are left. Jobs that keep their type keep their
GPUs (the mechanism's lease extension), so only real changes pay a restart.
"""

from __future__ import annotations

import numpy as np

BIG = 1e9


def round_assignment(X: np.ndarray, T: np.ndarray, z: np.ndarray, N: np.ndarray,
                     received: np.ndarray, elapsed: np.ndarray, eps: float = 1e-6
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Returns (gpus, type) per job for the next round."""
    n, K = X.shape
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(elapsed[:, None] > 0, received / elapsed[:, None], 0.0)
        prio = np.where(share > 0, X / share, X * BIG)
    deficit = X * elapsed[:, None] - received
    cand = (X > eps) & (T > 0)
    j_idx, k_idx = np.nonzero(cand)
    order = np.lexsort((-X[j_idx, k_idx], -deficit[j_idx, k_idx], -prio[j_idx, k_idx]))
    gpus = np.zeros(n, dtype=np.int64)
    gtype = np.full(n, -1, dtype=np.int64)
    free = N.astype(np.int64).copy()
    zmin = int(z.min()) if n else 0
    for e in order.tolist():
        j, k = int(j_idx[e]), int(k_idx[e])
        if gpus[j] or free[k] < z[j]:
            continue
        gpus[j], gtype[j] = z[j], k
        free[k] -= z[j]
        if free.max() < zmin:
            break
    return gpus, gtype


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
