"""The PodGroup's scheduling condition as kube-scheduler sets it (`SetStatusCondition`, never
True -> False), and its writer: one patch per group however often it is decided, a strategic
merge of the one condition under a uid precondition, retried when the failure may pass."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from ascheduler.features import Release
from ascheduler.groupstatus import (
    POD_GROUP_INITIALLY_SCHEDULED,
    POD_GROUP_SCHEDULED,
    PodGroupStatusWriter,
    Verdict,
    condition_type,
    next_condition,
)
from ascheduler.kube import ApiError, ConnectionFailed
from ascheduler.kube.client import STRATEGIC_MERGE_PATCH
from ascheduler.model.podgroups import GroupCondition, SchedulingGroup, parse_scheduling_group

T0 = "2026-01-02T03:04:05Z"
T1 = "2026-01-02T03:09:00Z"
KIND = POD_GROUP_INITIALLY_SCHEDULED
V137 = Release(1, 37)


def group(
    name: str = "g", uid: str = "u1", conditions: list[dict[str, Any]] | None = None
) -> SchedulingGroup:
    return parse_scheduling_group(
        {
            "metadata": {"name": name, "namespace": "ns", "uid": uid},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
            "status": {"conditions": conditions or []},
        }
    )


def test_the_condition_type_of_each_release() -> None:
    assert condition_type(Release(1, 36)) == POD_GROUP_SCHEDULED
    assert condition_type(Release(1, 37)) == POD_GROUP_INITIALLY_SCHEDULED


@pytest.mark.parametrize(
    ("existing", "verdict", "expected"),
    [
        # First written: the transition is now.
        (None, Verdict(False, "Unschedulable", "m"), ("False", "m", T1)),
        # Same status, new message: written, the transition kept.
        (
            ("False", "Unschedulable", "old"),
            Verdict(False, "Unschedulable", "m"),
            ("False", "m", T0),
        ),
        # Nothing changed: nothing written.
        (("False", "Unschedulable", "m"), Verdict(False, "Unschedulable", "m"), None),
        # False -> True: a transition.
        (("False", "Unschedulable", "m"), Verdict(True, "Scheduled"), ("True", "", T1)),
        # True is for good: never set back.
        (("True", "Scheduled", ""), Verdict(False, "Unschedulable", "m"), None),
        (("True", "Scheduled", ""), Verdict(False, "SchedulerError", "e"), None),
    ],
)
def test_next_condition_follows_set_status_condition(
    existing: tuple[str, str, str] | None,
    verdict: Verdict,
    expected: tuple[str, str, str] | None,
) -> None:
    old = None
    if existing is not None:
        status, reason, message = existing
        old = GroupCondition(KIND, status, reason, message, 0, T0)
    got = next_condition(KIND, old, verdict, 0, T1)
    if expected is None:
        assert got is None
        return
    assert got is not None
    assert (got.status, got.message, got.last_transition_time) == expected
    assert (got.type, got.reason) == (KIND, verdict.reason)


def test_a_new_generation_is_written_even_when_nothing_else_changed() -> None:
    old = GroupCondition(KIND, "False", "Unschedulable", "m", 1, T0)
    got = next_condition(KIND, old, Verdict(False, "Unschedulable", "m"), 2, T1)
    assert got is not None
    assert (got.observed_generation, got.last_transition_time) == (2, T0)


class Kube:
    def __init__(self, failures: list[BaseException] | None = None) -> None:
        self.failures = failures or []
        self.sent: list[tuple[str, str, Any, str]] = []
        self.written = asyncio.Event()

    async def request(
        self, method: str, path: str, *, body: Any = None, content_type: str = ""
    ) -> None:
        if self.failures:
            raise self.failures.pop(0)
        self.sent.append((method, path, body, content_type))
        self.written.set()


def writer(
    kube: Kube, release: Release = V137, groups: dict[str, SchedulingGroup] | None = None
) -> PodGroupStatusWriter:
    lookup = groups.get if groups is not None else None
    return PodGroupStatusWriter(kube, release, lookup=lookup, clock=lambda: T1)  # type: ignore[arg-type]


async def test_the_latest_verdict_is_written_once_as_a_strategic_merge_of_one_condition() -> None:
    kube = Kube()
    w = writer(kube)
    g = group()
    w.set(g, Verdict(False, "Unschedulable", "first"))
    w.set(g, Verdict(False, "Unschedulable", "second"))
    await w.flush()
    ((method, path, body, content_type),) = kube.sent
    assert (method, content_type) == ("PATCH", STRATEGIC_MERGE_PATCH)
    assert path == "/apis/scheduling.k8s.io/v1beta1/namespaces/ns/podgroups/g/status"
    assert body == {
        "metadata": {"uid": "u1"},
        "status": {
            "conditions": [
                {
                    "type": KIND,
                    "status": "False",
                    "lastTransitionTime": T1,
                    "reason": "Unschedulable",
                    "message": "second",
                }
            ]
        },
    }
    # Decided again alike: nothing more to write.
    w.set(g, Verdict(False, "Unschedulable", "second"))
    await w.flush()
    assert len(kube.sent) == 1


async def test_136_writes_its_own_type_under_v1alpha2() -> None:
    kube = Kube()
    w = writer(kube, Release(1, 36))
    w.set(group(), Verdict(True, "Scheduled"))
    await w.flush()
    ((_, path, body, _),) = kube.sent
    assert path == "/apis/scheduling.k8s.io/v1alpha2/namespaces/ns/podgroups/g/status"
    assert body["status"]["conditions"][0]["type"] == POD_GROUP_SCHEDULED


async def test_a_true_written_or_seen_is_never_followed_by_a_false() -> None:
    kube = Kube()
    w = writer(kube)
    g = group()
    w.set(g, Verdict(True, "Scheduled"))
    w.set(g, Verdict(False, "Unschedulable", "late member"))  # True pending: ignored
    await w.flush()
    w.set(g, Verdict(False, "Unschedulable", "later member"))  # True written: ignored
    await w.flush()
    assert [b["status"]["conditions"][0]["status"] for _, _, b, _ in kube.sent] == ["True"]
    # The informer shows True (written by anyone): a False is not written either.
    seen = group("h", conditions=[{"type": KIND, "status": "True", "reason": "Scheduled"}])
    w.set(seen, Verdict(False, "Unschedulable", "m"))
    await w.flush()
    assert len(kube.sent) == 1


async def test_a_failure_that_may_pass_is_retried_a_permanent_one_is_dropped() -> None:
    cut = ConnectionFailed("PATCH", "/x", aiohttp.ServerDisconnectedError())
    kube = Kube([cut, ApiError(500, "InternalError", "etcd", method="PATCH", path="/x")])
    w = writer(kube)
    w.set(group(), Verdict(False, "Unschedulable", "m"))
    await w.flush()
    assert len(kube.sent) == 1
    kube.failures = [ApiError(422, "Invalid", "uid", method="PATCH", path="/x")]
    w.set(group("h"), Verdict(False, "Unschedulable", "m"))
    await w.flush()
    assert len(kube.sent) == 1  # not retried, and the writer goes on
    w.set(group("i"), Verdict(False, "Unschedulable", "m"))
    await w.flush()
    assert len(kube.sent) == 2


async def test_a_group_gone_or_made_again_since_its_verdict_is_not_written() -> None:
    kube = Kube()
    groups: dict[str, SchedulingGroup] = {}
    w = writer(kube, groups=groups)
    w.set(group("gone"), Verdict(False, "Unschedulable", "m"))
    groups["ns/again"] = group("again", uid="u2")
    w.set(group("again", uid="u1"), Verdict(False, "Unschedulable", "m"))
    await w.flush()
    assert kube.sent == []


async def test_the_writer_runs_in_the_background_and_records_without_waiting() -> None:
    kube = Kube()
    w = writer(kube)
    task = asyncio.create_task(w.run())
    try:
        w.set(group(), Verdict(True, "Scheduled"))
        async with asyncio.timeout(5):
            await kube.written.wait()
        assert w.sent == 1
    finally:
        task.cancel()
