"""The Rubick plan model (quanta.perf.plan) on the bundled Rubick artifact data."""

import csv
import itertools

import numpy as np
import pytest

from quanta.model.job import JobSpec
from quanta.paths import TRACES_DIR
from quanta.perf.base import Provenance
from quanta.perf.plan import (
    RUBICK_DIR,
    ExecutionPlan,
    Resources,
    best_plan,
    feasible,
    marginal_slope,
    memory_gb,
    parse_plan,
    read_csv,
    sensitivity_curve,
)
from quanta.perf.plan_perf import PlanPerf
from quanta.perf.plan_fit import (
    FAMILIES,
    fit_plan_model,
    fitted_models,
    model_specs,
    placement_samples,
    predict_ms,
    profile_samples,
    sample_3d,
    validation_samples,
)


@pytest.fixture(scope="module")
def models():
    return fitted_models()


def _errors(samples, models):
    pred = predict_ms(samples, models)
    true = np.array([s.iter_ms for s in samples])
    return np.abs(pred - true) / true


def test_heldout_bert_single_node_within_tolerance(models):
    # bert is fitted on its 7 profile runs; the 72 placement rows are held out. Single node:
    # mean error under 8%, none over 20% (16 rows); over several nodes: mean under 15%.
    rows = placement_samples("bert")
    single = [s for s in rows if len(s.nodes) == 1]
    err = _errors(single, models)
    assert len(single) == 16
    assert err.mean() < 0.08 and err.max() < 0.20
    assert _errors([s for s in rows if len(s.nodes) > 1], models).mean() < 0.15


def test_heldout_3d_llama7_within_tolerance(models):
    # llama7's 3D parameters see a quarter of its 3D rows; the other three quarters: mean < 20%.
    fit, held = sample_3d(placement_samples("llama7"))
    assert len(held) >= 3 * len(fit) - 3
    assert _errors(held, models).mean() < 0.20


def test_validation_points_overall(models):
    err = _errors(validation_samples(), models)
    assert len(err) == 99 and np.all(np.isfinite(err))
    # issue-7 aim: mean within 10% (9.9% with the NIC-share, offload-recompute overlap, pooled
    # k_swap and 3D-breakdown changes; 10.6% before); the median point within 4%
    assert err.mean() < 0.10
    assert np.median(err) < 0.04


def test_nic_share_of_concurrent_groups():
    from quanta.perf.plan import _nic_share
    # pure DP over two full nodes: one group holds every GPU of each node -> the whole NIC
    assert _nic_share((8, 8), 16, 1, 16) == 1.0
    # 3D 1-8-8 over 8 nodes: 8 DP groups (stride 8), each with 1 of a node's 8 GPUs -> 1/8
    assert _nic_share((8,) * 8, 8, 8, 64) == pytest.approx(1 / 8)
    # PP groups of 2 with stride 8 over (8, 8): 1 of 8 GPUs per node
    assert _nic_share((8, 8), 2, 8, 16) == pytest.approx(1 / 8)
    # groups inside one node do not use the NIC
    assert _nic_share((8, 8), 8, 1, 16) == 1.0


def test_offload_recompute_overlaps_host_copy(models):
    # with checkpointing the recompute overlaps the offload copy: offload+gc costs at most one
    # extra forward over offload, and no less than offload alone
    from quanta.perf.plan import Resources
    for fam in ("bert", "t5", "gpt2"):
        m = models[fam]
        for g in (1, 2, 4, 8):
            a, b = m.iteration_ms([parse_plan("zero-offload", g), parse_plan("zero-offload+gc", g)],
                                  Resources(g))
            assert a <= b <= a + float(m.spec.forward_ms(g)) + 1e-6


def test_offload_fixed_cost_pooled_where_unidentified(models):
    # gpt2's profile has ZeRO-Offload at one GPU count only: its k_swap per Mi-param is the median
    # of the families whose profiles identify it (vit, roberta, bert, t5)
    from quanta.perf.plan_fit import offload_identified
    ident = [f for f in FAMILIES if profile_samples(f) and offload_identified(profile_samples(f))]
    assert set(ident) == {"vit", "roberta", "bert", "t5"}
    per = np.median([models[f].params[6] / models[f].spec.p_mib for f in ident])
    assert models["gpt2"].params[6] / models["gpt2"].spec.p_mib == pytest.approx(per)


