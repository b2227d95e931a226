"""The security model for real (docs/runtime.md, "Security model"): `quanta serve` on 127.0.0.1,
its SQLite file, real job processes. A job of one user cannot read or write another user's job
folder or the admin token (the service running as root runs each user's jobs as that user's OS
account: two throwaway accounts are made with useradd); the state folder and its files are
private; a job's cwd stays in its own folder or an allowed root; a link a job plants is never
followed by the service; the page takes no token in its URL."""

import os
import secrets
import shutil
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from test_service import PY, Service, service  # noqa: F401 - the fixture


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_state_folder_database_logs_and_checkpoints_are_private(service):
    s = service()
    job = s.submit(name="ckpt", steps=20, checkpoint_every=10)
    s.wait(job, lambda j: j["state"] == "finished")
    state, wd = s.state, s.state / "jobs" / str(job)
    shared = os.geteuid() == 0       # jobs run as other accounts: they must reach their folder
    assert mode(state) == (0o711 if shared else 0o700)
    assert mode(state / "jobs") == (0o711 if shared else 0o700)
    for name in ("quanta.db", "quanta.db-wal", "quanta.db-shm", "admin.token", "serve.lock"):
        assert mode(state / name) == 0o600, name
    assert mode(wd) == 0o700
    ckpts = [p for p in (wd / "checkpoints").iterdir() if p.is_file()]
    assert any(p.name.endswith(".pt") for p in ckpts), ckpts
    for p in [wd / "job.log", wd / "launcher.log", wd / "exit.json", wd / "progress.json", *ckpts]:
        assert mode(p) == 0o600, p


def test_admin_token_is_created_0600_by_os_open_with_o_excl(tmp_path, monkeypatch):
    from quanta.runtime import accounts
    from quanta.service.app import bootstrap_admin
    from quanta.service.store import Store
    calls = []
    real_open = os.open

    def spy(path, flags, mode=0o777, *a, **kw):
        calls.append((str(path), flags, mode))
        return real_open(path, flags, mode, *a, **kw)
    monkeypatch.setattr(accounts.os, "open", spy)
    (tmp_path / "elsewhere").write_text("not yours\n")
    (tmp_path / "admin.token").symlink_to(tmp_path / "elsewhere")     # replaced, not followed
    path = bootstrap_admin(Store(tmp_path / "q.db"), tmp_path)
    made = [c for c in calls if "admin.token" in c[0]]
    assert made and all(c[1] & os.O_CREAT and c[1] & os.O_EXCL and c[1] & os.O_NOFOLLOW
                        and c[2] == 0o600 for c in made), made
    assert not path.is_symlink() and mode(path) == 0o600 and len(path.read_text().strip()) > 20
    assert (tmp_path / "elsewhere").read_text() == "not yours\n"


def test_cwd_stays_in_the_jobs_folder_or_an_allowed_root(service, tmp_path):
    s = service()
    (tmp_path / "into-state").symlink_to(s.state)
    for cwd, needle in [("../1", "leaves the job's own folder"),
                        ("a/../../2", "leaves the job's own folder"),
                        (str(s.state / "jobs" / "1"), "inside the scheduler's state folder"),
                        (str(tmp_path / "into-state" / "jobs"), "inside the scheduler's state")]:
        r = s.req("POST", "/v1/jobs", json={"name": "x", "command": ["true"], "cwd": cwd})
        assert r.status_code == 400 and r.json()["error"].startswith("field 'cwd': ") \
            and needle in r.json()["error"], (cwd, r.text)
    assert s.req("GET", "/v1/jobs").json() == []
    # a folder inside the job's own, made by its launch (the job's folder is new at its first:
    # such a job failed, "No such file or directory")
    ok = s.submit(name="inside", command=["/bin/sh", "-c", "pwd"], steps=None, cwd="sub/dir")
    j = s.wait(ok, lambda j: j["state"] in ("finished", "failed"))
    folder = s.state / "jobs" / str(ok) / "sub" / "dir"
    assert j["state"] == "finished", j
    assert s.req("GET", f"/v1/jobs/{ok}/logs").text == f"{folder.resolve()}\n"


