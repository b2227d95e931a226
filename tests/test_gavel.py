"""Gavel: the policies end to end, their state, and the round-based mechanism (the allocation
programmes themselves: test_gavel_allocations.py)."""

import numpy as np
import pytest

from quanta.model import Cluster, JobSpec, NodeSpec
from quanta.policies import make_policy
from quanta.policies.gavel import allocations as A
from quanta.policies.gavel.rounds import round_assignment
from quanta.sim import Simulator
from quanta.sim.engine import RestartCost

from conftest import homogeneous


def test_round_priority_alternates_jobs_sharing_one_gpu():
    X = np.array([[0.5], [0.5]])
    T = np.ones((2, 1))
    z = np.array([1, 1])
    N = np.array([1])
    g0, _ = round_assignment(X, T, z, N, np.zeros((2, 1)), np.zeros(2))
    first = int(np.argmax(g0))
    received = np.zeros((2, 1))
    received[first] = 360.0
    g1, _ = round_assignment(X, T, z, N, received, np.array([360.0, 360.0]))
    assert g1[1 - first] == 1 and g1[first] == 0


def test_gavel_policies_run_end_to_end_and_respect_capacity(perf):
    c = Cluster((NodeSpec("v", "v100", 4), NodeSpec("p", "p100", 4), NodeSpec("k", "k80", 4)))
    rng = np.random.default_rng(0)
    from quanta.workloads.catalog import drawable_types
    types = drawable_types()
    jobs = [JobSpec(f"g{i}", float(i * 200), int(rng.choice([1, 1, 2, 4])),
                    types[int(rng.integers(len(types)))], total_steps=float(rng.integers(2000, 20000)),
                    queue=f"q{i % 3}", deadline=float(i * 200 + 40_000) if i % 4 == 0 else 0.0)
            for i in range(40)]
    for name in ("gavel-las", "gavel-las-agnostic", "gavel-ftf", "gavel-makespan", "gavel-throughput",
                 "gavel-cost", "gavel-fifo", "gavel-hierarchical"):
        res = Simulator(jobs, c, make_policy(name), perf, restart=RestartCost(10.0)).run()
        assert (res.table.state == 3).all(), name
        assert (res.busy <= c.capacity).all(), name
        assert res.decisions > 0


def test_rounds_happen_every_interval(perf):
    jobs = [JobSpec("a", 0.0, 1, "", total_steps=2000.0), JobSpec("b", 0.0, 1, "", total_steps=2000.0)]
    res = Simulator(jobs, homogeneous(1, 1), make_policy("gavel-las"), perf,
                    restart=RestartCost(0.0)).run()
    t = res.table
    # the first round starts at 0 s, where they arrive; the two jobs then alternate on the GPU
    # round by round: the first finishes inside its 6th round (3600 + 200 s) and its GPU idles
    # until the next round, where the second needs 200 s more
    assert t.preemptions.sum() >= 8
    assert sorted(t.end) == pytest.approx([3800.0, 4160.0], abs=1e-6)


def test_packed_allocation_beats_unpacked_when_pairs_help(perf):
    from quanta.policies.gavel.space_sharing import packed_max_min
    kinds = ["ResNet-50 (batch size 16)", "ResNet-18 (batch size 16)"]    # measured: no slowdown
    T = np.array([[perf.table.alone[(k, 1, "v100")]] for k in kinds] * 2)
    z = np.ones(4, dtype=np.int64)
    N = np.array([2])
    coef = 1 / T[:, 0]
    specs = [JobSpec(f"p{i}", 0, 1, kinds[i % 2]) for i in range(4)]
    P = packed_max_min(T, z, N, coef, np.array([0, 1, 0, 1]),
                       lambda a, b, k: perf.shared_rate(specs[a], specs[b], "v100", 1, mode="pack"))
    _, lev = A.max_min(T, z, N, coef)
    assert lev == pytest.approx(0.5, rel=1e-6)       # 4 jobs, 2 GPUs: half the time each
    assert P.level == pytest.approx(1.0, rel=1e-5)   # packed in pairs: all at full speed
    assert sum(P.pair_time.values()) > 0


