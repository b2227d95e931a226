"""Pollux's iteration-time model and its fit (ALGORITHMS.md 4a).

    T_grad(m)  = alpha_c + beta_c * m                         (one accumulation / gradient step)
    T_sync(K)  = 0                                  if K == 1
               = alpha_r + beta_r * max(K - 2, 0)   if the K replicas share one node
               = alpha_n + beta_n * max(K - 2, 0) + beta_p * (L - 1)
                                                    if they span nodes, L GPUs on the busiest one
    T_iter     = s * T_grad + (T_grad^gamma + T_sync^gamma)^(1/gamma)

beta_p is not in Pollux: it is the cost of each further replica on the busiest node of a
multi-node job (its GPUs first reduce over that node's PCIe / NVLink before the network ring, so
the slowest node sets the pace). On Azure's V100 nodes it dominates: 2 nodes x 1 GPU sync faster
than 1 node x 2 GPUs, and 1+8 as slowly as 8+8 (imagenet at local batch 20: 0.18 s vs 0.20 s, 11:
0.003 s). L defaults to ceil(K / N), the balanced placement; with one node L = K and the term is
not used.

`s` is the number of extra accumulation steps (global batch M = K * m * (s + 1)); gamma in [1, 10]
says how much the last gradient step overlaps the synchronisation (1: none, large: full).

`fit_throughput` minimises one robust RMSLE over the predicted iteration times and the 1-GPU
gradient-step times. Pollux sums the RMSLE of every gradient-step time and that of the iteration
times; see `_objective`'s note for why this differs. sqrt(mean(rho(log pred - log measured))) with the
pseudo-Huber rho(r) = 2 c^2 (sqrt(1 + (r/c)^2) - 1), c = 0.1 (= r^2 for errors well under 10%,
linear beyond: a few noisy samples do not pull the fit), plus the regularisers 1e-3*(gamma-1)^2
and 1e-2*((beta_n/alpha_n)^2 + (beta_r/alpha_r)^2 + (beta_p/alpha_n)^2), with bounded L-BFGS-B
from three fixed initial points (synchronisation 1/10, 1/100 and 1 of the gradient time),
keeping the best (deterministic). Parameters the samples cannot identify are pinned (see `fit_throughput`).
The prior alpha_n >= 1.1 * alpha_r is built into the parameterisation: the optimiser sees
alpha_n = 1.1 * alpha_r + d_n with d_n >= 0, so it holds for every fit.

Measured profiles (Sia/Pollux `step_time, sync_time`) give the whole optimiser step as
`step_time` and the part of it spent synchronising as `sync_time`; the gradient-step time is
therefore `step_time - sync_time` and the iteration time is `step_time` (as in Sia's simulator).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
from threadpoolctl import threadpool_limits

LOWER = 1e-8          # small positive lower bound of every alpha/beta (keeps ratios finite)
GAMMA_BOUNDS = (1.0, 10.0)
PRIOR_NODE_OVER_REPLICA = 1.1   # alpha_n >= 1.1 * alpha_r; beta_n = 1.1 * beta_r when unobserved


@dataclass(frozen=True, slots=True)
class ThroughputParams:
    alpha_c: float
    beta_c: float
    alpha_r: float
    beta_r: float
    alpha_n: float
    beta_n: float
    gamma: float
    beta_p: float = 0.0      # per further GPU on the busiest node of a multi-node job (not Pollux)

    def scaled(self, speed: float) -> "ThroughputParams":
        """The same job on hardware `speed` times faster: every time term divided by `speed`
        (T_iter is homogeneous of degree 1 in them, so throughput scales exactly by `speed`)."""
        k = 1.0 / speed
        return ThroughputParams(self.alpha_c * k, self.beta_c * k, self.alpha_r * k,
                                self.beta_r * k, self.alpha_n * k, self.beta_n * k, self.gamma,
                                self.beta_p * k)

    def as_tuple(self) -> tuple[float, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))


def grad_time(p: ThroughputParams, local_bsz) -> np.ndarray:
    return p.alpha_c + p.beta_c * np.asarray(local_bsz, dtype=float)


def busiest_node(num_nodes, num_replicas, per_node=None) -> np.ndarray:
    """GPUs on the busiest node: `per_node` where known, else the balanced ceil(K / N)."""
    if per_node is not None:
        return np.asarray(per_node, dtype=float)
    n = np.maximum(np.asarray(num_nodes, dtype=float), 1.0)
    return np.ceil(np.asarray(num_replicas, dtype=float) / n)


def sync_time(p: ThroughputParams, num_nodes, num_replicas, per_node=None) -> np.ndarray:
    n = np.asarray(num_nodes)
    k = np.asarray(num_replicas, dtype=float)
    extra = np.maximum(k - 2.0, 0.0)
    local = busiest_node(n, k, per_node) - 1.0
    t = np.where(n > 1, p.alpha_n + p.beta_n * extra + p.beta_p * local,
                 p.alpha_r + p.beta_r * extra)
    return np.where(k > 1, t, 0.0)


def _combine(t_grad, t_sync, gamma):
    # (a^g + b^g)^(1/g) computed as a * (1 + (b/a)^g)^(1/g): no overflow for large gamma.
    ratio = t_sync / t_grad
    return t_grad * (1.0 + ratio ** gamma) ** (1.0 / gamma)


def iteration_time(params: ThroughputParams, num_nodes, num_replicas, local_bsz,
                   accum_steps=0, per_node=None) -> np.ndarray:
    """Seconds per optimiser step (vectorised; inputs broadcast together). `per_node`: GPUs on
    the busiest node (None: ceil(K / N))."""
    t_grad = grad_time(params, local_bsz)
    t_sync = sync_time(params, num_nodes, num_replicas, per_node)
    return np.asarray(accum_steps) * t_grad + _combine(t_grad, t_sync, params.gamma)


# -- BLAS threads -------------------------------------------------------------------------
def _one_blas_thread():
    """Run L-BFGS-B with single-threaded BLAS (threadpoolctl), restoring the setting after: the
    optimiser's 7-parameter linear algebra is tiny, and multi-threaded OpenBLAS spends far more
    on waking threads than on work (measured: a fit took 0.8 s instead of 15 ms on a busy
    2-core machine)."""
    return threadpool_limits(limits=1, user_api="blas")


# -- model fitting ------------------------------------------------------------------------
# Optimiser vector: x = [alpha_c, beta_c, alpha_r, beta_r, d_n, beta_n, gamma, beta_p],
# alpha_n = 1.1 * alpha_r + d_n (the prior), beta_n free unless tied (no multi-node samples).
HUBER_C = 0.1       # log-error scale where the robust loss turns from quadratic to linear
# The gradient-step residuals (step - sync) are fitted on the 1-GPU samples only (all samples
# when there is none). Pollux fits them on every sample. In the profiles, step - sync is not a
# function of the local batch alone: it grows with the replica count (yolov3 on A100 at local
# batch 4: 0.25 s on 1 GPU, 0.45 s on 8), which T_grad(m) cannot follow. Anchoring T_grad to that
# moves the iteration time away from what was measured. On one GPU, T_iter = T_grad is measured
# directly. Both residual sets go into one RMS, so each sample weighs the same.


def _unpack(x: np.ndarray, tie_beta_n: bool) -> ThroughputParams:
    x = [float(v) for v in x]
    alpha_n = PRIOR_NODE_OVER_REPLICA * x[2] + x[4]
    beta_n = PRIOR_NODE_OVER_REPLICA * x[3] if tie_beta_n else x[5]
    return ThroughputParams(x[0], x[1], x[2], x[3], alpha_n, beta_n, x[6], x[7])


def _robust(r):
    """(sqrt(mean(rho(r))), d/dr of it per sample) with the pseudo-Huber rho (module doc)."""
    c2 = HUBER_C ** 2
    root = np.sqrt(1.0 + r ** 2 / c2)
    e = np.sqrt(np.mean(2.0 * c2 * (root - 1.0)))
    return e, r / (root * len(r) * max(e, 1e-12))


def _objective(x, nodes, reps, bsz, local, log_grad, log_iter, tie_beta_n, on_grad):
    """Objective and its analytic gradient with respect to x."""
    p = _unpack(x, tie_beta_n)
    multi = nodes > 1
    paired = reps > 1
    extra = np.maximum(reps - 2.0, 0.0)
    t_grad = p.alpha_c + p.beta_c * bsz
    t_sync = np.where(paired, np.where(multi, p.alpha_n + p.beta_n * extra + p.beta_p * local,
                                       p.alpha_r + p.beta_r * extra), 0.0)
    g = p.gamma
    # log T_iter = log T_grad + log(1 + q)/g with q = (T_sync/T_grad)^g
    has_sync = t_sync > 0
    log_ratio = np.where(has_sync, np.log(np.where(has_sync, t_sync, 1.0)) - np.log(t_grad), 0.0)
    q = np.where(has_sync, np.exp(np.minimum(g * log_ratio, 700.0)), 0.0)
    log1q = np.log1p(q)
    r1 = np.log(t_grad) - log_grad
    r2 = np.log(t_grad) + log1q / g - log_iter
    # one robust RMS over the 1-GPU gradient-step residuals and every iteration residual
    err, w = _robust(np.concatenate([r1[on_grad], r2]))
    w1 = np.zeros_like(r1)
    w1[on_grad] = w[:int(on_grad.sum())]    # d err / d log T_grad (per sample)
    w2 = w[int(on_grad.sum()):]             # d err / d log T_iter (per sample)
    reg_gamma = 1e-3 * (g - 1.0) ** 2
    rn, rr, rp = p.beta_n / p.alpha_n, p.beta_r / p.alpha_r, p.beta_p / p.alpha_n
    value = err + reg_gamma + 1e-2 * (rn ** 2 + rr ** 2 + rp ** 2)

    d_tg = (w1 + w2 / (1.0 + q)) / t_grad   # d obj / d T_grad
    safe_sync = np.where(has_sync, t_sync, 1.0)
    d_ts = np.where(has_sync, w2 * q / ((1.0 + q) * safe_sync), 0.0)   # d obj / d T_sync
    d_g = np.sum(w2 * (-log1q / g ** 2 + q * log_ratio / (g * (1.0 + q))))
    on_r = paired & ~multi
    on_n = paired & multi
    k = PRIOR_NODE_OVER_REPLICA
    grad = np.zeros(8)
    grad[0] = np.sum(d_tg)
    grad[1] = np.sum(d_tg * bsz)
    grad[2] = np.sum(d_ts * on_r) + k * np.sum(d_ts * on_n)
    grad[3] = np.sum(d_ts * on_r * extra)
    grad[4] = np.sum(d_ts * on_n)
    if tie_beta_n:
        grad[3] += k * np.sum(d_ts * on_n * extra)
    else:
        grad[5] = np.sum(d_ts * on_n * extra)
    grad[6] = d_g + 2e-3 * (g - 1.0)
    grad[7] = np.sum(d_ts * on_n * local)
    # regulariser 1e-2 * ((beta_n/alpha_n)^2 + (beta_r/alpha_r)^2 + (beta_p/alpha_n)^2)
    d_rn_an = -2e-2 * (rn ** 2 + rp ** 2) / p.alpha_n       # d/d alpha_n
    grad[2] += -2e-2 * rr ** 2 / p.alpha_r + k * d_rn_an
    grad[3] += 2e-2 * rr / p.alpha_r
    grad[4] += d_rn_an
    if tie_beta_n:
        grad[3] += k * 2e-2 * rn / p.alpha_n
    else:
        grad[5] += 2e-2 * rn / p.alpha_n
    grad[7] += 2e-2 * rp / p.alpha_n
    return value, grad


def fit_throughput(num_nodes, num_replicas, local_bsz, step_time, sync_time,
                   per_node=None) -> ThroughputParams:
    """Fit ThroughputParams to measured samples (one entry per measurement).

    `step_time` is the whole optimiser step and `sync_time` its synchronisation part, as in the
    Sia/Pollux profiles; the gradient-step time fitted is `step_time - sync_time`. `per_node`:
    GPUs on the busiest node of each sample (None: ceil(K / N)).

    Pinning rules (Pollux): parameters never observed are fixed rather than fitted:
    - no multi-node sample: alpha_n = 1.1 * alpha_r and beta_n = 1.1 * beta_r (the prior);
    - no single-node multi-GPU sample: alpha_r, beta_r pinned to their lower bound (optimistic,
      as in AdaptDL; alpha_n is then fitted freely above it);
    - never more than 2 replicas: beta_r, beta_n pinned to the lower bound;
    - a single local batch size: alpha_c = half the mean gradient-step time (beta_c fitted);
    - no multi-node sample with more than one GPU on its busiest node: beta_p pinned to 0.
    """
    nodes = np.asarray(num_nodes, dtype=float).ravel()
    reps = np.asarray(num_replicas, dtype=float).ravel()
    bsz = np.asarray(local_bsz, dtype=float).ravel()
    t_iter = np.asarray(step_time, dtype=float).ravel()
    t_sync = np.asarray(sync_time, dtype=float).ravel()
    local = np.broadcast_to(busiest_node(nodes, reps, per_node), nodes.shape).ravel() - 1.0
    if not (len(nodes) == len(reps) == len(bsz) == len(t_iter) == len(t_sync)) or len(nodes) == 0:
        raise ValueError("fit_throughput needs equally long, non-empty sample arrays")
    t_grad = np.maximum(t_iter - t_sync, 1e-6 * t_iter)
    if np.any(t_iter <= 0):
        raise ValueError("fit_throughput: step times must be positive")

    multi_node = bool(np.any(nodes > 1))
    single_node_multi = bool(np.any((nodes == 1) & (reps > 1)))
    beyond_two = bool(np.any(reps > 2))

    # Fixed, data-scaled initial point (deterministic): half the typical gradient time is
    # constant, half proportional to the batch; sync terms a fraction of the gradient time.
    t0 = float(np.median(t_grad))
    m0 = float(np.median(bsz))
    x0 = np.array([t0 / 2, t0 / (2 * m0), t0 / 10, t0 / 100, t0 / 10, t0 / 100, 1.0 + 1e-3,
                   t0 / 100])
    lower = np.array([LOWER] * 6 + [GAMMA_BOUNDS[0], 0.0])
    upper = np.array([np.inf] * 6 + [GAMMA_BOUNDS[1], np.inf])
    tie_beta_n = False

    def pin(i, value):
        x0[i] = lower[i] = upper[i] = value

    if len(np.unique(bsz)) == 1:
        pin(0, float(np.mean(t_grad)) / 2)
    if not multi_node:
        pin(4, 0.0)          # d_n = 0: alpha_n = 1.1 * alpha_r
        lower[4] = upper[4] = x0[4] = 0.0
        pin(5, LOWER)        # unused: beta_n tied to 1.1 * beta_r
        tie_beta_n = True
    if not single_node_multi:
        pin(2, LOWER)
        pin(3, LOWER)
    if not beyond_two:
        pin(3, LOWER)
        pin(5, LOWER)
    if not np.any((nodes > 1) & (local > 0)):
        pin(7, 0.0)
    if multi_node:
        lower[4] = 0.0      # d_n >= 0 (alpha_n may equal 1.1 * alpha_r exactly)

    on_grad = reps == 1 if np.any(reps == 1) else np.ones(len(reps), dtype=bool)
    args = (nodes, reps, bsz, local, np.log(t_grad), np.log(t_iter), tie_beta_n, on_grad)
    free = lower < upper
    from scipy.optimize import minimize   # (imported when first needed: 0.3 s)
    best = None
    with _one_blas_thread():
        for scale in (1.0, 0.1, 10.0):     # synchronisation terms at 1/10, 1/100, 1 of t_grad
            start = np.where(free & (np.arange(8) >= 2) & (np.arange(8) != 6), x0 * scale, x0)
            res = minimize(_objective, np.clip(start, lower, upper), args=args,
                           method="L-BFGS-B", jac=True, bounds=list(zip(lower, upper)),
                           options={"maxiter": 2000})
            if best is None or res.fun < best.fun:
                best = res
    x = np.clip(best.x, lower, upper)
    return _unpack(x, tie_beta_n)
