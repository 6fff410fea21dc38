"""The status condition kube-scheduler writes on a `scheduling.k8s.io` PodGroup, written in
the background.

From 1.36 kube-scheduler reports each pod group cycle on the PodGroup's `status.conditions`:
`PodGroupScheduled` in 1.36 (`v1alpha2`), renamed `PodGroupInitiallyScheduled` in 1.37
(`v1beta1`); True with reason `Scheduled` (and an empty message), or False with reason
`Unschedulable` or `SchedulerError`. `observedGeneration` is the PodGroup's generation, and
`lastTransitionTime` moves only when the status does (`apimeta.SetStatusCondition`); nothing is
written when nothing changed, and a True condition is never set back to False
(`updatePodGroupCondition`), so it marks the group's first success for good.

kube-scheduler patches in the scheduling cycle; here the cycle only records the verdict
(`PodGroupStatusWriter.set`, no await) and one task writes it: the latest verdict per group
wins, so a group decided many times while a write is in flight is written once more, not once
per decision. The patch is a strategic merge of the one condition (merged by `type`, as
kube-scheduler's `PatchPodGroupStatus` makes it), with the group's uid as a precondition: a
group deleted and made again under the same name is not written for its predecessor.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import structlog

from ascheduler.features import Release
from ascheduler.kube import KubeClient, KubeError
from ascheduler.kube.client import STRATEGIC_MERGE_PATCH
from ascheduler.model.podgroups import GroupCondition, SchedulingGroup, scheduling_group_api

log = structlog.get_logger(__name__)

#: The condition's type: 1.36's, and the name 1.37 gave it.
POD_GROUP_SCHEDULED: Final = "PodGroupScheduled"
POD_GROUP_INITIALLY_SCHEDULED: Final = "PodGroupInitiallyScheduled"
#: Its reasons (`Scheduled` is a literal in kube-scheduler, the others `PodGroupReason...`).
SCHEDULED: Final = "Scheduled"
UNSCHEDULABLE: Final = "Unschedulable"
SCHEDULER_ERROR: Final = "SchedulerError"
#: `metav1.Condition`'s message limit.
MESSAGE_LIMIT: Final = 32768
#: A write that failed for a reason that may pass is tried this many times in all
#: (kube-scheduler's `retry.OnError(retry.DefaultBackoff, ...)` tries up to four).
ATTEMPTS: Final = 4
RETRY_DELAY: Final = 0.1
#: Past this many groups remembered, those the informer no longer has are forgotten.
_REMEMBERED: Final = 4096


def condition_type(release: Release) -> str:
    return POD_GROUP_INITIALLY_SCHEDULED if release >= Release(1, 37) else POD_GROUP_SCHEDULED


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a pod group cycle concluded: the condition's status, reason and message."""

    scheduled: bool
    reason: str
    message: str = ""

    @property
    def status(self) -> str:
        return "True" if self.scheduled else "False"