def test_packed_policy_pairs_jobs_on_shared_gpus(perf):
    kinds = ["ResNet-50 (batch size 16)", "ResNet-18 (batch size 16)"]
    jobs = [JobSpec(f"p{i}", 0.0, 1, kinds[i % 2],
                    total_steps=perf.table.alone[(kinds[i % 2], 1, "v100")] * 3600) for i in range(4)]
    res = Simulator(jobs, homogeneous(1, 2), make_policy("gavel-las-packed"), perf,
                    restart=RestartCost(0.0)).run()
    assert res.shared.max() == 2 and (res.table.state == 3).all()
    # packed without slowdown, all four finish one hour after the first round (at 0 s)
    assert max(res.table.end) == pytest.approx(3600.0, rel=1e-3)


# -- agreement with Gavel's own programmes and mechanism (stanford-futuredata/gavel @ c4fa400) ------
class _Jobs:
    """The columns of a snapshot's JobsView that Gavel.allocation reads."""

    def __init__(self, rates, req, specs=None, remaining=None, total=None, submit=None, rows=None):
        n = len(req)
        self.rates = np.asarray(rates, dtype=float)
        self.req = np.asarray(req, dtype=np.int64)
        self.weight = np.ones(n)
        self.rows = np.arange(n) if rows is None else np.asarray(rows)
        self.specs = specs or [JobSpec(f"j{i}", 0.0, int(req[i]), "") for i in range(n)]
        self.remaining = np.ones(n) if remaining is None else np.asarray(remaining, dtype=float)
        self.total = self.remaining if total is None else np.asarray(total, dtype=float)
        self.submit = np.zeros(n) if submit is None else np.asarray(submit, dtype=float)

    def __len__(self):
        return len(self.req)


def _snap(jobs, capacity, types=("v100",), now=0.0, perf=None):
    from types import SimpleNamespace
    c = Cluster(tuple(NodeSpec(t, t, int(g)) for t, g in zip(types, capacity)))
    return SimpleNamespace(jobs=jobs, capacity=np.asarray(capacity), cluster=c, now=now, perf=perf,
                           state={})


@pytest.mark.parametrize("solution", ["vertex", "central"])
def test_max_min_weights_multi_gpu_jobs_by_z_not_z_squared(solution):
    # Gavel (max_min_fairness.py:59-72): weight z_j / (w_j * throughput under the proportional
    # share, which ignores z). 4 single-GPU jobs and one 4-GPU job on 4 GPUs: every job holds 0.8
    # GPUs on average (the 4-GPU job 0.2 of the time). z squared gave 0.94 x4 and 0.235.
    jobs = _Jobs(np.ones((5, 1)), [1, 1, 1, 1, 4])
    X = make_policy(f"gavel-las:solution={solution}").allocation(_snap(jobs, [4]))
    np.testing.assert_allclose(X[:, 0] * jobs.req, 0.8, atol=1e-3)


def test_fifo_stops_at_the_first_job_that_does_not_fit():
    # Gavel's FIFO (fifo.py:141-142): [2, 2, 1] on 3 GPUs runs the first job only; the 1-GPU job
    # does not jump ahead of the 2-GPU job that waits
    X = A.fastest_first(np.ones((3, 1)), np.array([2, 2, 1]), np.array([3]), np.arange(3))
    np.testing.assert_array_equal(X[:, 0], [1, 0, 0])


def test_fifo_end_to_end_keeps_arrival_order(perf):
    jobs = [JobSpec("a", 0.0, 2, "", total_steps=3000.0), JobSpec("b", 1.0, 2, "", total_steps=3000.0),
            JobSpec("c", 2.0, 1, "", total_steps=300.0)]
    res = Simulator(jobs, homogeneous(1, 3), make_policy("gavel-fifo"), perf,
                    restart=RestartCost(0.0)).run()
    start = dict(zip([s.job_id for s in res.table.specs], res.table.first_start))
    assert start["c"] >= start["b"] > start["a"]


