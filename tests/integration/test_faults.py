"""Faults a production scheduler meets, injected on the real plane: failing writes and cut
watches (through the fault proxy), a relist after 410 Gone, the API server killed mid-burst,
an instance killed -9 while it holds node locks, and a leader whose renewals are starved.

Each test asserts what a user cares about (pods bound exactly once, no node over capacity, no
lock left behind, never two leaders at once) and records its figures in `FIGURES`, which the
last test prints (`pytest tests/integration/test_faults.py -s`); docs/reliability.md
quotes them.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from ascheduler.app import DRA_KINDS, OBJECT_KINDS, STORAGE_KINDS
from ascheduler.devcluster import ControlPlane
from ascheduler.devcluster.faultproxy import Delay, FaultProxy, WriteFaults
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState, free_port
from ascheduler.devcluster.processes import ProcessRecord, exit_code, is_alive
from ascheduler.kube import KubeClient, KubeError
from ascheduler.model.quantity import parse_resource
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    NO_NEW_CLAIMS,
    create_pods,
    eventually,
    lock_annotations,
    node_of,
    pause_pod,
    pods_in,
    scheduler,
    wait_bound,
    wait_unschedulable,
)

GPU = "nvidia.com/gpu"
#: Figures each test measured, printed at the end of the module's run.
FIGURES: dict[str, dict[str, Any]] = {}


@pytest.fixture(scope="module", autouse=True)
def report_figures() -> Iterator[None]:
    """After the module: print what its tests measured (seen with `-s`)."""
    yield
    if FIGURES:
        print("\n" + json.dumps({"fault_injection": FIGURES}, indent=2, sort_keys=True))


@pytest.fixture
def proxy(plane: ControlPlane) -> Iterator[FaultProxy]:
    with plane.fault_proxy(seed=7) as running:
        yield running


def log_events(record: ProcessRecord) -> list[dict[str, Any]]:
    """The process's structured log lines (JSON, as it writes when not on a terminal)."""
    events = []
    for line in Path(record.log).read_text().splitlines():
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return events


def named(record: ProcessRecord, event: str) -> list[dict[str, Any]]:
    return [e for e in log_events(record) if e.get("event") == event]


async def readyz(port: int) -> int:
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{port}/readyz") as resp,
        ):
            return resp.status
    except aiohttp.ClientError:
        return 0


def requested_per_node(pods: dict[str, dict[str, Any]], resource: str) -> Counter[str]:
    """Sum of `resource` requested by the bound pods, per node (cpu in millicores)."""
    used: Counter[str] = Counter()
    for pod in pods.values():
        node = node_of(pod)
        for c in pod["spec"]["containers"]:
            value = (c.get("resources", {}).get("requests") or {}).get(resource)
            if node and value is not None:
                used[node] += parse_resource(resource, value)
    return used


async def test_a_burst_through_failing_writes_and_cut_watches_binds_each_pod_once(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    proxy: FaultProxy,
    tmp_path: Path,
) -> None:
    """300 pods onto 30 nodes that hold exactly 10 each (cpu 1, pods of 100m), with 20% of
    the scheduler's writes failing (429, 500, dropped before or after reaching the API
    server) and its watches cut every 3 s. A pod bound twice, or a bind whose lost answer
    made the scheduler hand its room to another pod, would show as a node over capacity or a
    pod left pending."""
    names = await nodes(FakeNodes(count=30, prefix=f"{namespace}-n", cpu="1"))
    profile = f"{namespace}-s"
    pods = [f"p{i}" for i in range(300)]
    kubeconfig = str(proxy.kubeconfig(tmp_path / "proxy.kubeconfig"))
    proxy.cut_watches_every(3.0)
    faults = WriteFaults(share=0.2, kinds=("429", "500", "drop", "lost"))
    with (
        proxy.faults(faults),
        scheduler(plane, plane_state, "ascheduler-burst", profile, kubeconfig=kubeconfig) as me,
    ):
        await create_pods(
            kube,
            namespace,
            [pause_pod(p, scheduler_name=profile, cpu="100m", memory="64Mi") for p in pods],
        )
        placed = await wait_bound(kube, namespace, pods, timeout=420)
        assert is_alive(me)
    proxy.cut_watches_every(None)
    on_api = await pods_in(kube, namespace)
    assert Counter(placed.values()) == {n: 10 for n in names}
    assert requested_per_node(on_api, "cpu") == {n: 1000 for n in names}
    bindings = {p: proxy.stats.bindings[f"{namespace}/{p}"] for p in pods}
    assert set(bindings.values()) == {1}, {p: n for p, n in bindings.items() if n != 1}
    injected = dict(proxy.stats.injected)
    assert injected.get("lost", 0) > 0  # the hard case did happen
    FIGURES["burst"] = {
        "pods": len(pods),
        "bound": len(placed),
        "pods_lost": len(pods) - len(placed),
        "double_binds": sum(n - 1 for n in bindings.values()),
        "overcommitted_nodes": sum(1 for n in names if Counter(placed.values())[n] > 10),
        "writes_failed_by_kind": injected,
        "watches_cut": proxy.stats.watches_cut,
    }


