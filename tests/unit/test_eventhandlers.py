"""Informer events to the cache and the queue (`EventRouter`), without a network."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from ascheduler.config import DEFAULT_SCHEDULER_NAME, SchedulerConfig
from ascheduler.dra.taints import DeviceTaints
from ascheduler.features import Features, Release
from ascheduler.framework import ClusterEvent, QueuedPodInfo
from ascheduler.framework.nodes import CPU, PODS
from ascheduler.model import PodInfo, parse_node, parse_pod
from ascheduler.model.bindrequest import parse_bind_request, request_body
from ascheduler.model.dra import parse_device_class, parse_resource_claim, parse_resource_slice
from ascheduler.model.dra_taints import parse_device_taint_rule
from ascheduler.model.storage import (
    parse_claim,
    parse_csi_node,
    parse_volume,
    parse_volume_attachment,
)
from ascheduler.scheduler import INVALID_SPEC
from tests.kit import container, pod, pod_info
from tests.kit.scheduling import Env, make_node, make_pod
from tests.unit.dra.helpers import DRIVER, claim, device, device_class, exactly, slice_


def test_assigned_pod_add_goes_to_the_cache_only() -> None:
    env = Env(make_node("n1"))
    pod = make_pod("p", node="n1", cpu="3")
    env.router.pods.on_add(pod)
    assert env.cache.has_pod(pod.uid)
    assert not env.cache.is_assumed(pod.uid)
    assert int(env.cache.table.requested[CPU, env.cache.table.index["n1"]]) == 3000
    assert pod.uid not in env.queue


def test_assigned_pod_of_another_scheduler_is_still_counted() -> None:
    env = Env(make_node("n1"))
    pod = make_pod("p", node="n1", scheduler="default-scheduler")
    env.router.pods.on_add(pod)
    assert env.cache.has_pod(pod.uid)


def test_unassigned_pod_of_ours_is_queued() -> None:
    env = Env(make_node("n1"))
    pod = make_pod("p")
    env.router.pods.on_add(pod)
    assert env.queue.where(pod.uid) == "active"


def test_pod_of_another_scheduler_is_never_queued() -> None:
    env = Env(make_node("n1"))
    pod = make_pod("p", scheduler="default-scheduler")
    env.router.pods.on_add(pod)
    env.router.pods.on_update(pod, make_pod("p", scheduler="default-scheduler", cpu="2"))
    assert pod.uid not in env.queue
    assert env.queue.pending() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 0}
    assert not env.cache.has_pod(pod.uid)


def test_terminal_or_deleting_pods_are_not_queued() -> None:
    env = Env(make_node("n1"))
    deleting = parse_pod(
        {
            "metadata": {
                "name": "d",
                "namespace": "ns",
                "uid": "uid-d",
                "deletionTimestamp": "2024-01-01T00:00:00Z",
            },
            "spec": {"schedulerName": DEFAULT_SCHEDULER_NAME},
        }
    )
    done = parse_pod(
        {
            "metadata": {"name": "s", "namespace": "ns", "uid": "uid-s"},
            "spec": {"schedulerName": DEFAULT_SCHEDULER_NAME, "nodeName": "n1"},
            "status": {"phase": "Succeeded"},
        }
    )
    env.router.pods.on_add(deleting)
    env.router.pods.on_add(done)
    assert deleting.uid not in env.queue
    assert not env.cache.has_pod(done.uid)


async def test_node_add_moves_unschedulable_pods_back() -> None:
    env = Env(make_node("n1", cpu="1"))
    pod = make_pod("p", cpu="2")
    await env.attempt(pod)
    assert env.queue.where(pod.uid) == "unschedulable"
    env.router.nodes.on_add(make_node("n2", cpu="4"))
    assert env.queue.where(pod.uid) in ("backoff", "active")
    assert env.cache.node("n2") is not None
    env.clock.advance(1)
    bind, _ = await env.attempt(pod)
    assert bind is not None
    assert bind.node == "n2"


async def test_node_update_moves_pods_for_matching_changes_only() -> None:
    env = Env(make_node("n1", cpu="1"))
    pod = make_pod("p", cpu="2")
    await env.attempt(pod)
    old = make_node("n1", cpu="1")
    tainted = make_node("n1", cpu="1", taints=[{"key": "k", "effect": "NoSchedule"}])
    env.router.nodes.on_update(old, tainted)
    assert env.queue.where(pod.uid) == "unschedulable"
    env.router.nodes.on_update(tainted, make_node("n1", cpu="4"))
    assert env.queue.where(pod.uid) in ("backoff", "active")


async def test_assigned_pod_delete_moves_pods_waiting_for_room() -> None:
    env = Env(make_node("n1", cpu="2"))
    running = make_pod("running", node="n1", cpu="2")
    env.router.pods.on_add(running)
    pod = make_pod("p", cpu="1")
    await env.attempt(pod)
    assert env.queue.where(pod.uid) == "unschedulable"
    env.router.pods.on_delete(running)
    assert not env.cache.has_pod(running.uid)
    assert env.queue.where(pod.uid) in ("backoff", "active")


async def test_binding_confirmed_by_watch_leaves_the_queue() -> None:
    env = Env(make_node("n1"))
    pod = make_pod("p")
    env.router.pods.on_add(pod)
    bind, _ = await env.attempt(pod)
    assert bind is not None
    qp = bind.qp
    env.router.pods.on_update(pod, make_pod("p", node="n1"))
    assert env.cache.has_pod(pod.uid)
    assert not env.cache.is_assumed(pod.uid)
    assert int(env.cache.table.requested[PODS, env.cache.table.index["n1"]]) == 1
    # Even if its binding cycle then reported a failure, the bound pod is not queued again.
    env.queue.requeue(qp, error=True)
    assert env.queue.where(pod.uid) is None


async def test_unassigned_update_of_assumed_pod_is_ignored() -> None:
    env = Env(make_node("n1"))
    pod = make_pod("p")
    env.router.pods.on_add(pod)
    await env.attempt(pod)
    env.router.pods.on_update(pod, make_pod("p", cpu="2"))
    assert env.queue.where(pod.uid) == "in-flight"


def test_deleting_update_removes_queued_pod() -> None:
    env = Env(make_node("n1"))
    pod = make_pod("p")
    env.router.pods.on_add(pod)
    deleting = parse_pod(
        {
            "metadata": {
                "name": "p",
                "namespace": "ns",
                "uid": "uid-p",
                "deletionTimestamp": "2024-01-01T00:00:00Z",
            },
            "spec": {"schedulerName": DEFAULT_SCHEDULER_NAME},
        }
    )
    env.router.pods.on_update(pod, deleting)
    assert pod.uid not in env.queue


def test_invalid_spec_constant_is_what_build_queue_refuses() -> None:
    env = Env()
    qp = QueuedPodInfo(make_pod("p"), 0.0, unschedulable_plugins=frozenset({INVALID_SPEC}))
    assert not env.queue.event_filter(qp, ClusterEvent.NODE_ADD)
    assert env.queue.event_filter(
        QueuedPodInfo(make_pod("p"), 0.0, unschedulable_plugins=frozenset({"NodeAffinity"})),
        ClusterEvent.NODE_LABEL,
    )


def test_pod_created_bound_with_huge_sums_is_counted_whole() -> None:
    node = parse_node(
        {
            "metadata": {"name": "n1"},
            "status": {
                "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110", "example.com/foo": "8"}
            },
        }
    )
    env = Env(node)
    env.router.pods.on_add(
        pod_info(
            "huge",
            namespace="ns",
            node_name="n1",
            containers=[container(f"c{i}", extra={"example.com/foo": "4Ei"}) for i in range(2)],
        )
    )
    table = env.cache.table
    foo = table.resource_row("example.com/foo")
    assert foo is not None
    assert env.cache.has_pod("uid-huge")
    assert int(table.requested[PODS, 0]) == 1
    assert int(table.free[foo, 0]) < 0  # full: nothing else asking for foo fits


async def test_a_claim_created_moves_the_pod_waiting_for_it() -> None:
    env = Env(make_node("n1"))
    raw = pod("p", namespace="ns", scheduler_name=DEFAULT_SCHEDULER_NAME)
    raw["spec"]["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]
    waiting = parse_pod(raw)
    await env.attempt(waiting)
    assert env.queue.where(waiting.uid) == "unschedulable"
    env.router.storage["PersistentVolume"].on_add(
        parse_volume({"metadata": {"name": "pv", "resourceVersion": "1"}, "spec": {}})
    )
    assert env.queue.where(waiting.uid) == "unschedulable"  # not the volume it waits for
    storage = env.router.storage["PersistentVolumeClaim"]
    claim = {
        "metadata": {
            "namespace": "ns",
            "name": "data",
            "resourceVersion": "1",
            "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
        },
        "spec": {"volumeName": "pv"},
    }
    # A deletion moves nothing; the claim created does, and the pod then fits.
    storage.on_delete(parse_claim(claim))
    assert env.queue.where(waiting.uid) == "unschedulable"
    storage.on_add(parse_claim(claim))
    assert env.cache.storage.claim("ns", "data") is not None
    assert env.queue.where(waiting.uid) in ("backoff", "active")
    env.clock.advance(1)
    bind, _ = await env.attempt(waiting)
    assert bind is not None


async def test_a_volume_detached_moves_the_pod_a_full_node_held_back() -> None:
    env = Env(make_node("n1"))
    storage = env.router.storage
    storage["CSINode"].on_add(
        parse_csi_node(
            {
                "metadata": {"name": "n1"},
                "spec": {
                    "drivers": [{"name": "d.csi", "nodeID": "n1", "allocatable": {"count": 1}}]
                },
            }
        )
    )
    for name in ("a", "b"):
        storage["PersistentVolume"].on_add(
            parse_volume(
                {
                    "metadata": {"name": f"pv-{name}", "resourceVersion": "1"},
                    "spec": {"csi": {"driver": "d.csi", "volumeHandle": name}},
                }
            )
        )
        storage["PersistentVolumeClaim"].on_add(
            parse_claim(
                {
                    "metadata": {
                        "namespace": "ns",
                        "name": name,
                        "resourceVersion": "1",
                        "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
                    },
                    "spec": {"volumeName": f"pv-{name}"},
                }
            )
        )
    attached = parse_volume_attachment(
        {
            "metadata": {"name": "va", "resourceVersion": "1"},
            "spec": {
                "attacher": "d.csi",
                "nodeName": "n1",
                "source": {"persistentVolumeName": "pv-a"},
            },
        }
    )
    storage["VolumeAttachment"].on_add(attached)
    raw = pod("p", namespace="ns", scheduler_name=DEFAULT_SCHEDULER_NAME)
    raw["spec"]["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": "b"}}]
    waiting = parse_pod(raw)
    await env.attempt(waiting)
    assert env.queue.where(waiting.uid) == "unschedulable"
    # Another pod's claim appearing is nothing to this one (NodeVolumeLimits' hint).
    storage["PersistentVolumeClaim"].on_add(
        parse_claim({"metadata": {"namespace": "ns", "name": "c", "resourceVersion": "1"}})
    )
    assert env.queue.where(waiting.uid) == "unschedulable"
    storage["VolumeAttachment"].on_delete(attached)
    assert env.queue.where(waiting.uid) in ("backoff", "active")
    env.clock.advance(1)
    bind, _ = await env.attempt(waiting)
    assert bind is not None


# -- BindRequests: a pending one is a placement already made; a failed one gives the room back


def req(p: PodInfo, node: str = "n1", phase: str | None = None, **status: Any) -> Any:
    body = request_body(p, node, profile=p.scheduler_name)
    body["metadata"] |= {"uid": f"r-{p.uid}", "resourceVersion": "1"}
    if phase:
        body["status"] = {"phase": phase, **status}
    return parse_bind_request(body)


def setup(p: PodInfo) -> Env:
    return Env(make_node("n1", cpu="4"), make_node("n2", cpu="4"), store={p.uid: p})


def used(env: Env, node: str) -> int:
    return int(env.cache.table.requested[CPU, env.cache.table.index[node]])


def test_a_pending_request_places_its_pod_whichever_arrives_first() -> None:
    p = make_pod("p", cpu="1")
    env = setup(p)
    env.router.pods.on_add(p)
    assert env.queue.where(p.uid) == "active"
    env.router.requests.on_add(req(p))
    assert env.cache.is_assumed(p.uid)
    assert (used(env, "n1"), used(env, "n2")) == (1000, 0)
    assert p.uid not in env.queue

    # A scheduler started later: the request is listed before the pod.
    q = make_pod("q", cpu="2")
    later = setup(q)
    later.router.requests.on_add(req(q, "n2"))
    later.router.pods.on_add(q)
    assert later.cache.is_assumed(q.uid)
    assert used(later, "n2") == 2000
    assert q.uid not in later.queue


def test_a_request_that_failed_for_good_gives_the_room_back_and_queues_the_pod() -> None:
    p = make_pod("p", cpu="1")
    env = setup(p)
    env.router.pods.on_add(p)
    pending = req(p)
    env.router.requests.on_add(pending)
    failed = req(p, phase="Failed", failedAttempts=3, reason="node n1 does not exist")
    env.router.requests.on_update(pending, failed)
    assert not env.cache.has_pod(p.uid)
    assert used(env, "n1") == 0
    assert env.queue.where(p.uid) == "active"
    written = env.written()
    drops = [w for w in written if type(w).__name__ == "_DropRequest"]
    assert [d.request.uid for d in drops] == [f"r-{p.uid}"]
    (event,) = [w for w in written if getattr(w, "reason", "") == "FailedScheduling"]
    assert event.note == "binding failed: node n1 does not exist"


def test_a_succeeded_request_leaves_the_pod_assumed_until_the_informer_shows_it_bound() -> None:
    p = make_pod("p", cpu="1")
    env = setup(p)
    env.router.pods.on_add(p)
    pending = req(p)
    env.router.requests.on_add(pending)
    done = req(p, phase="Succeeded")
    env.router.requests.on_update(pending, done)
    env.router.requests.on_delete(done)  # the binder collects it
    assert env.cache.is_assumed(p.uid)
    assert p.uid not in env.queue
    bound = make_pod("p", cpu="1", node="n1")
    env.router.pods.on_update(p, bound)
    assert env.cache.has_pod(p.uid)
    assert not env.cache.is_assumed(p.uid)
    assert used(env, "n1") == 1000


def test_a_pending_request_deleted_by_hand_releases_its_pod() -> None:
    p = make_pod("p", cpu="1")
    env = setup(p)
    env.router.pods.on_add(p)
    pending = req(p)
    env.router.requests.on_add(pending)
    env.router.requests.on_delete(pending)
    assert not env.cache.has_pod(p.uid)
    assert env.queue.where(p.uid) == "active"


def test_an_unreadable_request_changes_nothing() -> None:
    p = make_pod("p", cpu="1")
    env = setup(p)
    env.router.pods.on_add(p)
    bad = parse_bind_request({"metadata": {"name": "p", "namespace": p.namespace}, "spec": {}})
    env.router.requests.on_add(bad)
    env.router.requests.on_delete(bad)
    assert not env.cache.has_pod(p.uid)
    assert env.queue.where(p.uid) == "active"


def test_another_instances_pending_request_takes_room_too() -> None:
    p = make_pod("p", cpu="3", scheduler="other-scheduler")
    env = setup(p)
    env.router.pods.on_add(p)
    env.router.requests.on_add(req(p, "n2"))
    assert used(env, "n2") == 3000  # not ours to schedule, but counted
    assert p.uid not in env.queue
    failed = req(p, "n2", phase="Failed", reason="node n2 does not exist")
    env.router.requests.on_update(req(p, "n2"), failed)
    assert used(env, "n2") == 0
    assert p.uid not in env.queue  # still not ours
    # Its own scheduler deletes it: this one only forgets the room.
    assert not [w for w in env.written() if type(w).__name__ == "_DropRequest"]


def _resized(
    name: str, *, spec_cpu: str, status_cpu: str, infeasible: bool = False, **meta: Any
) -> PodInfo:
    """A pod of `spec_cpu` running on n1 whose kubelet reports `status_cpu` actuated and
    allocated (an in-place resize), the resize infeasible if told."""
    raw = pod(name, namespace="ns", cpu=spec_cpu, node_name="n1", **meta)
    status: dict[str, Any] = {
        "phase": "Running",
        "containerStatuses": [
            {
                "name": raw["spec"]["containers"][0]["name"],
                "resources": {"requests": {"cpu": status_cpu}},
                "allocatedResources": {"cpu": status_cpu},
            }
        ],
    }
    if infeasible:
        status["conditions"] = [
            {"type": "PodResizePending", "status": "True", "reason": "Infeasible"}
        ]
    raw["status"] = status
    return parse_pod(raw)


async def test_assigned_pod_resize_counts_and_its_end_wakes_pods_waiting_for_room() -> None:
    env = Env(make_node("n1", cpu="4"))
    row = env.cache.table.index["n1"]
    running = _resized("running", spec_cpu="1", status_cpu="3")
    env.router.pods.on_add(running)
    assert int(env.cache.table.requested[CPU, row]) == 3000
    pod = make_pod("p", cpu="2")
    await env.attempt(pod)
    assert env.queue.where(pod.uid) == "unschedulable"
    # The kubelet finished the resize down to the spec: room for the pending pod.
    done = _resized("running", spec_cpu="1", status_cpu="1")
    env.router.pods.on_update(running, done)
    assert int(env.cache.table.requested[CPU, row]) == 1000
    assert env.queue.where(pod.uid) in ("backoff", "active")
    env.clock.advance(1)
    bind, _ = await env.attempt(pod)
    assert bind is not None
    assert bind.node == "n1"


async def test_infeasible_resize_holds_only_what_is_actuated() -> None:
    env = Env(make_node("n1", cpu="4"))
    row = env.cache.table.index["n1"]
    env.router.pods.on_add(_resized("running", spec_cpu="8", status_cpu="1", infeasible=True))
    assert int(env.cache.table.requested[CPU, row]) == 1000
    bind, _ = await env.attempt(make_pod("p", cpu="3"))
    assert bind is not None


async def test_assigned_pod_relabel_does_not_wake_pods_waiting_for_room() -> None:
    """NodeResourcesFit registers an assigned pod's scale-down, not its relabelling."""
    env = Env(make_node("n1", cpu="4"))
    running = _resized("running", spec_cpu="3", status_cpu="3", labels={"a": "1"})
    env.router.pods.on_add(running)
    pod = make_pod("p", cpu="2")
    await env.attempt(pod)
    assert env.queue.where(pod.uid) == "unschedulable"
    relabelled = _resized("running", spec_cpu="3", status_cpu="3", labels={"a": "2"})
    env.router.pods.on_update(running, relabelled)
    assert env.queue.where(pod.uid) == "unschedulable"
    # A scale-down of a resource the pod does not ask for does not help it either.
    grown = _resized("running", spec_cpu="3", status_cpu="3", labels={"a": "2"}, memory="1Gi")
    env.router.pods.on_update(relabelled, grown)
    env.router.pods.on_update(grown, relabelled)
    assert env.queue.where(pod.uid) == "unschedulable"


