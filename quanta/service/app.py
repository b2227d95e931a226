"""The scheduler service: REST API under /v1 (OpenAPI at /openapi.json, Swagger UI at /docs when
its files are installed: add_docs), Prometheus text at /metrics, a small read-only page at / (signed
in by a form that sets an HttpOnly cookie, never by a token in the URL). The runtime loop
(quanta.runtime.controller) runs in a thread beside it.

Every request but /metrics, /v1/health and the page's cluster view carries a bearer token; a user
sees and changes only their own jobs, an admin token sees all. Bodies are validated by pydantic;
an error is a 4xx with one line in "error" naming the field (every error body, 5xx included, is
`{"error": "..."}`). Request bodies are capped (MAX_BODY), job lists are pages (`limit`, `after`;
the total and the next page's `after` in the X-Total-Count and X-Next-After headers), a log is
read from its end. A submission may carry an `Idempotency-Key` header: the same key (same user)
again is the first submission's job, so a client may retry a submission whose answer it lost.
"""

from __future__ import annotations

import html
import json
import os
import re
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request, Response
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from quanta.errors import QuantaError, printable
from quanta.model.cluster import Cluster
from quanta.runtime import faults
from quanta.runtime.accounts import RunAs, write_secret
from quanta.runtime.controller import Runtime
from quanta.runtime.spec import MAX_SPEC_BYTES, JobSubmission
from quanta.service import MAX_TAIL, accounting
from quanta.service.metrics import prometheus_text
from quanta.specfile import first_error
from quanta.service.store import ACTIVE, TERMINAL, IdempotencyConflict, JobRecord, Store

API = "/v1"
ADMIN = "admin"
PAGE_JOBS = 100         # the page lists the newest jobs
MAX_BODY = MAX_SPEC_BYTES  # bytes of a request body
PAGE_DEFAULT, PAGE_MAX = 1000, 10_000      # jobs per page of /v1/jobs and /v1/queue
MAX_LOG_BYTES = 8 << 20  # the most of a log one request returns (from its end)
MAX_ID = 2**62
COOKIE = "quanta_token"  # the page's sign-in (HttpOnly, SameSite=Strict)
IDEM_KEY = re.compile(r"[A-Za-z0-9_.:-]{1,200}")
JobId = PathParam(ge=1, le=MAX_ID)


def one_line(text: object, limit: int = 1000) -> str:
    return " ".join(str(text).split())[:limit]


class BodyLimit:
    """ASGI middleware: a request body over `limit` bytes is refused with 413 (by its
    Content-Length at once, or while it streams in)."""

    def __init__(self, app, limit: int = MAX_BODY):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and (not length.strip().isdigit() or int(length) > self.limit):
            response = JSONResponse(status_code=413, content={
                "error": f"the request body is larger than {self.limit} bytes"})
            return await response(scope, receive, send)
        seen = 0

        async def limited():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise HTTPException(413, f"the request body is larger than {self.limit} bytes")
            return message
        await self.app(scope, limited, send)


@dataclass
class Caller:
    user: str
    admin: bool


