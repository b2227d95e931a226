"""The exact search in front of the configuration MILP (config_search.exact_optimum): it returns
the programme's optimum, the first in its order where several tie, and leaves to the MILP only
what it cannot finish."""

import itertools
from pathlib import Path

import numpy as np
import pytest

from quanta.policies import config_ilp as ci
from quanta.policies import config_search as cs

FIXTURES = Path(__file__).parent / "fixtures"


def _programme(rng: np.random.Generator, jobs: int, types: int = 3, counts=(1, 2, 4, 8)):
    """Sia-like candidates: per job, on each type, GPU counts 1, 2, 4, 8 with costs falling
    (more GPUs, better) from about -0.1 to -1."""
    j, t, n, c = [], [], [], []
    for i in range(jobs):
        speed = rng.uniform(0.3, 1.0, types)
        for k in range(types):
            for cnt in counts:
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


def _brute_force(n_jobs, cj, ct, cn, cost, cap) -> float:
    """The programme's optimum by trying every choice set."""
    per_job = [[-1] + np.flatnonzero(cj == i).tolist() for i in range(n_jobs)]
    best = 0.0
    for pick in itertools.product(*per_job):
        chosen = [c for c in pick if c >= 0]
        use = np.bincount(ct[chosen], weights=cn[chosen], minlength=len(cap))
        if np.all(use <= cap):
            best = min(best, float(cost[chosen].sum()))
    return best


def _two_best(n_jobs, cj, ct, cn, cost, cap) -> tuple[float, float, list]:
    """The cheapest and second cheapest choice sets' costs, and the cheapest set."""
    per_job = [[-1] + np.flatnonzero(cj == i).tolist() for i in range(n_jobs)]
    found = []
    for pick in itertools.product(*per_job):
        chosen = [c for c in pick if c >= 0]
        use = np.bincount(ct[chosen], weights=cn[chosen], minlength=len(cap))
        if np.all(use <= cap):
            found.append((float(cost[chosen].sum()), sorted(chosen)))
    found.sort(key=lambda f: f[0])
    return found[0][0], found[1][0], found[0][1]


def _relaxed(n_jobs, cj, ct, cn, cost, cap) -> float:
    """The programme's LP relaxation's optimum (scipy's linprog): a bound on every choice set."""
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix, vstack
    m = len(cj)
    A = vstack([coo_matrix((np.ones(m), (cj, np.arange(m))), shape=(n_jobs, m)),
                coo_matrix((cn.astype(float), (ct, np.arange(m))), shape=(len(cap), m))])
    res = linprog(cost, A_ub=A, b_ub=np.concatenate([np.ones(n_jobs), cap]), bounds=(0, 1))
    assert res.status == 0
    return float(res.fun)


def _feasible(n_jobs, cj, ct, cn, cap, chosen) -> bool:
    use = np.bincount(ct[chosen], weights=cn[chosen], minlength=len(cap))
    return bool(np.all(use <= cap)) and len(set(cj[chosen].tolist())) == len(chosen)


def test_the_optimum_of_every_small_programme_without_the_milp(monkeypatch):
    """Against every choice set of 40 random programmes (3-5 jobs, two types): the optimum,
    and no programme goes to the MILP; the MILP's answer is no better."""
    calls = _counting_milp(monkeypatch)
    rng = np.random.default_rng(0)
    for _ in range(40):
        prog = _programme(rng, int(rng.integers(3, 6)), types=2, counts=(1, 2, 4))
        n_jobs, cj, ct, cn, cost, cap = prog
        got = ci.choose_configs(*prog)
        assert _feasible(n_jobs, cj, ct, cn, cap, got)
        assert cost[got].sum() == pytest.approx(_brute_force(*prog), abs=1e-12)
        milp = np.flatnonzero(ci._milp(*prog, 10.0) > 0.5)
        assert cost[got].sum() <= cost[milp].sum() + 1e-12
    assert len(calls) == 40           # only the test's own MILP calls


