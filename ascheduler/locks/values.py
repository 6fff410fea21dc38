"""Lock values: what a lock annotation holds, who owns it, and the objects it is written on.

Every value this instance writes is unique: its time carries nanoseconds, the last three
digits random. So "is this lock ours?" is exact equality with a value we wrote, which also
recognises an acquire whose patch landed but whose answer was lost.

* ascheduler's own key (`ascheduler.io/node-lock`): `<time>,<instance>`. The holder is this
  instance's *hold*, not a pod: one hold serves many pods' binds, and the lock stays valid for
  every one of them whatever happens to any single pod.
* `hami.io/mutex.lock` (HAMi interoperability): HAMi's `<time>,<namespace>,<pod>`, naming the
  one pod the hold binds. HAMi treats a lock whose pod is gone as dangling, so a hold under
  this key serves exactly one pod.
* HAMi's legacy value, a bare time, names neither.

The time inside a value is informational: no instance compares it with its own clock (see
`acquire` for how staleness is counted).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

_TIME = re.compile(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$")


def parse_time(text: str) -> dt.datetime | None:
    """RFC 3339 with an optional fraction of up to 9 digits (Go's reading of it), else None."""
    m = _TIME.match(text)
    if m is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    micros = int((m.group(7) or "0").ljust(9, "0")[:6])
    zone = m.group(8)
    if zone == "Z":
        tz = dt.UTC
    else:
        sign = 1 if zone[0] == "+" else -1
        tz = dt.timezone(sign * dt.timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])))
    try:
        return dt.datetime(year, month, day, hour, minute, second, micros, tzinfo=tz)
    except ValueError:
        return None


def format_time(when: dt.datetime, nonce: int) -> str:
    """RFC 3339 in UTC with nanoseconds whose last three digits are `nonce` (0..999)."""
    when = when.astimezone(dt.UTC)
    return f"{when:%Y-%m-%dT%H:%M:%S}.{when.microsecond:06d}{nonce % 1000:03d}Z"


@dataclass(frozen=True)
class Holder:
    """A lock value as read off a node: a time, and a pod (HAMi's format) or an instance
    (ascheduler's own); neither for HAMi's legacy bare time."""

    time: dt.datetime
    namespace: str = ""
    pod: str = ""
    instance: str = ""

    @classmethod
    def parse(cls, value: str) -> Holder | None:
        parts = value.split(",")
        when = parse_time(parts[0])
        if when is None:
            return None
        if len(parts) == 1:
            return cls(when)
        if len(parts) == 2 and parts[1]:
            return cls(when, instance=parts[1])
        if len(parts) == 3 and parts[1] and parts[2]:
            return cls(when, parts[1], parts[2])
        return None

    def describe(self) -> str:
        if self.pod:
            return f"pod {self.namespace}/{self.pod}"
        return f"instance {self.instance}" if self.instance else "a holder (legacy value)"


class LockContended(Exception):
    """Another holder has the node's lock (or won the race for it): a reason to wait and try
    again, never an error of the pod's."""

    def __init__(self, node: str, holder: str, *, asked: bool = False, value: str = "") -> None:
        self.node = node
        self.holder = holder
        #: Whether the holder (an instance) was asked to hand the lock over.
        self.asked = asked
        #: The lock value met ("" when none was: a race lost to concurrent writers).
        self.value = value
        super().__init__(f"node {node} is locked by {holder}")


def lock_wait_message(node: str, exc: LockContended) -> str:
    """What a pod that met another holder's lock on its way to `node` is told (its
    PodScheduled condition, reason `Unschedulable`): who holds it, and that it waits."""
    where = f"node {node}" if exc.node == node else f"node {node} (lock {exc.node})"
    return (
        f"{where} is locked by {exc.holder}: waiting for the lock to be released, "
        "the pod will be retried"
    )


class Known(NamedTuple):
    """A lock object as this instance last saw it, before it writes the lock on it."""

    version: str
    annotations: Mapping[str, str]
    #: The whole object at `version`, when known (a Lease as its informer keeps it): the
    #: write may then replace the object instead of patching it.
    obj: Mapping[str, Any] | None = None


def replaced(obj: Mapping[str, Any], version: str, changes: Mapping[str, str | None]) -> Any:
    """`obj` (as it is at `version`) with `changes` made to its annotations (None removes
    one), guarded by `version`: the body of a write that replaces it."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    annotations = dict(meta.get("annotations") or {})
    for key, value in changes.items():
        if value is None:
            annotations.pop(key, None)
        else:
            annotations[key] = value
    meta["annotations"] = annotations
    meta["resourceVersion"] = version
    return {**obj, "metadata": meta}


def resource_version(obj: Mapping[str, Any] | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("resourceVersion", ""))
