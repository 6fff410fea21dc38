"""`ascheduler binder`: turns BindRequests into Bindings (`--binding bindrequest` mode).

Informers keep the requests, the pods and the node names. Every request that changes is
queued by key and handled by one of `workers` tasks, one at a time per request:

* the decision is `reconcile.decide`'s (bind, succeed, fail, delete, leave);
* a bind goes through `LockedBinder`: under the node's lock when the lock policy asks (the
  pods on the node listed and the fit checked again, the bind phase carried by the Binding),
  as a plain Binding carrying the pod's UID otherwise;
* a bind that fails counts an attempt in the request's status and is tried again after its
  backoff (1, 2, 4 .. 60 s); at `backoffLimit` attempts the request is Failed and the scheduler
  takes the pod back;
* a request whose pod is bound is finished: nothing is written then (the pod says it is
  bound), and the request is deleted `finished_ttl` seconds later, off the path of the binds;
  a Failed one is left for the scheduler and deleted after `retention` seconds if no
  scheduler took it.

Writes of the status carry the request's UID, so a request deleted and written again under the
same name (the pod placed again) is never marked with the old one's outcome.

The process around it (signals, the health server, leader election, the shutdown sequence)
is `runner`'s, shared with `ascheduler run`; `Binding` is what the binder gives it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime as dt
import signal
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import structlog

from ascheduler import heap, metrics, runner
from ascheduler.app import behave_as
from ascheduler.binding.binder import LockedBinder
from ascheduler.binding.reconcile import Act, after_failed_bind, backoff, decide
from ascheduler.cache import Cache
from ascheduler.config import SchedulerConfig
from ascheduler.framework import CycleState, Handle
from ascheduler.framework.profile import PluginRef, multipoint
from ascheduler.framework.runtime import Framework
from ascheduler.http import HealthServer
from ascheduler.kube import KubeClient, KubeError
from ascheduler.kube.client import MERGE_PATCH, RateLimiter
from ascheduler.kube.informer import Informer
from ascheduler.locks import witnessing
from ascheduler.model import Node, PodInfo, parse_node, parse_pod
from ascheduler.model.bindrequest import (
    FAILED,
    PLURAL,
    BindRequest,
    collection_path,
    object_path,
    parse_bind_request,
)
from ascheduler.model.resources import V1_35, RequestsRule
from ascheduler.plugins import IN_TREE
from ascheduler.waits import wait_event

log = structlog.get_logger(__name__)

#: How many requests are handled at once.
DEFAULT_WORKERS: Final = 64
#: How long a Failed request no scheduler took is kept.
DEFAULT_RETENTION: Final = 600.0
#: How long a request whose pod is bound is kept before it is deleted, and how many are
#: deleted a second at most: collecting them stays off the path of the binds.
DEFAULT_FINISHED_TTL: Final = 30.0
DEFAULT_COLLECT_RATE: Final = 100
#: How many finished requests' UIDs are remembered.
FINISHED_KEPT: Final = 100_000


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Pods:
    """The pod informer's handler: pods by `namespace/name`."""

    def __init__(self, changed: Callable[[str], None]) -> None:
        self.by_name: dict[str, PodInfo] = {}
        self._changed = changed

    def on_add(self, pod: PodInfo) -> None:
        self.by_name[pod.key] = pod
        self._changed(pod.key)

    def on_update(self, old: PodInfo, new: PodInfo) -> None:
        self.on_add(new)

    def on_delete(self, pod: PodInfo) -> None:
        if (known := self.by_name.get(pod.key)) is not None and known.uid == pod.uid:
            del self.by_name[pod.key]
        self._changed(pod.key)


class _Nodes:
    def __init__(self) -> None:
        self.names: set[str] = set()
        self.on_node: Callable[[Node], None] = lambda _n: None

    def on_add(self, node: Node) -> None:
        self.names.add(node.name)
        self.on_node(node)

    def on_update(self, old: Node, new: Node) -> None:
        self.on_add(new)

    def on_delete(self, node: Node) -> None:
        self.names.discard(node.name)


