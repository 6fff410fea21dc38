"""`ascheduler explain` from a cold start: the cluster listed into a cache of its own, the pod
read (or taken from a file), and the profile's plugins run over it in a dry run. Nothing is
written to the cluster: the informers list (and are stopped once synced), the event writer is
never started, and every plugin runs with `CycleState.dry_run`."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ascheduler.app import Runtime, build
from ascheduler.binding.leases import LEASE_INFORMER
from ascheduler.config import SchedulerConfig
from ascheduler.explain.core import Capacity, Explanation, capacity, explain_with_extenders
from ascheduler.features import Features
from ascheduler.framework import Registry
from ascheduler.kube import ApiError, KubeClient
from ascheduler.kube.informer import Informer
from ascheduler.model import PodInfo, parse_pod
from ascheduler.model.resources import V1_35, RequestsRule

#: How long listing the cluster may take before explain gives up.
SYNC_TIMEOUT = 120.0


class ExplainError(RuntimeError):
    """What explain cannot do, said for the user (exit status 2)."""


@dataclass
class Report:
    explanation: Explanation
    capacity: Capacity | None = None
    #: Seconds spent listing the cluster and in the dry run (and placing copies).
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = self.explanation.to_dict()
        if self.capacity is not None:
            out["replicas"] = self.capacity.to_dict()
        out["timings"] = {k: round(v, 4) for k, v in self.timings.items()}
        return out


def pod_from_document(doc: Any, namespace: str | None) -> PodInfo:
    """A pod not created yet, from its manifest: the defaults the API server would give it
    (namespace, schedulerName, priority 0) and a stand-in uid."""
    if not isinstance(doc, Mapping) or doc.get("kind", "Pod") != "Pod":
        kind = doc.get("kind") if isinstance(doc, Mapping) else type(doc).__name__
        raise ExplainError(f"expected a Pod manifest, got {kind!r}")
    raw = dict(doc)
    meta = dict(raw.get("metadata") or {})
    name = meta.get("name") or meta.get("generateName") or ""
    if not name:
        raise ExplainError("the manifest has no metadata.name")
    meta["name"] = str(name)
    meta["namespace"] = namespace or meta.get("namespace") or "default"
    meta.setdefault("uid", f"explain/{meta['namespace']}/{meta['name']}")
    meta.setdefault("creationTimestamp", dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    raw["metadata"] = meta
    spec = dict(raw.get("spec") or {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.pop("nodeName", None)
    raw["spec"] = spec
    raw.pop("status", None)
    return parse_pod(raw, keep_raw=True)


async def read_pod(kube: KubeClient, namespace: str, name: str) -> PodInfo:
    try:
        raw = await kube.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
    except ApiError as exc:
        if exc.not_found:
            raise ExplainError(f'pod "{name}" not found in namespace "{namespace}"') from None
        raise ExplainError(f"reading pod {namespace}/{name}: {exc}") from None
    # Kept whole: HTTP extenders are sent the pod.
    return dataclasses.replace(parse_pod(raw), raw=raw)


async def snapshot(config: SchedulerConfig, registry: Registry) -> Runtime:
    """The scheduler's informers, listed once (their watches stopped when all have synced)."""
    runtime = await build(config, registry, writes=False)
    informers: tuple[Informer[Any], ...] = (
        runtime.node_informer,
        runtime.pod_informer,
        # Node-lock Leases are the binder's business: a dry run binds nothing.
        *(i for i in runtime.object_informers if i.name != LEASE_INFORMER),
    )
    tasks = [asyncio.create_task(i.run()) for i in informers]
    try:
        await asyncio.wait_for(
            asyncio.gather(*(i.synced.wait() for i in informers)), timeout=SYNC_TIMEOUT
        )
    except TimeoutError:
        waiting = ", ".join(i.name for i in informers if not i.synced.is_set())
        await runtime.close()
        raise ExplainError(
            f"listing the cluster took over {SYNC_TIMEOUT:.0f}s: {waiting}"
        ) from None
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return runtime


async def explain_cold(
    config: SchedulerConfig,
    registry: Registry,
    pod: PodInfo,
    *,
    profile: str | None = None,
    replicas: int = 0,
    limit: int = 10,
) -> Report:
    """List the cluster, then explain `pod` under `profile` (default: the pod's
    schedulerName) and, with `replicas`, place that many copies one after another."""
    started = time.perf_counter()
    runtime = await snapshot(config, registry)
    try:
        listed = time.perf_counter()
        scheduler = runtime.scheduler
        name = profile or pod.scheduler_name
        fw = scheduler.frameworks.get(name)
        if fw is None:
            known = ", ".join(sorted(scheduler.frameworks))
            raise ExplainError(
                f'no profile "{name}" (the pod\'s schedulerName unless --profile); '
                f"profiles: {known}"
            )
        pod = as_release(pod, fw.handle.features)
        cache = scheduler.cache
        cached = cache.pod(pod.uid)
        if cached is not None:
            # Bound (or placed) already: where it would go now, as if it were not.
            cache.remove_pod(cached)
        pending = pod if not pod.node_name else _unbound(pod)
        report = Report(await explain_with_extenders(fw, pending, cache.table, limit=limit))
        report.explanation.bound_to = pod.node_name
        explained = time.perf_counter()
        if replicas > 0:
            report.capacity = capacity(fw, cache, pending, replicas)
        done = time.perf_counter()
        report.timings = {
            "list": listed - started,
            "dryRun": explained - listed,
            **({"replicas": done - explained} if replicas > 0 else {}),
        }
        return report
    finally:
        await runtime.close()


def as_release(pod: PodInfo, features: Features) -> PodInfo:
    """`pod` read again as the release explain behaves as reads it (known only once the API
    server's version is): a resized pod's requests differ per release (`RequestsRule`).
    The pod was read with the parse's default rule (v1.35's) to find its profile; its raw
    object is kept (what extenders are sent), so nothing is fetched again."""
    rule = RequestsRule.of(features)
    if pod.raw is None or rule == V1_35:
        return pod
    return dataclasses.replace(parse_pod(pod.raw, rule=rule), raw=pod.raw)


def _unbound(pod: PodInfo) -> PodInfo:
    raw = pod.raw
    if raw is not None:
        raw = {**raw, "spec": {k: v for k, v in (raw.get("spec") or {}).items() if k != "nodeName"}}
    return dataclasses.replace(pod, node_name="", raw=raw)