def test_the_milps_answers_on_larger_programmes(monkeypatch):
    """60 programmes of 3-11 jobs on three types: the same choice sets as HiGHS' MILP, which
    the search makes unnecessary (no call)."""
    calls = _counting_milp(monkeypatch)
    searched = []
    search = ci.exact_optimum

    def counted(*args, **kw):
        searched.append(search(*args, **kw))
        return searched[-1]

    monkeypatch.setattr(ci, "exact_optimum", counted)
    rng = np.random.default_rng(0)
    for _ in range(60):
        prog = _programme(rng, int(rng.integers(3, 12)))
        got = ci.choose_configs(*prog)
        x = ci._milp(*prog, 10.0)
        assert np.array_equal(got, np.flatnonzero(x > 0.5))
    assert len(searched) >= 20                  # programmes with a fractional relaxation
    assert all(s is not None for s in searched)
    assert len(calls) == 60                     # the test's own


def test_a_tie_keeps_the_relaxations_whole_part(monkeypatch):
    """Two identical jobs of 2 GPUs, 3 GPUs: the relaxation gives one job whole and half the
    other; either job alone is optimal, and the search keeps the one the relaxation gave
    whole (its incumbent), every time, without the MILP."""
    calls = _counting_milp(monkeypatch)
    cj, ct, cn = np.array([0, 1]), np.zeros(2, dtype=np.int64), np.array([2, 2])
    cost = np.array([-1.0, -1.0])
    cap = np.array([3])
    from quanta import highs
    x = highs.LP().solve(cost, ci._matrix(2, cj, ct, cn, 1), np.array([1.0, 1.0, 3.0]),
                         np.zeros(2), np.ones(2)).x
    whole = np.flatnonzero(x > 1 - 1e-7).tolist()
    assert len(whole) == 1
    for _ in range(3):
        assert ci.choose_configs(2, cj, ct, cn, cost, cap).tolist() == whole
    assert not calls


@pytest.mark.parametrize("price", [0.0, 0.05, 0.3])
def test_any_price_gives_the_optimum(price):
    """The search is exact for any non-negative price (weak duality): the duals only speed it."""
    rng = np.random.default_rng(1)
    prog = _programme(rng, 6)
    n_jobs, cj, ct, cn, cost, cap = prog
    ref = np.flatnonzero(ci._milp(*prog, 10.0) > 0.5)
    got = ci.exact_optimum(cj, ct, cn, cost, cap, np.zeros(len(cj)), np.full(len(cap), price))
    assert _feasible(n_jobs, cj, ct, cn, cap, got)
    assert cost[got].sum() == pytest.approx(cost[ref].sum(), abs=1e-12)


def test_a_recorded_sia_round_that_needed_millions_of_nodes(monkeypatch):
    """Round 3,662 of `quanta simulate --trace synthetic:3:300 --cluster gavel-108 --policy
    sia`: 25 jobs, many nearly alike, 381 candidates on 3 x 36 GPUs (its programme and HiGHS'
    MILP's answer recorded in fixtures/sia_round_3662.npz). A depth-first search without the
    memo of states visited 5.6 M nodes; with it, 13,712 states gave the MILP's answer; with a
    failed state's lower bound kept (not only the threshold it failed: reached again by a
    cheaper path, it is expanded again only where the bound allows), 8,970 states do."""
    calls = _counting_milp(monkeypatch)
    monkeypatch.setattr(cs, "SEARCH_STATES", 10_000)
    f = np.load(FIXTURES / "sia_round_3662.npz")
    got = ci.choose_configs(int(f["n_jobs"]), f["job"], f["gtype"], f["count"], f["cost"],
                            f["capacity"])
    assert not calls and np.array_equal(got, f["milp"])


def test_past_its_state_limit_the_milp_answers(monkeypatch):
    calls = _counting_milp(monkeypatch)
    monkeypatch.setattr(cs, "SEARCH_STATES", 1)
    f = np.load(FIXTURES / "sia_round_3662.npz")
    args = (int(f["n_jobs"]), f["job"], f["gtype"], f["count"], f["cost"], f["capacity"])
    assert ci.exact_optimum(f["job"], f["gtype"], f["count"], f["cost"], f["capacity"],
                            np.zeros(len(f["job"])), np.zeros(3)) is None
    got = ci.choose_configs(*args)
    assert len(calls) == 1 and np.array_equal(got, f["milp"])


