"""A preemption victim whose binding cycle is in PreBind (`Scheduler._pre_bind`,
`preemption.Evictions`): cancelled in memory from 1.36, deleted through the API at 1.35."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ascheduler.config import DEFAULT_SCHEDULER_NAME, SchedulerConfig
from ascheduler.features import Features, Release
from ascheduler.framework import (
    SKIP,
    SUCCESS,
    BindPlugin,
    CycleState,
    NoArgs,
    PluginRef,
    PreBindPlugin,
    Registration,
    Registry,
    ReservePlugin,
    Status,
    default_plugins,
    multipoint,
    slot_released,
)
from ascheduler.model import PodInfo
from ascheduler.plugins import IN_TREE
from tests.kit.scheduling import Env, make_node, make_pod


class SlowPreBind(ReservePlugin, PreBindPlugin, BindPlugin):
    """PreBind waits (its slot given up, as VolumeBinding waits for the volume controller)
    until told, for pods named `v-*`; it has no work for the others (PreBindPreFlight
    skips them). Reserve, Unreserve and Bind record."""

    name = "SlowPreBind"

    def __init__(self) -> None:
        self.go = asyncio.Event()
        self.in_pre_bind = asyncio.Event()
        self.stopped: list[str] = []
        self.unreserved: list[str] = []
        self.bound: list[str] = []

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        self.unreserved.append(pod.name)

    def pre_bind_pre_flight(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        return SUCCESS if pod.name.startswith("v-") else SKIP

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        if not pod.name.startswith("v-"):
            return SUCCESS
        try:
            async with slot_released(state):
                self.in_pre_bind.set()
                await self.go.wait()
        finally:
            if not self.go.is_set():
                self.stopped.append(pod.name)
        return SUCCESS

    async def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        self.bound.append(pod.name)
        return SUCCESS


def env_at(release: str) -> tuple[Env, SlowPreBind]:
    made: list[SlowPreBind] = []

    def factory(args: NoArgs, handle: Any) -> SlowPreBind:
        made.append(SlowPreBind())
        return made[-1]

    plugins = [p for p in default_plugins(IN_TREE) if p.name != "DefaultBinder"]
    options = SchedulerConfig(
        profiles=(multipoint(DEFAULT_SCHEDULER_NAME, (*plugins, PluginRef(SlowPreBind.name))),),
        features=Features.defaults(Release.parse(release)),
    )
    registry = Registry([*IN_TREE.values(), Registration(SlowPreBind.name, factory, NoArgs)])
    env = Env(make_node("n1", cpu="2"), options=options, registry=registry)
    (plugin,) = made
    return env, plugin


@pytest.mark.parametrize("release", ["1.36", "1.37"])
async def test_a_victim_in_pre_bind_has_its_binding_cancelled(release: str) -> None:
    """From 1.36 kube-scheduler cancels a victim's binding cycle in PreBind: no API call,
    the `Preempted` event says so, and the cycle fails as an error (Unreserve, the assumed
    pod forgotten, the error backoff, `SchedulerError` with the cancellation's cause)."""
    env, plugin = env_at(release)
    in_pre_bind = env.frameworks[DEFAULT_SCHEDULER_NAME].handle.pods_in_pre_bind
    victim = make_pod("v-low", cpu="2", priority=0)
    bind, _ = await env.attempt(victim)
    assert bind is not None
    binding = asyncio.create_task(env.scheduler.binding_cycle(bind))
    async with asyncio.timeout(10):
        await plugin.in_pre_bind.wait()
    assert in_pre_bind.get(victim.uid) is not None
    vip = make_pod("vip", cpu="2", priority=100)
    assert (await env.attempt(vip))[0] is None
    async with asyncio.timeout(10):
        await binding
    assert plugin.stopped == ["v-low"]  # PreBind was stopped where it waited
    assert plugin.unreserved == ["v-low"]
    assert plugin.bound == []
    assert not env.cache.has_pod(victim.uid)
    assert env.queue.where(victim.uid) == "backoff"
    assert in_pre_bind.get(victim.uid) is None
    # The room made, the preemptor leaves the unschedulable pool (1.36: moved by the
    # victim's forgetting; 1.37: activated as well).
    assert env.queue.where(vip.uid) in {"active", "backoff"}
    items = env.written()
    cause = 'running PreBind plugin "SlowPreBind": preempted by DefaultPreemption'
    [condition] = [i for i in items if type(i).__name__ == "_Condition" and i.pod.name == "v-low"]
    assert (condition.reason, condition.message) == ("SchedulerError", cause)
    [failed] = [
        i for i in items if getattr(i, "reason", "") == "FailedScheduling" and i.pod.name == "v-low"
    ]
    assert failed.note == cause
    [preempted] = [i for i in items if getattr(i, "reason", "") == "Preempted"]
    assert (preempted.pod.name, preempted.note) == (
        "v-low",
        "Preempted by pod uid-vip on node n1 (in kube-scheduler memory).",
    )


async def test_at_1_35_a_victim_in_pre_bind_is_deleted_through_the_api() -> None:
    """1.35 has no registry of pods in PreBind: the victim is deleted like any other, and
    its binding cycle goes on (the deletion, through the API, ends it)."""
    env, plugin = env_at("1.35")
    in_pre_bind = env.frameworks[DEFAULT_SCHEDULER_NAME].handle.pods_in_pre_bind
    victim = make_pod("v-low", cpu="2", priority=0)
    bind, _ = await env.attempt(victim)
    assert bind is not None
    binding = asyncio.create_task(env.scheduler.binding_cycle(bind))
    async with asyncio.timeout(10):
        await plugin.in_pre_bind.wait()
    assert len(in_pre_bind) == 0
    assert (await env.attempt(make_pod("vip", cpu="2", priority=100)))[0] is None
    await env.scheduler.evictions.drain(10)
    assert len(env.scheduler.evictions) == 0
    assert not binding.done()
    [preempted] = [i for i in env.written() if getattr(i, "reason", "") == "Preempted"]
    assert preempted.note == "Preempted by pod uid-vip on node n1"
    plugin.go.set()
    async with asyncio.timeout(10):
        await binding
    assert (plugin.stopped, plugin.bound) == ([], ["v-low"])


async def test_only_a_pod_some_pre_bind_plugin_has_work_for_is_registered() -> None:
    """PreBindPreFlight skipped by every plugin: the pod is never in PreBind (a preemption
    would delete it through the API); with work to do, it is, until PreBind is over."""
    env, plugin = env_at("1.37")
    in_pre_bind = env.frameworks[DEFAULT_SCHEDULER_NAME].handle.pods_in_pre_bind
    seen: dict[str, bool] = {}
    original = plugin.pre_bind

    async def pre_bind(state: CycleState, pod: PodInfo, node: str) -> Status:
        seen[pod.name] = in_pre_bind.get(pod.uid) is not None
        return await original(state, pod, node)

    plugin.pre_bind = pre_bind  # type: ignore[method-assign]
    plugin.go.set()
    for name in ("plain", "v-work"):
        job, _ = await env.attempt(make_pod(name, cpu="1"))
        assert job is not None
        await env.scheduler.binding_cycle(job)
    assert seen == {"plain": False, "v-work": True}
    assert plugin.bound == ["plain", "v-work"]
    assert len(in_pre_bind) == 0