def test_packed_never_pairs_multi_gpu_jobs(perf):
    # Gavel measured no co-location of multi-GPU jobs: its table has [0, 0] for every such pair,
    # so it never packs them (scheduler.py:2240-2250 reads those zeros)
    kinds = ["ResNet-50 (batch size 16)", "ResNet-18 (batch size 16)"]
    specs = [JobSpec(f"p{i}", 0.0, 2, kinds[i % 2]) for i in range(4)]
    T = np.array([[perf.table.alone[(kinds[i % 2], 2, "v100")]] for i in range(4)])
    jobs = _Jobs(T, [2, 2, 2, 2], specs=specs)
    P = make_policy("gavel-las-packed").allocation(_snap(jobs, [4], perf=perf))
    assert not P.pair_time
    P = make_policy("gavel-las-packed:pack_multi_gpu=true").allocation(_snap(jobs, [4], perf=perf))
    assert P.pair_time       # reachable on purpose, from the 1-GPU slowdowns


def test_ftf_uses_accumulated_isolated_time():
    # Gavel (finish_time_fairness.py:81-95): the isolated finish time is the isolated time of the
    # progress made so far (accumulated at each computation, at the isolated throughput of that
    # time) plus the remaining steps at today's isolated throughput; not the whole job at today's
    T = np.array([[2.0, 1.0]] * 3)
    N, types = np.array([1, 1]), ("v100", "k80")
    pol = make_policy("gavel-ftf")
    st: dict = {}
    first = _Jobs(T[:1], [1], remaining=[1000.0], total=[1000.0], rows=[0])
    pol.allocation(_snap(first, N, types=types), st)      # alone: half of each type, 1.5 steps/s
    iso0 = (T[0] * A.isolated_share(np.array([1]), N)).sum()
    rem = np.array([400.0, 1000.0, 1000.0])
    later = _Jobs(T, [1, 1, 1], remaining=rem, total=[1000.0] * 3, submit=[0.0, 300.0, 300.0],
                  rows=[0, 1, 2])
    X = pol.allocation(_snap(later, N, types=types, now=300.0), st)   # a third of each: 1 step/s
    assert iso0 == pytest.approx(1.5) and st["ftf_iso"][0] == pytest.approx(600.0 / iso0)
    iso = (T * A.isolated_share(np.ones(3, dtype=np.int64), N)).sum(axis=1)
    z = np.ones(3, dtype=np.int64)

    def rho(X, den):
        return ((np.array([300.0, 0.0, 0.0]) + rem / (X * T).sum(axis=1)) / den).max()
    gavel_den = np.array([600.0 / iso0, 0.0, 0.0]) + rem / iso       # job 0: 400 + 400 s
    whole_den = 1000.0 / iso                                          # job 0: 1000 s
    best = A.min_max_ratio(T, z, N, rem, gavel_den, np.array([300.0, 0.0, 0.0]), rel_tol=1e-6)[1]
    other = A.min_max_ratio(T, z, N, rem, whole_den, np.array([300.0, 0.0, 0.0]), rel_tol=1e-6)[0]
    assert rho(X, gavel_den) == pytest.approx(best, rel=2e-2)
    assert rho(other, gavel_den) > best * 1.05        # the old denominator is another programme


