"""Pollux's throughput fit as a scheduler that learns a job online uses it (Sia's policy under
`--world sia-sim`, `sia:learn=true`), and the goodput it then estimates.

This is deliberately not `goodput_fit.fit_throughput`, Quanta's offline fit of the profiles
(robust loss, a busiest-node term, three starting points): the reference's policy fits the few
points a job has trained on with Pollux's own objective and start, and what it believes shapes its
decisions. Measured: replacing this fit by `fit_throughput` moved Sia's replay on the 30-job slice
from -6.2% to +7.2% average JCT and its per-job median error from 14.8% to 15.4%.
"""

from __future__ import annotations

import numpy as np

from quanta.perf.goodput import _EPS, GRID_POINTS, efficiency

# -- Pollux's own throughput fit, as a scheduler that learns a job online uses it ----------------
# T_accum(m) = alpha_c + beta_c m; T_net = alpha_n + beta_n max(K - 2, 1e-8) across nodes,
# alpha_r + beta_r max(K - 2, 1e-8) within one node (K > 1), ~0 on one GPU;
# log T_step = log(T_accum^gamma + T_net^gamma) / gamma. Fitted by bounded quasi-Newton on
# RMSLE(T_accum) + RMSLE(T_step) + 1e-3 (gamma - 1)^2 + 1e-2 ((beta_n/alpha_n)^2 +
# (beta_r/alpha_r)^2) from (0.1, 0.01, 0.1, 0.01, 0.1, 0.01, 1.001); what the points cannot tell
# is pinned so that the model is optimistic: alpha_c = mean T_accum / 2 with one atomic batch,
# no network cost of a kind never observed, no retrogression without K > 2; with no multi-node
# point alpha_n, beta_n >= 1.1 x alpha_r, beta_r afterwards (Pollux's `fit_perf_params`, as in
# sia-simulator goodput.py:149-208). Vector order: alpha_c, beta_c, alpha_n, beta_n, alpha_r,
# beta_r, gamma.
_LOW = 1e-8


def pollux_net_time(params, num_nodes, num_replicas):
    n = np.asarray(num_nodes, dtype=float)
    k = np.asarray(num_replicas, dtype=float)
    extra = np.maximum(k - 2.0, _LOW)
    return np.where(n > 1, params[2] + params[3] * extra,
                    np.where(k > 1, params[4] + params[5] * extra, _LOW + _LOW * extra))


def pollux_step_time(params, num_nodes, num_replicas, local_bsz, accum_steps=0):
    """Seconds per optimiser step of the model `params` (vectorised)."""
    acc = params[0] + params[1] * np.asarray(local_bsz, dtype=float)
    net = pollux_net_time(params, num_nodes, num_replicas)
    g = params[6]
    # (acc^g + net^g)^(1/g) as acc * (1 + (net/acc)^g)^(1/g): no overflow
    optim = acc * (1.0 + (net / acc) ** g) ** (1.0 / g)
    return np.asarray(accum_steps) * acc + optim