async def test_a_bind_whose_answer_is_lost_keeps_its_room(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    proxy: FaultProxy,
    tmp_path: Path,
) -> None:
    """Every Binding lands and its answer is lost, and the scheduler's watch lags 3 s. A
    scheduler that took a lost answer for a failed bind would forget the pod and hand its room
    to the next pod before its watch shows the first one bound: three pods on a node with room
    for two. The bind is settled by reading the pod back instead."""
    (node,) = await nodes(FakeNodes(count=1, prefix=f"{namespace}-n", cpu="200m"))
    profile = f"{namespace}-s"
    kubeconfig = str(proxy.kubeconfig(tmp_path / "proxy.kubeconfig"))
    proxy.watch_delay = 3.0
    with (
        proxy.faults(
            WriteFaults(share=1.0, kinds=("lost",), path=r"/binding$", once_per_path=True)
        ),
        scheduler(plane, plane_state, "ascheduler-lost", profile, kubeconfig=kubeconfig) as me,
    ):
        await eventually(partial(_synced, me), what="the scheduler's informers synced")
        for i in range(3):
            await create_pods(kube, namespace, [pause_pod(f"p{i}", scheduler_name=profile)])
        message = await wait_unschedulable(kube, namespace, "p2", timeout=90)
    on_api = await pods_in(kube, namespace)
    assert {name: node_of(pod) for name, pod in on_api.items() if node_of(pod)} == {
        "p0": node,
        "p1": node,
    }
    assert message == (
        "0/1 nodes are available: 1 Insufficient cpu. "
        f"{NO_NEW_CLAIMS}"
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )
    assert [proxy.stats.bindings[f"{namespace}/p{i}"] for i in range(3)] == [1, 1, 0]
    assert proxy.stats.injected["lost"] == 2  # p0's and p1's first attempts
    failed = {e["pod"] for e in named(me, "pod_scheduling_error")}
    assert failed == set()  # a lost answer is not a failed bind
    FIGURES["lost_answers"] = {
        "binding_answers_lost": proxy.stats.injected["lost"],
        "pods_on_a_node_with_room_for_2": len([p for p in on_api.values() if node_of(p)]),
    }


async def test_a_relist_after_410_reconciles_what_changed_while_away(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    proxy: FaultProxy,
    tmp_path: Path,
) -> None:
    """While the scheduler cannot watch, a pod is deleted and a node labelled; its watches
    then meet 410 Gone. Only a relist that reconciles (a delete for the pod that vanished, an
    update for the node) lets the two pods below find their nodes: no later event would."""
    x, y = await nodes(FakeNodes(count=2, prefix=f"{namespace}-n", cpu="1"))
    await create_pods(
        kube,
        namespace,
        [
            pause_pod("filler-x", scheduler_name="nobody", cpu="1", nodeName=x),
            pause_pod("filler-y", scheduler_name="nobody", cpu="500m", nodeName=y),
        ],
    )
    profile = f"{namespace}-s"
    kubeconfig = str(proxy.kubeconfig(tmp_path / "proxy.kubeconfig"))
    with scheduler(plane, plane_state, "ascheduler-relist", profile, kubeconfig=kubeconfig) as me:

        async def synced() -> bool:
            return bool(named(me, "informers_synced"))

        await eventually(synced, what="the scheduler's informers synced")

        async def all_watching() -> bool:
            # Every informer the scheduler runs (the kinds below, and those its release and
            # gates add: Workloads at 1.35, scheduling.k8s.io PodGroups from 1.36,
            # DeviceTaintRules from 1.37), each with its watch open.
            (event,) = named(me, "informers_synced")
            assert event["informers"] >= 4 + len(OBJECT_KINDS) + len(STORAGE_KINDS) + len(DRA_KINDS)
            return proxy.open_watches == event["informers"]

        await eventually(all_watching, what="every informer's watch open at the proxy")
        proxy.refuse_watches = True
        proxy.cut_watches()
        # Away: the room on x is freed, y gets the label the second pod needs.
        await kube.request(
            "DELETE",
            f"/api/v1/namespaces/{namespace}/pods/filler-x",
            params={"gracePeriodSeconds": 0},
        )
        await kube.patch(f"/api/v1/nodes/{y}", {"metadata": {"labels": {"team": "blue"}}})
        proxy.gone_once("/api/v1/pods", "/api/v1/nodes")
        proxy.refuse_watches = False

        async def relisted() -> set[str]:
            return {e.get("informer", "") for e in named(me, "watch_expired_relisting")}

        await eventually(
            lambda: _has(relisted, {"pods", "nodes"}), what="both informers relisted after 410"
        )
        await create_pods(
            kube,
            namespace,
            [
                pause_pod("big", scheduler_name=profile, cpu="1"),
                pause_pod(
                    "blue", scheduler_name=profile, cpu="100m", nodeSelector={"team": "blue"}
                ),
            ],
        )
        placed = await wait_bound(kube, namespace, ["big", "blue"])
    assert placed == {"big": x, "blue": y}
    assert proxy.stats.watches_gone == 2
    FIGURES["relist_after_410"] = {"watches_answered_410": proxy.stats.watches_gone}


