"""The scheduling cycle (`Scheduler.schedule_pod`) and the binding cycle's failure path,
without a network."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any, TypeVar

import numpy as np
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from ascheduler import metrics
from ascheduler.config import DEFAULT_SCHEDULER_NAME, SchedulerConfig
from ascheduler.features import Features, Release
from ascheduler.framework import (
    BindPlugin,
    ClusterEvent,
    Code,
    CycleState,
    NoArgs,
    PermitPlugin,
    Plugin,
    PluginRef,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    Registration,
    Registry,
    ReservePlugin,
    ScorePlugin,
    Status,
    default_plugins,
    multipoint,
    slot_released,
)
from ascheduler.framework.args import decode
from ascheduler.framework.extender import ExtenderConfig
from ascheduler.framework.nodes import CPU, PODS
from ascheduler.model import Node, PodInfo, parse_node, parse_pod
from ascheduler.model.quantity import MAX_QUANTITY
from ascheduler.plugins import IN_TREE
from ascheduler.scheduler import Scheduler
from tests.kit.http import serve
from tests.kit.objects import on, pod
from tests.kit.scheduling import Env, make_node, make_pod, pop

# -- schedule_pod ----------------------------------------------------------------------------


async def test_pod_is_assumed_on_the_feasible_node() -> None:
    env = Env(make_node("small", cpu="1"), make_node("big", cpu="8"))
    pod = make_pod("p", cpu="2")
    bind, _ = await env.attempt(pod)
    assert bind is not None
    fw, qp, node = bind.fw, bind.qp, bind.node
    assert node == "big"
    assert fw is env.frameworks[DEFAULT_SCHEDULER_NAME]
    assert qp.pod.uid == pod.uid
    assert env.cache.is_assumed(pod.uid)
    assert env.cache.pod_node(pod.uid) == "big"
    row = env.cache.table.index["big"]
    assert int(env.cache.table.requested[CPU, row]) == 2000
    assert int(env.cache.table.requested[PODS, row]) == 1
    assert env.queue.where(pod.uid) == "in-flight"  # until its binding cycle ends
    assert env.written() == []
    assert env.scheduler.stats.attempts == 1


async def test_assumed_usage_steers_the_next_pod() -> None:
    env = Env(make_node("a", cpu="3"), make_node("b", cpu="3"))
    first, _ = await env.attempt(make_pod("p1", cpu="2"))
    second, _ = await env.attempt(make_pod("p2", cpu="2"))
    assert first is not None
    assert second is not None
    assert {first.node, second.node} == {"a", "b"}


async def test_unschedulable_pod_is_parked_with_kube_schedulers_message() -> None:
    env = Env(make_node("n1", cpu="1"), make_node("n2", cpu="1"))
    pod = make_pod("p", cpu="2")
    bind, _ = await env.attempt(pod)
    assert bind is None
    assert env.queue.where(pod.uid) == "unschedulable"
    assert not env.cache.has_pod(pod.uid)
    items = env.written()
    events = [i for i in items if getattr(i, "reason", "") == "FailedScheduling"]
    assert len(events) == 1
    event = events[0]
    assert event.note == (
        "0/2 nodes are available: 2 Insufficient cpu. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    assert (event.type, event.action, event.profile) == (
        "Warning",
        "Scheduling",
        DEFAULT_SCHEDULER_NAME,
    )
    conditions = [i for i in items if not hasattr(i, "note")]
    assert [(c.reason, c.message) for c in conditions] == [("Unschedulable", event.note)]
    assert env.scheduler.stats.unschedulable == 1


async def test_each_node_counts_under_its_first_failing_filter() -> None:
    env = Env(
        make_node("tainted", taints=[{"key": "k", "effect": "NoSchedule"}]),
        make_node("cordoned", unschedulable=True, labels={"zone": "b"}),
        make_node("small", cpu="500m", labels={"zone": "b"}),
        make_node("wrong-zone", labels={"zone": "a"}),
    )
    bind, _ = await env.attempt(make_pod("p", nodeSelector={"zone": "b"}, cpu="2"))
    assert bind is None
    [event] = env.failed_events()
    assert event.note == (
        "0/4 nodes are available: 1 Insufficient cpu, "
        "1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint(s), 1 node(s) were unschedulable. "
        "preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
    )


@pytest.mark.parametrize(
    ("small", "tainted", "message"),
    [
        (2, 3, "0/5 nodes are available: 2 Insufficient cpu, 3 node(s) had untolerated taint(s)."),
        (
            10,
            2,
            "0/12 nodes are available: 10 Insufficient cpu, 2 node(s) had untolerated taint(s).",
        ),
        (
            2,
            10,
            "0/12 nodes are available: 10 node(s) had untolerated taint(s), 2 Insufficient cpu.",
        ),
    ],
)
async def test_reasons_sort_as_plain_strings(small: int, tainted: int, message: str) -> None:
    nodes = [make_node(f"small-{i}", cpu="1") for i in range(small)]
    nodes += [
        make_node(f"tainted-{i}", taints=[{"key": "k", "effect": "NoSchedule"}])
        for i in range(tainted)
    ]
    env = Env(*nodes)
    await env.attempt(make_pod("p", cpu="2"))
    [event] = env.failed_events()
    n = small + tainted
    assert event.note == (
        f"{message} "
        f"preemption: 0/{n} nodes are available: {n} Preemption is not helpful for "
        "scheduling."
    )


async def test_first_failing_filter_per_node_wins() -> None:
    env = Env(
        make_node("tainted", cpu="500m", taints=[{"key": "k", "effect": "NoExecute"}]),
        make_node("small", cpu="500m"),
        make_node("cordoned", cpu="500m", unschedulable=True),
    )
    bind, _ = await env.attempt(make_pod("p", cpu="2"))
    assert bind is None
    [event] = env.failed_events()
    assert event.note == (
        "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s), "
        "1 node(s) were unschedulable. "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )


async def test_no_nodes_message() -> None:
    env = Env()
    bind, _ = await env.attempt(make_pod("p"))
    assert bind is None
    [event] = env.failed_events()
    assert event.note == "no nodes available to schedule pods"


async def test_unschedulable_pod_moves_only_for_events_that_may_help() -> None:
    env = Env(make_node("n1", cpu="1"))
    pod = make_pod("p", cpu="2")
    await env.attempt(pod)
    assert env.queue.move_all(ClusterEvent.NODE_TAINT) == 0
    assert env.queue.move_all(ClusterEvent.NODE_LABEL) == 0
    assert env.queue.where(pod.uid) == "unschedulable"
    assert env.queue.move_all(ClusterEvent.NODE_ALLOCATABLE) == 1
    assert env.queue.where(pod.uid) in ("backoff", "active")


async def test_invalid_pod_is_reported_and_not_retried_on_cluster_events() -> None:
    env = Env(make_node("n1"))
    pod = make_pod("p", cpu="lots")
    assert pod.errors
    bind, _ = await env.attempt(pod)
    assert bind is None
    assert not env.cache.has_pod(pod.uid)
    assert env.queue.where(pod.uid) == "unschedulable"
    items = env.written()
    [event] = [i for i in items if getattr(i, "reason", "") == "FailedScheduling"]
    assert event.note == (
        "invalid pod ns/p: spec.containers[0].resources.requests.cpu: not a quantity: 'lots'"
    )
    [condition] = [i for i in items if not hasattr(i, "note")]
    assert condition.reason == "SchedulerError"
    assert "spec.containers[0].resources.requests.cpu" in condition.message

    for event_kind in ClusterEvent:
        if event_kind is not ClusterEvent.FORCE:
            assert env.queue.move_all(event_kind) == 0
    env.router.nodes.on_add(make_node("n2", cpu="64"))
    running = make_pod("other", node="n1")
    env.router.pods.on_add(running)
    env.router.pods.on_delete(running)  # an assigned pod deleted: room freed
    assert env.queue.where(pod.uid) == "unschedulable"


async def test_fixed_invalid_pod_is_retried_on_its_update() -> None:
    env = Env(make_node("n1"))
    bad = make_pod("p", cpu="lots")
    await env.attempt(bad)
    env.router.pods.on_update(bad, make_pod("p", cpu="1"))
    assert env.queue.where(bad.uid) in ("backoff", "active")
    env.clock.advance(1)
    bind, qp = await env.attempt(make_pod("p", cpu="1"))
    assert qp.pod.errors == ()
    assert bind is not None
    assert bind.node == "n1"


async def test_pod_of_another_profile_or_already_placed_is_dropped() -> None:
    env = Env(make_node("n1"))
    assigned = make_pod("assigned", node="n1")
    env.queue.add(assigned)
    qp = await pop(env.queue)
    assert qp is not None
    assert await env.scheduler.schedule_pod(qp) is None
    assert env.queue.where(assigned.uid) is None
    assert not env.cache.has_pod(assigned.uid)
    foreign = make_pod("foreign", scheduler="someone-else")
    env.queue.add(foreign)
    qp = await pop(env.queue)
    assert qp is not None
    assert await env.scheduler.schedule_pod(qp) is None
    assert env.queue.where(foreign.uid) is None
    assert not env.cache.has_pod(foreign.uid)
    assert env.written() == []
    assert env.scheduler.stats.attempts == 0


# -- a failed attempt puts back the pod as it is now -----------------------------------------


def tolerating(pod: PodInfo, version: str) -> PodInfo:
    """`pod` as an update with a new resourceVersion and a new toleration would make it."""
    return parse_pod(
        {
            "metadata": {
                "name": pod.name,
                "namespace": pod.namespace,
                "uid": pod.uid,
                "resourceVersion": version,
            },
            "spec": {
                "schedulerName": pod.scheduler_name,
                "tolerations": [{"key": "dedicated", "operator": "Exists"}],
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
            },
        }
    )


async def test_failed_bind_requeues_the_pod_as_the_informer_has_it_now() -> None:
    store: dict[str, PodInfo] = {}
    env = Env(make_node("n1"), store=store)
    pod = make_pod("p")
    store[pod.uid] = pod
    env.router.pods.on_add(pod)
    bind, _ = await env.attempt(pod)
    assert bind is not None
    # Updated while assumed: the router ignores it (the pod is in its binding cycle).
    newer = tolerating(pod, "42")
    store[pod.uid] = newer
    env.router.pods.on_update(pod, newer)
    await env.scheduler.binding_cycle(bind)
    assert not env.cache.has_pod(pod.uid)
    assert env.queue.where(pod.uid) == "backoff"
    env.clock.advance(10)
    again = await pop(env.queue)
    assert again is not None
    assert again.pod.resource_version == "42"
    assert again.pod.tolerations == newer.tolerations
    (condition,) = [i for i in env.written() if type(i).__name__ == "_Condition"]
    assert condition.pod.resource_version == "42"


@pytest.mark.parametrize("fate", ["deleted", "deleting", "bound elsewhere", "recreated"])
async def test_failed_bind_of_a_pod_gone_meanwhile_is_not_requeued(fate: str) -> None:
    """kube-scheduler 1.36's `handleSchedulingFailure` skips a pod recreated under its name
    (another UID): no requeue, no event, no condition; the pod is read back by UID here, so
    every release behaves so."""
    store: dict[str, PodInfo] = {}
    env = Env(make_node("n1"), make_node("n2"), store=store)
    pod = make_pod("p")
    store[pod.uid] = pod
    env.router.pods.on_add(pod)
    bind, _ = await env.attempt(pod)
    assert bind is not None
    if fate == "deleted":
        del store[pod.uid]
    elif fate == "deleting":
        store[pod.uid] = replace(pod, deleting=True)
    elif fate == "recreated":
        del store[pod.uid]
        store["uid-p-again"] = replace(pod, uid="uid-p-again")
    else:
        store[pod.uid] = replace(pod, node_name="n2")
    await env.scheduler.binding_cycle(bind)
    assert env.queue.where(pod.uid) is None
    assert env.queue.pending() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 0}
    assert env.failed_events() == []


# -- sums that would overflow int64 ----------------------------------------------------------


def two_huge_containers(name: str, *, node: str = "") -> PodInfo:
    return parse_pod(
        {
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
            "spec": {
                "schedulerName": DEFAULT_SCHEDULER_NAME,
                "nodeName": node,
                "containers": [
                    {"name": f"c{i}", "resources": {"requests": {"example.com/foo": "4Ei"}}}
                    for i in range(2)
                ],
            },
        }
    )


async def test_pod_whose_sums_pass_int64_is_assumed_without_overflow() -> None:
    """Fit ignores the resource group, so the pod fits and is assumed: its sum (2 x 4Ei, past
    int64) must saturate in the node's columns instead of raising out of the loop."""
    ignore = {"NodeResourcesFit": {"ignoredResourceGroups": ["example.com"]}}
    node = parse_node(
        {
            "metadata": {"name": "n1"},
            "status": {
                "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110", "example.com/foo": "1"}
            },
        }
    )
    env = Env(
        node, options=SchedulerConfig(profiles=(multipoint(DEFAULT_SCHEDULER_NAME, args=ignore),))
    )
    bind, _ = await env.attempt(two_huge_containers("huge"))
    assert bind is not None
    assert env.cache.is_assumed("uid-huge")
    second, _ = await env.attempt(two_huge_containers("huge2"))
    assert second is not None
    table = env.cache.table
    foo = table.resource_row("example.com/foo")
    assert foo is not None
    assert int(table.requested[foo, 0]) == MAX_QUANTITY
    assert int(table.requested[PODS, 0]) == 2