def test_ties_milp_leaves_ties_and_near_ties_to_the_milp(monkeypatch):
    """ties="milp": the search answers only an optimum that every other choice set exceeds by
    more than the MILP's gap (then it is the MILP's answer); a tie or a near tie (within 1e-4
    relative) goes to the MILP, whose answer is kept."""
    cj, ct, cn = np.array([0, 0, 1, 1]), np.zeros(4, dtype=np.int64), np.array([1, 2, 1, 2])
    cap = np.array([3])
    x = np.array([0.0, 1.0, 0.5, 0.25])
    price = np.array([0.1])
    apart = np.array([-0.5, -0.8, -0.5, -0.9])
    assert ci.exact_optimum(cj, ct, cn, apart, cap, x, price, unique=True).tolist() == [0, 3]
    near = np.array([-0.5, -0.8, -0.5, -0.8 - 1e-5])
    assert ci.exact_optimum(cj, ct, cn, near, cap, x, price, unique=True) is None
    assert ci.exact_optimum(cj, ct, cn, near, cap, x, price) is not None   # ties="search"
    # two identical jobs of 2 GPUs on 3: a fractional relaxation, either job is optimal
    calls = _counting_milp(monkeypatch)
    cj, ct, cn = np.array([0, 1]), np.zeros(2, dtype=np.int64), np.array([2, 2])
    cost = np.array([-1.0, -1.0])
    got = ci.choose_configs(2, cj, ct, cn, cost, cap, ties="milp")
    assert len(calls) == 1
    assert np.array_equal(got, np.flatnonzero(ci._milp(2, cj, ct, cn, cost, cap, 10.0) > 0.5))


def test_ties_milp_gives_the_milps_answers(monkeypatch):
    """On random programmes and on the recorded Sia round, ties="milp" returns HiGHS' MILP's
    choice sets, with fewer MILP calls than programmes with a fractional relaxation."""
    calls = _counting_milp(monkeypatch)
    rng = np.random.default_rng(2)
    for _ in range(40):
        prog = _programme(rng, int(rng.integers(3, 12)))
        got = ci.choose_configs(*prog, ties="milp")
        assert np.array_equal(got, np.flatnonzero(ci._milp(*prog, 10.0) > 0.5))
    f = np.load(FIXTURES / "sia_round_3662.npz")
    got = ci.choose_configs(int(f["n_jobs"]), f["job"], f["gtype"], f["count"], f["cost"],
                            f["capacity"], ties="milp")
    assert np.array_equal(got, f["milp"])
    assert len(calls) < 40 + 40 + 1             # the test's own 40, and fewer than 41 more


