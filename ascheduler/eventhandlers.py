"""Informer events to the cache and the queue (kube-scheduler's `eventhandlers.go`).

Pods: an assigned pod goes to the cache (confirming an assumed one), an unassigned pod of ours
to the queue; a pod bound meanwhile leaves the queue. Nodes: the cache, the node locks'
staleness clocks, and the queue's moves for the events that may help unschedulable pods.
Namespaces: the cache's object store, and moves for pods with namespace-selecting terms.
"""

from __future__ import annotations

from typing import Any

import structlog

from ascheduler.cache.gangs import Gang
from ascheduler.features import (
    NODE_DECLARED_FEATURES,
    SCHEDULER_PREEMPTION_FOR_RESIZE,
    Features,
)
from ascheduler.framework import ClusterEvent, CycleState
from ascheduler.model import Node, PodInfo
from ascheduler.model.bindrequest import BindRequest
from ascheduler.model.objects import Namespace
from ascheduler.scheduler import Scheduler

log = structlog.get_logger(__name__)


class EventRouter:
    """The pod and node handlers the informers call."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self.cache = scheduler.cache
        self.queue = scheduler.queue
        self.nominator = scheduler.nominator
        self.pods = _PodEvents(self)
        self.nodes = _NodeEvents(self)
        self.namespaces = NamespaceEvents(self)
        self.storage = {kind: StorageEvents(self, kind) for kind in _STORAGE_EVENTS}
        self.resources = {kind: ResourceEvents(self, kind) for kind in _RESOURCE_EVENTS}
        self.taint_rules = TaintRuleEvents(self)
        gangs = self.cache.gangs
        gangs.on_member = self._member_added
        self.pod_groups = _KindEvents(
            self,
            "PodGroup",
            gangs.pod_group_handler,
            (ClusterEvent.POD_GROUP_ADD, ClusterEvent.POD_GROUP_UPDATE, None),
        )
        self.workloads = _KindEvents(
            self, "Workload", gangs.workload_handler, (ClusterEvent.WORKLOAD_ADD, None, None)
        )
        self.scheduling_groups = _KindEvents(
            self,
            "PodGroup",
            gangs.scheduling_group_handler,
            (ClusterEvent.SCHEDULING_GROUP_ADD, ClusterEvent.SCHEDULING_GROUP_UPDATE, None),
        )
        self.requests = _RequestEvents(self)

    def _member_added(self, gang: Gang) -> None:
        self.queue.move_all(ClusterEvent.GANG_MEMBER_ADD, None, gang)

    def ours(self, pod: PodInfo) -> bool:
        """One of our profiles' pods, and in sharding mode our share of them."""
        return pod.scheduler_name in self.scheduler.frameworks and self.scheduler.owns(pod)


