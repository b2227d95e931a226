"""SJF-BSBF shares a GPU only when that lowers the pair's average JCT; SJF-FFS whenever it fits."""

import numpy as np
import pytest

from quanta.core.jobtable import DONE
from quanta.model import JobSpec
from quanta.policies import make_policy
from quanta.policies.sjf_bsbf import pair_times
from quanta.report.metrics import job_metrics
from quanta.sim import Simulator
from quanta.sim.engine import RestartCost

from conftest import homogeneous, random_jobs
from test_engine import timeline_gpu_seconds
from test_policies_baselines import snapshot

GOOD = ("ResNet-50 (batch size 16)", "ResNet-18 (batch size 16)")        # packed: no slowdown
BAD = ("Recommendation (batch size 512)", "ResNet-50 (batch size 16)")   # packed: 0.38 together
NOFIT = ("ResNet-50 (batch size 64)", "ResNet-50 (batch size 128)")      # do not fit together


def test_pair_times_match_a_direct_simulation_of_the_pair():
    for e_a, e_b, xi_a, xi_b in [(100.0, 40.0, 1.5, 1.2), (30.0, 200.0, 2.0, 1.1), (50, 50, 1.0, 1.0)]:
        t_seq, t_con = pair_times(e_a, e_b, xi_a, xi_b)
        assert t_seq == pytest.approx((e_b + (e_b + e_a)) / 2)
        # packed: both progress at 1/xi until the first finishes, then the other runs alone
        first = min(xi_a * e_a, xi_b * e_b)
        if xi_a * e_a >= xi_b * e_b:
            end_a, end_b = first + e_a - first / xi_a, first
        else:
            end_a, end_b = first, first + e_b - first / xi_b
        assert t_con == pytest.approx((end_a + end_b) / 2)


def _snap(pair, perf, steps_a=None, steps_b=None):
    host, waiting = pair[1], pair[0]
    rate = perf.table.alone
    jobs = [JobSpec("b", 0.0, 1, host, total_steps=(steps_b or 3600) * rate[(host, 1, "v100")]),
            JobSpec("a", 1.0, 1, waiting, total_steps=(steps_a or 3600) * rate[(waiting, 1, "v100")])]
    snap, _ = snapshot(jobs, homogeneous(1, 1), perf, running={0: (0, 1)})
    return snap


@pytest.mark.parametrize("pair, bsbf_shares", [(GOOD, True), (BAD, False), (NOFIT, False)])
def test_bsbf_shares_only_when_it_helps_ffs_whenever_it_fits(pair, bsbf_shares, perf):
    snap = _snap(pair, perf)
    bsbf = make_policy("sjf-bsbf").decide(snap)
    ffs = make_policy("sjf-ffs").decide(snap)
    assert (1 in bsbf.share) == bsbf_shares
    assert (1 in ffs.share) == (pair != NOFIT)
    assert bsbf.gpus[0] == 1 and ffs.gpus[0] == 1          # never preempts the running job


def test_bsbf_runs_end_to_end_and_accounts_shared_gpus(perf):
    jobs = random_jobs(120, seed=4, gap=30.0, max_gpus=2)
    from quanta.workloads.catalog import drawable_types
    types = drawable_types()
    rng = np.random.default_rng(4)
    jobs = [j.with_(job_type=types[int(rng.integers(len(types)))]) for j in jobs]
    for name in ("sjf-bsbf", "sjf-ffs"):
        res = Simulator(jobs, homogeneous(2, 4), make_policy(name), perf, restart=RestartCost(5.0)).run()
        assert (res.table.state == DONE).all() and res.table.preemptions.sum() == 0
        assert job_metrics(res).gpu_seconds.sum() == pytest.approx(timeline_gpu_seconds(res), rel=1e-9)
