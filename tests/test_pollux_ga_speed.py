"""Pollux's genetic algorithm is written for speed (einsum sums, boolean matmuls, job-by-job loops,
a sort-based front sweep, crowding from one order); its results must stay bit for bit those of
the plain formulations below (pymoo's per-front crowding, peeled Pareto fronts, cumulative sums),
draws included, so that a run repeats exactly for its seed."""

import numpy as np
import pytest

from quanta.policies.pollux_ga import (
    CROSSOVER_P,
    MAX_NODES,
    RESET_P,
    ZERO_P,
    ZERO_ROW_P,
    Problem,
    Seen,
    crowding,
    ranks_of,
)


def same(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def objectives(rng, n, kind):
    if kind == 0:                                              # ties and duplicates
        return rng.integers(0, 6, size=(n, 2)).astype(float)
    if kind == 1:
        return rng.random((n, 2))
    if kind == 2:                                              # signed zeros
        return rng.choice([-0.0, 0.0, 1.0, -1.0], size=(n, 2))
    x = rng.random(n // 2 + 1)                                 # long fronts, repeated points
    return -np.column_stack([x, 1 - x])[rng.integers(0, len(x), n)]


def peeled_ranks(F):
    rank = np.full(len(F), -1)
    r = 0
    while (rank < 0).any():
        left = np.flatnonzero(rank < 0)
        G = F[left]
        dom = np.all(G[:, None] <= G[None], axis=2) & np.any(G[:, None] < G[None], axis=2)
        rank[left[~dom.any(axis=0)]] = r
        r += 1
    return rank


def pymoo_crowding(F):
    """pymoo 0.4.2.1's calc_crowding_distance of one front (exact duplicates filtered)."""
    n, k = F.shape
    if n <= 2:
        return np.full(n, np.inf)
    uniq = np.array([i for i in range(n) if not any(np.array_equal(F[i], F[j])
                                                    for j in range(i))])
    G = F[uniq]
    Idx = np.argsort(G, axis=0, kind="mergesort")
    G = G[Idx, np.arange(k)]
    dist = np.vstack([G, np.full(k, np.inf)]) - np.vstack([np.full(k, -np.inf), G])
    norm = G.max(axis=0) - G.min(axis=0)
    norm[norm == 0] = np.nan
    with np.errstate(invalid="ignore"):
        last, nxt = dist[:-1] / norm, dist[1:] / norm
    last[np.isnan(last)] = 0.0
    nxt[np.isnan(nxt)] = 0.0
    back = np.argsort(Idx, axis=0)
    cd = np.zeros(n)
    cd[uniq] = np.sum(last[back, np.arange(k)] + nxt[back, np.arange(k)], axis=1) / k
    return cd


@pytest.mark.parametrize("kind", range(4))
def test_fronts_and_crowding_are_the_plain_ones(kind):
    rng = np.random.default_rng(kind)
    for _ in range(60):
        F = objectives(rng, int(rng.integers(1, 90)), kind)
        rank = ranks_of(F)
        assert same(rank, peeled_ranks(F).astype(rank.dtype))
        cd = crowding(F, rank)
        for r in np.unique(rank):
            front = np.flatnonzero(rank == r)
            assert same(cd[front], pymoo_crowding(F[front]))


def plain_repair(prob, rng, X):
    nz = X > 0
    dist = nz.sum(axis=2) > 1
    if dist.any():
        X = np.where(np.cumsum(nz & dist[:, :, None], axis=1) > 1, 0, X)
    over = X.sum(axis=2) > prob.cap
    if X.shape[2] > MAX_NODES:
        over |= np.count_nonzero(X, axis=2) > MAX_NODES
    if over.any():
        X = X.copy()
        p_, j_ = np.nonzero(over)
        R = X[p_, j_]
        order = np.argsort(rng.random(R.shape), axis=1)
        Y = np.take_along_axis(R, order, axis=1)
        Y = np.diff(np.minimum(np.cumsum(Y, axis=1), prob.cap[j_][:, None]), axis=1, prepend=0)
        if R.shape[1] > MAX_NODES:
            keep = np.diff(np.minimum(np.cumsum(Y > 0, axis=1), MAX_NODES), axis=1,
                           prepend=0) > 0
            Y = np.where(keep, Y, 0)
        R[np.arange(len(R))[:, None], order] = Y
        X[p_, j_] = R
    cs = np.minimum(np.cumsum(X, axis=1), prob.res)
    cs[:, 1:] -= cs[:, :-1].copy()
    return cs


def plain_mutate(prob, rng, X):
    P, J, N = X.shape
    u = rng.random(P * J * (2 + 3 * N))
    a, b = u[:P * J].reshape(P, J), u[P * J:2 * P * J].reshape(P, J)
    c, d, e = u[2 * P * J:].reshape(3, P, J, N)
    X = np.where((a < RESET_P)[:, :, None], prob.base, X)
    X = np.where(c < np.where(b < ZERO_ROW_P, ZERO_P, 0.0)[:, :, None], 0, X)
    fits = (prob.res - X.sum(axis=1)) >= 1
    p1 = fits[:, None, :] / J
    on = (X > 0) & fits[:, None, :]
    p2 = on / np.maximum(on.sum(axis=1, keepdims=True), 1)
    grow = d < p1 + p2 - p1 * p2
    return np.where(grow, X + (e * (prob.res - X + 1)).astype(np.int64), X)


def plain_evaluate(prob, X):
    nodes = np.minimum(np.count_nonzero(X, axis=2), prob.table.shape[1] - 1)
    reps = X.sum(axis=2)
    sp = prob.table[prob.jobs, nodes, np.minimum(reps, prob.table.shape[2] - 1)]
    scaled = sp * prob.scale * np.where(np.any(X != prob.base, axis=2), prob.factor, 1.0)
    if prob.p == 0:
        mean = np.exp(np.log(np.maximum(scaled, 1e-3)).sum(axis=1) / X.shape[1])
    else:
        mean = (((scaled + 1e-3) ** prob.p).sum(axis=1) / X.shape[1]) ** (1.0 / prob.p)
    total = (np.any(X > 0, axis=1) * prob.res).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(reps > 0, reps / total[:, None], 0.0)
        util = np.where(reps > 0, sp / reps, 0.0)
    return np.column_stack([-mean, -(util * share).sum(axis=1)])


def plain_crossover(rng, A, B):
    m, J = A.shape[0], A.shape[1]
    do = rng.random(m) < CROSSOVER_P
    swap = np.arange(J)[None, :] < rng.integers(0, J, size=(m, 1))
    kids = np.concatenate([np.where(swap[:, :, None], B, A), np.where(swap[:, :, None], A, B)])
    return np.where(np.concatenate([do, do])[:, None, None], kids, np.concatenate([A, B]))


@pytest.mark.parametrize("N", [3, 16, 24])
def test_operators_are_the_plain_ones_draw_for_draw(N):
    g = np.random.default_rng(N)
    for t in range(40):
        P, J, size = int(g.integers(1, 60)), int(g.integers(1, 9)), int(g.choice([1, 4, 8]))
        res = np.where(g.random(N) < 0.15, 0, size)
        cap = g.integers(1, max(3 * size, N) + 2, size=J)     # past MAX_NODES nodes too
        base = np.where(g.random((J, N)) < 0.2, g.integers(1, size + 1, size=(J, N)), 0)
        prob = Problem(g.random((J, 17, int(cap.max()) + 1)) * 3, base, cap, res, g.random(J),
                       float(g.choice([0.0, -1.0, 0.5])), 0.3)
        X = g.integers(0, size + 2, size=(P, J, N)) * (g.random((P, J, N)) < g.random())
        X[:P // 3] = base
        X0 = X.copy()
        s = int(g.integers(1 << 30))
        r1, r2 = np.random.default_rng(s), np.random.default_rng(s)
        Y = prob.repair(r1, X)
        assert same(Y, plain_repair(prob, r2, X)) and same(X, X0)
        assert same(prob.mutate(r1, Y), plain_mutate(prob, r2, Y))
        Z = prob.repair(r1, prob.mutate(r1, Y))
        assert same(Z, plain_repair(prob, r2, plain_mutate(prob, r2, Y)))
        assert same(prob.evaluate(Z), plain_evaluate(prob, Z))
        m = P // 2
        kids = prob.crossover(r1, Z, np.arange(m), np.arange(m, 2 * m))
        assert same(kids, plain_crossover(r2, Z[:m], Z[m:2 * m]))
        assert r1.random() == r2.random()


def test_seen_keeps_the_first_of_equal_solutions_not_met_before():
    rng = np.random.default_rng(0)
    seen = Seen((2, 3), rng)
    X = rng.integers(0, 2, size=(40, 2, 3))
    seen.keys = set(seen.hash(X[:5]).tolist())
    h = seen.hash(X)
    _, first = np.unique(h, return_index=True)
    first = np.sort(first)
    first = first[~np.isin(h[first], h[:5])]
    assert same(seen.new(X), X[first])
    assert len(seen.new(X)) == 0