# -- one bad pod fails alone -----------------------------------------------------------------


class Exploding(ScorePlugin, ReservePlugin, PermitPlugin):
    """A plugin that raises at the extension point named in its args."""

    name = "Exploding"

    def __init__(self, at: str) -> None:
        self.at = at
        self.unreserved: list[str] = []

    def _maybe(self, point: str, pod: PodInfo) -> None:
        if point == self.at and pod.name.startswith("bad"):
            raise RuntimeError(f"boom at {point}")

    def score(self, state: Any, pod: PodInfo, nodes: Any, feasible: Any) -> Any:
        self._maybe("score", pod)
        return np.zeros(feasible.size, dtype=np.int64)

    def reserve(self, state: Any, pod: PodInfo, node: str) -> Status:
        self._maybe("reserve", pod)
        return Status()

    def unreserve(self, state: Any, pod: PodInfo, node: str) -> None:
        self.unreserved.append(pod.name)
        self._maybe("unreserve", pod)

    def permit(self, state: Any, pod: PodInfo, node: str) -> tuple[Status, float]:
        self._maybe("permit", pod)
        return Status(), 0.0


def exploding_env(at: str, *nodes: Node) -> tuple[Env, Exploding]:
    made: list[Exploding] = []

    def factory(args: NoArgs, handle: Any) -> Exploding:
        made.append(Exploding(at))
        return made[-1]

    defaults = default_plugins(IN_TREE)
    options = SchedulerConfig(
        profiles=(multipoint(DEFAULT_SCHEDULER_NAME, (*defaults, PluginRef("Exploding"))),)
    )
    registry = Registry([*IN_TREE.values(), Registration("Exploding", factory, NoArgs)])
    env = Env(*nodes, options=options, registry=registry)
    return env, made[0]


