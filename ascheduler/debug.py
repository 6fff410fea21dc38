"""The running scheduler's view, on its HTTP server: `/debug/pods/NAMESPACE/NAME`,
`/debug/queue`, `/debug/cache` (with `?check=true`, a cache/apiserver consistency check).

* `/debug/pods/NS/NAME`: the pod's last failed attempt as this instance saw it (`Diagnoses`:
  kept compactly per pending pod, dropped once it is bound or deleted), where it waits in the
  queue, and (unless `?now=false`) an explanation on the live cache right now: a dry run of
  its profile's plugins, and its HTTP extenders asked as a cycle asks them (`ascheduler
  explain`'s document), which changes nothing.
* `/debug/queue`: the pending pods per queue, with attempts, backoff left, the plugins that
  rejected them and the cluster events that would move them.
* `/debug/cache`: per-node usage against allocatable, the assumed pods, the node locks held;
  `?check=true` also lists nodes and pods from the API server and reports drift (kube-
  scheduler's cache comparer): nodes or bound pods missing from the cache, pods the cache
  has that the API server does not, pods on another node than the cache says.

They reveal pods and nodes, so they are off unless enabled (`ascheduler.debugEndpoints`,
`--debug-endpoints`): `loopback` serves them on the plain HTTP listener, which must then be
on a loopback address, with no token; `authorized` serves them on the secure port, whose
gate (`ascheduler.auth`) lets through the users the API server authorizes for `get` on the
path, as kube-scheduler's secure port does; grant it with a ClusterRole rule
`nonResourceURLs: ["/debug/*"], verbs: ["get"]`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

import structlog
from aiohttp import web

from ascheduler.model import PodInfo
from ascheduler.model.quantity import format_quantity

if TYPE_CHECKING:
    from ascheduler.kube import KubeClient
    from ascheduler.scheduler import Scheduler

log = structlog.get_logger(__name__)


# -- the endpoints -------------------------------------------------------------------------


class DebugEndpoints:
    """The handlers, over a running scheduler (`attach` adds them to an aiohttp app)."""

    def __init__(
        self,
        scheduler: Scheduler,
        *,
        pods: Callable[[], Mapping[str, PodInfo]],
        kube: KubeClient | None = None,
    ) -> None:
        self.scheduler = scheduler
        #: The pod informer's store (uid -> pod), read at request time.
        self.pods = pods
        self.kube = kube

    def attach(self, app: web.Application) -> None:
        app.router.add_get("/debug/pods/{namespace}/{name}", self.pod)
        app.router.add_get("/debug/queue", self.queue)
        app.router.add_get("/debug/cache", self.cache)

    def _find(self, namespace: str, name: str) -> PodInfo | None:
        for p in self.pods().values():
            if p.name == name and p.namespace == namespace:
                return p
        return None

    async def pod(self, request: web.Request) -> web.Response:
        from ascheduler.explain.core import explain_with_extenders

        namespace, name = request.match_info["namespace"], request.match_info["name"]
        pod = self._find(namespace, name)
        if pod is None:
            return web.json_response(
                {"error": f'pod "{name}" not found in namespace "{namespace}"'}, status=404
            )
        s = self.scheduler
        out: dict[str, Any] = {
            "pod": {"namespace": namespace, "name": name, "uid": pod.uid},
            "profile": pod.scheduler_name if pod.scheduler_name in s.frameworks else "",
            "boundTo": pod.node_name or s.cache.pod_node(pod.uid) or "",
            "assumed": s.cache.is_assumed(pod.uid),
            "queue": s.queue.where(pod.uid),
            "lastAttempt": (s.diagnoses.get(pod.key, pod.uid) if s.diagnoses is not None else None),
            "now": None,
        }
        fw = s.frameworks.get(pod.scheduler_name)
        if fw is None:
            out["error"] = (
                f'schedulerName "{pod.scheduler_name}" is not a profile of this scheduler'
            )
        elif not out["boundTo"] and request.query.get("now", "true") != "false":
            limit = _int(request.query.get("limit"), 10)
            started = time.perf_counter()
            explained = await explain_with_extenders(fw, pod, s.cache.table, limit=limit)
            out["now"] = explained.to_dict()
            out["now"]["timings"] = {"dryRun": round(time.perf_counter() - started, 4)}
        return web.json_response(out)

    async def queue(self, request: web.Request) -> web.Response:
        s = self.scheduler
        queues: dict[str, list[dict[str, Any]]] = {}
        for where, qp, backoff in s.queue.entries():
            fw = s.frameworks.get(qp.pod.scheduler_name)
            plugins = qp.unschedulable_plugins
            events: list[str] = []
            if where == "unschedulable" and fw is not None:
                events = sorted(e.value for e in fw.events_for(plugins))
            queues.setdefault(where, []).append(
                {
                    "pod": qp.pod.key,
                    "uid": qp.pod.uid,
                    "profile": qp.pod.scheduler_name,
                    "attempts": qp.attempts,
                    "backoffSeconds": round(backoff, 3),
                    "rejectedBy": sorted(plugins),
                    "movedBy": events,
                }
            )
        return web.json_response(
            {"pending": s.queue.pending(), "queues": queues, "cycle": s.queue.scheduling_cycle}
        )

    async def cache(self, request: web.Request) -> web.Response:
        s = self.scheduler
        table = s.cache.table
        assumed: dict[str, list[str]] = {}
        for pod, node, is_assumed in s.cache.placements():
            if is_assumed:
                assumed.setdefault(node, []).append(pod.key)
        held: dict[str, str] = {}
        if s.binder is not None:
            held = {node: hold.value for node, hold in s.binder.locks.held.items()}
        nodes = []
        alloc, requested = table.alloc, table.requested
        resources = table.resource_names
        for row, name in enumerate(table.names):
            usage = {}
            for i, resource in enumerate(resources):
                total = int(alloc[i, row])
                used = int(requested[i, row])
                if total or used:
                    usage[resource] = {
                        "requested": format_quantity(resource, used),
                        "allocatable": format_quantity(resource, total),
                    }
            nodes.append(
                {
                    "name": name,
                    "unschedulable": bool(table.unschedulable[row]),
                    "pods": len(table.pods(row)),
                    "usage": usage,
                    "assumed": sorted(assumed.get(name, [])),
                    "lockedBy": held.get(name, ""),
                }
            )
        out: dict[str, Any] = {
            "nodes": nodes,
            "pods": s.cache.pod_count(),
            "assumedPods": s.cache.assumed_count(),
            "nodeLocksHeld": held,
        }
        if request.query.get("check") in ("1", "true"):
            out["consistency"] = await self.compare()
        return web.json_response(out)

    async def compare(self) -> dict[str, Any]:
        if self.kube is None:
            return {"error": "no API client"}
        return await compare_cache(self.scheduler, self.kube)


async def compare_cache(s: Scheduler, kube: KubeClient) -> dict[str, Any]:
    """kube-scheduler's cache comparer, against the API server itself: what the cache
    lacks or has too much of. A pod bound or deleted a moment ago may show up while the
    watch catches up: check again before acting on one entry."""
    nodes_list, pods_list = await asyncio.gather(
        kube.get("/api/v1/nodes"),
        kube.get(
            "/api/v1/pods",
            params={"fieldSelector": "status.phase!=Succeeded,status.phase!=Failed"},
        ),
    )
    api_nodes = {str(n["metadata"]["name"]) for n in nodes_list.get("items", [])}
    cache_nodes = set(s.cache.table.names)
    api_pods: dict[str, tuple[str, str]] = {}
    for raw in pods_list.get("items", []):
        meta, spec = raw.get("metadata") or {}, raw.get("spec") or {}
        if spec.get("nodeName"):
            key = f"{meta.get('namespace')}/{meta.get('name')}"
            api_pods[str(meta.get("uid"))] = (key, str(spec["nodeName"]))
    cached: dict[str, tuple[str, str, bool]] = {
        pod.uid: (pod.key, node, assumed) for pod, node, assumed in s.cache.placements()
    }
    missing = sorted(key for uid, (key, _) in api_pods.items() if uid not in cached)
    redundant = sorted(
        key for uid, (key, _, assumed) in cached.items() if uid not in api_pods and not assumed
    )
    moved = sorted(
        f"{key}: cache {cached[uid][1]}, API server {node}"
        for uid, (key, node) in api_pods.items()
        if uid in cached and cached[uid][1] != node
    )
    drift = {
        "nodesMissing": sorted(api_nodes - cache_nodes),
        "nodesRedundant": sorted(cache_nodes - api_nodes),
        "podsMissing": missing,
        "podsRedundant": redundant,
        "podsOnOtherNode": moved,
    }
    consistent = not any(drift.values())
    if not consistent:
        log.warning("cache_drift", **{k: len(v) for k, v in drift.items()})
    return {
        "consistent": consistent,
        **drift,
        "resourceVersions": {
            "nodes": (nodes_list.get("metadata") or {}).get("resourceVersion", ""),
            "pods": (pods_list.get("metadata") or {}).get("resourceVersion", ""),
        },
    }


#: How many entries of each kind of drift the SIGUSR2 check logs.
LOGGED_DRIFT: Final = 20


async def log_cache_check(s: Scheduler, kube: KubeClient) -> None:
    """What SIGUSR2 does (kube-scheduler's cache dumper and comparer): the cache's size and
    the queue's, then the comparison with the API server, to the log."""
    log.info(
        "cache_dump",
        nodes=s.cache.table.n,
        pods=s.cache.pod_count(),
        assumed_pods=s.cache.assumed_count(),
        pending=s.queue.pending(),
    )
    try:
        result = await compare_cache(s, kube)
    except Exception as exc:
        log.warning("cache_check_failed", error=str(exc))
        return
    if result["consistent"]:
        log.info("cache_consistent", **result["resourceVersions"])
        return
    log.warning(
        "cache_inconsistent",
        **{k: v[:LOGGED_DRIFT] for k, v in result.items() if isinstance(v, list) and v},
    )


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default
