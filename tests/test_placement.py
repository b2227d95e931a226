import numpy as np
import pytest

from quanta.core.decision import Decision
from quanta.core.mechanism import Kind, apply
from quanta.placement import Occupancy
from quanta.policies.base import PolicyError

from conftest import homogeneous
from test_policies_baselines import jobs, snapshot


def test_gang_consolidates_on_best_fit_node():
    c = homogeneous(3, 8)
    occ = Occupancy(c)
    occ.assign(100, occ.place(0, 6)[0])          # node 0 has 2 free
    occ.assign(101, occ.place(0, 3)[0])          # best fit for 3: an empty node (node 1) -> 5 free
    g = occ.place(0, 2)[0]                       # best fit: node 0 (2 free), not node 1 or 2
    assert set(c.gpu_node[g]) == {0}
    g = occ.place(0, 8)[0]                       # whole empty node 2
    assert set(c.gpu_node[g]) == {2}
    assert occ.consolidated(0, g)


def test_gang_spreads_over_fewest_nodes_when_fragmented():
    c = homogeneous(4, 4)
    occ = Occupancy(c)
    occ.assign(1, np.array([0, 1, 2]))          # node 0: 1 free
    occ.assign(2, np.array([4, 5]))             # node 1: 2 free
    g = occ.place(0, 6)[0]                 # a whole empty node + the tightest node for the other 2
    assert occ.nodes_of(g) == 2 and occ.consolidated(0, g)   # 2 nodes is the least possible
    assert set(c.gpu_node[g]) == {1, 2}
    occ.assign(3, g)
    g = occ.place(0, 4)[0]                 # 1 free on node 0 + 4 on node 3: fits on node 3 alone
    assert set(c.gpu_node[g]) == {3}
    occ.assign(4, np.array([12, 13, 14]))
    g = occ.place(0, 2)[0]                 # only 1 + 1 free on nodes 0 and 3: spread
    assert occ.nodes_of(g) == 2 and not occ.consolidated(0, g)
    assert occ.place(0, 100) is None


def test_mechanism_keeps_unchanged_jobs_and_emits_minimal_transitions(perf):
    c = homogeneous(2, 4)
    specs = jobs(4, 2, 2)
    snap, table = snapshot(specs, c, perf, running={0: (0, 4), 1: (0, 2)})
    occ = Occupancy(c)
    for r, g in table.placement.items():
        occ.assign(r, g)
    dec = Decision(np.array([4, 0, 2]), np.array([0, -1, 0]))
    trs = apply(snap, dec, occ)
    kinds = sorted((t.row, t.kind) for t in trs)
    assert kinds == [(1, Kind.PREEMPT), (2, Kind.START)]
    assert np.array_equal(occ.held[0], table.placement[0])   # lease extension: same GPUs


def test_mechanism_rejects_overcommit(perf):
    c = homogeneous(1, 4)
    snap, _ = snapshot(jobs(4, 2), c, perf)
    with pytest.raises(PolicyError, match="asks for 6"):
        apply(snap, Decision(np.array([4, 2]), np.array([0, 0])), Occupancy(c))


def test_place_reports_the_nodes_it_spans():
    c = homogeneous(3, 4)
    occ = Occupancy(c)
    occ.assign(1, np.array([0, 1, 2, 4, 5]))      # node 0: 1 free, node 1: 2 free, node 2: 4 free
    gpus, nodes = occ.place(0, 7)                  # 4 (node 2) + 2 (node 1) + 1 (node 0)
    assert nodes == 3 == occ.nodes_of(gpus) and len(gpus) == 7
    gpus, nodes = occ.place(0, 5)                  # node 2 whole + the tightest for 1: node 0
    assert nodes == 2 and set(c.gpu_node[gpus]) == {0, 2}
