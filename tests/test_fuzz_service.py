"""Property-based fuzzing (hypothesis) of the real service's API and of job spec files: thousands of
generated bodies, headers, paths and queries, and spec files of random text or bytes. Never a 5xx,
never a traceback; every error body is `{"error": "<one line>"}`, naming the field when there is
one; the service stays up and healthy."""

import json
import string
import sys
import time

import httpx
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_service import Service

pytestmark = pytest.mark.slow          # about 100 s: thousands of requests and spec files
PY = sys.executable
FIELDS = ["name", "command", "steps", "gpus", "batch_size", "gpu_type", "queue", "model", "weight",
          "min_gpus", "max_gpus", "cwd", "env", "checkpoint_every", "grace_s", "max_failures"]
SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


@pytest.fixture(scope="module")
def svc(tmp_path_factory):
    # a round-based policy whose first round after its start is an hour away: whatever a
    # generated submission asks for is stored and validated, never run
    s = Service(tmp_path_factory.mktemp("fuzz") / "state", policy="gavel-las:interval=3600",
                cluster="cpu:1x2").start()
    s.http = httpx.Client(base_url=s.url, timeout=30,
                          headers={"Authorization": f"Bearer {s.admin}"})
    yield s
    s.http.close()
    s.stop()


def post_json(svc, path, body, headers=None):
    """The body as Python writes JSON (NaN and Infinity included, as a careless client would)."""
    return svc.http.post(path, content=json.dumps(body).encode(),
                         headers={"content-type": "application/json", **(headers or {})})


def check(r: httpx.Response, body_is_object: bool = False) -> None:
    assert r.status_code < 500, (r.status_code, r.text)
    if r.status_code >= 400:
        err = r.json()
        assert isinstance(err, dict) and list(err) == ["error"], r.text
        msg = err["error"]
        assert isinstance(msg, str) and msg and "\n" not in msg and "Traceback" not in msg, msg
        if r.status_code == 422 and body_is_object:     # a field at fault is named
            assert msg.startswith(("field '", "the request body")), msg


# text, sometimes with what JSON can carry but a process cannot take: lone surrogates, control
# characters (hypothesis' text leaves surrogates out by default)
texts = st.text(max_size=30) | st.text(st.characters(categories=["Cs", "Cc", "Lu", "Nd"]),
                                       max_size=6)
scalars = (st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70)
           | st.floats() | texts)
json_values = st.recursive(scalars, lambda c: st.lists(c, max_size=4)
                           | st.dictionaries(st.text(max_size=8), c, max_size=4), max_leaves=12)
words = st.text(string.ascii_letters + string.digits + "_.-", min_size=1, max_size=12)
field_values = {
    "name": words | json_values, "queue": words | json_values,
    "command": st.lists(texts, min_size=0, max_size=3) | json_values,
    "steps": st.integers(-5, 2**60) | json_values, "gpus": st.integers(-2, 5000) | json_values,
    "gpu_type": st.lists(st.sampled_from(["cpu", "CPU", "a100", ""]) | words, max_size=3)
    | st.sampled_from(["cpu", "v100"]) | json_values,
    "env": st.dictionaries(texts, texts, max_size=3) | json_values,
    "cwd": texts | json_values, "model": texts | json_values,
    "weight": st.floats() | json_values,
}


@st.composite
def job_bodies(draw):
    """Mostly near-valid submissions (a few fields off), some arbitrary JSON."""
    if draw(st.integers(0, 9)) == 0:
        return draw(json_values)
    body = {"name": "fz", "command": ["true"], "steps": 5}
    for f in draw(st.lists(st.sampled_from(FIELDS + ["extra"]), max_size=4, unique=True)):
        body[f] = draw(field_values.get(f, json_values))
    return body


