"""Whose OS account runs a job, where a job may run, and what stays out of every job's reach.

When the service runs as root (the local backend), the jobs of Quanta user U run as an OS account
mapped to U: `STATE/users.yaml` (or the file `$QUANTA_USERS` names) maps users to accounts; a user
it does not name runs as the account of the same name, if there is one. A job never runs as root
unless that file says `allow_root: true`. Where the service runs unprivileged, every job runs as
the service's own account (docs/runtime.md, "Security model").

    accounts:                  # Quanta user: OS account (or {account, group, groups})
      alice: alice
      carol: {account: cjones, group: ml, groups: [gpu]}
    default_account: ""        # the account of a user neither named here nor an account
    allow_root: false          # may a job run as root (uid 0)?
    cwd_roots: [/home, /data]  # folders a job's cwd may be in, besides the job's own folder
                               # (default: the account's home; "/" when the service is unprivileged)

A job's `cwd` is its own folder, a folder inside it (a relative `cwd`), or a folder under one of
the roots; never inside the state folder (the database, the admin token, other jobs' folders),
symbolic links resolved. Secrets (the database, the admin token) are 0600 files of the service's
account, created with that mode (never a window with a wider one).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from quanta.errors import QuantaError

USERS_FILE = "users.yaml"
PRIVATE_FILE, PRIVATE_DIR = 0o600, 0o700
SHARED_DIR = 0o711          # the state and jobs folders when jobs run as other accounts: they
                            # can reach their own folder, not list or read anything else
ROOT_UID = 0
# the service's secrets in its environment, never passed on to a job: its API tokens, its fault
# injection, the Ray cluster's authentication token
NOT_FOR_JOBS = ("QUANTA_TOKEN", "QUANTA_ADMIN_TOKEN", "QUANTA_FAULT", "RAY_AUTH_TOKEN",
                "RAY_AUTH_TOKEN_PATH")


@dataclass(frozen=True)
class Account:
    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]       # supplementary groups
    home: str

    def arg(self) -> str:
        """The account for the launcher's command line: UID:GID:G1,G2."""
        return f"{self.uid}:{self.gid}:{','.join(map(str, self.groups))}"

    @staticmethod
    def parse(text: str) -> "Account":
        import pwd
        uid, gid, groups = text.split(":")
        try:
            pw = pwd.getpwuid(int(uid))
            name, home = pw.pw_name, pw.pw_dir
        except KeyError:
            name, home = uid, "/"
        return Account(name, int(uid), int(gid), tuple(int(g) for g in groups.split(",") if g),
                       home)


def os_account(name: str, group: str = "", groups: list[str] | None = None) -> Account | None:
    """The OS account `name` (its primary group, or `group`; its groups as at login, or
    `groups`), or None if there is no such account or group."""
    import grp
    import pwd
    try:
        pw = pwd.getpwnam(name)
        gid = grp.getgrnam(group).gr_gid if group else pw.pw_gid
        extra = os.getgrouplist(name, gid) if groups is None else \
            [grp.getgrnam(g).gr_gid for g in groups]
    except (KeyError, OSError):
        return None
    return Account(name, pw.pw_uid, gid, tuple(sorted(set(extra))), pw.pw_dir)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def job_environment() -> dict:
    """The service's environment as a job's base environment: its secrets left out."""
    return {k: v for k, v in os.environ.items() if k not in NOT_FOR_JOBS}


