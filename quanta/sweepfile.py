"""Sweep files (YAML), read into a `SweepSpec`; a mistake is one line naming the file, the line
and the field. Axes take one value or a list; seeds also take a range "0-4" (inclusive).

```yaml
rates: [1, 2, 3]          # synthetic Gavel-style arrivals, jobs/hour (or traces: [philly, t.csv])
jobs: 300                 # jobs per synthetic trace
clusters: [gavel-108]     # default: gavel-108, or the world's reference cluster (sia-sim, gavel-sim)
policies:
  - las
  - fifo:backfill=false
  - {name: tiresias-las, params: {promote_knob: inf}}
  - my_pkg.my_mod:MyPolicy
seeds: 0-2
load_scales: [1.0]
window: "100:200"         # steady-state window, jobs by arrival order
restart_delay: 0
queues: teams.yaml        # every policy under a queues file (docs/queues.md)
```
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from quanta.errors import QuantaError
from quanta.report.window import parse_window
from quanta.specfile import read_yaml
from quanta.sweeps import SweepSpec

AXES = {"trace": "traces", "rate": "rates", "cluster": "clusters", "policy": "policies",
        "seed": "seeds", "load_scale": "load_scales"}
SCALARS = {"jobs": int, "format": str, "max_jobs": int, "restart_delay": float,
           "node_mtbf_h": float, "repair_h": float, "until_h": float, "drop_impossible": bool,
           "world": str, "window": str, "queues": str}
KNOWN = sorted(set(AXES.values()) | set(AXES) | set(SCALARS))


class _Lines:
    """Line numbers of a YAML document's keys and items (1-based), by path."""

    def __init__(self, text: str):
        try:
            self.root = yaml.compose(text)
        except yaml.YAMLError:
            self.root = None

    def raw(self, key: str) -> str | None:
        """The source text of a top-level scalar (YAML 1.1 reads 5:2 as the number 302)."""
        if isinstance(self.root, yaml.MappingNode):
            for k, v in self.root.value:
                if k.value == key and isinstance(v, yaml.ScalarNode):
                    return v.value
        return None

    def line(self, *path: Any) -> int | None:
        node = self.root
        best = node.start_mark.line + 1 if node is not None else None
        for key in path:
            if isinstance(node, yaml.MappingNode):
                for k, v in node.value:
                    if k.value == key:
                        best, node = k.start_mark.line + 1, v
                        break
                else:
                    return best
            elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and \
                    key < len(node.value):
                node = node.value[key]
                best = node.start_mark.line + 1
            else:
                return best
        return best


