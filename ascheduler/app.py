"""Wiring for `ascheduler run`: clients, informers, cache, queue, profiles, the loop.

Three API clients: one for the long-lived watches, one for writes (bindings, events,
conditions, node locks), so a burst of binds never queues behind a watch, and, with leader
election, one for the Lease alone (the runner's), so a renewal never queues behind binds.
Scheduling starts only once both informers have synced, so the first pods are placed on a
complete picture of the cluster.

The process around it (signals, the health server, leader election, the shutdown sequence)
is `runner`'s, shared with `ascheduler binder`; `Scheduling` is what `run` gives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import signal
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import structlog

from ascheduler import features, heap, metrics, runner
from ascheduler.binding.binder import LockedBinder
from ascheduler.cache import Cache
from ascheduler.config import SchedulerConfig, release_problems
from ascheduler.debug import DebugEndpoints, log_cache_check
from ascheduler.diagnoses import Diagnoses
from ascheduler.eventhandlers import EventRouter
from ascheduler.events import StatusWriter
from ascheduler.framework import (
    ClusterEvent,
    ConfigError,
    Handle,
    QueuedPodInfo,
    Registry,
    WaitingPods,
)
from ascheduler.framework.extender import Extenders
from ascheduler.framework.nominated import Nominator
from ascheduler.framework.prebind import PodsInPreBind
from ascheduler.framework.runtime import Framework
from ascheduler.http import HealthServer
from ascheduler.kube import KubeClient
from ascheduler.kube.client import RateLimiter
from ascheduler.kube.informer import Informer
from ascheduler.locks import DeviceLocks, Members, witnessing
from ascheduler.model import Node, PodInfo, dra, parse_node, storage
from ascheduler.model import bindrequest as requests
from ascheduler.model.dra_taints import parse_device_taint_rule
from ascheduler.model.objects import parse_budget, parse_namespace, parse_selecting
from ascheduler.model.podgroups import (
    POD_GROUP_API,
    WORKLOAD_API,
    parse_pod_group,
    parse_scheduling_group,
    parse_workload,
    scheduling_group_api,
)
from ascheduler.model.resources import RequestsRule
from ascheduler.plugins import IN_TREE
from ascheduler.plugins.bindrequest import with_bind_requests
from ascheduler.plugins.gangscheduling import GANG_GATE
from ascheduler.queue import QueueSettings, SchedulingQueue
from ascheduler.scheduler import INVALID_SPEC, Scheduler
from ascheduler.sharding import Sharding
from ascheduler.shards import ShardMembers

log = structlog.get_logger(__name__)

#: The kinds whose selectors give pods their default spread constraints, and where to list them.
OBJECT_KINDS = (
    ("Service", "/api/v1/services"),
    ("ReplicationController", "/api/v1/replicationcontrollers"),
    ("ReplicaSet", "/apis/apps/v1/replicasets"),
    ("StatefulSet", "/apis/apps/v1/statefulsets"),
)

#: The storage objects the volume plugins read: (kind, collection, parser).
STORAGE_KINDS: tuple[tuple[str, str, Callable[[Any], Any]], ...] = (
    ("PersistentVolumeClaim", "/api/v1/persistentvolumeclaims", storage.parse_claim),
    ("PersistentVolume", "/api/v1/persistentvolumes", storage.parse_volume),
    ("StorageClass", "/apis/storage.k8s.io/v1/storageclasses", storage.parse_storage_class),
    ("CSINode", "/apis/storage.k8s.io/v1/csinodes", storage.parse_csi_node),
    ("CSIDriver", "/apis/storage.k8s.io/v1/csidrivers", storage.parse_csi_driver),
    (
        "CSIStorageCapacity",
        "/apis/storage.k8s.io/v1/csistoragecapacities",
        storage.parse_capacity,
    ),
    (
        "VolumeAttachment",
        "/apis/storage.k8s.io/v1/volumeattachments",
        storage.parse_volume_attachment,
    ),
)
#: The Dynamic Resource Allocation objects DynamicResources reads: (kind, collection, parser).
DRA_KINDS: tuple[tuple[str, str, Callable[[Any], Any]], ...] = (
    ("DeviceClass", "/apis/resource.k8s.io/v1/deviceclasses", dra.parse_device_class),
    ("ResourceSlice", "/apis/resource.k8s.io/v1/resourceslices", dra.parse_resource_slice),
    ("ResourceClaim", "/apis/resource.k8s.io/v1/resourceclaims", dra.parse_resource_claim),
    (
        "ResourceClaimTemplate",
        "/apis/resource.k8s.io/v1/resourceclaimtemplates",
        dra.parse_resource_claim_template,
    ),
)

#: kube-scheduler's pod informer leaves out pods that have finished.
POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"


@dataclass
class Runtime:
    """Everything `ascheduler run` builds, exposed for tests and benchmarks."""

    scheduler: Scheduler
    pod_informer: Informer[PodInfo]
    node_informer: Informer[Node]
    #: Namespaces, Services, ReplicationControllers, ReplicaSets, StatefulSets,
    #: PodDisruptionBudgets.
    object_informers: tuple[Informer[Any], ...]
    writer: StatusWriter
    watch_client: KubeClient
    write_client: KubeClient
    #: How long a graceful stop waits for binding cycles in flight.
    shutdown_grace: float = 30.0
    extenders: Extenders | None = None
    #: Sharding mode's members and re-splits (None: off).
    sharding: Sharding | None = None

    async def close(self) -> None:
        await self.scheduler.cache.resources.selectors.close()
        await self.watch_client.close()
        await self.write_client.close()
        if self.extenders is not None:
            await self.extenders.close()


def build_frameworks(
    config: SchedulerConfig,
    registry: Registry,
    cache: Cache,
    kube: KubeClient | None,
    extenders: Extenders | None = None,
    device_locks: DeviceLocks | None = None,
) -> dict[str, Framework]:
    """One framework per profile over the cache, sharing the pods waiting on Permit, the
    nominations, the extenders and the device locks (None: node locks are off)."""
    waiting = WaitingPods()
    in_pre_bind = PodsInPreBind()
    nominator = Nominator()
    frameworks = {}
    for spec in config.profiles:
        if config.binding.mode == "bindrequest":
            spec = with_bind_requests(spec)
        handle = Handle(
            nodes=cache.table,
            waiting_pods=waiting,
            pods_in_pre_bind=in_pre_bind,
            kube=kube,
            profile=spec.scheduler_name,
            objects=cache.objects,
            storage=cache.storage,
            resources=cache.resources,
            attachments=cache.attachments,
            nominator=nominator,
            features=config.features,
            gangs=cache.gangs,
            device_locks=device_locks,
        )
        fw = Framework(
            spec,
            registry,
            handle,
            percentage_of_nodes_to_score=(
                config.percentage_of_nodes_to_score
                if spec.percentage_of_nodes_to_score is None
                else spec.percentage_of_nodes_to_score
            ),
            extenders=extenders,
        )
        frameworks[spec.scheduler_name] = fw
    return frameworks


def build_queue(frameworks: Mapping[str, Framework], settings: QueueSettings) -> SchedulingQueue:
    first = next(iter(frameworks.values()))

    def pre_enqueue(pod: PodInfo):  # type: ignore[no-untyped-def]
        fw = frameworks.get(pod.scheduler_name, first)
        return fw.run_pre_enqueue(pod)

    @lru_cache(maxsize=1024)
    def helps(profile: str, plugins: frozenset[str], event: ClusterEvent) -> bool:
        if INVALID_SPEC in plugins:
            return False  # only an update of the pod itself can help
        fw = frameworks.get(profile, first)
        return event in fw.events_for(plugins)

    def event_filter(qp: QueuedPodInfo, event: ClusterEvent) -> bool:
        return helps(qp.pod.scheduler_name, qp.unschedulable_plugins, event)

    @lru_cache(maxsize=1024)
    def waits_for(profile: str, plugins: frozenset[str]) -> frozenset[ClusterEvent]:
        if INVALID_SPEC in plugins:
            return frozenset()
        return frameworks.get(profile, first).events_for(plugins)

    def events_of(qp: QueuedPodInfo) -> frozenset[ClusterEvent]:
        return waits_for(qp.pod.scheduler_name, qp.unschedulable_plugins)

    def hint(qp: QueuedPodInfo, event: ClusterEvent, old: Any, new: Any) -> bool:
        fw = frameworks.get(qp.pod.scheduler_name, first)
        return fw.hinted(qp.pod, qp.unschedulable_plugins, event, old, new)

    def gate_keys(qp: QueuedPodInfo, event: ClusterEvent) -> frozenset[str] | None:
        fw = frameworks.get(qp.pod.scheduler_name, first)
        return fw.gate_keys(qp.pod, qp.unschedulable_plugins, event)

    queue = SchedulingQueue(
        sort_key=first.queue_sort.sort_key,
        pre_enqueue=pre_enqueue,
        event_filter=event_filter,
        hint=hint,
        events_of=events_of,
        gate_keys=gate_keys,
        settings=settings,
    )
    queue.on_incoming = lambda name, event: metrics.labelled(
        metrics.QUEUE_INCOMING_PODS, name, event
    ).inc()
    queue.on_incoming_entity = lambda name, event: metrics.labelled(
        metrics.QUEUE_INCOMING_ENTITIES, name, event, metrics.POD_ENTITY
    ).inc()
    return queue


async def build(
    config: SchedulerConfig, registry: Registry = IN_TREE, *, writes: bool = True
) -> Runtime:
    """Everything `ascheduler run` runs, not started: its clients, the cache, the profiles,
    the queue, the binder, the scheduler and the informers feeding them. With `writes` off
    (`explain`'s dry runs) no plugin is given the client: none reports on what it lists."""
    watch_client, write_client = await _clients(config)
    try:
        config = await behave_as(config, write_client, registry)
    except BaseException:
        await watch_client.close()
        await write_client.close()
        raise
    extenders = Extenders(config.extenders)
    scheduler = _scheduler(config, registry, write_client, extenders, writes=writes)
    router = EventRouter(scheduler)
    pods, nodes = _pods_and_nodes(watch_client, router, extenders, RequestsRule.of(config.features))
    binder = scheduler.binder
    leases = binder.lease_informer(watch_client) if binder is not None else None
    objects = [
        *_object_informers(watch_client, scheduler.cache, router),
        *([leases] if leases is not None else []),
        *_storage_informers(watch_client, router),
        *_group_informers(watch_client, router, config),
        *_taint_rule_informers(watch_client, router, config),
    ]
    if config.binding.mode == "bindrequest":
        objects.append(_request_informer(watch_client, router))
    sharding = None
    if config.sharding.enabled and writes:  # a dry run neither joins nor splits
        # On the watch client: renewals never queue behind binds or the write rate limit.
        namespace = config.leader_election.resource_namespace
        members = ShardMembers(watch_client, namespace, config.sharding)
        sharding = Sharding(members, scheduler, lambda: pods.store)
        objects.append(members.informer(watch_client))
    # A failed pod is put back as the pod informer has it then (the store is replaced on a
    # relist, so look it up through the informer each time).
    scheduler.pods = lambda uid: pods.store.get(uid)
    return Runtime(
        scheduler,
        pods,
        nodes,
        tuple(objects),
        scheduler.writer,
        watch_client,
        write_client,
        shutdown_grace=config.shutdown_grace,
        extenders=extenders or None,
        sharding=sharding,
    )


async def behave_as(
    config: SchedulerConfig, kube: KubeClient, registry: Registry = IN_TREE
) -> SchedulerConfig:
    """`config` with the release ascheduler behaves as, from the API server's version (or
    `--emulated-version`), and `--feature-gates` applied to that release's defaults;
    ConfigError when the API server's release is not one ascheduler can behave as, the
    gates are wrong there, or that release refuses the configuration (it was read at the
    emulated or default release: a newer one is stricter with some plugin args)."""
    info = await kube.get("/version")
    git_version = str(info.get("gitVersion", "")) if isinstance(info, dict) else ""
    try:
        release, warning = features.cluster_release(git_version, config.emulated_version)
    except ValueError as exc:
        raise ConfigError([str(exc)]) from None
    try:
        gates = features.parse_gates(config.feature_gates, release)
    except ValueError as exc:
        raise ConfigError([f"--feature-gates: {exc} (at release {release})"]) from None
    if gates != config.features:
        problems = release_problems(config, registry, gates)
        if problems:
            raise ConfigError([f"{p} (at release {release})" for p in problems])
    if warning is not None:
        log.warning("release_emulated", detail=warning)
    for note in gates.warnings:
        log.warning("feature_gate_set", detail=note)
    log.info("behaving_as", release=str(release), api_server=git_version, gates=list(gates))
    metrics.behave_as(gates)
    return dataclasses.replace(config, features=gates)


def _scheduler(
    config: SchedulerConfig,
    registry: Registry,
    write_client: KubeClient,
    extenders: Extenders,
    *,
    writes: bool = True,
) -> Scheduler:
    """The cache, the profiles, the queue, the binder and the scheduler over them (the
    plugins given no client when `writes` is off)."""
    cache = Cache(config.features)
    binder = _binder(config, write_client, cache)
    frameworks = build_frameworks(
        config,
        registry,
        cache,
        write_client if writes else None,
        extenders,
        binder.devices if binder is not None else None,
    )
    scheduler = Scheduler(
        frameworks=frameworks,
        cache=cache,
        queue=build_queue(frameworks, config.queue),
        writer=StatusWriter(write_client),
        binding_concurrency=config.binding_concurrency,
        binder=binder,
    )
    scheduler.lock_binds = config.binding.mode == "direct"
    return scheduler


async def _clients(config: SchedulerConfig) -> tuple[KubeClient, KubeClient]:
    """The client for the watches and the one for writes (see the module's docstring)."""
    # Every informer holds a connection for its watch: one each, and room for relists.
    watches = 3 + len(OBJECT_KINDS) + 1 + len(STORAGE_KINDS) + len(DRA_KINDS) + 1 + 3
    if config.sharding.enabled:
        watches += 2  # the members' watch, and their renewals and lists
    watch_client = await KubeClient.connect(
        config.kubeconfig,
        context=config.context,
        pool_size=watches + 4,
        user_agent="ascheduler/watch",
    )
    limiter = RateLimiter(config.qps, config.burst) if config.qps else None
    write_client = await KubeClient.connect(
        config.kubeconfig,
        context=config.context,
        pool_size=config.write_pool,
        user_agent="ascheduler",
        limiter=limiter,
    )
    return watch_client, write_client


def _binder(config: SchedulerConfig, write_client: KubeClient, cache: Cache) -> LockedBinder | None:
    """The binder under node locks (None: the lock policy is `none`)."""
    if config.binding.policy == "none":
        return None
    return LockedBinder(
        write_client,
        config.binding,
        lease_namespace=config.leader_election.resource_namespace,
        cache=cache,
        register=config.binding.mode == "direct",
        requests_rule=RequestsRule.of(config.features),
    )


def _pods_and_nodes(
    watch_client: KubeClient, router: EventRouter, extenders: Extenders, rule: RequestsRule
) -> tuple[Informer[PodInfo], Informer[Node]]:
    # Extenders are sent the pods they are asked about, whole; every pod is read as the
    # release reads a resized pod's requests.
    parse, reparse = extenders.pod_parsers(rule)
    pods: Informer[PodInfo] = Informer(
        watch_client,
        "/api/v1/pods",
        parse=parse,
        key=lambda p: p.uid,
        version=lambda p: p.resource_version,
        handler=router.pods,
        field_selector=POD_FIELD_SELECTOR,
        name="pods",
        reparse=reparse,
        raw_key=lambda raw: str((raw.get("metadata") or {}).get("uid", "")),
    )
    nodes = Informer(
        watch_client,
        "/api/v1/nodes",
        parse=functools.partial(parse_node, keep_raw=extenders.want_raw_nodes),
        key=lambda n: n.name,
        version=lambda n: n.resource_version,
        handler=router.nodes,
        name="nodes",
    )
    return pods, nodes


def _object_informers(
    watch_client: KubeClient, cache: Cache, router: EventRouter
) -> list[Informer[Any]]:
    """Namespaces, the kinds whose selectors spread pods, and PodDisruptionBudgets."""
    objects: list[Informer[Any]] = [
        Informer(
            watch_client,
            "/api/v1/namespaces",
            parse=parse_namespace,
            key=lambda ns: ns.name,
            version=lambda ns: ns.resource_version,
            handler=router.namespaces,
            name="namespaces",
        )
    ]
    for kind, path in OBJECT_KINDS:
        objects.append(
            Informer(
                watch_client,
                path,
                parse=functools.partial(parse_selecting, kind),
                key=lambda o: o.key,
                version=lambda o: o.resource_version,
                handler=cache.objects.handlers[kind],
                name=path.rsplit("/", 1)[-1],
            )
        )
    objects.append(
        Informer(
            watch_client,
            "/apis/policy/v1/poddisruptionbudgets",
            parse=parse_budget,
            key=lambda b: b.key,
            version=lambda b: b.resource_version,
            handler=cache.objects.budget_handler,
            name="poddisruptionbudgets",
        )
    )
    return objects


def _request_informer(watch_client: KubeClient, router: EventRouter) -> Informer[Any]:
    """BindRequests: placements written down and not bound yet, whose pods count as placed."""
    return Informer(
        watch_client,
        requests.collection_path(),
        parse=requests.parse_bind_request,
        key=lambda r: r.key,
        version=lambda r: r.resource_version,
        handler=router.requests,
        name=requests.PLURAL,
    )


def _storage_informers(watch_client: KubeClient, router: EventRouter) -> list[Informer[Any]]:
    """The Dynamic Resource Allocation objects and the storage objects."""
    handlers = {**router.resources, **router.storage}
    return [
        Informer(
            watch_client,
            path,
            parse=parse,
            key=lambda o: f"{o.namespace}/{o.name}" if getattr(o, "namespace", "") else o.name,
            version=lambda o: o.resource_version,
            handler=handlers[kind],
            name=path.rsplit("/", 1)[-1],
        )
        for kind, path, parse in (*DRA_KINDS, *STORAGE_KINDS)
    ]


def taint_rules_path(gates: features.Features) -> str | None:
    """Where kube-scheduler's slice tracker lists DeviceTaintRules: resource.k8s.io/v1 from
    1.37, v1beta2 in 1.36; None while `DRADeviceTaintRules` is off (no informer)."""
    if features.DRA_DEVICE_TAINT_RULES not in gates:
        return None
    version = "v1" if gates.since(1, 37) else "v1beta2"
    return f"/apis/resource.k8s.io/{version}/devicetaintrules"


def _taint_rule_informers(
    watch_client: KubeClient, router: EventRouter, config: SchedulerConfig
) -> list[Informer[Any]]:
    """DeviceTaintRules while their gate is on; optional, as the API server may not serve
    them (1.36 serves v1beta2 only when asked to): then no device has a rule's taint."""
    path = taint_rules_path(config.features)
    if path is None:
        return []
    return [
        Informer(
            watch_client,
            path,
            parse=parse_device_taint_rule,
            key=lambda o: o.name,
            version=lambda o: o.resource_version,
            handler=router.taint_rules,
            name="devicetaintrules",
            optional=True,
        )
    ]


def _group_informers(
    watch_client: KubeClient, router: EventRouter, config: SchedulerConfig
) -> list[Informer[Any]]:
    """Pod groups: scheduler-plugins' PodGroup CRD when it is installed; at 1.35 the Workload
    API (`v1alpha1`) when GangScheduling is on; from 1.36 the `scheduling.k8s.io` PodGroups of
    the release's version when GenericWorkload is on, as kube-scheduler's informers (either
    may be served only later: the informers are optional)."""
    groups: list[tuple[str, Callable[[Any], Any], Any]] = [
        (POD_GROUP_API, parse_pod_group, router.pod_groups)
    ]
    gates = config.features
    pod_groups = scheduling_group_api(gates.release)
    if pod_groups is not None:
        if features.GENERIC_WORKLOAD in gates:
            groups.append((pod_groups, parse_scheduling_group, router.scheduling_groups))
    elif GANG_GATE in gates:
        groups.append((WORKLOAD_API, parse_workload, router.workloads))
    return [
        Informer(
            watch_client,
            path,
            parse=parse_group,
            key=lambda o: o.key,
            version=lambda o: o.resource_version,
            handler=handler,
            name=path.rsplit("/", 1)[-1],
            optional=True,
        )
        for path, parse_group, handler in groups
    ]


async def serve(
    runtime: Runtime, stop: asyncio.Event, *, health: HealthServer | None = None
) -> None:
    """Run until `stop` is set: informers first, scheduling once they have synced; then
    stop taking pods, let binding cycles in flight finish, flush events."""
    informers: tuple[Informer[Any], ...] = (
        runtime.node_informer,
        runtime.pod_informer,
        *runtime.object_informers,
    )

    def synced() -> bool:
        return all(i.synced.is_set() for i in informers)

    def not_ready() -> str:
        if stop.is_set():
            return "shutting down"
        waiting = [i.name for i in informers if not i.synced.is_set()]
        if waiting:
            return f"informers have not synced: {', '.join(waiting)}"
        failing = [i.name for i in informers if not i.healthy]
        if failing:
            return f"watches failing (API server unreachable?): {', '.join(failing)}"
        return ""

    if health is not None:
        health.not_ready = not_ready
    members = _members(runtime)
    # Registered before the informers list the cluster: see `locks.members`.
    if members is not None and not await members.join_unless(stop):
        return
    sharding = runtime.sharding
    try:
        # The first pods are split among the members already there.
        if sharding is None or await sharding.members.join_unless(stop):
            await _serve(runtime, stop, informers, synced, health)
    finally:
        # After the last bind: the others take our share at once.
        if sharding is not None:
            await sharding.members.leave()
        if members is not None:
            await members.leave()


async def _serve(
    runtime: Runtime,
    stop: asyncio.Event,
    informers: tuple[Informer[Any], ...],
    synced: Callable[[], bool],
    health: HealthServer | None,
) -> None:
    scheduler = runtime.scheduler
    loop: asyncio.Task[None] | None = None
    if health is not None:
        health.live = lambda: loop is None or not loop.done()
    async with asyncio.TaskGroup() as group:
        background = [
            *(group.create_task(i.run()) for i in informers),
            group.create_task(runtime.writer.run()),
            group.create_task(scheduler.queue.run_flushes()),
        ]
        if scheduler.binder is not None:
            background.append(group.create_task(scheduler.binder.locks.run()))
            background.append(group.create_task(scheduler.binder.devices.run()))
            if scheduler.binder.members is not None:
                background.append(group.create_task(scheduler.binder.members.run()))
        if runtime.sharding is not None:
            background.append(group.create_task(runtime.sharding.members.run()))
            background.append(group.create_task(runtime.sharding.run()))
        waits = [
            *(group.create_task(i.synced.wait()) for i in informers),
            stopping := group.create_task(stop.wait()),
        ]
        while not stop.is_set() and not synced():
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        if not stop.is_set():
            log.info(
                "informers_synced",
                informers=len(informers),
                nodes=scheduler.cache.table.n,
                pods=len(runtime.pod_informer.store),
            )
            heap.freeze()
            loop = group.create_task(scheduler.run())
            await stopping
        log.info("shutting_down", binding_in_flight=scheduler.binding_in_flight)
        scheduler.queue.close()
        # Pods waiting on Permit have started no bind: they go back now rather than hold
        # the stop (and the locks let go after it) until their group's timeout.
        for fw in scheduler.frameworks.values():
            for waiting in fw.handle.waiting_pods:
                plugin = min(waiting.pending_plugins, default="")
                waiting.reject(plugin, "the scheduler is stopping")
        if loop is not None:
            # The loop returns once the binding cycles in flight have finished; past the
            # grace period they are cancelled (each still unreserves, forgets, unlocks).
            try:
                await asyncio.wait_for(asyncio.shield(loop), timeout=runtime.shutdown_grace)
            except TimeoutError:
                log.warning("shutdown_grace_expired", binding_in_flight=scheduler.binding_in_flight)
                loop.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await loop
        # No bind is in hand any more: every lock of ours goes now, first, before the
        # flushes below can hold the stop up past the supervisor's patience (a lock left
        # behind blocks its nodes for every other instance until it goes stale).
        await release_locks(runtime)
        await scheduler.evictions.drain(timeout=5.0)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(runtime.writer.drain(), timeout=5.0)
        for task in (*background, *waits):
            task.cancel()


async def release_locks(runtime: Runtime) -> None:
    """Every node and device pool lock this instance still holds let go, within
    `RELEASE_ALL_SECONDS` (see `NodeLocks.release_all`); a second call finds none."""
    binder = runtime.scheduler.binder
    if binder is not None:
        await binder.release_all()


def _members(runtime: Runtime) -> Members | None:
    binder = runtime.scheduler.binder
    return binder.members if binder is not None else None


def enable_debug(runtime: Runtime, health: HealthServer, *, authorized: bool) -> None:
    """`/debug/pods`, `/debug/queue` and `/debug/cache` on the secure port (`authorized`)
    or the plain loopback listener; the last failed attempt of each pending pod is kept
    from now on (see `ascheduler.debug`)."""
    app = health.secure_app if authorized else health.plain_app
    if app is None:
        raise ValueError("the debug endpoints' listener is not served")  # config checks it
    scheduler = runtime.scheduler
    diagnoses = scheduler.diagnoses = Diagnoses()
    scheduler.queue.on_delete = diagnoses.forget
    DebugEndpoints(
        scheduler, pods=lambda: runtime.pod_informer.store, kube=runtime.write_client
    ).attach(app)


class Scheduling:
    """`ascheduler run`'s service for `runner.run`: the runtime scheduling while it leads,
    the cache checked on SIGUSR2, the debug endpoints when configured."""

    def __init__(self, runtime: Runtime, config: SchedulerConfig) -> None:
        self.runtime = runtime
        self.debug_endpoints = config.debug_endpoints
        self._checks: set[asyncio.Task[None]] = set()

    def signals(self) -> Mapping[signal.Signals, Callable[[], None]]:
        return {signal.SIGUSR2: self._check_cache}

    def _check_cache(self) -> None:
        runtime = self.runtime
        task = asyncio.get_running_loop().create_task(
            log_cache_check(runtime.scheduler, runtime.write_client)
        )
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)

    def ready(self) -> str:
        return "starting"  # `serve` says more once it runs

    def attach(self, health: HealthServer) -> None:
        health.pending = self.runtime.scheduler.queue.pending
        if self.debug_endpoints != "off":
            enable_debug(self.runtime, health, authorized=self.debug_endpoints == "authorized")

    async def standby(self, waiting: Awaitable[bool]) -> bool:
        return await witnessing(_members(self.runtime), waiting)

    async def serve(self, stop: asyncio.Event, health: HealthServer | None) -> None:
        await serve(self.runtime, stop, health=health)

    async def release(self) -> None:
        await release_locks(self.runtime)

    async def close(self) -> None:
        for task in self._checks:
            task.cancel()
        await self.runtime.close()


async def main(config: SchedulerConfig, registry: Registry = IN_TREE) -> int:
    """`ascheduler run`: schedule until SIGTERM or SIGINT (one leader among replicas when
    leader election is on); 1 if leadership was lost."""

    async def scheduling() -> Scheduling:
        return Scheduling(await build(config, registry), config)

    return await runner.run(config, scheduling, agent="ascheduler")
