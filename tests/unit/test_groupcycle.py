"""The pod group cycle's checks and verdicts per release: 1.37's validation of a group's
members and 1.36's schedulerName check, word for word, and the condition each outcome
writes on the PodGroup (kube-scheduler's `schedule_one_podgroup.go`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from ascheduler.app import build_frameworks
from ascheduler.cache import Cache
from ascheduler.config import DEFAULT_SCHEDULER_NAME, SchedulerConfig
from ascheduler.features import Features, Release, parse_gates
from ascheduler.framework import QueuedPodInfo, Status
from ascheduler.framework.extender import Extenders
from ascheduler.framework.runtime import Framework
from ascheduler.groupcycle import (
    POD_GROUP_VALIDATION,
    PRIORITY_MISMATCH,
    PodGroupCycle,
)
from ascheduler.groupstatus import PodGroupStatusWriter, Verdict
from ascheduler.model import PodInfo
from ascheduler.model.podgroups import parse_scheduling_group
from ascheduler.plugins import IN_TREE
from ascheduler.plugins.defaultpreemption import GROUP_MAY_NOT_PREEMPT, NO_GROUP_VICTIMS
from ascheduler.plugins.dynamicresources.state import CLAIMS_RELEASED
from ascheduler.scheduler import BindingJob
from tests.kit import node_info, on, parsed, pod
from tests.kit.scheduling import Env, pop

V136 = parse_gates("GenericWorkload=true,GangScheduling=true", Release(1, 36))
V137 = parse_gates("GenericWorkload=true", Release(1, 37))
PREEMPTION_POLICY_137 = parse_gates(
    "GenericWorkload=true,PodGroupPreemptionPolicy=true", Release(1, 37)
)
PROFILE = DEFAULT_SCHEDULER_NAME


class Recorder(PodGroupStatusWriter):
    """Keeps the verdicts, writes nothing."""

    def __init__(self, release: Release) -> None:
        super().__init__(None, release)
        self.verdicts: dict[str, Verdict] = {}

    def set(self, group: Any, verdict: Verdict) -> None:
        self.verdicts[group.key] = verdict


def setup(features: Features) -> tuple[PodGroupCycle, Cache, Recorder, Framework]:
    cache = Cache(features)
    config = SchedulerConfig(features=features)
    frameworks = build_frameworks(config, IN_TREE, cache, None, Extenders(()))
    recorder = Recorder(features.release)
    cycle = PodGroupCycle(cache.gangs, recorder, frameworks, features)
    return cycle, cache, recorder, frameworks[PROFILE]


def add_group(cache: Cache, count: int | None, **spec: Any) -> None:
    policy = {"basic": {}} if count is None else {"gang": {"minCount": count}}
    cache.gangs.scheduling_group_handler.on_add(
        parse_scheduling_group(
            {
                "metadata": {"name": "g", "namespace": "default", "uid": "pg"},
                "spec": {"schedulingPolicy": policy, **spec},
            }
        )
    )


def member(name: str, created: str = "2026-01-01T00:00:00Z", **fields: Any) -> PodInfo:
    fields.setdefault("scheduler_name", PROFILE)
    raw = pod(name, schedulingGroup={"podGroupName": "g"}, **fields)
    raw["metadata"]["creationTimestamp"] = created
    return parsed(raw)


def members(cache: Cache, *pods: PodInfo) -> None:
    for p in pods:
        cache.gangs.add_pod(p)


# -- validation ------------------------------------------------------------------------------


def test_members_that_agree_pass() -> None:
    cycle, cache, _, _ = setup(V137)
    add_group(cache, 2, priority=5)
    p0, p1 = member("p0", priority=5), member("p1", priority=5)
    members(cache, p0, p1)
    assert cycle.validate(p0) is None


def test_at_137_each_pod_has_its_groups_priority() -> None:
    cycle, cache, _, _ = setup(V137)
    add_group(cache, 2)
    p0, p1 = member("p0", priority=1000), member("p1", priority=1000)
    members(cache, p0, p1)
    status = cycle.validate(p1)
    assert status == Status.error(
        "all pods in a single pod group should have the same priority as the pod group's "
        "priority, got 1000 and 0",
        POD_GROUP_VALIDATION,
    )
    # 1.36 checks only the schedulerName.
    cycle, cache, _, _ = setup(V136)
    add_group(cache, 2)
    members(cache, p0, p1)
    assert cycle.validate(p1) is None


def test_at_137_a_member_bound_by_another_scheduler_fails_the_group() -> None:
    cycle, cache, _, _ = setup(V137)
    add_group(cache, 2)
    bound = parsed(
        on("n1", pod("b", scheduler_name="other", schedulingGroup={"podGroupName": "g"}))
    )
    p0 = member("p0")
    members(cache, bound, p0)
    status = cycle.validate(p0)
    assert status is not None
    assert status.message == (
        "all pods in a single pod group should have the same .spec.schedulerName set, "
        'got: "other" and "ascheduler"'
    )


def test_the_first_member_in_queue_order_sets_the_preemption_policy() -> None:
    cycle, cache, _, _ = setup(V137)
    add_group(cache, 2)
    first = member("a", created="2026-01-01T00:00:00Z")
    never = member("b", created="2026-01-01T00:00:01Z", preemptionPolicy="Never")
    members(cache, first, never)
    # Whichever comes up, the group is checked in one order and fails with the same words.
    for p in (first, never):
        status = cycle.validate(p)
        assert status is not None
        assert status.message == (
            "all pods in a single pod group should have the same preemption policy, "
            "got Never and PreemptLowerPriority"
        )


def test_with_pod_group_preemption_policy_the_groups_own_policy_rules() -> None:
    cycle, cache, _, _ = setup(PREEMPTION_POLICY_137)
    add_group(cache, 2, preemptionPolicy="Never")
    p0 = member("p0")
    members(cache, p0)
    status = cycle.validate(p0)
    assert status is not None
    assert status.message == (
        "all pods in a single pod group should have the same preemption policy as the pod "
        "group's preemption policy, got PreemptLowerPriority and Never"
    )


def test_at_136_members_queued_for_two_profiles_fail_with_their_names() -> None:
    cycle, cache, _, _ = setup(V136)
    add_group(cache, 2)
    cycle.frameworks = {PROFILE: cycle.frameworks[PROFILE], "second": cycle.frameworks[PROFILE]}
    p0 = member("p0", created="2026-01-01T00:00:00Z")
    p1 = member("p1", created="2026-01-01T00:00:01Z", scheduler_name="second")
    members(cache, p0, p1)
    status = cycle.validate(p1)
    assert status is not None
    assert status.message == (
        "all pods in a single pod group should have the same .spec.schedulerName set, "
        'got: "second" and "ascheduler"'
    )


def test_nothing_is_checked_without_generic_workload() -> None:
    features = Features.defaults(Release(1, 37))
    cycle, cache, _, _ = setup(features)
    add_group(cache, 2)
    p0 = member("p0", priority=7)
    members(cache, p0)
    assert cycle.validate(p0) is None


# -- verdicts --------------------------------------------------------------------------------


def test_a_member_passing_permit_schedules_its_group() -> None:
    cycle, cache, recorder, _ = setup(V137)
    add_group(cache, None)
    p0 = member("p0")
    members(cache, p0)
    cycle.scheduled(p0)
    assert recorder.verdicts["default/g"] == Verdict(True, "Scheduled", "")


@pytest.mark.parametrize(
    ("features", "nominated", "message"),
    [
        (V136, False, "pod group is unschedulable"),
        (
            V136,
            True,
            "pod group is unschedulable, pod group is waiting for preemption to complete",
        ),
        (
            V137,
            False,
            "minCount (1) cannot be satisfied: 0 scheduled, 0 remaining, "
            "pod group preemption: No preemption victims found for incoming preemptor",
        ),
    ],
)
def test_a_basic_group_none_of_whose_members_fit(
    features: Features, nominated: bool, message: str
) -> None:
    cycle, cache, recorder, fw = setup(features)
    add_group(cache, None)
    p0 = member("p0")
    members(cache, p0)
    fit_error = Status.unschedulable("0/1 nodes are available: 1 Insufficient cpu.")
    cycle.failed(fw, p0, fit_error, error=False, binding=False, nominated=nominated)
    assert recorder.verdicts["default/g"] == Verdict(False, "Unschedulable", message)


def test_at_137_a_basic_group_with_a_member_scheduled_says_so_without_min_count() -> None:
    cycle, cache, recorder, fw = setup(V137)
    add_group(cache, None)
    bound = parsed(on("n1", pod("b", schedulingGroup={"podGroupName": "g"})))
    p0 = member("p0")
    members(cache, bound, p0)
    cycle.failed(fw, p0, Status.unschedulable("x"), error=False, binding=False, nominated=False)
    message = f"pod group is unschedulable, {NO_GROUP_VICTIMS}"
    assert recorder.verdicts["default/g"] == Verdict(False, "Unschedulable", message)


def test_a_members_error_is_the_groups() -> None:
    cycle, cache, recorder, fw = setup(V136)
    add_group(cache, 2)
    p0 = member("p0")
    members(cache, p0)
    cycle.failed(fw, p0, Status.error("boom"), error=True, binding=False, nominated=False)
    assert recorder.verdicts["default/g"] == Verdict(
        False, "SchedulerError", "failed to schedule other pod from a pod group: boom"
    )


def test_a_failed_validation_is_written_at_137_only() -> None:
    for features, written in ((V137, True), (V136, False)):
        cycle, cache, recorder, fw = setup(features)
        add_group(cache, 2)
        p0 = member("p0")
        members(cache, p0)
        invalid = Status.error("all pods ...", POD_GROUP_VALIDATION)
        cycle.failed(fw, p0, invalid, error=True, binding=False, nominated=False)
        expected = {"default/g": Verdict(False, "SchedulerError", "all pods ...")}
        assert recorder.verdicts == (expected if written else {})


@pytest.mark.parametrize(
    ("features", "message"),
    [
        (V136, "pod group is unschedulable"),
        (V137, f"minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, {NO_GROUP_VICTIMS}"),
    ],
)
def test_a_gang_fails_when_its_plugin_finds_the_quorum_out_of_reach(
    features: Features, message: str
) -> None:
    cycle, cache, recorder, fw = setup(features)
    add_group(cache, 3)
    p0, p1, p2 = member("p0"), member("p1"), member("p2")
    members(cache, p0, p1, p2)
    gang = cache.gangs.of(p0)
    assert gang is not None
    misfit = Status.unschedulable("0/1 nodes are available: 1 Insufficient cpu.")
    # A member failing while the rest can still make the quorum: the attempt goes on.
    cycle.failed(fw, p2, misfit, error=False, binding=False, nominated=False)
    assert recorder.verdicts == {}
    # GangScheduling has found the quorum out of reach (its member line, prefixed).
    gang.failed = (p2.uid, p2.name, f"pod group is unschedulable, {message}")
    cycle.failed(fw, p2, misfit, error=False, binding=False, nominated=False)
    # 1.36 writes errPodGroupUnschedulable alone; 1.37 the verdict the loop stopped on.
    assert recorder.verdicts["default/g"] == Verdict(False, "Unschedulable", message)


@pytest.mark.parametrize(
    ("features", "group_policy", "pod_policy", "preemption"),
    [
        # Without PodGroupPreemptionPolicy the members' policy (one, or validation failed).
        # A group that may not preempt: DynamicResources' reason comes first (the default
        # profile's order) and is kept; one that finds no victims: that alone.
        (V137, None, "Never", f"{CLAIMS_RELEASED}, {GROUP_MAY_NOT_PREEMPT}"),
        (V137, None, "PreemptLowerPriority", NO_GROUP_VICTIMS),
        # With it, the PodGroup's own, whatever the member says.
        (PREEMPTION_POLICY_137, "Never", "Never", f"{CLAIMS_RELEASED}, {GROUP_MAY_NOT_PREEMPT}"),
        (PREEMPTION_POLICY_137, "PreemptLowerPriority", "Never", NO_GROUP_VICTIMS),
        (PREEMPTION_POLICY_137, None, "Never", NO_GROUP_VICTIMS),
    ],
)
def test_at_137_a_group_that_may_not_preempt_says_so(
    features: Features, group_policy: str | None, pod_policy: str, preemption: str
) -> None:
    cycle, cache, recorder, fw = setup(features)
    add_group(cache, None, **({} if group_policy is None else {"preemptionPolicy": group_policy}))
    p0 = member("p0", preemptionPolicy=pod_policy)
    members(cache, p0)
    cycle.failed(fw, p0, Status.unschedulable("x"), error=False, binding=False, nominated=False)
    message = f"minCount (1) cannot be satisfied: 0 scheduled, 0 remaining, {preemption}"
    assert recorder.verdicts["default/g"] == Verdict(False, "Unschedulable", message)


def test_a_bind_that_fails_after_the_cycle_is_no_verdict() -> None:
    cycle, cache, recorder, fw = setup(V137)
    add_group(cache, None)
    p0 = member("p0")
    members(cache, p0)
    cycle.failed(fw, p0, Status.error("bind: boom"), error=True, binding=True, nominated=False)
    cycle.failed(fw, p0, Status.unschedulable("x"), error=False, binding=True, nominated=False)
    assert recorder.verdicts == {}


def test_an_attempt_out_of_kube_schedulers_order_leaves_the_verdict_as_it_was() -> None:
    cycle, cache, recorder, fw = setup(V137)
    add_group(cache, 3)
    p0, p1, p2 = member("p0"), member("p1"), member("p2")
    members(cache, p0, p1, p2)
    gang = cache.gangs.of(p0)
    assert gang is not None
    misfit = Status.unschedulable("x")
    # In order: p0 and p1 reserved, p2 fails the group.
    gang.waiting |= {p0.uid, p1.uid}
    gang.failed = (p2.uid, p2.name, "pod group is unschedulable, in order")
    cycle.failed(fw, p2, misfit, error=False, binding=False, nominated=False)
    assert recorder.verdicts["default/g"].message == "in order"
    # p2 tried again while p1, ahead of it, is not back yet: kube-scheduler would have
    # tried p1 first; neither p2 nor the members let go with it change the verdict.
    gang.waiting -= {p1.uid}
    gang.failed = (p2.uid, p2.name, "pod group is unschedulable, out of order")
    cycle.failed(fw, p2, misfit, error=False, binding=False, nominated=False)
    cycle.failed(fw, p0, misfit, error=False, binding=True, nominated=False)
    assert recorder.verdicts["default/g"].message == "in order"
    # p1 gated: kube-scheduler would not try it; p2's attempt is in order again.
    cache.gangs.add_pod(member("p1", schedulingGates=[{"name": "hold"}]))
    gang.failed = (p2.uid, p2.name, "pod group is unschedulable, without p1")
    cycle.failed(fw, p2, misfit, error=False, binding=False, nominated=False)
    assert recorder.verdicts["default/g"].message == "without p1"


def test_the_first_verdict_is_written_whatever_the_order() -> None:
    cycle, cache, recorder, fw = setup(V137)
    add_group(cache, 2)
    p0, p1 = member("p0"), member("p1")
    members(cache, p0, p1)
    gang = cache.gangs.of(p0)
    assert gang is not None
    gang.failed = (p1.uid, p1.name, "pod group is unschedulable, first")
    cycle.failed(fw, p1, Status.unschedulable("x"), error=False, binding=False, nominated=False)
    assert recorder.verdicts["default/g"].message == "first"


# -- in the scheduling cycle ------------------------------------------------------------------


async def test_a_member_of_a_group_its_members_disagree_on_fails_before_any_node_is_tried() -> None:
    env = Env(node_info("n1"), options=SchedulerConfig(features=V137))
    add_group(env.cache, 2)
    p0, p1 = member("p0", priority=1000), member("p1", priority=1000)
    members(env.cache, p0, p1)
    job, _ = await env.attempt(p0)
    assert job is None
    (condition,) = [i for i in env.written() if getattr(i, "reason", "") == "SchedulerError"]
    assert condition.message == PRIORITY_MISMATCH.format(1000, 0)
    assert env.scheduler.stats.errors == 1
    assert env.queue.where(p0.uid) == "backoff"


def test_a_member_joining_a_group_that_agreed_is_checked_with_the_rest() -> None:
    cycle, cache, _, _ = setup(V137)
    add_group(cache, 2)
    p0, p1 = member("p0"), member("p1")
    members(cache, p0, p1)
    assert cycle.validate(p0) is None
    assert cycle.validate(p1) is None  # the group as it was: told without looking again
    late = member("late", created="2026-01-01T00:00:09Z", priority=7)
    members(cache, late)
    for p in (p0, late):
        status = cycle.validate(p)
        assert status is not None
        assert status.message.endswith("got 7 and 0")


# -- the members tried together ---------------------------------------------------------------


async def test_a_members_queued_siblings_come_up_with_it_in_kube_schedulers_order() -> None:
    # (1.36: a gated member holds only itself back; 1.37 holds its whole gang.)
    env = Env(node_info("n1"), options=SchedulerConfig(features=V136))
    add_group(env.cache, 3)
    p0, p1, p2, vip = member("p0"), member("p1"), member("p2"), member("vip", priority=9)
    other = parsed(pod("other", scheduler_name=PROFILE))
    members(env.cache, p0, p1, p2, vip)
    for p in (p0, p1, p2, vip):
        env.queue.add(p)
    env.clock.advance(1.0)
    env.queue.add(other)  # queued after the group
    first = await pop(env.queue)
    assert first is not None
    assert first.pod.name == "vip"
    # vip is tried and put back, unschedulable; p1 is gated (in no queue kube pops from).
    env.queue.requeue(first, rejected_by=frozenset({"NodeResourcesFit"}))
    gated = member("p1", schedulingGates=[{"name": "hold"}])
    env.cache.gangs.add_pod(gated)
    env.queue.update(gated)
    assert env.queue.where(p1.uid) == "gated"
    qp = await pop(env.queue)
    assert qp is not None
    batch = env.scheduler.groups.members(qp, env.queue.waiting)
    # The higher priority first, though it was parked; the siblings left where they
    # wait until the loop takes each (the gated one then stays gated: not tried); the pod of
    # no group stays queued.
    assert [q.pod.name for q in batch] == ["vip", "p0", "p1", "p2"]
    where = [env.queue.where(q.pod.uid) for q in batch]
    assert where == ["unschedulable", "in-flight", "gated", "active"]
    taken = env.queue.pop_specific(batch[0].pod.uid)
    assert taken is not None
    assert taken.attempts == 2
    assert env.queue.pop_specific(p1.uid) is None
    assert env.queue.where(p1.uid) == "gated"
    assert env.queue.where(other.uid) == "active"
    # A pod of no group comes up alone.
    env.queue.done(taken.pod.uid)
    env.queue.done(qp.pod.uid)
    alone = await pop(env.queue)
    assert alone is not None
    assert alone.pod.name in ("other", "p2")
    while alone.pod.name != "other":
        alone = await pop(env.queue)
        assert alone is not None
    assert env.scheduler.groups.members(alone, env.queue.waiting) == [alone]


async def run_until(env: Env, pods: list[PodInfo], done: Callable[[], bool]) -> None:
    """Queue `pods` and run the scheduling loop until `done`; then close the queue and wait
    for the loop to end (a crash in it fails the test here)."""
    for p in pods:
        env.queue.add(p)
    running = asyncio.create_task(env.scheduler.run())
    try:
        async with asyncio.timeout(10):
            while not done():  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        env.queue.close()
        async with asyncio.timeout(10):
            await running
    finally:
        running.cancel()


async def test_the_loop_takes_each_sibling_from_the_queue_as_its_turn_comes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A group of thousands mostly parked must not be moved into flight all at once: while
    the first member is tried, its siblings still wait where they were."""
    env = Env(node_info("n1", cpu="8"), options=SchedulerConfig(features=V137))
    add_group(env.cache, 3)
    pods = [member(f"p{i}", created=f"2026-01-01T00:00:0{i}Z", cpu="1") for i in range(3)]
    members(env.cache, *pods)
    seen: list[list[str | None]] = []
    schedule = env.scheduler.schedule_pod

    async def watching(qp: QueuedPodInfo) -> BindingJob | None:
        seen.append([env.queue.where(p.uid) for p in pods])
        return await schedule(qp)

    monkeypatch.setattr(env.scheduler, "schedule_pod", watching)
    await run_until(env, pods, lambda: len(seen) >= 3)
    assert seen[:3] == [
        ["in-flight", "active", "active"],
        ["in-flight", "in-flight", "active"],
        ["in-flight", "in-flight", "in-flight"],
    ]


