"""Every registered policy, fed random legal snapshots, returns a decision the mechanism accepts.

A legal snapshot may hold jobs with no work left (progress = total, not yet reaped), a cluster with
no free GPU, nodes that are down, jobs that fit no GPU type, and thousands of jobs. A policy never
raises on one: the drivers call it on whatever the cluster holds.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quanta.core.decision import Decision
from quanta.core.jobtable import PENDING, JobTable
from quanta.core.mechanism import apply, shadow
from quanta.core.snapshot import Snapshot
from quanta.core.synthetic import start_on_fastest
from quanta.model import Cluster, JobSpec, NodeSpec
from quanta.perf.table import TableModel
from quanta.placement import Occupancy
from quanta.policies import POLICIES, make_policy
from quanta.workloads.catalog import drawable_types

PERF = TableModel()
TYPES = drawable_types()
NAMES = sorted(POLICIES)


def random_snapshot(seed: int, n_jobs: int, n_nodes: int, gpu_types: int, done_frac: float,
                    down: int, fill: bool) -> Snapshot:
    """`n_jobs` jobs on `n_nodes` nodes of up to `gpu_types` types (2-8 GPUs each); `down` nodes
    are down; about half the jobs run (all the GPUs they fit on when `fill`); a `done_frac`
    share of the jobs has no work left."""
    rng = np.random.default_rng(seed)
    kinds = ("v100", "p100", "k80")[:gpu_types]
    nodes = tuple(NodeSpec(f"n{i}", kinds[i % len(kinds)], int(rng.choice([2, 4, 8])))
                  for i in range(n_nodes))
    cluster = Cluster(nodes)
    specs = [JobSpec(f"j{i}", float(i), int(rng.choice([1, 1, 2, 4, 8, 16])),
                     TYPES[int(rng.integers(len(TYPES)))],
                     total_steps=float(rng.integers(1, 50_000)),
                     deadline=float(rng.uniform(1e3, 1e5)) if rng.random() < 0.2 else 0.0)
             for i in range(n_jobs)]
    table = JobTable(specs, cluster, PERF)
    occ = Occupancy(cluster)
    for node in rng.permutation(n_nodes)[:down].tolist():
        occ.node_down(node)
    table.state[:] = PENDING
    now = float(n_jobs) + 600.0
    start = rng.permutation(n_jobs) if fill else rng.permutation(n_jobs)[: n_jobs // 2]
    start_on_fastest(table, occ, start.tolist())
    table.att0[:] = rng.uniform(0, 20_000, n_jobs)
    table.run0[:] = table.att0
    done = rng.random(n_jobs) < done_frac
    table.prog0[:] = np.where(done, table.total, table.total * rng.uniform(0, 0.9, n_jobs))
    table.t0[:] = now
    table.ta[:] = now
    rows = np.arange(n_jobs)
    return Snapshot(now, cluster, PERF, table.view(rows, now), occ.up_capacity(),
                    occ.node_free.copy(), occ.node_up.copy(), resources=occ.up_resources(),
                    network=occ.up_network())


def check(name: str, snap: Snapshot) -> None:
    dec = make_policy(name).decide(snap)
    assert isinstance(dec, Decision)
    n = len(snap.jobs)
    assert dec.gpus.shape == (n,) and dec.gpu_type.shape == (n,)
    assert np.all(dec.gpus >= 0)
    apply(snap, dec, shadow(snap))      # the mechanism accepts it (raises PolicyError otherwise)


snapshots = st.builds(
    random_snapshot,
    seed=st.integers(0, 2**16),
    n_jobs=st.integers(0, 40),
    n_nodes=st.integers(1, 6),
    gpu_types=st.integers(1, 3),
    done_frac=st.sampled_from([0.0, 0.3, 1.0]),
    down=st.integers(0, 2),
    fill=st.booleans(),
)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(snap=snapshots)
def test_policy_never_crashes_on_a_legal_snapshot(name, snap):
    check(name, snap)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("case", ["all_done", "no_free_gpu", "every_node_down_but_one"])
def test_policy_on_edge_snapshots(name, case):
    if case == "all_done":
        snap = random_snapshot(1, 12, 3, 2, 1.0, 0, False)
    elif case == "no_free_gpu":
        snap = random_snapshot(2, 60, 2, 1, 0.3, 0, True)
        assert snap.node_free.sum() == 0 or len(snap.jobs) == 0 or snap.jobs.running.any()
    else:
        snap = random_snapshot(3, 20, 4, 2, 0.3, 3, False)
    check(name, snap)


@pytest.mark.parametrize("name", NAMES)
def test_policy_with_thousands_of_jobs(name):
    check(name, random_snapshot(4, 2_000, 64, 3, 0.05, 1, False))
