"""`quanta queues`: a queues file's tree and quotas, and, on a simulated trace, each queue's usage
per GPU type, borrowed GPUs, waiting jobs and fair-share factor at a moment (`--at-h`), or its
results over the whole run; `--jobs` lists the waiting jobs with their reason, position in their
queue and estimated start (what `quanta queue` shows for a live service).

    quanta queues quanta/examples/queues/teams.yaml                       # check and list
    quanta queues FILE --trace philly --policy las --at-h 24 [--jobs]     # the state at hour 24
    quanta queues FILE --trace philly --policy las                        # per-queue results
    quanta queues [--url URL]            # a running service's queues (its /v1/queues report)
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Callable, Optional

import typer

from quanta.cli_print import print_json, rich_table, rich_text


def _num(v: float) -> str:
    if v == math.inf:
        return "-"
    return f"{v:g}"


def tree_rows(tree, types) -> list[dict]:
    """One row per queue of the tree: parent, weight, users, quota per type."""
    comp = tree.compile(types)
    out = []
    for q, name in enumerate(tree.names):
        quota = {}
        for k, t in enumerate(types):
            nom, cap = comp.nominal_total[q, k], comp.cap[q, k]
            lend = comp.nominal_total[q, k] - comp.reserved[q, k]
            if nom or (q in tree.leaf_pos and comp.usable[tree.leaf_pos[q], k]):
                quota[t] = {"nominal": float(nom), "max": float(cap),
                            "lendable": float(lend)}
        out.append({"queue": name, "parent": tree.names[tree.parent[q]] if tree.parent[q] >= 0 else "",
                    "leaf": q in tree.leaf_pos, "weight": float(tree.weight[q]),
                    "users": list(tree.users[q]) or ["*"], "aliases": list(tree.aliases[q]),
                    "quota": quota})
    return out


def _indent(tree, name: str) -> str:
    return "  " * tree.depth(tree.names.index(name)) + name


def simulate_until(file: Path, trace: str, fmt: str, cluster: str, policy: str, seed: int,
                   max_jobs: Optional[int], at_h: Optional[float], drop_impossible: bool = False):
    """Run `policy` under the queues on the trace until `at_h` hours (None: to the end); returns
    (layer, simulator, result, notes). Jobs the cluster can never fit stop it with `quanta
    simulate`'s error, or with `drop_impossible` are a note (and stay unschedulable)."""
    from quanta.model.presets import resolve_cluster
    from quanta.perf.catalog_model import CatalogModel
    from quanta.policies import make_policy
    from quanta.queues.layer import QueueLayer
    from quanta.queues.spec import load_queues
    from quanta.runner import check_feasible, load_any_trace, with_run_seed
    from quanta.sim.engine import Simulator
    from quanta.workloads.builder import build_workload
    tree = load_queues(file)
    cl = resolve_cluster(cluster)
    tr = load_any_trace(trace, fmt, seed)
    perf = CatalogModel()
    wl = build_workload(tr, perf, seed=seed, max_jobs=max_jobs)
    specs = tree.resolve_priorities(wl.specs, tr.source or trace)
    tree.check_jobs(specs, tr.source or trace)
    layer = QueueLayer(make_policy(with_run_seed(policy, seed)), tree)
    sim = Simulator(specs, cl, layer, perf, until=at_h * 3600.0 if at_h is not None else None)
    notes = check_feasible(specs, sim.impossible, tr, cl, drop_impossible, layer)
    res = sim.run()
    return layer, sim, res, notes


def render_report(console, report: dict, title: str) -> None:
    """A queue layer's report (Decision.state["report"]): per queue, GPUs held / nominal per type,
    borrowed, running, waiting jobs and GPUs, fair-share factor; cohorts indented over teams."""
    qs = report.get("queues", {})
    types = report.get("types", [])

    def depth(name: str) -> int:
        d, seen = 0, set()
        while qs.get(name, {}).get("parent") and name not in seen:
            seen.add(name)
            name = qs[name]["parent"]
            d += 1
        return d

    t = rich_table(rich_text(title))
    for col in ["QUEUE"] + [ty.upper() for ty in types] + ["BORROWED", "RUNNING", "PENDING",
                                                           "PENDING GPUS", "FAIRSHARE"]:
        t.add_column(col, no_wrap=True, justify="left" if col == "QUEUE" else "right")
    for name in _tree_order(qs):
        r = qs[name]
        cells = [f"{r['usage'][k]:g}/{r['nominal'][k]:g}" for k in range(len(types))]
        t.add_row("  " * depth(name) + name, *cells, f"{sum(r['borrowed']):g}", str(r["running"]),
                  str(r["pending"]), str(r["pending_gpus"]), f"{r['fairshare']:.3f}")
    console.print(t, markup=False)      # names from the user's files, as they are