def load_sweep_file(path: str | Path, more_rates: bool = False) -> SweepSpec:
    """The sweep a file describes. `more_rates`: the caller adds rates of its own (a file's
    `jobs` with no `rates` sizes nothing otherwise, and is refused)."""
    path = Path(path)
    data = read_yaml(path)
    lines = _Lines(path.read_text())
    src = str(path)

    def err(msg: str, *where: Any) -> QuantaError:
        return QuantaError(msg, source=src, line=lines.line(*where),
                           field=".".join(str(w) for w in where) or None)

    if data is None:
        raise err("the sweep file is empty (fields: traces, rates, clusters, policies, seeds, "
                  "...)")
    if not isinstance(data, dict):
        raise err("a sweep file is a mapping of fields (traces, rates, clusters, policies, seeds, "
                  "...)")
    fields: dict[str, Any] = {}
    for key, value in data.items():
        key = str(key)
        if key in AXES:
            plural = AXES[key]
            if plural in data:
                raise err(f"both '{key}' and '{plural}' given", key)
            fields[plural] = (value, key)
        elif key in AXES.values():
            fields[key] = (value, key)
        elif key in SCALARS:
            fields[key] = (value, key)
        else:
            raise err(f"unknown field (known: {', '.join(KNOWN)})", key)
    kw: dict[str, Any] = {}
    for name, (value, key) in fields.items():
        if name in SCALARS:
            kw[name] = _scalar(value, SCALARS[name], lambda m: err(m, key))
            if kw[name] is None and name not in ("max_jobs", "until_h", "window"):
                raise err("want a value", key)
            continue
        items = value if isinstance(value, list) else [value]
        if name == "seeds" and isinstance(value, str):
            items = _seed_range(value, lambda m: err(m, key))
        out = []
        made: dict[str, Any] = {}       # policies built so far: spec -> policy
        for i, item in enumerate(items):
            where = (key, i) if isinstance(value, list) else (key,)
            e = lambda m, where=where: err(m, *where)  # noqa: E731
            if name == "policies":
                spec = _policy(item, e, lambda m, k, where=where: err(m, *where, k))
                _check(lambda: _make(spec, made), e)
                out.append(spec)
            elif name in ("traces", "clusters"):
                if not isinstance(item, str) or not item.strip():
                    raise e(f"want a {name[:-1]} name or path, got {item!r}")
                p = item.strip()
                if name == "traces" and not p.startswith("synthetic:") and \
                        not Path(p).is_absolute() and (path.parent / p).exists():
                    p = str(path.parent / p)     # relative to the sweep file
                if name == "clusters" and p.lower().endswith((".yaml", ".yml")) and \
                        not Path(p).is_absolute() and (path.parent / p).exists():
                    p = str(path.parent / p)
                if name == "clusters":
                    _check(lambda: _cluster(p), e)
                else:
                    _check(lambda: _trace(p), e)
                out.append(p)
            else:                          # seeds, rates, load scales
                v = _scalar(item, int if name == "seeds" else float, e)
                if v is None:              # (`rates:` with nothing, or [~]: a TypeError later)
                    raise e("want a number, got nothing")
                out.append(v)
        if not out:
            raise err("empty list", key)
        kw[name] = tuple(dict.fromkeys(out))
    if "jobs" in kw and not kw.get("rates") and not more_rates:    # (as --jobs alone)
        raise err("sizes the synthetic traces of rates (none given): a trace's jobs are cut "
                  "with max_jobs", fields["jobs"][1])
    if "repair_h" in kw and not kw.get("node_mtbf_h", 0.0) > 0:     # (as --repair-h alone)
        raise err("is the repair time of failing nodes: give node_mtbf_h too",
                  fields["repair_h"][1])
    if "world" in kw and kw["world"] is not None:
        from quanta.worlds import get_world
        _check(lambda: get_world(kw["world"]), lambda m: err(m, fields["world"][1]))
    if kw.get("queues") is not None:          # a queues file, relative to the sweep file
        q = kw["queues"].strip()
        if not Path(q).is_absolute() and (path.parent / q).exists():
            q = str(path.parent / q)
        from quanta.queues.spec import load_queues
        _check(lambda: load_queues(q), lambda m: err(m, fields["queues"][1]))
        kw["queues"] = q
    if kw.get("format") is not None:
        from quanta.workloads.formats import FORMATS, known_formats
        fmt = kw["format"].strip().lower()
        if fmt != "auto" and fmt not in FORMATS:
            raise err(f"unknown trace format '{kw['format']}' (known: {known_formats()}, or "
                      f"auto)", fields["format"][1])
    window = kw.pop("window", None)
    if window is not None and fields["window"][1] == "window":
        window = lines.raw("window") or window
    try:
        spec = SweepSpec(**kw, window=parse_window(window, field="window", source=src,
                                                   line=lines.line("window")))
    except TypeError as e:      # pragma: no cover  (fields are checked above)
        raise err(str(e)) from None
    if spec.window is not None:         # (a trace file's length is checked when it is read;
        from quanta.runner import parse_synthetic     # rates' traces where the file sizes them)
        for t in spec.traces + (tuple(spec.all_traces()[len(spec.traces):]) if "jobs" in kw
                                else ()):
            if t.startswith("synthetic:"):
                n = parse_synthetic(t)[1]
                n = min(n, spec.max_jobs) if spec.max_jobs else n
                if spec.window.lo >= n:
                    raise err(f"window {spec.window} starts past the last of {t}'s {n} jobs",
                              fields["window"][1])
    from quanta.sweeps import check_values
    try:
        check_values(spec)
    except QuantaError as e:    # at the line of the field as the file names it
        raise err(e.bare, *((fields[e.field][1],) if e.field in fields else ())) from None
    return spec


def _make(spec: str, made: dict[str, Any]) -> None:
    """Build the policy; refuse one that is a policy built before written another way."""
    from quanta.policies import make_policy
    from quanta.runner import check_distinct
    if spec.strip() not in made:
        made[spec.strip()] = make_policy(spec)
        check_distinct(list(made.values()), [True] * len(made))   # (named at the file's line)