class _PodEvents:
    def __init__(self, router: EventRouter) -> None:
        self.r = router
        first = next(iter(router.scheduler.frameworks.values()), None)
        features = first.handle.features if first is not None else Features()
        #: Bound pods whose resize the kubelet deferred are scheduled again (1.37 gate).
        self.deferred_resizes = SCHEDULER_PREEMPTION_FOR_RESIZE in features

    def _deferred(self, pod: PodInfo) -> bool:
        return self.deferred_resizes and pod.resize_deferred and self.r.ours(pod)

    def on_add(self, pod: PodInfo) -> None:
        if pod.terminal:
            return
        self.r.cache.gangs.add_pod(pod)
        if pod.assigned:
            self.r.nominator.forget(pod.uid)
            if self._deferred(pod) and not pod.deleting:
                self.r.queue.add(pod)
            self.r.cache.add_pod(pod)
            self.r.queue.move_all(ClusterEvent.ASSIGNED_POD_ADD, None, pod)
        elif not pod.deleting:
            if pod.nominated_node_name:
                # Nominated by a preemption: ours (or before a restart), or another
                # scheduler's on nodes we share; either way that room is taken.
                self.r.nominator.nominate(pod, pod.nominated_node_name)
            placed = self.r.requests.place(pod)
            if self.r.ours(pod) and not placed:
                self.r.queue.add(pod)

    def on_update(self, old: PodInfo, new: PodInfo) -> None:
        cache, queue = self.r.cache, self.r.queue
        if not new.terminal:
            cache.gangs.add_pod(new)
        if new.assigned:
            self.r.nominator.forget(new.uid)
            if new.terminal:
                self.on_delete(new)
                return
            if old.assigned:
                self._deferred_transition(old, new)
            cache.update_pod(new)
            if not old.assigned:
                queue.delete(new)  # bound (by us or anyone): no longer ours to schedule
                queue.move_all(ClusterEvent.ASSIGNED_POD_ADD, None, new)
            elif new.labels != old.labels or any(
                new.requests.get(k, 0) < v for k, v in old.requests.items()
            ):
                # Relabelled (spread and affinity count it differently) or shrunk (room freed).
                queue.move_all(ClusterEvent.ASSIGNED_POD_UPDATE, old, new)
            if old.assigned and self.deferred_resizes and _grew(old, new):
                queue.move_all(ClusterEvent.ASSIGNED_POD_SCALE_UP, old, new)
            return
        if not self.r.ours(new):
            if new.uid in queue:
                # Another sharding member's now (relabelled into another pod group, or the
                # members changed and the re-split has not reached it yet).
                queue.disown(new)
            if new.nominated_node_name and not new.deleting:
                self.r.nominator.nominate(new, new.nominated_node_name)
            else:
                self.r.nominator.forget(new.uid)
            return
        if cache.is_assumed(new.uid):
            # An assumed pod is in its binding cycle; if that fails, the scheduler re-reads
            # the pod from the informer before putting it back, so no update is lost.
            return
        nominator = self.r.nominator
        if new.deleting:
            nominator.forget(new.uid)
            queue.delete(new)
            return
        # kube-scheduler keeps a nomination it made when an update without one arrives
        # (the status patch may not have landed yet), and takes one it did not make.
        node = new.nominated_node_name or nominator.node_of(new.uid)
        if node:
            nominator.nominate(new, node)
        queue.update(new)

    def _deferred_transition(self, old: PodInfo, new: PodInfo) -> None:
        """kube-scheduler's `updatePod` for a bound pod: queued when its resize becomes
        deferred, dropped when it no longer is, updated in the queue while it stays so."""
        if not self.deferred_resizes or not self.r.ours(new):
            return
        if new.resize_deferred and not old.resize_deferred:
            log.info("deferred_resize_queued", pod=new.key, node=new.node_name)
            self.r.queue.add(new)
        elif old.resize_deferred and not new.resize_deferred:
            log.info("deferred_resize_dropped", pod=new.key, node=new.node_name)
            self.r.queue.delete(new)
        elif new.resize_deferred:
            self.r.queue.update(new)

    def on_delete(self, pod: PodInfo) -> None:
        cache, queue = self.r.cache, self.r.queue
        self.r.requests.pending.pop(pod.uid, None)
        cache.gangs.remove_pod(pod)
        self.r.nominator.forget(pod.uid)
        nominated = False
        if cache.has_pod(pod.uid):
            was_assumed = cache.is_assumed(pod.uid)
            cache.remove_pod(pod)
            if not was_assumed or pod.assigned:
                queue.move_all(ClusterEvent.ASSIGNED_POD_DELETE, pod, None)
        else:
            nominated = not pod.assigned and bool(pod.nominated_node_name) and self.r.ours(pod)
        queue.delete(pod)
        if nominated:
            # Pods of lower or equal priority counted the nominated pod as placed on its node
            # (kube-scheduler, every release: `deletePodFromSchedulingQueue`), so its deletion
            # is an assigned pod's deletion for them; the pod itself has left the queue first.
            priority = pod.priority
            queue.move_all(
                ClusterEvent.ASSIGNED_POD_DELETE,
                pod,
                None,
                pre_check=lambda waiting: waiting.priority <= priority,
            )
            log.debug("nominated_pod_deleted", pod=pod.key, node=pod.nominated_node_name)
        for fw in self.r.scheduler.frameworks.values():
            waiting = fw.handle.waiting_pods.get(pod.uid)
            if waiting is not None:
                waiting.reject("", "pod deleted")


