"""What a reader of a run's results must know, as one-line notes (report.md's Notes, the CLI):
GPU types a policy never used, speeds that are estimates rather than measurements, job types no
performance model knows, injected node failures, jobs a world dropped, a run cut at `--until-h`."""

from __future__ import annotations

from typing import Sequence

from quanta.model.cluster import Cluster
from quanta.model.job import JobSpec


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def speed_notes(specs: Sequence[JobSpec], cluster: Cluster, perf) -> list[str]:
    """Job types no model knows (their speed is their run time, other GPU types by the
    generic speed ratio) and, per GPU type, known job types whose speed there is carried over
    from another GPU type by a generic ratio (bootstrapped) or estimated."""
    prov = getattr(perf, "provenance", None)
    if prov is None or not specs:
        return []
    from quanta.perf.base import Provenance
    guessed = (Provenance.ESTIMATED, Provenance.BOOTSTRAPPED)
    reps: dict[tuple, JobSpec] = {}
    jobs_of: dict[str, int] = {}
    for s in specs:
        reps.setdefault((s.job_type, s.reference_gpu, tuple(s.gpu_types or ())), s)
        jobs_of[s.job_type] = jobs_of.get(s.job_type, 0) + 1
    unknown: set[str] = set()
    by_type: dict[str, set[str]] = {t: set() for t in cluster.types}
    for s in reps.values():
        if prov(s, s.reference_gpu) == Provenance.ESTIMATED:
            unknown.add(s.job_type)
            continue
        for t in cluster.types:
            if s.gpu_types and t not in s.gpu_types:
                continue
            if prov(s, t) in guessed:
                by_type[t].add(s.job_type)
    notes = []
    if unknown:
        names = sorted(unknown)
        n_jobs = sum(jobs_of[k] for k in names)
        notes.append(f"job types not in the catalog ({_count(n_jobs, 'job')}): "
                     + ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6
                                                else "")
                     + "; their speed is their run time on the reference GPU (the trace's, or the "
                       "drawn one where it has none), other GPU types by a generic speed ratio "
                       "(`quanta catalog` lists the known types)")
    known_types = {s.job_type for s in reps.values()} - unknown
    for t, kinds in by_type.items():
        if kinds:
            n_jobs = sum(jobs_of[k] for k in kinds)
            notes.append(f"speeds on {t} are estimates (a generic GPU speed ratio from a measured "
                         f"type, no measurement on {t}) for {len(kinds)} of {len(known_types)} "
                         f"known job types ({_count(n_jobs, 'job')})")
    return notes


def unused_type_notes(results: Sequence, cluster: Cluster) -> list[str]:
    """GPU types a policy never gave to any job."""
    if len(cluster.types) < 2:
        return []
    out = []
    for r in results:
        if not len(r.busy):
            continue
        never = [t for k, t in enumerate(cluster.types) if not r.busy[:, k].any()]
        if never:
            out.append(f"{r.policy} never used " + ", ".join(
                f"{t} ({int(cluster.capacity[cluster.type_index(t)])} GPUs)" for t in never))
    return out


def run_notes(specs: Sequence[JobSpec], cluster: Cluster, perf, results: Sequence, *,
              until_h: float | None = None, node_mtbf_h: float = 0.0, repair_h: float = 1.0,
              seed: int = 0) -> list[str]:
    from quanta.core.jobtable import DROPPED
    from quanta.report.metrics import unfinished
    notes = unused_type_notes(results, cluster) + speed_notes(specs, cluster, perf)
    dropped = [f"{r.policy} {n}" for r in results if (n := int((r.table.state == DROPPED).sum()))]
    if dropped:
        notes.append("jobs the world dropped unfinished (no JCT; state 'dropped' in jobs.csv): "
                     + ", ".join(dropped))
    if node_mtbf_h > 0:
        notes.append(f"injected node failures: each node fails after an exponential time with "
                     f"mean {node_mtbf_h:g} h and stays down {repair_h:g} h (seed {seed}); the "
                     f"jobs a failure stops count as preemptions")
    if until_h is not None:
        left = []
        for r in results:
            left.append(f"{r.policy} {int(unfinished(r.table.state).sum())}")
        notes.append(f"stopped at --until-h {until_h:g} h: jobs not finished: " + ", ".join(left)
                     + "; JCT, queue and fairness columns cover the finished jobs only")
    return notes