def test_a_link_a_job_plants_is_never_followed_by_the_service(service):
    s = service()
    plant = "rm -f job.log; ln -s ../../admin.token job.log; ln -s ../../admin.token progress.json"
    job = s.submit(name="plant", command=["/bin/sh", "-c", plant], steps=None)
    s.wait(job, lambda j: j["state"] == "finished")
    r = s.req("GET", f"/v1/jobs/{job}/logs")
    assert r.status_code == 409 and s.admin not in r.text and "not a plain file" in r.text, r.text
    # a job that planted a link where its log goes, failed and is started again: a fresh log
    again = "if [ -e marker ]; then echo second; exit 0; fi; touch marker; " + plant + "; exit 1"
    job = s.submit(name="again", command=["/bin/sh", "-c", again], steps=None, max_failures=1)
    s.wait(job, lambda j: j["state"] == "finished")
    r = s.req("GET", f"/v1/jobs/{job}/logs")
    assert r.status_code == 200 and r.text == "second\n", r.text


def test_jobs_do_not_inherit_the_services_tokens(service):
    secret = {"QUANTA_ADMIN_TOKEN": secrets.token_hex(16), "QUANTA_TOKEN": secrets.token_hex(16)}
    s = service(env=secret)
    job = s.submit(name="env", command=["/bin/sh", "-c", "env"], steps=None)
    s.wait(job, lambda j: j["state"] == "finished")
    log = s.req("GET", f"/v1/jobs/{job}/logs", params={"tail": 10000}).text
    assert "QUANTA_JOB_ID=" in log and not any(v in log for v in secret.values())


def test_page_takes_its_token_from_a_cookie_not_the_url_and_docs_need_no_cdn(service):
    s = service()
    in_url = s.req("GET", "/", token="", params={"token": s.admin})
    assert "JOBID" not in in_url.text and "not accepted" in in_url.text
    with httpx.Client(base_url=s.url, timeout=30) as c:
        assert c.post("/login", data={"token": "wrong"}).status_code == 401
        r = c.post("/login", data={"token": s.admin}, follow_redirects=False)
        assert r.status_code == 303 and "httponly" in r.headers["set-cookie"].lower()
        assert "JOBID" in c.get("/").text            # the cookie, not the address
        c.post("/logout")
        assert "JOBID" not in c.get("/").text
    docs = s.req("GET", "/docs", token="")
    from quanta.service.app import swagger_assets
    if swagger_assets() is None:         # no local Swagger UI: off, saying how to turn it on
        assert docs.status_code == 404 and "QUANTA_DOCS=cdn" in docs.json()["error"]
    else:
        assert docs.status_code == 200 and "cdn." not in docs.text
    assert s.req("GET", "/openapi.json", token="").json()["paths"]["/v1/jobs"]


def test_malformed_json_is_reported_by_line_and_column_and_huge_steps_by_field(service):
    s = service()
    bad = s.req("POST", "/v1/jobs", content=b'{"name": "x",\n  "command": [}',
                headers={"content-type": "application/json"})
    assert bad.status_code == 422 and bad.json()["error"] == (
        "the request body is not valid JSON (Expecting value at line 2, column 15)"), bad.text
    huge = s.req("POST", "/v1/jobs", json={"name": "x", "command": ["true"], "steps": 2**63})
    assert huge.status_code == 422 and huge.json()["error"].startswith("field 'steps'")


# -- two users on one machine, the service running as root --------------------------------------

def _useradd(name: str) -> None:
    subprocess.run(["useradd", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin",
                    "--home-dir", "/nonexistent", name], check=True, capture_output=True)


@pytest.fixture
def os_users():
    if os.geteuid() != 0:
        pytest.skip("needs root: the service runs jobs as other accounts only when it runs as "
                    "root, and the test makes two accounts with useradd")
    if shutil.which("useradd") is None:
        pytest.skip("useradd is not installed")
    tag = secrets.token_hex(3)
    names = [f"qtalice{tag}", f"qtbob{tag}"]
    made = []
    try:
        for n in names:
            _useradd(n)
            made.append(n)
        yield names
    finally:
        for n in made:
            subprocess.run(["pkill", "-KILL", "-u", n], check=False)
            time.sleep(0.2)
            subprocess.run(["userdel", n], check=False, capture_output=True)


