"""GET /metrics: the service's state in the Prometheus text format (jobs by state, pending jobs
per queue, GPUs allocated and total per type, preemptions, admission wait, decision latency)."""

from __future__ import annotations

import numpy as np

from quanta.runtime.controller import Runtime
from quanta.service.store import ACTIVE, TERMINAL, Store


# a metric family: (name, type, help, samples: (name suffix, labels, value))
Family = tuple[str, str, str, list[tuple[str, dict[str, str], float]]]


def metric_families(store: Store, runtime: Runtime) -> list[Family]:
    db = store.conn()
    states = dict(db.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall())
    queues = db.execute("SELECT queue, COUNT(*) FROM jobs WHERE state = 'pending' "
                        "GROUP BY queue").fetchall()
    with runtime.lock:
        busy = runtime.occ.busy.copy()
        lat = np.array(runtime.stats.latencies)
    cl = runtime.cluster
    wait = db.execute("SELECT COALESCE(SUM(start - submit), 0), COUNT(*) FROM jobs "
                      "WHERE start IS NOT NULL").fetchone()
    qs = [("", {"quantile": str(q)}, float(np.quantile(lat, q)) if lat.size else 0.0)
          for q in (0.5, 0.99)]
    return [
        ("quanta_jobs", "gauge", "Jobs by state.",
         [("", {"state": s}, states.get(s, 0)) for s in ACTIVE + TERMINAL]),
        ("quanta_pending_jobs", "gauge", "Pending jobs per queue.",
         [("", {"queue": str(q)}, c) for q, c in queues]),
        ("quanta_gpus_allocated", "gauge", "GPUs (or CPU slots) allocated per type.",
         [("", {"gpu_type": t}, float(busy[i])) for i, t in enumerate(cl.types)]),
        ("quanta_gpus_total", "gauge", "GPUs (or CPU slots) per type.",
         [("", {"gpu_type": t}, float(cl.capacity[i])) for i, t in enumerate(cl.types)]),
        ("quanta_preemptions", "counter", "Jobs preempted (checkpointed and stopped).",
         [("_total", {}, store.count_events("preempted"))]),
        ("quanta_admission_wait_seconds", "summary", "Seconds from submission to first start.",
         [("_sum", {}, wait[0]), ("_count", {}, wait[1])]),
        ("quanta_decision_seconds", "summary", "Scheduling decision latency (policy + placement).",
         qs + [("_sum", {}, float(lat.sum())), ("_count", {}, float(lat.size))]),
    ]


def prometheus_text(store: Store, runtime: Runtime) -> tuple[str, str]:
    """(text, content type) in the Prometheus exposition format, written by prometheus_client
    (label values escaped: no value can forge a series), or by exposition() without it."""
    families = metric_families(store, runtime)
    try:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
        from prometheus_client.registry import CollectorRegistry
        from prometheus_client.metrics_core import Metric
    except ImportError:
        return exposition(families), "text/plain; version=0.0.4; charset=utf-8"

    class _Collector:
        def collect(self):
            for name, kind, help_, samples in families:
                m = Metric(name, help_, kind)
                for suffix, labels, value in samples:
                    m.add_sample(name + suffix, labels, float(value))
                yield m
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector())
    return generate_latest(registry).decode(), CONTENT_TYPE_LATEST


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def exposition(families: list[Family]) -> str:
    """The text format by hand (for a service without prometheus_client), label values escaped
    as the format says (backslash, double quote, newline)."""
    out: list[str] = []
    for name, kind, help_, samples in families:
        out.append(f"# HELP {name} {help_}")
        out.append(f"# TYPE {name} {kind}")
        for suffix, labels, value in samples:
            lab = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
            out.append(f"{name}{suffix}{{{lab}}} {float(value)!r}" if lab
                       else f"{name}{suffix} {float(value)!r}")
    return "\n".join(out) + "\n"