def _cluster(spec: str) -> None:
    from quanta.model.presets import resolve_cluster
    resolve_cluster(spec)


def _trace(spec: str) -> None:
    """A trace the sweep can read: a synthetic one's text, else a file or a bundled sample
    (the file itself is read, and its mistakes named, when the sweep starts)."""
    if spec.startswith("synthetic:"):
        from quanta.runner import parse_synthetic
        parse_synthetic(spec)
        return
    from quanta.workloads.samples import SAMPLES
    if spec not in SAMPLES and not Path(spec).exists():
        raise QuantaError(f"no such trace file, nor a bundled sample ({', '.join(SAMPLES)})",
                          source=spec)


def _check(fn, err) -> None:
    """Run a check; its one-line error is re-raised at the sweep file's line (an error that
    names another file, e.g. a cluster file's own line, is kept as it is, unless that file is
    not there: then the sweep file's line names it)."""
    try:
        fn()
    except QuantaError as e:
        if e.source and Path(e.source).exists():
            raise
        raise err(f"{e.source}: {e.bare}" if e.source else e.bare) from None


def _scalar(value: Any, typ: type, err) -> Any:
    if value is None:
        return None
    if typ is bool:
        if isinstance(value, bool):
            return value
        raise err(f"want true or false, got {value!r}")
    if typ is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        raise err(f"want text, got {value!r}")
    if isinstance(value, bool) or isinstance(value, (list, dict)):
        raise err(f"want a number, got {value!r}")
    try:
        if typ is int:
            if isinstance(value, int):      # (as it is: a float holds 53 bits)
                return value
            f = float(value)
            if f != int(f):
                raise ValueError
            return int(f)
        return float(value)
    except (TypeError, ValueError, OverflowError):
        raise err(f"want {'an integer' if typ is int else 'a number'}, got {value!r}") from None


MAX_RANGE = 100_000      # the most values a list of A-B ranges may give (0-1000000000: memory)


class RangeTooLong(ValueError):
    """Ranges of more than MAX_RANGE values in all."""


def int_range(part: str, before: int = 0) -> list[int]:
    """`N` or `A-B` (inclusive) as a list of integers; ValueError otherwise (RangeTooLong where
    it and the `before` values of the same list pass MAX_RANGE values)."""
    a, dash, b = part.strip().partition("-")
    if not dash:
        return [int(a)]
    lo, hi = int(a), int(b)
    if hi < lo:
        raise ValueError(part)
    if hi - lo + 1 + before > MAX_RANGE:
        raise RangeTooLong(f"{part.strip()} makes more than the {MAX_RANGE:,} values a list of "
                           f"ranges may give")
    return list(range(lo, hi + 1))


def _seed_range(text: str, err) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        try:
            out += int_range(part, len(out))
        except RangeTooLong as e:
            raise err(f"bad seeds '{text}': {e}") from None
        except ValueError:
            raise err(f"bad seeds '{text}': want a list, N, A-B or a,b,c") from None
    return out


def _policy(item: Any, err, err_key) -> str:
    """'name[:k=v]' or {name: ..., params: {k: v}} -> a policy spec (checked later by the sweep)."""
    if isinstance(item, str) and item.strip():
        return item.strip()
    if isinstance(item, dict):
        extra = set(item) - {"name", "params"}
        if extra:
            raise err_key("unknown key (a policy is {name: ..., params: {...}})",
                          sorted(extra)[0])
        name = item.get("name")
        if not isinstance(name, str) or not name.strip():
            raise err_key("want the policy's name", "name")
        params = item.get("params") or {}
        if not isinstance(params, dict):
            raise err_key("want a mapping of parameter: value", "params")
        for k, v in params.items():      # (joined as k=v,... text: a ',' would add parameters)
            if any(c in _param(v) for c in ",="):
                raise err_key(f"parameter '{k}': a value holds no ',' or '=', got {_param(v)!r}",
                              "params")
        kv = ",".join(f"{k}={_param(v)}" for k, v in params.items())
        return f"{name.strip()}:{kv}" if kv else name.strip()
    raise err(f"want a policy name[:k=v,...] or {{name: ..., params: {{...}}}}, got {item!r}")


def _param(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "/".join(str(x) for x in v)
    return str(v)