class _Requests:
    def __init__(self, changed: Callable[[str], None]) -> None:
        self.by_key: dict[str, BindRequest] = {}
        #: request key -> when this process first saw it Failed (monotonic)
        self.failed_since: dict[str, float] = {}
        self._changed = changed

    def on_add(self, req: BindRequest) -> None:
        self.by_key[req.key] = req
        if req.phase == FAILED:
            self.failed_since.setdefault(req.key, time.monotonic())
        else:
            self.failed_since.pop(req.key, None)
        self._changed(req.key)

    def on_update(self, old: BindRequest, new: BindRequest) -> None:
        self.on_add(new)

    def on_delete(self, req: BindRequest) -> None:
        self.by_key.pop(req.key, None)
        self.failed_since.pop(req.key, None)


@dataclass
class BinderStats:
    bound: int = 0
    already_bound: int = 0
    failed: int = 0
    retried: int = 0
    deleted: int = 0


class RequestBinder:
    def __init__(
        self,
        watch: KubeClient,
        write: KubeClient,
        binder: LockedBinder,
        fw: Framework,
        *,
        workers: int = DEFAULT_WORKERS,
        retention: float = DEFAULT_RETENTION,
        finished_ttl: float = DEFAULT_FINISHED_TTL,
        collect_rate: int = DEFAULT_COLLECT_RATE,
        requests_rule: RequestsRule = V1_35,
    ) -> None:
        """`requests_rule`: how the API server's release reads a resized pod's requests
        (the pods it lists are those the node-lock re-validation fits against)."""
        self.write = write
        self.requests_rule = requests_rule
        self.finished_ttl = finished_ttl
        self.collect_rate = collect_rate
        #: (when, request) bound requests to delete, oldest first
        self._collect: collections.deque[tuple[float, BindRequest]] = collections.deque()
        self._collect_added = asyncio.Event()
        self.binder = binder
        self.fw = fw
        self.workers = workers
        self.retention = retention
        self.stats = BinderStats()
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        self._busy: set[str] = set()
        self._again: set[str] = set()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        #: request UID -> earliest loop time of its next bind attempt (after a failed one)
        self._not_before: dict[str, float] = {}
        #: UIDs of requests this process finished (bound and deleted, or failed): the events
        #: their own writes cause are not handled again (oldest forgotten past FINISHED_KEPT).
        self._finished: dict[str, None] = {}
        self.requests = _Requests(self.enqueue)
        self.pods = _Pods(self.enqueue)  # a request is named after its pod
        self.nodes = _Nodes()
        self.nodes.on_node = lambda n: binder.observe_node(n.name, n.annotations)
        self.informers: tuple[Informer[Any], ...] = (
            Informer(
                watch,
                collection_path(),
                parse=parse_bind_request,
                key=lambda r: r.key,
                version=lambda r: r.resource_version,
                handler=self.requests,
                name=PLURAL,
            ),
            Informer(
                watch,
                "/api/v1/pods",
                parse=lambda obj: parse_pod(obj, rule=requests_rule),
                key=lambda p: p.uid,
                version=lambda p: p.resource_version,
                handler=self.pods,
                name="pods",
            ),
            Informer(
                watch,
                "/api/v1/nodes",
                parse=parse_node,
                key=lambda n: n.name,
                version=lambda n: n.resource_version,
                handler=self.nodes,
                name="nodes",
            ),
            *(i for i in (binder.lease_informer(watch),) if i is not None),
        )
        self.stopping = False
        self._idle = asyncio.Event()
        self._idle.set()

    # -- the work queue --------------------------------------------------------------------

    def enqueue(self, key: str) -> None:
        if self.stopping:
            return
        if key in self._busy:
            self._again.add(key)  # handled once more when the worker is done with it
        elif key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def _later(self, key: str, delay: float) -> None:
        """Handle the request named `key` again in `delay` seconds."""
        loop = asyncio.get_running_loop()
        if (old := self._timers.pop(key, None)) is not None:
            old.cancel()
        self._timers[key] = loop.call_later(delay, self._due, key)

    def _due(self, key: str) -> None:
        self._timers.pop(key, None)
        self.enqueue(key)

    def pending(self) -> int:
        """Requests not bound yet (a finished one waiting to be collected is not)."""
        return sum(
            1 for r in self.requests.by_key.values() if r.pending and r.uid not in self._finished
        )

    def in_flight(self) -> int:
        return len(self._busy)

    async def work(self) -> None:
        """One worker, until cancelled."""
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            self._busy.add(key)
            self._idle.clear()
            try:
                await self.handle(key)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("bind_request_crashed", request=key)
                self._later(key, backoff(3))
            finally:
                self._busy.discard(key)
                if key in self._again:
                    self._again.discard(key)
                    self.enqueue(key)
                if not self._busy:
                    self._idle.set()

    # -- one request -----------------------------------------------------------------------

    def _finish(self, req: BindRequest) -> None:
        self._not_before.pop(req.uid, None)
        self._finished[req.uid] = None
        if len(self._finished) > FINISHED_KEPT:
            del self._finished[next(iter(self._finished))]

    async def handle(self, key: str) -> None:
        req = self.requests.by_key.get(key)
        if req is None or (req.uid in self._finished and req.phase != FAILED):
            return  # (a Failed one still comes back here to be collected)
        pod = self.pods.by_name.get(req.pod_key)
        if pod is None and req.pending:
            pod = await self._read_pod(req)  # the informer may not have it yet
        failed_age = time.monotonic() - self.requests.failed_since.get(key, time.monotonic())
        decision = decide(
            req,
            pod,
            node_exists=req.node in self.nodes.names,
            failed_age=failed_age,
            retention=self.retention,
        )
        log.debug(
            "bind_request_decided",
            request=key,
            uid=req.uid,
            phase=req.phase,
            act=decision.act.value,
            reason=decision.reason,
        )
        if decision.act is Act.LEAVE:
            if req.errors:
                log.warning("bind_request_unreadable", request=key, errors=decision.reason)
            elif req.phase == FAILED:  # collected if no scheduler takes it meanwhile
                self._later(key, max(self.retention - failed_age, 1.0))
            return
        if decision.act is Act.DELETE:
            await self._delete(req)
            return
        if decision.act is Act.SUCCEED:
            self.stats.already_bound += 1
            await self._succeeded(req)
            return
        if decision.act is Act.FAIL:
            self.stats.failed += 1
            metrics.labelled(metrics.BINDER_REQUESTS, "failed").inc()
            await self._status(req, {"phase": FAILED, "reason": decision.reason})
            self._finish(req)
            return
        assert pod is not None
        wait = self._not_before.get(req.uid, 0.0) - asyncio.get_running_loop().time()
        if wait > 0:
            self._later(key, wait)
            return
        await self._bind(req, pod)

    async def _bind(self, req: BindRequest, pod: PodInfo) -> None:
        started = time.perf_counter()
        status = await self.binder.bind(self.fw, CycleState(), pod, req.node)
        metrics.labelled(metrics.BINDER_BIND_DURATION, "success" if status.ok else "error").observe(
            time.perf_counter() - started
        )
        if status.ok:
            self.stats.bound += 1
            metrics.labelled(metrics.BINDER_REQUESTS, "bound").inc()
            self._not_before.pop(req.uid, None)
            await self._succeeded(req)
            return
        update = after_failed_bind(req, status.message)
        if update["phase"] == FAILED:
            self.stats.failed += 1
            metrics.labelled(metrics.BINDER_REQUESTS, "failed").inc()
        else:
            self.stats.retried += 1
            metrics.labelled(metrics.BINDER_REQUESTS, "retried").inc()
            delay = backoff(update["failedAttempts"])
            self._not_before[req.uid] = asyncio.get_running_loop().time() + delay
            self._later(req.key, delay)
        log.info("bind_attempt_failed", request=req.key, node=req.node, **update)
        await self._status(req, {**update, "lastAttemptTime": _now()})
        if update["phase"] == FAILED:
            self._finish(req)

    async def _succeeded(self, req: BindRequest) -> None:
        """Its pod is bound where it says: nothing more to write now (the pod itself says
        so, to the scheduler too); the request is collected `finished_ttl` seconds later,
        off the path of the binds."""
        self._finish(req)
        self._collect.append((time.monotonic() + self.finished_ttl, req))
        self._collect_added.set()

    async def collect(self) -> None:
        """Delete bound requests once they are `finished_ttl` old, at most `collect_rate` a
        second, until cancelled."""
        while True:
            if not self._collect:
                self._collect_added.clear()
                await self._collect_added.wait()
                continue
            due, _ = self._collect[0]
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            batch = []
            while self._collect and self._collect[0][0] <= time.monotonic():
                batch.append(self._collect.popleft()[1])
                if len(batch) >= self.collect_rate:
                    break
            started = time.monotonic()
            async with asyncio.TaskGroup() as group:
                for req in batch:
                    group.create_task(self._delete_quietly(req))
            await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - started)))

    async def _delete_quietly(self, req: BindRequest) -> None:
        try:
            await self._delete(req)
        except KubeError as exc:
            log.warning("bind_request_not_collected", request=req.key, error=str(exc))

    # -- writes ----------------------------------------------------------------------------

    async def _read_pod(self, req: BindRequest) -> PodInfo | None:
        try:
            path = f"/api/v1/namespaces/{req.namespace}/pods/{req.pod_name}"
            return parse_pod(await self.write.get(path), rule=self.requests_rule)
        except KubeError as exc:
            if exc.not_found:
                return None
            raise

    async def _status(self, req: BindRequest, status: dict[str, Any]) -> bool:
        """Patch the request's status, guarded by its UID; False if it is gone or replaced."""
        body = {"metadata": {"uid": req.uid}, "status": status}
        try:
            await self.write.request(
                "PATCH",
                f"{object_path(req.namespace, req.name)}/status",
                body=body,
                content_type=MERGE_PATCH,
            )
        except KubeError as exc:
            if exc.not_found or exc.conflict:
                return False
            raise
        return True

    async def _delete(self, req: BindRequest) -> None:
        body = {"preconditions": {"uid": req.uid}} if req.uid else None
        try:
            await self.write.request("DELETE", object_path(req.namespace, req.name), body=body)
        except KubeError as exc:
            if not (exc.not_found or exc.conflict):
                raise
            return
        self.stats.deleted += 1

    # -- running ---------------------------------------------------------------------------

    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.informers)

    async def run(self, stop: asyncio.Event, *, grace: float = 30.0) -> None:
        """Informers, then the workers once they synced, until `stop`; then the requests in
        hand are finished (for `grace` seconds at most) and the node locks released."""
        members = self.binder.members
        # Registered before the informers list the cluster: see `locks.members`.
        if members is not None and not await members.join_unless(stop):
            return
        try:
            await self._run(stop, grace)
        finally:
            if members is not None:
                await members.leave()
        with contextlib.suppress(Exception):
            await self.binder.locks.release_all()

    async def _run(self, stop: asyncio.Event, grace: float) -> None:
        async with asyncio.TaskGroup() as group:
            background = [group.create_task(i.run()) for i in self.informers]
            background.append(group.create_task(self.binder.locks.run()))
            if self.binder.members is not None:
                background.append(group.create_task(self.binder.members.run()))
            background.append(group.create_task(self.collect()))
            stopping = group.create_task(stop.wait())
            synced = group.create_task(self._all_synced())
            await asyncio.wait([stopping, synced], return_when=asyncio.FIRST_COMPLETED)
            workers = []
            if not stop.is_set():
                log.info("binder_synced", requests=len(self.requests.by_key))
                heap.freeze()
                workers = [group.create_task(self.work()) for _ in range(self.workers)]
                await stopping
            # Take nothing new; finish the requests in hand (their binds, their status).
            self.stopping = True
            while not self._queue.empty():
                self._queued.discard(self._queue.get_nowait())
            await wait_event(self._idle, grace)
            for task in (*workers, *background, synced):
                task.cancel()
            for timer in self._timers.values():
                timer.cancel()

    async def _all_synced(self) -> None:
        for informer in self.informers:
            await informer.synced.wait()


