"""The scheduler service: REST API under /v1 (OpenAPI at /docs), Prometheus text at /metrics, a
small read-only page at /. The runtime loop (quanta.runtime.controller) runs in a thread beside it.

Every request but /metrics, /v1/health and the page's cluster view carries a bearer token; a user
sees and changes only their own jobs, an admin token sees all. Bodies are validated by pydantic;
an error is a 4xx with one line in "error" naming the field.
"""

from __future__ import annotations

import html
import os
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse
from pydantic import BaseModel, Field

from quanta.errors import QuantaError
from quanta.model.cluster import Cluster
from quanta.runtime.controller import Runtime
from quanta.runtime.spec import JobSubmission
from quanta.service.store import ACTIVE, TERMINAL, JobRecord, Store

API = "/v1"
ADMIN = "admin"
PAGE_JOBS = 100         # the page lists the newest jobs


@dataclass
class Caller:
    user: str
    admin: bool


class UserIn(BaseModel):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    admin: bool = False


def bootstrap_admin(store: Store, state_dir: Path) -> Path:
    """Create the admin user on first start; its token goes to STATE/admin.token (mode 600)."""
    path = state_dir / "admin.token"
    if not any(admin for _name, admin in store.users()):
        token = store.add_user(ADMIN, admin=True, token=os.environ.get("QUANTA_ADMIN_TOKEN") or None)
        path.write_text(token + "\n")
        path.chmod(0o600)
    return path


def check_feasible(sub: JobSubmission, cluster: Cluster) -> None:
    """A job the cluster can never run is refused at submission, naming the field."""
    types = [t.lower() for t in sub.gpu_type]
    for t in types:
        if t not in cluster.types:
            raise QuantaError(f"the cluster has no '{t}' GPUs (it has: {', '.join(cluster.types)})",
                              field="gpu_type")
    usable = [i for i, t in enumerate(cluster.types) if not types or t in types]
    most = max(int(cluster.capacity[i]) for i in usable)
    if sub.gpus > most:
        raise QuantaError(f"{sub.gpus} workers asked; at most {most} of the allowed types exist",
                          field="gpus")