class RunAs:
    """The service's rule for who runs a job and where (both backends)."""

    def __init__(self, state_dir: Path, privileged: bool, accounts: dict | None = None,
                 default_account: str = "", allow_root: bool = False,
                 cwd_roots: list[str] | None = None, source: str = ""):
        self.state_dir = os.path.realpath(state_dir)
        self.privileged = privileged
        self.accounts = accounts or {}
        self.default_account = default_account
        self.allow_root = allow_root
        self.cwd_roots = [os.path.realpath(r) for r in cwd_roots] if cwd_roots else None
        self.source = source or str(Path(state_dir) / USERS_FILE)

    @classmethod
    def load(cls, state_dir: Path, privileged: bool | None = None,
             users_file: Path | None = None) -> "RunAs":
        """The rule of `users_file` (`quanta serve --users`), else `$QUANTA_USERS`, else
        STATE/users.yaml (none: the defaults). A file others may write is refused (it decides
        who runs as whom)."""
        privileged = os.geteuid() == ROOT_UID if privileged is None else privileged
        path = Path(users_file or os.environ.get("QUANTA_USERS") or Path(state_dir) / USERS_FILE)
        if not path.exists():
            return cls(state_dir, privileged, source=str(path))
        st = path.stat()
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) or st.st_uid not in (ROOT_UID, os.geteuid()):
            raise QuantaError("others may write it (it decides whose account runs each job): "
                              "chmod 600 and own it by the service's account", source=str(path))
        from quanta.specfile import read_yaml
        data = read_yaml(path) or {}
        known = {"accounts", "default_account", "allow_root", "cwd_roots"}
        if not isinstance(data, dict) or set(data) - known:
            extra = sorted(set(data) - known) if isinstance(data, dict) else []
            raise QuantaError(f"unknown field '{extra[0]}' (known: {', '.join(sorted(known))})"
                              if extra else "a mapping of " + ", ".join(sorted(known)),
                              source=str(path))
        accounts = data.get("accounts") or {}
        roots = data.get("cwd_roots")
        if not isinstance(accounts, dict) or not all(
                isinstance(v, str) or (isinstance(v, dict) and isinstance(v.get("account"), str))
                for v in accounts.values()):
            raise QuantaError("user: ACCOUNT or user: {account: A, group: G, groups: [...]}",
                              source=str(path), field="accounts")
        if roots is not None and (not isinstance(roots, list) or not all(
                isinstance(r, str) and os.path.isabs(r) for r in roots)):
            raise QuantaError("a list of absolute folders", source=str(path), field="cwd_roots")
        if not isinstance(data.get("allow_root", False), bool):
            raise QuantaError("true or false", source=str(path), field="allow_root")
        return cls(state_dir, privileged, {str(k): v for k, v in accounts.items()},
                   str(data.get("default_account") or ""), data.get("allow_root", False),
                   roots, str(path))

    def account(self, user: str) -> Account | None:
        """The account the jobs of `user` run as; None: the service's own (it is unprivileged).
        A user without an account, or one mapped to root when root is not allowed, is a
        QuantaError naming the field 'user'."""
        if not self.privileged:
            return None
        entry = self.accounts.get(user)
        if isinstance(entry, dict):
            acct = os_account(entry["account"], str(entry.get("group") or ""), entry.get("groups"))
        elif entry is not None:
            acct = os_account(entry)
        else:
            acct = os_account(user) or (os_account(self.default_account)
                                        if self.default_account else None)
        if acct is None:
            raise QuantaError(f"user '{user}' has no OS account on this machine to run its jobs as "
                              f"(the service runs as root; the admin maps users in "
                              f"{self.source}, read when quanta serve starts)",
                              field="user")
        if acct.uid == ROOT_UID and not self.allow_root:
            raise QuantaError(f"the jobs of user '{user}' would run as root, which {self.source} "
                              "does not allow (allow_root: true)", field="user")
        return acct

    def roots(self, acct: Account | None) -> list[str]:
        if self.cwd_roots is not None:
            return self.cwd_roots
        return [os.path.realpath(acct.home)] if acct is not None else ["/"]

    def check_cwd(self, cwd: str, acct: Account | None, job_dir: Path | None = None) -> None:
        """A job's cwd is its own folder (or inside it, given relative) or under a root, never in
        the state folder; symbolic links are resolved (at submission and again at launch,
        `job_dir` given)."""
        if not cwd:
            return
        if not os.path.isabs(cwd):
            norm = os.path.normpath(cwd)
            if norm == ".." or norm.startswith("../"):
                raise QuantaError(f"{cwd} leaves the job's own folder (a relative cwd is taken "
                                  "from the job's folder and stays inside it)", field="cwd")
            if job_dir is not None:
                real, own = os.path.realpath(Path(job_dir) / norm), os.path.realpath(job_dir)
                if not _inside(real, own):
                    raise QuantaError(f"{cwd} leads out of the job's own folder (to {real})",
                                      field="cwd")
            return
        real = os.path.realpath(cwd)
        if job_dir is not None and _inside(real, os.path.realpath(job_dir)):
            return
        if _inside(real, self.state_dir):
            raise QuantaError(f"{cwd} is inside the scheduler's state folder (other jobs' "
                              "folders, the database, the admin token)", field="cwd")
        roots = self.roots(acct)
        if not any(_inside(real, r) for r in roots):
            raise QuantaError(f"{cwd} is outside the folders a job may run in (its own folder, "
                              f"{', '.join(roots)}; the admin adds roots in {self.source})",
                              field="cwd")


