"""Rubick and the Synergy-like baseline on hand-built snapshots, and end to end."""

import numpy as np
import pytest
from conftest import ToyPerf

from quanta.core.jobtable import DONE, PENDING, JobTable
from quanta.core.snapshot import Snapshot
from quanta.model import Cluster, JobSpec, NodeSpec
from quanta.placement import Occupancy
import quanta.policies.reuse as reuse
from quanta.policies import make_policy
from quanta.sim.engine import RestartCost, Simulator

EXP = {"flat": 0.3, "steep": 1.0, "replan": 0.9, "cpu": 0.9}


class CurvePerf(ToyPerf):
    """steps/s = GPUs ** EXP[type] x plan factor x CPU factor. Plan "fast" runs 1.5x but only for
    type "replan"; type "cpu" runs at min(threads per GPU, 8) / 8 of its speed (4 threads per GPU
    when none are given); other types ignore CPUs."""

    def rate(self, job, gpu_type, n, nodes=1, cons=None):
        return self.rate_with(job, gpu_type, n, nodes, cons)

    def rate_with(self, job, gpu_type, n, nodes=1, cons=None, plan=None, cpus=0.0, mem_gb=0.0):
        if n <= 0:
            return 0.0
        r = n ** EXP[job.job_type]
        if (plan or job.plan) == "fast" and job.job_type == "replan":
            r *= 1.5
        if job.job_type == "cpu":
            r *= min((cpus / n) if cpus else 4.0, 8.0) / 8.0
        return r

    def best_plan_rate(self, job, gpu_type, n, nodes=1, cons=None, cpus=0.0, mem_gb=0.0):
        plans = ["base", "fast"] if job.job_type == "replan" else [job.plan or "base"]
        return max(((p, self.rate_with(job, gpu_type, n, nodes, cons, p, cpus)) for p in plans),
                   key=lambda x: x[1])

    def host_memory_gb(self, job, plan):
        return 0.0


def cluster(nodes=2, gpus=8, cpus=96, mem=1600.0):
    return Cluster(tuple(NodeSpec(f"n{i}", "a800", gpus, cpus=cpus, mem_gb=mem) for i in range(nodes)))


def snapshot(specs, c, running=(), perf=None, now=1000.0):
    """`running`: job index -> (GPUs, plan, CPU threads) held."""
    perf = perf or CurvePerf()
    t = JobTable(specs, c, perf)
    occ = Occupancy(c)
    t.state[:] = PENDING
    for row, (g, plan, cpus) in dict(running).items():
        gpus, _ = occ.place(0, g, cpus / g)
        occ.assign(row, gpus, cpus)
        rate = perf.rate_with(specs[row], "a800", g, 1, True, plan, cpus)
        t.apply_transitions(0.0, np.array([row]), np.array([0]), np.array([0]), [gpus],
                            np.array([rate]), np.array([0.0]), plan=[plan], cpus=np.array([cpus]),
                            mem_gb=np.array([0.0]))
    rows = np.arange(len(specs))
    return Snapshot(now, c, perf, t.view(rows, now), occ.up_capacity(), occ.node_free.copy(),
                    occ.node_up.copy(), resources=occ.up_resources())


def job(name, kind, g, guaranteed=False, submit=0.0, plan=""):
    return JobSpec(name, submit, g, kind, total_steps=1e6, guaranteed=guaranteed, plan=plan)


def rates_of(dec, specs, perf=CurvePerf()):
    return np.array([perf.rate_with(s, "a800", int(g), 1, True, dec.plans.get(i),
                                    float(dec.cpus[i]) if dec.cpus is not None else 0.0)
                     for i, (s, g) in enumerate(zip(specs, dec.gpus))])