def test_throughput_sums_raw_steps_per_second():
    # Gavel's max_sum_throughput_perf maximises sum T x in raw steps/s (max_sum_throughput.py:60-63)
    T = np.array([[10.0, 2.0],     # raw: job 0 on type 0 and job 1 on type 1 (10.3 > 5)
                  [3.0, 0.3]])     # normalised: the other way (1.2 > 1.1)
    jobs = _Jobs(T, [1, 1])
    raw = make_policy("gavel-throughput").allocation(_snap(jobs, [1, 1], types=("v100", "k80")))
    np.testing.assert_allclose(raw, [[1, 0], [0, 1]], atol=1e-6)
    norm = make_policy("gavel-throughput:normalised=true").allocation(
        _snap(jobs, [1, 1], types=("v100", "k80")))
    np.testing.assert_allclose(norm, [[0, 1], [1, 0]], atol=1e-6)
    cen = make_policy("gavel-throughput:solution=central").allocation(
        _snap(jobs, [1, 1], types=("v100", "k80")))
    np.testing.assert_allclose(cen, raw, atol=1e-4)


def test_priority_round_per_type_queues_take_the_fastest_type_first():
    X, T = np.array([[0.4, 0.6]]), np.ones((1, 2))
    z, N, zero = np.array([1]), np.array([1, 1]), np.zeros((1, 2))
    from quanta.policies.gavel.rounds import priority_round
    _, g = priority_round(X, T, z, N, X, zero, np.arange(1))
    assert g[0] == 1                                   # one list: the larger share first
    _, g = priority_round(X, T, z, N, X, zero, np.arange(1), type_order=np.array([0, 1]))
    assert g[0] == 0                                   # Gavel: type 0's list comes first


def test_priority_round_backfill_and_jobs_outside_the_allocation():
    from quanta.policies.gavel.rounds import priority_round
    X, T = np.array([[1.0, 0.0], [1.0, 0.0]]), np.ones((2, 2))
    z, N, zero = np.array([1, 1]), np.array([1, 1]), np.zeros((2, 2))
    gpus, _ = priority_round(X, T, z, N, X, zero, np.arange(2))
    assert gpus.tolist() == [1, 0]                     # no share of type 1: it idles
    gpus, g = priority_round(X, T, z, N, X, zero, np.arange(2), backfill=True)
    assert gpus.tolist() == [1, 1] and g[1] == 1      # idle GPU backfilled
    gpus, _ = priority_round(X, T, z, N, X, zero, np.arange(2), backfill=True,
                             allocated=np.array([True, False]))
    assert gpus.tolist() == [1, 0]                     # Gavel: the new job holds it, idle


def test_fifo_base_reproduces_gavels_stale_type():
    # fifo.py:137-163: the job gets the last type of the sorted list (v100), not the random one
    # drawn; the draw only decides which type leaves the list when one fills
    import random
    T, z, N = np.ones((3, 3)), np.ones(3, dtype=np.int64), np.array([1, 1, 1])
    X, held = A.fifo_base(T, z, N, np.arange(3), ["v100", "p100", "k80"], {}, random.Random(0),
                          stale_type=True)
    assert held == {0: "v100", 1: "v100", 2: "v100"}
    X, held = A.fifo_base(T, z, N, np.arange(3), ["v100", "p100", "k80"], {}, random.Random(0))
    assert sorted(held.values()) == ["k80", "p100", "v100"]
    # the allocation persists: a held job keeps its type, a finished job's type goes to the head
    X2, held2 = A.fifo_base(T, z, N, np.array([1, 2]), ["v100", "p100", "k80"], held,
                            random.Random(0))
    assert held2 == {1: held[1], 2: held[2]}


def test_recompute_every_holds_new_jobs_until_the_next_recompute(perf):
    # (a at 100 s: the first allocation is at the round of 360 s; one at time 0 counts as none,
    # as in Gavel, and b would be allocated at once)
    jobs = [JobSpec("a", 100.0, 1, "", total_steps=20000.0), JobSpec("b", 400.0, 1, "", total_steps=2000.0)]
    starts = {}
    for spec in ("gavel-las", "gavel-las:recompute_every=1920,hold_unallocated=true"):
        res = Simulator(jobs, homogeneous(1, 2), make_policy(spec), perf,
                        restart=RestartCost(0.0)).run()
        starts[spec] = res.table.first_start[1]
    assert starts["gavel-las"] == 720.0               # the first round after its arrival
    assert starts["gavel-las:recompute_every=1920,hold_unallocated=true"] == 2520.0   # 360 + 6 x 360