def _plan_strings():
    out = set()
    with open(TRACES_DIR / "rubick_workload-base.csv", newline="") as fh:
        out |= {(r["exec_plan"], int(r["num_gpus"])) for r in csv.DictReader(fh)}
    for path in sorted((RUBICK_DIR / "placements").glob("*.csv")):
        out |= {(r["exec_plan"], sum(int(c) for c in r["placement"])) for r in read_csv(path)}
    out |= {(r["exec_plan"], int(r["num_gpus"])) for r in read_csv(RUBICK_DIR / "plan_placements.csv")}
    return sorted(out)


@pytest.mark.parametrize("text,gpus", _plan_strings())
def test_parse_every_plan_string(text, gpus):
    plan = parse_plan(text, gpus)
    assert plan.label() == text
    assert parse_plan(plan.label(), gpus) == plan
    if len(text) == 3 and text.isdigit():
        assert (plan.pp, plan.tp, plan.dp) == tuple(int(c) for c in text)
    else:
        assert plan.num_gpus == gpus


def test_parse_plan_fields():
    assert parse_plan("zero-offload+gc", 4) == ExecutionPlan(dp=4, zero=2, offload=True, ga_steps=0,
                                                             checkpointing=True)
    assert parse_plan("zero-dp", 8).zero == 2 and parse_plan("gc", 2).checkpointing
    p = parse_plan("344", 48)
    assert (p.pp, p.tp, p.dp, p.num_gpus) == (3, 4, 4, 48)
    with pytest.raises(ValueError):
        parse_plan("warp-drive", 2)


def test_memory_rejects_infeasible_accepts_profiled():
    specs = model_specs()
    big = specs["llama30"]
    assert big.params > 3e10                          # the real LLaMA-30B, not the 7B copy
    assert not feasible(big, parse_plan("ga", 1), Resources(1))
    assert not feasible(specs["llama7"], parse_plan("ga", 1), Resources(1))
    assert memory_gb(big, parse_plan("ga", 1))[0] > 80
    for fam in FAMILIES:
        for s in placement_samples(fam):
            assert feasible(specs[fam], s.plan, Resources(sum(s.nodes), s.nodes)), (fam, s)
    for s in validation_samples():
        assert feasible(specs[s.model], s.plan, Resources(sum(s.nodes), s.nodes)), s


def test_sensitivity_curve_monotone(models):
    for fam in ("bert", "t5", "llama7"):
        curve = sensitivity_curve(models[fam], range(1, 17), range(1, 5))
        R = curve.throughput
        assert np.all(np.diff(R, axis=0) >= -1e-9) and np.all(np.diff(R, axis=1) >= -1e-9)
        assert R[-1, -1] > 0
        # a reused entry points back to the smaller allocation it came from
        g, c = curve.alloc[-1][-1]
        assert g <= 16 and c <= 4
    curve = sensitivity_curve(models["bert"], [1, 2, 4, 8])
    slope = marginal_slope(curve, 2, 2, curve.at(2))
    assert slope == pytest.approx((curve.at(4) - curve.at(2)) / (curve.at(2) * 2))


def test_offload_grows_with_cpu_threads(models):
    m = models["bert"]
    plan = parse_plan("zero-offload", 4)
    t = [m.iteration_ms([plan], Resources(4, cpu_threads=4 * c))[0] for c in (1, 2, 4, 8, 16)]
    assert all(a > b for a, b in itertools.pairwise(t))
    plain = parse_plan("zero-dp", 4)
    t0 = [m.iteration_ms([plain], Resources(4, cpu_threads=4 * c))[0] for c in (1, 16)]
    assert t0[0] == t0[1]


def test_best_plan(models):
    plan, thr = best_plan(models["llama30"], Resources(1))
    assert plan is None and thr == 0.0
    plan, thr = best_plan(models["llama30"], Resources(64))
    assert plan is not None and plan.num_gpus == 64 and thr > 0
    plan, thr = best_plan(models["bert"], Resources(8))
    assert plan is not None and not plan.is_3d and thr > 0


