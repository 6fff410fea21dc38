"""GangScheduling from 1.36: PodGroup objects named by `spec.schedulingGroup`, kube-scheduler's
words, and a group's attempt failed as its pod group cycle fails it (1.36 and 1.37 alike,
each with its own verdict)."""

from __future__ import annotations

from collections.abc import Callable

from ascheduler.cache.gangs import Gangs
from ascheduler.features import Features, Release, parse_gates
from ascheduler.framework import ClusterEvent, Code, CycleState, Handle, WaitingPod, WaitingPods
from ascheduler.framework.profile import default_plugins, multipoint
from ascheduler.framework.runtime import Framework
from ascheduler.model import PodInfo
from ascheduler.model.podgroups import parse_scheduling_group, parse_workload
from ascheduler.plugins import IN_TREE
from ascheduler.plugins.defaultpreemption import GROUP_MAY_NOT_PREEMPT, NO_GROUP_VICTIMS
from ascheduler.plugins.dynamicresources.state import CLAIMS_RELEASED
from ascheduler.plugins.gangscheduling import (
    GROUP_UNSCHEDULABLE,
    WAITING_FOR_MIN_COUNT,
    WAITING_TO_BE_SCHEDULED,
    GangScheduling,
)
from tests.kit import parsed, pod

V136 = parse_gates("GenericWorkload=true,GangScheduling=true", Release(1, 36))
V137 = parse_gates("GenericWorkload=true", Release(1, 37))


def pod_group(name: str, count: int | None) -> object:
    policy = {"basic": {}} if count is None else {"gang": {"minCount": count}}
    return parse_scheduling_group(
        {"metadata": {"name": name, "namespace": "default"}, "spec": {"schedulingPolicy": policy}}
    )


def member(name: str, group: str = "g", **fields: str) -> PodInfo:
    return parsed(pod(name, schedulingGroup={"podGroupName": group}, **fields))


def setup(features: Features) -> tuple[GangScheduling, Gangs, list[Callable[[], None]]]:
    """A GangScheduling on a handle wired to the release's default profile (whose
    PodGroupPostFilter plugins end a failed group's line)."""
    gangs = Gangs()
    handle = Handle(gangs=gangs, waiting_pods=WaitingPods(), features=features)
    Framework(multipoint("x", default_plugins(IN_TREE, features)), IN_TREE, handle)
    plugin = GangScheduling(handle)
    later: list[Callable[[], None]] = []
    plugin.later = lambda _delay, callback: later.append(callback)
    return plugin, gangs, later


def wait(plugin: GangScheduling, p: PodInfo) -> WaitingPod | None:
    state = CycleState()
    assert plugin.reserve(state, p, "n1").ok
    status, timeout = plugin.permit(state, p, "n1")
    if status.code is not Code.WAIT:
        return None
    assert status.message == WAITING_TO_BE_SCHEDULED
    w = WaitingPod(p, "n1", {plugin.name: timeout})
    plugin.handle.waiting_pods.add(w)
    return w


def test_the_gate_of_each_release() -> None:
    assert GangScheduling(Handle(features=V136)).enabled
    assert not GangScheduling(Handle(features=Features.defaults(Release(1, 36)))).enabled
    # 1.37 has no GangScheduling gate: GenericWorkload alone turns the plugin on.
    assert GangScheduling(Handle(features=V137)).enabled
    assert not GangScheduling(Handle(features=Features.defaults(Release(1, 37)))).enabled


async def test_members_are_held_until_their_pod_group_and_its_quorum_exist() -> None:
    plugin, gangs, _ = setup(V136)
    m0 = member("m0")
    gangs.add_pod(m0)
    assert plugin.pre_enqueue(m0).message == (
        'waiting for pods\'s pod group "g" to appear in scheduling queue'
    )
    gangs.scheduling_group_handler.on_add(pod_group("g", 2))
    assert plugin.pre_enqueue(m0).message == WAITING_FOR_MIN_COUNT
    gangs.add_pod(member("m1"))
    assert plugin.pre_enqueue(m0).ok
    # A basic group is no gang, and a pod of no group is left alone.
    gangs.scheduling_group_handler.on_add(pod_group("b", None))
    assert plugin.pre_enqueue(member("b0", "b")).ok
    assert plugin.pre_enqueue(parsed(pod("plain"))).ok
    # A workloadRef means nothing from 1.36 (the API server no longer keeps it).
    ref = parsed(pod("r", workloadRef={"name": "w", "podGroup": "x"}))
    assert plugin.pre_enqueue(ref).ok


def test_an_invalid_pod_group_holds_its_members_naming_the_field() -> None:
    plugin, gangs, _ = setup(V136)
    bad = parse_scheduling_group(
        {"metadata": {"name": "g", "namespace": "default"}, "spec": {"schedulingPolicy": {}}}
    )
    gangs.scheduling_group_handler.on_add(bad)
    held = plugin.pre_enqueue(member("m0"))
    assert not held.ok
    assert "PodGroup default/g is invalid: spec.schedulingPolicy" in held.message


