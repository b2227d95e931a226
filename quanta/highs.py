"""HiGHS called directly: linear programmes (Gavel's allocations, Sia's and Pollux's configuration
programmes) without scipy.optimize.linprog / milp.

`linprog` costs about three times what HiGHS itself spends on these small programmes: it checks
and converts its inputs through scipy.sparse, builds a fresh solver and its options, and wraps
the result. Here a programme is handed to HiGHS as the column-wise arrays it takes (built with
numpy, `csc`), to one solver object kept for the whole process, with the options linprog sets
(presolve on, dual simplex, HiGHS' default tolerances; interior point with crossover from
IPM_FROM variables), so that a programme is solved as linprog would solve it. A programme can be
kept and solved again after its costs or bounds change (`LP.resolve`): HiGHS then starts from
the last basis.

HiGHS is the copy scipy bundles (scipy.optimize._highspy._core), so that results do not depend on
whether highspy happens to be installed; QUANTA_HIGHS=highspy uses highspy's instead (`core`).
Neither is imported before the first programme is solved.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

IPM_FROM = 3000   # variables; interior point is ~3x faster than simplex at 2,048 jobs,
                  # dual simplex is faster on the small class-aggregated programmes
_CORE = None
WARM = True       # LP.resolve starts from the last basis (False: solves afresh, as linprog would)


def core():
    """HiGHS' Python bindings: the copy scipy bundles (always there, one version per scipy
    release, the one linprog and milp run: the same answers as they give), or highspy's with
    QUANTA_HIGHS=highspy (pip install highspy; its own HiGHS version may stop at another optimal
    vertex where the optimum is not unique)."""
    global _CORE
    if _CORE is None:
        if os.environ.get("QUANTA_HIGHS") == "highspy":
            import highspy._core as c
        else:
            c = _scipy_core()
        _CORE = c
    return _CORE


_SCIPY_CORE = "scipy.optimize._highspy._core"


def _scipy_core():
    """scipy's HiGHS bindings without importing scipy.optimize: the package's __init__ imports
    all of scipy.optimize and scipy.linalg (~0.35 s, more than a whole FIFO simulation), none of
    which the bindings use. The extension is loaded from its file under its own name and
    registered as such, so a later `import scipy.optimize` (milp, a user's linprog) finds and
    uses this same module. Where scipy lays its files out otherwise, the plain import."""
    import sys
    mod = sys.modules.get(_SCIPY_CORE)
    if mod is not None:
        return mod
    import importlib.machinery
    import importlib.util

    import scipy
    folder = os.path.join(os.path.dirname(scipy.__file__), "optimize", "_highspy")
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(folder, "_core" + suffix)
        if os.path.exists(path):
            spec = importlib.util.spec_from_file_location(_SCIPY_CORE, path)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[_SCIPY_CORE] = mod
            try:
                spec.loader.exec_module(mod)
            except BaseException:
                del sys.modules[_SCIPY_CORE]
                raise
            return mod
    import scipy.optimize._highspy._core as c
    return c


def csc(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, shape: tuple[int, int]):
    """Column-wise (start, index, value) of the matrix with entries vals at (rows, cols):
    row indexes ascending within each column, repeated entries summed; start and index as
    HiGHS' 32-bit integers."""
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    vals = np.asarray(vals, dtype=float)
    _nrow, ncol = shape
    order = np.lexsort((rows, cols))
    r, c, v = rows[order], cols[order], vals[order]
    if len(r) > 1:
        new = np.ones(len(r), dtype=bool)
        new[1:] = (r[1:] != r[:-1]) | (c[1:] != c[:-1])
        if not new.all():
            at = np.flatnonzero(new)
            v = np.add.reduceat(v, at)
            r, c = r[at], c[at]
    start = np.zeros(ncol + 1, dtype=np.int32)
    np.cumsum(np.bincount(c, minlength=ncol), out=start[1:])
    return start, r.astype(np.int32), v


@dataclass
class Result:
    status: int             # 0 optimal, 1 limit, 2 infeasible, 3 unbounded, 4 other (linprog's)
    message: str
    x: np.ndarray | None
    row_dual: np.ndarray | None
    col_dual: np.ndarray | None = None      # reduced costs


_STATUS = {"kOptimal": 0, "kTimeLimit": 1, "kIterationLimit": 1, "kInfeasible": 2,
           "kModelError": 2, "kUnbounded": 3}


class LP:
    """One HiGHS solver, kept between programmes."""

    def __init__(self):
        self.c = core()
        self.h = self.c._Highs()
        self.ipm: bool | None = None
        self.ncol = 0
        self.owner = None         # who passed the programme it holds (LP.solve's `owner`)
        self.bounds: tuple | None = None    # the bounds passed with it (`solve`; `resolve`'s)
        self._status_list: list | None = None

    def _options(self, ipm: bool) -> None:
        c = self.c
        o = c.HighsOptions()
        o.presolve = "on"
        o.highs_debug_level = c.HighsDebugLevel.kHighsDebugLevelNone
        o.log_to_console = False
        o.output_flag = False
        o.simplex_strategy = 1           # dual simplex (linprog's simplex_strategy)
        if ipm:
            o.solver = "ipm"
        self.h.passOptions(o)
        self.ipm = ipm

    def solve(self, cost: np.ndarray, A, row_upper: np.ndarray, col_lower: np.ndarray,
              col_upper: np.ndarray, row_lower: np.ndarray | None = None,
              ipm: bool | None = None, owner=None,
              basis: tuple[np.ndarray, np.ndarray] | None = None) -> Result:
        """minimise cost x  s.t.  row_lower <= A x <= row_upper (row_lower: -inf by default),
        col_lower <= x <= col_upper; A = (start, index, value) column-wise (`csc`). With
        `basis` (each column's and row's status, `LP.basis`'s codes), dual simplex starts from
        it, with no presolve (HiGHS repairs a basis with too many or too few basic variables,
        or a singular one); else the programme is solved afresh as linprog would."""
        c = self.c
        n, m = len(cost), len(row_upper)
        if basis is not None:
            ipm = False                  # (a basis is for the simplex)
        elif ipm is None:
            ipm = n >= IPM_FROM
        if ipm != self.ipm:
            self._options(ipm)
        start, index, value = A
        # the model as flat arrays (HiGHS copies them once; a HighsLp's fields would each be
        # converted first: ~50 us more per programme), all columns continuous; the bounds kept
        # as HiGHS holds them (copies: `resolve` changes a column's; `basis` reads them)
        bounds = (np.array(col_lower, dtype=float), np.array(col_upper, dtype=float),
                  np.full(m, -c.kHighsInf) if row_lower is None
                  else np.array(row_lower, dtype=float), np.array(row_upper, dtype=float))
        passed = self.h.passModel(
            n, m, len(index), int(c.MatrixFormat.kColwise), int(c.ObjSense.kMinimize), 0.0,
            np.asarray(cost, dtype=float), *bounds, np.asarray(start, dtype=np.int32),
            np.asarray(index, dtype=np.int32), np.asarray(value, dtype=float),
            np.zeros(n, dtype=np.int32))
        self.model = (cost, A, ipm)
        self.bounds = bounds
        self.owner = owner
        if passed == c.HighsStatus.kError:
            return Result(2, "model error", None, None)
        self.ncol = n
        if basis is not None:
            status = self._statuses()
            b = c.HighsBasis()
            b.col_status = [status[k] for k in basis[0].tolist()]
            b.row_status = [status[k] for k in basis[1].tolist()]
            b.alien = True        # its basic variables need not number the rows
            b.valid = True
            if self.h.setBasis(b) == c.HighsStatus.kError:
                return Result(4, "basis rejected", None, None)
        return self._run()

    def _statuses(self) -> list:
        """HiGHS' basis statuses, indexed by their codes (`basis`)."""
        if self._status_list is None:
            self._status_list = sorted(self.c.HighsBasisStatus.__members__.values(), key=int)
        return self._status_list

    def basis(self) -> tuple[np.ndarray, np.ndarray]:
        """The last solve's basis: each column's and row's status as HiGHS' codes (0 at lower,
        1 basic, 2 at upper, 3 zero, 4 nonbasic), for `solve(basis=...)`. After a simplex
        solve, read from HiGHS' basic variables and the solution (each nonbasic variable at the
        bound it sits on; a fixed one, lower = upper, at the side its dual points to): the
        statuses HiGHS reports, ~10x faster than `getBasis`' list of status objects. After
        interior point (where HiGHS' basic variables are not to be asked for: scipy 1.17's
        bindings crash), or where HiGHS holds no basis (`getBasicVariables` fails: a model
        error, a failure found by presolve), `getBasis`' own."""
        c = self.c
        if not self.ipm and self.bounds is not None:
            status, basic = self.h.getBasicVariables()
            if status == c.HighsStatus.kOk:
                sol = self.h.getSolution()
                cl, cu, rl, ru = self.bounds
                cols = _nonbasic(np.asarray(sol.col_value), cl, cu, -np.asarray(sol.col_dual))
                rows = _nonbasic(np.asarray(sol.row_value), rl, ru, np.asarray(sol.row_dual))
                cols[basic[basic >= 0]] = 1
                rows[-1 - basic[basic < 0]] = 1
                return cols, rows
        b = self.h.getBasis()
        return (np.array([int(s) for s in b.col_status], dtype=np.int8),
                np.array([int(s) for s in b.row_status], dtype=np.int8))

    def resolve(self, cost: np.ndarray | None = None,
                bounds: tuple[int, float, float] | None = None,
                warm: bool | None = None) -> Result:
        """The last programme again with new costs and/or one column's bounds (col, lo, hi),
        started from the last basis by dual simplex (`warm`, default WARM), else solved afresh."""
        if not (WARM if warm is None else warm):
            cost0, A, ipm = self.model
            cl, cu, rl, ru = (b.copy() for b in self.bounds)
            if bounds is not None:
                cl[bounds[0]], cu[bounds[0]] = bounds[1], bounds[2]
            return self.solve(cost0 if cost is None else cost, A, ru, cl, cu, rl, ipm, self.owner)
        if self.ipm:              # interior point cannot start from a basis: dual simplex can
            self._options(False)  # (from the crossover's), in a few iterations, not a fresh IPM
        if cost is not None:
            idx = np.arange(self.ncol, dtype=np.int32)
            self.h.changeColsCost(self.ncol, idx, np.asarray(cost, dtype=float))
        if bounds is not None:
            self.h.changeColBounds(int(bounds[0]), float(bounds[1]), float(bounds[2]))
            self.bounds[0][bounds[0]], self.bounds[1][bounds[0]] = bounds[1], bounds[2]
        return self._run()

    def _run(self) -> Result:
        c = self.c
        if self.h.run() == c.HighsStatus.kError:
            st = self.h.getModelStatus()
            return Result(4, self.h.modelStatusToString(st), None, None)
        st = self.h.getModelStatus()
        code = _STATUS.get(st.name, 4)
        msg = self.h.modelStatusToString(st)
        if code != 0:
            return Result(code, msg, None, None)
        sol = self.h.getSolution()
        return Result(0, msg, np.array(sol.col_value), np.array(sol.row_dual),
                      np.array(sol.col_dual))


def _nonbasic(value: np.ndarray, lower: np.ndarray, upper: np.ndarray, up_dual: np.ndarray
              ) -> np.ndarray:
    """Each variable's status were it nonbasic: at the bound it sits on (where both are finite
    the nearer), zero where it has none (free); a fixed one (lower = upper) at upper where
    `up_dual` > 0 (HiGHS' sign: a column's reduced cost < 0, a row's dual > 0), else lower."""
    lo, up = np.isfinite(lower), np.isfinite(upper)
    at_up = up & (~lo | (value - lower > upper - value) | ((lower == upper) & (up_dual > 0)))
    return np.where(at_up, 2, np.where(lo, 0, 3)).astype(np.int8)


_LP: LP | None = None
_NAMED: dict[str, LP] = {}


def solver(name: str | None = None) -> LP:
    """The process' solver (or its solver of that name: a programme kept there for a while is
    not replaced by the others solved meanwhile)."""
    global _LP
    if name is not None:
        if name not in _NAMED:
            _NAMED[name] = LP()
        return _NAMED[name]
    if _LP is None:
        _LP = LP()
    return _LP