def create_app(store: Store, runtime: Runtime, state_dir: Path) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI):
        runtime.start()
        yield
        runtime.close()

    app = FastAPI(title="Quanta scheduler", version="0.1", lifespan=lifespan)
    cluster = runtime.cluster

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        e = exc.errors()[0]
        loc = ".".join(str(p) for p in e["loc"] if p != "body")
        return JSONResponse(status_code=422, content={"error": f"field '{loc}': {e['msg']}"
                                                      if loc else e["msg"]})

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException):
        return JSONResponse(status_code=exc.status_code, content={"error": exc.detail})

    def caller(request: Request) -> Caller:
        auth = request.headers.get("authorization", "")
        token = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
        who = store.user_for(token) if token else None
        if who is None:
            raise HTTPException(401, "a valid token is required (Authorization: Bearer TOKEN)")
        return Caller(*who)

    def own_job(job_id: int, me: Caller) -> JobRecord:
        rec = store.job(job_id)
        if rec is None:
            raise HTTPException(404, f"no job {job_id}")
        if not me.admin and rec.user != me.user:
            raise HTTPException(403, f"job {job_id} belongs to another user")
        return rec

    # -- jobs ------------------------------------------------------------------------------------
    @app.post(f"{API}/jobs", status_code=201)
    def submit(sub: JobSubmission, me: Caller = Depends(caller)) -> dict:
        try:
            check_feasible(sub, cluster)
        except QuantaError as err:
            raise HTTPException(400, str(err)) from None
        job_id = store.add_job(me.user, sub.name, sub.queue, sub.model_dump(), sub.steps or 0,
                               runtime.clock())
        runtime.poke()
        return {"id": job_id, "state": "pending"}

    @app.get(f"{API}/jobs")
    def list_jobs(state: list[str] = Query(default=[]), user: str | None = None,
                  me: Caller = Depends(caller)) -> list[dict]:
        who = user if me.admin else me.user       # an admin sees all, or one user's
        return [r.public() for r in store.jobs(user=who, states=state or None)]

    @app.get(f"{API}/jobs/{{job_id}}")
    def get_job(job_id: int, me: Caller = Depends(caller)) -> dict:
        return own_job(job_id, me).public()

    @app.get(f"{API}/jobs/{{job_id}}/events")
    def job_events(job_id: int, me: Caller = Depends(caller)) -> list[dict]:
        own_job(job_id, me)
        return store.events(job_id)

    def _request(job_id: int, me: Caller, action: str, **flags: bool) -> dict:
        rec = own_job(job_id, me)
        if rec.state in TERMINAL:
            raise HTTPException(409, f"job {job_id} is already {rec.state}")
        store.request(job_id, **flags)
        runtime.poke()
        return {"id": job_id, "requested": action}

    @app.post(f"{API}/jobs/{{job_id}}/cancel")
    def cancel(job_id: int, me: Caller = Depends(caller)) -> dict:
        return _request(job_id, me, "cancel", cancel=True)

    @app.post(f"{API}/jobs/{{job_id}}/hold")
    def hold(job_id: int, me: Caller = Depends(caller)) -> dict:
        return _request(job_id, me, "hold", held=True)

    @app.post(f"{API}/jobs/{{job_id}}/release")
    def release(job_id: int, me: Caller = Depends(caller)) -> dict:
        return _request(job_id, me, "release", held=False)

    @app.get(f"{API}/jobs/{{job_id}}/logs", response_class=PlainTextResponse)
    def logs(job_id: int, tail: int = Query(200, ge=1, le=100_000),
             me: Caller = Depends(caller)) -> str:
        own_job(job_id, me)
        path = runtime.workdir(job_id) / "job.log"
        if not path.exists():
            return ""
        lines = path.read_text(errors="replace").splitlines()
        return "\n".join(lines[-tail:]) + ("\n" if lines else "")

    # -- cluster, queue, users ----------------------------------------------------------------------
    def cluster_view() -> dict:
        with runtime.lock:
            busy = runtime.occ.busy.copy()
            up = runtime.occ.node_up.copy()
            err = runtime.error
        return {"name": cluster.name, "policy": runtime.policy.label(),
                "backend": runtime.backend.name, "error": err,
                "types": [{"gpu_type": t, "total": int(cluster.capacity[i]), "allocated": int(busy[i])}
                          for i, t in enumerate(cluster.types)],
                "nodes": [{"name": n.name, "gpu_type": n.gpu_type, "gpus": n.gpus, "up": bool(u)}
                          for n, u in zip(cluster.nodes, up)]}

    @app.get(f"{API}/cluster")
    def get_cluster(me: Caller = Depends(caller)) -> dict:
        return cluster_view()

    @app.get(f"{API}/queue")
    def queue(me: Caller = Depends(caller)) -> list[dict]:
        recs = store.jobs(user=None if me.admin else me.user, states=ACTIVE)
        return [r.public() for r in recs]

    @app.post(f"{API}/users", status_code=201)
    def add_user(body: UserIn, me: Caller = Depends(caller)) -> dict:
        if not me.admin:
            raise HTTPException(403, "only an admin may add users")
        return {"name": body.name, "token": store.add_user(body.name, body.admin)}

    @app.get(f"{API}/schema/job")
    def job_schema() -> dict:
        return JobSubmission.model_json_schema()

    @app.get(f"{API}/health")
    def health() -> dict:
        return {"ok": not runtime.error, "error": runtime.error}

    # -- observability ------------------------------------------------------------------------------
    @app.get("/metrics", response_class=PlainTextResponse)
    def metrics() -> str:
        return prometheus_text(store, runtime)

    @app.get("/", response_class=HTMLResponse)
    def page(token: str = "") -> str:
        who = store.user_for(token) if token else None
        recs = store.jobs(user=None if who[1] else who[0])[-PAGE_JOBS:] if who else []
        return render_page(cluster_view(), recs, who is not None)

    return app


