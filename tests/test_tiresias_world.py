"""`--world tiresias-sim`: each setting of Tiresias' simulator's world, and `quanta reproduce
tiresias` against every recorded run of the authors' simulator (quanta/data/reference/tiresias/)."""

import pytest

from quanta.model import Cluster, JobSpec, NodeSpec
from quanta.perf.catalog_model import CatalogModel
from quanta.policies import make_policy
from quanta.sim import Simulator
from quanta.worlds import get_world


def test_settings_read_from_the_authors_simulator():
    w = get_world("tiresias-sim")
    las = make_policy(w.policy_spec("tiresias-las"))
    git = make_policy(w.policy_spec("tiresias-gittins"))
    assert las.pack_limit == 0 and las.authors_timing and not git.pack_limit
    assert git.authors_index and git.authors_timing
    assert make_policy(w.policy_spec("tiresias-las:promote_knob=2")).promote_knob == 2
    job = JobSpec("a", 0.0, 8, "vgg19", duration_s=100.0)
    assert w.restart(30.0)(job) == 0.0 and w.restart_fixed
    perf = w.perf(CatalogModel())
    # a spread placement runs at the consolidated rate (no placement slowdown)
    assert perf.rate(job, "v100", 8, num_nodes=2) == CatalogModel().rate(job, "v100", 8)
    assert CatalogModel().rate(job, "v100", 8, num_nodes=2) < CatalogModel().rate(job, "v100", 8)


@pytest.mark.parametrize("decide", [False, True])
def test_the_arrival_of_a_job_that_can_never_run_is_a_decision_only_where_asked(decide):
    jobs = [JobSpec("a", 0.0, 1, "vgg19", total_steps=1e4),
            JobSpec("big", 10.0, 8, "vgg19", total_steps=1e4)]
    c = Cluster((NodeSpec("n", "v100", 4),))
    res = Simulator(jobs, c, make_policy("fifo"), CatalogModel(),
                    impossible_arrivals_decide=decide).run()
    assert res.decisions == (2 if decide else 1)
    assert res.table.state[1] != res.table.state[0]       # big never runs either way


def test_reproduce_tiresias_every_recorded_run_job_by_job():
    """Every recorded 2D-LAS / 2D-Gittins run (60_job.csv on 4-128 GPUs, its x10 variant with
    promotion knobs, tf_job.csv; count / yarn / random schemes): the replay gives the authors'
    JCT for every job (issue target: average within 5%). Quanta's own world differs (restarts,
    placement): that is measured, not asserted."""
    from quanta.reproduce import reproduce
    rows = reproduce("tiresias")
    assert len(rows) == 40          # (docs/fidelity.md: 40 of the 58 recorded runs)
    for r in rows:
        rep = r["replay"]
        assert rep["matched"] == r["jobs"], r["workload"]
        assert rep["avg_jct_matched_s"] == pytest.approx(r["ref_avg_jct_s"], rel=1e-9), \
            (r["workload"], r["policy"])
        assert rep["median_abs_err"] == 0.0