def test_a_job_of_alice_cannot_read_or_write_bobs_folder_or_the_admin_token(os_users):
    alice_cannot_reach_bob(os_users)


def alice_cannot_reach_bob(os_users, args=(), cluster="cpu:1x2", more_tries=None, env=None):
    """A root service (local backend, or `args` for another) runs alice's and bob's jobs as their
    accounts: alice's job cannot read the admin token or the database, list the state folder, or
    read, list or write bob's folder (nor do any of `more_tries`: {mark: shell command}); each
    job's folder and log are its account's."""
    alice_os, bob_os = os_users
    # the state folder must be reachable by the jobs' accounts (pytest's tmp folders are 0700)
    top = Path(tempfile.mkdtemp(prefix="quanta-sec-"))
    top.chmod(0o711)
    users = top / "users.yaml"
    users.write_text(f"accounts:\n  alice: {alice_os}\n  bob: {bob_os}\n")
    users.chmod(0o600)
    s = Service(top / "state", cluster=cluster, args=args,
                env={"QUANTA_USERS": str(users), **(env or {})})
    try:
        s.start()
        state = s.state
        tokens = {n: s.req("POST", "/v1/users", json={"name": n}).json()["token"]
                  for n in ("alice", "bob", "root")}
        # the admin has no OS account of its own here; a user mapped to root is refused
        r = s.req("POST", "/v1/jobs", json={"name": "x", "command": ["true"]})
        assert r.status_code == 400 and "field 'user'" in r.text and "no OS account" in r.text
        r = s.req("POST", "/v1/jobs", token=tokens["root"], json={"name": "x", "command": ["true"]})
        assert r.status_code == 400 and "would run as root" in r.text, r.text

        bob = s.submit(token=tokens["bob"], name="bob", steps=None, command=[
            "/bin/sh", "-c", "echo bob-secret > secret.txt; sleep 120"])
        bob_dir = state / "jobs" / str(bob)
        end = time.time() + 60
        while not (bob_dir / "secret.txt").exists():
            assert time.time() < end, s.job(bob)
            time.sleep(0.1)
        tries = {"READ-TOKEN": f"cat {state}/admin.token",
                 "READ-DB": f"cat {state}/quanta.db",
                 "LIST-BOB": f"ls {bob_dir}",
                 "READ-BOB": f"cat {bob_dir}/secret.txt",
                 "READ-BOB-LOG": f"cat {bob_dir}/job.log",
                 "WROTE-BOB": f"echo x > {bob_dir}/pwn.txt",
                 "LIST-STATE": f"ls {state}", **(more_tries or {})}
        script = "id -u > uid.txt\n" + "".join(
            f"if {cmd} >/dev/null 2>&1; then echo {mark}; else echo denied; fi >> result.txt\n"
            for mark, cmd in tries.items())
        alice = s.submit(token=tokens["alice"], name="alice", steps=None,
                         command=["/bin/sh", "-c", script])
        s.wait(alice, lambda j: j["state"] == "finished", timeout=120)
        alice_dir = state / "jobs" / str(alice)
        assert (alice_dir / "result.txt").read_text().split() == ["denied"] * len(tries)
        import pwd
        a, b = pwd.getpwnam(alice_os), pwd.getpwnam(bob_os)
        assert (alice_dir / "uid.txt").read_text().strip() == str(a.pw_uid)
        assert not (bob_dir / "pwn.txt").exists()
        # each job's folder and log are its account's, private; the secrets are the service's
        for d, pw in ((alice_dir, a), (bob_dir, b)):
            st = os.lstat(d)
            assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (pw.pw_uid, 0o700), d
            st = os.lstat(d / "job.log")
            assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (pw.pw_uid, 0o600), d
        for name in ("admin.token", "quanta.db"):
            st = os.lstat(state / name)
            assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o600), name
        assert mode(state) == 0o711
        # users see only their own jobs through the API too
        assert s.req("GET", f"/v1/jobs/{bob}/logs", token=tokens["alice"]).status_code == 403
        s.req("POST", f"/v1/jobs/{bob}/cancel", token=tokens["bob"])
        s.wait(bob, lambda j: j["state"] == "cancelled", timeout=120)
    finally:
        s.stop()
        subprocess.run(["pkill", "-f", f"quanta.runtime.launch {top}"], check=False)
        shutil.rmtree(top, ignore_errors=True)