def fit_pollux(num_nodes, num_replicas, local_bsz, step_time, sync_time) -> np.ndarray:
    """Pollux's fit of its throughput model to measured (nodes, replicas, atomic batch, step
    time, sync time) points, as `fit_perf_params` does it: L-BFGS-B from the same start, over
    all seven parameters with the pinned ones held by equal bounds, on the objective's exact
    gradient (Pollux differentiates it with autograd). A finite-difference gradient stops
    elsewhere: on 330 point sets of a sia-sim run, predicted step times differed from the
    reference's fit by more than 5% on 65 and by up to 160%; with the exact gradient by at most
    2.8% (scipy 1.17's L-BFGS-B against the reference's 1.10; bench/anchors/sia.md section 19)."""
    from scipy.optimize import Bounds, minimize
    n = np.asarray(num_nodes, dtype=float)
    k = np.asarray(num_replicas, dtype=float)
    m = np.asarray(local_bsz, dtype=float)
    step = np.asarray(step_time, dtype=float)
    acc_seen = np.maximum(step - np.asarray(sync_time, dtype=float), _LOW)
    log_acc, log_step = np.log(acc_seen), np.log(step)
    x0 = np.array([0.1, 0.01, 0.1, 0.01, 0.1, 0.01, 1.001])
    lo = np.array([_LOW] * 6 + [1.0])
    hi = np.array([np.inf] * 6 + [10.0])
    pinned = []
    if len(np.unique(m)) == 1:
        x0[0] = lo[0] = hi[0] = float(np.mean(acc_seen)) / 2.0
    if not np.any(n > 1):
        pinned += [2, 3]
    if not np.any((n == 1) & (k > 1)):
        pinned += [4, 5]
    if not np.any(k > 2):
        pinned += [3, 5]
    x0[pinned] = hi[pinned] = lo[pinned]
    multi = n > 1
    single = ~multi & (k > 1)
    extra = np.maximum(k - 2.0, _LOW)
    pts = len(m)

    def obj(x):
        acc = x[0] + x[1] * m
        net = pollux_net_time(x, n, k)
        g = x[6]
        q = (net / acc) ** g
        r1 = np.log(acc) - log_acc
        r2 = np.log(acc) + np.log1p(q) / g - log_step
        e1 = np.sqrt(np.mean(r1 ** 2))
        e2 = np.sqrt(np.mean(r2 ** 2))
        val = (e1 + e2 + 1e-3 * (g - 1.0) ** 2
               + 1e-2 * ((x[3] / x[2]) ** 2 + (x[5] / x[4]) ** 2))
        # gradient: d e / d r = r / (pts e), through log acc and log optim time
        w1 = r1 / (pts * e1) if e1 > 0 else np.zeros(pts)
        w2 = r2 / (pts * e2) if e2 > 0 else np.zeros(pts)
        d_acc = w1 / acc + w2 / (acc * (1.0 + q))
        d_net = w2 * q / (net * (1.0 + q))
        grad = np.array([
            d_acc.sum(), (d_acc * m).sum(),
            (d_net * multi).sum() - 2e-2 * x[3] ** 2 / x[2] ** 3,
            (d_net * multi * extra).sum() + 2e-2 * x[3] / x[2] ** 2,
            (d_net * single).sum() - 2e-2 * x[5] ** 2 / x[4] ** 3,
            (d_net * single * extra).sum() + 2e-2 * x[5] / x[4] ** 2,
            (w2 * (-np.log1p(q) / g ** 2 + q / (1.0 + q) * np.log(net / acc) / g)).sum()
            + 2e-3 * (g - 1.0)])
        return val, grad

    with np.errstate(all="ignore"):
        x = minimize(obj, x0, jac=True, bounds=Bounds(lo, hi, keep_feasible=True), tol=1e-5).x
    if not np.any(n > 1):
        x[2] = max(x[2], x[4] * 1.1)
        x[3] = max(x[3], x[5] * 1.1)
    return x


def _grid(params, init_batch: int, num_nodes, num_replicas, max_batch: float, min_local: int,
          max_local: int, grad: tuple[float, float]):
    """Pollux's GoodputFunction.optimize grid (goodput.py:89-147): per (nodes, replicas) column,
    50 global batches from max(M0, K x min_local) to `max_batch` (either way round) with
    accumulation; returns (goodput, atomic batch, accumulation steps), each (50, columns), the
    goodput 0 where the atomic batch is outside [min_local, max_local]."""
    n = np.atleast_1d(np.asarray(num_nodes, dtype=float))
    k = np.atleast_1d(np.asarray(num_replicas, dtype=float))
    lo = np.maximum(init_batch, min_local * k)
    batch = np.geomspace(lo, np.full_like(lo, float(max_batch)), GRID_POINTS)   # (50, len)
    local = batch / k
    s = np.ceil(local / max_local - _EPS) - 1
    s = np.where((k == 1) & (local > init_batch + _EPS), np.maximum(s, 1), s)
    mb = np.ceil(local / (s + 1) - _EPS)
    total = k * mb * (s + 1)
    thr = total / pollux_step_time(params, n, k, mb, s)
    eff = efficiency(grad[0], grad[1], init_batch, total)
    return np.where((mb >= min_local) & (mb <= max_local), thr * eff, 0.0), mb, s


def pollux_goodput(params, init_batch: int, num_nodes, num_replicas, max_batch: float,
                   min_local: int, max_local: int, grad: tuple[float, float]) -> np.ndarray:
    """Best goodput (samples/s x efficiency) of the model `params` per (nodes, replicas) pair,
    the batch tuned on Pollux's grid (`_grid`), the efficiency from one pair of gradient
    statistics `grad` for every batch (the job's latest; Pollux's GoodputFunction.optimize)."""
    return _grid(params, init_batch, num_nodes, num_replicas, max_batch, min_local, max_local,
                 grad)[0].max(axis=0)


