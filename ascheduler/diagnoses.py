"""`Diagnoses`: the last failed attempt of each pending pod, as this instance saw it. The
scheduling cycle records into it when an attempt fails and drops a pod's record when it is
bound or deleted; `/debug/pods` (`ascheduler.debug`) reads it.
"""

from __future__ import annotations

import datetime as dt
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from ascheduler.framework import Diagnosis
from ascheduler.model import PodInfo

#: Pending pods whose last attempt is kept at most (the oldest records go first).
MAX_RECORDS: Final = 100_000
#: Example nodes kept per reason of a failed attempt.
EXAMPLES: Final = 3


@dataclass
class _Record:
    uid: str
    body: dict[str, Any]


class Diagnoses:
    """The last failed attempt of each pending pod, as this instance saw it: the reason and
    message, the plugins that rejected it, the count of nodes per reason and a few example
    nodes for each. Small per pod (no per-node arrays); dropped when the pod is bound or
    deleted, and at most `limit` pods are kept."""

    def __init__(self, limit: int = MAX_RECORDS) -> None:
        self.limit = limit
        self._by_key: OrderedDict[str, _Record] = OrderedDict()
        self._key_of: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._by_key)

    def record(
        self,
        pod: PodInfo,
        profile: str,
        reason: str,
        message: str,
        *,
        attempts: int,
        rejected_by: frozenset[str],
        diagnosis: Diagnosis | None,
        names: Sequence[str],
    ) -> None:
        body: dict[str, Any] = {
            "time": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"),
            "attempts": attempts,
            "profile": profile,
            "reason": reason,
            "message": message,
            "rejectedBy": sorted(p for p in rejected_by if p),
        }
        if diagnosis is not None:
            body["nodes"] = diagnosis.num_nodes
            body["reasons"] = dict(sorted(diagnosis.reason_counts.items()))
            body["examples"] = _examples(diagnosis, diagnosis.node_names or names)
        key = pod.key
        self._key_of[pod.uid] = key
        self._by_key[key] = _Record(pod.uid, body)
        self._by_key.move_to_end(key)
        while len(self._by_key) > self.limit:
            _, dropped = self._by_key.popitem(last=False)
            self._key_of.pop(dropped.uid, None)

    def forget(self, uid: str) -> None:
        key = self._key_of.pop(uid, None)
        if key is not None:
            record = self._by_key.get(key)
            if record is not None and record.uid == uid:
                del self._by_key[key]

    def get(self, key: str, uid: str) -> dict[str, Any] | None:
        record = self._by_key.get(key)
        return record.body if record is not None and record.uid == uid else None


def _examples(diag: Diagnosis, names: Sequence[str]) -> dict[str, list[str]]:
    """A few nodes per reason, among those counted under it (their first rejection)."""
    out: dict[str, list[str]] = {}
    if diag.codes is None:
        return out
    alive = np.ones(len(diag.codes), dtype=np.bool_)
    if diag.excluded is not None:
        reason, outside = diag.excluded
        out[reason] = [names[int(r)] for r in np.flatnonzero(outside)[:EXAMPLES]]
        alive &= ~outside
    for _, result in diag.filtered:
        if result.rejected.size != alive.size:
            continue
        for rejection in result.rejections:
            have = out.setdefault(rejection.reason, [])
            if len(have) < EXAMPLES:
                rows = np.flatnonzero(rejection.nodes & alive)[: EXAMPLES - len(have)]
                have.extend(names[int(r)] for r in rows if int(r) < len(names))
        alive &= ~result.rejected
    for name, status in diag.external.items():
        for reason in status.reasons:
            have = out.setdefault(reason, [])
            if len(have) < EXAMPLES:
                have.append(name)
    return out