@pytest.mark.parametrize("at", ["score", "reserve", "permit"])
async def test_a_plugin_that_raises_fails_its_pod_alone(at: str) -> None:
    env, plugin = exploding_env(at, make_node("n1"), make_node("n2"))
    bad = make_pod("bad")
    bind, _ = await env.attempt(bad)
    assert bind is None
    assert not env.cache.has_pod(bad.uid)  # assumed, then undone
    assert env.queue.where(bad.uid) == "backoff"
    (event,) = env.failed_events()
    assert "boom" in event.note
    assert env.scheduler.stats.errors == 1
    if at == "permit":
        assert plugin.unreserved == ["bad"]  # Reserve ran, so Unreserve did too
    good, _ = await env.attempt(make_pod("good"))
    assert good is not None
    assert env.cache.is_assumed("uid-good")


async def test_an_unreserve_that_raises_does_not_stop_the_failure_path() -> None:
    env, plugin = exploding_env("unreserve", make_node("n1"))
    bad = make_pod("bad")
    bind, _ = await env.attempt(bad)
    assert bind is not None
    await env.scheduler.binding_cycle(bind)  # no API client: the bind fails
    assert plugin.unreserved == ["bad"]
    assert not env.cache.has_pod(bad.uid)
    assert env.queue.where(bad.uid) == "backoff"


