"""`quanta serve` and the Slurm-like job commands: submit, queue, cancel, hold, release, status,
logs, users. Each job command has --json (the service's own JSON) for scripts.

What users wrote (names, queues, commands, error messages) is printed as plain text: never read as
rich markup, its control characters (terminal escape sequences) shown as \\xNN."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import List, Optional

import typer
from rich import box
from rich.table import Table
from rich.text import Text

URL = typer.Option(None, "--url", help="service URL (default $QUANTA_URL or http://127.0.0.1:8472)")
TOKEN = typer.Option(None, "--token", help="API token (default $QUANTA_TOKEN or the admin token file)")
JSON = typer.Option(False, "--json", help="print JSON")


def _client(url: Optional[str], token: Optional[str]):
    from quanta.service.client import Client
    return Client(url, token)


def plain(value: object) -> str:
    """User data for a terminal: control characters (escape sequences, carriage returns, ...)
    written as \\xNN, so a name can neither move the cursor nor recolour the screen."""
    text = str(value)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == "\t" else f"\\x{ord(c):02x}" if ord(c) < 256 else
                   f"\\u{ord(c):04x}" for c in text)


def _hms(seconds: float) -> str:
    s = int(max(0, seconds))
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return (f"{d}-" if d else "") + f"{h:02d}:{m:02d}:{s:02d}" if d or h else f"{m}:{s:02d}"


def where_column(j: dict) -> str:
    """NODES/REASON: a running job's nodes; a waiting job's reason (None before the scheduler
    looked at it); how a finished one ended ('-' when it simply finished)."""
    if j["state"] == "running":
        return j["nodes"] or "-"
    if j["state"] == "pending":
        return "JobHeldUser" if j["held"] else (j["reason"] or "None")
    return j["reason"] or "-"


def register(app: typer.Typer, console) -> None:
    def out_json(obj) -> None:
        console.print_json(json.dumps(obj))

    def say(text: str) -> None:
        """One line that holds user data: printed as it is (no markup, no highlighting)."""
        console.print(Text(plain(text)), highlight=False, soft_wrap=True)

    @app.command()
    def serve(
        host: str = typer.Option("127.0.0.1", help="address to listen on"),
        port: Optional[int] = typer.Option(None, help="port (default: that of $QUANTA_URL, the "
                                           "address the CLI talks to, else 8472)"),
        state: Path = typer.Option(Path("quanta-state"), help="state folder (SQLite, job folders, "
                                   "admin token)"),
        policy: str = typer.Option("fifo", help="policy NAME[:key=value,...] (see `quanta policies`)"),
        cluster: str = typer.Option("auto", help="auto (this machine's GPUs, else one CPU slot "
                                    "per core), a preset, YAML file or TYPE:NODESxGPUS"),
        backend: str = typer.Option("local", help="local | ray"),
        ray_address: str = typer.Option("", help="Ray cluster address (backend ray; default: "
                                        "start or join a local one)"),
        poll_s: float = typer.Option(0.25, min=0.01, help="seconds between runtime iterations"),
    ) -> None:
        """Run the scheduler service (REST API at /v1, docs at /docs, metrics at /metrics)."""
        import uvicorn

        from quanta.service.server import ServiceConfig, build, check_port
        if port is None:
            from urllib.parse import urlparse
            port = urlparse(os.environ.get("QUANTA_URL", "")).port or 8472
        check_port(host, port)
        _store, runtime, api, token_path = build(ServiceConfig(state, policy, cluster, backend,
                                                               poll_s, ray_address))
        console.print(f"quanta serve: {runtime.cluster.describe()} under {runtime.policy.label()} "
                      f"({backend} backend); http://{host}:{port}/  admin token: {token_path}",
                      highlight=False)
        uvicorn.run(api, host=host, port=port, log_level="warning")

    @app.command()
    def submit(spec: Path = typer.Argument(..., help="job spec YAML"), url: Optional[str] = URL,
               token: Optional[str] = TOKEN, as_json: bool = JSON) -> None:
        """Submit a job (see `quanta schema` for the fields). A submission whose answer is lost
        (the service died mid-request) is retried under the same idempotency key: one job."""
        from quanta.runtime.spec import load_submission
        sub = load_submission(spec)
        res = _client(url, token).submit(sub.model_dump())
        if as_json:
            out_json(res)
        else:
            console.print(f"Submitted job {res['id']}", highlight=False)

    @app.command()
    def schema() -> None:
        """Print the JSON Schema of a job spec."""
        from quanta.runtime.spec import JobSubmission
        console.print_json(json.dumps(JobSubmission.model_json_schema()))

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
        if as_json:
            out_json(jobs)
            return
        now = time.time()
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False)
        for col in ("JOBID", "NAME", "USER", "QUEUE", "STATE", "TIME", "GPUS", "NODES/REASON"):
            t.add_column(col, no_wrap=True)
        for j in jobs:
            ran = ((j["end_time"] or now) - j["start"]) if j["start"] else 0.0
            t.add_row(*(Text(plain(v)) for v in (
                j["id"], j["name"], j["user"], j["queue"], j["state"].upper(), _hms(ran),
                j["gpus"] or j["spec"].get("gpus", ""), where_column(j))))
        console.print(t)
        if nxt is not None:
            console.print(f"{len(jobs)} of {total} jobs shown; next page: quanta queue"
                          f"{' --all' if all_states else ''} --after {nxt}"
                          f"{f' --limit {limit}' if limit != 100 else ''}",
                          highlight=False, markup=False)

    def _act(what: str, job_ids: List[int], url, token, as_json) -> None:
        c = _client(url, token)
        res = [c.action(j, what) for j in job_ids]
        if as_json:
            out_json(res)
        else:
            for r in res:
                say(f"job {r['id']}: {r['requested']} requested")

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
        say(f"  progress {int(j['steps_done'])}/{int(j['total_steps']) or '?'} steps, "
            f"{j['steps_per_s']:.2f} steps/s; {j['gpus']} x {j['gpu_type'] or '-'} "
            f"{j['nodes']}; preemptions {j['preemptions']}, failures {j['failures']}, "
            f"attempts {j['attempt']}")
        if not j["total_steps"]:
            say("  no step count: the job ends when its command exits; a job that does "
                "not checkpoint with the job SDK restarts from scratch when preempted")
        for e in ev:
            stamp = time.strftime("%H:%M:%S", time.localtime(e["time"]))
            say(f"  {stamp} {e['kind']:14s} {e['detail']}")

    @app.command()
    def logs(job_id: int = typer.Argument(..., help="job id"),
             tail: int = typer.Option(200, "--tail", "-n", min=1, help="last N lines"),
             url: Optional[str] = URL, token: Optional[str] = TOKEN, as_json: bool = JSON) -> None:
        """Print the end of a job's log (rank 0's output)."""
        text = _client(url, token).logs(job_id, tail)
        if as_json:
            out_json({"id": job_id, "log": text})
        else:     # the job's own output, as it wrote it, but no escape sequence reaches the terminal
            typer.echo("".join(plain(ln) + "\n" for ln in text.splitlines()), nl=False)

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