#: The binder's own defaults where it would otherwise share the scheduler's.
BINDER_LEASE: Final = "ascheduler-binder"
#: Beside the scheduler's 10259, as kube-controller-manager's 10257 and the cloud
#: controller manager's 10258 are.
BINDER_SECURE_PORT: Final = 10260


class Binding:
    """`ascheduler binder`'s service for `runner.run`: the request binder and its clients."""

    def __init__(
        self, service: RequestBinder, watch: KubeClient, write: KubeClient, *, grace: float
    ) -> None:
        self.service = service
        self.watch = watch
        self.write = write
        self.grace = grace

    def signals(self) -> Mapping[signal.Signals, Callable[[], None]]:
        return {}

    def ready(self) -> str:
        return "" if self.service.synced() else "informers have not synced"

    def attach(self, health: HealthServer) -> None:
        pass

    async def standby(self, waiting: Awaitable[bool]) -> bool:
        return await witnessing(self.service.binder.members, waiting)

    async def serve(self, stop: asyncio.Event, health: HealthServer | None) -> None:
        await self.service.run(stop, grace=self.grace)

    async def release(self) -> None:
        # `RequestBinder.run` lets go of its locks once its requests in hand are done, and
        # this finds none; after serving failed, this is what lets them go.
        await self.service.binder.release_all()

    async def close(self) -> None:
        await self.watch.close()
        await self.write.close()