def test_many_free_jobs_go_to_the_milp_without_deep_recursion():
    """1,200 jobs, each a little cheaper on the small type than on the large one: all are free
    (an alternative within the incumbent's gap), more than SEARCH_DEPTH: the search declines
    (the MILP answers) instead of recursing 1,200 deep (a RecursionError before 2026-11-26, at
    5,000 jobs on 10,000 GPUs in bench/policy_solve.py)."""
    n = 1200
    cj = np.repeat(np.arange(n), 2)
    ct = np.tile([0, 1], n)
    cn = np.ones(2 * n, dtype=np.int64)
    cost = np.tile([-1.0, -0.999], n)
    cap = np.array([n // 2, n])
    assert ci.exact_optimum(cj, ct, cn, cost, cap, np.zeros(2 * n), np.zeros(2)) is None


def test_an_incumbent_at_the_bound_is_the_answer():
    """Unaware Pollux's ties: each job costs the same on every type. With zero prices the
    incumbent reaches the bound (every job at its cheapest cost), although the cheapest-first
    choices (all on type 0) would not fit: the incumbent is returned."""
    n = 6
    cj = np.repeat(np.arange(n), 2)
    ct = np.tile([0, 1], n)
    cn = np.full(2 * n, 2)
    cost = np.full(2 * n, -1.0)
    cap = np.array([6, 6])
    got = ci.exact_optimum(cj, ct, cn, cost, cap, np.zeros(2 * n), np.zeros(2))
    assert got is not None and len(got) == n and _feasible(n, cj, ct, cn, cap, got)


def test_uncontended_programmes_need_no_relaxation():
    """Every job's cheapest choice, when each is unique and together they fit (no programme
    solved); a tie (with another candidate, or with leaving the job out) or too many GPUs:
    None, the relaxation decides."""
    cj, ct, cn = np.array([0, 0, 1, 1, 2]), np.array([0, 1, 0, 0, 1]), np.array([1, 1, 1, 2, 4])
    cost = np.array([-0.5, -0.7, -0.2, -0.9, 0.3])     # job 2 costs more than leaving it out
    cap = np.array([2, 1])
    assert ci._uncontended(cj, ct, cn, cost, cap).tolist() == [1, 3]
    assert ci._uncontended(cj, ct, cn, cost, np.array([1, 1])) is None            # 2 GPUs on 1
    assert ci._uncontended(cj, ct, cn, np.array([-0.7, -0.7, -0.2, -0.9, 0.3]), cap) is None
    assert ci._uncontended(cj, ct, cn, np.array([-0.5, -0.7, -0.2, -0.9, 0.0]), cap) is None
    rng = np.random.default_rng(3)
    for _ in range(30):                  # where it answers, it is the MILP's answer
        prog = _programme(rng, int(rng.integers(2, 6)))
        n_jobs, cj, ct, cn, cost, cap = prog
        got = ci._uncontended(cj, ct, cn, cost, cap * 4)
        if got is not None:
            ref = np.flatnonzero(ci._milp(n_jobs, cj, ct, cn, cost, cap * 4, 10.0) > 0.5)
            assert np.array_equal(got, ref)
        # the candidates in any order (not grouped by job): the same choices
        perm = rng.permutation(len(cj))
        mixed = ci._uncontended(cj[perm], ct[perm], cn[perm], cost[perm], cap * 4)
        assert (got is None) == (mixed is None)
        if got is not None:
            assert np.array_equal(np.sort(perm[mixed]), got)


@pytest.mark.parametrize("seed", [4, 5])
def test_unique_answers_only_a_clear_optimum(seed):
    """unique=True against every choice set: an answer is the optimum and the next best set
    costs more than the MILP's window above it; None only where it does not (or, with weak
    prices, past the search's limits, which these small programmes never reach)."""
    rng = np.random.default_rng(seed)
    for _ in range(25):
        prog = _programme(rng, int(rng.integers(2, 6)), types=2, counts=(1, 2, 4))
        n_jobs, cj, ct, cn, cost, cap = prog
        if rng.random() < 0.3:                                  # exact ties now and then
            cost = np.round(cost, 1)
        z1, z2, best = _two_best(n_jobs, cj, ct, cn, cost, cap)
        price = np.full(len(cap), float(rng.choice([0.0, 0.05])))
        got = ci.exact_optimum(cj, ct, cn, cost, cap, np.zeros(len(cj)), price, unique=True)
        clear = z2 - z1 > cs._window(z1) + 1e-12
        if got is None:
            assert not clear
        else:
            assert clear and got.tolist() == best


def test_a_hint_does_not_change_the_unique_searchs_answer():
    """exact_optimum(unique=True, hint=...): a feasible choice set cheaper than the search's own
    incumbent starts the search (the optimum itself, here); the answer (a unique optimum, or
    None) is the same with or without it, and a dearer hint is ignored. (What it saves is
    measured in docs/benchmarks.md.)"""
    from quanta import highs
    rng = np.random.default_rng(3)
    answered = 0
    for _ in range(30):
        n_jobs, cj, ct, cn, cost, cap = _programme(rng, int(rng.integers(6, 12)))
        res = highs.LP().solve(cost, ci._matrix(n_jobs, cj, ct, cn, len(cap)),
                               np.concatenate([np.ones(n_jobs), cap.astype(float)]),
                               np.zeros(len(cj)), np.ones(len(cj)))
        price = np.maximum(-res.row_dual[n_jobs:], 0.0)
        plain = ci.exact_optimum(cj, ct, cn, cost, cap, res.x, price, unique=True)
        best = np.flatnonzero(ci._milp(n_jobs, cj, ct, cn, cost, cap, 10.0) > 0.5)
        hinted = ci.exact_optimum(cj, ct, cn, cost, cap, res.x, price, unique=True, hint=best)
        worse = ci.exact_optimum(cj, ct, cn, cost, cap, res.x, price, unique=True,
                                 hint=np.empty(0, dtype=np.int64))   # nothing chosen: dearer
        for got in (hinted, worse):
            assert (plain is None) == (got is None)
            assert plain is None or np.array_equal(plain, got)
        if plain is not None:
            assert np.array_equal(plain, best)
            answered += 1
    assert answered >= 20


@pytest.mark.parametrize("seed", range(6))
def test_each_jobs_choices_are_sorted_the_same_whether_candidates_come_grouped_or_not(seed):
    # _sorted_choices reads grouped candidates (Sia's, Pollux's: job by job) without sorting
    # them: per job, none (-1) and its candidates by excess over its best val, ties in
    # candidate order after none, as a plain per-job sort gives, grouped or shuffled
    rng = np.random.default_rng(seed)
    per = rng.integers(1, 7, rng.integers(1, 15))
    cj = np.repeat(np.sort(rng.choice(500, len(per), replace=False)), per)
    val = rng.choice([-1.0, -0.5, 0.0, 0.25], len(cj)) if seed % 2 else rng.normal(size=len(cj))
    for order in (np.arange(len(cj)), rng.permutation(len(cj))):
        ex, idx, bounds, low = cs._sorted_choices(cj[order], val[order])
        for j, job in enumerate(np.unique(cj)):
            mine = np.flatnonzero(cj[order] == job)
            best = min(0.0, float(val[order][mine].min()))
            want = sorted([(0.0 - best, -1)] + [(float(val[order][c]) - best, int(c))
                                                for c in mine])
            seg = slice(bounds[j], bounds[j + 1])
            assert list(zip(ex[seg].tolist(), idx[seg].tolist())) == want
            assert low[j] == best


def test_a_rounds_candidates_are_the_last_ones_where_made_of_the_same_blocks():
    from quanta.policies.config_candidates import Candidates, kept_candidates

    class Memo:
        last = None

    a, b = np.array([[0, 1, 2.0], [0, 2, 3.0]]), np.array([[1, 1, 1.0]])
    memo = Memo()
    first = kept_candidates(memo, [0, 1], [a, b])
    assert first.job.tolist() == [0, 0, 1] and first.count.tolist() == [1, 2, 1]
    assert kept_candidates(memo, [0, 1], [a, b]) is first          # the same blocks: kept
    again = kept_candidates(memo, [0, 1], [a, b.copy()])           # an equal, new block
    assert again is not first and again.rate.tolist() == first.rate.tolist()
    assert kept_candidates(memo, [0, 2], [a, b]).job.tolist() == [0, 0, 2]   # other rows
    assert kept_candidates(None, [0, 1], [a, b]).job.tolist() == [0, 0, 1]   # no memo
    assert isinstance(first, Candidates)


def test_where_the_search_gives_up_the_relaxation_rounded_within_the_milps_gap(monkeypatch):
    """Where the search gives up (here always: SEARCH_DEPTH 0; on Sia's rounds of 5,000 jobs
    past 500 free jobs) and ties="search", the relaxation's whole part with its split jobs given
    their best choices in what is left answers where that is within MIP_REL_GAP of the
    relaxation's bound (then feasible and within the gap of the true optimum, brute-forced
    here), without the MILP (which on those 5,000-job rounds ran to its 10 s time limit); else
    the MILP answers. With ties="milp" the MILP answers as before."""
    monkeypatch.setattr(cs, "SEARCH_DEPTH", 0)
    monkeypatch.setattr(ci, "exact_optimum", cs.exact_optimum)
    calls = _counting_milp(monkeypatch)
    rounded = []
    spy = ci._rounded
    monkeypatch.setattr(ci, "_rounded", lambda *a: rounded.append(spy(*a)) or rounded[-1])
    rng = np.random.default_rng(5)
    for _ in range(120):
        prog = _programme(rng, int(rng.integers(3, 6)), types=2, counts=(1, 2, 4))
        before = len(calls)
        got = ci.choose_configs(*prog)
        assert _feasible(prog[0], *prog[1:4], prog[5], got)
        best = _brute_force(*prog)
        total = float(prog[4][got].sum())
        assert total - best <= cs.MIP_REL_GAP * abs(total) + 1e-12
        if rounded and rounded[-1] is not None and len(calls) == before:
            rounded[-1] = "answered"
    # small programmes: a split job is a large share of the whole, rounding seldom in the gap
    assert len(rounded) > rounded.count("answered") > 0
    n_calls = len(calls)
    tried = len(rounded)
    for seed in range(20):                # ties="milp": never rounded, the MILP answers
        ci.choose_configs(*_programme(np.random.default_rng(seed), 5, types=2, counts=(1, 2, 4)),
                          ties="milp")
    assert len(rounded) == tried and len(calls) > n_calls


def test_sias_round_of_5000_jobs_is_the_relaxation_rounded(monkeypatch):
    """bench/policy_solve.py's first 5,000-job snapshot on 10,000 GPUs (seed 0): the search
    gives up (more than SEARCH_DEPTH free jobs) and HiGHS' MILP ran to its 10 s time limit at
    the root, 3.2e-4 from its bound. The relaxation rounded is within MIP_REL_GAP of the
    relaxation's optimum (a bound on the optimum): Sia's answer, without the MILP."""
    import sys
    sys.path.insert(0, str(Path(__file__).parent.parent / "bench"))
    from policy_solve import snapshot_of
    from quanta.policies import make_policy

    def no_milp(*args):
        raise AssertionError("the MILP was called")
    monkeypatch.setattr(ci, "_milp", no_milp)
    seen = []
    spy = ci._rounded
    monkeypatch.setattr(ci, "_rounded", lambda *a: seen.append((a, spy(*a))) or seen[-1][1])
    make_policy("sia").decide(snapshot_of(5000, seed=0, gpus=10000))
    (cj, ct, cn, cost, cap, _x), got = seen[-1]
    assert got is not None and _feasible(int(cj.max()) + 1, cj, ct, cn, cap, got)
    bound = _relaxed(int(cj.max()) + 1, cj, ct, cn, cost, cap)
    total = float(cost[got].sum())
    assert bound <= total and total - bound <= cs.MIP_REL_GAP * abs(total)


def test_no_wall_clock_limit_unless_one_is_asked_for(monkeypatch):
    """(Sia's and Pollux's MILP ran under a 10 s wall-clock limit by default: reached, the
    answer depended on the machine's speed and runs were not repeatable.) By default no limit
    reaches HiGHS; one given does."""
    import scipy.optimize

    from quanta.policies import make_policy
    seen = []
    real = scipy.optimize.milp

    def spy(*args, **kw):
        seen.append(dict(kw.get("options") or {}))
        return real(*args, **kw)

    monkeypatch.setattr(scipy.optimize, "milp", spy)
    prog = _programme(np.random.default_rng(1), 6)
    ci._milp(*prog, make_policy("sia").time_limit)
    ci._milp(*prog, make_policy("pollux").time_limit)
    ci._milp(*prog, make_policy("sia:time_limit=2").time_limit)
    assert [("time_limit" in o) for o in seen] == [False, False, True] and seen[2]["time_limit"] == 2