async def test_declared_features_change_moves_the_pod_only_while_the_gate_is_on() -> None:
    rules = [{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [1]}}]
    restarting = [{"name": "c", "restartPolicyRules": rules}]
    plain = make_node("n1")
    declaring = make_node("n1", declared_features=["RestartAllContainersOnContainerExits"])
    env = Env(plain, options=SchedulerConfig(features=Features.defaults(Release(1, 37))))
    pod = make_pod("p", containers=restarting)
    await env.attempt(pod)
    assert env.queue.where(pod.uid) == "unschedulable"
    env.router.nodes.on_update(plain, make_node("n1", labels={"a": "b"}))
    assert env.queue.where(pod.uid) == "unschedulable"
    env.router.nodes.on_update(plain, declaring)
    assert env.queue.where(pod.uid) in ("backoff", "active")
    env.clock.advance(1)
    bind, _ = await env.attempt(pod)
    assert bind is not None
    assert bind.node == "n1"
    # 1.35 (gate off): the plugin is absent and the change is not an event.
    old = Env(plain, options=SchedulerConfig(features=Features.defaults(Release(1, 35))))
    assert not old.router.nodes.declared_features
    assert "NodeDeclaredFeatures" not in old.frameworks[DEFAULT_SCHEDULER_NAME].plugins


