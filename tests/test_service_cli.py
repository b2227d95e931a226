"""The service's command line against a real service on 127.0.0.1: `quanta submit / queue /
status / logs / cancel` as a user types them, and the job-spec files they read (from
test_service.py, which keeps the `service` fixture and the `cli` helper)."""

import os
import time

import pytest

from test_service import PY, cli, free_port, service  # noqa: F401 - the fixture


def test_cli_submit_queue_status_logs_cancel(service, tmp_path):
    import json
    s = service(cluster="cpu:1x1")
    env = {"QUANTA_URL": s.url, "QUANTA_TOKEN": s.admin, "COLUMNS": "200"}
    spec = tmp_path / "job.yaml"
    spec.write_text(f"name: demo\ncommand: [{PY}, -m, quanta.examples.train, --step-sleep, '0.02']\n"
                    "steps: 3000\n")
    r = cli("submit", str(spec), env=env)
    assert r.returncode == 0 and r.stdout.strip() == "Submitted job 1", r.stderr
    second = json.loads(cli("submit", str(spec), "--json", env=env).stdout)["id"]
    s.wait(1, lambda j: j["state"] == "running" and j["steps_done"] > 0)
    q = cli("queue", env=env).stdout
    assert q.split("\n")[1].split() == ["JOBID", "NAME", "USER", "QUEUE", "STATE", "TIME", "GPUS",
                                        "NODES/REASON"]
    rows = {ln.split()[0]: ln.split() for ln in q.splitlines()[3:] if ln.strip()}
    assert rows["1"][4] == "RUNNING" and rows["1"][-1] == "cpu-0-000"
    assert rows[str(second)][4] == "PENDING" and rows[str(second)][-1] in ("Resources", "Priority")
    st = json.loads(cli("status", "1", "--json", env=env).stdout)
    assert st["state"] == "running" and [e["kind"] for e in st["events"]][:2] == ["submit", "start"]
    assert cli("logs", "1", "-n", "5", env=env).returncode == 0
    # a bad id among good ones: every good one is done, each bad one is a line, exit 2 (it used
    # to stop at the first bad id)
    r = cli("cancel", "77", "1", str(second), env=env)
    assert r.returncode == 2 and r.stderr.strip() == "error: no job 77 (HTTP 404)", r.stderr
    assert r.stdout.split("\n")[:2] == ["job 1: cancel requested",
                                        f"job {second}: cancel requested"], r.stdout
    s.wait(1, lambda j: j["state"] == "cancelled")
    s.wait(second, lambda j: j["state"] == "cancelled")
    r = cli("cancel", "1", "78", "79", env=env)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "error: job 1 is already cancelled (HTTP 409)", "error: no job 78 (HTTP 404)",
        "error: no job 79 (HTTP 404)"], r.stderr
    cl = json.loads(cli("status", "--json", env=env).stdout)
    assert cl["types"] == [{"gpu_type": "cpu", "total": 1, "allocated": 0}]
    # errors: one line, exit 2, no traceback
    bad = cli("cancel", "77", env=env)
    assert bad.returncode == 2 and bad.stderr.strip() == "error: no job 77 (HTTP 404)"
    nobody = cli("queue", env={"QUANTA_URL": s.url, "QUANTA_TOKEN": "nope"})
    assert nobody.returncode == 2 and "valid token" in nobody.stderr and "Traceback" not in nobody.stderr
    down = cli("queue", env={"QUANTA_URL": f"http://127.0.0.1:{free_port()}", "QUANTA_TOKEN": "x"})
    assert down.returncode == 2 and "is `quanta serve` running?" in down.stderr


@pytest.mark.parametrize("text,needle", [
    ("name: x\nsteps: 5\n", "job.yaml: field 'command': Field required"),
    ("name: x\ncommand: [echo]\nsteps: 5\ngpus: -1\n", "job.yaml:4: field 'gpus'"),   # its line
    ("name: x\n  command: [echo\n", "job.yaml:2: not valid YAML"),
    ("- 1\n- 2\n", "job.yaml: a job spec is a mapping"),
    # (a model the catalog does not know ran on the generic profile, unsaid)
    ("name: x\ncommand: [echo]\nmodel: resnet50\n", "job.yaml:3: field 'model': 'resnet50' "
     "is not a job type of `quanta catalog`; did you mean 'ResNet-50 (batch size 128)'?"),
    ("name: x\ncommand: [echo]\nmodel: nosuchmodel\n", "'nosuchmodel' is not a job type of "
     "`quanta catalog` (leave it out for the generic profile)"),
])
def test_cli_rejects_a_malformed_job_spec_in_one_line(tmp_path, text, needle):
    spec = tmp_path / "job.yaml"
    spec.write_text(text)
    r = cli("submit", str(spec), env={"QUANTA_URL": "http://127.0.0.1:9", "QUANTA_TOKEN": "x"})
    assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_job_spec_schema_and_bundled_examples_validate():
    import json
    from pathlib import Path as P

    from quanta.runtime.spec import load_submission
    schema = json.loads(cli("schema").stdout)
    assert set(schema["required"]) == {"name", "command"}         # steps optional
    folder = P(__file__).resolve().parents[1] / "quanta" / "examples" / "jobs"
    subs = [load_submission(p) for p in sorted(folder.glob("*.yaml"))]
    assert {s.name for s in subs} >= {"mlp", "cnn", "lm-ddp"}


def test_finished_jobs_show_how_they_ended_not_priority():
    from quanta.cli_jobs import where_column
    base = {"held": False, "nodes": "", "reason": ""}
    assert where_column({**base, "state": "finished"}) == "-"
    assert where_column({**base, "state": "failed", "reason": "exit code 1"}) == "exit code 1"
    assert where_column({**base, "state": "pending"}) == "None"
    assert where_column({**base, "state": "pending", "held": True}) == "JobHeldUser"
    assert where_column({**base, "state": "running", "nodes": "n0"}) == "n0"