class Nominating(PostFilterPlugin):
    name = "Nominating"

    def post_filter(self, state: Any, pod: PodInfo, nodes: Any, diagnosis: Any) -> PostFilterResult:
        return PostFilterResult(Status(reasons=("preempting on n1",)), nominated_node="n1")


async def test_a_post_filter_nomination_is_written_with_the_condition() -> None:
    profile = multipoint(
        DEFAULT_SCHEDULER_NAME, (*default_plugins(IN_TREE), PluginRef("Nominating"))
    )
    registry = Registry(
        [*IN_TREE.values(), Registration("Nominating", lambda a, h: Nominating(), NoArgs)]
    )
    env = Env(
        make_node("n1", cpu="1"), options=SchedulerConfig(profiles=(profile,)), registry=registry
    )
    bind, _ = await env.attempt(make_pod("big", cpu="2"))
    assert bind is None
    (condition,) = [i for i in env.written() if type(i).__name__ == "_Condition"]
    assert condition.nominated_node == "n1"
    assert condition.message == ("0/1 nodes are available: 1 Insufficient cpu. preempting on n1")


async def test_an_extender_that_is_down_fails_the_attempt_with_its_reason() -> None:
    down = decode(
        ExtenderConfig,
        {
            "urlPrefix": "http://127.0.0.1:9/ext",
            "filterVerb": "filter",
            "managedResources": [{"name": "example.com/gpu"}],
        },
        "extenders[0]",
    )
    env = Env(make_node("n1"), options=SchedulerConfig(extenders=(down,)))
    wants = parse_pod(
        {
            "metadata": {"name": "wants", "namespace": "ns", "uid": "uid-wants"},
            "spec": {
                "schedulerName": DEFAULT_SCHEDULER_NAME,
                "containers": [{"name": "c", "resources": {"limits": {"example.com/gpu": "1"}}}],
            },
        },
        keep_raw=True,
    )
    bind, _ = await env.attempt(wants)
    assert bind is None
    (event,) = env.failed_events()
    assert event.note.startswith("extender: failed filter with extender at URL http://127.0.0.1:9")
    assert env.queue.where("uid-wants") == "backoff"
    other, _ = await env.attempt(make_pod("other"))  # not the extender's: scheduled as usual
    assert other is not None
    extenders = env.frameworks[DEFAULT_SCHEDULER_NAME].extenders
    assert extenders is not None
    await extenders.close()