async def test_the_quorum_reserved_lets_every_member_go() -> None:
    plugin, gangs, _ = setup(V136)
    gangs.scheduling_group_handler.on_add(pod_group("g", 2))
    m0, m1 = member("m0"), member("m1")
    gangs.add_pod(m0)
    gangs.add_pod(m1)
    w0 = wait(plugin, m0)
    assert w0 is not None
    assert wait(plugin, m1) is None  # the second completes the quorum
    assert (await w0.wait()).ok


async def test_a_pod_group_placed_whole_gets_no_event_its_condition_says_it() -> None:
    """kube-scheduler records no event on a PodGroup (its PodGroupScheduled condition says
    the group was placed); a v1.35 Workload, which has no status, gets `GangScheduled`."""
    said: list[str] = []
    for features in (V137, parse_gates("GenericWorkload=true,GangScheduling=true", Release(1, 35))):
        plugin, gangs, _ = setup(features)
        plugin.reporter.event = lambda _gang, _kind, reason, _note: said.append(reason)  # type: ignore[method-assign]
        if plugin.pod_groups:
            gangs.scheduling_group_handler.on_add(pod_group("g", 2))
            m0, m1 = member("m0"), member("m1")
        else:
            workload = {
                "name": "w",
                "podGroups": [{"name": "g", "policy": {"gang": {"minCount": 2}}}],
            }
            gangs.workload_handler.on_add(
                parse_workload(
                    {"metadata": {"name": "w", "namespace": "default"}, "spec": workload}
                )
            )
            m0, m1 = (
                parsed(pod(n, workloadRef={"name": "w", "podGroup": "g"})) for n in ("m0", "m1")
            )
        for m in (m0, m1):
            gangs.add_pod(m)
        state = CycleState()
        assert plugin.reserve(state, m0, "n1").ok
        assert plugin.permit(state, m0, "n1")[0].code is Code.WAIT
        plugin.handle.waiting_pods.add(WaitingPod(m0, "n1", {plugin.name: 300.0}))
        assert plugin.reserve(state, m1, "n1").ok
        assert plugin.permit(state, m1, "n1")[0].ok
    assert said == ["GangScheduled"]  # the Workload's only


async def test_a_member_that_fails_fails_its_groups_attempt_at_136() -> None:
    plugin, gangs, later = setup(V136)
    gangs.scheduling_group_handler.on_add(pod_group("g", 3))
    m0, m1, m2 = member("m0"), member("m1"), member("m2")
    for p in (m0, m1, m2):
        gangs.add_pod(p)
    w0, w1 = wait(plugin, m0), wait(plugin, m1)
    assert w0 is not None
    assert w1 is not None
    gangs.member_failed(m2, "NodeAffinity")
    for w in (w0, w1):
        status = await w.wait()
        assert (status.code, status.message) == (Code.UNSCHEDULABLE, GROUP_UNSCHEDULABLE)
    for p in (m0, m1):
        plugin.unreserve(CycleState(), p, "n1")
    # Tried again before the member that failed: turned away as soon as each waits.
    before = len(later)
    w0 = wait(plugin, m0)
    assert w0 is not None
    assert len(later) == before + 1
    later.pop()()
    assert (await w0.wait()).message == GROUP_UNSCHEDULABLE
    plugin.unreserve(CycleState(), m0, "n1")
    # The member that failed fits now: a new attempt, the group is placed.
    before = len(later)
    assert wait(plugin, m2) is not None
    assert wait(plugin, m0) is not None
    assert len(later) == before  # nobody turned away
    assert wait(plugin, m1) is None


async def test_at_137_the_verdict_counts_the_scheduled_and_the_remaining() -> None:
    plugin, gangs, _ = setup(V137)
    gangs.scheduling_group_handler.on_add(pod_group("g", 3))
    m0, m1, m2 = member("m0"), member("m1"), member("m2")
    for p in (m0, m1, m2):
        gangs.add_pod(p)
    w0 = wait(plugin, m0)
    assert w0 is not None
    # m2 fails with m1 still untried: 1 scheduled, 1 remaining, short of 3.
    gangs.member_failed(m2, "NodeResourcesFit")
    assert (await w0.wait()).message == (
        "pod group is unschedulable, minCount (3) cannot be satisfied: 1 scheduled, 1 remaining, "
        "pod group preemption: No preemption victims found for incoming preemptor"
    )