def pollux_batch(params, init_batch: int, num_nodes: int, num_replicas: int, max_batch: float,
                 min_local: int, max_local: int, grad: tuple[float, float]) -> tuple[int, int]:
    """(atomic batch, accumulation steps) that the model `params` finds best on one placement:
    what a Pollux agent runs its job at (sia-simulator job.py:360-365; the first best on the
    grid, as numpy's argmax)."""
    good, mb, s = _grid(params, init_batch, num_nodes, num_replicas, max_batch, min_local,
                        max_local, grad)
    i = int(np.argmax(good[:, 0]))
    return int(mb[i, 0]), int(s[i, 0])


def fit_points(points: dict) -> np.ndarray:
    """`fit_pollux` of a profile {(nodes, GPUs, atomic batch): (step, sync)}, the points in key
    order. A learning scheduler and the jobs it learns from fit the same profiles (sia-sim's job
    agents, `worlds/sia_agents.py`): the fit is remembered by its points, so that the second
    fit of a profile costs nothing and gives the same parameters."""
    a = np.array([(*kk, *v) for kk, v in sorted(points.items())], dtype=float)
    key = a.tobytes()
    hit = _FITS.get(key)
    if hit is None:
        if len(_FITS) >= _FITS_KEPT:
            _FITS.clear()
        hit = _FITS[key] = fit_pollux(a[:, 0], a[:, 1], a[:, 2], a[:, 3], a[:, 4])
    return hit.copy()


_FITS: dict[bytes, np.ndarray] = {}
_FITS_KEPT = 4096


# -- what a learning scheduler records of its jobs ------------------------------------------------

MERGED = -1     # the type key of a profile kept for all GPU types together


def record_trained(snap, st: dict, trained: np.ndarray, merge_types: bool = False,
                   nodes: np.ndarray | None = None) -> None:
    """Record what each job that trained since the last round measured where it runs (its
    atomic batch, step and sync times: `snap.perf.observe`) and its latest gradient statistics,
    and refit its throughput model (`fit_pollux`) when the point is new, as Sia's and Pollux's
    jobs report profiles to their schedulers (sia-simulator job.py:388-412 update_params). A point
    is keyed by (nodes (2 for any multi-node placement), GPUs, atomic batch); the first point
    measured at a key stays. Profiles are per (job row, GPU type) in `st["points"]`, fits in
    `st["fits"]` and gradient statistics per job row in `st["grad"]`; with `merge_types` one
    profile per job for every type (type key MERGED), as Pollux's heterogeneity-unaware
    simulator keeps (job.py:392-405 with h_unaware: a point measured on one type stands for all).
    `trained`: the snapshot rows to record (running and past their restore); `nodes`: the
    nodes each row's GPUs are on (default: the fewest they fit on). Where the jobs learn for
    themselves (a performance model with `learned`: sia-sim's job agents) their own profiles,
    keyed by their real node counts, are copied instead."""
    j = snap.jobs
    cl = snap.cluster
    pts = st.setdefault("points", {})
    fits = st.setdefault("fits", {})
    grads = st.setdefault("grad", {})
    learned = getattr(snap.perf, "learned", None)
    if learned is not None:
        # the jobs learn for themselves (sia-sim's job agents, worlds/sia_agents.py): the
        # scheduler reads the profiles each job has fitted, as the reference's schedulers read
        # its perf_params, and fits them the same way (`fit_points`)
        for i in np.flatnonzero(trained).tolist():
            got = learned(j.specs[i])
            if got is None:
                continue
            row = int(j.rows[i])
            profiles, grads[row] = got
            for tk, prof in profiles.items():
                key_t = (row, MERGED if tk == MERGED else cl.type_index(tk))
                if len(pts.get(key_t, ())) != len(prof):
                    pts[key_t] = dict(prof)
                    fits[key_t] = fit_points(prof)
        return
    obs_fn = getattr(snap.perf, "observe", None)
    if obs_fn is None:
        return
    for i in np.flatnonzero(trained).tolist():
        k, cnt = int(j.gtype[i]), int(j.gpus[i])
        nd = cl.min_nodes(k, cnt) if nodes is None else int(nodes[i])
        o = obs_fn(j.specs[i], cl.types[k], cnt, nd)
        if o is None:
            continue
        row = int(j.rows[i])
        grads[row] = (o.grad_sqr, o.grad_var)
        key_t = (row, MERGED if merge_types else k)
        mine = pts.setdefault(key_t, {})
        key = (min(nd, 2), cnt, o.local_bsz)
        if key in mine:
            continue
        mine[key] = (o.step_time, o.sync_time)
        fits[key_t] = fit_points(mine)
