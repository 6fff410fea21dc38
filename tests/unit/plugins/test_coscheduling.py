"""Coscheduling (PodGroups) and GangScheduling (Workloads): members held until the group has
its quorum, each waiting on Permit until the quorum is reserved, all let go at once; a member
rejected while waiting takes its waiting siblings with it; a member found unschedulable dooms
the group's round; minResources the cluster lacks turn the group away."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ascheduler.cache.gangs import Gangs
from ascheduler.features import Features, Release, parse_gates
from ascheduler.framework import ClusterEvent, Code, CycleState, Handle, WaitingPod, WaitingPods
from ascheduler.framework.interface import Diagnosis
from ascheduler.model import PodInfo
from ascheduler.model.podgroups import (
    POD_GROUP_LABEL,
    group_key,
    parse_pod_group,
    parse_workload,
)
from ascheduler.plugins import coscheduling
from ascheduler.plugins.coscheduling import (
    WAITING_ON_PERMIT,
    Coscheduling,
    CoschedulingArgs,
)
from ascheduler.plugins.gangscheduling import WAITING_FOR_MIN_COUNT, GangScheduling
from tests.kit import make_cache, node, parsed, pod


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def group(name: str = "pg", min_member: int = 3, **spec: Any) -> Any:
    return parse_pod_group(
        {
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"minMember": min_member, **spec},
        }
    )


def member(name: str, pg: str = "pg", **kw: Any) -> PodInfo:
    return parsed(pod(name, labels={POD_GROUP_LABEL: pg}, cpu="1", **kw))


def setup(
    *pods: PodInfo, min_member: int = 3, **spec: Any
) -> tuple[Coscheduling, Gangs, list[str], Clock]:
    cache = make_cache([node("n1", cpu="4"), node("n2", cpu="4")])
    gangs = Gangs()
    gangs.pod_group_handler.on_add(group(min_member=min_member, **spec))
    activated: list[str] = []
    handle = Handle(nodes=cache.table, gangs=gangs, waiting_pods=WaitingPods())
    handle.set_activator(lambda uids: activated.extend(uids))
    clock = Clock()
    plugin = Coscheduling(CoschedulingArgs(), handle, clock=clock)
    for p in pods:
        gangs.add_pod(p)
    return plugin, gangs, activated, clock


def wait(plugin: Coscheduling, p: PodInfo) -> tuple[Any, WaitingPod | None]:
    """Reserve and Permit `p` as the scheduling cycle does (a waiting pod registered)."""
    state = CycleState()
    assert plugin.reserve(state, p, "n1").ok
    status, timeout = plugin.permit(state, p, "n1")
    w = None
    if status.code is Code.WAIT:
        w = WaitingPod(p, "n1", {plugin.name: timeout})
        plugin.handle.waiting_pods.add(w)
    return (status, timeout), w


def test_parse_pod_group_and_workload() -> None:
    pg = group(minResources={"cpu": "2500m", "nvidia.com/gpu": 4}, scheduleTimeoutSeconds=30)
    assert (pg.min_member, pg.schedule_timeout) == (3, 30.0)
    assert pg.min_resources == {"cpu": 2500, "nvidia.com/gpu": 4}
    assert not pg.errors
    bad = parse_pod_group({"metadata": {"name": "x"}, "spec": {"minMember": "three"}})
    assert bad.errors == ("spec.minMember: expected an integer, got 'three'",)
    wl = parse_workload(
        {
            "metadata": {"name": "w", "namespace": "ns"},
            "spec": {
                "podGroups": [
                    {"name": "workers", "policy": {"gang": {"minCount": 4}}},
                    {"name": "driver", "policy": {"basic": {}}},
                ]
            },
        }
    )
    assert wl.groups == {"workers": 4, "driver": None}


def test_group_keys() -> None:
    assert group_key(member("a")) == "PodGroup:default/pg"
    ref = parsed(pod("w", workloadRef={"name": "job", "podGroup": "workers"}))
    assert group_key(ref) == "Workload:default/job/workers/"
    assert group_key(parsed(pod("plain"))) is None


def test_members_are_held_until_the_group_has_its_quorum() -> None:
    a, b, c = member("a"), member("b"), member("c", gates=["hold"])
    plugin, gangs, _, _ = setup(a, b, c)
    status = plugin.pre_enqueue(a)
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message == "PodGroup default/pg has 2 of the 3 pods it needs (minMember)"
    gangs.add_pod(member("c"))  # ungated: it counts now
    assert plugin.pre_enqueue(a).ok
    assert plugin.pre_enqueue(parsed(pod("plain"))).ok
    orphan = member("o", pg="nope")
    assert plugin.pre_enqueue(orphan).message == "waiting for PodGroup default/nope to be created"


async def test_permit_waits_for_the_quorum_then_allows_every_member() -> None:
    a, b, c = member("a"), member("b"), member("c")
    plugin, _, activated, _ = setup(a, b, c, scheduleTimeoutSeconds=30)
    (status, timeout), wa = wait(plugin, a)
    assert status.code is Code.WAIT
    assert timeout == 30.0
    assert sorted(activated) == ["uid-b", "uid-c"]  # the first to wait brings the rest
    (status, _), wb = wait(plugin, b)
    assert status.code is Code.WAIT
    (status, _), _ = wait(plugin, c)
    assert status.ok
    assert wa is not None
    assert wb is not None
    assert (await wa.wait()).ok
    assert (await wb.wait()).ok


async def test_a_member_rejected_while_waiting_takes_its_waiting_siblings_with_it() -> None:
    a, b, c = member("a"), member("b"), member("c")
    plugin, gangs, _, _ = setup(a, b, c)
    _, wa = wait(plugin, a)
    _, wb = wait(plugin, b)
    assert wa is not None
    assert wb is not None
    wa.reject("", "pod deleted")
    plugin.unreserve(CycleState(), a, "n1")  # a's binding cycle fails
    got = await wb.wait()
    assert got.code is Code.UNSCHEDULABLE
    assert got.message == "rejected with member a: 1/3 members placed"
    plugin.unreserve(CycleState(), b, "n1")
    gang = gangs.of(a)
    assert gang is not None
    assert gang.placed() == 0


async def test_timeout_rejects_every_waiting_member_with_the_groups_timeout() -> None:
    a, b, c = member("a"), member("b"), member("c")
    plugin, _, _, clock = setup(a, b, c, scheduleTimeoutSeconds=2)
    _, wa = wait(plugin, a)
    _, wb = wait(plugin, b)
    assert wa is not None
    assert wb is not None
    clock.now += 2.0
    plugin.unreserve(CycleState(), a, "n1")  # a's timer fired first
    got = await wb.wait()
    assert got.message == "rejected due to timeout after waiting 2s at plugin Coscheduling"


def backs_off_whole(
    plugin: Coscheduling,
    members: list[PodInfo],
    timers: list[tuple[float, Any]],
    activated: list[str],
    why: str,
) -> None:
    """Every member is turned away for a second, saying `why`; then all are woken together."""
    for p in members:
        _, status = plugin.pre_filter(CycleState(), p, plugin.handle.nodes)
        assert status.message == f"PodGroup default/pg failed recently ({why}); retrying in 1s"
    ((delay, wake),) = timers
    assert delay == pytest.approx(1.05)
    activated.clear()
    wake()
    assert sorted(activated) == sorted(p.uid for p in members)


async def test_a_member_that_fits_nowhere_dooms_the_round() -> None:
    a, b, c = member("a"), member("b"), member("c")
    plugin, gangs, activated, clock = setup(a, b, c)
    timers: list[tuple[float, Any]] = []
    plugin.later = lambda delay, callback: timers.append((delay, callback))
    _, wa = wait(plugin, a)
    assert wa is not None
    diag = Diagnosis(num_nodes=2)
    diag.reason_counts["Insufficient cpu"] = 2
    result = plugin.post_filter(CycleState(), b, plugin.handle.nodes, diag)
    assert result.status.code is Code.UNSCHEDULABLE
    assert result.status.message == "PodGroup default/pg rejected as a whole"
    got = await wa.wait()
    assert got.message == (
        "1/3 members fit; member b: 0/2 nodes are available: 2 Insufficient cpu."
    )
    plugin.unreserve(CycleState(), a, "n1")
    # The whole group waits a second (doomed once), then its members are woken together.
    backs_off_whole(plugin, [a, b, c], timers, activated, "member b fit nowhere")
    clock.now += 1.1
    # c is turned away at once while b, the member that failed, is not retried.
    _, status = plugin.pre_filter(CycleState(), c, plugin.handle.nodes)
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message.startswith("0/3 members of PodGroup default/pg fit; member b: 0/2")
    # b tried again: the group is tried again.
    assert plugin.pre_filter(CycleState(), b, plugin.handle.nodes)[1].ok
    assert plugin.pre_filter(CycleState(), c, plugin.handle.nodes)[1].ok
    assert gangs.of(c) is not None
    # Doomed again: twice as long; admitted, the count starts over.
    plugin.post_filter(CycleState(), c, plugin.handle.nodes, diag)
    assert timers[-1][0] == pytest.approx(2.05)
    gang = gangs.of(c)
    assert gang is not None
    assert gang.dooms == 2


def test_min_resources_beyond_the_clusters_free_room_turn_the_group_away() -> None:
    a, b, c = member("a"), member("b"), member("c")
    plugin, _, _, _ = setup(a, b, c, minResources={"cpu": "9", "nvidia.com/gpu": 1})
    _, status = plugin.pre_filter(CycleState(), a, plugin.handle.nodes)
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message == (
        "PodGroup default/pg needs more than the cluster has free (minResources): "
        "short of cpu 1000m, nvidia.com/gpu 1"
    )
    plugin2, _, _, _ = setup(a, b, c, minResources={"cpu": "8"})
    assert plugin2.pre_filter(CycleState(), a, plugin2.handle.nodes)[1].ok


def test_members_sort_together_at_their_groups_first_queue_time() -> None:
    gangs = Gangs()
    a, b = member("a"), member("b")
    gangs.add_pod(a)
    gangs.add_pod(b)
    assert gangs.sort_position(a, 5.0) == (5.0, "PodGroup:default/pg")
    assert gangs.sort_position(b, 9.0) == (5.0, "PodGroup:default/pg")
    plain = parsed(pod("plain"))
    assert gangs.sort_position(plain, 7.0) == (7.0, "")


async def test_gang_scheduling_speaks_kube_schedulers_words() -> None:
    """kube-scheduler 1.35's GangScheduling (its gate, `workloadRef`; 1.37 has neither)."""
    gangs = Gangs()
    at_1_35 = Release(1, 35)
    gates = parse_gates("GenericWorkload=true,GangScheduling=true", at_1_35)
    handle = Handle(gangs=gangs, features=gates)
    plugin = GangScheduling(handle)

    def ref(name: str, workload: str = "job", group: str = "workers") -> PodInfo:
        return parsed(pod(name, workloadRef={"name": workload, "podGroup": group}))

    w0 = ref("w0")
    gangs.add_pod(w0)
    held = plugin.pre_enqueue(w0)
    assert held.message == "waiting for pods's workload 'job' to appear in scheduling queue"
    gangs.workload_handler.on_add(
        parse_workload(
            {
                "metadata": {"name": "job", "namespace": "default"},
                "spec": {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": 2}}}]},
            }
        )
    )
    assert plugin.pre_enqueue(w0).message == WAITING_FOR_MIN_COUNT
    assert plugin.pre_enqueue(ref("x", group="nope")).message == (
        "pod group 'nope' doesn't exist for a workload 'job'"
    )
    w1 = ref("w1")
    gangs.add_pod(w1)
    assert plugin.pre_enqueue(w0).ok
    state = CycleState()
    plugin.reserve(state, w0, "n1")
    status, timeout = plugin.permit(state, w0, "n1")
    assert (status.code, status.message, timeout) == (Code.WAIT, WAITING_ON_PERMIT, 300.0)
    # Without the gate the plugin leaves every pod alone.
    off = GangScheduling(Handle(gangs=gangs, features=Features.defaults(at_1_35)))
    assert off.pre_enqueue(ref("w9")).ok


def test_members_wake_their_held_siblings_only_once_the_quorum_exists() -> None:
    """A group of thousands arriving one pod at a time must not re-check every held sibling
    at every arrival: before the quorum exists, an arrival wakes nobody."""
    plugin, gangs, _, _ = setup(member("a"), min_member=3)
    woken: list[int] = []
    gangs.on_member = lambda gang: woken.append(gang.ready())
    assert not plugin.pre_enqueue(member("a")).ok  # reads the quorum: 3
    gangs.add_pod(member("b"))
    gangs.add_pod(member("c", gates=["hold"]))
    assert woken == []
    gangs.add_pod(member("c"))  # ungated: the quorum is ready
    assert woken == [3]
    gangs.add_pod(member("d"))  # more than the quorum: each arrival may complete a retry
    assert woken == [3, 4]
    gangs.remove_pod(member("c"))
    gang = gangs.of(member("a"))
    assert gang is not None
    assert (gang.ready(), gang.gated) == (3, 0)


async def test_room_appearing_wakes_only_groups_the_capacity_check_turned_away() -> None:
    """A freed node or a deleted pod re-tries a group that minResources turned away; a group
    one of its members doomed waits for that member instead (hundreds of parked siblings must
    not be retried at every pod deletion), and a group short of members waits for them."""
    a, b, c = member("a"), member("b"), member("c")
    plugin, gangs, _, _ = setup(a, b, c)
    delete = ClusterEvent.ASSIGNED_POD_DELETE
    assert plugin.pre_enqueue(a).ok  # reads the quorum: 3, all present
    assert plugin.queueing_hint(c, delete, None, None)  # nothing failed: capacity may help
    diag = Diagnosis(num_nodes=2)
    diag.reason_counts["Insufficient cpu"] = 2
    plugin.post_filter(CycleState(), b, plugin.handle.nodes, diag)
    assert not plugin.queueing_hint(c, delete, None, None)
    assert not plugin.queueing_hint(a, ClusterEvent.NODE_ADD, None, None)
    assert plugin.queueing_hint(b, delete, None, None)  # the failed member itself
    woken: list[str] = []
    gangs.on_member = lambda gang: woken.append(gang.key)
    gangs.remove_pod(b)  # the member that doomed the round is gone: its siblings are woken
    assert woken == ["PodGroup:default/pg"]
    assert plugin.queueing_hint(c, ClusterEvent.GANG_MEMBER_ADD, None, gangs.of(c))
    # Two members left of three: room does not help until a third arrives.
    assert not plugin.queueing_hint(c, delete, None, None)
    assert not plugin.queueing_hint(parsed(pod("plain")), delete, None, None)


async def test_a_member_whose_bind_fails_after_admission_is_retried_alone() -> None:
    a, b, c = member("a"), member("b"), member("c")
    plugin, gangs, _, _ = setup(a, b, c)
    _, wa = wait(plugin, a)
    _, wb = wait(plugin, b)
    (status, _), _ = wait(plugin, c)
    assert status.ok
    assert wa is not None
    assert wb is not None
    assert (await wa.wait()).ok
    assert (await wb.wait()).ok
    gangs.add_pod(parsed(pod("a", labels={POD_GROUP_LABEL: "pg"}, cpu="1", nodeName="n1")))
    gangs.add_pod(parsed(pod("b", labels={POD_GROUP_LABEL: "pg"}, cpu="1", nodeName="n1")))
    plugin.unreserve(CycleState(), c, "n1")  # c's Binding failed: its siblings stay bound
    gang = gangs.of(c)
    assert gang is not None
    assert (gang.placed(), gang.admitted, gang.failed_until) == (2, True, 0.0)
    # Tried again, c passes PreFilter and Permit at once: the group needs no new round.
    assert plugin.pre_filter(CycleState(), c, plugin.handle.nodes)[1].ok
    (status, _), waiting = wait(plugin, c)
    assert status.ok
    assert waiting is None


async def test_a_timed_out_group_backs_off_as_a_whole() -> None:
    a, b, c = member("a"), member("b"), member("c")
    plugin, _, activated, clock = setup(a, b, c, scheduleTimeoutSeconds=2)
    timers: list[tuple[float, Any]] = []
    plugin.later = lambda delay, callback: timers.append((delay, callback))
    _, wa = wait(plugin, a)
    assert wa is not None
    clock.now += 2.0
    plugin.unreserve(CycleState(), a, "n1")
    why = "rejected due to timeout after waiting 2s at plugin Coscheduling"
    backs_off_whole(plugin, [a, b, c], timers, activated, why)


class Writes:
    """The PodGroup status patches and Events a plugin sends."""

    def __init__(self) -> None:
        self.status: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []

    async def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        body = kw["body"]
        (self.status if path.endswith("/status") else self.events).append(body)
        return {}


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_group_short_of_members_is_reported_waiting_then_counted_once_placed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(coscheduling, "STATUS_INTERVAL", 0.0)
    writes = Writes()
    plugin, gangs, _, _ = setup(min_member=3)
    plugin.handle.kube = writes  # type: ignore[assignment]
    timers: list[tuple[float, Any]] = []
    plugin.later = lambda delay, callback: timers.append((delay, callback))
    # Another profile's plugin watches the same groups, and leaves the members' own alone.
    other = Coscheduling(
        CoschedulingArgs(), Handle(nodes=plugin.handle.nodes, gangs=gangs, profile="other")
    )
    other.later = lambda delay, callback: timers.append((delay, callback))
    a, b, c, d = member("a"), member("b"), member("c"), member("d")
    gangs.add_pod(a)
    gangs.add_pod(b)
    ((delay, report),) = timers  # one report due, however many members arrive meanwhile
    assert delay == coscheduling.WAITING_REPORT_SECONDS
    report()
    await settle()
    (event,) = writes.events
    assert (event["type"], event["reason"]) == ("Normal", "GangWaiting")
    assert event["note"] == "PodGroup default/pg: waiting for 3 members before any is placed"
    (patch,) = writes.status
    assert patch["status"]["phase"] == "Pending"
    assert patch["status"]["scheduled"] == 0
    (cond,) = patch["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == (
        "PodGroupScheduled",
        "False",
        "Unschedulable",
    )
    assert cond["message"] == "2/3 members exist; waiting for 1 more before any is placed"
    # Filled up and placed: admitted; a member bound later is counted.
    gangs.add_pod(c)
    for p in (a, b, c):
        wait(plugin, p)
    await settle()
    assert writes.status[-1]["status"]["scheduled"] == 3
    assert writes.status[-1]["status"]["phase"] == "Scheduled"
    gangs.add_pod(d)
    wait(plugin, d)
    gangs.add_pod(parsed(pod("d", labels={POD_GROUP_LABEL: "pg"}, cpu="1", nodeName="n2")))
    await settle()
    assert writes.status[-1]["status"]["scheduled"] == 4
    assert writes.status[-1]["status"]["phase"] == "Scheduled"
    # A group that fills up before its report is due is never reported waiting.
    for t in timers[1:]:
        t[1]()
    await settle()
    assert [e["reason"] for e in writes.events] == ["GangWaiting", "GangScheduled"]
