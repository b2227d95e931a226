"""`gavel-las-packed:programme=pairs`: Gavel's max_min_fairness_packed (stanford-futuredata/gavel
@ c4fa400): the job-pair programme (policies/max_min_fairness.py:274-358) and pair entries in the
per-type priority lists (scheduler.py:766-855, 2197-2251); bench/anchors/gavel.md P8, row 23."""

import numpy as np
import pytest

from quanta.errors import QuantaError
from quanta.model import Cluster, JobSpec, NodeSpec
from quanta.perf.catalog_model import CatalogModel
from quanta.policies import make_policy
from quanta.policies.gavel.rounds import pair_round
from quanta.policies.gavel.space_sharing import pair_max_min
from quanta.sim import Simulator
from quanta.worlds import get_world

PACK = ["ResNet-50 (batch size 16)", "ResNet-18 (batch size 16)"]   # measured: no slowdown


@pytest.mark.parametrize("interior", [False, True])
def test_two_jobs_that_pack_perfectly_share_a_gpu_and_the_third_runs_alone(interior):
    # 3 one-GPU jobs, T = 1, one GPU. Jobs 0 and 1 pack without slowdown (rates 1, 1); job 2
    # packs with no one. With s_i alone and p the pair: tau_0 = s_0 + p, tau_1 = s_1 + p,
    # tau_2 = s_2, s_0 + s_1 + s_2 + p <= 1. Max-min: p = 1/2, s_2 = 1/2, s_0 = s_1 = 0, level
    # 1/2 (without the pair: 1/3). The optimum is unique, so the vertex and the interior agree.
    T = np.ones((3, 1))
    z = np.ones(3, dtype=np.int64)
    pairs = np.array([[0, 1], [0, 2], [1, 2]])
    ra = np.array([[1.0], [0.0], [0.0]])
    A = pair_max_min(T, z, np.array([1]), np.ones(3), ra, ra.copy(), pairs, interior=interior)
    assert A.level == pytest.approx(0.5, abs=1e-5)
    np.testing.assert_allclose(A.single[:, 0], [0.0, 0.0, 0.5], atol=1e-5)
    np.testing.assert_allclose(A.pair[:, 0], [0.5, 0.0, 0.0], atol=1e-5)
    none = pair_max_min(T, z, np.array([1]), np.ones(3), ra * 0, ra * 0, pairs)
    assert none.level == pytest.approx(1 / 3, abs=1e-6)


def test_a_pair_that_slows_both_down_is_mixed_with_time_alone():
    # 2 jobs, 1 GPU; together they run at 0.8 and 0.5 of their speed alone (1.3 > 1: packing
    # helps). Max-min: job 1 alone a, the pair 1 - a: 0.8 (1 - a) = a + 0.5 (1 - a), so
    # a = 0.3 / 1.3 and the level is 0.8 / 1.3 (without packing: 1/2).
    A = pair_max_min(np.ones((2, 1)), np.ones(2, dtype=np.int64), np.array([1]), np.ones(2),
                     np.array([[0.8]]), np.array([[0.5]]), np.array([[0, 1]]))
    assert A.level == pytest.approx(0.8 / 1.3, abs=1e-5)
    assert A.single[1, 0] == pytest.approx(0.3 / 1.3, abs=1e-5)
    assert A.pair[0, 0] == pytest.approx(1 / 1.3, abs=1e-5)
    assert A.single[0, 0] == pytest.approx(0.0, abs=1e-6)


