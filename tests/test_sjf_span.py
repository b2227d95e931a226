"""SJF-BSBF's partners of any size (a guest spanning idle GPUs and several hosts) in the core's
sharing model and both drivers' rates; and the grouped host search, checked against the selection
it replaced (a copy of it lives here, only here) and against brute force."""

import numpy as np
import pytest
from conftest import homogeneous, random_jobs
from test_engine import timeline_gpu_seconds
from test_policies_baselines import snapshot

from quanta.core.decision import Decision
from quanta.core.jobtable import DONE, PENDING, JobTable
from quanta.core.mechanism import apply, shadow
from quanta.core.snapshot import Snapshot
from quanta.model import Cluster, JobSpec, NodeSpec
from quanta.perf import TableModel
from quanta.perf.table import table_for
from quanta.placement import Occupancy
from quanta.policies import make_policy
from quanta.policies.base import PolicyError
from quanta.policies.sjf_bsbf import _Pass, pair_times
from quanta.report.metrics import job_metrics
from quanta.sim import Simulator
from quanta.sim.engine import RestartCost
from quanta.sim.faults import NodeOutage
from quanta.workloads.catalog import drawable_types

R18, R50 = "ResNet-18 (batch size 16)", "ResNet-50 (batch size 16)"     # packed: no slowdown


def _job(perf, name, t, typ, secs, gpus=1):
    return JobSpec(name, t, gpus, typ, total_steps=secs * perf.table.alone[(typ, gpus, "v100")])


# -- the decision ----------------------------------------------------------------------------------

def test_short_4_gpu_job_spans_3_idle_gpus_and_a_long_1_gpu_job(perf):
    jobs = [_job(perf, "long", 0.0, R18, 20000), _job(perf, "short", 1.0, R50, 600, gpus=4)]
    snap, table = snapshot(jobs, homogeneous(1, 4), perf, running={0: (0, 1)})
    table.rate[0] = table.rates[0, 0]
    for name in ("sjf-bsbf", "sjf-ffs"):
        dec = make_policy(name).decide(snap)
        assert dec.gpus[1] == 4 and dec.share == {1: (0, "pack")} and dec.span == {1: {0: 1}}
        occ = shadow(snap)
        trs = {tr.row: tr for tr in apply(snap, dec, occ)}
        assert trs[1].guest and trs[1].partner == 0 and len(trs[1].gpus) == 4
        assert occ.tenants(1) == ({0: 1}, 3) and occ.tenants(0) == ({1: 1}, 0)
        assert occ.busy.sum() == 4 and occ.shared.sum() == 1
    for name in ("sjf-bsbf:span=false", "sjf-ffs:span=false"):   # one host of its size: waits
        assert make_policy(name).decide(snap).gpus[1] == 0


def test_a_host_may_take_several_guests_on_different_gpus(perf):
    jobs = [_job(perf, "host", 0.0, R18, 20000, gpus=4), _job(perf, "g1", 1.0, R50, 900),
            _job(perf, "g2", 2.0, R50, 800)]
    snap, table = snapshot(jobs, homogeneous(1, 4), perf, running={0: (0, 4)})
    table.rate[0] = table.rates[0, 0]
    dec = make_policy("sjf-bsbf").decide(snap)
    assert dec.span == {1: {0: 1}, 2: {0: 1}}
    occ = shadow(snap)
    trs = {tr.row: tr for tr in apply(snap, dec, occ)}
    assert trs[0].partner == 1                      # a host's partner: its lowest guest
    assert occ.tenants(0) == ({1: 1, 2: 1}, 2) and occ.busy.sum() == 4 and occ.shared.sum() == 2
    assert make_policy("sjf-bsbf:span=false").decide(snap).gpus[[1, 2]].tolist() == [0, 0]