def test_users_map_defaults_refusals_and_its_file(tmp_path, monkeypatch):
    import pwd

    from quanta.errors import QuantaError
    from quanta.runtime.accounts import RunAs
    rule = RunAs(tmp_path, privileged=True)
    other = next((p for p in pwd.getpwall() if p.pw_uid != 0), None)
    if other is not None:               # the account of the same name, by default
        assert rule.account(other.pw_name).uid == other.pw_uid
    with pytest.raises(QuantaError, match="field 'user': .*would run as root"):
        rule.account("root")
    assert RunAs(tmp_path, True, allow_root=True).account("root").uid == 0
    with pytest.raises(QuantaError, match="no OS account"):
        rule.account("no-such-account-q")
    assert RunAs(tmp_path, True, {"alice": "root"}, allow_root=True).account("alice").uid == 0
    assert RunAs(tmp_path, False).account("anyone") is None      # unprivileged: its own account
    # at launch the cwd is checked again, links resolved: one planted in the job's folder
    job = tmp_path / "jobs" / "7"
    job.mkdir(parents=True)
    (job / "out").symlink_to(tmp_path / "jobs")
    with pytest.raises(QuantaError, match="field 'cwd': out leads out of the job's own folder"):
        RunAs(tmp_path, False).check_cwd("out", None, job)
    RunAs(tmp_path, False).check_cwd(str(job), None, job)          # its own folder, absolute
    # the file: others may not write it; unknown fields are named
    users = tmp_path / "users.yaml"
    users.write_text("accounts: {alice: root}\n")
    users.chmod(0o666)
    monkeypatch.setenv("QUANTA_USERS", str(users))
    with pytest.raises(QuantaError, match="others may write it"):
        RunAs.load(tmp_path)
    users.chmod(0o600)
    assert RunAs.load(tmp_path, privileged=True).accounts == {"alice": "root"}
    users.write_text("acounts: {alice: root}\n")
    with pytest.raises(QuantaError, match="users.yaml: unknown field 'acounts'"):
        RunAs.load(tmp_path)


def test_serve_takes_its_users_file_from_the_command_line(tmp_path):
    # `quanta serve --users FILE`: the file is read (a file others may write is refused, one
    # line, exit 2, naming it) and a missing one is named too; nothing starts either way
    import socket
    import sys
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    users = tmp_path / "users.yaml"
    users.write_text("allow_root: false\n")
    users.chmod(0o666)
    base = [sys.executable, "-m", "quanta.cli", "serve", "--state", str(tmp_path / "st"),
            "--port", str(port), "--cluster", "cpu:1x1"]
    run = subprocess.run(base + ["--users", str(users)], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2, run.stderr
    assert str(users) in run.stderr and "others may write it" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    run = subprocess.run(base + ["--users", str(tmp_path / "none.yaml")], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 2 and "none.yaml" in run.stderr and "no such file" in run.stderr


def test_a_removed_admin_token_file_is_written_again_with_a_new_token(tmp_path):
    """`rm STATE/admin.token`, then a restart: the startup line named the file, which was not
    written again, and the admin was locked out (adding a user needs an admin token)."""
    from quanta.service.app import bootstrap_admin
    from quanta.service.store import Store
    store = Store(tmp_path / "q.db")
    path = bootstrap_admin(store, tmp_path)
    old = path.read_text().strip()
    assert bootstrap_admin(store, tmp_path).read_text().strip() == old     # kept while there
    path.unlink()
    new = bootstrap_admin(store, tmp_path).read_text().strip()
    assert mode(path) == 0o600 and new != old
    assert store.user_for(new) == ("admin", True) and store.user_for(old) is None
