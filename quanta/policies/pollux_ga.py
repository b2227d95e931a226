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
  service; Quanta's own first step, where a job may not use some GPU type (its spec or its
  memory rules it out): its replicas there dropped), duplicates eliminated; the front's solution of best power mean is applied
  (pollux_unaware.py:117-203, 343-424; pymoo 0.4.2.1 NSGA2);
- a job given virtual nodes of several GPU types keeps only those of its majority type (ties:
  a100, v100, rtx6000, rtx, t4) and the others idle this round (cluster_unaware.py:448-503);
  Quanta's own step after it (pollux.py `_decide_ga`): a job left with a count it cannot run at
  on that type (its model's rate there is 0: it does not fit) keeps the most replicas it runs at
  there, from its first virtual nodes, or none.
The random stream is not the reference's (pymoo draws from the unseeded global numpy RNG): the
same algorithm, a different draw, deterministic for the run's seed.
"""

from __future__ import annotations

from bisect import bisect_left

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
    """One round's optimisation: speedup tables, the current allocation and the limits.

    Populations are small (about 100 x 10 jobs x 16 nodes), so numpy's per-call overhead and its
    slow reductions along a short axis (one inner loop per outer index; cumsum worst) set the
    cost: integer sums go through einsum, any() through a boolean matmul with ones, running sums
    over jobs through one (P, N) step per job (replica counts are never negative, which these
    rely on); float operations that decide anything keep their operands and order, so results
    are bit for bit those of the plain numpy expressions (tests/test_pollux_ga_speed.py)."""

    def __init__(self, table: np.ndarray, base: np.ndarray, cap: np.ndarray, res: np.ndarray,
                 factor: np.ndarray, p: float, scale: float, usable: np.ndarray | None = None):
        self.table = table          # (J, nodes + 1, replicas + 1) speedups
        self.base = base            # (J, N) replicas per virtual node now
        self.cap = cap              # (J,) replicas a job may have
        self.res = res              # (N,) GPUs per virtual node
        self.factor = factor        # (J,) restart factor of a changed row
        self.p = p
        self.scale = scale          # speedup of one node's worth of GPUs = 1
        self.jobs = np.arange(base.shape[0])
        # (J, N) whether a job may run on a virtual node's GPU type (None: everywhere, as in
        # Pollux, whose search knows no types; where a job's spec or memory rules a type out,
        # replicas there are dropped first)
        self.usable = usable

    def evaluate(self, X: np.ndarray) -> np.ndarray:
        """(P, 2) objectives (both minimised): minus the power mean, minus the utility."""
        nz = X > 0
        nodes = np.minimum(_count(nz, "pjn->pj"), self.table.shape[1] - 1)
        reps = np.einsum("pjn->pj", X)
        sp = self.table[self.jobs, nodes, np.minimum(reps, self.table.shape[2] - 1)]
        changed = (X != self.base) @ np.ones(X.shape[2], dtype=bool)    # (P, J) row changed
        scaled = sp * self.scale * np.where(changed, self.factor, 1.0)
        n_jobs = X.shape[1]
        if self.p == 0:
            mean = np.exp(np.log(np.maximum(scaled, FLOOR)).sum(axis=1) / n_jobs)
        else:
            mean = (((scaled + FLOOR) ** self.p).sum(axis=1) / n_jobs) ** (1.0 / self.p)
        used = np.ones(X.shape[1], dtype=bool) @ nz                     # (P, N) any job there
        total = used @ self.res                                          # GPUs of used nodes
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(reps > 0, reps / total[:, None], 0.0)
            util = np.where(reps > 0, sp / reps, 0.0)
        return np.column_stack([-mean, -(util * share).sum(axis=1)])

    # -- Pollux's operators -------------------------------------------------------------------
    def crossover(self, rng, X: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Single-point crossover over jobs of parents X[a] and X[b], with probability
        CROSSOVER_P per pair (else the parents pass unchanged): two children per pair, gathered
        row by row from their parents."""
        m, J = len(a), X.shape[1]
        do = rng.random(m) < CROSSOVER_P
        swap = (np.arange(J) < rng.integers(0, J, size=(m, 1))) & do[:, None]
        first = np.where(swap, b[:, None], a[:, None])
        second = np.where(swap, a[:, None], b[:, None])
        rows = np.concatenate([first, second]) * J + np.arange(J)       # into (P x J, N) rows
        return X.reshape(-1, X.shape[2]).take(rows.reshape(-1), axis=0).reshape(2 * m, *X.shape[1:])

    def mutate(self, rng, X: np.ndarray) -> np.ndarray:
        P, J, N = X.shape
        u = rng.random(P * J * (2 + 3 * N))
        a, b = u[:P * J].reshape(P, J), u[P * J:2 * P * J].reshape(P, J)
        c, d, e = u[2 * P * J:].reshape(3, P, J, N)
        # (1) a job's row back to its current allocation, (2) some of a job's entries zeroed
        X = X.copy()
        p_, j_ = np.nonzero(a < RESET_P)
        X[p_, j_] = self.base[j_]
        X[(b < ZERO_ROW_P)[:, :, None] & (c < ZERO_P)] = 0
        # (3) on every node with a free GPU, each job gains replicas with probability 1 / jobs,
        # each job already there with 1 / its jobs there too (the reference normalises over the
        # jobs axis), to a uniform count between what it has and the node's size. Both chances
        # are per node, so their union is formed on (P, N); few entries grow.
        fits = np.einsum("pjn->pn", X) < self.res                       # a free GPU
        on = (X > 0) & fits[:, None, :]
        p1 = fits / J
        p2 = 1.0 / np.maximum(np.ones(J) @ on, 1.0)
        grow = d < np.where(on, (p1 + p2 - p1 * p2)[:, None, :], p1[:, None, :])
        i = np.flatnonzero(grow)
        flat = X.reshape(-1)
        flat[i] += (e.reshape(-1)[i] * (self.res[i % N] - flat[i] + 1)).astype(np.int64)
        return X

    def repair(self, rng, X: np.ndarray) -> np.ndarray:
        P, J, N = X.shape
        # worked on job by job, on a (jobs, P, N) copy where a job's slice is contiguous
        T = X.transpose(1, 0, 2).copy()
        if self.usable is not None:
            T[~np.broadcast_to(self.usable[:, None, :], T.shape)] = 0
        # at most one distributed job per node: on each node, everything from the second
        # distributed job on (in job order) is dropped, as the reference's cumulative mask does
        nz = T > 0
        dist = _count(nz, "jpn->jp") > 1
        if dist.any():
            one = np.zeros((P, N), dtype=bool)          # a distributed job met on the node
            two = np.zeros((P, N), dtype=bool)          # two of them
            for j in range(J):
                on = nz[j] & dist[j][:, None]
                two |= one & on
                one |= on
                np.copyto(T[j], 0, where=two)
        # the job's replica cap and at most MAX_NODES nodes, over its nodes in random order
        # (only rows over a limit change; their draws in (solution, job) order)
        over = np.einsum("jpn->jp", T) > self.cap[:, None]
        if N > MAX_NODES:
            over |= _count(T > 0, "jpn->jp") > MAX_NODES
        p_, j_ = np.nonzero(over.T)
        if len(p_):
            order = np.argsort(rng.random((len(p_), N)), axis=1)
            at = order + ((j_ * P + p_) * N)[:, None]                   # into T's flat entries
            flat = T.reshape(-1)
            Y = np.minimum(np.cumsum(flat[at], axis=1), self.cap[j_][:, None])
            Y[:, 1:] -= Y[:, :-1]                      # (numpy buffers the overlapping operand)
            if N > MAX_NODES:
                keep = np.minimum(np.cumsum(Y > 0, axis=1), MAX_NODES)
                keep[:, 1:] -= keep[:, :-1]
                Y[keep == 0] = 0
            flat[at] = Y
        # node capacities, in job order: each job takes what it asks of what is left
        out = np.empty_like(T)
        free = np.broadcast_to(self.res, (P, N)).copy()
        for j in range(J):
            np.minimum(T[j], free, out=out[j])
            free -= out[j]
        return np.ascontiguousarray(out.transpose(1, 0, 2))


def _count(mask: np.ndarray, spec: str) -> np.ndarray:
    """True entries of a boolean array summed as einsum's spec says (int64)."""
    return np.einsum(spec, mask, dtype=np.int64, casting="unsafe")


# -- NSGA-II (as pymoo 0.4.2.1 runs it) ----------------------------------------------------------

def ranks_of(F: np.ndarray) -> np.ndarray:
    """Non-dominated rank (0 = Pareto front) of each row of F, two objectives, both minimised:
    one sweep in (f0, f1) order, each point joining the first front none of whose members
    dominates it. A front's members there have f1 non-increasing, so its last (f1, f0) says
    whether it dominates the point: it does not exactly when it sorts before (f1, f0) as a
    tuple, and the fronts' last tuples stay sorted, so a bisection finds the front. Equal points
    dominate neither and land in the same front without changing it."""
    order = np.lexsort((F[:, 1], F[:, 0]))
    S = F[order]
    last: list[tuple[float, float]] = []
    ranks = []
    for key in zip(S[:, 1].tolist(), S[:, 0].tolist()):
        k = bisect_left(last, key)
        if k == len(last):
            last.append(key)
        elif key[0] < last[k][0]:
            last[k] = key
        ranks.append(k)
    rank = np.empty(len(F), dtype=np.int64)
    rank[order] = ranks
    return rank


def crowding(F: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Crowding distance of every point within its front (pymoo's calc_crowding_distance, all
    fronts at once): a front of at most two points is all infinite; a later duplicate of a point
    gets 0 and takes no part; per objective, the gap between the neighbours over the front's
    range (boundary points infinite, an objective equal over the front adds 0), averaged.
    The distinct points of a front (two objectives) have f0 increasing and f1 decreasing, so
    one order by f0, with f1 negated (exactly: its gaps and range only change sign), serves
    both objectives."""
    n = len(F)
    order = np.lexsort((F[:, 1], F[:, 0], rank))           # equal points: the first first
    r = rank[order]
    V = F[order] * np.array([1.0, -1.0])
    new = np.ones(n, dtype=bool)
    moved = V[1:] != V[:-1]
    new[1:] = (r[1:] != r[:-1]) | moved[:, 0] | moved[:, 1]
    uniq, r, V = order[new], r[new], V[new]
    start = np.ones(len(r), dtype=bool)
    start[1:] = r[1:] != r[:-1]
    end = np.ones(len(r), dtype=bool)
    end[:-1] = start[1:]
    gap = np.diff(V, axis=0)
    prev = np.empty_like(V)
    prev[1:] = gap
    prev[start] = np.inf
    nxt = np.empty_like(V)
    nxt[:-1] = gap
    nxt[end] = np.inf
    seg = np.cumsum(start) - 1
    norm = V[end][seg] - V[start][seg]
    with np.errstate(invalid="ignore", divide="ignore"):
        d = np.where(norm > 0, prev / norm + nxt / norm, 0.0)
    out = np.zeros(n)
    out[uniq] = (d[:, 0] + d[:, 1]) / 2
    size = np.bincount(rank)
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
    """n winners of binary tournaments: domination (two objectives) first, then crowding, then a
    coin."""
    m = len(F)
    perms = np.concatenate([rng.permutation(m) for _ in range(-(-2 * n // m))])[:2 * n]
    a, b = perms[0::2], perms[1::2]
    fa, fb = F[a], F[b]
    le, lt = fa <= fb, fa < fb
    ge, gt = fa >= fb, fa > fb
    a_dom = le[:, 0] & le[:, 1] & (lt[:, 0] | lt[:, 1])
    b_dom = ge[:, 0] & ge[:, 1] & (gt[:, 0] | gt[:, 1])
    coin = rng.random(n) < 0.5
    ca, cb = crowd[a], crowd[b]
    pick_a = a_dom | (~b_dom & ((ca > cb) | (~(cb > ca) & coin)))
    return np.where(pick_a, a, b)


class Seen:
    """Solutions met so far (a 64-bit hash of each matrix; a collision only loses an offspring)."""

    def __init__(self, shape: tuple[int, int], rng):
        self.w = rng.integers(1, 2 ** 63, size=shape[0] * shape[1], dtype=np.uint64) | 1
        self.keys: set[int] = set()

    def hash(self, X: np.ndarray) -> np.ndarray:
        """Sum of entries x weights, wrapping at 2 ** 64."""
        flat = np.ascontiguousarray(X, dtype=np.int64).reshape(len(X), -1)
        return np.einsum("pk,k->p", flat.view(np.uint64), self.w)

    def new(self, X: np.ndarray) -> np.ndarray:
        """The rows of X not met before (first of equal rows kept), recorded."""
        keep = []
        for i, h in enumerate(self.hash(X).tolist()):
            if h not in self.keys:
                self.keys.add(h)
                keep.append(i)
        return X[keep]


def nsga2(rng, prob: Problem, init: np.ndarray, pop_size: int, generations: int):
    """(the final Pareto front's solutions, their objectives)."""
    seen = Seen(init.shape[1:], rng)
    X = seen.new(prob.repair(rng, init))
    F = prob.evaluate(X)
    idx, rank, crowd = survive(rng, F, len(X))
    X, F = X[idx], F[idx]
    for _ in range(generations - 1):
        seen.keys = set(seen.hash(X).tolist())   # duplicates of the population or of offspring
        off = []
        n_off = 0
        for _ in range(MAX_INFILLS + 1):
            need = pop_size - n_off
            if need <= 0:
                break
            m = -(-need // 2)
            par = tournament(rng, F, crowd, 2 * m)
            kids = prob.crossover(rng, X, par[0::2], par[1::2])
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
