"""The command line, run as a user runs it (a real subprocess), and its outputs."""

import csv
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def quanta(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "quanta.cli", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


def test_default_simulate_writes_every_output(tmp_path):
    r = quanta("simulate", "--out", str(tmp_path / "o"))
    assert r.returncode == 0, r.stderr
    out = tmp_path / "o"
    rows = list(csv.DictReader(open(out / "summary.csv")))
    assert [x["policy"] for x in rows] == ["fifo", "sjf", "srtf", "las"]
    for row in rows:
        assert int(row["finished"]) == int(row["jobs"]) == 2000
        assert 0 < float(row["gpu_util"]) <= 1
        jobs = list(csv.DictReader(open(out / row["policy"] / "jobs.csv")))
        assert len(jobs) == 2000 and all(j["state"] == "finished" for j in jobs)
        assert all(float(j["jct_s"]) >= float(j["queue_s"]) >= -1e-6 for j in jobs)
        assert (out / row["policy"] / "timeline.csv").stat().st_size > 0
    assert (out / "jct_cdf.png").stat().st_size > 10_000
    assert (out / "utilisation.png").stat().st_size > 10_000
    report = (out / "report.md").read_text()
    assert "| las |" in report and "drawn from the catalog" in report


def test_simulate_inline_cluster_and_policy_params_is_deterministic(tmp_path):
    args = ["simulate", "--trace", "synthetic:30:150", "--cluster", "v100:2x8,k80:2x4",
            "--policy", "las:backfill=false", "--policy", "fifo", "--seed", "4", "--quiet", "--no-plots"]
    a = quanta(*args, "--out", str(tmp_path / "a"))
    b = quanta(*args, "--out", str(tmp_path / "b"))
    assert a.returncode == 0 and b.returncode == 0, a.stderr
    assert a.stdout == ""                                   # --quiet
    for f in ("summary.csv", "las_backfill=false/jobs.csv", "fifo/timeline.csv"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()


@pytest.mark.parametrize("args, needle", [
    (["--cluster", "v100:64y8"], "bad cluster spec 'v100:64y8'"),
    (["--cluster", "tpu:2x8"], "unknown GPU type 'tpu'"),
    (["--policy", "nope"], "unknown policy 'nope'"),
    (["--format", "xml"], "unknown"),
    (["--trace", "synthetic:abc"], "bad synthetic trace"),
    (["--cluster", "xyz:4x8"], "field '--cluster': unknown GPU type 'xyz'"),
    (["--cluster", "EMPTY.yaml"], "EMPTY.yaml: the file is empty"),
    (["--cluster", "LIST.yaml"], "LIST.yaml: want a mapping of fields (key: value), got list"),
    (["--cluster", "STRNODE.yaml"], "field 'nodes.0': Input should be a valid dictionary"),
    (["--cluster", "BOOLCOUNT.yaml"], "field 'nodes.0.count': Input should be a valid integer"),
    (["--cluster", "INFMEM.yaml"], "field 'nodes.0.mem_gb': Input should be a finite number"),
    (["--cluster", "v100:99999999x99999999"], "nodes is more than the 1,000,000"),   # was a hang
    (["--trace", "BINARY.csv"], "cannot tell the trace format from the first line: it is not "
                                "text"),            # (and not a hundred escaped bytes of it)
])
def test_bad_input_is_one_line_exit_2(args, needle, tmp_path):
    files = {"EMPTY.yaml": "", "LIST.yaml": "- a\n", "STRNODE.yaml": "nodes:\n  - v100\n",
             "BOOLCOUNT.yaml": "nodes:\n  - {gpu_type: v100, count: true, gpus: 8}\n",
             "INFMEM.yaml": "nodes:\n  - {gpu_type: v100, gpus: 8, mem_gb: .inf}\n",
             "BINARY.csv": "\x1b[31m\x07" + "\x00\x01\x02" * 200}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    args = [str(tmp_path / a) if a in files else a for a in args]
    r = quanta("simulate", "--out", str(tmp_path / "o"), "--quiet", *args)
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0], r.stderr
    assert "Traceback" not in r.stderr
    assert len(lines[0]) < 1000 and "\x1b" not in r.stderr and "\x07" not in r.stderr


def test_impossible_job_names_file_line_and_field(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time_s,num_gpus,duration_s\na,0,1,100\nb,10,64,100\n")
    r = quanta("simulate", "--trace", str(trace), "--cluster", "v100:2x8", "--quiet", "--out",
               str(tmp_path / "o"))
    assert r.returncode == 2
    line = r.stderr.strip()
    assert "\n" not in line and "t.csv:3" in line and "num_gpus" in line and "64" in line, line
    r = quanta("simulate", "--trace", str(trace), "--cluster", "v100:2x8", "--quiet", "--out",
               str(tmp_path / "o"), "--drop-impossible", "--no-plots")
    assert r.returncode == 0, r.stderr
    states = {j["job_id"]: j["state"] for j in csv.DictReader(open(tmp_path / "o/fifo/jobs.csv"))}
    assert states == {"a": "finished", "b": "unschedulable"}


@pytest.mark.parametrize("name, text, column", [
    ("pods.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
                 "deletion_time,scheduled_time\np0,1000,1024,1,1000,,LS,Running,0,100,0\n"
                 "p1,1000,1024,1,1000,V100M16|XYZ9,LS,Running,0,100,0\n", "gpu_spec"),
    ("tasks.csv", "job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,"
                  "plan_gpu,gpu_type\nj1,t,1,Terminated,0,100,600,29,100,V100\n"
                  "j2,t,1,Terminated,0,100,600,29,100,QQQ\n", "gpu_type"),
])
def test_a_job_no_gpu_type_of_the_cluster_serves_names_the_files_own_column(tmp_path, name,
                                                                             text, column):
    """openb's gpu_spec and pai's gpu_type (it named the field they become, gpu_types)."""
    (tmp_path / name).write_text(text)
    r = quanta("simulate", "--trace", str(tmp_path / name), "--cluster", "v100:1x4", "--quiet",
               "--no-plots", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert f"{name}:3: field '{column}': job " in r.stderr and "may only use" in r.stderr, r.stderr


def test_cluster_yaml_errors_name_the_field(tmp_path):
    good = tmp_path / "c.yaml"
    good.write_text("name: lab\nnodes:\n  - {gpu_type: v100, count: 2, gpus: 8}\n")
    r = quanta("simulate", "--cluster", str(good), "--max-jobs", "50", "--quiet", "--no-plots",
               "--out", str(tmp_path / "o"), "--drop-impossible")
    assert r.returncode == 0, r.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes:\n  - {gpu_type: v100, count: 2, gpus: -8}\n")
    r = quanta("simulate", "--cluster", str(bad), "--quiet", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "bad.yaml" in r.stderr and "nodes.0.gpus" in r.stderr


def test_listings():
    for cmd, needle in (("policies", "las"), ("clusters", "gavel-108"), ("traces", "philly"),
                        ("catalog", "imagenet")):
        r = quanta(cmd)
        assert r.returncode == 0 and needle in r.stdout
    r = quanta("clusters")
    for preset in ("gavel-108", "sia-64", "rubick-64", "openb"):
        assert preset in r.stdout


def test_events_log_tells_each_jobs_history(tmp_path):
    r = quanta("simulate", "--trace", "tiresias-60", "--cluster", "v100:2x8", "--policy", "las",
               "--events", "--quiet", "--no-plots", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    ev = list(csv.DictReader(open(tmp_path / "las" / "events.csv")))
    jobs = {j["job_id"]: j for j in csv.DictReader(open(tmp_path / "las" / "jobs.csv"))}
    for job_id, j in jobs.items():
        mine = [e for e in ev if e["job_id"] == job_id]
        assert mine[0]["event"] == "submit" and mine[-1]["event"] == "finish"
        assert sum(e["event"] == "preempt" for e in mine) == int(j["preemptions"])
        assert float(mine[-1]["time_s"]) == pytest.approx(float(j["end_s"]), rel=1e-5)


COMMANDS = ["simulate", "reproduce", "worlds", "policies", "clusters", "traces", "catalog", "serve",
            "submit", "schema", "queue", "cancel", "hold", "release", "status", "logs", "add-user"]


@pytest.mark.parametrize("args, needle", [
    (["simulate", "--trace", "synthetic:3:10", "--repair-h", "5"], "give --node-mtbf-h H too"),
    (["queues", "quanta/examples/queues/teams.yaml", "--jobs"], "give --at-h H too"),
    (["queues", "quanta/examples/queues/teams.yaml", "--at-h", "3"], "give a queues FILE and --trace"),
    (["queues", "quanta/examples/queues/teams.yaml", "--format", "philly"],
     "--format is for a simulated trace: give --trace too"),
    (["queues", "quanta/examples/queues/teams.yaml", "-p", "las"], "--policy is for a simulated"),
    # the last --policy ran, the others unsaid; flags for the other mode, passed over
    (["queues", "quanta/examples/queues/teams.yaml", "--trace", "philly", "-p", "las", "-p",
      "fifo"], "one policy runs under the queues, 2 given"),
    (["queues", "--trace", "philly"], "field '--trace': --trace is for a queues FILE"),
    (["queues", "--cluster", "v100:1x8"], "field '--cluster': --cluster is for a queues FILE"),
    (["queues", "quanta/examples/queues/teams.yaml", "--url", "http://127.0.0.1:9"],
     "field '--url': --url and --token ask the service for its queues: leave FILE out"),
    (["queues", "quanta/examples/queues/teams.yaml", "--trace", "synthetic:3:20", "--format",
      "philly"], "a synthetic trace has no file format to read it as ('philly')"),
])
def test_an_option_that_would_be_ignored_is_refused(args, needle, tmp_path):
    r = quanta(*args, "-q" if args[0] == "simulate" else "--json", *(
        ["--out", str(tmp_path / "o")] if args[0] == "simulate" else []), cwd=ROOT)
    assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, \
        r.stderr


@pytest.mark.parametrize("args, needle", [
    # (ran the whole trace: --jobs sizes --rate's synthetic traces only)
    (["sweep", "--trace", "tiresias-60", "--jobs", "5", "-p", "fifo"],
     "field '--jobs': sizes the synthetic traces of --rate (none given)"),
    # (passed with --no-plots; simulate refused it)
    (["sweep", "--rate", "3", "--jobs", "5", "-p", "fifo", "--no-plots", "--fig-format", "jpg"],
     "field '--fig-format': unknown figure format 'jpg'"),
    (["sweep", "--trace", "", "-p", "fifo"], "field '--trace': is empty"),   # ('.: not a file')
    # (".: cannot read it"; serve --state '' took the working folder)
    (["sweep", "--rate", "3", "-p", "fifo", "--queues", ""],
     "Invalid value for '--queues': is empty: name a file or folder"),
    # (the service started on the local backend, the address unused)
    (["serve", "--ray-address", "127.0.0.1:6379"], "field '--ray-address': is the address of the "
                                                   "Ray backend's cluster: give --backend ray too"),
])
def test_sweep_and_serve_options_ignored_or_empty_are_refused(args, needle, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    where = ["--state", str(tmp_path / "o"), "--port", port] if args[0] == "serve" else \
        ["-q", "--out", str(tmp_path / "o")]
    r = quanta(*args, *where, cwd=ROOT)
    assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, \
        r.stderr
    assert not (tmp_path / "o").exists()


def test_queues_json_is_json_with_no_nan():
    """A queue that finished no job had NaN averages, which is no JSON (RFC 8259): null."""
    import json
    r = quanta("queues", "quanta/examples/queues/teams.yaml", "--trace", "philly", "--max-jobs",
               "5", "--json", cwd=ROOT)
    assert r.returncode == 0, r.stderr

    def refuse(c):
        raise ValueError(f"{c} in the JSON")
    rows = json.loads(r.stdout, parse_constant=refuse)
    assert any(v is None for row in rows for v in row.values())       # (was NaN)


def test_service_addresses_and_state_folders_no_one_can_use_are_one_line(tmp_path):
    (tmp_path / "afile").write_text("x")
    with socket.socket() as s:      # (not the default port: a service of the user's may hold it)
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    cases = [
        (["serve", "--port", "70000"], {}, "Invalid value for '--port'"),
        (["serve", "--state", str(tmp_path / "st")], {"QUANTA_URL": "http://127.0.0.1:70000"},
         "field '--port': $QUANTA_URL: Port out of range"),
        (["serve", "--state", str(tmp_path / "afile")], {}, "is a file, not a state folder"),
        # the flag that is wrong (--port was named for a host; 'backend' made the state folder)
        (["serve", "--host", "no-such-host.invalid", "--state", str(tmp_path / "st")], {},
         "field '--host': cannot listen on no-such-host.invalid"),
        (["serve", "--backend", "bogus", "--state", str(tmp_path / "st")], {},
         "field '--backend': unknown backend 'bogus' (known: local, ray)"),
        (["serve", "--backend", "ray", "--cluster", "v100:1x8", "--state", str(tmp_path / "st")],
         {}, "field '--cluster': with the Ray backend the cluster is what the Ray nodes offer"),
        (["serve", "--state", str(tmp_path / "afile" / "st")], {},
         "cannot use the state folder (Not a directory"),
        (["serve", "--cluster", "v100:0x2", "--state", str(tmp_path / "st")], {},
         "field '--cluster': bad cluster spec 'v100:0x2'"),        # (it made the state folder)
        # (before the state folder is made)
        (["serve", "--backend", "ray", "--ray-address", f"127.0.0.1:{port}", "--state",
          str(tmp_path / "rayst")], {}, f"field '--ray-address': cannot connect to a Ray cluster "
                                        f"at '127.0.0.1:{port}': Connection refused"),
        (["queue", "--url", "notaurl"], {}, "field '--url': 'notaurl' is not a service address"),
        (["queue"], {"QUANTA_URL": "ftp://x"}, "field '$QUANTA_URL': 'ftp://x' is not a service"),
        # tracebacks before (a token with a space also waited 28 s, then printed the token)
        (["queue", "--token", "t\u00f6k\u00e9n"], {}, "field '--token': the token holds a space or"),
        (["queue"], {"QUANTA_TOKEN": "secret "}, "field '$QUANTA_TOKEN': the token holds a space"),
        (["queue", "--url", "http://127.0.0.1:abc"], {}, "'http://127.0.0.1:abc' is not a service "
                                                         "address (Port could not be cast"),
        (["queue", "--url", "http://127.0.0.1:99999"], {}, "(Port out of range 0-65535)"),
        (["queue", "--url", "http://[::1"], {}, "'http://[::1' is not a service address (Invalid"),
        (["queue", "--url", "http://127.0.0.1:9?x=1"], {}, "'http://127.0.0.1:9?x=1' is not a"),
        (["queue", "--url", "http://127.0.0.1:9/v1"], {}, "is the API's path: give the service's"
                                                          " address without /v1"),   # (404s)
        (["queue", "--url", ""], {}, "field '--url': is empty"),       # (fell back to the default)
        (["queue", "--token", ""], {}, "field '--token': is empty"),
        (["queue", "--url", "http://127.0.0.1:9"], {"QUANTA_RETRY_S": "abc"},
         "field '$QUANTA_RETRY_S': want a number of seconds, 0 or more, got 'abc'"),
    ]
    for args, env, needle in cases:
        if args[0] == "serve" and "--port" not in args and "QUANTA_URL" not in env:
            args = [*args, "--port", port]
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "quanta.cli", *args], capture_output=True,
                           text=True, timeout=60, env={**os.environ, **env})
        assert r.returncode == 2 and needle in r.stderr, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert time.monotonic() - t0 < 20          # (a bad --url used to be retried ~28 s)
        assert "secret" not in r.stderr and "t\u00f6k" not in r.stderr      # never echoed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_serve_with_a_damaged_database_or_a_pause_no_loop_takes_is_one_line(tmp_path):
    """A state folder whose quanta.db is no database was a DatabaseError traceback; `--poll-s
    inf` killed the runtime's thread while the API went on answering (jobs pending forever)."""
    (tmp_path / "st").mkdir()
    (tmp_path / "st" / "quanta.db").write_bytes(bytes(range(256)) * 32)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = str(sock.getsockname()[1])
    for args, needle in [(["--state", str(tmp_path / "st")],
                          "st/quanta.db: not a Quanta database, or a damaged one (file is not a "
                          "database)"),
                         (["--state", str(tmp_path / "st2"), "--poll-s", "inf"],
                          "Invalid value for '--poll-s'")]:
        r = subprocess.run([sys.executable, "-m", "quanta.cli", "serve", "--port", port, *args],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and needle in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert (tmp_path / "st" / "quanta.db").read_bytes() == bytes(range(256)) * 32


def test_a_server_that_is_not_quantas_is_one_short_line():
    """An address that answers with a web page: 200 with HTML was a JSONDecodeError traceback,
    an error page was printed whole."""
    import http.server
    import threading

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"<html>" + b"<p>not here</p>" * 500 + b"</html>"
            self.send_response(200 if self.path.startswith("/ok") else 404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{srv.server_address[1]}"
        r = quanta("queue", "--url", base + "/ok")
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "answered with no JSON (HTTP 200, text/html): is it a Quanta service?" in r.stderr
        r = quanta("queue", "--url", base)       # (its page's text was the message)
        assert r.returncode == 2 and r.stderr.strip() == (
            f"error: {base}/v1/queue answered with a web page (HTTP 404): is it a "
            f"Quanta service?"), r.stderr
    finally:
        srv.shutdown()


def test_serve_refuses_a_folder_that_is_not_a_state_folder(tmp_path):
    """`quanta serve --state ''` (the current folder; now an empty path, refused as such) or a
    project folder made every file in it 0600 and the folder 0700 (a script lost its execute
    bit): refused, one line, nothing changed or written."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (proj / "run.sh").chmod(0o755)
    (proj / "notes.txt").write_text("x\n")
    (proj / "data").mkdir()
    before = {p.name: p.stat().st_mode for p in [proj, *proj.iterdir()]}
    with socket.socket() as sock:               # a port free now (the check comes first)
        sock.bind(("127.0.0.1", 0))
        port = str(sock.getsockname()[1])
    for args, cwd, says in (
            (["--state", ""], proj, "Invalid value for '--state': is empty: name a file or folder"),
            (["--state", str(proj)], tmp_path, "is not a state folder: it holds data, notes.txt, "
                                               "run.sh")):
        r = subprocess.run([sys.executable, "-m", "quanta.cli", "serve", *args, "--port", port],
                           capture_output=True, text=True, timeout=60, cwd=cwd)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert says in r.stderr, r.stderr
        assert {p.name: p.stat().st_mode for p in [proj, *proj.iterdir()]} == before
    assert sorted(p.name for p in proj.iterdir()) == ["data", "notes.txt", "run.sh"]
    # a state folder's own files, and the temporary file of a write a kill -9 cut short, pass
    from quanta.runtime.accounts import check_state_folder
    st = tmp_path / "st"
    (st / "jobs").mkdir(parents=True)
    for name in ("quanta.db", "admin.token", "serve.lock", "users.yaml", ".admin.token.7.ab.tmp"):
        (st / name).write_text("")
    check_state_folder(st)


@pytest.mark.parametrize("args, needle", [
    (["--polcy"], "No such option: --polcy"),
    (["nosuch"], "No such command 'nosuch'"),
    (["simulate", "--seed", "abc"], "Invalid value for '--seed'"),
    (["simulate", "--max-jobs", "0"], "Invalid value for '--max-jobs'"),
    (["simulate", "--polcy", "las"], "No such option: --polcy"),
    (["reproduce"], "Missing argument"),
    (["reproduce", "pollux", "--replay-seeds", "-1"], "Invalid value for '--replay-seeds'"),
    # a filter no run matches: '' was shown as 'any'; now the recorded names are listed
    (["reproduce", "gavel", "--workload", ""], "(workload='', policy=any); recorded workloads: "
                                               "multi_r20_s0, multi_r20_s1"),
    (["reproduce", "tiresias", "--policy", "nope"], "recorded policies: dlas-gpu-2_count"),
    (["queues", "quanta/examples/queues/teams.yaml", "--trace", "synthetic:1:40", "--seed", "-1"],
     "Invalid value for '--seed'"),     # a numpy traceback before
    (["queues", "quanta/examples/queues/teams.yaml", "--trace", "synthetic:1:40", "--seed",
      "99999999999999999999"], "field '--seed': must be 0 to 9223372036854775807"),
    (["queues", "quanta/examples/queues/teams.yaml", "--trace", "synthetic:1:40", "--at-h",
      "inf"], "field '--at-h': inf h is past"),           # (numpy warnings, "at hour inf")
    # "" is every interface to uvicorn (the API on the network, an URL http://:PORT/)
    (["serve", "--host", "", "--port", "1", "--state", "/nonexistent/st"], "field '--host': is empty"),
] + [([cmd, "--no-such-flag"], "No such option: --no-such-flag") for cmd in COMMANDS])
def test_usage_errors_are_one_line_with_exit_2(args, needle):
    r = quanta(*args)
    assert r.returncode == 2, (args, r.stderr)
    assert needle in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_reproduce_refuses_a_bad_seed_before_its_plan():
    r = quanta("reproduce", "gavel", "--seed", "-1")
    assert r.returncode == 2 and "field '--seed': must be 0 to" in r.stderr
    assert r.stdout == ""       # ("replaying 126 runs, 2 at a time" came first)


def test_version_and_every_commands_help():
    r = quanta("--version")
    from quanta import __version__
    assert r.returncode == 0 and r.stdout.strip() == f"quanta {__version__}"
    for cmd in COMMANDS:
        h = quanta(cmd, "--help")
        assert h.returncode == 0 and "Usage" in h.stdout, (cmd, h.stderr)


def test_jobs_that_can_never_fit_are_checked_for_every_policy_before_any_run(tmp_path):
    """A 4-GPU job where no type has 4 GPUs fits a policy that mixes types (hadar) only: it was
    checked for the first policy alone, so `-p hadar -p fifo` ran and fifo left the job
    unschedulable unasked, while `-p fifo -p hadar` stopped."""
    (tmp_path / "t.csv").write_text("job_id,submit_time_s,num_gpus,duration_s\n"
                                    "j0,0,4,3600\nj1,0,1,60\n")
    run = ["simulate", "--trace", "t.csv", "--cluster", "a100:1x2,k80:1x3", "--no-plots",
           "--quiet"]
    for order in (["-p", "hadar", "-p", "fifo"], ["-p", "fifo", "-p", "hadar"]):
        r = quanta(*run, *order, "--out", "o", cwd=tmp_path)
        assert r.returncode == 2 and not (tmp_path / "o").exists(), r.stderr
        assert r.stderr.strip() == (
            "error: t.csv:2: field 'num_gpus': job j0 asks for 4 GPUs under fifo; the largest "
            "usable GPU type of cluster 'a100:1x2,k80:1x3' has 3; use --drop-impossible to "
            "report them and go on")
    r = quanta(*run, "-p", "hadar", "--out", "alone", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = quanta(*run, "-p", "hadar", "-p", "fifo", "--drop-impossible", "--out", "o", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "1 jobs can never fit on this cluster and are reported as unschedulable under fifo" \
        in (tmp_path / "o" / "report.md").read_text()
    done = {row["policy"]: row["finished"] for row in csv.DictReader(open(tmp_path / "o" /
                                                                          "summary.csv"))}
    assert done == {"hadar": "2", "fifo": "1"}
    r = quanta(*run, "-p", "hadar", "--cluster", "a100:1x2,k80:1x1", "--out", "o2", cwd=tmp_path)
    assert r.returncode == 2 and "job j0 asks for 4 GPUs; its usable GPU types together have 3" \
        in r.stderr, r.stderr


def test_a_run_cut_short_counts_running_jobs_to_the_cut(tmp_path):
    """`--until-h`: a job still running counted its GPU-seconds to the last completion (negative
    where it started after it) and utilisation divided the busy time to the last batch by the
    span to the last finish (above 1)."""
    (tmp_path / "t.csv").write_text("job_id,submit_time_s,num_gpus,duration_s\n"
                                    "j0,0,1,10\nj1,100,1,10000\n")
    r = quanta("simulate", "--trace", "t.csv", "--cluster", "v100:1x1", "-p", "fifo",
               "--until-h", "1", "--out", "o", "--no-plots", "--quiet", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    jobs = {row["job_id"]: row for row in csv.DictReader(open(tmp_path / "o/fifo/jobs.csv"))}
    assert jobs["j1"]["state"] == "running" and float(jobs["j1"]["gpu_seconds"]) == 3500
    row = next(csv.DictReader(open(tmp_path / "o/summary.csv")))
    assert float(row["gpu_hours"]) == 3510 / 3600 and float(row["gpu_util"]) == 3510 / 3600


def test_a_cut_counts_only_jobs_still_to_run_and_a_windows_own(tmp_path):
    """A run whose only unfinished job is unschedulable ended before its --until-h: its
    utilisation was taken over the span to the cut (100 / 3600); a window none of whose jobs
    finished by the cut had 0 utilisation (its span was to a last finish it did not have)."""
    (tmp_path / "t.csv").write_text("job_id,submit_time_s,num_gpus,duration_s\n"
                                    "j0,0,1,100\nj1,0,4,100\n")
    r = quanta("simulate", "--trace", "t.csv", "--cluster", "v100:1x1", "-p", "fifo",
               "--until-h", "1", "--drop-impossible", "--out", "o", "--no-plots", "--quiet",
               cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    row = next(csv.DictReader(open(tmp_path / "o/summary.csv")))
    assert float(row["gpu_util"]) == 1.0 and float(row["makespan_s"]) == 100, row
    # report.md's run line counts what its --until-h note does, the unschedulable apart
    assert "0 jobs not finished, 1 unschedulable" in (tmp_path / "o/report.md").read_text()
    (tmp_path / "w.csv").write_text("job_id,submit_time_s,num_gpus,duration_s\n"
                                    "j0,0,1,10\nj1,100,1,10000\nj2,200,1,10\n")
    r = quanta("simulate", "--trace", "w.csv", "--cluster", "v100:1x1", "-p", "fifo",
               "--until-h", "1", "--window", "1:3", "--out", "w", "--no-plots", "--quiet",
               cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    row = next(csv.DictReader(open(tmp_path / "w/summary.csv")))
    assert row["finished"] == "0" and float(row["gpu_util"]) == 1.0, row   # 3500 s of 3500


def test_python_m_from_a_folder_holding_a_folder_named_quanta(tmp_path):
    """`python -m` puts the working folder first on sys.path: a folder there named quanta (an
    earlier run's `--out quanta`) made an editable install's package an empty namespace package,
    and the run's config.yaml failed with a traceback (no `quanta.__version__`)."""
    (tmp_path / "quanta").mkdir()
    r = quanta("simulate", "--trace", "synthetic:3:10", "--cluster", "v100:1x8", "-p", "fifo",
               "--quiet", "--no-plots", "--out", "o", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "quanta_version: 0.1.0" in (tmp_path / "o" / "config.yaml").read_text()
    assert quanta("--version", cwd=tmp_path).stdout.strip() == "quanta 0.1.0"