async def test_a_sibling_tried_before_goes_first_and_the_member_that_came_up_is_tried_too() -> None:
    """solo-0 fails alone; solo-1, queued after, comes up with it, and kube's order puts
    solo-0 (tried first before) ahead of the member that came up: both are tried."""
    env = Env(node_info("n1", cpu="2"), options=SchedulerConfig(features=V137))
    add_group(env.cache, None)
    solo0, solo1 = member("solo-0", cpu="3"), member("solo-1", cpu="3")
    members(env.cache, solo0)
    running = asyncio.create_task(env.scheduler.run())
    try:
        env.queue.add(solo0)
        async with asyncio.timeout(10):
            while env.scheduler.stats.unschedulable < 1:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            env.clock.advance(1.0)
            members(env.cache, solo1)
            env.queue.add(solo1)
            while env.scheduler.stats.unschedulable < 3:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        assert [(e.pod.name, e.note) for e in env.failed_events()] == [
            ("solo-0", "0/1 nodes are available: 1 Insufficient cpu."),
            ("solo-0", "0/1 nodes are available: 1 Insufficient cpu."),
            ("solo-1", "0/1 nodes are available: 1 Insufficient cpu."),
        ]
        assert env.queue.where(solo0.uid) == env.queue.where(solo1.uid) == "unschedulable"
    finally:
        env.queue.close()
        running.cancel()


