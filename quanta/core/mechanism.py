"""The mechanism: turn a policy's target allocation into the smallest set of transitions.

A job whose target equals what it holds keeps its GPUs (lease extension: no restart). Every other
job is released first, then placed, biggest gang first, consolidated where the free GPUs allow.
The drivers apply the transitions: the simulator charges restart delays, the runtime signals
processes.
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.placement.occupancy import Occupancy
from quanta.policies.base import PolicyError


class Kind(str, Enum):
    START = "start"        # pending -> running
    PREEMPT = "preempt"    # running -> pending
    MIGRATE = "migrate"    # same GPU count, other GPUs (or other type)
    RESIZE = "resize"      # other GPU count


class Transition(NamedTuple):
    row: int                  # driver row
    kind: Kind
    gpu_type: int             # new type index (-1 on preempt)
    gpus: np.ndarray          # new global GPU ids (empty on preempt)
    nodes: int
    consolidated: bool
    plan: object = None


def apply(snap: Snapshot, dec: Decision, occ: Occupancy) -> list[Transition]:
    jobs = snap.jobs
    n = len(jobs)
    if dec.gpus.shape != (n,) or dec.gpu_type.shape != (n,):
        raise PolicyError(f"decision has {dec.gpus.shape} targets for {n} jobs")
    tgt_g = dec.gpus
    on = tgt_g > 0
    tgt_t = np.where(on, dec.gpu_type, -1)
    changed = (tgt_g != jobs.gpus) | (on & (tgt_t != jobs.gtype))
    _validate(snap, tgt_g, tgt_t, on, changed)
    for r in dec.exact:
        held = occ.held.get(int(jobs.rows[r]))
        if held is None or not np.array_equal(np.sort(held), np.sort(dec.exact[r])):
            changed[r] = True
    rows = np.flatnonzero(changed)
    if rows.size == 0:
        return []
    running = jobs.running[rows].tolist()
    drows = jobs.rows[rows].tolist()
    for d, run in zip(drows, running):
        if run:
            occ.release(d)
    # placement order: exact requests first, then biggest gang first, ties by the policy's order
    to_place = rows[on[rows]]
    if dec.order is not None and len(to_place) > 1:
        rank = np.empty(n, dtype=np.int64)
        rank[dec.order] = np.arange(len(dec.order))
        to_place = to_place[np.lexsort((rank[to_place], -tgt_g[to_place]))]
    elif len(to_place) > 1:
        to_place = to_place[np.argsort(-tgt_g[to_place], kind="stable")]
    place_list = to_place.tolist()
    if dec.exact:
        place_list = [r for r in place_list if r in dec.exact] + \
                     [r for r in place_list if r not in dec.exact]
    out: list[Transition] = []
    placed: set[int] = set()
    node_max = snap.cluster.type_node_max.tolist()
    idx = np.asarray(place_list, dtype=np.int64)
    cols = zip(place_list, jobs.rows[idx].tolist(), tgt_t[idx].tolist(), tgt_g[idx].tolist(),
               jobs.gpus[idx].tolist())
    exact = dec.exact
    for r, drow, t, g, was in cols:
        gpus = exact.get(r) if exact else None
        if gpus is not None:
            gpus = _check_exact(snap, occ, np.asarray(gpus, dtype=np.int64), g, t, jobs.specs[r].job_id)
            nodes = occ.nodes_of(gpus)
        else:
            got = occ.place(t, g)
            if got is None:
                continue   # cannot happen after the capacity check; left pending if it does
            gpus, nodes = got
            if r in dec.consolidate and nodes > -(-g // node_max[t]):
                continue   # the policy wants it consolidated or not at all: it waits
        occ.assign(drow, gpus)
        placed.add(r)
        kind = Kind.START if was == 0 else Kind.RESIZE if g != was else Kind.MIGRATE
        consolidated = nodes <= -(-g // node_max[t])
        out.append(Transition(drow, kind, t, gpus, nodes, consolidated, dec.plans.get(r)))
    empty = np.empty(0, np.int64)
    for r, d, run in zip(rows.tolist(), drows, running):
        if run and r not in placed:
            out.append(Transition(d, Kind.PREEMPT, -1, empty, 0, True))
    return out


def _validate(snap: Snapshot, tgt_g: np.ndarray, tgt_t: np.ndarray, on: np.ndarray,
              changed: np.ndarray) -> None:
    """Types may be used by the jobs that move there (the rest hold what was placed before)
    and no type is over-committed."""
    new = np.flatnonzero(on & changed)
    if new.size and (tgt_t[new].min() < 0 or not snap.jobs.allowed[new, tgt_t[new]].all()):
        raise PolicyError("decision puts a job on a GPU type it may not use")
    tt = tgt_t[on]
    if tt.size == 0:
        return
    demand = np.bincount(tt, weights=tgt_g[on], minlength=len(snap.capacity))
    over = demand > snap.capacity
    if over.any():
        t = int(np.flatnonzero(over)[0])
        raise PolicyError(f"decision asks for {int(demand[t])} {snap.cluster.types[t]} GPUs; "
                          f"{snap.capacity[t]} are up")


def _check_exact(snap: Snapshot, occ: Occupancy, gpus: np.ndarray, g: int, t: int,
                 job_id: str) -> np.ndarray:
    if len(gpus) != g or np.any(occ.owner[gpus] != -1) or \
            np.any(snap.cluster.gpu_type_idx[gpus] != t):
        raise PolicyError(f"exact GPUs for job {job_id} are not {g} free GPUs of the target type")
    return gpus