def prometheus_text(store: Store, runtime: Runtime) -> str:
    out: list[str] = []

    def metric(name: str, kind: str, help_: str, samples: list[tuple[str, float]]) -> None:
        out.append(f"# HELP {name} {help_}")
        out.append(f"# TYPE {name} {kind}")
        out.extend(f"{name}{labels} {value:g}" for labels, value in samples)

    db = store.conn()
    states = dict(db.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall())
    metric("quanta_jobs", "gauge", "Jobs by state.",
           [(f'{{state="{s}"}}', states.get(s, 0)) for s in ACTIVE + TERMINAL])
    queues = db.execute("SELECT queue, COUNT(*) FROM jobs WHERE state = 'pending' GROUP BY queue")
    metric("quanta_pending_jobs", "gauge", "Pending jobs per queue.",
           [(f'{{queue="{q}"}}', c) for q, c in queues.fetchall()])
    with runtime.lock:
        busy = runtime.occ.busy.copy()
        lat = np.array(runtime.stats.latencies)
    cl = runtime.cluster
    metric("quanta_gpus_allocated", "gauge", "GPUs (or CPU slots) allocated per type.",
           [(f'{{gpu_type="{t}"}}', busy[i]) for i, t in enumerate(cl.types)])
    metric("quanta_gpus_total", "gauge", "GPUs (or CPU slots) per type.",
           [(f'{{gpu_type="{t}"}}', cl.capacity[i]) for i, t in enumerate(cl.types)])
    metric("quanta_preemptions_total", "counter", "Jobs preempted (checkpointed and stopped).",
           [("", store.count_events("preempted"))])
    wait = db.execute("SELECT COALESCE(SUM(start - submit), 0), COUNT(*) FROM jobs "
                      "WHERE start IS NOT NULL").fetchone()
    metric("quanta_admission_wait_seconds", "summary", "Seconds from submission to first start.",
           [("_sum", wait[0]), ("_count", wait[1])])
    qs = [(f'{{quantile="{q}"}}', float(np.quantile(lat, q)) if lat.size else 0.0)
          for q in (0.5, 0.99)]
    metric("quanta_decision_seconds", "summary", "Scheduling decision latency (policy + placement).",
           qs + [("_sum", float(lat.sum())), ("_count", float(lat.size))])
    return "\n".join(out) + "\n"


def render_page(cluster: dict, recs: list[JobRecord], authed: bool) -> str:
    esc = html.escape
    rows = "".join(f"<tr><td>{esc(t['gpu_type'])}</td><td>{t['allocated']}/{t['total']}</td></tr>"
                   for t in cluster["types"])
    jobs = "".join(f"<tr><td>{r.id}</td><td>{esc(r.name)}</td><td>{esc(r.user)}</td>"
                   f"<td>{esc(r.queue)}</td><td>{esc(r.state)}</td><td>{r.gpus}</td>"
                   f"<td>{int(r.steps_done)}/{int(r.total_steps) or '?'}</td><td>{esc(r.reason)}</td></tr>"
                   for r in recs)
    queue = (f"<h2>Jobs</h2><table><tr><th>JOBID</th><th>NAME</th><th>USER</th><th>QUEUE</th>"
             f"<th>STATE</th><th>GPUS</th><th>STEPS</th><th>REASON</th></tr>{jobs}</table>"
             if authed else "<p>Add <code>?token=TOKEN</code> to see your jobs.</p>")
    return (f"<!doctype html><html><head><meta charset='utf-8'><meta http-equiv='refresh' "
            f"content='5'><title>Quanta</title><style>body{{font-family:sans-serif}}td,th"
            f"{{padding:2px 10px;text-align:left}}</style></head><body><h1>Quanta</h1>"
            f"<p>policy <b>{esc(cluster['policy'])}</b>, backend <b>{esc(cluster['backend'])}</b>"
            f"</p><h2>Cluster</h2><table><tr><th>TYPE</th><th>ALLOCATED</th></tr>{rows}</table>"
            f"{queue}</body></html>")