def test_the_mechanism_rejects_impossible_spans(perf):
    jobs = [_job(perf, "h", 0.0, R18, 20000, gpus=2), _job(perf, "a", 1.0, R50, 600, gpus=2),
            _job(perf, "b", 1.0, R50, 600, gpus=2)]
    snap, _ = snapshot(jobs, homogeneous(1, 4), perf, running={0: (0, 2)})

    def dec_with(share, span, on=(1, 2)):
        d = Decision.empty(snap)
        d.gpus[0], d.gpu_type[0] = 2, 0
        for r in on:
            d.gpus[r], d.gpu_type[r] = 2, 0
        d.share, d.span = share, span
        return d
    bad = [({1: (0, "pack"), 2: (0, "pack")}, {1: {0: 2}, 2: {0: 1}}),    # 3 of the host's 2 GPUs
           ({2: (0, "pack")}, {1: {0: 1}}),                                # span without share
           ({1: (0, "pack")}, {1: {2: 1}}),                                # share names no host
           ({1: (0, "pack"), 2: (1, "pack")}, {1: {0: 1}, 2: {1: 1}})]     # a guest as host
    for share, span in bad:
        with pytest.raises(PolicyError):
            apply(snap, dec_with(share, span), shadow(snap))
    with pytest.raises(PolicyError):                                       # 2 own + 1 + 2 > 4
        apply(snap, dec_with({1: (0, "pack")}, {1: {0: 1}}, on=(1, 2)), shadow(snap))


# -- both drivers' rates ----------------------------------------------------------------------------

def _rates_after(sim, when):
    """Run `sim` and record (rate, partner, is_guest) of every job just after each batch at the
    times in `when`."""
    seen = {}
    apply_ = sim._apply

    def spy(now, trs, *args):
        out = apply_(now, trs, *args)
        if now in when:
            t = sim.table
            seen[now] = [(float(t.rate[r]), int(t.partner[r]), bool(t.is_guest[r]))
                         for r in range(len(t))]
        return out
    sim._apply = spy
    return sim.run(), seen


def test_a_spanning_guest_runs_at_its_slowest_worker_and_owns_its_hosts_gpus_when_they_end(perf):
    """Long host H (1 GPU) and a 4-GPU guest S on H's GPU and 3 idle ones: S runs at the lower of
    its rate alone and its pair rate with H, H at its pair rate; when H ends, S owns its 4 GPUs and
    runs alone; when S ends first, H runs alone again. Each job's work adds up exactly."""
    P = "ResNet-50 (batch size 64)"                           # packed with R18: slowed
    assert 0 < perf.pack_slowdown(P, R18, "v100") < 1
    for host_s, guest_s in ((20000, 3000), (2000, 6000)):
        jobs = [_job(perf, "H", 0.0, R18, host_s), _job(perf, "S", 10.0, P, guest_s, gpus=4)]
        sim = Simulator(jobs, homogeneous(1, 4), make_policy("sjf-ffs"), perf,
                        restart=RestartCost(0.0))
        res, seen = _rates_after(sim, {10.0})
        h, s = jobs[0], jobs[1]
        alone_s = perf.rate(s, "v100", 4)
        pair_s = perf.shared_rate(s, h, "v100", 4)
        pair_h = perf.shared_rate(h, s, "v100", 1)
        assert seen[10.0][1] == (pytest.approx(min(alone_s, pair_s)), 0, True)
        assert seen[10.0][0] == (pytest.approx(pair_h), 1, False)
        t = res.table
        assert (t.state == DONE).all() and t.preemptions.sum() == 0
        # replay the work: both share until the first ends, the other then runs alone
        r_s, r_h = min(alone_s, pair_s), pair_h
        left_s, left_h = s.total_steps, h.total_steps - 10.0 * perf.rate(h, "v100", 1)
        first = min(left_s / r_s, left_h / r_h)
        if left_s / r_s < left_h / r_h:
            end_s, end_h = 10 + first, 10 + first + (left_h - first * r_h) / perf.rate(h, "v100", 1)
        else:
            end_h, end_s = 10 + first, 10 + first + (left_s - first * r_s) / alone_s
        assert t.end[1] == pytest.approx(end_s) and t.end[0] == pytest.approx(end_h)
        assert job_metrics(res).gpu_seconds.sum() == pytest.approx(timeline_gpu_seconds(res),
                                                                  rel=1e-9)