async def main(
    config: SchedulerConfig,
    *,
    workers: int = DEFAULT_WORKERS,
    finished_ttl: float = DEFAULT_FINISHED_TTL,
) -> int:
    """`ascheduler binder`: serve until SIGTERM or SIGINT (one leader among replicas when
    leader election is on); 1 if leadership was lost."""

    async def binding() -> Binding:
        watch = await KubeClient.connect(
            config.kubeconfig, pool_size=8, user_agent="ascheduler-binder/watch"
        )
        limiter = RateLimiter(config.qps, config.burst) if config.qps else None
        write = await KubeClient.connect(
            config.kubeconfig,
            pool_size=max(workers * 2, 16),
            user_agent="ascheduler-binder",
            limiter=limiter,
        )
        # The binder re-validates fits as the scheduler does: at the API server's release.
        try:
            features = (await behave_as(config, write, IN_TREE)).features
        except BaseException:
            await watch.close()
            await write.close()
            raise
        rule = RequestsRule.of(features)
        profile = multipoint(BINDER_LEASE, [PluginRef("PrioritySort"), PluginRef("DefaultBinder")])
        handle = Handle(
            nodes=Cache(features).table, kube=write, profile=BINDER_LEASE, features=features
        )
        fw = Framework(profile, IN_TREE, handle)
        locked = LockedBinder(
            write,
            config.binding,
            lease_namespace=config.leader_election.resource_namespace,
            register=True,  # it always locks, but others must know it shares the nodes
            requests_rule=rule,
        )
        service = RequestBinder(
            watch,
            write,
            locked,
            fw,
            workers=workers,
            finished_ttl=finished_ttl,
            requests_rule=rule,
        )
        metrics.BINDER_PENDING.set_function(service.pending)
        return Binding(service, watch, write, grace=config.shutdown_grace)

    return await runner.run(config, binding, agent="ascheduler-binder")