# -- deferred resizes (1.37, InPlacePodVerticalScalingSchedulerPreemption) ---------------------

_RESIZE_GATES = "InPlacePodVerticalScalingSchedulerPreemption=true"


def _deferred(name: str, *, deferred: bool = True, cpu: str = "3", **meta: Any) -> PodInfo:
    """A pod bound to n1 asking `cpu` while running with 1, its resize deferred if told."""
    from ascheduler.model.resources import RequestsRule

    meta.setdefault("scheduler_name", DEFAULT_SCHEDULER_NAME)
    raw = pod(name, namespace="ns", cpu=cpu, node_name="n1", **meta)
    status: dict[str, Any] = {
        "phase": "Running",
        "containerStatuses": [
            {
                "name": raw["spec"]["containers"][0]["name"],
                "resources": {"requests": {"cpu": "1"}},
                "allocatedResources": {"cpu": "1"},
            }
        ],
    }
    if deferred:
        status["conditions"] = [
            {"type": "PodResizePending", "status": "True", "reason": "Deferred"}
        ]
    raw["status"] = status
    rule = RequestsRule.of(Features.defaults(Release(1, 37)))
    return parse_pod(raw, rule=rule)


def _resize_env(*pods: PodInfo, gates: str = _RESIZE_GATES) -> Env:
    from ascheduler.features import parse_gates

    features = parse_gates(gates, Release(1, 37))
    store = {p.uid: p for p in pods}
    return Env(make_node("n1", cpu="4"), options=SchedulerConfig(features=features), store=store)