@settings(max_examples=1500, **SETTINGS)
@given(body=job_bodies(), key=st.none() | st.text(max_size=20))
def test_submissions_never_5xx(svc, body, key):
    headers = {}
    if key is not None:
        headers["Idempotency-Key"] = key.encode("utf-8", "replace").decode("latin-1", "replace")
    try:
        r = post_json(svc, "/v1/jobs", body, headers)
    except (UnicodeEncodeError, ValueError, httpx.LocalProtocolError):   # httpx refuses such
        return                                                             # a header: not sent
    check(r, isinstance(body, dict))
    if r.status_code == 201:
        job = svc.http.get(f"/v1/jobs/{r.json()['id']}")
        check(job)
        assert job.status_code == 200


@settings(max_examples=400, **SETTINGS)
@given(raw=st.binary(max_size=200) | st.text(max_size=200).map(str.encode),
       ctype=st.sampled_from(["application/json", "text/plain", ""]))
def test_raw_bodies_never_5xx(svc, raw, ctype):
    check(svc.http.post("/v1/jobs", content=raw, headers={"content-type": ctype} if ctype else {}))
    check(svc.http.post("/v1/users", content=raw, headers={"content-type": "application/json"}))


@settings(max_examples=600, **SETTINGS)
@given(path=st.sampled_from(["/v1/jobs/{}", "/v1/jobs/{}/events", "/v1/jobs/{}/logs",
                             "/v1/queue", "/v1/jobs", "/v1/jobs/{}/cancel", "/v1/jobs/{}/hold"]),
       job=st.integers(-5, 2**80) | st.text(string.printable, max_size=10),
       params=st.dictionaries(st.sampled_from(["limit", "after", "tail", "state", "user"]),
                              st.integers(-2**70, 2**70) | st.text(max_size=10), max_size=3))
def test_paths_and_queries_never_5xx(svc, path, job, params):
    from urllib.parse import quote
    url = path.format(quote(str(job), safe=""))
    method = "POST" if url.endswith(("cancel", "hold")) else "GET"
    try:
        r = svc.http.request(method, url, params=params)
    except (httpx.InvalidURL, UnicodeEncodeError):
        return
    check(r)


@settings(max_examples=300, **SETTINGS)
@given(body=st.fixed_dictionaries({"name": words | json_values},
                                  optional={"admin": st.booleans() | json_values}) | json_values)
def test_user_bodies_never_5xx(svc, body):
    if isinstance(body, dict) and body.get("name") == "admin":
        return            # (renewing the admin's token would end this module's session)
    check(post_json(svc, "/v1/users", body), isinstance(body, dict))


def test_the_service_is_still_up_and_healthy(svc):
    time.sleep(0.5)
    assert svc.proc.poll() is None
    assert svc.http.get("/v1/health").json() == {"ok": True, "error": ""}
    assert svc.http.get("/metrics").status_code == 200


# -- spec files -----------------------------------------------------------------------------------
def _load(tmp_path, data: bytes):
    from quanta.errors import QuantaError
    from quanta.runtime.spec import load_submission
    path = tmp_path / "job.yaml"
    path.write_bytes(data)
    try:
        load_submission(path)
    except QuantaError as err:
        assert "\n" not in str(err) and str(err).startswith(str(path)), str(err)


@settings(max_examples=1500, **SETTINGS)
@given(data=st.binary(max_size=300))
def test_spec_files_of_random_bytes_are_a_spec_or_one_line(tmp_path, data):
    _load(tmp_path, data)


@settings(max_examples=800, **SETTINGS)
@given(body=job_bodies(), style=st.sampled_from([False, True]), dup=st.booleans())
def test_spec_files_of_generated_yaml_are_a_spec_or_one_line(tmp_path, body, style, dup):
    text = yaml.safe_dump(body, default_flow_style=style, allow_unicode=True)
    if dup and isinstance(body, dict) and body:
        text += f"{json.dumps(next(iter(body)))}: 1\n"       # a key given twice
    _load(tmp_path, text.encode())