def _grew(old: PodInfo, new: PodInfo) -> bool:
    """Some request of `new` is larger than `old`'s, or new (`extractPodScaleUp`)."""
    return any(value > old.requests.get(name, 0) for name, value in new.requests.items())


class _RequestEvents:
    """BindRequests (`--binding bindrequest`): a pending request is a placement already made,
    so its pod is assumed on the request's node, also when this process started after the
    request was written, and also when another instance (another profile) made it. A request
    that failed for good gives its pod's room back: the pod is forgotten, its plugins'
    reservations undone, the request deleted and (if ours) the pod queued again. Requests the
    binder finished need nothing: the pod informer confirms the bind."""

    def __init__(self, router: EventRouter) -> None:
        self.r = router
        #: pod uid -> its pending request
        self.pending: dict[str, BindRequest] = {}
        self._reported: set[str] = set()

    def place(self, pod: PodInfo) -> bool:
        """Assume `pod` (unassigned) where its pending request says; False if it has none
        (a pod of ours is then scheduled as usual)."""
        req = self.pending.get(pod.uid)
        if req is None or pod.assigned or pod.deleting:
            return False
        cache = self.r.cache
        if not cache.has_pod(pod.uid):
            cache.assume(pod, req.node)
            cache.gangs.assume(pod)
            self.r.nominator.forget(pod.uid)
        self.r.queue.delete(pod)
        return True

    def _pod(self, req: BindRequest) -> PodInfo | None:
        lookup = self.r.scheduler.pods
        pod = lookup(req.pod_uid) if lookup is not None else None
        return pod if pod is not None and pod.name == req.pod_name else None

    def on_add(self, req: BindRequest) -> None:
        self._seen(req)

    def on_update(self, old: BindRequest, new: BindRequest) -> None:
        self._seen(new)

    def on_delete(self, req: BindRequest) -> None:
        if self.pending.pop(req.pod_uid, None) is None:
            return
        # Deleted before it was finished (by hand, say): the placement is off.
        pod = self._pod(req)
        if pod is not None and not pod.assigned:
            self._release(pod, req, "its BindRequest was deleted before the pod was bound")

    def _seen(self, req: BindRequest) -> None:
        if req.errors:
            if req.key not in self._reported:
                self._reported.add(req.key)
                log.warning("bind_request_unreadable", request=req.key, errors=list(req.errors))
            return
        if req.pending:
            self.pending[req.pod_uid] = req
            pod = self._pod(req)
            if pod is not None:
                # Another instance's placement takes room on the node too.
                self.place(pod)
            return
        was = self.pending.pop(req.pod_uid, None)
        if not req.failed:
            return  # Succeeded: the pod informer confirms the bind
        pod = self._pod(req)
        if (
            pod is not None
            and not pod.assigned
            and (was is not None or self.r.cache.is_assumed(pod.uid))
        ):
            self._release(pod, req, f"binding failed: {req.reason or 'no reason given'}")
        else:
            self._drop(req)

    def _drop(self, req: BindRequest) -> None:
        """Delete a failed request, if this instance wrote it (its profile's)."""
        if req.failed and req.scheduler_name in self.r.scheduler.frameworks:
            self.r.scheduler.writer.drop_request(req)

    def _release(self, pod: PodInfo, req: BindRequest, why: str) -> None:
        """Give back `pod`'s room on the request's node and schedule it again."""
        scheduler, cache = self.r.scheduler, self.r.cache
        fw = scheduler.frameworks.get(pod.scheduler_name)
        if cache.is_assumed(pod.uid):
            if fw is not None:
                fw.unreserve(CycleState(), pod, req.node)
            cache.forget(pod)
            cache.gangs.forget(pod)
            self.r.queue.move_all(ClusterEvent.ASSIGNED_POD_DELETE, pod, None)
        self._drop(req)
        if fw is not None:
            scheduler.writer.failed(pod, why, fw.profile, reason="SchedulerError")
            if not pod.deleting:
                self.r.queue.add(pod)
        log.info("bind_request_released", pod=pod.key, node=req.node, reason=why)


