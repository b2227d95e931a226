"""The HTTP client behind `quanta submit/queue/cancel/status/logs`.

Where: --url, else $QUANTA_URL, else http://127.0.0.1:8472. Who: --token, else $QUANTA_TOKEN, else
the admin token file of the state folder ($QUANTA_STATE, default ./quanta-state) when readable.
Every failure is a QuantaError with one line (the server's own message for 4xx answers).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx

from quanta.errors import QuantaError

DEFAULT_URL = "http://127.0.0.1:8472"


def default_token() -> str:
    token = os.environ.get("QUANTA_TOKEN", "")
    if token:
        return token
    path = Path(os.environ.get("QUANTA_STATE", "quanta-state")) / "admin.token"
    try:
        return path.read_text().strip()
    except OSError:
        return ""


class Client:
    def __init__(self, url: str | None = None, token: str | None = None, timeout: float = 30.0):
        self.url = (url or os.environ.get("QUANTA_URL") or DEFAULT_URL).rstrip("/")
        self.token = token or default_token()
        self.timeout = timeout

    def call(self, method: str, path: str, json: Any = None, params: dict | None = None,
             text: bool = False) -> Any:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            r = httpx.request(method, self.url + path, json=json, params=params, headers=headers,
                              timeout=self.timeout)
        except httpx.HTTPError as err:
            raise QuantaError(f"cannot reach the Quanta service at {self.url} ({err}); "
                              "is `quanta serve` running?") from None
        if r.status_code >= 400:
            try:
                msg = r.json().get("error") or r.text
            except ValueError:
                msg = r.text
            raise QuantaError(f"{msg} (HTTP {r.status_code})")
        return r.text if text else r.json()

    def submit(self, body: dict) -> dict:
        return self.call("POST", "/v1/jobs", json=body)

    def queue(self) -> list[dict]:
        return self.call("GET", "/v1/queue")

    def jobs(self, states: list[str] | None = None) -> list[dict]:
        return self.call("GET", "/v1/jobs", params={"state": states} if states else None)

    def job(self, job_id: int) -> dict:
        return self.call("GET", f"/v1/jobs/{job_id}")

    def events(self, job_id: int) -> list[dict]:
        return self.call("GET", f"/v1/jobs/{job_id}/events")

    def action(self, job_id: int, what: str) -> dict:
        return self.call("POST", f"/v1/jobs/{job_id}/{what}")

    def logs(self, job_id: int, tail: int) -> str:
        return self.call("GET", f"/v1/jobs/{job_id}/logs", params={"tail": tail}, text=True)

    def cluster(self) -> dict:
        return self.call("GET", "/v1/cluster")

    def add_user(self, name: str, admin: bool) -> dict:
        return self.call("POST", "/v1/users", json={"name": name, "admin": admin})