def test_guaranteed_jobs_keep_their_sla_while_gpus_go_to_the_steepest_curve():
    specs = [job("g-flat", "flat", 4, True), job("g-steep", "steep", 4, True, 1.0),
             job("b-steep", "steep", 4, False, 2.0), job("b-flat", "flat", 2, False, 3.0)]
    snap = snapshot(specs, cluster())
    dec = make_policy("rubick").decide(snap)
    r = rates_of(dec, specs)
    sla = snap.jobs.rates[:, 0]
    assert r[0] >= sla[0] and r[1] >= sla[1]              # both guaranteed jobs at their SLA
    assert dec.gpus[0] == 4                               # the flat one gets no more than that
    assert dec.gpus[3] == 1                               # flat best-effort: its steep first GPU only
    assert dec.gpus[1] + dec.gpus[2] == 16 - 4 - 1        # every other GPU to the steep curves
    assert dec.gpus.sum() == 16


def test_best_effort_job_is_shrunk_to_zero_for_a_guaranteed_job_but_never_below_an_sla():
    c = cluster(nodes=1)
    specs = [job("b", "steep", 8), job("g", "flat", 8, True, 1.0)]
    dec = make_policy("rubick").decide(snapshot(specs, c, running={0: (8, "base", 16.0)}))
    assert dec.gpus.tolist() == [0, 8]                    # preempted: the SLA comes first
    # a guaranteed job at its SLA keeps it even against a steeper best-effort newcomer
    specs = [job("g", "flat", 8, True), job("b", "steep", 8, False, 1.0)]
    dec = make_policy("rubick").decide(snapshot(specs, c, running={0: (8, "base", 16.0)}))
    assert dec.gpus.tolist() == [8, 0]
    # but a best-effort job only gives way to a steeper one when that gains more per GPU
    specs = [job("b1", "steep", 4), job("b2", "flat", 4, False, 1.0)]
    dec = make_policy("rubick").decide(snapshot(specs, c, running={0: (8, "base", 16.0)}))
    assert dec.gpus[0] >= 7 and dec.gpus[1] <= 1


def test_plan_changes_when_it_pays_and_not_otherwise():
    c = cluster(nodes=1)
    specs = [job("r", "replan", 8, plan="base")]
    snap = snapshot(specs, c, running={0: (8, "base", 16.0)})
    dec = make_policy("rubick").decide(snap)
    assert dec.gpus[0] == 8 and dec.plans[0] == "fast"     # 1.5x on the same GPUs
    dec = make_policy("rubick:min_gain=0.6").decide(snap)
    assert dec.gpus[0] == 8 and dec.plans[0] == "base"     # 1.5x does not clear a 60% bar
    # a job of a type without better plans keeps its plan and its resources
    specs = [job("f", "flat", 8)]
    snap = snapshot(specs, c, running={0: (8, "base", 8.0)})
    dec = make_policy("rubick").decide(snap)
    assert dec.gpus[0] == 8 and dec.plans[0] == "base" and dec.cpus[0] == 8.0


def test_cpu_threads_go_to_the_job_sensitive_to_them():
    c = cluster(nodes=1, cpus=32)
    specs = [job("c", "cpu", 4), job("f", "flat", 4, False, 1.0)]
    dec = make_policy("rubick").decide(snapshot(specs, c))
    assert (dec.gpus > 0).all() and dec.gpus.sum() == 8
    per_gpu = dec.cpus / dec.gpus
    assert per_gpu[0] == 8.0 and per_gpu[1] == 1.0   # flat needs 1 per GPU, cpu gains up to 8
    assert dec.cpus.sum() <= 32


def test_rubick_asks_only_for_cpus_a_node_can_give_and_its_decision_places():
    from quanta.core.mechanism import apply, dry_run, shadow
    # 2 nodes x 4 GPUs x 16 CPUs: 8 threads per GPU fit 2 GPUs of a node, not 4
    c = cluster(nodes=2, gpus=4, cpus=16)
    specs = [job("c", "cpu", 4), job("d", "cpu", 2, False, 1.0), job("f", "flat", 2, False, 2.0)]
    snap = snapshot(specs, c)
    dec = make_policy("rubick").decide(snap)
    on = dec.gpus > 0
    assert on.sum() >= 2 and dry_run(snap, dec)[on].all()
    occ = shadow(snap)
    apply(snap, dec, occ)
    assert (occ.cpu_free >= -1e-9).all()
    assert np.all(dec.cpus[on] / dec.gpus[on] * np.minimum(dec.gpus[on], 4) <= 16 + 1e-9)


