"""The HTTP client behind `quanta submit/queue/cancel/status/logs`.

Where: --url, else $QUANTA_URL, else http://127.0.0.1:8472. Who: --token, else $QUANTA_TOKEN, else
the admin token file of the state folder ($QUANTA_STATE, default ./quanta-state) when readable.
Every failure is a QuantaError with one line (the server's own message for 4xx answers).

Retries: a request that may have reached the service but got no answer (the connection broke, the
service died mid-request) is sent again, with a growing pause, until $QUANTA_RETRY_S seconds
(default 30) have passed, while the service is down or restarting; only requests that are safe to
repeat are: reads, cancel/hold/release, and submissions, which carry an idempotency key (the
service answers a repeated key with the first submission's job). A service that refuses the very
first connection is reported at once (nothing was sent).
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from quanta.errors import QuantaError

DEFAULT_URL = "http://127.0.0.1:8472"
RETRY_S = 30.0
PAUSE_S, PAUSE_CAP_S = 0.25, 2.0


def default_token() -> str:
    token = os.environ.get("QUANTA_TOKEN", "")
    if token:
        return token
    path = Path(os.environ.get("QUANTA_STATE", "quanta-state")) / "admin.token"
    try:
        return path.read_text().strip()
    except OSError:
        return ""


class ServiceRefused(QuantaError):
    """The service answered with an error status (`status`): its one line, and the status."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


def _where(r: httpx.Response) -> str:
    """The address an answer came from, without its query."""
    return str(r.url).partition("?")[0]


def retry_seconds() -> float:
    """$QUANTA_RETRY_S (default RETRY_S): a number of seconds, 0 or more."""
    text = os.environ.get("QUANTA_RETRY_S", "")
    if not text.strip():
        return RETRY_S
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 <= value < float("inf"):
        raise QuantaError(f"want a number of seconds, 0 or more, got '{text}'",
                          field="$QUANTA_RETRY_S")
    return value


