"""The queues file (docs/queues.md) as read: its pydantic schema, and its YAML kept with line
numbers, so that every problem names the file, the line and the field (`Source.error`). The tree
built from it is quanta/queues/spec.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Sequence

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from quanta.errors import QuantaError
from quanta.specfile import key_node, node_at

NAME = r"^[A-Za-z0-9][A-Za-z0-9_.:/-]*$"


class QuotaEntry(BaseModel):
    """Quota of one GPU type (flavor) for one queue."""
    model_config = ConfigDict(extra="forbid")

    nominal: int = Field(0, ge=0, description="GPUs of this type the queue is guaranteed")
    borrowing_limit: int | None = Field(None, ge=0, description="most GPUs it may borrow beyond "
                                        "its nominal quota from its cohort (none: no limit)")
    lending_limit: int | None = Field(None, ge=0, description="most of its unused nominal GPUs "
                                      "its cohort may lend to others (none: all of them)")

    @model_validator(mode="before")
    @classmethod
    def _number_or_mapping(cls, v: Any) -> Any:
        """A number of GPUs is the nominal quota (a word or a flag: what it wants, not pydantic's
        'instance of QuotaEntry')."""
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return {"nominal": v}
        if not isinstance(v, dict):
            raise ValueError("want a number of GPUs or {nominal: N, borrowing_limit: N, "
                             "lending_limit: N}")
        return v


class QueueModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=64, pattern=NAME)
    parent: str | None = Field(None, description="the cohort this queue belongs to")
    weight: float = Field(1.0, gt=0, allow_inf_nan=False,
                          description="fair-share weight among its siblings")
    quota: dict[str, QuotaEntry] = Field(default_factory=dict)
    users: list[str] = Field(default_factory=list, description="who may submit ('*': anyone)")
    aliases: list[str] = Field(default_factory=list, description="trace queue names meaning this")
    min_runtime_s: float | None = Field(None, ge=0, description="seconds a job runs before the "
                                        "layer may preempt it (default: preemption.min_runtime_s)")
    starvation_s: float | None = Field(None, gt=0, description="a job waiting this long is "
                                       "started first in its queue (default: the file's)")
    description: str = ""

    @field_validator("users", "aliases", mode="before")
    @classmethod
    def _one_or_many(cls, v: Any) -> Any:
        v = [v] if isinstance(v, (str, int)) and not isinstance(v, bool) else v
        if isinstance(v, list):     # a name YAML read as a number (103959): its text
            return [str(x) if isinstance(x, int) and not isinstance(x, bool) else x for x in v]
        return v


class FairShareModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    half_life_h: float = Field(24.0, gt=0, description="hours for recorded usage to halve")
    speed: dict[str, float] = Field(default_factory=dict, description="usage weight per GPU type "
                                    "(default: the type's generic speed relative to a V100)")
    # (finite: infinity times a factor of 0 made NaN scores, an order of nothing)
    weight_fairshare: float = Field(1.0, ge=0, allow_inf_nan=False, description="weight of the "
                                    "user's fair-share factor in the order within a queue")
    weight_age: float = Field(0.5, ge=0, allow_inf_nan=False, description="weight of the age "
                              "factor in that order")
    max_age_h: float = Field(168.0, gt=0, description="age at which the age factor reaches 1")


class PreemptionModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reclaim: Literal["any", "lower_priority", "never"] = Field(
        "any", description="a queue under its nominal quota takes it back from borrowers of "
        "any priority, only of lower priority, or never")
    within_queue: Literal["lower_priority", "never"] = "lower_priority"
    borrow_within_cohort: Literal["lower_priority", "never"] = Field(
        "lower_priority", description="a job may preempt lower-priority jobs running on "
        "borrowed GPUs of its cohort")
    min_runtime_s: float = Field(0.0, ge=0, description="seconds a job runs before the layer "
                                 "may preempt it (a job's own checkpoint interval if longer)")
    reclaim_grace_s: float = Field(0.0, ge=0, description="seconds a job entitled to reclaimed "
                                   "GPUs waits before borrowers are preempted for it")


class UserModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    shares: float = Field(1.0, gt=0, description="fair-share weight among its queue's users")


class QueuesFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field("", max_length=64,
                      description="the file's name in reports (default: the file's stem; "
                      "'queues' for a mapping given to the API)")
    scope: Literal["cluster", "queue"] = Field(
        "cluster", description="cluster: the policy decides once for all queues (their jobs "
        "and GPUs together), each queue then kept within its GPUs in the policy's order; queue: "
        "the policy decides for each queue apart, on the queue's GPUs")
    default_queue: str | None = None
    starvation_s: float | None = Field(None, gt=0)
    fairshare: FairShareModel = Field(default_factory=FairShareModel)
    preemption: PreemptionModel = Field(default_factory=PreemptionModel)
    priority_classes: dict[str, int] = Field(default_factory=dict)
    users: dict[str, UserModel] = Field(default_factory=dict)
    queues: list[QueueModel] = Field(min_length=1)

    @field_validator("name")
    @classmethod
    def _one_line(cls, v: str) -> str:
        """(Shown in table titles: a line break in it split the title of `quanta queues`.)"""
        if any(c < " " or c == "\x7f" for c in v):
            raise ValueError("a name holds no control characters (line breaks, tabs)")
        return v

    @field_validator("users", mode="before")
    @classmethod
    def _users(cls, v: Any) -> Any:
        if isinstance(v, list):
            return {u: {} for u in v}
        if isinstance(v, dict):
            return {u: ({"shares": x} if isinstance(x, (int, float)) else x or {})
                    for u, x in v.items()}
        return v


# -- YAML with line numbers ------------------------------------------------------------------------
class Source:
    def __init__(self, path: str, root: yaml.Node | None, data: Any):
        self.path, self.root, self.data = path, root, data

    def line(self, loc: Sequence[Any], key: bool = False) -> int | None:
        node = key_node(self.root, loc) if key else node_at(self.root, loc)
        return node.start_mark.line + 1 if node is not None else None

    def field(self, loc: Sequence[Any]) -> str:
        """A readable field path: queues[vision].quota.v100.nominal."""
        out: list[str] = []
        i = 0
        while i < len(loc):
            part = loc[i]
            if part == "queues" and i + 1 < len(loc) and isinstance(loc[i + 1], int):
                name = None
                try:
                    name = self.data["queues"][loc[i + 1]].get("name")
                except (KeyError, IndexError, TypeError, AttributeError):
                    pass
                out.append(f"queues[{name if name else loc[i + 1]}]")
                i += 2
                continue
            out.append(str(part))
            i += 1
        return ".".join(out)

    def error(self, msg: str, loc: Sequence[Any], key: bool = False) -> QuantaError:
        return QuantaError(msg, source=self.path, line=self.line(loc, key), field=self.field(loc))


def read_source(path: Path) -> Source:
    """A queues file as the other files of ours are read (specfile: a regular file of at most
    16 MiB, UTF-8, no key twice, no base-60 numbers) with its node tree for lines."""
    from quanta.specfile import parse_yaml, read_text
    text = read_text(path)
    data = parse_yaml(text, str(path))
    return Source(str(path), parse_yaml(text, str(path), compose=True), data)