@pytest.mark.parametrize("data,needle", [
    (b"name: x\ncommand: [echo]\nsteps: 5\nsteps: 6\n", "job.yaml:4: not valid YAML (duplicate key 'steps')"),
    (b"name: x\ncommand: [echo]\nqueue: caf\xe9\n", "job.yaml:3: not UTF-8 text (byte 0xe9)"),
    (b"name: x\ncommand: [echo]\nenv: {A-B: '1'}\n", "job.yaml:3: field 'env'"),
    # the scheduler's own variables: a job's value was replaced at launch, unsaid
    (b"name: x\ncommand: [echo]\nenv: {WORLD_SIZE: '9'}\n", "job.yaml:3: field 'env': "
                                                           "WORLD_SIZE is set by the scheduler"),
    (b"name: x\ncommand: [echo]\nenv:\n  QUANTA_LAUNCH: x\n", "QUANTA_LAUNCH is set by the"),
    # a field of two kinds named once (was 'priority.int'), at its line; YAML's yes is no text
    (b"name: x\ncommand: [echo]\npriority: 1.5\n", "job.yaml:3: field 'priority': Input should "
                                                    "be a valid integer or a valid string"),
    (b"name: yes\ncommand: [echo]\n", "job.yaml:1: field 'name': Input should be a valid string "
                                       "(YAML reads yes/no, on/off, true/false as true or false"),
])
def test_cli_rejects_bad_spec_files_in_one_line(tmp_path, data, needle):
    spec = tmp_path / "job.yaml"
    spec.write_bytes(data)
    r = cli("submit", str(spec), env={"QUANTA_URL": "http://127.0.0.1:9", "QUANTA_TOKEN": "x"})
    assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_cli_refuses_spec_files_that_are_no_file_or_too_big_at_once(tmp_path):
    """`quanta submit /dev/zero` read until memory ran out (10 GB in 30 s), a FIFO waited for a
    writer forever, a 75 MB file took 20 s: no regular file, or over the API's 1 MiB body cap,
    is one line at once."""
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "big.yaml").write_text("name: x\ncommand: [echo]\n" + "#" * (1 << 20) + "\n")
    for path, needle in [("/dev/zero", "/dev/zero: cannot read it: not a regular file"),
                         (str(tmp_path / "fifo"), "fifo: cannot read it: not a regular file"),
                         (str(tmp_path / "big.yaml"), "big.yaml: larger than 1 MiB")]:
        t0 = time.monotonic()
        r = cli("submit", path, env={"QUANTA_URL": "http://127.0.0.1:9", "QUANTA_TOKEN": "x"})
        assert r.returncode == 2 and needle in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and time.monotonic() - t0 < 20


def test_yaml_base_60_is_text_not_a_number(tmp_path):
    """YAML 1.1 reads `1:30` as 90 (base 60): `steps: 1:30` ran 90 steps. Read as YAML 1.2
    does (text), it is refused as no integer; every other number reads as before."""
    from quanta.specfile import parse_yaml
    assert parse_yaml("a: 1:30\nb: 1:30.5\nc: 12\nd: 1.5e+3\ne: 0x1f\nf: .inf\n", "x") == \
        {"a": "1:30", "b": "1:30.5", "c": 12, "d": 1500.0, "e": 31, "f": float("inf")}
    spec = tmp_path / "job.yaml"
    spec.write_text("name: x\ncommand: [echo]\nsteps: 1:30\n")
    r = cli("submit", str(spec), env={"QUANTA_URL": "http://127.0.0.1:9", "QUANTA_TOKEN": "x"})
    assert r.returncode == 2 and "job.yaml:3: field 'steps': Input should be a valid integer" \
        in r.stderr, r.stderr


def test_queue_cuts_a_long_reason_not_the_other_columns(service):
    """`quanta queue -a | cat` (120 columns) with a job failed for a long reason squeezed every
    other column to a letter or two (`JO… … US…`); the reason is cut instead."""
    s = service(cluster="cpu:1x1")
    a = s.submit(name="lost", command=["/nonexistent/" + "p" * 150, "x"])
    s.wait(a, lambda j: j["state"] == "failed")
    env = {"QUANTA_URL": s.url, "QUANTA_TOKEN": s.admin, "COLUMNS": "120"}
    lines = cli("queue", "-a", env=env).stdout.splitlines()
    assert lines[1].split() == ["JOBID", "NAME", "USER", "QUEUE", "STATE", "TIME", "GPUS",
                                "NODES/REASON"], lines
    row = lines[3].split()
    assert row[:5] == [str(a), "lost", "admin", "default", "FAILED"], lines
    assert max(len(ln) for ln in lines) <= 120 and lines[3].rstrip().endswith("…"), lines


def test_a_spec_in_a_folder_whose_name_is_no_utf8_is_one_line(tmp_path):
    """The spec's folder becomes the job's cwd; a name of bytes that are no UTF-8 was a
    UnicodeEncodeError traceback (exit 1) when the submission was sent."""
    folder = os.fsdecode(bytes(tmp_path) + b"/x\xffy")
    os.mkdir(folder)
    spec = os.path.join(folder, "j.yaml")
    with open(spec, "w") as f:
        f.write("name: p\ncommand: [pwd]\n")
    r = cli("submit", spec, env={"QUANTA_URL": "http://127.0.0.1:9", "QUANTA_TOKEN": "x"})
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "field 'cwd': the spec's folder" in r.stderr and "is not valid Unicode text" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