@pytest.mark.parametrize("meanwhile", ["nothing", "deleted", "bound elsewhere"])
async def test_a_pod_gone_while_the_extender_answers_is_dropped(meanwhile: str) -> None:
    """The cycle awaits the extender; a pod deleted, or bound by another scheduler, in that
    time is neither assumed nor failed: the informer's event has already settled it."""
    raw = pod("p", namespace="ns", cpu="1", scheduler_name=DEFAULT_SCHEDULER_NAME)
    p = parse_pod(raw, keep_raw=True)
    env: Env

    async def answer(request: web.Request) -> web.Response:
        body = await request.json()
        if meanwhile == "deleted":
            env.router.pods.on_delete(p)
        elif meanwhile == "bound elsewhere":
            env.router.pods.on_update(p, parse_pod(on("n2", raw)))
        return web.json_response({"NodeNames": body["NodeNames"]})

    async with serve("/ext/{verb}", answer) as base:
        ext = decode(
            ExtenderConfig,
            {"urlPrefix": f"{base}/ext", "filterVerb": "filter", "nodeCacheCapable": True},
            "extenders[0]",
        )
        env = Env(make_node("n1"), make_node("n2"), options=SchedulerConfig(extenders=(ext,)))
        bind, _ = await env.attempt(p)
        extenders = env.frameworks[DEFAULT_SCHEDULER_NAME].extenders
        assert extenders is not None
        await extenders.close()
    assert env.failed_events() == []
    if meanwhile == "nothing":
        assert bind is not None
        assert env.cache.is_assumed(p.uid)
        return
    assert bind is None
    assert not env.cache.is_assumed(p.uid)
    assert p.uid not in env.queue
    if meanwhile == "bound elsewhere":
        assert list(env.cache.table.pods(env.cache.table.index["n2"])) == [p.uid]


PluginT = TypeVar("PluginT", bound=Plugin)


def one_slot(cls: type[PluginT]) -> tuple[Env, PluginT, Scheduler]:
    """The default profile with `cls` binding instead of DefaultBinder, and one binding slot."""
    made: list[PluginT] = []

    def factory(args: NoArgs, handle: Any) -> PluginT:
        made.append(cls())
        return made[-1]

    plugins = [p for p in default_plugins(IN_TREE) if p.name != "DefaultBinder"]
    options = SchedulerConfig(
        profiles=(multipoint(DEFAULT_SCHEDULER_NAME, (*plugins, PluginRef(cls.name))),)
    )
    registry = Registry([*IN_TREE.values(), Registration(cls.name, factory, NoArgs)])
    env = Env(make_node("n1"), options=options, registry=registry)
    (plugin,) = made
    scheduler = Scheduler(
        frameworks=env.frameworks,
        cache=env.cache,
        queue=env.queue,
        writer=env.writer,
        binding_concurrency=1,
    )
    return env, plugin, scheduler