def test_gavel_sim_params_run_every_policy_end_to_end(perf):
    from quanta.policies.gavel import gavel_sim_params
    c = Cluster((NodeSpec("v", "v100", 4), NodeSpec("p", "p100", 4), NodeSpec("k", "k80", 4)))
    rng = np.random.default_rng(1)
    from quanta.workloads.catalog import drawable_types
    types = drawable_types()
    jobs = [JobSpec(f"g{i}", float(i * 300), int(rng.choice([1, 1, 2, 4])),
                    types[int(rng.integers(len(types)))], total_steps=float(rng.integers(2000, 20000)))
            for i in range(30)]
    for name, agnostic in (("gavel-las", False), ("gavel-las-agnostic", True), ("gavel-ftf", False),
                           ("gavel-throughput", False), ("gavel-fifo", False),
                           ("gavel-fifo-agnostic", True)):
        params = gavel_sim_params(agnostic, seed=3)
        spec = name + ":" + ",".join(f"{k}={v}" for k, v in params.items())
        res = Simulator(jobs, c, make_policy(spec), perf, restart=RestartCost(0.0)).run()
        assert (res.table.state == 3).all(), name
        assert (res.busy <= c.capacity).all(), name


def test_state_cleared_by_row_decides_as_a_full_clear(perf):
    """Gavel's decide clears only the rows it touched since the last allocation (received time,
    time active, deficits, X, progress), not every job of the trace. A job can leave the
    policy's view and come back (a queue's quota hides it for a while): a policy whose state
    forgets which rows those are at every decision (so that every clear is of every row, as
    before) decides the same, in Quanta's rounds and in Gavel's simulator's (credit by progress,
    reset of the time received), with recomputation held back too, and leaves the same state."""
    from quanta.core.jobtable import PENDING, JobTable
    from quanta.core.snapshot import Snapshot
    from quanta.core.synthetic import start_on_fastest
    from quanta.placement import Occupancy
    from quanta.policies.gavel import Gavel, gavel_sim_params
    from quanta.workloads.catalog import drawable_types

    class Forgetful(Gavel):
        def decide(self, snap):
            snap.state.pop("touched", None)
            return super().decide(snap)

    c = Cluster((NodeSpec("v", "v100", 4), NodeSpec("p", "p100", 4), NodeSpec("k", "k80", 4)))
    types = drawable_types()

    def decisions(policy, seed):
        rng = np.random.default_rng(seed)
        n = 24
        specs = [JobSpec(f"g{i}", 0.0, int(rng.choice([1, 1, 2])),
                         types[int(rng.integers(len(types)))], total_steps=1e6) for i in range(n)]
        table, occ = JobTable(specs, c, perf), Occupancy(c)
        table.state[:] = PENDING
        start_on_fastest(table, occ, rng.permutation(n)[:5].tolist())
        state, out = {}, []
        for step in range(1, 40):
            now = 360.0 * step
            rows = np.sort(rng.choice(n, size=int(rng.integers(8, n + 1)), replace=False))
            table.prog0[:] += 50.0 * (table.gpus > 0)
            snap = Snapshot(now, c, perf, table.view(rows, now), occ.up_capacity(),
                            occ.node_free.copy(), occ.node_up.copy(), state=state)
            dec = policy.decide(snap)
            state = dec.state
            kept = tuple(state[k].copy() for k in ("recv", "elapsed", "deficit", "X", "in_X",
                                                     "progress"))
            out.append((dec.gpus.copy(), dec.gpu_type.copy()) + kept)
        return out

    sim = ",".join(f"{k}={v}" for k, v in gavel_sim_params(False, seed=3).items())
    for spec in ("gavel-las", "gavel-las:" + sim, "gavel-las:recompute_every=1000",
                 "gavel-ftf:" + sim):
        pol = make_policy(spec)
        twin = Forgetful(**{f: getattr(pol, f) for f in pol.__dataclass_fields__})
        for seed in range(3):
            for step, (a, b) in enumerate(zip(decisions(pol, seed), decisions(twin, seed))):
                for x, y in zip(a, b):     # the decision, and the state it leaves, equal
                    assert np.array_equal(x, y), (spec, seed, step)


