"""gavel `solution=ecos`: the programmes quanta/policies/gavel/ecos.py hands to ECOS are, entry
for entry, the ones cvxpy builds from Gavel's expressions (cvxpy's get_problem_data for ECOS), so
ECOS returns the same point, bit for bit, as Gavel's cvxpy + ECOS solve. cvxpy is only the test's
oracle (the dev extra); the project needs ECOS alone."""

from __future__ import annotations

import numpy as np
import pytest

from quanta.policies.gavel import ecos as E

cp = pytest.importorskip("cvxpy")
pytest.importorskip("ecos")

TYPES = ("v100", "p100", "k80")


def _gavel_problem(kind: str, T, z, N, extra):
    """Gavel's programme in cvxpy, written as Gavel's policies write it (columns by type name),
    and its variable."""
    cols = E._order(TYPES[:T.shape[1]])
    Tc, Nc = T[:, cols].astype(float), np.asarray(N, dtype=float)[cols]
    m, n = Tc.shape
    x = cp.Variable((m, n))
    sf = np.repeat(z.reshape(-1, 1).astype(float), n, axis=1)
    base = [x >= 0, cp.sum(cp.multiply(sf, x), axis=0) <= Nc, cp.sum(x, axis=1) <= 1]
    if kind == "max_min":           # max_min_fairness.py:42-81
        weight, tau_prop = extra
        pw = (1.0 / weight).reshape((m, 1)) * (1.0 / tau_prop.reshape((m, 1)))
        obj = cp.Maximize(cp.min(cp.sum(cp.multiply(np.multiply(Tc * pw, sf), x), axis=1)))
    elif kind == "ftf":             # finish_time_fairness.py:53-120
        remaining, iso, age = extra
        fr = [(age[i] + remaining[i] * cp.inv_pos(cp.sum(cp.multiply(Tc[i], x[i])))) / iso[i]
              for i in range(m)]
        obj = cp.Minimize(fr[0] if m == 1 else cp.maximum(*fr))
    else:                           # max_sum_throughput.py:39-66
        Vc = extra[:, cols].astype(float)
        obj = cp.Maximize(cp.sum(cp.sum(cp.multiply(Vc / np.ones((1, n)), x), axis=1)))
    return cp.Problem(obj, base), x, cols


def _case(rng, m: int, n: int):
    T = rng.uniform(0.05, 4.0, (m, n)) * (rng.random((m, n)) > 0.15)    # some types useless
    z = rng.choice([1, 1, 2, 4], m)
    N = rng.integers(0, 5, n).astype(float)
    return T, z, N


def _extra(kind: str, rng, T, z, N):
    m = len(z)
    if kind == "max_min":
        return (rng.uniform(0.5, 2.0, m), np.maximum(rng.uniform(0.0, 3.0, m), 1e-12))
    if kind == "ftf":
        return (rng.uniform(1.0, 1e5, m), rng.uniform(10.0, 1e5, m), rng.uniform(0.0, 1e5, m))
    return T


def _ours(kind: str, T, z, N, extra, capture: dict):
    """Run our builder, capturing what it hands to ECOS's C entry point."""
    import _ecos
    real = _ecos.csolve

    def spy(shape, c, data, indices, indptr, h, dims, **k):
        capture.update(shape=shape, c=c, data=data, indices=indices, indptr=indptr, h=h,
                       dims=dims)
        return real(shape, c, data, indices, indptr, h, dims, **k)
    _ecos.csolve = spy
    try:
        if kind == "max_min":
            return E.ecos_max_min(T, z, N, extra[0], extra[1], TYPES[:T.shape[1]])
        if kind == "ftf":
            return E.ecos_min_max_ratio(T, z, N, *extra, TYPES[:T.shape[1]])
        return E.ecos_max_sum(T, z, N, extra, TYPES[:T.shape[1]])
    finally:
        _ecos.csolve = real


@pytest.mark.parametrize("kind", ["max_min", "ftf", "max_sum"])
def test_the_programme_is_cvxpys_entry_for_entry_and_the_answer_bit_for_bit(kind):
    rng = np.random.default_rng(7)
    for m, n in [(1, 1), (1, 3), (2, 2), (3, 3), (7, 3), (12, 2)]:
        T, z, N = _case(rng, m, n)
        extra = _extra(kind, rng, T, z, N)
        got: dict = {}
        try:
            X = _ours(kind, T, z, N, extra, got)
        except RuntimeError:          # no allocation: cvxpy must find none either
            X = None
        prob, x, cols = _gavel_problem(kind, T, z, N, extra)
        data = prob.get_problem_data(cp.ECOS)[0]
        G = data["G"]
        assert data["A"] is None
        np.testing.assert_array_equal(got["c"], data["c"])
        np.testing.assert_array_equal(got["h"], data["h"])
        assert got["dims"] == {"l": data["dims"].nonneg, "q": list(data["dims"].soc), "e": 0}
        assert got["shape"] == (G.shape[0], G.shape[1], 0)
        np.testing.assert_array_equal(got["indptr"], G.indptr)
        np.testing.assert_array_equal(got["indices"], G.indices)
        np.testing.assert_array_equal(got["data"], G.data)
        try:
            prob.solve(solver="ECOS")
        except cp.error.SolverError:
            assert X is None
            continue
        if x.value is None:
            assert X is None
            continue
        want = np.empty_like(x.value)
        want[:, cols] = x.value.clip(min=0.0).clip(max=1.0)
        np.testing.assert_array_equal(X, want)


def test_the_answers_reach_the_programmes_optima():
    from quanta.policies.gavel import alloc as A
    T = np.array([[4.0, 1.0, 0.5], [1.2, 1.0, 0.8], [2.0, 2.0, 1.0]])
    z, N = np.array([1, 1, 2]), np.array([1, 1, 2])
    tau_prop = T @ A.proportional_share(N, 3)
    X = E.ecos_max_min(T, z, N, np.ones(3), tau_prop, TYPES)
    _, lev = A.max_min(T, z, N, z / tau_prop)
    assert (z / tau_prop * (X * T).sum(axis=1)).min() == pytest.approx(lev, rel=1e-5)
    S = E.ecos_max_sum(T, z, N, T, TYPES)
    assert (S * T).sum() == pytest.approx((A.max_sum(T, z, N, T) * T).sum(), rel=1e-5)
    rem, iso, age = np.array([1e4, 5e3, 2e4]), np.array([3e3, 4e3, 9e3]), np.array([0.0, 50.0, 10.0])
    F = E.ecos_min_max_ratio(T, z, N, rem, iso, age, TYPES)
    _, rho = A.min_max_ratio(T, z, N, num=rem, den=iso, base=age)
    assert ((age + rem / (F * T).sum(axis=1)) / iso).max() == pytest.approx(rho, rel=1e-4)