class _NodeEvents:
    def __init__(self, router: EventRouter) -> None:
        self.r = router
        first = next(iter(router.scheduler.frameworks.values()), None)
        features = first.handle.features if first is not None else Features()
        #: kube-scheduler extracts a change of declared features only while the gate is on.
        self.declared_features = NODE_DECLARED_FEATURES in features

    def _observe_lock(self, node: Node) -> None:
        if self.r.scheduler.binder is not None:
            self.r.scheduler.binder.observe_node(node.name, node.annotations)

    def on_add(self, node: Node) -> None:
        self.r.cache.add_node(node)
        self._observe_lock(node)
        self.r.queue.move_all(ClusterEvent.NODE_ADD, None, node)

    def on_update(self, old: Node, new: Node) -> None:
        self.r.cache.update_node(new)
        self._observe_lock(new)
        events = []
        if new.allocatable != old.allocatable:
            events.append(ClusterEvent.NODE_ALLOCATABLE)
        if new.labels != old.labels:
            events.append(ClusterEvent.NODE_LABEL)
        if new.annotations != old.annotations:
            events.append(ClusterEvent.NODE_ANNOTATION)
        if new.taints != old.taints:
            events.append(ClusterEvent.NODE_TAINT)
        if new.unschedulable != old.unschedulable:
            events.append(ClusterEvent.NODE_SCHEDULABLE)
        if self.declared_features and new.declared_features != old.declared_features:
            events.append(ClusterEvent.NODE_DECLARED_FEATURES)
        if new.disable_resize_preemption != old.disable_resize_preemption:
            events.append(ClusterEvent.NODE_PREEMPTION_POLICY)
        for event in events:
            self.r.queue.move_all(event, old, new)

    def on_delete(self, node: Node) -> None:
        self.r.cache.remove_node(node.name)
        if self.r.scheduler.binder is not None:
            self.r.scheduler.binder.forget_node(node.name)
        self.r.queue.move_all(ClusterEvent.NODE_DELETE, node, None)


class NamespaceEvents:
    """Namespaces into the cache's object store; a change may help pods whose affinity
    terms select namespaces by label."""

    def __init__(self, router: EventRouter) -> None:
        self.r = router
        self.store = router.cache.objects.namespace_handler

    def on_add(self, ns: Namespace) -> None:
        self.store.on_add(ns)
        self.r.queue.move_all(ClusterEvent.NAMESPACE_CHANGE, None, ns)

    def on_update(self, old: Namespace, new: Namespace) -> None:
        self.store.on_update(old, new)
        if old.labels != new.labels:
            self.r.queue.move_all(ClusterEvent.NAMESPACE_CHANGE, old, new)

    def on_delete(self, ns: Namespace) -> None:
        self.store.on_delete(ns)
        self.r.queue.move_all(ClusterEvent.NAMESPACE_CHANGE, ns, None)


#: Storage kinds -> (their add, update and delete events); None: no move for that action.
_STORAGE_EVENTS: dict[str, tuple[ClusterEvent | None, ClusterEvent | None, ClusterEvent | None]] = {
    "PersistentVolumeClaim": (ClusterEvent.CLAIM_ADD, ClusterEvent.CLAIM_UPDATE, None),
    "PersistentVolume": (ClusterEvent.VOLUME_ADD, ClusterEvent.VOLUME_UPDATE, None),
    "StorageClass": (ClusterEvent.STORAGE_CLASS_ADD, ClusterEvent.STORAGE_CLASS_UPDATE, None),
    "CSINode": (ClusterEvent.CSI_NODE_ADD, ClusterEvent.CSI_NODE_UPDATE, None),
    "CSIDriver": (None, ClusterEvent.CSI_DRIVER_UPDATE, None),
    "CSIStorageCapacity": (ClusterEvent.CAPACITY_ADD, ClusterEvent.CAPACITY_UPDATE, None),
    "VolumeAttachment": (None, None, ClusterEvent.VOLUME_ATTACHMENT_DELETE),
}


