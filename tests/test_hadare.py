"""HadarE: forked copies on idle GPU types together finish a job's work sooner; copies are
consolidated back to one when a waiting job needs their GPUs."""

import numpy as np
import pytest
from conftest import ToyPerf

from quanta.core.jobtable import DONE, PENDING, JobTable
from quanta.core.mechanism import Kind, apply
from quanta.core.snapshot import Snapshot
from quanta.model import Cluster, JobSpec, NodeSpec
from quanta.perf.base import Part, aggregation_seconds, mixed_rate
from quanta.placement.occupancy import Occupancy
from quanta.policies import make_policy
from quanta.policies.hadare import CORE_COPIES, work_split
from quanta.sim import Simulator
from quanta.sim.engine import RestartCost

R = 360.0
RN = "ResNet-50 (batch size 64)"


def cluster():
    return Cluster((NodeSpec("v0", "v100", 2, inter_bw_gbps=1.0),
                    NodeSpec("p0", "p100", 2, inter_bw_gbps=1.0)))


def toy():
    perf = ToyPerf(speed={(RN, "p100"): 0.6}, exponent={RN: 1.0})
    perf.model_bytes = lambda job: 100e6
    return perf


def test_work_split_follows_throughput_and_covers_the_work():
    split = work_split(900.0, np.array([2.0, 1.0]))
    assert split.tolist() == pytest.approx([600.0, 300.0])
    assert split[0] / 2.0 == pytest.approx(split[1] / 1.0)     # copies finish together


def test_copies_on_idle_types_together_finish_the_jobs_work_sooner_than_one_copy():
    perf = toy()
    spec = [JobSpec("a", 0.0, 2, RN, total_steps=2 * 20 * R)]
    hadar = Simulator(spec, cluster(), make_policy("hadar"), perf, restart=RestartCost(30.0)).run()
    pol = make_policy("hadare")
    res = Simulator(spec, cluster(), pol, perf, restart=RestartCost(30.0), record_events=True).run()
    t = res.table
    assert t.state[0] == DONE and t.prog0[0] == pytest.approx(spec[0].total_steps)
    assert t.types_used[0] == 0b11                              # copies on both types
    agg = aggregation_seconds(perf, spec[0], 2, 1.0)
    forked = mixed_rate(perf, spec[0], (Part("v100", 2, 1, True), Part("p100", 2, 1, True)),
                        (R, agg))
    assert forked == pytest.approx((2.0 + 1.2) * (1 - agg / R))
    # the cluster is idle: the job starts forked at the first round (V100 copy + P100 copy)
    starts = [e for e in res.event_log if e[2] in ("start", "migrate", "resize")]
    assert len(starts) == 1 and starts[0][4] == 4
    assert starts[0][3] == (0, 1)             # both types named (it named the V100s alone)
    assert t.end[0] == pytest.approx(t.first_start[0] + spec[0].total_steps / forked)
    assert t.end[0] < hadar.table.end[0]                        # sooner than one copy
    assert res.busy.max(axis=0).tolist() == [2, 2]


def _forked_snapshot(specs, perf, now):
    """Job 0 holds a forked pair of copies (2 V100 + 2 P100, averaged every round)."""
    cl = cluster()
    t = JobTable(specs, cl, perf)
    occ = Occupancy(cl)
    t.state[:] = PENDING
    gpus, _ = occ.place_parts(np.array([2, 2]))
    occ.assign(0, gpus)
    t.apply_transitions(0.0, np.array([0]), np.array([0]), np.array([0]), [gpus],
                        np.array([3.0]), np.array([0.0]), fork=np.array([R]))
    rows = np.arange(len(specs))
    return Snapshot(now, cl, perf, t.view(rows, now), occ.up_capacity(), occ.node_free.copy(),
                    occ.node_up.copy()), occ


def test_fork_is_kept_while_gpus_are_idle_and_consolidated_when_a_job_waits():
    perf = toy()
    long = JobSpec("a", 0.0, 2, RN, total_steps=2 * 100 * R)
    snap, occ = _forked_snapshot([long], perf, R)
    assert snap.jobs.mixed[0] and snap.jobs.fork_s[0] == R
    dec = make_policy("hadare").decide(snap)
    assert dec.mixed[0].tolist() == [2, 2] and dec.fork[0] == R
    assert apply(snap, dec, occ) == []                          # kept: no restart
    # a second job arrives and may use the P100s: the fork gives them back
    short = JobSpec("b", R, 2, RN, total_steps=2 * 5 * R)
    snap, occ = _forked_snapshot([long, short], perf, R)
    dec = make_policy("hadare").decide(snap)
    assert 0 not in dec.mixed and dec.gpus[0] == 2 and dec.gpu_type[0] == 0   # one copy, V100
    assert dec.gpus[1] == 2 and dec.gpu_type[1] == 1
    trs = {tr.row: tr for tr in apply(snap, dec, occ)}
    assert trs[0].kind is Kind.RESIZE and trs[0].parts is None and trs[1].kind is Kind.START