def test_assigned_deferred_pods_are_queued_as_kube_scheduler_admits_them() -> None:
    """`eventhandlers.go`: added deferred, queued; turning deferred, queued; no longer
    deferred, dropped; deleted, dropped; the gate off, never."""
    plain, grows = _deferred("grows", deferred=False), _deferred("grows")
    env = _resize_env(grows)
    env.router.pods.on_add(grows)
    assert env.queue.where(grows.uid) == "active"
    assert env.cache.has_pod(grows.uid)
    env.router.pods.on_update(grows, plain)
    assert env.queue.where(grows.uid) is None
    env.router.pods.on_update(plain, grows)
    assert env.queue.where(grows.uid) == "active"
    env.router.pods.on_delete(grows)
    assert env.queue.where(grows.uid) is None
    assert not env.cache.has_pod(grows.uid)
    # Another scheduler's pod, or the gate off: only counted.
    for env, p in (
        (_resize_env(), _deferred("theirs", scheduler_name="other")),
        (_resize_env(gates=""), grows),
    ):
        env.router.pods.on_add(p)
        assert env.queue.where(p.uid) is None
        assert env.cache.has_pod(p.uid)


async def test_a_deferred_pod_s_failure_requeues_it_without_event_or_nomination() -> None:
    """Preemption evicts the victim on its node; the pod stays bound, gets no
    FailedScheduling event, no condition and no nomination (`handleSchedulingFailure`)."""
    from ascheduler.framework import CycleState

    low = _deferred("low", deferred=False, cpu="2", priority=10)
    grows = _deferred("grows", priority=1000)
    env = _resize_env(low, grows)
    env.router.pods.on_add(low)
    env.router.pods.on_add(grows)
    fw = env.frameworks[DEFAULT_SCHEDULER_NAME]
    result = fw.find_nodes(CycleState(), grows, env.cache.table)
    assert result.node is None
    assert "Insufficient cpu" in result.status.message
    assert result.nominated_node == "n1"  # preemption made room there
    bind, _ = await env.attempt(grows)
    assert bind is None
    assert env.failed_events() == []
    assert not env.scheduler.nominator.node_of(grows.uid)
    assert env.queue.where(grows.uid) in ("backoff", "unschedulable", "active")
    assert env.cache.has_pod(grows.uid)
    assert env.cache.pod_node(grows.uid) == "n1"


