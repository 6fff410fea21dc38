"""The scheduling queue as each release's kube-scheduler requeues pods: the default profile's
plugins and queueing hints built with 1.35's, 1.36's and 1.37's Features.

1.36 wakes a pod InterPodAffinity rejected when its own labels change and counts nominated
pods in InterPodAffinity's and PodTopologySpread's hints; 1.37 tests anti-affinity terms with
"any". (1.37's split of pod events into AssignedPod / UnscheduledPod / TargetPod changes no
decision beyond these: the queue's ClusterEvents already tell an assigned pod's event from
the waiting pod's own update.)"""

from __future__ import annotations

from typing import Any

import pytest

from ascheduler.app import build_frameworks, build_queue
from ascheduler.cache import Cache
from ascheduler.config import SchedulerConfig
from ascheduler.features import Features, Release
from ascheduler.framework import ClusterEvent, QueuedPodInfo
from ascheduler.model import PodInfo, parse_pod
from ascheduler.plugins import IN_TREE
from ascheduler.queue import QueueSettings, SchedulingQueue
from tests.kit import FakeClock, on, pod
from tests.unit.queue.test_queue import make_unschedulable, pop

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
REQ = "requiredDuringSchedulingIgnoredDuringExecution"


def release_queue(minor: int, clock: FakeClock) -> SchedulingQueue:
    """The queue `ascheduler run` builds at release 1.`minor`."""
    config = SchedulerConfig(features=Features.defaults(Release(1, minor)))
    queue = build_queue(build_frameworks(config, IN_TREE, Cache(), None), QueueSettings())
    queue.clock = clock
    return queue


def waiting(name: str, labels: dict[str, str], **spec: Any) -> PodInfo:
    return parse_pod(pod(name, namespace="ns", labels=labels, scheduler_name="ascheduler", **spec))


def placed(name: str, labels: dict[str, str], **spec: Any) -> PodInfo:
    return parse_pod(on("n1", pod(name, namespace="ns", labels=labels, **spec)))


def nominated(name: str, labels: dict[str, str]) -> PodInfo:
    raw = pod(name, namespace="ns", labels=labels)
    raw["status"] = {"nominatedNodeName": "n1"}
    return parse_pod(raw)


def anti(*apps: str) -> dict[str, Any]:
    terms = [{"labelSelector": {"matchLabels": {"app": a}}, "topologyKey": HOST} for a in apps]
    return {"podAntiAffinity": {REQ: terms}}


IPA = frozenset({"InterPodAffinity"})
SPREAD = frozenset({"PodTopologySpread"})


@pytest.mark.parametrize(("minor", "moves"), [(35, False), (36, True), (37, True)])
async def test_relabelling_a_pod_inter_pod_affinity_rejected_wakes_it_from_1_36(
    minor: int, moves: bool
) -> None:
    clock = FakeClock()
    queue = release_queue(minor, clock)
    me = waiting("me", {"app": "me"}, affinity=anti("web"))
    await make_unschedulable(queue, me, IPA)
    relabelled = waiting("me", {"app": "me", "v": "2"}, affinity=anti("web"))
    queue.update(relabelled)
    assert (queue.where(me.uid) != "unschedulable") is moves


@pytest.mark.parametrize(("minor", "moves"), [(35, False), (36, True), (37, True)])
async def test_a_nominated_pod_s_deletion_counts_for_affinity_and_spread_from_1_36(
    minor: int, moves: bool
) -> None:
    clock = FakeClock()
    queue = release_queue(minor, clock)
    me = waiting("me", {"app": "me"}, affinity=anti("web"))
    await make_unschedulable(queue, me, IPA)
    spread = {
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "web"}},
    }
    spreading = waiting("spreading", {"app": "web"}, topologySpreadConstraints=[spread])
    await make_unschedulable(queue, spreading, SPREAD)
    web = nominated("web-0", {"app": "web"})
    assert queue.move_all(ClusterEvent.ASSIGNED_POD_DELETE, web, None) == (2 if moves else 0)