class _KindEvents:
    """One kind of object into its store in the cache; its add, update and delete events (None:
    no move for that action) may help pods waiting on it."""

    #: The warning logged for an object with fields that could not be read.
    invalid = "object_invalid"

    def __init__(
        self,
        router: EventRouter,
        kind: str,
        store: Any,
        events: tuple[ClusterEvent | None, ClusterEvent | None, ClusterEvent | None],
    ) -> None:
        self.r = router
        self.kind = kind
        self.store = store
        self.add_event, self.update_event, self.delete_event = events

    def changed(self, old: Any, new: Any) -> None:
        """What else the cache recounts when an object of this kind changes."""

    def _check(self, obj: Any) -> None:
        errors = getattr(obj, "errors", ())
        if errors:
            log.warning(
                self.invalid,
                kind=self.kind,
                name=getattr(obj, "key", None) or getattr(obj, "name", ""),
                errors=list(errors),
            )

    def on_add(self, obj: Any) -> None:
        self._check(obj)
        self.store.on_add(obj)
        self.changed(None, obj)
        if self.add_event is not None:
            self.r.queue.move_all(self.add_event, None, obj)

    def on_update(self, old: Any, new: Any) -> None:
        if getattr(new, "errors", ()) != getattr(old, "errors", ()):
            self._check(new)
        self.store.on_update(old, new)
        self.changed(old, new)
        if self.update_event is not None:
            self.r.queue.move_all(self.update_event, old, new)

    def on_delete(self, obj: Any) -> None:
        self.store.on_delete(obj)
        self.changed(obj, None)
        if self.delete_event is not None:
            self.r.queue.move_all(self.delete_event, obj, None)


class StorageEvents(_KindEvents):
    """One storage kind into the cache's storage store; adds and updates may help pods the
    volume plugins rejected, and of deletions only a VolumeAttachment's (a volume detached
    from a node; otherwise a missing object never makes a pod fit)."""

    invalid = "storage_object_invalid"

    def __init__(self, router: EventRouter, kind: str) -> None:
        super().__init__(router, kind, router.cache.storage.handlers[kind], _STORAGE_EVENTS[kind])

    def changed(self, old: Any, new: Any) -> None:
        self.r.cache.storage_changed(self.kind, old, new)


#: DRA kinds -> (their add and update events); None: no move for that action.
_RESOURCE_EVENTS: dict[str, tuple[ClusterEvent | None, ClusterEvent | None]] = {
    "DeviceClass": (ClusterEvent.DEVICE_CLASS_ADD, ClusterEvent.DEVICE_CLASS_UPDATE),
    "ResourceSlice": (ClusterEvent.RESOURCE_SLICE_ADD, ClusterEvent.RESOURCE_SLICE_UPDATE),
    "ResourceClaim": (ClusterEvent.RESOURCE_CLAIM_ADD, ClusterEvent.RESOURCE_CLAIM_UPDATE),
    "ResourceClaimTemplate": (None, None),
}


class ResourceEvents(_KindEvents):
    """One DRA kind into the cache's resource store; adds and updates may help pods
    DynamicResources rejected or holds (a claim created for a pod waiting on it)."""

    invalid = "resource_object_invalid"

    def __init__(self, router: EventRouter, kind: str) -> None:
        add, update = _RESOURCE_EVENTS[kind]
        super().__init__(router, kind, router.cache.resources.handlers[kind], (add, update, None))


class TaintRuleEvents(_KindEvents):
    """DeviceTaintRules into the resource store. kube-scheduler hears of a rule only through
    the slices its tracker patches anew, as ResourceSlice updates: a rule added, changed or
    deleted so that some device's taints change is a slice update here too (no slice is
    passed to the hints: DynamicResources queues on any), and one that changes no device's
    taints (a status update, a rule matching nothing) moves no pod."""

    invalid = "resource_object_invalid"

    def __init__(self, router: EventRouter) -> None:
        super().__init__(router, "DeviceTaintRule", None, (None, None, None))

    def _changed(self, old: Any, new: Any) -> None:
        if self.r.cache.resources.taint_rule_changed(old, new):
            self.r.queue.move_all(ClusterEvent.RESOURCE_SLICE_UPDATE, None, None)

    def on_add(self, obj: Any) -> None:
        self._check(obj)
        self._changed(None, obj)

    def on_update(self, old: Any, new: Any) -> None:
        if getattr(new, "errors", ()) != getattr(old, "errors", ()):
            self._check(new)
        self._changed(old, new)

    def on_delete(self, obj: Any) -> None:
        self._changed(obj, None)
