"""The queue tree: a YAML file of queues (cohorts and the teams under them), validated by its
schema (quanta/queues/schema.py), compiled into arrays the queue layer reads.

    name: lab                            # optional (default: the file's stem)
    default_queue: infra                 # jobs whose queue and user match no queue go here
    fairshare: {half_life_h: 24}         # decayed usage (Slurm's PriorityDecayHalfLife)
    preemption: {min_runtime_s: 600, reclaim_grace_s: 60}
    priority_classes: {high: 100, normal: 0, low: -100}
    queues:
      - name: research                   # a cohort: a queue other queues name as their parent
        quota: {k80: 16}                 # its own pool (optional), lent to its children
      - name: vision
        parent: research
        weight: 2                        # fair-share weight among its siblings
        users: [alice, bob]              # who may submit ("*" or none listed: anyone)
        aliases: [6c71a0]                # trace queue / virtual-cluster names that mean this queue
        quota:
          v100: 16                       # nominal GPUs of that type (a Kueue ResourceFlavor)
          p100: {nominal: 8, borrowing_limit: 8, lending_limit: 4}

Queues form a forest through `parent`; the queues no other queue names as parent are the leaves
that jobs are submitted to. Every problem is one line naming the file, the line and the field
(`QuantaError`), e.g. a cycle of parents, a negative quota, an unknown GPU type, a user listed in
`users:` whom no queue admits.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from pydantic import ValidationError

from quanta.errors import QuantaError
from quanta.model.gpu import GPU_TYPES, gpu_type
from quanta.model.job import CLASS_NAME, JobSpec
from quanta.queues.schema import QueuesFile, Source, read_source
from quanta.specfile import error_message

# -- the compiled tree ------------------------------------------------------------------------------
@dataclass
class Compiled:
    """The tree's quotas for one cluster's GPU types (index k = cluster.types[k])."""
    types: tuple[str, ...]
    nominal_total: np.ndarray   # (N, K) the node's own nominal plus its descendants'
    cap: np.ndarray             # (N, K) most the subtree may hold: nominal_total + borrowing limit
    reserved: np.ndarray        # (N, K) nominal GPUs it never lends (nominal_total - lending limit)
    usable: np.ndarray          # (L, K) a leaf may use the type (it or an ancestor has quota for it)
    speed: np.ndarray           # (K,) usage weight per GPU-second of each type
    unquoted: tuple[str, ...]   # cluster types no queue has quota for (unusable under the layer)
    flavor_order: list[list[int]]   # per leaf: the types it tries, its own quota's (file order)
                                    # first, then its cohorts' (cluster order)


@dataclass
class QueueTree:
    """Queues by index (file order); `leaves` are the queues jobs are submitted to."""
    name: str
    source: str
    names: list[str]
    parent: np.ndarray            # (N,) parent index, -1 for a top-level queue
    weight: np.ndarray            # (N,)
    flavors: list[str]            # GPU types named in quotas (canonical names)
    nominal: np.ndarray           # (N, F) own nominal per flavor
    borrow: np.ndarray            # (N, F) borrowing limit (inf: none)
    lend: np.ndarray              # (N, F) lending limit (inf: none)
    listed: np.ndarray            # (N, F) the queue's quota names the flavor
    users: list[tuple[str, ...]]  # per queue ('*' = anyone; () = anyone)
    aliases: list[tuple[str, ...]]
    min_runtime: np.ndarray       # (N,) seconds
    starvation: np.ndarray        # (N,) seconds (inf: none)
    config: QueuesFile
    default_queue: int = -1
    children: list[list[int]] = field(default_factory=list)
    leaves: list[int] = field(default_factory=list)
    leaf_pos: dict[int, int] = field(default_factory=dict)   # node index -> leaf position
    paths: list[list[int]] = field(default_factory=list)     # leaf position -> nodes leaf..top
    bottom_up: list[int] = field(default_factory=list)       # every node, deepest first
    leaves_arr: np.ndarray = field(default=None)              # type: ignore[assignment]
    leaf_top: list[int] = field(default_factory=list)        # leaf position -> its top node
    levels: list[np.ndarray] = field(default_factory=list)   # nodes by depth, the tops first
    _compiled: dict = field(default_factory=dict)
    _by_name: dict[str, int] = field(default_factory=dict)
    _by_alias: dict[str, int] = field(default_factory=dict)
    _by_user: dict[str, int] = field(default_factory=dict)
    _open: list[int] = field(default_factory=list)          # leaves anyone may submit to

    def __post_init__(self) -> None:
        n = len(self.names)
        self.children = [[] for _ in range(n)]
        for i, p in enumerate(self.parent.tolist()):
            if p >= 0:
                self.children[p].append(i)
        self.leaves = [i for i in range(n) if not self.children[i]]
        self.leaf_pos = {q: i for i, q in enumerate(self.leaves)}
        self.paths = []
        for q in self.leaves:
            path, x = [], q
            while x >= 0:
                path.append(x)
                x = int(self.parent[x])
            self.paths.append(path)
        self._by_name = {nm: i for i, nm in enumerate(self.names)}
        self.bottom_up = sorted(range(n), key=lambda i: -self.depth(i))
        self.leaves_arr = np.array(self.leaves, dtype=np.int64)
        self.leaf_top = [p[-1] for p in self.paths]
        depth = np.array([self.depth(i) for i in range(n)], dtype=np.int64)
        self.levels = [np.flatnonzero(depth == d) for d in range(int(depth.max()) + 1)] if n else []
        for q in self.leaves:
            for a in self.aliases[q]:
                self._by_alias.setdefault(a, q)
            us = self.users[q]
            if not us or "*" in us:
                self._open.append(q)
            for u in us:
                if u != "*":
                    self._by_user.setdefault(u, q)

    def rooms(self, comp: "Compiled", S: np.ndarray) -> np.ndarray:
        """(L, K) GPUs of each type each leaf could still take under the quotas, given S (N, K):
        a leaf's usage, a cohort's sum of its children's effective usage (max(S, reserved))).
        R(n) = min(cap(n) - S(n), max(reserved(n) - S(n), 0) + R(parent))."""
        R = np.empty_like(S)
        for lvl in self.levels:
            par = self.parent[lvl]
            up = np.where((par >= 0)[:, None], R[np.maximum(par, 0)], np.inf)
            R[lvl] = np.minimum(comp.cap[lvl] - S[lvl],
                                np.maximum(comp.reserved[lvl] - S[lvl], 0.0) + up)
        return R[self.leaves_arr]

    # -- structure ------------------------------------------------------------------------------
    @property
    def num_leaves(self) -> int:
        return len(self.leaves)

    def depth(self, q: int) -> int:
        d = 0
        while self.parent[q] >= 0:
            q = int(self.parent[q])
            d += 1
        return d

    def top(self, q: int) -> int:
        while self.parent[q] >= 0:
            q = int(self.parent[q])
        return q

    def closeness(self) -> np.ndarray:
        """(L, L) how close two leaves are: the depth + 1 of their lowest common ancestor (0: in
        different trees; a leaf with itself: 2**20)."""
        got = self._compiled.get("closeness")
        if got is None:
            L = len(self.leaves)
            got = np.zeros((L, L), dtype=np.int64)
            for a in range(L):
                pa = set(self.paths[a])
                for b in range(L):
                    pb = self.paths[b]
                    got[a, b] = next((len(pb) - j for j, nd in enumerate(pb) if nd in pa), 0)
                got[a, a] = 1 << 20
            self._compiled["closeness"] = got
        return got

    def norm_share(self) -> np.ndarray:
        """(N,) Slurm's normalised shares: the product of weight / siblings' weights on the path."""
        got = self._compiled.get("norm_share")
        if got is not None:
            return got
        out = np.ones(len(self.names))
        tops = [i for i in range(len(self.names)) if self.parent[i] < 0]
        stack = [(i, float(self.weight[i]) / float(self.weight[tops].sum())) for i in tops]
        while stack:
            i, s = stack.pop()
            out[i] = s
            kids = self.children[i]
            if kids:
                tot = float(self.weight[kids].sum())
                stack.extend((c, s * float(self.weight[c]) / tot) for c in kids)
        self._compiled["norm_share"] = out
        return out

    # -- jobs -> queues ---------------------------------------------------------------------------
    def allows(self, q: int, user: str) -> bool:
        us = self.users[q]
        return not us or "*" in us or user in us

    def queue_of(self, spec: JobSpec) -> int:
        """The leaf a job belongs to (node index), -1 if none: its queue by name or alias (if the
        queue admits its user), else the queue listing its user, else the default queue."""
        q = self._by_name.get(spec.queue)
        if q is None:
            q = self._by_alias.get(spec.queue)
        if q is not None and q in self.leaf_pos and self.allows(q, spec.user):
            return q
        if q is not None and q not in self.leaf_pos:
            return -1                      # a cohort: jobs go to its leaves
        q = self._by_user.get(spec.user) if spec.user else None
        if q is not None:
            return q
        if self.default_queue >= 0 and self.allows(self.default_queue, spec.user):
            return self.default_queue
        return -1

    def admission_error(self, queue: str, user: str) -> tuple[str, str] | None:
        """Why the service refuses a submission of `user` to `queue` ("default": none named), as
        (field, message), or None: an unknown queue, a cohort, a queue that does not admit the
        user, or no queue at all for the user."""
        q = self._by_name.get(queue, self._by_alias.get(queue))
        if q is None and queue != "default":
            mine = [self.names[x] for x in self.leaves if self.allows(x, user)]
            return "queue", (f"no queue '{queue}' in {self.name} (queues {user} may submit to: "
                             f"{', '.join(mine) or 'none'})")
        if q is not None and q not in self.leaf_pos:
            kids = [self.names[x] for x in self.leaves if q in self.paths[self.leaf_pos[x]]]
            return "queue", (f"'{queue}' is a cohort of {self.name}: submit to one of its "
                             f"queues ({', '.join(kids)})")
        if q is not None and not self.allows(q, user):
            return "queue", f"user '{user}' may not submit to queue '{self.names[q]}'"
        if q is None and self.queue_of(JobSpec("", 0.0, 1, user=user, queue=queue)) < 0:
            return "queue", (f"user '{user}' is in no queue of {self.name} and it has no "
                             f"default_queue: name a queue")
        return None

    def priority_value(self, value: int | str) -> int:
        """A job's priority: a number as it is, a class name as its value (KeyError if the file
        has no such class)."""
        if isinstance(value, str) and not re.fullmatch(r"[+-]?\d+", value.strip()):
            return int(self.config.priority_classes[value])
        return int(value)

    def class_names(self) -> str:
        pc = self.config.priority_classes
        return ", ".join(f"{k}={v}" for k, v in pc.items()) or "none: give numbers"

    # -- per cluster -------------------------------------------------------------------------------
    def compile(self, types: Sequence[str]) -> Compiled:
        key = tuple(types)
        got = self._compiled.get(key)
        if got is not None:
            return got
        n, K = len(self.names), len(key)
        col = {f: i for i, f in enumerate(self.flavors)}
        canon = []
        for t in key:
            try:
                canon.append(gpu_type(t).name)
            except QuantaError:
                canon.append(t)
        nominal = np.zeros((n, K))
        borrow = np.full((n, K), np.inf)
        lend = np.full((n, K), np.inf)
        listed = np.zeros((n, K), dtype=bool)
        for k, t in enumerate(canon):
            c = col.get(t)
            if c is not None:
                nominal[:, k] = self.nominal[:, c]
                borrow[:, k] = self.borrow[:, c]
                lend[:, k] = self.lend[:, c]
                listed[:, k] = self.listed[:, c]
        # subtree totals, children before parents (leaves first by depth)
        total = nominal.copy()
        for i in self.bottom_up:
            p = int(self.parent[i])
            if p >= 0:
                total[p] += total[i]
        cap = total + borrow
        tops = self.parent < 0
        cap[tops] = total[tops]            # a top-level queue has nobody to borrow from
        reserved = np.maximum(total - lend, 0.0)
        usable = np.zeros((len(self.leaves), K), dtype=bool)
        for li, path in enumerate(self.paths):
            usable[li] = listed[path].any(axis=0)
        sp = {gpu_type(t).name: w for t, w in self.config.fairshare.speed.items()}
        speed = np.array([float(sp.get(t, GPU_TYPES[t].speed if t in GPU_TYPES else 1.0))
                          for t in canon])
        unquoted = tuple(t for k, t in enumerate(key) if not listed[:, k].any())
        kof = {t: k for k, t in enumerate(canon)}
        order = []
        for li, q in enumerate(self.leaves):
            own = [kof[c] for c in (gpu_type(t).name for t in self.config.queues[q].quota)
                   if c in kof and usable[li, kof[c]]]
            order.append(own + [k for k in range(K) if usable[li, k] and k not in own])
        got = Compiled(key, total, cap, reserved, usable, speed, unquoted, order)
        self._compiled[key] = got
        return got

    # -- checks ------------------------------------------------------------------------------------
    def check_jobs(self, specs: Sequence[JobSpec], source: str = "") -> None:
        """Every job belongs to a queue: else one line naming the trace file, the job's line and
        the field (user, or queue when the job has no user)."""
        for s in specs:
            if self.queue_of(s) < 0:
                q = self._by_name.get(s.queue, self._by_alias.get(s.queue))
                if q is not None and q in self.leaf_pos:    # (it was "matches no queue")
                    who = f"user '{s.user}'" if s.user else "a job with no user"
                    raise QuantaError(
                        f"job {s.job_id}: queue '{s.queue}' of {self.source or self.name} does "
                        f"not admit {who} (its users: {', '.join(self.users[q])})",
                        source=source or None, line=s.source_line or None, field="user")
                who = f"user '{s.user}' is in no queue" if s.user else \
                    f"queue '{s.queue}' matches no queue"
                raise QuantaError(
                    f"job {s.job_id}: {who} of {self.source or self.name} (list the user under "
                    f"a queue's users, the queue under its aliases, or set default_queue)",
                    source=source or None, line=s.source_line or None,
                    field="user" if s.user else "queue")

    def resolve_priorities(self, specs: Sequence[JobSpec], source: str = "") -> list[JobSpec]:
        """The jobs with their priority class names (a trace's `priority` column) replaced by
        the classes' values; an unknown name is one line naming the trace file, line and field."""
        return resolve_priorities(specs, self, source)

    def notes(self, types: Sequence[str], specs: Sequence[JobSpec] = ()) -> list[str]:
        """What an operator should know about this tree on this cluster: GPU types no queue may
        use, jobs bigger than their queue can ever hold."""
        c = self.compile(types)
        out = []
        if c.unquoted:
            out.append(f"queues {self.name}: no quota for GPU type(s) {', '.join(c.unquoted)}: "
                       f"no job runs there")
        big = sum(1 for s in specs if self.never_fits(s, types))
        if big:
            out.append(f"queues {self.name}: {big} job(s) ask for more GPUs than their queue can "
                       f"ever hold: they wait (QuotaExceeded)")
        return out

    def never_fits(self, spec: JobSpec, types: Sequence[str]) -> str | None:
        """Why the job's queue can never hold it on a cluster of `types` (its quotas, and the
        caps of the cohorts above it, for every type the job may use), or None where it can (or
        it is in no queue)."""
        q = self.queue_of(spec)
        if q < 0:
            return None
        c = self.compile(types)
        li = self.leaf_pos[q]
        most = np.min(c.cap[self.paths[li]], axis=0) * c.usable[li]
        ok = [k for k, t in enumerate(types) if not spec.gpu_types or t in spec.gpu_types]
        if ok and max(most[ok]) >= spec.num_gpus:
            return None
        held = ", ".join(f"{types[k]} {_count(most[k])}" for k in ok) or "none of its types"
        gpus = f"{spec.num_gpus} GPU{'' if spec.num_gpus == 1 else 's'}"
        return (f"queue '{self.names[q]}' can never hold {gpus} of one type "
                f"(the most it may hold: {held}); the job would wait for ever")

    def describe(self) -> str:
        return f"{self.name}: {len(self.names)} queues ({self.num_leaves} leaves), " \
               f"flavors {', '.join(self.flavors) or 'none'}"


def _count(x: float) -> str:
    return "no limit" if x == float("inf") else f"{x:g}"


def load_queues(path: str | Path) -> QueueTree:
    """Read and validate a queues file; any problem is a QuantaError naming file, line, field."""
    path = Path(path)
    src = read_source(path)
    if not isinstance(src.data, dict):
        raise QuantaError("a queues file is a mapping with a 'queues' list", source=str(path),
                          line=1)
    try:
        cfg = QueuesFile.model_validate(src.data)
    except ValidationError as err:
        e = err.errors()[0]
        loc = list(e["loc"])
        bad_key = e["type"] == "extra_forbidden"
        raise src.error(error_message(e), loc, key=bad_key) from None
    return build_tree(cfg, src, path.stem)


def parse_queues(data: Any, source: str = "<queues>") -> QueueTree:
    """A tree from an already-parsed mapping (the API); errors name `source` and the field."""
    src = Source(source, None, data)
    try:
        cfg = QueuesFile.model_validate(data)
    except ValidationError as err:
        e = err.errors()[0]
        raise src.error(error_message(e), list(e["loc"])) from None
    return build_tree(cfg, src, cfg.name or "queues")


def build_tree(cfg: QueuesFile, src: Source, default_name: str) -> QueueTree:
    names: list[str] = []
    index: dict[str, int] = {}
    for i, q in enumerate(cfg.queues):
        if q.name in index:
            raise src.error(f"queue '{q.name}' defined twice (first at line "
                            f"{src.line(['queues', index[q.name], 'name'])})", ["queues", i, "name"])
        index[q.name] = i
        names.append(q.name)
    n = len(names)
    parent = np.full(n, -1, dtype=np.int64)
    for i, q in enumerate(cfg.queues):
        if q.parent is None:
            continue
        if q.parent not in index:
            raise src.error(f"parent '{q.parent}' is not a queue of this file",
                            ["queues", i, "parent"])
        if q.parent == q.name:
            raise src.error(f"queue '{q.name}' is its own parent", ["queues", i, "parent"])
        parent[i] = index[q.parent]
    for i in range(n):                 # cycles: walk up at most n steps
        seen, x = [i], int(parent[i])
        while x >= 0:
            if x in seen:
                cyc = " -> ".join(names[y] for y in seen[seen.index(x):] + [x])
                last = seen[-1]
                raise src.error(f"the parents form a cycle: {cyc}", ["queues", last, "parent"])
            seen.append(x)
            x = int(parent[x])
    has_kids = np.zeros(n, dtype=bool)
    has_kids[parent[parent >= 0]] = True
    flavors: list[str] = []
    for i, q in enumerate(cfg.queues):
        for t in q.quota:
            try:
                canon = gpu_type(t).name
            except QuantaError as err:
                raise src.error(err.bare, ["queues", i, "quota", t], key=True) from None
            if canon not in flavors:
                flavors.append(canon)
        if has_kids[i] and q.users and q.users != ["*"]:
            raise src.error(f"queue '{q.name}' is a cohort (other queues name it as parent): "
                            f"users submit to its leaf queues", ["queues", i, "users"])
        if has_kids[i] and q.aliases:         # (jobs go to leaves: they were dropped unsaid)
            raise src.error(f"queue '{q.name}' is a cohort (other queues name it as parent): "
                            f"give the aliases to one of its leaf queues", ["queues", i, "aliases"])
    for t, w in cfg.fairshare.speed.items():   # (an unknown type or a negative weight passed)
        try:
            gpu_type(t)
        except QuantaError as err:
            raise src.error(err.bare, ["fairshare", "speed", t], key=True) from None
        if not 0 <= w < float("inf"):
            raise src.error(f"must be a usage weight, 0 or more, got {w:g}",
                            ["fairshare", "speed", t])
    alias_of: dict[str, int] = {}             # an alias means one queue, and no other's name
    for i, q in enumerate(cfg.queues):
        for k, a in enumerate(q.aliases):
            if a in index and a != q.name:
                raise src.error(f"alias '{a}' is the name of queue '{a}'",
                                ["queues", i, "aliases", k])
            other = alias_of.setdefault(a, i)
            if other != i:
                raise src.error(f"alias '{a}' is also an alias of queue '{names[other]}'",
                                ["queues", i, "aliases", k])
    F = len(flavors)
    nominal = np.zeros((n, F))
    borrow = np.full((n, F), np.inf)
    lend = np.full((n, F), np.inf)
    listed = np.zeros((n, F), dtype=bool)
    for i, q in enumerate(cfg.queues):
        for t, e in q.quota.items():
            c = flavors.index(gpu_type(t).name)
            if listed[i, c]:
                raise src.error(f"GPU type '{t}' given twice", ["queues", i, "quota", t], key=True)
            listed[i, c] = True
            nominal[i, c] = e.nominal
            if e.borrowing_limit is not None:
                borrow[i, c] = e.borrowing_limit
            if e.lending_limit is not None:
                if e.lending_limit > e.nominal and not has_kids[i]:
                    raise src.error(f"lending_limit {e.lending_limit} is more than the nominal "
                                    f"quota {e.nominal}", ["queues", i, "quota", t, "lending_limit"])
                lend[i, c] = e.lending_limit
    pre = cfg.preemption
    min_rt = np.array([q.min_runtime_s if q.min_runtime_s is not None else pre.min_runtime_s
                       for q in cfg.queues], dtype=float)
    starve = np.array([q.starvation_s or cfg.starvation_s or math.inf for q in cfg.queues],
                      dtype=float)
    default = -1
    if cfg.default_queue is not None:
        default = index.get(cfg.default_queue, -1)
        if default < 0 or has_kids[default]:
            why = "is not a queue of this file" if default < 0 else "is a cohort, not a leaf queue"
            raise src.error(f"default_queue '{cfg.default_queue}' {why}", ["default_queue"])
    tree = QueueTree(
        name=cfg.name or default_name, source=src.path, names=names, parent=parent,
        weight=np.array([q.weight for q in cfg.queues], dtype=float), flavors=flavors,
        nominal=nominal, borrow=borrow, lend=lend,
        users=[tuple(q.users) for q in cfg.queues], aliases=[tuple(q.aliases) for q in cfg.queues],
        min_runtime=min_rt, starvation=starve, config=cfg, default_queue=default, listed=listed)
    # users declared at the top (their shares) must be able to submit somewhere
    for u in cfg.users:
        if u not in tree._by_user and not tree._open:
            raise src.error(f"user '{u}' is in no queue (list it under a queue's users)",
                            ["users", u], key=True)
    for name in cfg.priority_classes:
        if not re.fullmatch(CLASS_NAME, str(name)):
            raise src.error(f"priority class '{name}' is not a name (a letter, then letters, "
                            f"digits, _ . -)", ["priority_classes", name], key=True)
    return tree


def resolve_priorities(specs: Sequence[JobSpec], tree: "QueueTree | None",
                       source: str = "") -> list[JobSpec]:
    """Jobs whose priority is a class name (str) get the value of that class in `tree`'s
    `priority_classes`; numbers stay. A name without a tree, or one the tree lacks, is a
    QuantaError naming the trace file, the job's line and `priority`."""
    out = list(specs)
    for i, s in enumerate(out):
        if not isinstance(s.priority, str):
            continue
        try:
            if tree is None:
                out[i] = s.with_(priority=int(s.priority.strip()))
                continue
            out[i] = s.with_(priority=tree.priority_value(s.priority))
        except (KeyError, ValueError):
            why = f"unknown priority class '{s.priority}' (classes: {tree.class_names()})" \
                if tree is not None else f"priority class '{s.priority}' needs --queues FILE " \
                "with priority_classes (or give numbers)"
            raise QuantaError(f"job {s.job_id}: {why}", source=source or None,
                              line=s.source_line or None, field="priority") from None
    return out