# -- a recorded slice of Gavel's own simulator, replayed (no Gavel needed) --------------------------
SLICES = ("slice_single_r30_s2", "slice_multi_r20_s2")
SLICE_POLICIES = ("max_min_fairness", "max_min_fairness_perf", "fifo", "fifo_perf",
                  "finish_time_fairness_perf", "max_sum_throughput_perf")


@pytest.mark.parametrize("workload", SLICES)
@pytest.mark.parametrize("gavel_policy", SLICE_POLICIES)
def test_recorded_gavel_slice_replays_within_tolerance(workload, gavel_policy):
    """40 jobs from Gavel's generator, Gavel's simulator's per-job JCTs recorded in
    quanta/data/reference/gavel/ (PROVENANCE.md there). Quanta's policy with gavel_sim_params,
    restart cost 0 and the two world approximations of bench/anchors/compare_gavel.py must stay
    within the targets: average JCT within 2%, per-job median absolute error under 5%."""
    import sys
    from pathlib import Path
    anchors = Path(__file__).resolve().parents[1] / "bench" / "anchors"
    sys.path.insert(0, str(anchors))
    try:
        import compare_gavel
    finally:
        sys.path.remove(str(anchors))
    ref = compare_gavel.RECORDED / "gavel" / f"{workload}__{gavel_policy}.csv"
    r = compare_gavel.compare(ref, "gavel-sim+world")
    assert abs(r["diff"]) < 0.02, r
    assert r["med"] < 0.05, r


def test_round_state_grows_with_the_jobs_table(perf):
    # the mechanism keeps its per-job state in arrays indexed by driver row: a table that grows
    # (the runtime's) and a policy reused on a longer run keep working
    specs = [JobSpec(f"j{i}", 60.0 * i, 1, "ResNet-18 (batch size 64)", total_steps=3e4)
             for i in range(12)]
    cluster = Cluster((NodeSpec("a", "v100", 2), NodeSpec("b", "k80", 2)))
    pol = make_policy("gavel-las:solution=central,credit=progress,reset_received=true")
    res = Simulator(specs, cluster, pol, perf, restart=RestartCost(0.0)).run()
    assert (res.table.state == 3).all()




def test_cost_objective_counts_a_jobs_gpus_or_one_gpus_price_as_gavel():
    """gavel-cost values a job's throughput per dollar of the GPUs it holds (z_j GPUs at the
    type's price); cost_of=gpu divides by one GPU's price, as Gavel's
    ThroughputNormalizedByCostSum does (max_sum_throughput.py: T / c_k), which favours the
    2-GPU job here (3 steps/s for 2 GPUs against 1 step/s for 1)."""
    from test_sia import LinearPerf, snap_of
    c = Cluster((NodeSpec("n", "v100", 2),))
    perf = LinearPerf({("one", "v100"): 1.0, ("two", "v100"): 3.0 / 2 ** 0.9})
    specs = [JobSpec("a", 0.0, 1, "one", total_steps=1e6), JobSpec("b", 0.0, 2, "two", total_steps=1e6)]
    snap = snap_of(specs, c, perf)
    assert make_policy("gavel-cost").allocation(snap)[:, 0] == pytest.approx([1.0, 0.5])
    assert make_policy("gavel-cost:cost_of=gpu").allocation(snap)[:, 0] == pytest.approx([0.0, 1.0])
    with pytest.raises(Exception, match="cost_of 'node' unknown"):
        make_policy("gavel-cost:cost_of=node")
