"""The queue layer in `quanta simulate` / `quanta.simulate` / sweeps: wrap every policy of a run,
check the trace against the queues, write the per-queue results.

The runner calls, for a run with `--queues FILE`:

    layers, notes = apply_queues(policies, req.queues, wl.specs, cluster, trace.source)
    ...                       # run each layer as its policy (its SimResult keeps its state)
    rows = write_queue_report(req.out, results, layers)   # OUT/queues.csv
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from quanta.model.cluster import Cluster
from quanta.model.job import JobSpec
from quanta.policies.base import Policy
from quanta.queues.layer import QueueLayer
from quanta.queues.metrics import queue_metrics, write_queue_metrics
from quanta.queues.spec import QueueTree, load_queues


def apply_queues(policies: Sequence[Policy], queues: str | Path | QueueTree,
                 specs: Sequence[JobSpec], cluster: Cluster, source: str = ""
                 ) -> tuple[list[QueueLayer], list[str]]:
    """Every policy under the queues of `queues` (a file or a tree): the trace's jobs must each
    belong to a queue (else a QuantaError naming the trace file, the job's line and the field);
    returns the layers and header notes (the queues, types without quota, jobs too big)."""
    tree = queues if isinstance(queues, QueueTree) else load_queues(queues)
    tree.check_jobs(specs, source)
    layers = [p if isinstance(p, QueueLayer) else QueueLayer(p, tree) for p in policies]
    scope = layers[0].scope if layers else tree.config.scope
    notes = [f"queues: {tree.describe()} (scope {scope}, {tree.source})"]
    notes += tree.notes(cluster.types, specs)
    return layers, notes


def write_queue_report(out: str | Path | None, results: Sequence,
                       layers: Sequence[QueueLayer | QueueTree]) -> list[dict]:
    """Per-queue rows of every run (queue_metrics: each run's layer, or its tree, and the layer's
    final state from the SimResult); written to OUT/queues.csv when `out` is set."""
    rows: list[dict] = []
    for res, layer in zip(results, layers):
        rows += queue_metrics(res, layer, res.policy_state)
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        write_queue_metrics(Path(out) / "queues.csv", rows)
    return rows


def explain_now(layer: QueueLayer, driver, now: float, active=None):
    """(snapshot, decision) of `layer` on a driver's jobs at `now`, not applied (reasons,
    positions, the report): `driver` is a Simulator or the runtime (its table, occupancy,
    cluster, performance model and loop state); `active`: the table rows to show it (default:
    every waiting and running job)."""
    import numpy as np

    from quanta.core.jobtable import PENDING, RUNNING
    from quanta.core.snapshot import Snapshot
    t, occ = driver.table, driver.occ
    if active is None:
        active = np.flatnonzero((t.state == PENDING) | (t.state == RUNNING))
    snap = Snapshot(now=now, cluster=driver.cluster, perf=driver.perf, jobs=t.view(active, now),
                    capacity=occ.up_capacity(), node_free=occ.node_free.copy(),
                    node_up=occ.node_up.copy(), state=driver.loop.state,
                    resources=occ.up_resources(), network=occ.up_network())
    return snap, layer.explain(snap)