def private_dir(path: Path, mode: int = PRIVATE_DIR) -> Path:
    """Make the folder (and its parents) and give it `mode` (the folder made with it)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True, mode=mode)
    os.chmod(path, mode)
    return path


def open_private(path: Path, flags: int = os.O_WRONLY | os.O_APPEND) -> int:
    """A file descriptor of `path`, created 0600 if missing, never through a symbolic link (a
    job may plant one in its folder)."""
    return os.open(path, flags | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE)


def write_secret(path: Path, text: str) -> None:
    """Write a secret atomically: a new file made 0600 by os.open (O_CREAT|O_EXCL, so it never
    exists with a wider mode and never follows a link), then renamed over `path`."""
    from quanta.job import _atomic_write
    _atomic_write(Path(path), text.encode())


# what a state folder holds: the database (and SQLite's files beside it), the admin token, the
# one-service lock, the users file an administrator may put there first, the jobs' folders
STATE_FILES = ("quanta.db", "quanta.db-wal", "quanta.db-shm", "quanta.db-journal", "admin.token",
               "serve.lock", USERS_FILE)
STATE_DIRS = ("jobs",)


def check_state_folder(state: Path) -> None:
    """A folder that holds anything a state folder does not is refused: the service makes its
    folder private and its files 0600 (a project folder, or `--state ''`, the current one, lost
    its scripts' execute bits)."""
    if not Path(state).is_dir():
        return
    other = sorted(e.name for e in os.scandir(state)
                   if e.name not in (STATE_DIRS if e.is_dir(follow_symlinks=False) else STATE_FILES)
                   and not _left_by_a_write(e.name))
    if other:
        shown = ", ".join(other[:3]) + (f" and {len(other) - 3} more" if len(other) > 3 else "")
        raise QuantaError(f"is not a state folder: it holds {shown}, which quanta serve would "
                          f"make private (give a new or empty folder, or an earlier service's)",
                          source=str(state), field="--state")


def _left_by_a_write(name: str) -> bool:
    """A temporary file of an atomic write of one of the state's files, left by a service killed
    in the middle of it (quanta.job._atomic_write's name: .NAME.PID.HEX.tmp)."""
    return any(name.startswith(f".{f}.") and name.endswith(".tmp") for f in STATE_FILES)


def secure_state(state: Path, shared: bool) -> None:
    """The state folder 0700 (0711 when jobs run as other accounts: they reach their own job
    folder, and list or read nothing else), its jobs folder alike, and its own files of an older
    release made private (0600); nothing else (check_state_folder: there is nothing else)."""
    mode = SHARED_DIR if shared else PRIVATE_DIR
    private_dir(state, mode)
    private_dir(Path(state) / "jobs", mode)
    for entry in os.scandir(state):
        if entry.name in STATE_FILES and entry.is_file(follow_symlinks=False):
            os.chmod(entry.path, PRIVATE_FILE)
