"""The exact search in front of the configuration MILP (config_ilp.unique_optimum): it answers
only where its answer is the MILP's, and leaves ties to the MILP."""

import numpy as np
import pytest

from quanta.policies import config_ilp as ci


def _programme(rng: np.random.Generator, jobs: int, types: int = 3):
    """Sia-like candidates: per job, on each type, GPU counts 1, 2, 4, 8 with costs falling
    (more GPUs, better) from about -0.1 to -1."""
    j, t, n, c = [], [], [], []
    for i in range(jobs):
        speed = rng.uniform(0.3, 1.0, types)
        for k in range(types):
            for cnt in (1, 2, 4, 8):
                j.append(i)
                t.append(k)
                n.append(cnt)
                c.append(-1.1 + (speed[k] * cnt ** rng.uniform(0.3, 0.9)) ** -0.5)
    cap = rng.integers(4, 17, types)
    return (jobs, np.array(j), np.array(t), np.array(n), np.array(c), cap)


def _counting_milp(monkeypatch) -> list:
    calls = []
    milp = ci._milp

    def counted(*args):
        calls.append(args)
        return milp(*args)

    monkeypatch.setattr(ci, "_milp", counted)
    return calls


def test_same_answers_as_the_milp_and_most_without_it(monkeypatch):
    calls = _counting_milp(monkeypatch)
    answers = []
    search = ci.unique_optimum

    def counted(*args):
        answers.append(search(*args))
        return answers[-1]

    monkeypatch.setattr(ci, "unique_optimum", counted)
    rng = np.random.default_rng(0)
    for _ in range(60):
        n_jobs, cj, ct, cn, cost, cap = _programme(rng, int(rng.integers(3, 12)))
        got = ci.choose_configs(n_jobs, cj, ct, cn, cost, cap)
        x = ci._milp(n_jobs, cj, ct, cn, cost, cap, 10.0)
        assert np.array_equal(got, np.flatnonzero(x > 0.5))
    searched = len(answers)                       # programmes with a fractional relaxation
    solved = sum(a is not None for a in answers)
    assert searched >= 20 and solved >= 0.8 * searched
    assert len(calls) == 60 + searched - solved   # the MILP only where the search gave up


def test_a_tie_goes_to_the_milp(monkeypatch):
    """Two identical jobs of 2 GPUs, 3 GPUs: the relaxation gives one and a half, either job
    alone is optimal, so the MILP's choice is kept."""
    calls = _counting_milp(monkeypatch)
    cj, ct, cn = np.array([0, 1]), np.zeros(2, dtype=np.int64), np.array([2, 2])
    cost = np.array([-1.0, -1.0])
    cap = np.array([3])
    got = ci.choose_configs(2, cj, ct, cn, cost, cap)
    assert len(calls) == 1
    assert np.array_equal(got, np.flatnonzero(ci._milp(2, cj, ct, cn, cost, cap, 10.0) > 0.5))


def test_unique_optimum_refuses_near_ties():
    """An alternative within the MILP's gap (1e-4 relative) of the optimum: no answer."""
    cj, ct, cn = np.array([0, 0, 1, 1]), np.zeros(4, dtype=np.int64), np.array([1, 2, 1, 2])
    cap = np.array([3])
    x = np.array([0.0, 1.0, 0.5, 0.25])
    price = np.array([0.1])
    apart = np.array([-0.5, -0.8, -0.5, -0.9])
    assert ci.unique_optimum(cj, ct, cn, apart, cap, x, price) is not None
    near = np.array([-0.5, -0.8, -0.5, -0.8 - 1e-5])
    assert ci.unique_optimum(cj, ct, cn, near, cap, x, price) is None


@pytest.mark.parametrize("price", [0.0, 0.05, 0.3])
def test_any_price_gives_the_optimum(price):
    """The search is exact for any non-negative price (weak duality): the duals only speed it."""
    rng = np.random.default_rng(1)
    n_jobs, cj, ct, cn, cost, cap = _programme(rng, 6)
    ref = np.flatnonzero(ci._milp(n_jobs, cj, ct, cn, cost, cap, 10.0) > 0.5)
    got = ci.unique_optimum(cj, ct, cn, cost, cap, np.zeros(len(cj)), np.full(len(cap), price))
    assert got is None or np.array_equal(got, ref)