@pytest.mark.parametrize("features", [V136, V137])
async def test_at_137_the_members_after_one_leaving_the_quorum_out_of_reach_are_not_tried(
    features: Features,
) -> None:
    """minCount 3: p0 fits, big0 and big1 fit nowhere. 1.37's loop stops at big0
    (PlacementFeasible: 1 scheduled, 1 remaining) and big1 fails with the group's status;
    1.36's goes on, and big1 fails with its own."""
    env = Env(node_info("n1", cpu="2"), options=SchedulerConfig(features=features))
    add_group(env.cache, 3)
    p0 = member("p0", cpu="1")
    big0 = member("big0", created="2026-01-01T00:00:01Z", cpu="4")
    big1 = member("big1", created="2026-01-01T00:00:02Z", cpu="4")
    members(env.cache, p0, big0, big1)
    await run_until(env, [p0, big0, big1], lambda: env.scheduler.stats.unschedulable >= 3)
    said: dict[str, str] = {}
    for e in env.failed_events():  # what each said first (the group is retried after)
        said.setdefault(e.pod.name, e.note)
    misfit = "0/1 nodes are available: 1 Insufficient cpu."
    assert said["big0"].startswith(misfit)
    line = "pod group is unschedulable"
    if features is V137:
        verdict = "minCount (3) cannot be satisfied: 1 scheduled, 1 remaining"
        line += f", {verdict}, {NO_GROUP_VICTIMS}"
        # big1, never tried, is told the group's status as PlacementFeasible left it (kube-
        # scheduler clones it before the group preemption's verdict is appended).
        assert said["big1"] == verdict
    else:
        assert said["big1"].startswith(misfit)
    assert said["p0"].startswith(line)


async def test_a_crash_deciding_whether_the_cycle_stopped_leaves_the_member_to_its_attempt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = Env(node_info("n1", cpu="2"), options=SchedulerConfig(features=V137))
    add_group(env.cache, 2)
    p0, p1 = member("p0", cpu="1"), member("p1", created="2026-01-01T00:00:01Z", cpu="1")
    members(env.cache, p0, p1)

    def crash(pod: PodInfo, before: object) -> Status | None:
        raise RuntimeError("boom")

    monkeypatch.setattr(env.scheduler.groups, "stopped", crash)
    await run_until(env, [p0, p1], lambda: env.scheduler.stats.attempts >= 2)
    # Both members tried, and the loop ran on until the queue closed (a crash would have
    # ended it, and `await running` raised).
    assert env.scheduler.stats.attempts >= 2