def now() -> str:
    """`metav1.Time` as it serializes: RFC 3339, whole seconds, UTC."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def next_condition(
    kind: str,
    existing: GroupCondition | None,
    verdict: Verdict,
    generation: int,
    at: str,
) -> GroupCondition | None:
    """The condition to write over `existing` for `verdict` (`at`: the time now), or None when
    kube-scheduler writes nothing: a True condition stays True, and an unchanged one is not
    written again (`SetStatusCondition` reports no change)."""
    if existing is not None and existing.status == "True" and not verdict.scheduled:
        return None
    same_status = existing is not None and existing.status == verdict.status
    new = GroupCondition(
        type=kind,
        status=verdict.status,
        reason=verdict.reason,
        message=verdict.message[:MESSAGE_LIMIT],
        observed_generation=generation,
        last_transition_time=existing.last_transition_time
        if existing is not None and same_status and existing.last_transition_time
        else at,
    )
    if (
        existing is not None
        and same_status
        and (existing.reason, existing.message, existing.observed_generation)
        == (new.reason, new.message, new.observed_generation)
    ):
        return None
    return new


def condition_body(condition: GroupCondition) -> dict[str, Any]:
    """The condition as JSON (`observedGeneration` left out when 0, as Go's `omitempty` does:
    PodGroups have no `metadata.generation` in 1.36 and 1.37)."""
    body: dict[str, Any] = {
        "type": condition.type,
        "status": condition.status,
        "lastTransitionTime": condition.last_transition_time,
        "reason": condition.reason,
        "message": condition.message,
    }
    if condition.observed_generation:
        body["observedGeneration"] = condition.observed_generation
    return body


#: The informer's current copy of a PodGroup by `namespace/name`.
GroupLookup = Callable[[str], SchedulingGroup | None]


class PodGroupStatusWriter:
    """The PodGroups' scheduling condition, written by one background task; `set` never
    waits. Runs in the status writer's task group (`StatusWriter.run`)."""

    def __init__(
        self,
        kube: KubeClient | None,
        release: Release,
        *,
        lookup: GroupLookup | None = None,
        clock: Callable[[], str] = now,
    ) -> None:
        self.kube = kube
        self.release = release
        self.kind = condition_type(release)
        #: Where a group is read again when its write is due (None: as it was when decided).
        self.lookup = lookup
        self.clock = clock
        #: `namespace/name` -> (the group as it was when decided, the verdict): the latest
        #: verdict per group, not yet written.
        self._pending: dict[str, tuple[SchedulingGroup, Verdict]] = {}
        #: `namespace/name` -> (uid, the condition written last): what the informer may not
        #: show yet (a True written a moment ago is never undone by a False after it).
        self._written: dict[str, tuple[str, GroupCondition]] = {}
        self._wake = asyncio.Event()
        self.sent = 0

    def set(self, group: SchedulingGroup, verdict: Verdict) -> None:
        """Record the verdict of one of the group's cycles, to be written soon."""
        if self.kube is None or not group.uid:
            return
        if not verdict.scheduled and self._scheduled(group):
            return
        self._pending[group.key] = (group, verdict)
        self._wake.set()

    def _scheduled(self, group: SchedulingGroup) -> bool:
        """True already, as far as this scheduler knows (written, or about to be)."""
        if group.scheduled:
            return True
        pending = self._pending.get(group.key)
        if pending is not None and pending[0].uid == group.uid and pending[1].scheduled:
            return True
        written = self._written.get(group.key)
        return written is not None and written[0] == group.uid and written[1].status == "True"

    def pending(self, key: str) -> Verdict | None:
        entry = self._pending.get(key)
        return entry[1] if entry is not None else None

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self.flush()

    async def flush(self) -> None:
        """Write every verdict recorded so far (those recorded meanwhile too)."""
        while self._pending:
            key = next(iter(self._pending))
            group, verdict = self._pending.pop(key)
            try:
                await self._write(group, verdict)
            except Exception:  # the writer must never die: it runs in the scheduler's group
                log.exception("pod_group_status_crashed", pod_group=key)
        self._prune()

    async def _write(self, decided: SchedulingGroup, verdict: Verdict) -> None:
        current = self.lookup(decided.key) if self.lookup is not None else decided
        if current is None or current.uid != decided.uid:
            return  # deleted (or made again) since: nothing of ours to report on
        written = self._written.get(current.key)
        existing = current.condition(self.kind)
        if written is not None and written[0] == current.uid:
            existing = written[1]
        condition = next_condition(self.kind, existing, verdict, current.generation, self.clock())
        if condition is None:
            return
        assert self.kube is not None
        version = (scheduling_group_api(self.release) or "").split("/")[3]
        path = (
            f"/apis/scheduling.k8s.io/{version}/namespaces/{current.namespace}/podgroups/"
            f"{current.name}/status"
        )
        body = {
            "metadata": {"uid": current.uid},
            "status": {"conditions": [condition_body(condition)]},
        }
        for attempt in range(1, ATTEMPTS + 1):
            try:
                await self.kube.request(
                    "PATCH", path, body=body, content_type=STRATEGIC_MERGE_PATCH
                )
            except KubeError as exc:
                if exc.transient and attempt < ATTEMPTS:
                    await asyncio.sleep(RETRY_DELAY * attempt)
                    continue
                if not exc.not_found:
                    log.warning(
                        "pod_group_status_failed",
                        pod_group=current.key,
                        failure=exc.kind.value,
                        error=str(exc),
                    )
                return
            self._written[current.key] = (current.uid, condition)
            self.sent += 1
            log.debug(
                "pod_group_status",
                pod_group=current.key,
                condition=condition.type,
                status=condition.status,
                reason=condition.reason,
            )
            return

    def _prune(self) -> None:
        if self.lookup is None or len(self._written) <= _REMEMBERED:
            return
        for key in [k for k in self._written if self.lookup(k) is None]:
            del self._written[key]