def test_a_host_of_two_guests_runs_at_its_slower_pair(perf):
    A, B = "ResNet-50 (batch size 64)", "Transformer (batch size 16)"
    jobs = [_job(perf, "H", 0.0, R18, 30000, gpus=4), _job(perf, "A", 10.0, A, 4000),
            _job(perf, "B", 10.0, B, 2000)]
    sim = Simulator(jobs, homogeneous(1, 4), make_policy("sjf-ffs"), perf, restart=RestartCost(0.0))
    res, seen = _rates_after(sim, {10.0})
    h = jobs[0]
    want = min(perf.shared_rate(h, jobs[1], "v100", 4), perf.shared_rate(h, jobs[2], "v100", 4))
    assert seen[10.0][0][0] == pytest.approx(want)
    assert seen[10.0][1][2] and seen[10.0][2][2]
    t = res.table
    assert (t.state == DONE).all()
    assert job_metrics(res).gpu_seconds.sum() == pytest.approx(timeline_gpu_seconds(res), rel=1e-9)


def test_the_runtime_rates_a_spanning_guest_as_the_simulator_does(perf):
    from quanta.core.sharing import tenancy_rate
    P = "ResNet-50 (batch size 64)"
    jobs = [_job(perf, "H", 0.0, R18, 20000), _job(perf, "S", 1.0, P, 600, gpus=4)]
    snap, table = snapshot(jobs, homogeneous(1, 4), perf, running={0: (0, 1)})
    table.rate[0] = table.rates[0, 0]
    dec = make_policy("sjf-bsbf").decide(snap)
    occ = shadow(snap)
    trs = {tr.row: tr for tr in apply(snap, dec, occ)}
    from quanta.runtime.controller import Runtime
    rt = Runtime.__new__(Runtime)              # only what _rate reads
    rt.table, rt.occ, rt.perf, rt.cluster = table, occ, perf, snap.cluster
    got = rt._rate(1, trs[1])
    assert got == pytest.approx(tenancy_rate(perf, table.specs, snap.cluster.types, occ, 1, 0, 4,
                                             1, True, "pack"))
    assert got == pytest.approx(min(perf.rate(jobs[1], "v100", 4),
                                    perf.shared_rate(jobs[1], jobs[0], "v100", 4)))


def _typed_jobs(n, seed, max_gpus, gap):
    types = drawable_types()
    rng = np.random.default_rng(seed)
    return [j.with_(job_type=types[int(rng.integers(len(types)))])
            for j in random_jobs(n, seed=seed, gap=gap, max_gpus=max_gpus)]


@pytest.mark.parametrize("name", ["sjf-bsbf", "sjf-ffs", "sjf-bsbf:accumulate=true",
                                  "sjf-bsbf:preempt=true", "sjf-ffs:preempt=true,accumulate=true"])
def test_spanning_runs_end_to_end_with_node_outages(name, perf):
    jobs = _typed_jobs(160, seed=11, max_gpus=8, gap=20.0)
    outages = [NodeOutage(1, 1500.0, 900.0), NodeOutage(0, 4000.0, 600.0)]
    runs = []
    for _ in range(2):
        sim = Simulator(jobs, homogeneous(3, 4), make_policy(name), perf, restart=RestartCost(5.0),
                        outages=outages)
        apply_ = sim._apply

        def consistent(now, trs, *args, sim=sim, apply_=apply_):
            out = apply_(now, trs, *args)
            t, occ = sim.table, sim.occ
            for r in np.flatnonzero(t.gpus > 0).tolist():
                p = int(t.partner[r])
                mates = occ.tenants(r)[0]
                assert (p >= 0) == bool(mates) and (p < 0 or p in mates)
                if t.is_guest[r]:                  # a guest's partner is a running non-guest
                    assert t.gpus[p] > 0 and not t.is_guest[p]
            return out
        sim._apply = consistent
        res = sim.run()
        assert (res.table.state == DONE).all() and not res.stalled
        assert job_metrics(res).gpu_seconds.sum() == pytest.approx(timeline_gpu_seconds(res),
                                                                  rel=1e-9)
        assert (res.busy.sum(axis=1) <= 12).all()
        runs.append(res.table.end.copy())
    assert np.array_equal(runs[0], runs[1])                 # deterministic
    assert res.shared.max() > 0


# -- the grouped search: the same choices as before, and as brute force ------------------------