async def _has(probe: Callable[[], Awaitable[set[str]]], wanted: set[str]) -> bool:
    return wanted <= await probe()


async def test_the_scheduler_rides_out_an_apiserver_crash(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
) -> None:
    """kube-apiserver is killed -9 mid-burst and started again: the scheduler stays up, says
    it is not ready while the API server is gone, and finishes the burst exactly to
    capacity."""
    names = await nodes(FakeNodes(count=20, prefix=f"{namespace}-n", cpu="1"))
    profile = f"{namespace}-s"
    port = free_port()
    pods = [f"p{i}" for i in range(200)]
    specs = [pause_pod(p, scheduler_name=profile, cpu="100m", memory="64Mi") for p in pods]
    with scheduler(
        plane, plane_state, "ascheduler-crash", profile, http_address=f"127.0.0.1:{port}"
    ) as me:
        await eventually(lambda: _status_is(port, 200), what="/readyz ok")
        await create_pods(kube, namespace, specs[:120])
        argv = await asyncio.to_thread(plane.stop_apiserver, kill=True)
        await eventually(lambda: _status_is(port, 503), what="/readyz 503 while it is down")
        assert is_alive(me)
        await asyncio.to_thread(plane.start_apiserver, argv)
        await eventually(lambda: _status_is(port, 200), what="/readyz ok again", timeout=120)
        await create_pods(kube, namespace, specs[120:])
        placed = await wait_bound(kube, namespace, pods, timeout=300)
        survived = is_alive(me)
    assert survived
    on_api = await pods_in(kube, namespace)
    assert Counter(placed.values()) == {n: 10 for n in names}
    assert requested_per_node(on_api, "cpu") == {n: 1000 for n in names}
    FIGURES["apiserver_crash"] = {
        "pods": len(pods),
        "pods_lost": len(pods) - len(placed),
        "overcommitted_nodes": sum(1 for v in Counter(placed.values()).values() if v > 10),
        "scheduler_survived": survived,
    }


async def _status_is(port: int, status: int) -> bool:
    return await readyz(port) == status


async def test_two_instances_share_gpus_while_one_is_killed_and_restarted(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
) -> None:
    """Two instances of one profile race for 6 nodes of exactly 4 GPUs; one is killed -9 twice
    (mid-wave, as it takes node locks) and started again. No node gets a fifth GPU pod, every
    pod that fits is bound, and once the lock timeout passes no lock is left."""
    names = await nodes(FakeNodes(count=6, prefix=f"{namespace}-g", extended={GPU: "4"}))
    profile = f"{namespace}-s"
    env = {"ASCHEDULER_NODELOCK_EXPIRE": "4s"}
    pods = [pause_pod(f"g{i}", scheduler_name=profile, extra={GPU: "1"}) for i in range(30)]
    steady = plane.start_ascheduler(
        "ascheduler-steady",
        "--scheduler-name",
        profile,
        "--log-level",
        "debug",
        env={**os.environ, **env},
    )
    victims: list[ProcessRecord] = []
    kills = 0
    try:
        for wave in range(3):
            victim = plane.start_ascheduler(
                f"ascheduler-victim-{wave}",
                "--scheduler-name",
                profile,
                "--log-level",
                "debug",
                env={**os.environ, **env},
            )
            victims.append(victim)
            await eventually(partial(_synced, victim), what=f"victim {wave} synced")
            await create_pods(kube, namespace, pods[wave * 10 : wave * 10 + 10])
            if wave < 2:
                await asyncio.sleep(0.3)  # let it take part, then kill it mid-work
                os.kill(victim.pid, signal.SIGKILL)
                await eventually(partial(_dead, victim), what="victim dead")
                kills += 1

        async def fitted() -> dict[str, str]:
            on_api = await pods_in(kube, namespace)
            placed = {n: node_of(p) for n, p in on_api.items() if node_of(p)}
            return placed if len(placed) == 24 else {}

        placed = await eventually(fitted, what="24 of 30 GPU pods bound", timeout=180)
        assert is_alive(steady)
        assert is_alive(victims[-1])
        on_api = await pods_in(kube, namespace)
        gpus = requested_per_node(on_api, GPU)
        assert gpus == {n: 4 for n in names}
        assert Counter(placed.values()) == {n: 4 for n in names}

        async def unlocked() -> bool:
            return await lock_annotations(kube, names) == {}

        await eventually(unlocked, what="no node lock left once the timeout passes", timeout=60)
        locks_left = len(await lock_annotations(kube, names))
        # Nothing more fits: the six left stay pending, with the reason.
        pending = [p for p in on_api.values() if not node_of(p)]
        assert len(pending) == 6
    finally:
        for record in (steady, *victims):
            plane.stop_process(record)
    FIGURES["kill_9"] = {
        "kills": kills,
        "pods_bound": len(placed),
        "overcommitted_nodes": sum(1 for n in names if gpus[n] > 4),
        "locks_left": locks_left,
    }


