"""The bind-phase protocol around the Bind extension point, for pods the lock policy selects.

`LockedBinder` is the Bind extension point's wrapper for pods the lock policy selects (pods
requesting a device resource, all, or none): their binds go out under the node's locks
(`ascheduler.locks`), coalesced per node, each fit re-validated under them. It is built in
layers, each a module of its own:

* `leases`: the lock objects (lock Leases made and watched) and the keys a bind locks;
* `revalidation`: the view of a node's pods each fit is checked against under the locks;
* `batching`: binds to one node coalesced under one hold, served in batches;
* `phases`: what a Binding carries onto its pod (HAMi's bind phases);
* here: the settings, which binds lock, binding alone while no other instance shares the
  nodes (see `locks.members`), and the binder's life (nodes seen and deleted, stopping).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

import structlog

from ascheduler import metrics
from ascheduler.binding.batching import Batching
from ascheduler.binding.leases import LeaseEvents
from ascheduler.binding.phases import bound_phase, phase_annotations
from ascheduler.binding.revalidation import NODE_LOCK
from ascheduler.cache import Cache
from ascheduler.framework import CycleState, Status
from ascheduler.framework.interface import BINDING_ANNOTATIONS
from ascheduler.framework.runtime import Framework
from ascheduler.kube import KubeClient, KubeError
from ascheduler.locks import RELEASE_ALL_SECONDS, DeviceLocks, LockSettings, Members, NodeLocks
from ascheduler.locks.keys import lock_lease_name
from ascheduler.model import PodInfo
from ascheduler.model.resources import V1_35, RequestsRule

log = structlog.get_logger(__name__)

#: Which binds take their node's lock: pods requesting a device resource, all, or none.
LockPolicy = Literal["devices", "all", "none"]
POLICIES: Final[tuple[LockPolicy, ...]] = ("devices", "all", "none")
#: How a placement is bound: a Binding written by the scheduler, or a BindRequest that
#: `ascheduler binder` turns into one.
BindingMode = Literal["direct", "bindrequest"]
MODES: Final[tuple[BindingMode, ...]] = ("direct", "bindrequest")
DEFAULT_DEVICE_RESOURCES: Final = ("nvidia.com/gpu",)
#: How long a bind waits for the other instances to acknowledge this one.
MEMBER_WAIT: Final = 10.0
#: How long the cache may take to show the pods of a fresh list of the bound ones.
CATCH_UP_SECONDS: Final = 30.0


@dataclass(frozen=True)
class BindSettings:
    policy: LockPolicy = "devices"
    device_resources: frozenset[str] = frozenset(DEFAULT_DEVICE_RESOURCES)
    annotation_prefix: str = "ascheduler.io"
    lock: LockSettings = field(default_factory=LockSettings)
    mode: BindingMode = "direct"

    @property
    def bound_phase(self) -> str:
        """The bind phase a Binding carries onto its pod: `allocating` under HAMi's prefix
        (HAMi's device plugin finishes the protocol), `success` otherwise."""
        return bound_phase(self.annotation_prefix)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"binding mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.policy not in POLICIES:
            raise ValueError(
                f"node lock policy must be one of {', '.join(POLICIES)}, got {self.policy!r}"
            )


class LockedBinder(Batching):
    def __init__(
        self,
        kube: KubeClient,
        settings: BindSettings,
        *,
        lease_namespace: str = "kube-system",
        cache: Cache | None = None,
        register: bool = False,
        requests_rule: RequestsRule = V1_35,
    ) -> None:
        """`register`: with locks on Leases, take part in deciding who shares the nodes (see
        `locks.members`): every instance that binds does; a scheduler whose binds go out as
        BindRequests does not. Binds skip the node lock while this instance is alone, when
        the settings allow it and there is a `cache` to catch up with the others' binds.
        `requests_rule`: how the release reads the requests of the pods a re-validation
        lists (the scheduler's own)."""
        self.kube = kube
        self.cache = cache
        self.requests_rule = requests_rule
        self.settings = settings
        self.lock_settings = settings.lock
        self.lease_groups = settings.lock.lease_groups
        self.annotation_prefix = settings.annotation_prefix
        self.on_lease = settings.lock.lock_object == "lease"
        self._leases = f"/apis/coordination.k8s.io/v1/namespaces/{lease_namespace}/leases"
        self._node_uids = {}
        self._records = {}
        self._vouched = {}
        self.locks = (
            NodeLocks(
                kube,
                settings.lock,
                path=lambda key: f"{self._leases}/{lock_lease_name(key)}",
                create=self._create_lease,
                replace=True,
            )
            if self.on_lease
            else NodeLocks(kube, settings.lock)
        )
        self.members = (
            Members(
                kube,
                lease_namespace,
                settings.lock.identity,
                duration=settings.lock.member_duration,
                may_be_alone=settings.lock.when_alone == "skip" and cache is not None,
                catch_up=self._catch_up if cache is not None else None,
                lease_groups=settings.lock.lease_groups,
            )
            if self.on_lease and register
            else None
        )
        self._lease_events = LeaseEvents(self.locks, self.members)
        #: The locks DynamicResources writes new allocations under (network-attached pools'
        #: Leases live in `lease_namespace`).
        self.devices = DeviceLocks(kube, self.locks, lease_namespace, settings.lock)
        self.devices.known_for = self._known_for
        self.devices.lock_keys = self.lock_keys
        self.devices.members = self.members
        self._queues = {}

    async def release_all(self, timeout: float = RELEASE_ALL_SECONDS) -> dict[str, str]:
        """Stopping: every node lock and device pool lock of this instance let go at once,
        within `timeout` seconds; returns those left (lock key or pool Lease -> value)."""
        nodes, pools = await asyncio.gather(
            self.locks.release_all(timeout), self.devices.release_all(timeout)
        )
        return {**nodes, **pools}

    def observe_node(self, name: str, annotations: Mapping[str, str]) -> None:
        """A node as the informer shows it: its lock, when the lock lives on the Node."""
        if not self.on_lease:
            self.locks.observe(name, annotations, watched=True)

    def forget_node(self, name: str) -> None:
        self._node_uids.pop(name, None)
        self._records.pop(name, None)
        self.locks.forget_node(name)

    def needs_lock(self, pod: PodInfo) -> bool:
        policy = self.settings.policy
        if policy == "all":
            return True
        if policy == "none":
            return False
        return any(pod.requests.get(r, 0) > 0 for r in self.settings.device_resources)

    async def bind(self, fw: Framework, state: CycleState, pod: PodInfo, node: str) -> Status:
        if not self.needs_lock(pod):
            return await fw.bind(state, pod, node)
        members = self.members
        if members is not None:
            if not members.ready() and not await members.wait_ready(MEMBER_WAIT):
                return Status.error(
                    "node lock: the other scheduler instances have not acknowledged this one "
                    f"yet ({', '.join(members.peers()) or 'own member Lease not renewed'})",
                    NODE_LOCK,
                )
            if (
                members.alone
                and not any(self.locks.foreign(key) for key in self.lock_keys(node))
                and node not in self._queues
            ):
                return await self._bind_alone(members, fw, state, pod, node)
        return await self._queued(fw, state, pod, node)

    async def _bind_alone(
        self, members: Members, fw: Framework, state: CycleState, pod: PodInfo, node: str
    ) -> Status:
        """A bind without the node's lock (no other instance shares the nodes), cut off in
        time for the others' count of our member Lease (see `locks.members`)."""
        self._records.pop(node, None)  # no record of ours counts this bind
        state.write(
            BINDING_ANNOTATIONS, phase_annotations(self.annotation_prefix, str(int(time.time())))
        )
        metrics.NODE_LOCK_BINDS_ALONE.inc()
        try:
            async with members.alone_for():
                return await fw.bind(state, pod, node)
        except TimeoutError:
            return Status.error(
                f"node lock on {node}: bind cut off (member Lease not renewed)", NODE_LOCK
            )

    async def _catch_up(self) -> bool:
        """Whether the cache came to hold every pod the API server has on a node now (the
        binds of instances gone, or of others before they acknowledged us, included)."""
        assert self.cache is not None
        listing = await self.kube.get(
            "/api/v1/pods",
            params={
                "fieldSelector": "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
            },
        )
        missing: dict[str, str] = {}
        for raw in listing.get("items") or []:
            meta = raw.get("metadata") or {}
            missing[str(meta.get("uid", ""))] = f"{meta.get('namespace')}/{meta.get('name')}"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CATCH_UP_SECONDS
        checked = False
        while True:
            missing = {uid: key for uid, key in missing.items() if not self.cache.has_pod(uid)}
            if not missing:
                return True
            if loop.time() > deadline:
                log.warning("node_lock_catch_up_incomplete", missing=len(missing))
                return False
            if not checked and loop.time() > deadline - CATCH_UP_SECONDS + 2.0:
                checked = True  # deleted since the list: nothing to wait for
                for uid, key in list(missing.items()):
                    namespace, _, name = key.partition("/")
                    try:
                        pod = await self.kube.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
                    except KubeError as exc:
                        if exc.not_found:
                            del missing[uid]
                            continue
                        raise
                    if (pod.get("metadata") or {}).get("uid") != uid:
                        del missing[uid]
            await asyncio.sleep(0.1)