class WaitsOnPermit(PermitPlugin, BindPlugin):
    """Pods named `w-*` wait on Permit until allowed; Bind records (no API client)."""

    name = "WaitsOnPermit"

    def __init__(self) -> None:
        self.bound: list[str] = []
        self.waiting = 0
        self.fast_bound = asyncio.Event()

    def permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, float]:
        if pod.name.startswith("w-"):
            self.waiting += 1
            return Status(Code.WAIT), 60.0
        return Status(), 0.0

    async def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        self.bound.append(pod.name)
        if pod.name == "fast":
            self.fast_bound.set()
        return Status()


async def test_pods_waiting_on_permit_hold_no_binding_slot() -> None:
    """With one binding slot, two pods waiting on Permit (a gang's members) do not stop the
    next pod from being scheduled and bound; allowed, they bind after it."""
    env, plugin, scheduler = one_slot(WaitsOnPermit)
    waiting = env.frameworks[DEFAULT_SCHEDULER_NAME].handle.waiting_pods
    env.queue.add(make_pod("w-0"))
    env.queue.add(make_pod("w-1"))
    env.queue.add(make_pod("fast"))
    running = asyncio.create_task(scheduler.run())
    try:
        async with asyncio.timeout(10):
            await plugin.fast_bound.wait()
        assert plugin.bound == ["fast"]
        assert plugin.waiting == 2
        for w in waiting:
            w.allow("WaitsOnPermit")
        env.queue.close()
        async with asyncio.timeout(10):
            await running
    finally:
        running.cancel()
    assert sorted(plugin.bound) == ["fast", "w-0", "w-1"]
    assert scheduler._bind_slots._value == 1


@pytest.mark.parametrize(
    ("release", "reason", "message", "note"),
    [
        ("1.35", "Unschedulable", "preempted", "Preempted by pod uid-vip on node n1"),
        (
            "1.37",
            "SchedulerError",
            "waiting on permit for pod: preempted",
            "Preempted by pod uid-vip on node n1 (in kube-scheduler memory).",
        ),
    ],
)
async def test_a_victim_waiting_on_permit_is_preempted_as_its_release_does(
    release: str, reason: str, message: str, note: str
) -> None:
    """A pod holding its node while it waits on Permit is a victim like any other. 1.35
    rejects its wait (the pod is unschedulable, parked); from 1.36 kube-scheduler preempts
    it in memory: its binding cycle fails with an error (the error backoff), and the
    `Preempted` event says no API call was made."""
    made: list[WaitsOnPermit] = []

    def factory(args: NoArgs, handle: Any) -> WaitsOnPermit:
        made.append(WaitsOnPermit())
        return made[-1]

    plugins = [p for p in default_plugins(IN_TREE) if p.name != "DefaultBinder"]
    options = SchedulerConfig(
        profiles=(multipoint(DEFAULT_SCHEDULER_NAME, (*plugins, PluginRef(WaitsOnPermit.name))),),
        features=Features.defaults(Release.parse(release)),
    )
    registry = Registry([*IN_TREE.values(), Registration(WaitsOnPermit.name, factory, NoArgs)])
    env = Env(make_node("n1", cpu="2"), options=options, registry=registry)
    victim = make_pod("w-low", cpu="2", priority=0)
    bind, _ = await env.attempt(victim)
    assert bind is not None
    binding = asyncio.create_task(env.scheduler.binding_cycle(bind))
    vip = make_pod("vip", cpu="2", priority=100)
    assert (await env.attempt(vip))[0] is None
    async with asyncio.timeout(10):
        await binding
    assert not env.cache.has_pod(victim.uid)
    assert env.queue.where(victim.uid) is not None  # put back, to be tried again
    items = env.written()
    [condition] = [i for i in items if type(i).__name__ == "_Condition" and i.pod.name == "w-low"]
    assert (condition.reason, condition.message) == (reason, message)
    [preempted] = [i for i in items if getattr(i, "reason", "") == "Preempted"]
    assert (preempted.pod.name, preempted.note) == ("w-low", note)


