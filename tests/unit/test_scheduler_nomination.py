"""The nominated node a binding cycle writes before Permit's wait or PreBind's work
(`Scheduler._nominate_for_binding`, kube-scheduler's NominatedNodeNameForExpectation, on from
1.35), and the nomination a failed binding cycle clears (`clearNominatedNode`)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from ascheduler.config import DEFAULT_SCHEDULER_NAME, SchedulerConfig
from ascheduler.features import NOMINATED_NODE_NAME_FOR_EXPECTATION as NOMINATED
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
)
from ascheduler.kube import ApiError
from ascheduler.model import PodInfo
from ascheduler.plugins import IN_TREE
from tests.kit.scheduling import Env, make_node, make_pod


class Recorder:
    """The writer's client: records each request, failing the ones told to."""

    def __init__(self, log: list[str], fail: bool = False) -> None:
        self.log = log
        self.fail = fail
        self.bodies: list[Any] = []

    async def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> None:
        self.log.append(f"{method} {path}")
        self.bodies.append(body)
        if self.fail:
            raise ApiError(500, "InternalError", "boom", method=method, path=path)


class WorkInPreBind(ReservePlugin, PreBindPlugin, BindPlugin):
    """PreBind has work for pods named `v-*` (PreBindPreFlight skips the others); `refuse`
    makes PreBind fail. Records PreBind and Bind in the shared log."""

    name = "WorkInPreBind"

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.refuse = False

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        pass

    def pre_bind_pre_flight(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        return SUCCESS if pod.name.startswith("v-") else SKIP

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        self.log.append(f"PreBind {pod.name}")
        return Status.error("no volume") if self.refuse else SUCCESS

    async def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        self.log.append(f"Bind {pod.name}")
        return SUCCESS


def env_with(features: Features, *, fail: bool = False) -> tuple[Env, WorkInPreBind, Recorder]:
    log: list[str] = []
    made: list[WorkInPreBind] = []

    def factory(args: NoArgs, handle: Any) -> WorkInPreBind:
        made.append(WorkInPreBind(log))
        return made[-1]

    plugins = [p for p in default_plugins(IN_TREE) if p.name != "DefaultBinder"]
    options = SchedulerConfig(
        profiles=(multipoint(DEFAULT_SCHEDULER_NAME, (*plugins, PluginRef(WorkInPreBind.name))),),
        features=features,
    )
    registry = Registry([*IN_TREE.values(), Registration(WorkInPreBind.name, factory, NoArgs)])
    env = Env(make_node("n1", cpu="4"), options=options, registry=registry)
    recorder = Recorder(log, fail)
    env.writer.kube = recorder  # type: ignore[assignment]
    (plugin,) = made
    return env, plugin, recorder


async def schedule(env: Env, pod: PodInfo) -> None:
    job, _ = await env.attempt(pod)
    assert job is not None
    async with asyncio.timeout(10):
        await env.scheduler.binding_cycle(job)


STATUS = "PATCH /api/v1/namespaces/ns/pods/{}/status"


@pytest.mark.parametrize("release", ["1.35", "1.36", "1.37"])
async def test_a_pod_with_pre_bind_work_is_nominated_to_its_node_first(release: str) -> None:
    env, _, recorder = env_with(Features.defaults(Release.parse(release)))
    await schedule(env, make_pod("v-work", cpu="1"))
    await schedule(env, make_pod("plain", cpu="1"))
    assert recorder.log == [
        STATUS.format("v-work"),
        "PreBind v-work",
        "Bind v-work",
        "PreBind plain",
        "Bind plain",
    ]
    assert recorder.bodies[0] == {
        "metadata": {"uid": "uid-v-work"},
        "status": {"nominatedNodeName": "n1"},
    }


async def test_without_the_gate_nothing_is_written_before_binding() -> None:
    features = Features.defaults(Release.parse("1.37"))
    off = replace(features, enabled=features.enabled - {NOMINATED})
    env, _, recorder = env_with(off)
    await schedule(env, make_pod("v-work", cpu="1"))
    assert recorder.log == ["PreBind v-work", "Bind v-work"]


async def test_a_pod_already_nominated_there_is_not_written_again() -> None:
    env, _, recorder = env_with(Features.defaults(Release.parse("1.37")))
    pod = make_pod("v-work", cpu="1")
    await schedule(env, replace(pod, nominated_node_name="n1"))
    assert recorder.log == ["PreBind v-work", "Bind v-work"]


async def test_a_failed_write_does_not_stop_the_binding() -> None:
    env, _, recorder = env_with(Features.defaults(Release.parse("1.37")), fail=True)
    await schedule(env, make_pod("v-work", cpu="1"))
    assert recorder.log == [STATUS.format("v-work"), "PreBind v-work", "Bind v-work"]


async def test_a_failed_binding_cycle_clears_the_nomination_it_wrote() -> None:
    """Cleared with the failure's condition, although the informer never showed the
    nomination back (the pod as queued has none)."""
    env, plugin, recorder = env_with(Features.defaults(Release.parse("1.37")))
    plugin.refuse = True
    await schedule(env, make_pod("v-work", cpu="1"))
    assert recorder.log[:2] == [STATUS.format("v-work"), "PreBind v-work"]
    [condition] = [i for i in env.written() if type(i).__name__ == "_Condition"]
    assert condition.reason == "SchedulerError"
    assert condition.clear_nomination
    assert env.queue.where("uid-v-work") == "backoff"


@pytest.mark.parametrize("gate", [True, False])
async def test_without_the_gate_every_pod_is_registered_in_pre_bind(gate: bool) -> None:
    """No PreBindPreFlight runs then: kube-scheduler's nil status counts as work to do."""
    features = Features.defaults(Release.parse("1.37"))
    enabled = features.enabled if gate else features.enabled - {NOMINATED}
    env, plugin, _ = env_with(replace(features, enabled=enabled))
    in_pre_bind = env.frameworks[DEFAULT_SCHEDULER_NAME].handle.pods_in_pre_bind
    seen: list[bool] = []
    original = plugin.pre_bind

    async def pre_bind(state: CycleState, pod: PodInfo, node: str) -> Status:
        seen.append(in_pre_bind.get(pod.uid) is not None)
        return await original(state, pod, node)

    plugin.pre_bind = pre_bind  # type: ignore[method-assign]
    await schedule(env, make_pod("plain", cpu="1"))
    assert seen == [not gate]