class Client:
    def __init__(self, url: str | None = None, token: str | None = None, timeout: float = 30.0):
        for flag, given in (("--url", url), ("--token", token)):
            if given is not None and not given.strip():   # (it fell back to the default unsaid)
                raise QuantaError("is empty", field=flag)
        self.url = (url or os.environ.get("QUANTA_URL") or DEFAULT_URL).rstrip("/")
        where = "--url" if url else "$QUANTA_URL"
        try:
            parts = urlsplit(self.url)
            parts.port                                  # (a port that is no number, or > 65535)
        except ValueError as e:
            raise QuantaError(f"'{self.url}' is not a service address ({e})", field=where) from None
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or \
                parts.fragment or any(c.isspace() for c in self.url):
            raise QuantaError(f"'{self.url}' is not a service address (http://HOST:PORT)",
                              field=where)
        if parts.path.rstrip("/").endswith("/v1"):     # (every request was 404)
            raise QuantaError(f"'{self.url}' is the API's path: give the service's address "
                              f"without /v1", field=where)
        self.token = token or default_token()
        if self.token and not all("!" <= c <= "~" for c in self.token):   # (never echoed)
            src = "--token" if token else "$QUANTA_TOKEN" if os.environ.get("QUANTA_TOKEN") \
                else "the admin token file"
            raise QuantaError("the token holds a space or a character no token has (tokens are "
                              "printable ASCII)", field=src)
        self.timeout = timeout
        self.retry_s = retry_seconds()

    def request(self, method: str, path: str, json: Any = None, params: dict | None = None,
                headers: dict | None = None, retry: bool = False) -> httpx.Response:
        """The answer (any status); a connection that broke mid-request is retried when `retry`
        (see the module's doc)."""
        headers = {**({"Authorization": f"Bearer {self.token}"} if self.token else {}),
                   **(headers or {})}
        deadline, pause, sent = None, PAUSE_S, False
        while True:
            try:
                return httpx.request(method, self.url + path, json=json, params=params,
                                     headers=headers, timeout=self.timeout)
            except httpx.InvalidURL as err:
                raise QuantaError(f"'{self.url}' is not a service address ({err})") from None
            except httpx.HTTPError as err:
                if not isinstance(err, (httpx.ConnectError, httpx.LocalProtocolError)):
                    sent = True           # it may have reached the service
                if not (retry and sent):
                    raise QuantaError(f"cannot reach the Quanta service at {self.url} ({err}); "
                                      "is `quanta serve` running?") from None
                if deadline is None:
                    deadline = time.monotonic() + self.retry_s
                if time.monotonic() + pause > deadline:
                    raise QuantaError(f"the Quanta service at {self.url} stopped answering ({err}) "
                                      "and did not come back") from None
                time.sleep(pause)
                pause = min(PAUSE_CAP_S, pause * 2)

    def call(self, method: str, path: str, json: Any = None, params: dict | None = None,
             text: bool = False, headers: dict | None = None, retry: bool | None = None) -> Any:
        return self.answer(self.request(method, path, json, params, headers,
                                        method == "GET" if retry is None else retry), text)

    def answer(self, r: httpx.Response, text: bool = False) -> Any:
        if r.status_code == 401 and not self.token:       # where a token is looked for
            state = os.environ.get("QUANTA_STATE", "quanta-state")
            raise ServiceRefused(f"no token was given: --token, $QUANTA_TOKEN, or "
                                 f"{state}/admin.token readable here (HTTP 401)", 401)
        if r.status_code >= 400:
            try:
                msg = r.json().get("error") or r.text
            except (ValueError, AttributeError):
                if "html" in r.headers.get("content-type", "").lower():   # (its page, shown)
                    raise ServiceRefused(f"{_where(r)} answered with a web page (HTTP "
                                         f"{r.status_code}): is it a Quanta service?",
                                         r.status_code) from None
                msg = r.text
            msg = "".join(c if c.isprintable() else f"\\x{ord(c) & 0xff:02x}"
                          for c in " ".join(str(msg).split()))     # no escape sequence
            if len(msg) > 300:                    # (another server's whole error page)
                msg = msg[:297] + "..."
            raise ServiceRefused(f"{msg} (HTTP {r.status_code})", r.status_code)
        if text:
            return r.text
        try:
            return r.json()
        except ValueError:
            raise QuantaError(f"{_where(r)} answered with no JSON (HTTP {r.status_code}, "
                              f"{r.headers.get('content-type', 'no content type')}): is it a "
                              f"Quanta service?") from None

    def submit(self, body: dict, key: str | None = None) -> dict:
        """Submit once: under one idempotency key (a new one by default), so a retry after a lost
        answer is the same job."""
        return self.call("POST", "/v1/jobs", json=body, retry=True,
                         headers={"Idempotency-Key": key or uuid.uuid4().hex})

    def page(self, path: str, params: dict) -> tuple[list[dict], int, int | None]:
        """One page of a job list: (jobs, total, the `after` of the next page or None)."""
        r = self.request("GET", path, params=params, retry=True)
        jobs = self.answer(r)
        total = int(r.headers.get("x-total-count", len(jobs)))
        nxt = r.headers.get("x-next-after")
        return jobs, total, int(nxt) if nxt else None

    def queue(self, limit: int | None = None, after: int = 0) -> list[dict]:
        params = {"after": after, **({"limit": limit} if limit else {})}
        return self.call("GET", "/v1/queue", params=params)

    def jobs(self, states: list[str] | None = None, limit: int | None = None,
             after: int = 0) -> list[dict]:
        params = {"after": after, **({"limit": limit} if limit else {}),
                  **({"state": states} if states else {})}
        return self.call("GET", "/v1/jobs", params=params)

    def job(self, job_id: int) -> dict:
        return self.call("GET", f"/v1/jobs/{job_id}")

    def events(self, job_id: int) -> list[dict]:
        return self.call("GET", f"/v1/jobs/{job_id}/events")

    def action(self, job_id: int, what: str) -> dict:
        return self.call("POST", f"/v1/jobs/{job_id}/{what}", retry=True)   # idempotent

    def logs(self, job_id: int, tail: int) -> str:
        return self.call("GET", f"/v1/jobs/{job_id}/logs", params={"tail": tail}, text=True)

    def cluster(self) -> dict:
        return self.call("GET", "/v1/cluster")

    def add_user(self, name: str, admin: bool | None = None) -> dict:
        body = {"name": name} if admin is None else {"name": name, "admin": admin}
        return self.call("POST", "/v1/users", json=body)


def wait_until_up(url: str, proc=None, timeout_s: float = 60.0) -> bool:
    """Poll `url`/v1/health until it answers 200 (True), the service process `proc` (a Popen)
    exits, or `timeout_s` passes (False)."""
    import time

    import httpx
    end = time.time() + timeout_s
    while time.time() < end:
        try:
            if httpx.get(url.rstrip("/") + "/v1/health", timeout=1).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        if proc is not None and proc.poll() is not None:
            return False
        time.sleep(0.2)
    return False
