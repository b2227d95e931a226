"""`quanta serve` and the Slurm-like job commands: submit, queue, cancel, hold, release, status,
logs, sacct, users. Each job command has --json (the service's own JSON) for scripts.

What users wrote (names, queues, commands, error messages) is printed as plain text: never read as
rich markup, its control characters (terminal escape sequences) shown as \\xNN."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable, List, Optional

import typer

from quanta.cli_print import print_json, rich_table, rich_text
from quanta.errors import printable
from quanta.service import MAX_TAIL

URL = typer.Option(None, "--url", help="service URL (default $QUANTA_URL or http://127.0.0.1:8472)")
TOKEN = typer.Option(None, "--token", help="API token (default $QUANTA_TOKEN or the admin token file)")
JSON = typer.Option(False, "--json", help="print JSON")


def _client(url: Optional[str], token: Optional[str]):
    from quanta.service.client import Client
    return Client(url, token)


def _hms(seconds: float) -> str:
    s = int(max(0, seconds))
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return (f"{d}-" if d else "") + f"{h:02d}:{m:02d}:{s:02d}" if d or h else f"{m}:{s:02d}"


def where_column(j: dict) -> str:
    """NODES/REASON: a running job's nodes; a waiting job's reason (None before the scheduler
    looked at it); how a finished one ended ('-' when it simply finished: never a waiting reason)."""
    if j["state"] == "running":
        return j["nodes"] or "-"
    if j["state"] == "pending":
        return "JobHeldUser" if j["held"] else (j["reason"] or "None")
    if j["reason"] in WAIT_REASONS or j["reason"].startswith(("QuotaExceeded(", "Preempted(")):
        return "-"
    return j["reason"] or "-"


# why a job waits (docs/runtime.md, docs/queues.md): a finished job never shows one
WAIT_REASONS = {"Priority", "Resources", "FairShare", "WaitingForReclaim", "NextRound", "None",
                "Preempted", "Requeued", "NodeFail", "JobHeldUser"}


def _when(unix: float) -> str:
    """A time for a table: HH:MM:SS today, else MM-DD HH:MM."""
    lt = time.localtime(unix)
    return time.strftime("%H:%M:%S" if lt[:3] == time.localtime()[:3] else "%m-%d %H:%M", lt)


def in_spec_file(err, spec: Path):
    """A refusal of a field, the service's (e.g. "field 'queue': ...") or the spec file's own
    check's, as one line naming the spec file and the field's line in it; other errors as they
    are."""
    import re

    from quanta.errors import QuantaError
    if err.field and err.line is None and err.source == str(spec):
        name, message = err.field, err.bare
    else:
        m = re.fullmatch(r"field '([A-Za-z_]+)': (.*)", str(err))
        if not m:
            return err
        name, message = m[1], m[2]
    key = name.split(".")[0]
    line = None
    try:
        for i, text in enumerate(Path(spec).read_text().splitlines(), 1):
            if re.match(rf"{re.escape(key)}\s*:", text):
                line = i
                break
    except (OSError, UnicodeDecodeError):
        pass
    return QuantaError(message, source=str(spec), line=line, field=name)


def _stamp(unix: float | None) -> str:
    return time.strftime("%m-%d %H:%M:%S", time.localtime(unix)) if unix else "Unknown"


def since_time(text: str, now: float | None = None) -> float:
    """--since: a date or date-time (local), a time of today (HH:MM[:SS]), a span ago (90m, 6h,
    2d, 30s) or unix seconds; a QuantaError naming --since otherwise."""
    import datetime as dt
    import re

    from quanta.errors import QuantaError
    now = time.time() if now is None else now
    text = text.strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhd])", text)
    if m:
        at = now - float(m[1]) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[m[2]]
    elif re.fullmatch(r"\d{9,}(\.\d+)?", text):
        at = float(text)
    else:
        if re.fullmatch(r"\d{1,2}:\d{2}(:\d{2})?", text):
            text = time.strftime("%Y-%m-%d", time.localtime(now)) + "T" + text
        try:
            day = dt.datetime.fromisoformat(text)
        except ValueError:
            raise QuantaError(f"'{text}' is not a date (2026-11-24[T15:00]), a time (15:00), a "
                              "span ago (90m, 6h, 2d) or unix seconds", field="--since") from None
        try:
            at = day.timestamp()
        except (OverflowError, OSError, ValueError):   # (year 1: out of the platform's range)
            at = -1.0
    if not 0 <= at < float("inf"):         # (the service's words were for its own 'since')
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise QuantaError(f"'{shown}' is before 1970 (unix time 0)", field="--since")
    return at


def positions(client, jobs: list[dict]) -> dict | None:
    """Positions and estimated starts of the page's waiting jobs ({job id: ...}), or None when the
    service has no queues (or is older: no such endpoint)."""
    from quanta.errors import QuantaError
    ids = [j["id"] for j in jobs if j["state"] == "pending"]
    if not ids:
        return None
    try:
        got = client.call("GET", "/v1/positions", params={"after": min(ids) - 1, "upto": max(ids)})
    except QuantaError:
        return None
    return got["positions"] if got.get("queues") else None


def register(app: typer.Typer, console: Callable) -> None:
    """The commands, printing on `console()` (made on first use)."""
    def out_json(obj) -> None:
        print_json(obj)

    def say(text: str) -> None:
        """One line that holds user data: printed as it is (no markup, no highlighting)."""
        console().print(rich_text(printable(text, tabs=True)), highlight=False, soft_wrap=True)

    @app.command()
    def serve(
        host: str = typer.Option("127.0.0.1", help="address to listen on"),
        port: Optional[int] = typer.Option(None, min=1, max=65535, help="port (default: that of "
                                           "$QUANTA_URL, the address the CLI talks to, else "
                                           "8472)"),
        state: Path = typer.Option(Path("quanta-state"), help="state folder (SQLite, job folders, "
                                   "admin token)"),
        policy: str = typer.Option("fifo", help="policy NAME[:key=value,...] (see `quanta policies`)"),
        cluster: str = typer.Option("auto", help="auto (this machine's GPUs, else one CPU slot "
                                    "per core), a preset, YAML file or TYPE:NODESxGPUS"),
        backend: str = typer.Option("local", help="local | ray"),
        ray_address: str = typer.Option("", help="Ray cluster address (backend ray; default: "
                                        "start or join a local one)"),
        poll_s: float = typer.Option(0.25, min=0.01, max=60, help="seconds between runtime "
                                     "iterations"),
        queues: Optional[Path] = typer.Option(None, "--queues", metavar="FILE", help="queues file "
                                              "(docs/queues.md): the policy under its quotas, "
                                              "fair share and priorities; submissions checked "
                                              "against it"),
        users: Optional[Path] = typer.Option(None, "--users", metavar="FILE", help="users file: "
                                             "the OS account each user's jobs run as when the "
                                             "service runs as root (default: $QUANTA_USERS, else "
                                             "STATE/users.yaml; docs/runtime.md)"),
    ) -> None:
        """Run the scheduler service (REST API at /v1, OpenAPI at /openapi.json, metrics at
        /metrics)."""
        import uvicorn

        from quanta.service.server import ServiceConfig, build, check_port
        from quanta.errors import QuantaError
        if port is None:
            from urllib.parse import urlparse
            try:
                port = urlparse(os.environ.get("QUANTA_URL", "")).port or 8472
            except ValueError as e:
                raise QuantaError(f"$QUANTA_URL: {e}", field="--port") from None
        if not host.strip():                 # (uvicorn reads "" as every interface)
            raise QuantaError("is empty: name an address (127.0.0.1, or 0.0.0.0 for every "
                              "interface)", field="--host")
        check_port(host, port)
        if users is not None and not users.is_file():
            raise QuantaError("no such file", source=str(users), field="--users")
        if state.exists() and not state.is_dir():
            raise QuantaError("is a file, not a state folder", source=str(state), field="--state")
        try:
            _store, runtime, api, token_path = build(ServiceConfig(
                state, policy, cluster, backend, poll_s, ray_address, users, queues))
        except OSError as e:              # the state folder (or a file in it) cannot be made
            raise QuantaError(f"cannot use the state folder ({e.strerror or e}"
                              f"{': ' + str(e.filename) if e.filename else ''})",
                              source=str(state), field="--state") from None
        tree = runtime.tree
        console().print(f"quanta serve: {runtime.cluster.describe()} under "
                        f"{runtime.policy.label()} ({backend} backend); http://{host}:{port}/  "
                        f"admin token: {token_path if token_path.exists() else 'none on file'}",
                        highlight=False, markup=False)
        if tree is not None:
            say(f"queues: {tree.describe()} ({tree.source})")
            for note in tree.notes(runtime.cluster.types):
                say(f"note: {note}")
        uvicorn.run(api, host=host, port=port, log_level="warning")

    @app.command()
    def submit(spec: Path = typer.Argument(..., help="job spec YAML"), url: Optional[str] = URL,
               token: Optional[str] = TOKEN, as_json: bool = JSON) -> None:
        """Submit a job (see `quanta schema` for the fields). A submission whose answer is lost
        (the service died mid-request) is retried under the same idempotency key: one job."""
        from quanta.errors import QuantaError
        from quanta.runtime.spec import load_submission
        try:
            sub = load_submission(spec)
        except QuantaError as err:          # a field's own check: at its line too
            raise in_spec_file(err, spec) from None
        try:
            res = _client(url, token).submit(sub.model_dump())
        except QuantaError as err:          # the service's word on a field: at its line here
            raise in_spec_file(err, spec) from None
        if as_json:
            out_json(res)
        else:
            console().print(f"Submitted job {res['id']}", highlight=False)

    @app.command()
    def schema() -> None:
        """Print the JSON Schema of a job spec."""
        from quanta.runtime.spec import JobSubmission
        print_json(JobSubmission.model_json_schema())

    @app.command()
    def queue(all_states: bool = typer.Option(False, "--all", "-a", help="finished jobs too"),
              limit: int = typer.Option(100, "--limit", "-l", min=1, max=10_000,
                                        help="jobs per page"),
              after: int = typer.Option(0, "--after", min=0, help="the page after this job id"),
              url: Optional[str] = URL, token: Optional[str] = TOKEN, as_json: bool = JSON) -> None:
        """List your pending and running jobs (an admin sees everyone's), a page at a time."""
        c = _client(url, token)
        jobs, total, nxt = c.page("/v1/jobs" if all_states else "/v1/queue",
                                  {"limit": limit, "after": after})
        pos = positions(c, jobs)
        if pos is not None:
            for j in jobs:
                p = pos.get(str(j["id"])) if j["state"] == "pending" else None
                j["position"] = p["position"] if p else None
                j["est_start"] = p["est_start"] if p else None
        if as_json:
            out_json(jobs)
            return
        now = time.time()
        t = rich_table(pad_edge=False)
        cols = ["JOBID", "NAME", "USER", "QUEUE", "STATE", "TIME", "GPUS", "NODES/REASON"]
        cols += ["POS", "EST START"] if pos is not None else []
        rows = []
        for j in jobs:
            ran = j["run_s"] if "run_s" in j else \
                ((j["end_time"] or now) - j["start"]) if j["start"] else 0.0   # (an older service)
            cells = [j["id"], j["name"], j["user"], j["queue"], j["state"].upper(), _hms(ran),
                     j["gpus"] or j["spec"].get("gpus", ""), where_column(j)]
            if pos is not None:
                cells += ["" if j["position"] is None else j["position"],
                          "" if j["est_start"] is None else _when(j["est_start"])]
            rows.append([printable(v, tabs=True) for v in cells])
        # where the table is wider than the screen, NODES/REASON is cut (a long reason squeezed
        # every other column to a letter or two); the other columns keep their width
        out, at = console(), cols.index("NODES/REASON")
        bare = rich_table(pad_edge=False)            # the table without the reasons: its width
        for col in cols:
            t.add_column(col, no_wrap=True)
            bare.add_column(col, no_wrap=True)
        for r in rows:
            bare.add_row(*(rich_text(v if k != at else "") for k, v in enumerate(r)))
        room = max(len(cols[at]), out.width - out.measure(bare).maximum + len(cols[at]))
        for r in rows:
            if len(r[at]) > room:
                r[at] = r[at][:room - 1] + "…"
            t.add_row(*(rich_text(v) for v in r))
        out.print(t)
        if nxt is not None:
            console().print(f"{len(jobs)} of {total} jobs shown; next page: quanta queue"
                            f"{' --all' if all_states else ''} --after {nxt}"
                            f"{f' --limit {limit}' if limit != 100 else ''}",
                            highlight=False, markup=False)

    def _act(what: str, job_ids: List[int], url, token, as_json) -> None:
        """The action on every job asked for, each answered; a job it cannot be done to (no such
        job, already finished) is one line on stderr, and the exit is 2 once all are done."""
        from quanta.service.client import ServiceRefused
        c = _client(url, token)
        res, failed = [], []
        for j in job_ids:
            try:
                res.append(c.action(j, what))
            except ServiceRefused as err:      # this job (none such, finished, not yours): go on
                if err.status not in (403, 404, 409):
                    raise
                failed.append(err)
        if as_json:
            out_json(res)
        else:
            for r in res:
                say(f"job {r['id']}: {r['unchanged']}, nothing to {r['requested']}"
                    if r.get("unchanged") else f"job {r['id']}: {r['requested']} requested")
        for err in failed[:-1]:
            console(stderr=True).print(f"error: {err}", highlight=False, markup=False,
                                       soft_wrap=True)
        if failed:
            raise failed[-1]

    @app.command()
    def cancel(job_ids: List[int] = typer.Argument(..., help="job ids"), url: Optional[str] = URL,
               token: Optional[str] = TOKEN, as_json: bool = JSON) -> None:
        """Cancel jobs (a running job checkpoints and stops)."""
        _act("cancel", job_ids, url, token, as_json)

    @app.command()
    def hold(job_ids: List[int] = typer.Argument(..., help="job ids"), url: Optional[str] = URL,
             token: Optional[str] = TOKEN, as_json: bool = JSON) -> None:
        """Hold jobs: they wait (a running one checkpoints and stops) until released."""
        _act("hold", job_ids, url, token, as_json)

    @app.command()
    def release(job_ids: List[int] = typer.Argument(..., help="job ids"), url: Optional[str] = URL,
                token: Optional[str] = TOKEN, as_json: bool = JSON) -> None:
        """Release held jobs."""
        _act("release", job_ids, url, token, as_json)

    @app.command()
    def status(job_id: Optional[int] = typer.Argument(None, help="a job id; none: the cluster"),
               url: Optional[str] = URL, token: Optional[str] = TOKEN, as_json: bool = JSON) -> None:
        """A job's state, allocation, progress and history; without an id, the cluster."""
        c = _client(url, token)
        if job_id is None:
            cl = c.cluster()
            if as_json:
                out_json(cl)
                return
            say(f"{cl['name']}: policy {cl['policy']}, backend {cl['backend']}")
            for ty in cl["types"]:
                say(f"  {ty['gpu_type']:8s} {ty['allocated']}/{ty['total']} allocated")
            down = [n["name"] for n in cl["nodes"] if not n["up"]]
            if down:
                say(f"  nodes down: {', '.join(down)}")
            return
        j, ev = c.job(job_id), c.events(job_id)
        if as_json:
            out_json({**j, "events": ev})
            return
        say(f"job {j['id']} {j['name']} ({j['user']}, queue {j['queue']}): "
            f"{j['state'].upper()}{' held' if j['held'] else ''}"
            f"{' - ' + j['reason'] if j['reason'] else ''}")
        # (a job that is not running holds nothing: its record keeps where it last ran)
        where = f"{j['gpus']} x {j['gpu_type'] or '-'} {j['nodes']}" if j["state"] == "running" \
            else "no devices now" + (f" (last on {j['nodes']})" if j["nodes"] else "")
        say(f"  progress {int(j['steps_done'])}/{int(j['total_steps']) or '?'} steps, "
            f"{j['steps_per_s']:.2f} steps/s; {where}; preemptions {j['preemptions']}, "
            f"failures {j['failures']}, attempts {j['attempt']}")
        if not j["total_steps"]:
            say("  no step count: the job ends when its command exits; a job that does "
                "not checkpoint with the job SDK restarts from scratch when preempted")
        for e in ev:
            stamp = time.strftime("%H:%M:%S", time.localtime(e["time"]))
            say(f"  {stamp} {e['kind']:14s} {e['detail']}")

    @app.command()
    def logs(job_id: int = typer.Argument(..., help="job id"),
             tail: int = typer.Option(200, "--tail", "-n", min=1, max=MAX_TAIL,
                                      help="last N lines"),
             url: Optional[str] = URL, token: Optional[str] = TOKEN, as_json: bool = JSON) -> None:
        """Print the end of a job's log (rank 0's output)."""
        text = _client(url, token).logs(job_id, tail)
        if as_json:
            out_json({"id": job_id, "log": text})
        else:     # the job's own output, as it wrote it, but no escape sequence reaches the terminal
            typer.echo("".join(printable(ln, tabs=True) + "\n" for ln in text.splitlines()),
                       nl=False)

    @app.command()
    def sacct(user: Optional[str] = typer.Option(None, "--user", "-u", help="only this user's "
                                                 "jobs (an admin; a user sees their own)"),
              queue: Optional[str] = typer.Option(None, "--queue", "-q", help="only this queue"),
              since: Optional[str] = typer.Option(None, "--since", "-S", metavar="WHEN",
                                                  help="jobs that ended since WHEN: a date "
                                                  "(2026-11-24, 2026-11-24T15:00), a time "
                                                  "today (15:00) or a span ago (90m, 6h, 2d)"),
              by: Optional[str] = typer.Option(None, "--by", metavar="user|queue",
                                               help="totals per user or per queue"),
              url: Optional[str] = URL, token: Optional[str] = TOKEN, as_json: bool = JSON) -> None:
        """History of finished jobs (as Slurm's sacct): how each ended, start, end, elapsed time,
        GPU-hours per GPU type; --by user|queue for totals."""
        from quanta.errors import QuantaError
        if by is not None and by not in ("user", "queue"):
            raise QuantaError(f"'{by}' is not user or queue", field="--by")
        params = {k: v for k, v in (("user", user), ("queue", queue), ("by", by),
                                    ("since", None if since is None else since_time(since)))
                  if v is not None}
        res = _client(url, token).call("GET", "/v1/sacct", params=params)
        if as_json:
            out_json(res if by else res["jobs"])
            return
        types = sorted({ty for r in res["totals" if by else "jobs"] for ty in r["gpu_hours"]})
        t = rich_table(pad_edge=False)
        if by:
            cols = [by.upper(), "JOBS", "FINISHED", "FAILED", "CANCELLED", "ELAPSED H"]
            rows = [[r[by], r["jobs"], r["finished"], r["failed"], r["cancelled"],
                     f"{r['elapsed_h']:.2f}"] + [f"{r['gpu_hours'].get(ty, 0.0):.3f}"
                                                 for ty in types]
                    + [f"{r['gpu_hours_total']:.3f}"] * (len(types) > 1) for r in res["totals"]]
        else:
            cols = ["JOBID", "NAME", "USER", "QUEUE", "STATE", "START", "END", "ELAPSED"]
            rows = [[r["id"], r["name"], r["user"], r["queue"], r["state"].upper(),
                     _stamp(r["start"]), _stamp(r["end"]), _hms(r["elapsed_s"])]
                    + [f"{r['gpu_hours'].get(ty, 0.0):.3f}" for ty in types]
                    + [f"{sum(r['gpu_hours'].values()):.3f}"] * (len(types) > 1)
                    + [r["reason"]] for r in res["jobs"]]
        for col in cols + [f"{ty.upper()} GPU-H" for ty in types] + ["GPU-H"] * (len(types) > 1):
            t.add_column(col, no_wrap=True)
        if not by:
            t.add_column("HOW IT ENDED", overflow="fold", ratio=1, min_width=12)
        for r in rows:
            t.add_row(*(rich_text(printable(v, tabs=True)) for v in r))
        console().print(t)

    @app.command("add-user")
    def add_user(name: str = typer.Argument(..., help="user name"),
                 admin: Optional[bool] = typer.Option(None, "--admin/--no-admin",
                                                      help="make (or unmake) an admin, who sees "
                                                      "all jobs; default: a new user is not one, "
                                                      "an existing user keeps its role"),
                 url: Optional[str] = URL, token: Optional[str] = TOKEN, as_json: bool = JSON) -> None:
        """Create a user (or renew its token); prints the token. Needs an admin token. The last
        admin cannot be made a plain user."""
        res = _client(url, token).add_user(name, admin)
        if as_json:
            out_json(res)
        else:
            typer.echo(res["token"])