async def test_a_failure_the_rest_can_make_up_for_fails_nothing() -> None:
    plugin, gangs, _ = setup(V136)
    gangs.scheduling_group_handler.on_add(pod_group("g", 2))
    members = [member(f"m{i}") for i in range(3)]
    for p in members:
        gangs.add_pod(p)
    assert wait(plugin, members[0]) is not None
    gangs.member_failed(members[2], "NodeAffinity")
    gang = gangs.get("SchedulingGroup:default/g")
    assert gang is not None
    assert gang.failed is None
    assert gang.waiting
    # Nor does the plugin's own rejection count as a new failure.
    gangs.member_failed(members[1], "GangScheduling")
    assert gang.failed is None


def test_events_each_release_registers() -> None:
    plugin, _, _ = setup(V136)
    assert ClusterEvent.SCHEDULING_GROUP_ADD in plugin.events_to_register()
    assert ClusterEvent.SCHEDULING_GROUP_UPDATE not in plugin.events_to_register()
    plugin37, _, _ = setup(V137)
    assert ClusterEvent.SCHEDULING_GROUP_UPDATE in plugin37.events_to_register()
    m0 = member("m0")
    old, lower, higher = pod_group("g", 3), pod_group("g", 2), pod_group("g", 4)
    update = ClusterEvent.SCHEDULING_GROUP_UPDATE
    assert plugin37.queueing_hint(m0, update, old, lower)
    assert not plugin37.queueing_hint(m0, update, old, higher)
    assert not plugin37.queueing_hint(member("x", "other"), update, old, lower)


async def test_a_gated_member_leaves_the_rest_short_they_fail_with_their_group_at_136() -> None:
    plugin, gangs, later = setup(V136)
    gangs.scheduling_group_handler.on_add(pod_group("g", 3))
    m0, m1 = member("m0"), member("m1")
    gated = parsed(pod("m2", schedulingGroup={"podGroupName": "g"}, gates=["kueue"]))
    for p in (m0, m1, gated):
        gangs.add_pod(p)
    assert plugin.pre_enqueue(m0).ok  # the quorum counts the gated member
    before = len(later)
    w0 = wait(plugin, m0)
    assert w0 is not None
    assert len(later) == before + 1  # short already: let go as soon as it waits
    later.pop()()
    assert (await w0.wait()).message == GROUP_UNSCHEDULABLE


def test_a_gated_member_holds_its_whole_gang_at_137() -> None:
    plugin, gangs, _ = setup(V137)
    gangs.scheduling_group_handler.on_add(pod_group("g", 3))
    m0, m1 = member("m0"), member("m1")
    gated = parsed(pod("m2", schedulingGroup={"podGroupName": "g"}, gates=["kueue"]))
    for p in (m0, m1, gated):
        gangs.add_pod(p)
    held = plugin.pre_enqueue(m0)
    assert held.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert "m2" in held.message
    gangs.add_pod(parsed(pod("m2", schedulingGroup={"podGroupName": "g"})))  # ungated
    assert plugin.pre_enqueue(m0).ok


async def test_at_137_a_short_attempt_fails_before_any_member_is_tried() -> None:
    plugin, gangs, later = setup(V137)
    gangs.scheduling_group_handler.on_add(pod_group("g", 3))
    m0, m1, m2 = member("m0"), member("m1"), member("m2")
    for p in (m0, m1, m2):
        gangs.add_pod(p)
    gangs.member_failed(m2, "NodeAffinity")  # m2 first: 0 scheduled, 2 remaining
    before = len(later)
    w0 = wait(plugin, m0)
    assert w0 is not None
    assert len(later) == before + 1
    later.pop()()
    assert (await w0.wait()).message == (
        "pod group is unschedulable, minCount (3) cannot be satisfied: 0 scheduled, 2 remaining, "
        "pod group preemption: No preemption victims found for incoming preemptor"
    )


async def test_at_137_members_of_a_group_that_may_not_preempt_are_told_so() -> None:
    never = f"{CLAIMS_RELEASED}, {GROUP_MAY_NOT_PREEMPT}"
    for policy, preemption in (("Never", never), (None, NO_GROUP_VICTIMS)):
        plugin, gangs, _ = setup(V137)
        gangs.scheduling_group_handler.on_add(pod_group("g", 3))
        fields = {} if policy is None else {"preemptionPolicy": policy}
        p0, p1, p2 = (member(f"p{i}", **fields) for i in range(3))
        for p in (p0, p1, p2):
            gangs.add_pod(p)
        assert wait(plugin, p0) is not None
        # p1 fits nowhere: with p0 waiting and p2 left, the quorum of 3 is out of reach.
        gangs.member_failed(p1, "NodeResourcesFit")
        gang = gangs.of(p0)
        assert gang is not None
        assert gang.failed is not None
        assert gang.failed[2] == (
            "pod group is unschedulable, minCount (3) cannot be satisfied: "
            f"1 scheduled, 1 remaining, {preemption}"
        )