class WaitsOutside(PreBindPlugin, BindPlugin):
    """PreBind waits, with its slot given up, until told; Bind records (no API client)."""

    name = "WaitsOutside"

    def __init__(self) -> None:
        self.go = asyncio.Event()
        self.waiting = asyncio.Event()
        self.bound: list[str] = []
        self.binds = {name: asyncio.Event() for name in ("slow", "fast")}

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        if pod.name == "slow":
            async with slot_released(state):
                self.waiting.set()
                await self.go.wait()
        return Status()

    async def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        self.bound.append(pod.name)
        self.binds[pod.name].set()
        return Status()


async def test_a_pre_bind_waiting_outside_the_scheduler_does_not_hold_up_others() -> None:
    """With one binding slot, a binding cycle waiting (as VolumeBinding waits for the volume
    controller) gives the slot up: the next pod is scheduled and bound meanwhile."""
    env, plugin, scheduler = one_slot(WaitsOutside)
    env.queue.add(make_pod("slow"))
    running = asyncio.create_task(scheduler.run())
    try:
        async with asyncio.timeout(10):
            await plugin.waiting.wait()
            env.queue.add(make_pod("fast"))
            await plugin.binds["fast"].wait()
        assert plugin.bound == ["fast"]
        # Back from its wait, the slow one gets a slot again (the idle loop holds none).
        plugin.go.set()
        async with asyncio.timeout(10):
            await plugin.binds["slow"].wait()
        env.queue.close()
        async with asyncio.timeout(10):
            await running
    finally:
        running.cancel()
    # Every slot given back: the next cycle would find it free.
    assert scheduler._bind_slots._value == 1


def _recording_binder_env(*nodes: Node) -> Env:
    """The default profile with `WaitsOnPermit` binding (records; no API client)."""
    plugins = [p for p in default_plugins(IN_TREE) if p.name != "DefaultBinder"]
    options = SchedulerConfig(
        profiles=(multipoint(DEFAULT_SCHEDULER_NAME, (*plugins, PluginRef(WaitsOnPermit.name))),),
    )
    registry = Registry(
        [*IN_TREE.values(), Registration(WaitsOnPermit.name, lambda a, h: WaitsOnPermit(), NoArgs)]
    )
    return Env(*nodes, options=options, registry=registry)


async def test_a_pod_bound_after_the_flush_moved_it_is_counted() -> None:
    """kube-scheduler 1.36's `pod_scheduled_after_flush_total`: bound after the periodic
    flush (not an event) moved it out of the unschedulable pool; an attempt that puts it
    back clears the mark."""
    counted = CollectorRegistry()
    counted.register(metrics.POD_SCHEDULED_AFTER_FLUSH)
    name = "scheduler_pod_scheduled_after_flush_total"
    before = counted.get_sample_value(name) or 0.0
    env = _recording_binder_env(make_node("n1", cpu="1"))
    flushed, woken = make_pod("flushed", cpu="2"), make_pod("woken", cpu="2")
    for waiting in (flushed, woken):
        assert (await env.attempt(waiting))[0] is None
    # Room appears without an event the queue sees (as a missed event would).
    env.cache.update_node(make_node("n1", cpu="8"))
    env.clock.advance(env.queue.settings.unschedulable_timeout + 1)
    env.queue.flush_unschedulable_leftover()
    assert env.queue.where(flushed.uid) == "active"
    bind, qp = await env.attempt(flushed)
    assert bind is not None
    assert qp.flushed
    await env.scheduler.binding_cycle(bind)
    assert counted.get_sample_value(name) == before + 1
    # Woken by an event after its flush and a failed attempt: not counted.
    qp = await pop(env.queue)
    assert qp is not None
    assert qp.pod.uid == woken.uid
    assert qp.flushed
    env.queue.requeue(qp, rejected_by=frozenset({"NodeResourcesFit"}))
    env.router.nodes.on_add(make_node("n2", cpu="8"))
    env.clock.advance(20)
    bind, qp = await env.attempt(woken)
    assert bind is not None
    assert not qp.flushed
    await env.scheduler.binding_cycle(bind)
    assert counted.get_sample_value(name) == before + 1