def test_pair_entries_take_one_gpu_for_both_jobs_and_unallocated_entries_hold_theirs():
    # one type, 2 GPUs, jobs 0-3 (one GPU each). Entries (Gavel's list for the type): the pair
    # (0, 1) first, then job 0 alone (skipped: placed with the pair), then the pair (2, 3),
    # outside the allocation: it takes the second GPU, which idles (scheduler.py:936-938), so
    # job 2's own entry finds no GPU.
    a = np.array([0, 0, 2, 2])
    b = np.array([1, -1, 3, -1])
    k = np.zeros(4, dtype=np.int64)
    prio = np.array([3.0, 2.0, 0.0, 0.0])
    deficit = np.array([0.0, 0.0, 180.0, 0.0])       # a pair created after the last reset
    x = np.array([0.5, 0.1, 0.0, 0.2])
    gpus, gtype, together = pair_round(a, b, k, prio, deficit, x, np.arange(4),
                                       np.array([True, True, False, True]),
                                       np.ones(4, dtype=np.int64), np.array([2]), np.array([0]))
    assert together == [(0, 1)]
    assert gpus.tolist() == [1, 1, 0, 0] and gtype.tolist() == [0, 0, -1, -1]


def test_programme_pairs_is_pinned_in_gavel_sim_only():
    assert make_policy("gavel-las-packed").programme == "classes"      # Quanta's own world
    w = get_world("gavel-sim")
    assert make_policy(w.policy_spec("gavel-las-packed", 0)).programme == "pairs"
    with pytest.raises(QuantaError):
        make_policy("gavel-las-packed:programme=triples")


def test_a_pair_runs_together_end_to_end_under_gavel_sim():
    # two one-GPU jobs that pack without slowdown and one GPU: Gavel's programme gives the pair
    # the whole GPU, so both run together from the first round (arrival at 0) and finish an
    # hour of their own steps later (in whole steps a round); one at a time would take two
    w = get_world("gavel-sim")
    base = CatalogModel()
    perf = w.perf(base)
    hour = [base.rate(JobSpec("x", 0.0, 1, kind), "v100", 1) * 3600 for kind in PACK]
    jobs = [JobSpec(f"p{i}", 0.0, 1, kind, total_steps=hour[i]) for i, kind in enumerate(PACK)]
    c = Cluster((NodeSpec("v1000", "v100", 1),))
    res = Simulator(jobs, c, make_policy(w.policy_spec("gavel-las-packed", 0)), perf,
                    restart=w.restart(30.0), **w.engine_options()).run()
    assert res.shared.max() == 1               # the one GPU holds both jobs, every round
    assert (res.table.state == 3).all()
    assert list(res.table.first_start) == [0.0, 0.0]
    assert max(res.table.end) < 3600.0 * 1.02


def test_programme_pairs_refuses_a_trace_too_big_for_its_dense_pair_state(monkeypatch):
    import quanta.policies.gavel.pairs as pairs
    monkeypatch.setattr(pairs, "PAIR_ROWS_MAX", 1)
    w = get_world("gavel-sim")
    jobs = [JobSpec(f"p{i}", 0.0, 1, kind, total_steps=1000.0) for i, kind in enumerate(PACK)]
    c = Cluster((NodeSpec("v1000", "v100", 1),))
    sim = Simulator(jobs, c, make_policy(w.policy_spec("gavel-las-packed", 0)), w.perf(CatalogModel()),
                    restart=w.restart(30.0), **w.engine_options())
    with pytest.raises(QuantaError, match="at most 1 jobs"):
        sim.run()


def test_a_gang_gets_no_share_of_a_type_too_small_for_it(tmp_path):
    """Two 3-GPU jobs where only P100 has 3 GPUs: once one finished, the other's allocation was
    2/3 A100 and 1/3 V100 (two GPUs each), which packed rounds (no backfill) never realise: it
    waited on an idle cluster and the run stopped as stalled."""
    from quanta.runner import SimulationRequest, run_simulations
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time_s,num_gpus,duration_s\nj4,0,3,10663.7\nj5,0,3,3600\n")
    req = SimulationRequest(trace=str(trace), cluster="a100:2x1,p100:3x1,v100:1x2,k80:2x1",
                            policies=["gavel-las-packed"], seed=224898, out=None, plots=False)
    rows, _header = run_simulations(req)
    assert rows[0]["finished"] == 2