class _Stub:
    def rate(self, job, gpu_type, num_gpus, num_nodes=1, consolidated=None):
        return 42.0

    def shared_rate(self, job, other, gpu_type, num_gpus, num_nodes=1, consolidated=None,
                    mode="pack"):
        return 7.0

    def provenance(self, job, gpu_type):
        return Provenance.ESTIMATED


def test_planperf_rates_and_delegation(models):
    perf = PlanPerf(models, fallback=_Stub())
    job = JobSpec("j", 0.0, 8, "bert", plan="ga", cpus=64)
    r8 = perf.rate(job, "a800", 8)
    # bert DP+GA on 8 GPUs measured 157 ms per iteration (validation table)
    assert 1000 / r8 == pytest.approx(157, rel=0.10)
    assert perf.provenance(job, "a800") == Provenance.FITTED
    assert perf.shared_rate(job, job, "a800", 8) == 0.0
    assert perf.rate(job, "a800", 16, 2) > 0
    other = JobSpec("k", 0.0, 2, "resnet50")
    assert perf.rate(other, "v100", 2) == 42.0
    assert perf.shared_rate(other, other, "v100", 2) == 7.0
    assert perf.provenance(other, "v100") == Provenance.ESTIMATED
    M = perf.rate_matrix([job, other], ["a800"])
    assert M.shape == (2, 1) and M[1, 0] == 42.0
    big = JobSpec("l", 0.0, 48, "llama30", plan="344", cpus=384)
    assert 1000 / perf.rate(big, "a800", 48, 6) == pytest.approx(2233, rel=0.30)


def test_planperf_default_fallback_is_table_model(models):
    from quanta.perf.table import TableModel
    perf = PlanPerf(models)
    assert isinstance(perf.fallback, TableModel)
    job = JobSpec("x", 0.0, 1, "", duration_s=100.0)
    assert perf.rate(job, "v100", 1) == TableModel().rate(job, "v100", 1)


def test_fit_is_deterministic():
    samples = profile_samples("bert")
    a = fit_plan_model(samples)
    b = fit_plan_model(samples)
    assert np.array_equal(a, b)
    assert a[0] >= 1.0 and a[1] >= 1.0


def test_pipeline_traffic_ours_or_the_artifacts():
    """A 3D plan's pipeline term: 4 s seqhid/tp (pp - 1) / B (ours), or the artifact's
    16 s seqhid/tp * pp / 20 GB/s (quanta.perf.plan.PP_TRAFFIC); the TP term is the same."""
    import quanta.perf.plan as pm
    spec = model_specs()["t5"]
    plan = parse_plan("242", 16)             # pp 2, tp 4, dp 2 on two 8-GPU nodes
    pp, tp, dp = plan.pp, plan.tp, plan.dp
    s = spec.batch / dp
    ours = pm.features(spec, plan, (8, 8), 1.0)[4]
    try:
        pm.PP_TRAFFIC = "artifact"
        pm.features.cache_clear()
        theirs = pm.features(spec, plan, (8, 8), 1.0)[4]
    finally:
        pm.PP_TRAFFIC = "boundaries"
        pm.features.cache_clear()
    t_pp_ours = 4.0 * s * spec.seqhid / tp * (pp - 1) / pm.MIB
    t_pp_theirs = 16.0 * s * spec.seqhid / tp / 20.0 / pm.MIB * pp
    # same TP term on both sides: the difference is the PP terms' difference
    assert theirs - ours == pytest.approx(t_pp_theirs - t_pp_ours / _pp_bandwidth(plan), rel=1e-9)
    assert pm.features(spec, plan, (8, 8), 1.0)[4] == ours


def _pp_bandwidth(plan):
    """The PP group's bandwidth of plan 242 on (8, 8): its stages sit on different nodes."""
    import quanta.perf.plan as pm
    spec = model_specs()["t5"]
    bnet = min(spec.b_nvlink, pm._net_bw((8, 8), pm.NIC_GBPS))
    return bnet * pm._nic_share((8, 8), plan.pp, plan.tp * plan.dp, plan.num_gpus)