async def _synced(record: ProcessRecord) -> bool:
    return bool(named(record, "informers_synced"))


async def _dead(record: ProcessRecord) -> bool:
    return not is_alive(record)


async def test_a_leader_with_starved_renewals_stops_before_a_standby_starts(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    proxy: FaultProxy,
    tmp_path: Path,
) -> None:
    """The leader reaches the API server through the proxy; once it leads, its Lease writes
    are delayed past any deadline. It must stop scheduling (and exit) before the standby,
    which sees no renewal for a lease duration, takes over: two leaders never overlap."""
    await nodes(FakeNodes(count=2, prefix=f"{namespace}-n"))
    profile = f"{namespace}-le"
    kubeconfig = str(proxy.kubeconfig(tmp_path / "proxy.kubeconfig"))

    def replica(name: str, via: str | None) -> ProcessRecord:
        return plane.start_ascheduler(
            f"ascheduler-{name}",
            "--scheduler-name",
            profile,
            "--log-level",
            "debug",
            "--leader-elect",
            "--leader-elect-resource-namespace",
            namespace,
            "--leader-elect-lease-duration",
            "6",
            kubeconfig=via,
            env={**os.environ, "POD_NAME": name},
        )

    leader = replica("starved", kubeconfig)
    standby: ProcessRecord | None = None
    try:
        await eventually(lambda: _holder_is(kube, namespace, "starved"), what="starved leads")
        standby = replica("standby", None)
        await create_pods(kube, namespace, [pause_pod("before", scheduler_name=profile)])
        await wait_bound(kube, namespace, ["before"])
        proxy.delays = [Delay(3600.0, frozenset({"PUT"}), r"/leases/")]
        await eventually(
            lambda: _holder_is(kube, namespace, "standby"), what="standby leads", timeout=90
        )
        await create_pods(kube, namespace, [pause_pod("after", scheduler_name=profile)])
        await wait_bound(kube, namespace, ["after"])
        await eventually(lambda: _dead(leader), what="the starved leader exits")
        assert exit_code(leader) == 1
    finally:
        proxy.delays = []
        for record in (leader, standby):
            if record is not None:
                plane.stop_process(record)
    assert standby is not None
    (lost,) = named(leader, "leader_lost")
    (elected,) = named(standby, "leader_elected")
    assert lost["timestamp"] < elected["timestamp"]
    assert all(e["timestamp"] < lost["timestamp"] for e in named(leader, "pod_bound"))
    assert all(e["timestamp"] > elected["timestamp"] for e in named(standby, "pod_bound"))
    assert {e["pod"].split("/")[1] for e in named(standby, "pod_bound")} == {"after"}
    FIGURES["leader_election"] = {
        "leader_stopped_before_standby_started": lost["timestamp"] < elected["timestamp"],
        "binds_by_the_old_leader_after_it_stopped": sum(
            1 for e in named(leader, "pod_bound") if e["timestamp"] >= lost["timestamp"]
        ),
    }


async def _holder_is(kube: KubeClient, namespace: str, name: str) -> bool:
    try:
        lease = await kube.get(
            f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/ascheduler"
        )
    except KubeError:
        return False
    return bool(lease["spec"].get("holderIdentity") == name)