async def test_a_deferred_pod_that_fits_ends_its_cycle_at_assume() -> None:
    """kube-scheduler's AssumePod refuses a pod its cache holds: an error, retried with
    backoff, the pod left as it is (no event either)."""
    grows = _deferred("grows")
    env = _resize_env(grows)
    env.router.pods.on_add(grows)
    bind, _ = await env.attempt(grows)
    assert bind is None
    assert env.failed_events() == []
    assert env.queue.where(grows.uid) == "backoff"
    assert env.cache.has_pod(grows.uid)
    assert not env.cache.is_assumed(grows.uid)


async def test_a_bound_pod_growing_beside_a_deferred_one_wakes_it() -> None:
    """NodeResourcesFit's AssignedPod/UpdatePodScaleUp: the grown pod may take the room the
    deferred resize waits for; a pod on another node, or shrinking, does not wake it."""
    low = _deferred("low", deferred=False, cpu="2", priority=2000)
    grows = _deferred("grows", priority=1000)
    env = _resize_env(low, grows)
    env.cache.add_node(make_node("n2", cpu="4"))
    env.router.pods.on_add(low)
    env.router.pods.on_add(grows)
    await env.attempt(grows)
    assert env.queue.where(grows.uid) == "unschedulable"
    elsewhere = make_pod("far", cpu="1", node="n2")
    env.router.pods.on_add(elsewhere)
    env.router.pods.on_update(elsewhere, make_pod("far", cpu="2", node="n2"))
    assert env.queue.where(grows.uid) == "unschedulable"
    bigger = _deferred("low", deferred=False, cpu="3", priority=2000)
    env.router.pods.on_update(low, bigger)
    assert env.queue.where(grows.uid) in ("backoff", "active")