@pytest.mark.parametrize(("minor", "moves"), [(35, False), (36, False), (37, True)])
async def test_anti_affinity_hints_ask_any_term_from_1_37(minor: int, moves: bool) -> None:
    clock = FakeClock()
    queue = release_queue(minor, clock)
    me = waiting("me", {"app": "me"}, affinity=anti("web", "cache"))
    await make_unschedulable(queue, me, IPA)
    # The relabelled pod matched one of the two terms before, none after.
    before, after = placed("w", {"app": "web"}), placed("w", {"app": "other"})
    assert queue.move_all(ClusterEvent.ASSIGNED_POD_UPDATE, before, after) == int(moves)


@pytest.mark.parametrize("minor", [35, 36, 37])
async def test_backoff_is_the_same_on_every_release(minor: int) -> None:
    """1.37 raises the maximum backoff by sqrt(size) for pod groups only; a pod's backoff
    doubles from 1 s to 10 s on every release."""
    clock = FakeClock()
    queue = release_queue(minor, clock)
    me = waiting("me", {"app": "me"}, affinity=anti("web"))
    qp = await make_unschedulable(queue, me, IPA)
    assert queue.settings == QueueSettings()
    ends = [
        queue._backoff_end(QueuedPodInfo(qp.pod, 0.0, attempts=attempts))
        for attempts in (1, 2, 3, 4, 5, 6)
    ]
    assert ends == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


async def _relabelled_in_flight(
    queue: SchedulingQueue, me: PodInfo, relabelled: PodInfo, rejected_by: frozenset[str]
) -> str:
    """Where `me` goes when rejected by `rejected_by` after its labels changed while it was
    being scheduled (kube-scheduler records the update as an in-flight event)."""
    queue.add(me)
    qp = await pop(queue)
    assert qp is not None
    queue.update(relabelled)
    assert queue.where(me.uid) == "in-flight"
    queue.requeue(
        QueuedPodInfo(relabelled, qp.timestamp, attempts=qp.attempts), rejected_by=rejected_by
    )
    return queue.where(me.uid)


@pytest.mark.parametrize(("minor", "moves"), [(35, False), (36, True), (37, True)])
async def test_a_relabelling_in_flight_wakes_a_pod_inter_pod_affinity_rejected_from_1_36(
    minor: int, moves: bool
) -> None:
    queue = release_queue(minor, FakeClock())
    me = waiting("me", {"app": "me"}, affinity=anti("web"))
    relabelled = waiting("me", {"app": "me", "v": "2"}, affinity=anti("web"))
    where = await _relabelled_in_flight(queue, me, relabelled, IPA)
    assert (where != "unschedulable") is moves


SPREAD_WEB = {
    "maxSkew": 1,
    "topologyKey": ZONE,
    "whenUnsatisfiable": "DoNotSchedule",
    "labelSelector": {"matchLabels": {"app": "web"}},
}


@pytest.mark.parametrize("minor", [35, 36, 37])
@pytest.mark.parametrize(
    ("after", "moves"),
    [({"app": "web"}, True), ({"app": "db", "v": "2"}, False)],
    ids=["selector-match-changes", "selector-match-same"],
)
async def test_a_relabelling_in_flight_wakes_a_pod_spread_rejected_if_it_changes_its_count(
    minor: int, after: dict[str, str], moves: bool
) -> None:
    """PodTopologySpread's hint on the pod's own update (every release): Queue when a
    constraint's selector matches the labels before and after differently."""
    queue = release_queue(minor, FakeClock())
    me = waiting("me", {"app": "db"}, topologySpreadConstraints=[SPREAD_WEB])
    relabelled = waiting("me", after, topologySpreadConstraints=[SPREAD_WEB])
    where = await _relabelled_in_flight(queue, me, relabelled, SPREAD)
    assert (where != "unschedulable") is moves


@pytest.mark.parametrize("minor", [35, 36, 37])
async def test_a_relabelling_in_flight_does_not_wake_a_pod_others_rejected(minor: int) -> None:
    queue = release_queue(minor, FakeClock())
    me = waiting("me", {"app": "db"}, topologySpreadConstraints=[SPREAD_WEB])
    relabelled = waiting("me", {"app": "web"}, topologySpreadConstraints=[SPREAD_WEB])
    where = await _relabelled_in_flight(queue, me, relabelled, frozenset({"NodeResourcesFit"}))
    assert where == "unschedulable"
