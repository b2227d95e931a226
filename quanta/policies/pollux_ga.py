"""Pollux's own search, as the baseline of Sia's simulator runs it (`pollux:search=ga`): a genetic
algorithm (NSGA-II) over replica-to-virtual-node matrices, heterogeneity-unaware.

Read from siasosp23/artifacts, sia-simulator @ aaf7a0d (file:line there); own implementation:
- virtual nodes: every node split into nodes of the smallest node size of the cluster (4 GPUs on
  Sia's cluster), which the policy sees as identical (multi_simulator_unaware.py:43-46,
  cluster_unaware.py:41-51, 634-637);
- a solution is an integer matrix (jobs x virtual nodes) of replicas; a job's speedup is its
  goodput at (virtual nodes used, replicas) over its goodput at the fair share (1 node,
  ceil(GPUs / jobs) replicas), scaled so that one node's worth is 1; changed rows are multiplied
  by the restart factor max(age - restarts x 30, 0) / (age + 30); objectives: the power mean of
  (speedup + 1e-3) and the cluster utility (pollux_unaware.py:206-341);
- NSGA-II: population 100, 100 generations, started from the previous round's Pareto front
  (the current allocation only, the first time), binary tournaments on domination then crowding,
  single-point crossover over jobs (probability 0.9), Pollux's mutation (a job's row reset to its
  allocation, entries zeroed, replicas added where they fit) and repair (one distributed job per
  node, the job's replica cap, at most 16 nodes, node capacities in order of least attained
  service), duplicates eliminated; the front's solution of best power mean is applied
  (pollux_unaware.py:117-203, 343-424; pymoo 0.4.2.1 NSGA2);
- a job given virtual nodes of several GPU types keeps only those of its majority type (ties:
  a100, v100, rtx6000, rtx, t4) and the others idle this round (cluster_unaware.py:448-503).
The random stream is not the reference's (pymoo draws from the unseeded global numpy RNG): the
same algorithm, a different draw, deterministic for the run's seed.
"""

from __future__ import annotations

import numpy as np

FLOOR = 1e-3                     # added to every speedup in the power mean (pollux_unaware.py:338)
MAX_NODES = 16                   # nodes per job (pollux_unaware.py:402)
CROSSOVER_P = 0.9                # pymoo Crossover default
RESET_P = ZERO_ROW_P = ZERO_P = 0.1   # mutation (pollux_unaware.py:361-365)
MAX_INFILLS = 100                # pymoo InfillCriterion n_max_iterations
KEEP_ORDER = ("a100", "v100", "rtx6000", "rtx", "t4")   # dgx-ext, azure, quad, rtx, aws


class VirtualNodes:
    """The cluster as Sia's unaware simulator shows it to Pollux: every node cut into virtual
    nodes of `size` GPUs (the smallest node of the cluster), numbered node by node."""

    def __init__(self, cluster, node_up: np.ndarray):
        self.size = g = int(np.min(cluster.node_gpus))
        per = cluster.node_gpus // g
        self.node = np.repeat(np.arange(len(cluster.node_gpus)), per)
        self.first = cluster.node_first_gpu[self.node] + g * np.concatenate(
            [np.arange(k) for k in per])
        self.type = cluster.node_type[self.node]
        self.res = np.where(np.asarray(node_up, dtype=bool)[self.node], g, 0).astype(np.int64)
        self.gpu_vnode = np.full(cluster.num_gpus, -1, dtype=np.int64)
        for v, f in enumerate(self.first.tolist()):
            self.gpu_vnode[f:f + g] = v

    def __len__(self) -> int:
        return len(self.node)