RELEASES = [Release(1, 35), Release(1, 36), Release(1, 37)]


def _at(release: Release, *nodes: Any) -> Env:
    return Env(*nodes, options=SchedulerConfig(features=Features.defaults(release)))


@pytest.mark.parametrize("release", RELEASES, ids=str)
async def test_a_nominated_pod_s_deletion_wakes_pods_of_lower_or_equal_priority(
    release: Release,
) -> None:
    """kube-scheduler (every release) sends `AssignedPodDelete` for it, to the pods of lower
    or equal priority only (they counted the nominated pod as placed on its node)."""
    env = _at(release, make_node("n1", cpu="2"))
    nominated = dataclasses.replace(
        make_pod("nominated", cpu="2", priority=10), nominated_node_name="n1"
    )
    env.router.pods.on_add(nominated)
    env.queue.delete(nominated)  # as if it were in flight: only its nomination counts
    lower = make_pod("lower", cpu="1", priority=5)
    equal = make_pod("equal", cpu="1", priority=10)
    higher = make_pod("higher", cpu="3", priority=20)  # too big either way
    for waiting in (lower, equal, higher):
        await env.attempt(waiting)
        assert env.queue.where(waiting.uid) == "unschedulable", waiting.name
    env.router.pods.on_delete(nominated)
    assert nominated.uid not in env.queue
    assert env.queue.where(lower.uid) in ("backoff", "active")
    assert env.queue.where(equal.uid) in ("backoff", "active")
    assert env.queue.where(higher.uid) == "unschedulable"