def random_snapshot(seed: int, n: int = 90, ties: bool = False) -> Snapshot:
    rng = np.random.default_rng(seed)
    nodes = tuple(NodeSpec(f"{t}-{i}", t, 4) for t in ("v100", "p100", "k80")
                  for i in range(max(1, n // 16)))
    cluster = Cluster(nodes)
    types = drawable_types()[:: 2] if ties else drawable_types()
    lengths = [3000.0, 9000.0, 20000.0]
    specs = [JobSpec(f"j{i}", float(rng.integers(0, 20)), int(rng.choice([1, 1, 1, 2, 4])),
                     types[int(rng.integers(len(types)))],
                     total_steps=float(rng.choice(lengths)) if ties else float(rng.integers(200, 90000)),
                     gpu_fraction=float(rng.choice([1.0, 0.5, 0.3])))
             for i in range(n)]
    perf = TableModel()
    table = JobTable(specs, cluster, perf)
    occ = Occupancy(cluster)
    table.state[:] = PENDING
    now = 100.0
    for row in rng.permutation(n)[: n // 2].tolist():
        allowed = np.flatnonzero(table.allowed[row])
        for t in allowed[np.argsort(-table.rates[row, allowed])].tolist():
            got = occ.place(t, int(table.req[row]))
            if got is not None:
                occ.assign(row, got[0])
                table.hold(row, 0.0, "start", t, got[0], float(table.rates[row, t]), 0.0)
                break
    if not ties:
        table.prog0[:] = table.total * rng.uniform(0, 0.9, n)
    table.t0[:] = now
    table.t0[rng.permutation(n)[: n // 20]] = now + 30.0     # restoring: rate 0 now
    table.resume_at[:] = table.t0
    table.ta[:] = now
    return Snapshot(now, cluster, perf, table.view(np.arange(n), now), occ.up_capacity(),
                    occ.node_free.copy(), occ.node_up.copy())


def _old_options(pol, snap, a, b, gpu, n):
    """The selection's pair options before the grouped search (copied, for comparison only)."""
    ra = snap.perf.shared_rate(a, b, gpu, n, mode="pack")
    rb = snap.perf.shared_rate(b, a, gpu, n, mode="pack")
    if ra > 0 and rb > 0:
        yield 1, ra, rb, snap.perf.rate(a, gpu, n)
        return
    table = table_for(snap.perf, a, b) if pol.accumulate else None
    if table is None:
        return
    for k, micro in table.accumulation_steps(a.job_type)[1:]:
        fit_a = table.pack_slowdown(micro, b.job_type, gpu)
        fit_b = table.pack_slowdown(b.job_type, micro, gpu)
        if fit_a <= 0 or fit_b <= 0:
            continue
        solo = table.accumulated_rate(a, k, micro, gpu, n)
        yield k, solo * fit_a, table.rate(b, gpu, n) * fit_b, solo


def _old_partner(pol, snap, a, hosts, alone_time):
    """The host selection before the grouped search, as it was (copied, for comparison only):
    every host of a's size, in arrival order, the lowest t_con (first fit for sjf-ffs)."""
    j = snap.jobs
    types = snap.cluster.types
    best, best_k, best_t = None, 1, np.inf
    spec_a = j.specs[a]
    for h in sorted(hosts, key=lambda h: (j.submit[h], int(j.rows[h]))):
        if j.gpus[h] != j.req[a] or not j.allowed[a, j.gtype[h]]:
            continue
        if pol.fraction_cap and spec_a.gpu_fraction + j.specs[h].gpu_fraction > 1.0 + 1e-9:
            continue
        gpu = types[int(j.gtype[h])]
        for k, ra, rb, solo_a in _old_options(pol, snap, spec_a, j.specs[h], gpu, int(j.req[a])):
            if not pol.benefit:
                return h, k
            alone_a = snap.perf.rate(spec_a, gpu, int(j.req[a]))
            xi_b = snap.perf.rate(j.specs[h], gpu, int(j.req[a])) / rb
            t_seq, t_con = pair_times(float(alone_time[a]), float(alone_time[h]), alone_a / ra,
                                      xi_b, s_a=alone_a / solo_a)
            if t_con < t_seq and t_con < best_t:
                best, best_k, best_t = h, k, t_con
    return best, best_k


def _old_decide(pol, snap):
    """The old decision on a full cluster (no job starts on idle GPUs, so no same-pass host)."""
    j = snap.jobs
    share, plans = {}, {}
    hosts = np.flatnonzero(j.running).tolist()
    remaining = j.remaining
    alone_time = remaining / np.maximum(np.where(j.running, j.rate, j.best_rate), 1e-12)
    waiting = np.flatnonzero(~j.running)
    waiting = waiting[np.lexsort((j.rows[waiting], j.submit[waiting], alone_time[waiting]))]
    for a in waiting.tolist():
        h, k = _old_partner(pol, snap, a, hosts, alone_time)
        if h is None:
            continue
        share[a] = (h, "pack")
        if k > 1:
            plans[a] = k
        hosts.remove(h)
    return share, plans


POLICIES = ["sjf-bsbf", "sjf-ffs", "sjf-bsbf:accumulate=true", "sjf-bsbf:fraction_cap=true",
            "sjf-ffs:accumulate=true,fraction_cap=true"]


@pytest.mark.parametrize("name", POLICIES)
def test_one_host_search_chooses_as_the_old_selection(name):
    """span=false: for every waiting job of random snapshots, the grouped search picks the host
    (and accumulation k) the old loop over every host picked."""
    checked = 0
    for seed in range(12):
        snap = random_snapshot(seed, ties=seed % 3 == 0)
        pol = make_policy(name + (",span=false" if ":" in name else ":span=false"))
        p = _Pass(pol, snap)
        p._held()
        hosts = list(p.pool.where)
        for a in np.flatnonzero(~snap.jobs.running).tolist():
            want = _old_partner(pol, snap, a, hosts, p.alone_time)
            got = p._single(a)
            assert (got is None) == (want[0] is None)
            if got is not None:
                assert (next(iter(got[1])), got[2]) == want
                checked += 1
    assert checked > 50


@pytest.mark.parametrize("name", POLICIES)
def test_one_host_decisions_on_a_full_cluster_are_the_old_ones(name):
    for seed in range(6):
        snap = random_snapshot(100 + seed, n=160, ties=seed % 2 == 0)
        # fill every GPU: nothing starts on idle GPUs
        pol = make_policy(name + (",span=false" if ":" in name else ":span=false"))
        p = _Pass(pol, snap)
        p._held()
        if (p.free > 0).any():
            continue
        dec = pol.decide(snap)
        share, plans = _old_decide(pol, snap)
        assert dec.share == share
        assert {r: pl.ga_steps for r, pl in dec.plans.items()} == plans


def _brute_span(pol, p, a):
    """Spanning partners by brute force: for each type (fastest first), every idle GPU plus the
    beneficial hosts sorted by (t_con, submit, row) (sjf-ffs: by (submit, row)), the last one's
    GPUs as needed; the full batch first, else the k > 1 with the lowest worst t_con."""
    snap, j = p.snap, p.j
    req = int(j.req[a])
    allowed = np.flatnonzero(j.allowed[a])
    spec_a = j.specs[a]
    for t in allowed[np.argsort(-j.rates[a, allowed], kind="stable")].tolist():
        need = req - int(p.free[t])
        if p.free[t] + sum(v for h, v in p.pool.avail.items() if int(j.gtype[h]) == t) < req:
            continue
        gpu = snap.cluster.types[t]
        alone_a = snap.perf.rate(spec_a, gpu, req)
        fills = []
        for k in [1] + pol.accumulation_ks(snap, spec_a):
            cands = []
            for h, avail in p.pool.avail.items():
                if int(j.gtype[h]) != t:
                    continue
                if pol.fraction_cap and spec_a.gpu_fraction + j.specs[h].gpu_fraction > 1 + 1e-9:
                    continue
                nb = int(j.gpus[h])
                if k == 1:
                    opts = [o for o in pol._options(snap, spec_a, j.specs[h], gpu, req, nb)
                            if o[0] == 1]
                else:
                    opts = list(pol._accumulated(snap, spec_a, j.specs[h], gpu, req, nb, only=k))
                if not opts:
                    continue
                _k, ra, rb, solo = opts[0]
                e_b = p.pool.where[h][1][0] if pol.benefit else 0.0
                t_seq, t_con = pair_times(float(p.alone_time[a]), e_b, alone_a / ra,
                                          snap.perf.rate(j.specs[h], gpu, nb) / rb, alone_a / solo)
                if not pol.benefit:
                    cands.append(((float(j.submit[h]), h), h, avail))
                elif t_con < t_seq:
                    cands.append(((t_con, float(j.submit[h]), h), h, avail))
            cands.sort()
            left, parts, worst = need, {}, None
            for key, h, avail in cands:
                parts[h] = min(avail, left)
                left -= parts[h]
                worst = key[0]
                if left == 0:
                    break
            if left == 0:
                fills.append((k, parts, worst))
                if k == 1 or not pol.benefit:
                    break
        if fills:
            if fills[0][0] == 1 or not pol.benefit:
                k, parts, _w = fills[0]
            else:
                k, parts, _w = min(fills, key=lambda f: f[2])
            return t, parts, k
    return None


@pytest.mark.parametrize("name", POLICIES)
def test_spanning_search_chooses_as_brute_force(name):
    checked = 0
    for seed in range(12):
        snap = random_snapshot(200 + seed, ties=seed % 3 == 0)
        pol = make_policy(name)
        p = _Pass(pol, snap)
        p._held()
        p.free[:] = np.minimum(p.free, 1)          # a little room: idle GPUs + hosts
        for a in np.flatnonzero(~snap.jobs.running).tolist():
            if (snap.jobs.allowed[a] & (p.free >= snap.jobs.req[a])).any():
                continue
            want = _brute_span(pol, p, a)
            got = p._spanning(a)
            assert got == want
            checked += got is not None
    assert checked > 30


def test_a_pass_places_spanning_guests_on_hosts_with_gpus_left():
    """Through a whole decision: hosts give at most their GPUs, each GPU holds at most two jobs,
    and the mechanism places every decision of random snapshots."""
    for seed in range(8):
        snap = random_snapshot(300 + seed, n=120)
        for name in ("sjf-bsbf", "sjf-ffs", "sjf-bsbf:preempt=true", "sjf-ffs:preempt=true",
                     "sjf-bsbf:preempt=true,span=false", "sjf-bsbf:accumulate=true,preempt=true"):
            dec = make_policy(name).decide(snap)
            used: dict[int, int] = {}
            for parts in dec.span.values():
                for h, c in parts.items():
                    used[h] = used.get(h, 0) + c
            assert all(used[h] <= dec.gpus[h] for h in used)
            occ = shadow(snap)
            apply(snap, dec, occ)
            assert (occ.busy <= snap.capacity).all()
            assert all(occ.held.get(int(snap.jobs.rows[g])) is not None for g in dec.share)


@pytest.mark.parametrize("name", ["sjf-bsbf", "sjf-bsbf:span=false"])
def test_a_guest_whose_host_ended_without_a_repair_keeps_its_gpus(name, perf):
    """The runtime frees an ended job's GPUs (its guest owns them then) without touching the
    guest's partner column: the next decision keeps the guest running there, no restart."""
    from quanta.core.loop import DecisionLoop
    jobs = [_job(perf, "H", 0.0, R18, 20000), _job(perf, "G", 1.0, R50, 9000),
            _job(perf, "W", 60.0, R18, 30000)]
    cluster = homogeneous(1, 1)
    table = JobTable(jobs, cluster, perf)
    occ = Occupancy(cluster)
    loop = DecisionLoop(make_policy(name), table, occ)
    table.state[:] = PENDING
    for now, active in ((0.0, [0]), (1.0, [0, 1])):
        trs = loop.step(now, np.array(active))
        rates = [perf.shared_rate(jobs[tr.row], jobs[tr.partner], "v100", 1) if tr.partner >= 0
                 else table.rates[tr.row, 0] for tr in trs]
        table.apply_transitions(now, np.array([tr.row for tr in trs]),
                                np.array([{"start": 0, "reshare": 4}[tr.kind.value] for tr in trs]),
                                np.array([tr.gpu_type for tr in trs]), [tr.gpus for tr in trs],
                                np.array(rates), np.zeros(len(trs)),
                                np.array([tr.partner for tr in trs]),
                                np.array([1 if tr.mode else 0 for tr in trs], dtype=np.int8),
                                np.array([tr.guest for tr in trs]))
    assert table.is_guest[1] and table.partner[1] == 0
    occ.release(0)                                  # H ends, as the runtime records it
    table.finish(0, 50.0)
    assert loop.step(50.0, np.array([1])) == []     # G keeps its GPU (stale flags are harmless)
    trs = {tr.row: tr for tr in loop.step(60.0, np.array([1, 2]))}   # W may share with G
    assert trs[1].kind.value == "reshare" and not trs[1].guest and trs[1].partner == 2
    assert trs[2].kind.value == "start" and trs[2].guest and trs[2].partner == 1
    assert occ.held[1].tolist() == [0] == occ.held[2].tolist()