class Problem:
    """One round's optimisation: speedup tables, the current allocation and the limits."""

    def __init__(self, table: np.ndarray, base: np.ndarray, cap: np.ndarray, res: np.ndarray,
                 factor: np.ndarray, p: float, scale: float):
        self.table = table          # (J, nodes + 1, replicas + 1) speedups
        self.base = base            # (J, N) replicas per virtual node now
        self.cap = cap              # (J,) replicas a job may have
        self.res = res              # (N,) GPUs per virtual node
        self.factor = factor        # (J,) restart factor of a changed row
        self.p = p
        self.scale = scale          # speedup of one node's worth of GPUs = 1
        self.jobs = np.arange(base.shape[0])

    def evaluate(self, X: np.ndarray) -> np.ndarray:
        """(P, 2) objectives (both minimised): minus the power mean, minus the utility."""
        nodes = np.minimum(np.count_nonzero(X, axis=2), self.table.shape[1] - 1)
        reps = X.sum(axis=2)
        sp = self.table[self.jobs, nodes, np.minimum(reps, self.table.shape[2] - 1)]
        scaled = sp * self.scale * np.where(np.any(X != self.base, axis=2), self.factor, 1.0)
        n_jobs = X.shape[1]
        if self.p == 0:
            mean = np.exp(np.log(np.maximum(scaled, FLOOR)).sum(axis=1) / n_jobs)
        else:
            mean = (((scaled + FLOOR) ** self.p).sum(axis=1) / n_jobs) ** (1.0 / self.p)
        total = (np.any(X > 0, axis=1) * self.res).sum(axis=1)          # GPUs of used nodes
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(reps > 0, reps / total[:, None], 0.0)
            util = np.where(reps > 0, sp / reps, 0.0)
        return np.column_stack([-mean, -(util * share).sum(axis=1)])

    # -- Pollux's operators -------------------------------------------------------------------
    def crossover(self, rng, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        """Single-point crossover over jobs: two children per pair of parents."""
        m, J = A.shape[0], A.shape[1]
        swap = np.arange(J)[None, :] < rng.integers(0, J, size=(m, 1))
        c1 = np.where(swap[:, :, None], B, A)
        c2 = np.where(swap[:, :, None], A, B)
        return np.concatenate([c1, c2])

    def mutate(self, rng, X: np.ndarray) -> np.ndarray:
        P, J, N = X.shape
        u = rng.random(P * J * (2 + 3 * N))
        a, b = u[:P * J].reshape(P, J), u[P * J:2 * P * J].reshape(P, J)
        c, d, e = u[2 * P * J:].reshape(3, P, J, N)
        # (1) a job's row back to its current allocation, (2) some of a job's entries zeroed
        X = np.where((a < RESET_P)[:, :, None], self.base, X)
        X = np.where(c < np.where(b < ZERO_ROW_P, ZERO_P, 0.0)[:, :, None], 0, X)
        # (3) on every node with a free GPU, each job gains replicas with probability 1 / jobs,
        # each job already there with 1 / its jobs there too (the reference normalises over the
        # jobs axis), to a uniform count between what it has and the node's size
        fits = (self.res - X.sum(axis=1)) >= 1                          # (P, N)
        p1 = fits[:, None, :] / J
        on = (X > 0) & fits[:, None, :]
        p2 = on / np.maximum(on.sum(axis=1, keepdims=True), 1)
        grow = d < p1 + p2 - p1 * p2
        return np.where(grow, X + (e * (self.res - X + 1)).astype(np.int64), X)

    def repair(self, rng, X: np.ndarray) -> np.ndarray:
        # at most one distributed job per node: on each node, everything after the second
        # distributed job (in job order) is dropped, as the reference's cumulative mask does
        nz = X > 0
        dist = nz.sum(axis=2) > 1
        if dist.any():
            X = np.where(np.cumsum(nz & dist[:, :, None], axis=1) > 1, 0, X)
        # the job's replica cap and at most MAX_NODES nodes, over its nodes in random order
        # (only rows over a limit change)
        over = X.sum(axis=2) > self.cap
        if X.shape[2] > MAX_NODES:
            over |= np.count_nonzero(X, axis=2) > MAX_NODES
        if over.any():
            X = X.copy()
            p_, j_ = np.nonzero(over)
            R = X[p_, j_]                                                # (m, N)
            order = np.argsort(rng.random(R.shape), axis=1)
            Y = np.take_along_axis(R, order, axis=1)
            Y = np.diff(np.minimum(np.cumsum(Y, axis=1), self.cap[j_][:, None]), axis=1,
                        prepend=0)
            if R.shape[1] > MAX_NODES:
                keep = np.diff(np.minimum(np.cumsum(Y > 0, axis=1), MAX_NODES), axis=1,
                               prepend=0) > 0
                Y = np.where(keep, Y, 0)
            R[np.arange(len(R))[:, None], order] = Y
            X[p_, j_] = R
        # node capacities, in job order
        cs = np.minimum(np.cumsum(X, axis=1), self.res)
        cs[:, 1:] -= cs[:, :-1].copy()
        return cs


# -- NSGA-II (as pymoo 0.4.2.1 runs it) ----------------------------------------------------------

def ranks_of(F: np.ndarray) -> np.ndarray:
    """Non-dominated rank (0 = Pareto front) of each row of F, two objectives, both minimised:
    one sweep in (f0, f1) order, each point joining the first front none of whose members
    dominates it (a front's members there have f1 non-increasing, so its last f1, and the first
    f0 at that f1, say whether it dominates the point; equal points dominate neither)."""
    U, inv = np.unique(F, axis=0, return_inverse=True)     # sorted by (f0, f1); equal rows
    f0 = U[:, 0].tolist()                                   # share a rank
    f1 = U[:, 1].tolist()
    last_f1: list[float] = []
    first_f0: list[float] = []
    rank = np.empty(len(U), dtype=np.int64)
    for idx, (a, b) in enumerate(zip(f0, f1)):
        lo, hi = 0, len(last_f1)
        while lo < hi:
            mid = (lo + hi) // 2
            lf = last_f1[mid]
            if lf < b or (lf == b and first_f0[mid] < a):
                lo = mid + 1
            else:
                hi = mid
        if lo == len(last_f1):
            last_f1.append(b)
            first_f0.append(a)
        elif b < last_f1[lo]:
            last_f1[lo] = b
            first_f0[lo] = a
        rank[idx] = lo
    return rank[inv.reshape(-1)]


def crowding(F: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Crowding distance of every point within its front (pymoo's calc_crowding_distance, all
    fronts at once): a front of at most two points is all infinite; a later duplicate of a point
    gets 0 and takes no part; per objective, the gap between the neighbours over the front's
    range (boundary points infinite, an objective equal over the front adds 0), averaged."""
    n, k = F.shape
    out = np.zeros(n)
    order = np.lexsort((np.arange(n), F[:, 1], F[:, 0], rank))
    srt = F[order]
    dup = np.zeros(n, dtype=bool)
    dup[1:] = (rank[order][1:] == rank[order][:-1]) & np.all(srt[1:] == srt[:-1], axis=1)
    uniq = np.sort(order[~dup])
    r = rank[uniq]
    U = F[uniq]
    cd = np.zeros(len(uniq))
    for m in range(k):
        o = np.lexsort((np.arange(len(uniq)), U[:, m], r))
        v, fr = U[o, m], r[o]
        start = np.ones(len(v), dtype=bool)
        start[1:] = fr[1:] != fr[:-1]
        end = np.ones(len(v), dtype=bool)
        end[:-1] = fr[1:] != fr[:-1]
        gap = np.diff(v)
        prev = np.empty(len(v))
        prev[1:] = gap
        prev[start] = np.inf
        nxt = np.empty(len(v))
        nxt[:-1] = gap
        nxt[end] = np.inf
        seg = np.cumsum(start) - 1
        lo = v[start][seg]
        hi = v[end][seg]
        norm = hi - lo
        with np.errstate(invalid="ignore", divide="ignore"):
            d = np.where(norm > 0, prev / norm + nxt / norm, 0.0)
        cd[o] += d
    out[uniq] = cd / k
    size = np.bincount(rank, minlength=rank.max() + 1)
    out[size[rank] <= 2] = np.inf
    return out


def survive(rng, F: np.ndarray, n_survive: int):
    """Rank-and-crowding survival: (survivor indexes, their ranks, their crowding)."""
    rank = ranks_of(F)
    cd = crowding(F, rank)
    counts = np.bincount(rank)
    last = int(np.searchsorted(np.cumsum(counts), n_survive))   # the front that is split
    last = min(last, len(counts) - 1)
    whole = np.flatnonzero(rank < last)
    front = np.flatnonzero(rank == last)
    need = n_survive - len(whole)
    if need < len(front):
        perm = rng.permutation(len(front))
        front = front[perm[np.argsort(cd[front][perm], kind="quicksort")][::-1][:need]]
    surv = np.concatenate([whole, front])
    return surv, rank[surv], cd[surv]


def tournament(rng, F: np.ndarray, crowd: np.ndarray, n: int) -> np.ndarray:
    """n winners of binary tournaments: domination first, then crowding, then a coin."""
    m = len(F)
    perms = np.concatenate([rng.permutation(m) for _ in range(-(-2 * n // m))])[:2 * n]
    a, b = perms[0::2], perms[1::2]
    fa, fb = F[a], F[b]
    a_dom = np.all(fa <= fb, axis=1) & np.any(fa < fb, axis=1)
    b_dom = np.all(fb <= fa, axis=1) & np.any(fb < fa, axis=1)
    coin = rng.random(n) < 0.5
    by_crowd = np.where(crowd[a] > crowd[b], a, np.where(crowd[b] > crowd[a], b,
                                                         np.where(coin, a, b)))
    return np.where(a_dom, a, np.where(b_dom, b, by_crowd))


class Seen:
    """Solutions met so far (a 64-bit hash of each matrix; a collision only loses an offspring)."""

    def __init__(self, shape: tuple[int, int], rng):
        self.w = rng.integers(1, 2 ** 63, size=shape[0] * shape[1], dtype=np.uint64) | 1
        self.keys = np.empty(0, dtype=np.uint64)

    def hash(self, X: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            return (X.reshape(len(X), -1).astype(np.uint64) * self.w).sum(axis=1)

    def new(self, X: np.ndarray, add: bool = True) -> np.ndarray:
        """The rows of X not met before (first of equal rows kept), recorded."""
        h = self.hash(X)
        _, first = np.unique(h, return_index=True)
        first = np.sort(first)
        first = first[~np.isin(h[first], self.keys)]
        if add:
            self.keys = np.concatenate([self.keys, h[first]])
        return X[first]


def nsga2(rng, prob: Problem, init: np.ndarray, pop_size: int, generations: int):
    """(the final Pareto front's solutions, their objectives)."""
    seen = Seen(init.shape[1:], rng)
    X = seen.new(prob.repair(rng, init))
    F = prob.evaluate(X)
    idx, rank, crowd = survive(rng, F, len(X))
    X, F = X[idx], F[idx]
    for _ in range(generations - 1):
        seen.keys = seen.hash(X)              # duplicates of the population or of offspring
        off = []
        n_off = 0
        for _ in range(MAX_INFILLS + 1):
            need = pop_size - n_off
            if need <= 0:
                break
            m = -(-need // 2)
            par = tournament(rng, F, crowd, 2 * m).reshape(m, 2)
            A, B = X[par[:, 0]], X[par[:, 1]]
            do = rng.random(m) < CROSSOVER_P
            kids = prob.crossover(rng, A, B)
            kids = np.where(np.concatenate([do, do])[:, None, None], kids,
                            np.concatenate([A, B]))
            kids = seen.new(prob.repair(rng, prob.mutate(rng, kids)))[:need]
            off.append(kids)
            n_off += len(kids)
        if n_off == 0:
            break
        Y = np.concatenate(off)
        X = np.concatenate([X, Y])
        F = np.concatenate([F, prob.evaluate(Y)])
        idx, rank, crowd = survive(rng, F, pop_size)
        X, F = X[idx], F[idx]
    best = rank == 0
    return X[best], F[best]


def keep_one_type(counts: np.ndarray, vtype: np.ndarray, types: tuple[str, ...]) -> np.ndarray:
    """The job's replicas per virtual node with only its majority GPU type kept (ties: the
    faster type by Sia's simulator's order)."""
    on = np.flatnonzero(counts)
    if len(on) == 0:
        return counts
    per = np.bincount(vtype[on], weights=counts[on], minlength=len(types))
    best = np.flatnonzero(per == per.max())
    if len(best) > 1:
        rank = [KEEP_ORDER.index(types[t]) if types[t] in KEEP_ORDER else len(KEEP_ORDER)
                for t in best]
        best = best[[int(np.argmin(rank))]]
    return np.where(vtype == best[0], counts, 0)