def test_hadare_runs_end_to_end_and_raises_utilisation_on_an_idle_tail(perf):
    from quanta.report.metrics import summary
    cl = Cluster(tuple(NodeSpec(f"{t}{i}", t, 4) for t in ("v100", "p100", "k80") for i in range(2)))
    from quanta.workloads.catalog import drawable_types
    types = drawable_types()
    rng = np.random.default_rng(4)
    jobs = [JobSpec(f"j{i}", 0.0, int(rng.choice([1, 2, 4])), types[int(rng.integers(len(types)))],
                    total_steps=float(rng.integers(2000, 60000))) for i in range(12)]
    runs = [Simulator(jobs, cl, make_policy(p), perf).run() for p in ("hadar", "hadare", "hadare")]
    assert all((r.table.state == DONE).all() for r in runs)
    assert np.array_equal(runs[1].table.end, runs[2].table.end)          # deterministic
    assert runs[1].table.fork_s.sum() == 0                               # finished: cleared
    assert summary(runs[1])["gpu_util"] > summary(runs[0])["gpu_util"]


# --- issue: HadarE forks one copy per GPU type, not per node --------------------------------------

def v100s(nodes=4, gpus=4):
    return Cluster(tuple(NodeSpec(f"n{i}", "v100", gpus, inter_bw_gbps=1.25) for i in range(nodes)))


def two_long_jobs():
    return [JobSpec("a", 0.0, 4, RN, total_steps=4 * 200 * R),
            JobSpec("b", 0.0, 4, RN, total_steps=4 * 300 * R)]


def test_copies_go_to_idle_nodes_even_of_the_jobs_own_type():
    """Two 4-GPU jobs on four 4-GPU V100 nodes: Hadar fills two nodes, the other two are idle.
    Forking per node gives copies on those nodes (one per node, the job's gang size, none beside
    its own gang); per GPU type there is nothing to fork onto."""
    from test_policies_baselines import snapshot
    perf = ToyPerf(exponent={RN: 0.9})
    perf.model_bytes = lambda job: 100e6
    snap, _ = snapshot(two_long_jobs(), v100s(), perf, now=0.0)
    pol = make_policy("hadare")
    dec, copies = pol.fork(snap, per_node=True)
    assert set(copies) <= {0, 1} and copies
    used = sum(copies.values())
    assert used.tolist() == [0, 0, 4, 4] or sorted(used.tolist()) == [0, 0, 4, 4]
    for r, c in copies.items():
        assert set(np.unique(c[c > 0]).tolist()) == {4}           # a copy: the job's gang size
        assert dec.fork[r] == R and dec.gpus[r] == 4 + int(c.sum())
    plan, _, _ = pol.plan(snap)
    own = {s.job: s.nodes for s in plan}
    for r, c in copies.items():
        assert not (own[r] > 0)[c > 0].any()                     # on other nodes than its gang
    _, none = pol.fork(snap, per_node=False)
    assert none == {}                                             # one type: no per-type copy


@pytest.mark.skipif(not CORE_COPIES, reason="the core does not place per-node copies yet "
                                            "(Decision.copies)")
def test_forking_per_node_beats_hadar_on_a_homogeneous_cluster_with_idle_nodes():
    from quanta.report.metrics import summary
    perf = ToyPerf(exponent={RN: 0.9})
    perf.model_bytes = lambda job: 100e6
    runs = {p: Simulator(two_long_jobs(), v100s(), make_policy(p), perf,
                         restart=RestartCost(30.0)).run() for p in ("hadar", "hadare")}
    assert all((r.table.state == DONE).all() for r in runs.values())
    s = {p: summary(r) for p, r in runs.items()}
    assert s["hadare"]["makespan_s"] < 0.8 * s["hadar"]["makespan_s"]
    assert s["hadare"]["gpu_util"] > 1.3 * s["hadar"]["gpu_util"]
    assert runs["hadare"].table.restarts.max() <= 2               # copies kept round to round