class UserIn(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")   # ("admin": "yes" is no role, and
    # "amdin": true no field: a typo decides nothing)
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    admin: bool | None = Field(None, description="make (true) or unmake (false) an admin; "
                               "absent: a new user is not one, an existing user keeps its role")


def bootstrap_admin(store: Store, state_dir: Path) -> Path:
    """Create the admin user on first start; its token goes to STATE/admin.token (created 0600,
    never readable by others for an instant). Where that file has since been removed, the admin
    user gets a new token, written there (the old one stops working): whoever may start the
    service on this state folder may read and write its database anyway, and a lost token
    locked every admin out (adding a user needs an admin token)."""
    path = state_dir / "admin.token"
    admins = [name for name, admin in store.users() if admin]
    if not admins:
        token = store.add_user(ADMIN, admin=True, token=os.environ.get("QUANTA_ADMIN_TOKEN") or None)
        write_secret(path, token + "\n")
    elif ADMIN in admins and not os.path.lexists(path):
        write_secret(path, store.add_user(ADMIN, admin=True) + "\n")
    return path


def check_feasible(sub: JobSubmission, cluster: Cluster) -> None:
    """A job the cluster can never run is refused at submission, naming the field."""
    types = [t.lower() for t in sub.gpu_type]
    if sub.min_gpus and sub.min_gpus > sub.gpus:
        raise QuantaError(f"min_gpus {sub.min_gpus} is above gpus {sub.gpus}", field="min_gpus")
    if sub.max_gpus and sub.max_gpus < sub.gpus:
        raise QuantaError(f"max_gpus {sub.max_gpus} is below gpus {sub.gpus}", field="max_gpus")
    for t in types:
        if t not in cluster.types:
            raise QuantaError(f"the cluster has no '{t}' GPUs (it has: {', '.join(cluster.types)})",
                              field="gpu_type")
    usable = [i for i, t in enumerate(cluster.types) if not types or t in types]
    most = max(int(cluster.capacity[i]) for i in usable)
    if sub.gpus > most:
        raise QuantaError(f"{sub.gpus} workers asked; at most {most} of the allowed types exist",
                          field="gpus")


def check_launchable(sub: JobSubmission, backend: str, run_as: RunAs | None = None,
                     user: str = "") -> None:
    """What can be checked before a launch: the user has an OS account to run as (a service
    running as root), the working directory is one the job may use, and (local backend) it exists
    here."""
    acct = run_as.account(user) if run_as is not None else None
    if sub.cwd:
        if run_as is not None:
            run_as.check_cwd(sub.cwd, acct)
        cwd = Path(sub.cwd)     # a relative one is in the job's folder; on Ray, an absolute one
        if backend == "local" and cwd.is_absolute():                        # is on the nodes
            try:
                there = cwd.is_dir()
            except OSError as err:          # a name too long, a folder the service cannot search
                raise QuantaError(f"{sub.cwd[:100]}{'...' if len(sub.cwd) > 100 else ''}: "
                                  f"{err.strerror}", field="cwd") from None
            if not there:
                raise QuantaError(f"{sub.cwd} is not a directory on the scheduler's machine",
                                  field="cwd")


def tail_lines(path: Path, n: int, max_bytes: int = MAX_LOG_BYTES) -> str:
    """The last n lines of a file, read backwards from its end in blocks (never the whole file);
    at most max_bytes."""
    block = 1 << 16
    # never through a symbolic link: a job may plant one (job.log -> the admin token)
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as f:
        f.seek(0, os.SEEK_END)
        end = pos = f.tell()
        chunks: list[bytes] = []
        newlines = 0
        while pos > 0 and newlines <= n and end - pos < max_bytes:
            step = min(block, pos)
            pos -= step
            f.seek(pos)
            chunk = f.read(step)
            chunks.append(chunk)
            newlines += chunk.count(b"\n")
    data = b"".join(reversed(chunks))[-max_bytes:]
    lines = data.decode(errors="replace").splitlines()
    if pos > 0:            # not read from the file's start: the first line may be cut
        lines = lines[1:]
    lines = lines[-n:]
    return "\n".join(lines) + ("\n" if lines else "")


def json_error(e: dict, doc: object) -> str:
    """'the request body is not valid JSON (Expecting value at line 2, column 5)' from pydantic's
    json_invalid error (its loc ends with the character offset into the body)."""
    why = (e.get("ctx") or {}).get("error", "") or "malformed"
    pos = e["loc"][-1] if e.get("loc") else None
    if isinstance(doc, bytes):
        doc = doc.decode(errors="replace")
    if isinstance(pos, int) and isinstance(doc, str) and 0 <= pos <= len(doc):
        line = doc.count("\n", 0, pos) + 1
        column = pos - (doc.rfind("\n", 0, pos) + 1) + 1
        return f"the request body is not valid JSON ({why} at line {line}, column {column})"
    return f"the request body is not valid JSON ({why})"


JSON_KINDS = {list: "a list", str: "a string", int: "a number", float: "a number",
              bool: "true or false", type(None): "null"}


def unparsable_body(body: bytes) -> str:
    """Why a JSON body that json.loads could not take at all is not JSON: not UTF-8 (the first bad
    byte), a number Python does not convert (over 4,300 digits), else nested deeper than the
    parser goes."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as err:
        return (f"the request body is not valid JSON (not UTF-8: byte 0x{body[err.start]:02x} at "
                f"offset {err.start})")
    try:
        json.loads(body)
    except RecursionError:
        pass
    except ValueError as err:              # (int's digit limit; its advice is for programmers)
        return f"the request body is not valid JSON ({one_line(str(err).split(';')[0])})"
    return "the request body is not valid JSON (nested too deep)"


def bearer(request: Request) -> str:
    auth = request.headers.get("authorization", "")
    return auth[7:].strip() if auth.lower().startswith("bearer ") else ""


def swagger_assets() -> Path | None:
    """The folder of Swagger UI's files if an installed package ships them (swagger-ui-bundle),
    so that /docs needs nothing from the internet; else None."""
    try:
        import swagger_ui_bundle
        folder = Path(swagger_ui_bundle.swagger_ui_path)
    except (ImportError, AttributeError, TypeError):
        return None
    have = all((folder / f).is_file() for f in ("swagger-ui-bundle.js", "swagger-ui.css"))
    return folder if have else None


def add_docs(app: FastAPI) -> str:
    """/docs (Swagger UI): from local files when an installed package ships them, from the CDN
    when $QUANTA_DOCS=cdn, else off (a 404 saying so; the schema is always at /openapi.json).
    Returns which: local, cdn or off."""
    from fastapi.openapi.docs import get_swagger_ui_html
    assets = swagger_assets()
    if assets is not None:
        from fastapi.staticfiles import StaticFiles
        app.mount("/docs-assets", StaticFiles(directory=assets), name="docs-assets")
        urls = {"swagger_js_url": "/docs-assets/swagger-ui-bundle.js",
                "swagger_css_url": "/docs-assets/swagger-ui.css", "swagger_favicon_url": ""}
        how = "local"
    elif os.environ.get("QUANTA_DOCS", "").lower() == "cdn":
        urls, how = {}, "cdn"
    else:
        urls, how = None, "off"

    @app.get("/docs", include_in_schema=False)
    def docs() -> Response:
        if urls is None:
            raise HTTPException(404, "the API page /docs is off: Swagger UI is not installed here "
                                "(pip install swagger-ui-bundle) and loading it from a CDN is "
                                "off (QUANTA_DOCS=cdn); the schema is at /openapi.json")
        return get_swagger_ui_html(openapi_url="/openapi.json", title="Quanta scheduler", **urls)
    return how


def create_app(store: Store, runtime: Runtime, state_dir: Path,
               run_as: RunAs | None = None) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI):
        runtime.start()
        yield
        runtime.close()
        store.checkpoint()

    app = FastAPI(title="Quanta scheduler", version="0.1", lifespan=lifespan, docs_url=None,
                  redoc_url=None)     # /docs: add_docs
    app.add_middleware(BodyLimit, limit=MAX_BODY)
    cluster = runtime.cluster

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        e = exc.errors()[0]
        if e.get("type") == "json_invalid":
            return JSONResponse(status_code=422, content={"error": one_line(
                json_error(e, exc.body))})
        if e.get("type") == "missing" and list(e["loc"]) == ["body"]:
            return JSONResponse(status_code=422, content={
                "error": "no body: want a JSON object of the job's fields (quanta schema)"})
        if e.get("type") in ("model_attributes_type", "dict_type") and list(e["loc"]) == ["body"]:
            kind = printable(request.headers.get("content-type", "") or "none")[:100]
            if kind.split(";")[0].strip().lower() == "application/json":   # JSON, not an object
                got = JSON_KINDS.get(type(e.get("input")), "a value")
                why = f"it is {got}; want a JSON object of the job's fields"
            else:
                why = f"Content-Type: {kind}; want application/json"
            return JSONResponse(status_code=422, content={
                "error": f"the request body is not a JSON object ({why})"})
        where_from = ("body", "query", "path", "header")      # (not a field's name)
        loc, msg = first_error([{**x, "loc": x["loc"][1:] if x["loc"][:1] and x["loc"][0] in
                                 where_from else x["loc"]} for x in exc.errors()])
        where = printable(".".join(loc))
        msg = one_line(msg)
        return JSONResponse(status_code=422, content={"error": f"field '{where}': {msg}"
                                                      if where else msg})

    @app.exception_handler(StarletteHTTPException)    # FastAPI's own and Starlette's (404, 405)
    async def _http(request: Request, exc: StarletteHTTPException):
        if exc.status_code == 400 and exc.detail == "There was an error parsing the body":
            # FastAPI's words for a JSON body that is not UTF-8 or nests too deep for its parser
            return JSONResponse(status_code=422, content={"error": unparsable_body(
                await request.body())})
        return JSONResponse(status_code=exc.status_code, content={"error": one_line(exc.detail)},
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception):       # a bug: still one line, logged
        import traceback
        traceback.print_exception(exc)
        return JSONResponse(status_code=500, content={"error": one_line(
            f"internal error: {type(exc).__name__}: {exc}")})

    def caller(request: Request) -> Caller:
        token = bearer(request)
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

    async def unique_keys(request: Request) -> None:
        """A JSON body with a key given twice is refused (json.loads keeps the last: a job
        named {"name": "x", "name": "y"} was "y"), as a spec file with one is."""
        if "json" not in request.headers.get("content-type", ""):
            return

        def pairs(items: list) -> dict:
            seen: set = set()
            for k, _v in items:
                if k in seen:
                    raise HTTPException(422, f"field '{printable(k[:64])}': given twice in the "
                                             f"JSON body")
                seen.add(k)
            return dict(items)
        try:
            json.loads(await request.body(), object_pairs_hook=pairs)
        except (ValueError, RecursionError):
            return                           # (not JSON: the body's own check says so)

    # -- jobs ------------------------------------------------------------------------------------
    @app.post(f"{API}/jobs", status_code=201)
    def submit(sub: JobSubmission, response: Response, me: Caller = Depends(caller),
               _unique: None = Depends(unique_keys),     # (after the caller: 401 first)
               idempotency_key: str | None = Header(None)) -> dict:
        if idempotency_key is not None and not IDEM_KEY.fullmatch(idempotency_key):
            raise HTTPException(400, "field 'Idempotency-Key': 1 to 200 letters, digits or _.:-")
        try:
            check_feasible(sub, cluster)
            check_launchable(sub, runtime.backend.name, run_as, me.user)
            runtime.check_submission(sub, me.user)       # its queue and priority class
        except QuantaError as err:
            raise HTTPException(400, str(err)) from None
        try:
            job_id, created = store.add_job_once(me.user, sub.name, sub.queue, sub.model_dump(),
                                                 sub.steps or 0, runtime.clock(), idempotency_key)
        except IdempotencyConflict as err:
            raise HTTPException(409, f"field 'Idempotency-Key': {err}") from None
        faults.point("submit-stored")
        runtime.poke()
        if not created:               # the same submission again: its job, not a new one
            response.status_code = 200
        return {"id": job_id, "state": "pending"} if created else \
            {"id": job_id, "state": store.job(job_id).state, "existing": True}

    def _page(response: Response, user: str | None, states, limit: int, after: int) -> list[dict]:
        recs = store.jobs(user=user, states=states, limit=limit + 1, after=after)
        more = len(recs) > limit
        recs = recs[:limit]
        response.headers["X-Total-Count"] = str(store.count_jobs(user, states))
        if more:
            response.headers["X-Next-After"] = str(recs[-1].id)
        return with_run_s(recs)

    def with_run_s(recs: list) -> list[dict]:
        """Each job's public record and `run_s`: how long its processes have run, all launches."""
        ran = accounting.run_seconds(store, [r.id for r in recs], time.time())
        return [{**r.public(), "run_s": ran.get(r.id, 0.0)} for r in recs]

    @app.get(f"{API}/jobs")
    def list_jobs(response: Response, state: list[str] = Query(default=[]),
                  user: str | None = Query(None, max_length=64),
                  limit: int = Query(PAGE_DEFAULT, ge=1, le=PAGE_MAX),
                  after: int = Query(0, ge=0, le=MAX_ID),
                  me: Caller = Depends(caller)) -> list[dict]:
        who = user if me.admin else me.user       # an admin sees all, or one user's
        unknown = sorted(set(state) - set(ACTIVE + TERMINAL))
        if unknown:
            raise HTTPException(422, f"field 'state': unknown state '{unknown[0][:40]}' (known: "
                                f"{', '.join(ACTIVE + TERMINAL)})")
        return _page(response, who, sorted(set(state)) or None, limit, after)

    @app.get(f"{API}/jobs/{{job_id}}")
    def get_job(job_id: int = JobId, me: Caller = Depends(caller)) -> dict:
        return with_run_s([own_job(job_id, me)])[0]

    @app.get(f"{API}/jobs/{{job_id}}/events")
    def job_events(job_id: int = JobId, me: Caller = Depends(caller)) -> list[dict]:
        own_job(job_id, me)
        return store.events(job_id)

    def _request(job_id: int, me: Caller, action: str, **flags: bool) -> dict:
        rec = own_job(job_id, me)
        if rec.state in TERMINAL:
            raise HTTPException(409, f"job {job_id} is already {rec.state}")
        if "held" in flags and bool(rec.held) == flags["held"]:     # nothing to do: no event
            return {"id": job_id, "requested": action,
                    "unchanged": "already held" if rec.held else "not held"}
        store.request(job_id, **flags)
        faults.point("request-stored")
        runtime.poke()
        return {"id": job_id, "requested": action}

    @app.post(f"{API}/jobs/{{job_id}}/cancel")
    def cancel(job_id: int = JobId, me: Caller = Depends(caller)) -> dict:
        return _request(job_id, me, "cancel", cancel=True)

    @app.post(f"{API}/jobs/{{job_id}}/hold")
    def hold(job_id: int = JobId, me: Caller = Depends(caller)) -> dict:
        return _request(job_id, me, "hold", held=True)

    @app.post(f"{API}/jobs/{{job_id}}/release")
    def release(job_id: int = JobId, me: Caller = Depends(caller)) -> dict:
        return _request(job_id, me, "release", held=False)

    @app.get(f"{API}/jobs/{{job_id}}/logs", response_class=PlainTextResponse)
    def logs(job_id: int = JobId, tail: int = Query(200, ge=1, le=MAX_TAIL),
             me: Caller = Depends(caller)) -> str:
        own_job(job_id, me)
        path = runtime.workdir(job_id) / "job.log"
        try:
            return tail_lines(path, tail)
        except FileNotFoundError:
            return ""
        except OSError as err:         # ELOOP: a link the job put in place of its log
            raise HTTPException(409, f"job {job_id}'s job.log is not a plain file "
                                f"({err.strerror}); not read") from None

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
    def queue(response: Response, limit: int = Query(PAGE_DEFAULT, ge=1, le=PAGE_MAX),
              after: int = Query(0, ge=0, le=MAX_ID), me: Caller = Depends(caller)) -> list[dict]:
        return _page(response, None if me.admin else me.user, ACTIVE, limit, after)

    @app.post(f"{API}/users", status_code=201)
    def add_user(body: UserIn, me: Caller = Depends(caller)) -> dict:
        if not me.admin:
            raise HTTPException(403, "only an admin may add users")
        existing = store.user(body.name)
        admin = body.admin if body.admin is not None else bool(existing and existing[1])
        if existing and existing[1] and not admin and \
                sum(a for _n, a in store.users()) <= 1:
            raise HTTPException(409, f"user '{body.name}' is the only admin and stays one "
                                "(make another admin first)")
        token = store.add_user(body.name, admin)
        if body.name == ADMIN:        # the CLI's admin token file follows a renewed token
            write_secret(state_dir / "admin.token", token + "\n")
        return {"name": body.name, "token": token, "admin": admin}

    @app.get(f"{API}/schema/job")
    def job_schema() -> dict:
        return JobSubmission.model_json_schema()

    @app.get(f"{API}/health")
    @app.head(f"{API}/health", include_in_schema=False)   # (in it, HEAD repeated GET's id)
    def health(response: Response) -> dict:
        """ok: the runtime's loop runs and its last step raised nothing; 503 where the loop
        stopped (the API would take jobs no one schedules)."""
        if not runtime.loop_alive():
            response.status_code = 503
            return {"ok": False, "error": runtime.error or "the runtime's loop stopped"}
        return {"ok": not runtime.error, "error": runtime.error}

    # -- observability ------------------------------------------------------------------------------
    @app.get("/metrics")
    def metrics() -> Response:
        body, content_type = prometheus_text(store, runtime)
        return Response(body, media_type=content_type)

    # the page: signed in by a form that sets an HttpOnly cookie (or an Authorization header),
    # never by a token in the URL (it would stay in browser history and proxy logs)
    @app.get("/", response_class=HTMLResponse)
    def page(request: Request) -> str:
        token = request.cookies.get(COOKIE, "")[:200] or bearer(request)
        who = store.user_for(token) if token else None
        recs = store.jobs(user=None if who[1] else who[0], limit=PAGE_JOBS, newest=True) \
            if who else []
        return render_page(cluster_view(), recs, who is not None,
                           url_token="token" in request.query_params)

    @app.post("/login", response_class=HTMLResponse)
    async def login(request: Request) -> Response:
        from urllib.parse import parse_qs
        form = parse_qs((await request.body()).decode(errors="replace"))
        token = (form.get("token") or [""])[0].strip()[:200]
        if not token or store.user_for(token) is None:
            return HTMLResponse(render_page(cluster_view(), [], False, bad_token=True), 401)
        done = RedirectResponse("/", status_code=303)
        done.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")
        return done

    @app.post("/logout")
    def logout() -> Response:
        done = RedirectResponse("/", status_code=303)
        done.delete_cookie(COOKIE, path="/")
        return done

    add_docs(app)

    from quanta.service.queues_api import router as queues_router
    app.include_router(queues_router(store, runtime, caller))   # /v1/queues, positions, sacct
    return app


def render_page(cluster: dict, recs: list[JobRecord], authed: bool, url_token: bool = False,
                bad_token: bool = False) -> str:
    esc = html.escape
    rows = "".join(f"<tr><td>{esc(t['gpu_type'])}</td><td>{t['allocated']}/{t['total']}</td></tr>"
                   for t in cluster["types"])
    jobs = "".join(f"<tr><td>{r.id}</td><td>{esc(r.name)}</td><td>{esc(r.user)}</td>"
                   f"<td>{esc(r.queue)}</td><td>{esc(r.state)}</td><td>{r.gpus}</td>"
                   f"<td>{int(r.steps_done)}/{int(r.total_steps) or '?'}</td><td>{esc(r.reason)}</td></tr>"
                   for r in recs)
    queue = (f"<h2>Jobs</h2><table><tr><th>JOBID</th><th>NAME</th><th>USER</th><th>QUEUE</th>"
             f"<th>STATE</th><th>GPUS</th><th>STEPS</th><th>REASON</th></tr>{jobs}</table>"
             "<form method='post' action='/logout'><button>Sign out</button></form>"
             if authed else
             ("<p>A token in the address is not accepted (it would stay in browser history and "
              "logs).</p>" if url_token else "")
             + ("<p>That token is not valid.</p>" if bad_token else "")
             + "<form method='post' action='/login'>Token: <input type='password' name='token' "
               "autocomplete='off'> <button>Sign in</button></form>")
    refresh = "<meta http-equiv='refresh' content='5'>" if authed else ""   # (not while typing)
    return (f"<!doctype html><html><head><meta charset='utf-8'>{refresh}<title>Quanta</title><style>body{{font-family:sans-serif}}td,th"
            f"{{padding:2px 10px;text-align:left}}</style></head><body><h1>Quanta</h1>"
            f"<p>policy <b>{esc(cluster['policy'])}</b>, backend <b>{esc(cluster['backend'])}</b>"
            f"</p><h2>Cluster</h2><table><tr><th>TYPE</th><th>ALLOCATED</th></tr>{rows}</table>"
            f"{queue}</body></html>")
