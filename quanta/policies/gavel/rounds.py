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