def test_copy_search_takes_what_a_plain_greedy_over_every_copy_takes():
    # HadarE's copy search keeps the forked rate as a running sum and stops once no slower copy
    # can help; a plain greedy that re-rates every trial with mixed_rate over all copies (the
    # previous loop) must choose the same copies, on clusters with mixed link speeds (0: unknown)
    from quanta.perf.base import link_gbps
    from quanta.policies.hadar_rates import spec_of
    from quanta.policies.hadare import HadarE

    class Plain(HadarE):
        def _fork(self, snap, s, own, idle, held, per_node, rem, idle_at, any_unknown):
            j, cl, perf = snap.jobs, snap.cluster, snap.perf
            r, k = s.job, s.gtype
            spec, z = spec_of(snap, r), int(j.req[r])
            if held is not None and s.kept and held.any() and (held <= idle).all() \
                    and j.allowed[r][cl.node_type[held > 0]].all():
                return held.copy()
            nd = int(np.count_nonzero(own))
            parts0 = [Part(cl.types[k], z, nd, nd <= cl.min_nodes(k, z))]
            best_t = rem / max(float(j.rates[r, k]), 1e-12)
            chosen = []
            for _rate, idx, cnt in self._copy_options(snap, r, own, idle, j.allowed[r], z,
                                                      per_node, idle_at):
                cp = np.zeros(len(cl.nodes), dtype=np.int64)
                cp[idx] = cnt
                trial = chosen + [cp]
                parts = parts0 + [Part(cl.types[int(cl.node_type[np.flatnonzero(c)[0]])],
                                       int(c.sum()), int(np.count_nonzero(c)),
                                       int(np.count_nonzero(c)) <= cl.min_nodes(
                                           int(cl.node_type[np.flatnonzero(c)[0]]), int(c.sum())))
                                  for c in trial]
                agg = aggregation_seconds(perf, spec, len(parts),
                                          link_gbps(cl, np.flatnonzero(own + sum(trial))))
                t = rem / max(mixed_rate(perf, spec, parts, (float(self.interval), agg)), 1e-12)
                if t + self.restart_s < best_t:
                    chosen, best_t = trial, t
            return sum(chosen) if chosen else None

    rng = np.random.default_rng(11)
    perf = ToyPerf(speed={(RN, "p100"): 0.6, (RN, "k80"): 0.3}, exponent={RN: 0.9})
    perf.model_bytes = lambda job: float(rng_sizes[0])
    checked = forked = 0
    for trial in range(12):
        rng_sizes = [rng.choice([1e8, 2e9, 2e10])]
        nodes = tuple(NodeSpec(f"n{i}", ["v100", "p100", "k80"][i % 3], int(rng.choice([2, 4])),
                               inter_bw_gbps=float(rng.choice([0.0, 0.5, 1.25, 3.0, 12.5])))
                      for i in range(int(rng.integers(4, 14))))
        cl = Cluster(nodes)
        specs = [JobSpec(f"j{i}", 0.0, int(rng.choice([1, 2, 4])), RN,
                         total_steps=float(rng.integers(500, 200_000))) for i in range(int(rng.integers(1, 6)))]
        table = JobTable(specs, cl, perf)
        occ = Occupancy(cl)
        table.state[:] = PENDING
        snap = Snapshot(0.0, cl, perf, table.view(np.arange(len(specs)), 0.0), occ.up_capacity(),
                        occ.node_free.copy(), occ.node_up.copy())
        for per in ("node", "type"):
            a = HadarE(per=per).decide(snap)
            b = Plain(per=per).decide(snap)
            assert a.mixed.keys() == b.mixed.keys() and a.copies.keys() == b.copies.keys()
            assert all(np.array_equal(a.mixed[r], b.mixed[r]) for r in a.mixed)
            assert all(np.array_equal(a.copies[r], b.copies[r]) for r in a.copies)
            assert np.array_equal(a.gpus, b.gpus) and a.fork == b.fork
            checked += 1
            forked += len(a.fork)
    assert checked == 24 and forked > 10        # the searches did fork jobs


def test_busy_gpus_per_type_stay_within_the_cluster():
    """A forked job's GPUs are its own gang's then its copies' (v100, p100, p100, v100): the
    busy count took the first and last GPU's type for all of them (10 of 8 V100s busy)."""
    from quanta.model.presets import resolve_cluster
    from quanta.runner import SimulationRequest, run_simulations
    spec = "k80:1x1,p100:2x2,v100:2x4,a100:2x1"
    req = SimulationRequest(trace="synthetic:29:17", cluster=spec, policies=["hadare"],
                            seed=679793, out=None, plots=False)
    _rows, _header, (res,) = run_simulations(req, keep_results=True)
    assert (res.busy <= resolve_cluster(spec).capacity).all()
    assert (res.busy >= 0).all()


def test_events_csv_names_every_type_a_forked_allocation_holds(tmp_path):
    """events.csv's gpu_type named one type for an allocation over two (jobs.csv named both)."""
    import csv

    from quanta.report.output import write_run
    spec = [JobSpec("a", 0.0, 2, RN, total_steps=2 * 20 * R)]
    res = Simulator(spec, cluster(), make_policy("hadare"), toy(), restart=RestartCost(30.0),
                    record_events=True).run()
    write_run(tmp_path, [res], plots=False)
    with open(tmp_path / "hadare" / "events.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["event"] == "start"]
    assert [(r["gpu_type"], r["gpus"]) for r in rows] == [("v100+p100", "4")]
    with open(tmp_path / "hadare" / "jobs.csv", newline="") as f:
        (job,) = csv.DictReader(f)
    assert "v100+p100" in job.values()