def _tree_order(qs: dict) -> list[str]:
    """Queue names depth first, each cohort before its children, siblings in report order."""
    kids: dict[str, list[str]] = {}
    for name, r in qs.items():
        kids.setdefault(r.get("parent") or "", []).append(name)
    out: list[str] = []
    stack = list(reversed(kids.get("", [])))
    while stack:
        name = stack.pop()
        if name in out:
            continue
        out.append(name)
        stack.extend(reversed(kids.get(name, [])))
    return out + [n for n in qs if n not in out]


def register(app: typer.Typer, console: Callable) -> None:
    """The commands, printing on `console()` (made on first use)."""
    @app.command("queues")
    def queues(
        file: Optional[Path] = typer.Argument(None, help="queues YAML (see docs/queues.md); none: "
                                              "the queues of the service at --url"),
        cluster: str = typer.Option("gavel-108", help="preset, YAML file or TYPE:NODESxGPUS"),
        trace: Optional[str] = typer.Option(None, help="simulate this trace under the queues"),
        format: str = typer.Option("auto", "--format", help="trace format"),
        policies: Optional[list[str]] = typer.Option(None, "--policy", "-p", help="policy "
                                                     "inside the queues (default fifo; one)"),
        seed: int = typer.Option(0, min=0, help="seed"),
        max_jobs: Optional[int] = typer.Option(None, "--max-jobs", min=1, help="first N jobs"),
        at_h: Optional[float] = typer.Option(None, "--at-h", min=0.0, help="show the queues at "
                                             "this hour of the simulation (default: results "
                                             "over the whole run)"),
        jobs: bool = typer.Option(False, "--jobs", help="with --at-h: the jobs that would "
                                  "wait were the layer to decide at that hour on the run's state "
                                  "(not applied), with reason, position and estimated start"),
        drop_impossible: bool = typer.Option(False, "--drop-impossible", help="report jobs the "
                                             "cluster can never fit and go on (default: stop)"),
        as_json: bool = typer.Option(False, "--json", help="print JSON"),
        url: Optional[str] = typer.Option(None, "--url", help="service URL (without FILE; default "
                                          "$QUANTA_URL or http://127.0.0.1:8472)"),
        token: Optional[str] = typer.Option(None, "--token", help="API token"),
    ) -> None:
        """Queues of a file: tree and quotas; on a simulated trace, usage, borrowed GPUs, waiting
        jobs and fair-share factor per queue. Without FILE: those of the running service
        (quanta serve --queues FILE)."""
        from quanta.errors import QuantaError
        from quanta.model.presets import resolve_cluster
        from quanta.queues.spec import load_queues
        if policies and len(policies) > 1:            # (the last one ran, the others unsaid)
            raise QuantaError(f"one policy runs under the queues, {len(policies)} given "
                              f"(compare several with quanta simulate --queues)", field="--policy")
        policy = policies[0] if policies else "fifo"
        if file is None:
            for flag, given in (("--trace", trace is not None),
                                ("--cluster", cluster != "gavel-108")):
                if given:
                    raise QuantaError(f"{flag} is for a queues FILE (without one: the service's "
                                      f"queues)", field=flag)
        elif url is not None or token is not None:
            raise QuantaError("--url and --token ask the service for its queues: leave FILE out",
                              field="--url" if url is not None else "--token")
        if trace is not None and trace.startswith("synthetic:") and format != "auto":
            raise QuantaError(f"a synthetic trace has no file format to read it as ('{format}'): "
                              f"leave --format out", field="--format")
        if jobs and at_h is None:
            raise QuantaError("--jobs lists the jobs waiting at an hour: give --at-h H too",
                              field="--jobs")
        from quanta.workloads.readers._base import MAX_NUMBER
        if at_h is not None and not at_h * 3600 <= MAX_NUMBER:   # (inf: numpy warnings, "hour inf")
            raise QuantaError(f"{at_h:g} h is past the {MAX_NUMBER:g} s a run may last",
                              field="--at-h")
        if at_h is not None and (trace is None or file is None):
            raise QuantaError("an hour of a simulated trace: give a queues FILE and --trace too",
                              field="--at-h")
        if trace is None:
            for flag, given in (("--format", format != "auto"), ("--policy", bool(policies)),
                                ("--seed", seed != 0), ("--max-jobs", max_jobs is not None),
                                ("--drop-impossible", drop_impossible)):
                if given:
                    raise QuantaError(f"{flag} is for a simulated trace: give --trace too",
                                      field=flag)
        if file is None:
            from quanta.service.client import Client
            report = Client(url, token).call("GET", "/v1/queues")
            if as_json:
                print_json(report)
            else:
                render_report(console(), report,
                              "queues of the service: GPUs held/nominal per type")
            return
        if trace is None:
            tree = load_queues(file)
            types = resolve_cluster(cluster).types
            rows = tree_rows(tree, types)
            if as_json:
                print_json({"name": tree.name, "types": list(types), "queues": rows})
                return
            t = rich_table(rich_text(f"queues {tree.name} on {cluster}: nominal / most it may "
                                     f"hold (- no limit) per GPU type"))
            for col in ["QUEUE", "WEIGHT", "USERS"] + [ty.upper() for ty in types]:
                t.add_column(col, no_wrap=True)
            for r in rows:
                cells = [f"{_num(r['quota'][ty]['nominal'])}/{_num(r['quota'][ty]['max'])}"
                         if ty in r["quota"] else "" for ty in types]
                t.add_row(_indent(tree, r["queue"]), f"{r['weight']:g}",
                          ",".join(r["users"]) if r["leaf"] else "", *cells)
            console().print(t, markup=False)      # names from the user's files, as they are
            for note in tree.notes(types):
                console().print(rich_text(f"note: {note}", "dim"))
            return
        from quanta.runner import check_seed
        check_seed(seed)                 # (as simulate, sweep and reproduce: an int64)
        layer, sim, res, notes = simulate_until(file, trace, format, cluster, policy, seed,
                                                max_jobs, at_h, drop_impossible)
        for note in notes:       # (on stderr with --json, which stays one document)
            if as_json:
                typer.echo(f"note: {note}", err=True)
            else:
                console().print(rich_text(f"note: {note}", "dim"))
        tree = layer.tree
        types = sim.cluster.types
        if at_h is None:
            from quanta.queues.metrics import queue_metrics
            rows = queue_metrics(res, layer, sim.loop.state)
            if as_json:
                print_json(rows)
                return
            t = rich_table(rich_text(f"{layer.label()} on {trace}, {cluster}: per queue over "
                                     f"the run"))
            for col in ("QUEUE", "JOBS", "DONE", "AVG JCT H", "WAIT H", "GPU-H", "QUOTA GPU-H",
                        "BORROWED GPU-H", "RECLAIMED", "PREEMPT"):
                t.add_column(col, no_wrap=True, justify="left" if col == "QUEUE" else "right")
            for r in rows:
                t.add_row(_indent(tree, r["queue"]), str(r["jobs"]), str(r["finished"]),
                          f"{r['avg_jct_s'] / 3600:.2f}", f"{r['avg_queue_s'] / 3600:.2f}",
                          f"{r['gpu_hours']:.0f}", f"{r['quota_gpu_hours']:.0f}",
                          f"{r['borrowed_gpu_hours']:.0f}", str(r["reclaim_preemptions"]),
                          str(r["preemptions"]))
            console().print(t, markup=False)      # names from the user's files, as they are
            return
        now = at_h * 3600.0
        from quanta.queues.sim import explain_now
        snap, dec = explain_now(layer, sim, now)
        if jobs:
            j = snap.jobs
            out = []
            for i in sorted(dec.positions, key=lambda i: (layer._leaf[int(j.rows[i])],
                                                          dec.positions[i][0])):
                pos, est = dec.positions[i]
                spec = j.specs[i]
                q = tree.queue_of(spec)
                out.append({"job": spec.job_id, "queue": tree.names[q] if q >= 0 else "",
                            "user": spec.user, "gpus": int(j.req[i]), "priority": spec.priority,
                            "position": pos, "reason": dec.reasons.get(i, ""),
                            "est_start_h": None if est is None else est / 3600.0})
            if as_json:
                print_json(out)
                return
            t = rich_table(rich_text(f"waiting jobs at hour {at_h:g} ({layer.label()})"))
            for col in ("JOBID", "QUEUE", "USER", "GPUS", "PRIO", "POS", "REASON", "EST START H"):
                t.add_column(col, no_wrap=True)
            for r in out:
                t.add_row(r["job"], r["queue"], r["user"], str(r["gpus"]), str(r["priority"]),
                          str(r["position"]), r["reason"],
                          "" if r["est_start_h"] is None else f"{r['est_start_h']:.2f}")
            console().print(t, markup=False)      # names from the user's files, as they are
            return
        if as_json:
            print_json(dec.state["report"])
            return
        render_report(console(), dec.state["report"], f"queues at hour {at_h:g} ({layer.label()} "
                      f"on {trace}, {cluster}): GPUs held/nominal per type")