def _bench_snapshot(n, seed):
    """bench/policy_solve.py's round: Gavel's job types on V100 / P100 / K80 (many ties)."""
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "bench" / "policy_solve.py"
    spec = importlib.util.spec_from_file_location("policy_solve", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.snapshot_of(n, seed)


def _curve_snapshot(n, nodes, seed):
    specs = trace(n, seed=seed)
    running = {i: (s.num_gpus, "base", 4.0 * s.num_gpus) for i, s in enumerate(specs[:n // 2])
               if i % 3 != 2}
    return snapshot(specs, cluster(nodes=nodes, cpus=32), running=running)


def _greedy_case(case):
    return {"24 jobs": lambda: _curve_snapshot(24, 4, 3), "64 jobs": lambda: _curve_snapshot(64, 12, 5),
            "gavel types": lambda: _bench_snapshot(128, 2)}[case]()


@pytest.mark.parametrize("case", ["24 jobs", "gavel types"])
def test_each_steepest_move_read_from_the_chains_is_a_search_from_scratch(monkeypatch, case):
    """The greedy reads a job's next steepest move, after it moved, from chains of moves found
    for every job at once (rubick_round._Chains over Round._best_moves): each must be the move a
    search from the job's option gives."""
    from quanta.policies.rubick_round import Round, _Chains
    snap = _greedy_case(case)
    found = _Chains.get
    checked = []

    def checked_next(self, i, a):
        got = found(self, i, a)
        if getattr(self.search, "__func__", None) is not Round._best_moves:
            return got                       # (the victim tables' chains: the next test)
        rnd = self.search.__self__
        assert rnd.at[i] == a
        s, o = rnd._best_moves(np.array([i]), np.array([a]))
        assert got == (float(s[0]), int(o[0]))
        checked.append(i)
        return got

    monkeypatch.setattr(_Chains, "get", checked_next)
    make_policy("rubick").decide(snap)
    assert len(checked) > 3


@pytest.mark.parametrize("case", ["24 jobs", "64 jobs", "gavel types"])
def test_victim_tables_stay_equal_to_a_fresh_search_as_jobs_move(monkeypatch, case):
    """Round.fund reads each job's cheapest shrink from tables kept per shortage pattern,
    refreshed only for jobs that moved (each job's shrink at an option found once, those its
    victims shrink to found ahead), and the cheapest victim per GPU type and over all jobs kept
    as the table changes; after every fund they must, once refreshed, equal a search from
    scratch."""
    from quanta.policies.rubick_round import Round
    snap = _greedy_case(case)
    checked = []
    fund = Round.fund

    def checked_fund(self, i, need, limit):
        ok = fund(self, i, need, limit)
        for pattern in list(self._shrink):
            table = self.shrink_table(pattern)
            fresh_r, fresh_o = np.full(self.n, np.inf), np.full(self.n, -2)
            can = np.flatnonzero((self.at >= 0) & ~self.raised & ~self.pinned)
            fresh_r[can], fresh_o[can] = self._shrink_rows(can, self.at[can], np.array(pattern))
            assert np.array_equal(table.ratio, fresh_r) and np.array_equal(table.opt, fresh_o)
            for g in [-1] + sorted(set(self.k_of.tolist())):
                rows = np.arange(self.n) if g < 0 else np.flatnonzero(self.k_of == g)
                for other in (-1, int(rows[np.argmin(fresh_r[rows])])):
                    r = np.where(rows == other, np.inf, fresh_r[rows])
                    assert table.victim(g, other) == (int(rows[np.argmin(r)]), float(r.min()))
            checked.append(pattern)
        return ok

    monkeypatch.setattr(Round, "fund", checked_fund)
    dec = make_policy("rubick").decide(snap)
    assert checked and dec.gpus.sum() <= snap.cluster.num_gpus
    assert dec.cpus.sum() <= snap.resources[0] + 1e-9


def test_synergy_keeps_gpus_and_plans_and_moves_cpus_to_the_sensitive_job():
    c = cluster(nodes=1, cpus=32)
    specs = [job("c", "cpu", 4, plan="base"), job("f", "flat", 4, False, 1.0, plan="base")]
    snap = snapshot(specs, c)
    prop = make_policy("synergy:tune=false").decide(snap)
    assert prop.gpus.tolist() == [4, 4] and prop.cpus.tolist() == [16.0, 16.0]
    tuned = make_policy("synergy").decide(snap)
    assert tuned.gpus.tolist() == [4, 4] and not tuned.plans
    assert tuned.cpus[1] < 16.0 and tuned.cpus[0] >= 16.0
    assert rates_of(tuned, specs)[0] >= rates_of(prop, specs)[0]


def trace(n=40, seed=1):
    rng = np.random.default_rng(seed)
    kinds = ["flat", "steep", "replan", "cpu"]
    out = []
    for i in range(n):
        g = int(rng.choice([1, 2, 4, 8]))
        out.append(JobSpec(f"j{i}", 30.0 * i, g, kinds[i % 4], total_steps=float(rng.integers(200, 3000)) * g ** 0.5,
                           guaranteed=bool(rng.random() < 0.5), plan="base"))
    return out


@pytest.mark.parametrize("policy", ["rubick", "synergy"])
def test_end_to_end_every_job_finishes_and_guaranteed_jobs_meet_their_sla(policy):
    specs = trace()
    res = Simulator(specs, cluster(), make_policy(policy), CurvePerf(), restart=RestartCost(20.0)).run()
    t = res.table
    assert (t.state == DONE).all() and not res.stalled
    if policy == "rubick":
        g = np.array([s.guaranteed for s in specs])
        assert np.all(t.min_rate[g] >= t.rates[g, 0] * (1 - 1e-9))   # never below the SLA
        assert t.reconfigs.sum() > 0                                  # it did reshape jobs
    again = Simulator(specs, cluster(), make_policy(policy), CurvePerf(), restart=RestartCost(20.0)).run()
    assert np.array_equal(again.table.end, t.end)                     # deterministic


# -- paper vs artifact (quanta/policies/rubick.py, "Paper vs artifact") -----------------------------
def test_r1_without_shrinking_running_jobs_a_guaranteed_job_waits_for_free_gpus():
    c = cluster(nodes=1)
    specs = [job("b", "steep", 8), job("g", "flat", 8, True, 1.0)]
    snap = snapshot(specs, c, running={0: (8, "base", 16.0)})
    assert make_policy("rubick").decide(snap).gpus.tolist() == [0, 8]        # paper: preempted
    dec = make_policy("rubick:shrink_running=false").decide(snap)            # artifact
    assert dec.gpus.tolist() == [8, 0]
    # nor does a steeper best-effort newcomer take from a running job; free GPUs still go out
    specs = [job("b1", "flat", 4), job("b2", "steep", 4, False, 1.0)]
    snap = snapshot(specs, c, running={0: (6, "base", 12.0)})
    assert make_policy("rubick").decide(snap).gpus[0] < 6
    dec = make_policy("rubick:shrink_running=false").decide(snap)
    assert dec.gpus.tolist() == [6, 2]


def test_r2_scale_out_is_capped_at_the_measured_range_and_the_decision_says_so():
    from quanta.model.presets import resolve_cluster
    from quanta.perf.catalog_model import CatalogModel
    from quanta.perf.plan_evidence import measured_range
    perf = CatalogModel()
    assert measured_range("vit") == {"dp": (8, 8)}                 # no vit run beyond 8 GPUs
    assert measured_range("llama30")["3d"] == (64, 8)
    specs = [JobSpec("vit-1", 0.0, 2, "vit", total_steps=1e5, plan="zero-dp", cpus=16)]
    snap = snapshot(specs, resolve_cluster("rubick-64"), perf=perf)
    before = make_policy("rubick:scale_cap=none").decide(snap)
    assert before.gpus[0] == 64                                    # a lone 2-GPU job on 8 nodes
    dec = make_policy("rubick").decide(snap)
    assert dec.gpus[0] == 8
    assert any("vit" in n and "<= 8 GPUs" in n for n in dec.state["notes"]["scale_cap"])
    # "node" (the artifact): data-parallel jobs on one node, for any performance model
    c = cluster(nodes=2)
    specs = [job("s", "steep", 2)]
    assert make_policy("rubick").decide(snapshot(specs, c)).gpus[0] == 16   # no measured range
    dec = make_policy("rubick:scale_cap=node").decide(snapshot(specs, c))
    assert dec.gpus[0] == 8 and dec.state["notes"]["scale_cap"]
    # the requested count is never cut
    specs = [job("s", "steep", 16)]
    assert make_policy("rubick:scale_cap=node").decide(snapshot(specs, c)).gpus[0] == 16


def test_r3_per_model_normalisation_treats_jobs_of_one_model_alike():
    c = cluster(nodes=1)
    specs = [job("a", "flat", 8), job("b", "flat", 1, False, 1.0)]
    # by the request, the 1-GPU job's gains weigh 8**0.3 = 1.9x more: it gets most of the node
    assert make_policy("rubick").decide(snapshot(specs, c)).gpus.tolist() == [2, 6]
    # by one constant per model (the artifact's orig_tpt), both jobs' gains weigh the same
    assert make_policy("rubick:normalize=model8").decide(snapshot(specs, c)).gpus.tolist() == [4, 4]


def test_sla_admit_guarantees_a_fraction_of_the_request_like_the_artifacts_1_5():
    c = cluster(nodes=1)
    specs = [job("b", "steep", 8), job("g", "flat", 8, True, 1.0)]
    snap = snapshot(specs, c, running={0: (8, "base", 16.0)})
    sla = snap.jobs.rates[1, 0]
    assert make_policy("rubick").decide(snap).gpus.tolist() == [0, 8]
    dec = make_policy("rubick:sla_admit=1.5").decide(snap)
    r = rates_of(dec, specs)
    assert 0 < dec.gpus[1] < 8 and dec.gpus[0] > 0
    assert 1.5 * r[1] >= sla and r[1] < sla                     # ~67% of the request, not all of it
    with pytest.raises(Exception):
        make_policy("rubick:normalize=bogus")


def test_fill_node_starts_and_grows_a_job_on_one_nodes_free_gpus():
    c = cluster(nodes=2)
    # node 0: a flat job on 3 GPUs; two pending 1-GPU flat jobs
    specs = [job("r", "flat", 3), job("p1", "flat", 1, False, 1.0), job("p2", "flat", 1, False, 2.0)]
    snap = snapshot(specs, c, running={0: (3, "base", 6.0)})
    art = "rubick:shrink_running=false,scale_cap=node"
    assert make_policy(art).decide(snap).gpus.tolist() == [3, 7, 0]     # steepest gain: 7 + 3
    dec = make_policy(art + ",fill_node=true").decide(snap)
    # the running job takes its node's 5 free GPUs; the first pending job the other whole node;
    # the second waits (no free GPU left on any node)
    assert dec.gpus.tolist() == [8, 8, 0]
    # paper defaults plus fill_node: the same start rule
    assert make_policy("rubick:fill_node=true").decide(snap).gpus.tolist() == [8, 8, 0]


def _llama30_pair(restarts=0):
    from quanta.model.presets import resolve_cluster
    from quanta.perf.base import best_plan_rate
    from quanta.perf.catalog_model import CatalogModel
    perf = CatalogModel()
    a = JobSpec("llama30-a", 1.0, 48, "llama30", total_steps=1e4)      # running on 48 GPUs
    b = JobSpec("llama30-b", 0.0, 48, "llama30", total_steps=1e4)      # older, waiting
    plan, _ = best_plan_rate(perf, a, "a800", 48, 6, True, 576.0)
    assert plan.is_3d
    snap = snapshot([a, b], resolve_cluster("rubick-64"), running={0: (48, plan, 576.0)}, perf=perf)
    snap.jobs.restarts[0] = restarts
    return snap


def test_release_3d_empties_a_large_3d_job_each_round_and_it_can_lose_its_gpus():
    art = "rubick:shrink_running=false,scale_cap=node,fill_node=true"
    snap = _llama30_pair()
    # the running job keeps its 48 GPUs; the older one waits (no llama30 count fits 16 free GPUs)
    assert make_policy(art).decide(snap).gpus.tolist() == [48, 0]
    # released, the running job is placed again in submission order (the artifact's 3D jobs all
    # come first, by age): the older waiting job takes 48 of the 64 GPUs, none of its counts fits
    # what is left and it waits
    assert make_policy(art + ",release_3d=32").decide(snap).gpus.tolist() == [0, 48]
    # not above the threshold, or after 7 restarts: left alone
    assert make_policy(art + ",release_3d=56").decide(snap).gpus.tolist() == [48, 0]
    assert make_policy(art + ",release_3d=32").decide(_llama30_pair(7)).gpus.tolist() == [48, 0]
    from quanta.errors import QuantaError
    with pytest.raises(QuantaError, match="release_3d"):
        make_policy("rubick:release_3d=-1")


def _bench():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "bench" / "repro_rubick.py"
    spec = importlib.util.spec_from_file_location("repro_rubick", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_r4_bench_charges_the_first_start_and_builds_the_artifact_policy():
    bench = _bench()
    specs = trace(12, seed=2)
    free, _ = bench.simulate(specs, "rubick", CurvePerf())
    charged, _ = bench.simulate(specs, "rubick", CurvePerf(), first_start=True)
    t0, t1 = free.table, charged.table
    assert (t1.state == DONE).all()
    # every job's first start pays 260 s before it progresses; without the charge it starts at once
    assert np.nanmin(t1.end - t1.first_start) >= bench.RESTART_S
    assert np.nanmean(t1.end - t1.submit) > np.nanmean(t0.end - t0.submit) + 200
    pol = make_policy("rubick:" + bench.ARTIFACT_PARAMS)
    assert (pol.shrink_running, pol.scale_cap, pol.normalize, pol.sla_admit, pol.fill_node,
            pol.release_3d) == (False, "node", "model8", 1.5, True, 32)


def test_measured_plan_perf_runs_jobs_at_the_artifacts_measured_rows_else_the_fitted_model():
    import csv
    from quanta.paths import PROFILES_DIR
    from quanta.perf.catalog_model import CatalogModel
    from quanta.perf.plan_measured import MeasuredPlanPerf
    base = CatalogModel()
    world = MeasuredPlanPerf(base)
    with open(PROFILES_DIR / "rubick" / "placements" / "bert.csv", newline="", encoding="utf-8-sig") as fh:
        row = next(r for r in csv.DictReader(fh) if r["exec_plan"] == "zero-dp" and r["placement"] == "8")
    spec = JobSpec("b", 0.0, 8, "bert", total_steps=1e4, plan="zero-dp", cpus=64)
    measured = world.rate_with(spec, "a800", 8, 1, True, "zero-dp")
    assert measured == pytest.approx(1.0 / float(row["iter_time"]))
    assert measured != pytest.approx(base.rate_with(spec, "a800", 8, 1, True, "zero-dp"))
    assert world.rate(spec, "a800", 8, 1, True) == pytest.approx(measured)   # its own plan
    assert world.rate_matrix([spec], ["a800"])[0, 0] == pytest.approx(measured)
    # no measured row: the fitted model (bert zero-dp never ran on 16 GPUs)
    assert world.rate_with(spec, "a800", 16, 2, True, "zero-dp") == \
        base.rate_with(spec, "a800", 16, 2, True, "zero-dp")
    assert world.hits == 2 and world.misses == 1 and len(world.ratios) == 2


class _Spy:
    """A policy that records what it saw and runs every job at its request."""
    name, interval = "spy", 60.0

    def __init__(self):
        self.seen = []

    def decide(self, snap):
        from quanta.core.decision import Decision
        self.seen.append((snap.perf, snap.jobs.rates.copy()))
        dec = Decision.empty(snap)
        dec.gpus[:] = snap.jobs.req
        dec.gpu_type[:] = 0
        return dec

    def label(self):
        return "spy"


class HalfSteep(CurvePerf):
    """The 'world': steep jobs run at half the rate CurvePerf predicts."""

    def rate_with(self, job, gpu_type, n, nodes=1, cons=None, plan=None, cpus=0.0, mem_gb=0.0):
        r = super().rate_with(job, gpu_type, n, nodes, cons, plan, cpus, mem_gb)
        return r / 2 if job.job_type == "steep" else r

    def rate_matrix(self, jobs, types):
        return np.array([[self.rate(j, t, j.num_gpus) for t in types] for j in jobs])


def test_decide_on_gives_the_policy_the_fitted_model_while_jobs_run_on_the_world():
    from quanta.policies.decide_on import DecideOn
    fitted, world = CurvePerf(), HalfSteep()
    specs = [job("s", "steep", 4), job("f", "flat", 2, False, 1.0)]
    snap = snapshot(specs, cluster(nodes=1), perf=world)
    spy = _Spy()
    DecideOn(spy, fitted).decide(snap)
    perf_seen, rates_seen = spy.seen[-1]
    assert perf_seen is fitted
    assert rates_seen[:, 0].tolist() == [4.0, 2 ** 0.3]                 # the fitted request rates
    assert snap.jobs.rates[:, 0].tolist() == [2.0, 2 ** 0.3]            # the world's, untouched
    # end to end: rubick decides on the fitted model, the steep jobs run at the world's half rate
    specs = trace(16, seed=4)
    res = Simulator(specs, cluster(), DecideOn(make_policy("rubick"), fitted), world,
                    restart=RestartCost(20.0)).run()
    t = res.table
    assert (t.state == DONE).all()
    steep = np.array([s.job_type == "steep" for s in specs])
    assert np.allclose(t.rates[steep, 0], [world.rate(s, "a800", s.num_gpus) for s in np.array(specs)[steep]])





def test_a_jobs_curve_follows_its_training_phase():
    """A job's options (rates on its curve) were kept per (model, plan, GPUs, CPUs, ...) but not
    per phase: under a performance model whose rates change as training goes on (goodput
    models, by epoch), a job kept the curve of the first phase any job of its model was seen in.
    The per-model constant of normalize=model8 is the model's at phase 0, whatever the phase."""
    class PhasedPerf(CurvePerf):
        def rate_with(self, job, gpu_type, n, nodes=1, cons=None, plan=None, cpus=0.0,
                      mem_gb=0.0):
            return super().rate_with(job, gpu_type, n, nodes, cons, plan, cpus) * (1 + job.phase)

    c, perf = cluster(nodes=1), PhasedPerf()
    pol = make_policy("rubick:normalize=model8")
    early, late = job("a", "steep", 4), job("a", "steep", 4).with_(phase=2)
    unit = (96 / 8, 1600.0 / 8)
    curves = [pol._options(snapshot([s], c, perf=perf), 0, 0, 1.0, unit).rate
              for s in (early, late)]
    assert np.allclose(curves[1], 3 * curves[0])
    norms = [pol._model_norm(snapshot([s], c, perf=perf), 0, 0, unit) for s in (late, early)]
    assert norms[0] == norms[1] == perf.best_plan_rate(early, "a800", 8)[1]

def test_a_round_whose_inputs_changed_is_decided_afresh():
    """Rubick's last answer is given again only for the same inputs: a job that came to hold
    GPUs (and may not be moved again: max_restarts), a node that went down, are rounds decided
    afresh, each the decision a fresh policy makes."""
    import quanta.policies.rubick as rubick
    specs = [job("a", "steep", 4), job("b", "flat", 4), job("c", "cpu", 2, guaranteed=True)]
    c, perf = cluster(nodes=2, cpus=32), CurvePerf()
    t, occ = JobTable(specs, c, perf), Occupancy(c)
    t.state[:] = PENDING
    pol = make_policy("rubick")

    def decide_both():
        snap = Snapshot(1000.0, c, perf, t.view(np.arange(3), 1000.0), occ.up_capacity(),
                        occ.node_free.copy(), occ.node_up.copy(), resources=occ.up_resources())
        kept = pol._memo.get(reuse.LAST_ROUND)
        got, fresh = pol.decide(snap), make_policy("rubick").decide(snap)
        assert got.gpus.tolist() == fresh.gpus.tolist() and got.plans == fresh.plans
        assert np.array_equal(got.cpus, fresh.cpus) and got.gpu_type.tolist() == \
            fresh.gpu_type.tolist()
        return got, pol._memo.get(reuse.LAST_ROUND) is kept       # (given again)

    first, again = decide_both()
    assert not again and first.gpus[1] < 8
    assert decide_both()[1]                                  # the same inputs: given again
    gpus, _ = occ.place(0, 8, 1.0)                           # b holds 8 GPUs, restarted too often
    occ.assign(1, gpus, 8.0)
    t.apply_transitions(0.0, np.array([1]), np.array([0]), np.array([0]), [gpus],
                        np.array([1.0]), np.array([0.0]), plan=[None], cpus=np.array([8.0]),
                        mem_gb=np.array([0.0]))
    t.restarts[1] = pol.max_restarts
    held, again = decide_both()
    assert not again and held.gpus[1] == 8
    assert decide_both()[1]
    occ.node_down(int(c.gpu_node[gpus[0]]))                  # its node fails
    down, again = decide_both()
    assert not again and down.gpus.sum() <= 8

@pytest.mark.parametrize("trace_name,cluster_spec,policy,extra", [
    ("rubick-base", "rubick-64", "rubick", {"max_jobs": 120, "node_mtbf_h": 20.0}),
    ("rubick-base", "rubick-64", "rubick:fill_node=true,release_3d=32,shrink_running=false",
     {"max_jobs": 120}),
    ("synthetic:6:60", "v100:2x4,k80:3x2", "rubick", {"node_mtbf_h": 5.0}),
    ("rubick-base", "rubick-64", "synergy", {"max_jobs": 120, "node_mtbf_h": 20.0}),
    ("synthetic:6:60", "rubick-64", "synergy:backfill=false", {"node_mtbf_h": 5.0}),
])
def test_a_round_with_the_last_rounds_inputs_gives_the_answer_a_fresh_round_gives(
        tmp_path, monkeypatch, trace_name, cluster_spec, policy, extra):
    """Rubick and Synergy give a round whose inputs (reuse.round_inputs) are the last round's
    the last answer without deciding: at every such round of a run (node failures, SLA jobs, the
    artifact's behaviours included) a fresh round gives the same decision, and most rounds are
    such rounds."""
    from quanta.runner import SimulationRequest, run_simulations
    cls = type(make_policy(policy))
    decide = cls.decide
    rounds, reused = [0], [0]

    def checked(self, snap):
        last = self._memo.get(reuse.LAST_ROUND)
        got = decide(self, snap)
        rounds[0] += 1
        if last is not None and self._memo.get(reuse.LAST_ROUND) is last:   # (given again)
            del self._memo[reuse.LAST_ROUND]
            fresh = decide(self, snap)
            for k, v in vars(fresh).items():
                w = getattr(got, k)
                assert (np.array_equal(v, w) if isinstance(v, np.ndarray) else v == w), k
            reused[0] += 1
        return got

    monkeypatch.setattr(cls, "decide", checked)
    run_simulations(SimulationRequest(trace=trace_name, cluster=cluster_spec, policies=[policy],
                                      seed=3, out=tmp_path / "o", plots=False, **extra))
    assert reused[0] > rounds[0] / 2, (reused, rounds)


def test_a_job_a_queue_layer_put_on_a_slower_type_is_decided_on_that_types_curve(tmp_path):
    """Under a queues file a job may run on a type other than its fastest; Rubick computed its
    curve on the fastest type and then asked for one of that curve's counts on the type it held:
    a ResNet-50 asked for 2 K80s, where Gavel's table has it not run (a PolicyError traceback,
    with node failures; the determinism probe)."""
    from pathlib import Path

    from quanta.runner import SimulationRequest, run_simulations
    teams = Path(__file__).resolve().parents[1] / "quanta" / "examples" / "queues" / "teams.yaml"
    rows, _ = run_simulations(SimulationRequest(
        trace="philly", max_jobs=300, load_scale=3.0, cluster="gavel-108", queues=str(teams),
        node_mtbf_h=10.0, repair_h=0.5, policies=["rubick"], out=tmp_path / "o", plots=False))
    assert rows[0]["finished"] == 300