@pytest.mark.parametrize("release", RELEASES, ids=str)
async def test_a_deleted_pod_without_nomination_or_not_ours_wakes_nobody(
    release: Release,
) -> None:
    env = _at(release, make_node("n1", cpu="2"))
    running = make_pod("running", node="n1", cpu="2")
    env.router.pods.on_add(running)
    waiting = make_pod("waiting", cpu="1")
    await env.attempt(waiting)
    assert env.queue.where(waiting.uid) == "unschedulable"
    plain = make_pod("plain", cpu="1", priority=10)
    env.router.pods.on_add(plain)
    env.router.pods.on_delete(plain)
    others = dataclasses.replace(
        make_pod("others", cpu="2", priority=10, scheduler="default-scheduler"),
        nominated_node_name="n1",
    )
    env.router.pods.on_add(others)
    env.router.pods.on_delete(others)
    assert env.queue.where(waiting.uid) == "unschedulable"


async def test_a_device_taint_rule_moves_pods_only_when_it_changes_some_device_s_taints() -> None:
    """kube-scheduler hears of a rule through the slices it patches (a ResourceSlice update);
    a rule that taints nothing new, or a status update, moves no pod."""
    features = Features.defaults(Release(1, 37))
    env = Env(make_node("n1"), options=dataclasses.replace(SchedulerConfig(), features=features))
    resources = env.cache.resources
    resources.taints = DeviceTaints.of(features)
    resources.handlers["DeviceClass"].on_add(
        parse_device_class(device_class("gpu", f'device.driver == "{DRIVER}"'))
    )
    resources.handlers["ResourceSlice"].on_add(
        parse_resource_slice(slice_("s", [device("g0")], node="n1"))
    )
    resources.handlers["ResourceClaim"].on_add(parse_resource_claim(claim("c", exactly("r"))))

    def rule(pool: str, rv: str = "1", status: str = "") -> Any:
        body = {
            "metadata": {"name": "maintenance", "resourceVersion": rv},
            "spec": {
                "deviceSelector": {"pool": pool},
                "taint": {"key": "m", "effect": "NoExecute"},
            },
            "status": {"conditions": [{"type": "EvictionInProgress", "status": status}]},
        }
        return parse_device_taint_rule(body)

    env.router.taint_rules.on_add(rule("n1"))
    raw = pod("p", namespace="ns", scheduler_name=DEFAULT_SCHEDULER_NAME)
    raw["spec"]["resourceClaims"] = [{"name": "c0", "resourceClaimName": "c"}]
    waiting = parse_pod(raw)
    bind, _ = await env.attempt(waiting)
    assert bind is None
    assert env.queue.where(waiting.uid) == "unschedulable"
    env.router.taint_rules.on_update(rule("n1"), rule("n1", "2", "False"))  # status only
    env.router.taint_rules.on_add(parse_device_taint_rule({"metadata": {"name": "other"}}))
    assert env.queue.where(waiting.uid) == "unschedulable"
    env.router.taint_rules.on_delete(rule("n1", "2"))
    assert env.queue.where(waiting.uid) in ("backoff", "active")
    env.clock.advance(1)
    bind, _ = await env.attempt(waiting)
    assert bind is not None
