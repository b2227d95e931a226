"""Allocations over several GPU types, and forked copies of a job (Hadar's task-level
heterogeneity, HadarE's forks): the mechanism's checks, placement and transitions for them."""

from __future__ import annotations

import numpy as np

from quanta.core.decision import Decision
from quanta.core.snapshot import Snapshot
from quanta.core.transition import Transition, transition_kind
from quanta.perf.base import Part, aggregation_seconds, link_gbps
from quanta.placement.occupancy import Occupancy
from quanta.policies.base import PolicyError


def read_mixed(snap: Snapshot, dec: Decision, on: np.ndarray, tgt_t: np.ndarray,
           changed: np.ndarray) -> dict[int, np.ndarray]:
    """Validate the decision's allocations over several GPU types; return GPUs per type of each
    such row (those with two types or more; one type is an ordinary allocation). Sets tgt_t of
    a mixed row to its type with the most GPUs, and marks `changed` the rows whose mix, copies or
    averaging period differ from what they hold (a mixed row that keeps its parts keeps its GPUs)."""
    jobs = snap.jobs
    K = len(snap.capacity)
    out: dict[int, np.ndarray] = {}
    for r, c in dec.mixed.items():
        c = np.asarray(c, dtype=np.int64)
        if c.shape != (K,) or (c < 0).any() or int(c.sum()) != int(dec.gpus[r]) or not on[r]:
            raise PolicyError(f"mixed allocation of job {jobs.specs[r].job_id} is not GPUs per "
                              f"type adding up to its {int(dec.gpus[r])} GPUs")
        if r in dec.copies:
            check_copies(snap, dec, r, c)
        elif np.count_nonzero(c) < 2:
            tgt_t[r] = int(np.argmax(c))
            continue
        if r in dec.share or r in dec.exact or r in dec.plans or any(
                r == h for h, _m in dec.share.values()):
            raise PolicyError("a job on several GPU types cannot share GPUs, take exact GPUs "
                              "or a plan")
        if not jobs.allowed[r, c > 0].all():
            raise PolicyError("decision puts a job on a GPU type it may not use")
        if r in dec.fork and not dec.fork[r] > 0:
            raise PolicyError(f"fork period of job {jobs.specs[r].job_id} must be > 0 seconds")
        out[r] = c
        tgt_t[r] = int(np.argmax(c))
    held = jobs.mixed
    held_copies = jobs.copies if dec.copies or held.any() else {}
    for r in out:
        mine, want = held_copies.get(r), dec.copies.get(r)
        same_copies = (mine is None and want is None) or (
            mine is not None and want is not None and np.array_equal(mine, want))
        changed[r] = not (held[r] and np.array_equal(out[r], jobs.parts[r]) and
                          dec.fork.get(r, 0.0) == jobs.fork_s[r] and same_copies)
    for r in np.flatnonzero(held & on).tolist():
        if r not in out:
            changed[r] = True          # from several types to one
    return out


def check_copies(snap: Snapshot, dec: Decision, r: int, c: np.ndarray) -> None:
    """A forked row's copies: GPUs per node, on nodes that are up, within its GPUs per type,
    leaving its own gang some GPUs, with an averaging period."""
    cl, jobs = snap.cluster, snap.jobs
    cp = np.asarray(dec.copies[r], dtype=np.int64)
    per_type = np.bincount(cl.node_type, weights=cp, minlength=len(c)) if cp.shape == (
        len(cl.nodes),) else None
    if per_type is None or (cp < 0).any() or (per_type > c).any() or per_type.sum() >= c.sum() \
            or (cp > cl.node_gpus).any() or not snap.node_up[cp > 0].all():
        raise PolicyError(f"copies of job {jobs.specs[r].job_id} are not GPUs per up node within "
                          f"its GPUs per type, beside an own gang")
    if not dec.fork.get(r, 0.0) > 0:
        raise PolicyError(f"job {jobs.specs[r].job_id} has copies but no fork period")


def place_copies(snap: Snapshot, dec: Decision, occ: Occupancy, r: int, drow: int, t: int,
                  own: np.ndarray, got: list[tuple[int, int, int]], was: int) -> Transition:
    """A forked job's copies, after every own gang: each on its node if that node still has the
    GPUs free, else on the node of its type with the most free GPUs where the job has none, else
    left out. The job's GPUs are its own gang's then its copies'."""
    cl = snap.cluster
    want = np.asarray(dec.copies[r], dtype=np.int64)
    taken: list[np.ndarray] = []
    placed = np.zeros(len(cl.nodes), dtype=np.int64)
    used_nodes = set(np.unique(cl.gpu_node[own]).tolist())
    for h in np.flatnonzero(want).tolist():
        c = int(want[h])
        node = h if h not in used_nodes and occ.free_on_node(h) >= c else -1
        if node < 0:
            same = [x for x in np.flatnonzero(cl.node_type == cl.node_type[h]).tolist()
                    if x not in used_nodes and occ.node_up[x] and occ.free_on_node(x) >= c]
            if same:
                node = max(same, key=lambda x: (occ.free_on_node(x), -x))
        if node < 0:
            continue
        taken.append(occ.take_on_node(node, c))
        placed[node] = c
        used_nodes.add(node)
    gpus = own
    if taken:
        occ.release(drow)
        gpus = np.concatenate([own] + taken)
        occ.assign(drow, gpus)
    got = got + [(int(cl.node_type[h]), int(placed[h]), 1) for h in np.flatnonzero(placed).tolist()]
    return mixed_transition(snap, dec, r, drow, t, gpus, got, was,
                             copies=placed if placed.any() else None)


def mixed_transition(snap: Snapshot, dec: Decision, r: int, drow: int, t: int, gpus: np.ndarray,
                      got: list[tuple[int, int, int]], was: int,
                      copies: np.ndarray | None = None) -> Transition:
    """A job on parts (type index, GPUs, nodes) of several types, or a forked job's own gang and
    copies (`copies`: GPUs per node of the copies); forked copies average models when it has
    more than one part."""
    cl = snap.cluster
    parts = tuple(Part(cl.types[k], c, nd, nd <= cl.min_nodes(k, c)) for k, c, nd in got)
    fork = None
    if r in dec.fork and len(parts) > 1:
        agg = aggregation_seconds(snap.perf, snap.jobs.specs[r], len(parts),
                                  link_gbps(cl, np.unique(cl.gpu_node[gpus])))
        fork = (float(dec.fork[r]), agg)
    g = len(gpus)
    kind = transition_kind(was, g)
    return Transition(drow, kind, t, gpus, sum(p.nodes for p in parts),
                      all(p.consolidated for p in parts), parts=parts, fork=fork, copies=copies)
