"""Waiting on the real API server, with generous deadlines (a deadline, never a timing check)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypeVar

import aiohttp

from ascheduler.binding.leases import LEASE_GROUP, LEASE_NODE
from ascheduler.devcluster import ControlPlane, versions
from ascheduler.devcluster.plane import PlaneState
from ascheduler.devcluster.processes import ProcessRecord
from ascheduler.features import Release
from ascheduler.kube import ApiError, KubeClient
from ascheduler.locks.keys import DEFAULT_KEY, group_key, is_group_key, lock_lease_name
from ascheduler.locks.memberlease import MEMBER_SELECTOR, parse_member
from ascheduler.locks.settings import DEFAULT_LEASE_GROUPS

T = TypeVar("T")


def plane_since(major: int, minor: int) -> bool:
    """Whether the plane (and so the ascheduler behaving as its release) is `major.minor` or
    later."""
    return Release.parse(versions.release().kubernetes) >= Release(major, minor)


#: What DynamicResources' PostFilter adds to a pod's message before preemption's, for a pod
#: without claims: its reason until 1.36, nothing from 1.37.
NO_NEW_CLAIMS = "" if plane_since(1, 37) else "no new claims to deallocate, "
#: The same for a pod whose claims have nothing to deallocate.
STILL_NOT = "" if plane_since(1, 37) else "still not schedulable, "


async def eventually(
    probe: Callable[[], Awaitable[T]], *, what: str, timeout: float = 60.0, interval: float = 0.2
) -> T:
    """Call `probe` until it returns something truthy; fail naming `what` after `timeout`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: T
    while True:
        last = await probe()
        if last:
            return last
        if loop.time() > deadline:
            raise AssertionError(
                f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})"
            )
        await asyncio.sleep(interval)


async def get_pod(kube: KubeClient, namespace: str, name: str) -> dict[str, Any]:
    return await kube.get(f"/api/v1/namespaces/{namespace}/pods/{name}")


def pause_pod(
    name: str,
    *,
    scheduler_name: str = "ascheduler",
    cpu: str = "100m",
    memory: str = "500Mi",
    extra: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": scheduler_name,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {
                        "requests": {"cpu": cpu, "memory": memory, **(extra or {})},
                        # Extended resources need limits equal to their requests.
                        **({"limits": dict(extra)} if extra else {}),
                    },
                }
            ],
            **spec,
        },
    }


def claiming_pod(
    name: str,
    *,
    claim: str | None = None,
    template: str | None = None,
    scheduler_name: str = "ascheduler",
) -> dict[str, Any]:
    """A small pause pod whose container uses one ResourceClaim: `claim` by name, or one made
    from `template`."""
    body = pause_pod(name, scheduler_name=scheduler_name, cpu="10m", memory="10Mi")
    ref: dict[str, str] = {"name": "dev"}
    if claim is not None:
        ref["resourceClaimName"] = claim
    if template is not None:
        ref["resourceClaimTemplateName"] = template
    body["spec"]["resourceClaims"] = [ref]
    body["spec"]["containers"][0]["resources"]["claims"] = [{"name": "dev"}]
    return body


async def pods_in(kube: KubeClient, namespace: str) -> dict[str, dict[str, Any]]:
    body = await kube.get(f"/api/v1/namespaces/{namespace}/pods")
    return {p["metadata"]["name"]: p for p in body["items"]}


def node_of(pod: dict[str, Any]) -> str:
    return str(pod["spec"].get("nodeName") or "")


def scheduled_condition(pod: dict[str, Any]) -> dict[str, Any] | None:
    for c in pod.get("status", {}).get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return dict(c)
    return None


async def wait_bound(
    kube: KubeClient, namespace: str, names: list[str], *, timeout: float = 60.0
) -> dict[str, str]:
    """Wait until every named pod has a node; returns pod -> node."""

    async def probe() -> dict[str, str] | None:
        pods = await pods_in(kube, namespace)
        placed = {n: node_of(pods[n]) for n in names if n in pods}
        return placed if len(placed) == len(names) and all(placed.values()) else None

    return await eventually(probe, what=f"pods {names[:5]}... bound", timeout=timeout)


async def wait_unschedulable(
    kube: KubeClient, namespace: str, name: str, *, timeout: float = 60.0
) -> str:
    """Wait for PodScheduled=False/Unschedulable; returns its message."""

    async def probe() -> str | None:
        cond = scheduled_condition(await get_pod(kube, namespace, name))
        if cond and cond.get("status") == "False" and cond.get("reason") == "Unschedulable":
            return str(cond.get("message", ""))
        return None

    return await eventually(probe, what=f"pod {name} reported unschedulable", timeout=timeout)


async def events_for(kube: KubeClient, namespace: str, reason: str) -> list[dict[str, Any]]:
    body = await kube.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")
    return [e for e in body["items"] if e.get("reason") == reason]


#: Where schedulers started by the tests keep their node-lock Leases (the default lease
#: namespace).
LOCK_NAMESPACE = "kube-system"


def lease_path(key: str) -> str:
    """The lock Lease of `key`: a node's name, or a lease group's key."""
    return f"/apis/coordination.k8s.io/v1/namespaces/{LOCK_NAMESPACE}/leases/{lock_lease_name(key)}"


async def member_peers(kube: KubeClient) -> dict[str, frozenset[str]]:
    """identity -> the members its member Lease acknowledges, for every member Lease in the
    lock namespace."""
    body = await kube.get(
        f"/apis/coordination.k8s.io/v1/namespaces/{LOCK_NAMESPACE}/leases",
        params={"labelSelector": MEMBER_SELECTOR},
    )
    found = (parse_member(item) for item in body.get("items") or [])
    return {m.identity: m.peers for m in found if m is not None}


async def acknowledged(kube: KubeClient, before: Iterable[str], count: int) -> list[str]:
    """Wait until `count` members not among `before` (identities) have registered and each
    acknowledges the others: from then on none of them binds alone."""
    old = set(before)

    async def probe() -> list[str] | None:
        peers = await member_peers(kube)
        new = sorted(set(peers) - old)
        if len(new) < count:
            return None
        return new if all(set(new) - {m} <= peers[m] for m in new) else None

    return await eventually(probe, what=f"{count} new members acknowledging each other")


async def lock_value(
    kube: KubeClient, node: str, on: str = "lease", key: str = DEFAULT_KEY
) -> str | None:
    """The node's lock as written on its Lease (`on="lease"`; `node` may be a lease group's
    key) or on the Node itself."""
    try:
        obj = await kube.get(lease_path(node) if on == "lease" else f"/api/v1/nodes/{node}")
    except ApiError as exc:
        if exc.not_found and on == "lease":
            return None
        raise
    value = (obj["metadata"].get("annotations") or {}).get(key)
    return None if value is None else str(value)


async def set_lock(
    kube: KubeClient, node: str, value: str | None, on: str = "lease", key: str = DEFAULT_KEY
) -> None:
    """Write (None: remove) a lock value on the node's Lease or on the Node, as a holder
    would; the Lease is made if missing."""
    patch = {"metadata": {"annotations": {key: value}}}
    if on != "lease":
        await kube.patch(f"/api/v1/nodes/{node}", patch)
        return
    try:
        await kube.patch(lease_path(node), patch)
    except ApiError as exc:
        if not exc.not_found:
            raise
        names = {LEASE_GROUP if is_group_key(node) else LEASE_NODE: node}
        annotations = {**names, **({key: value} if value is not None else {})}
        await kube.post(
            lease_path(node).rsplit("/", 1)[0],
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "name": lock_lease_name(node),
                    "labels": {"app.kubernetes.io/managed-by": "ascheduler"},
                    "annotations": annotations,
                },
                "spec": {},
            },
        )


async def lock_annotations(
    kube: KubeClient,
    names: list[str],
    key: str = DEFAULT_KEY,
    groups: Iterable[int] = (DEFAULT_LEASE_GROUPS,),
) -> dict[str, str]:
    """The node lock of each named node that has one, on its Lease or on the Node, and on
    its group's Lease under each of `groups` (keyed by the group's key; by default the
    layout a scheduler takes unless told otherwise)."""
    found = {}
    for node in names:
        for on in ("lease", "node"):
            value = await lock_value(kube, node, on, key)
            if value:
                found[node] = value
        for count in groups:
            group = group_key(node, count)
            value = await lock_value(kube, group, "lease", key)
            if value:
                found[group] = value
    return found


async def create_pods(kube: KubeClient, namespace: str, pods: list[dict[str, Any]]) -> None:
    for pod in pods:
        await kube.post(f"/api/v1/namespaces/{namespace}/pods", pod)


@contextmanager
def scheduler(
    plane: ControlPlane,
    state: PlaneState,
    name: str,
    scheduler_name: str | None,
    *extra: str,
    env: dict[str, str] | None = None,
    kubeconfig: str | None = None,
    http_address: str | None = "127.0.0.1:0",
    secure_port: int = 0,
) -> Iterator[ProcessRecord]:
    """An `ascheduler run` process of the test's own (profile `scheduler_name`; None when a
    `--config` in `extra` names the profiles), stopped by pid when the block ends; as the
    plane's admin unless `kubeconfig` says otherwise."""
    names = ("--scheduler-name", scheduler_name) if scheduler_name is not None else ()
    record = plane.start_ascheduler(
        name,
        *names,
        "--log-level",
        "debug",
        *extra,
        kubeconfig=kubeconfig,
        http_address=http_address,
        secure_port=secure_port,
        env={**os.environ, **(env or {})},
    )
    try:
        yield record
    finally:
        plane.stop_process(record)


def stateful_set_body(
    name: str,
    replicas: int,
    pod_spec: dict[str, Any],
    klass: str,
    size: str,
    *,
    parallel: bool = False,
) -> dict[str, Any]:
    """A StatefulSet of `pod_spec` pods (label app=<name>), its first container mounting a
    claim `data` of `klass` per replica (`data-<name>-<i>`)."""
    labels = {"app": name}
    spec: dict[str, Any] = {
        "replicas": replicas,
        "serviceName": name,
        "selector": {"matchLabels": labels},
        "template": {
            "metadata": {"labels": labels},
            "spec": {
                **pod_spec,
                "containers": [
                    {
                        **pod_spec["containers"][0],
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                    }
                ],
            },
        },
        "volumeClaimTemplates": [
            {
                "metadata": {"name": "data"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": klass,
                    "resources": {"requests": {"storage": size}},
                },
            }
        ],
    }
    if parallel:
        spec["podManagementPolicy"] = "Parallel"
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": spec,
    }


async def create_device_class(kube: KubeClient, created: list[str], name: str, driver: str) -> None:
    """A DeviceClass selecting every device of `driver`; its path joins `created` (the
    `cluster_objects` fixture deletes them after the test)."""
    await kube.post(
        "/apis/resource.k8s.io/v1/deviceclasses",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
        },
    )
    created.append(f"/apis/resource.k8s.io/v1/deviceclasses/{name}")


async def fetch(url: str, token: str | None = None) -> tuple[int, str]:
    """GET `url` from a scheduler's HTTP endpoints (with a bearer `token`): (status, body).
    On the secure port the certificate is the self-signed one made at start, not verified,
    as a scraper that skips verification sees it."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            url, headers=headers, ssl=False, timeout=aiohttp.ClientTimeout(total=10)
        ) as resp,
    ):
        return resp.status, await resp.text()


async def serving(base: str) -> bool:
    """Whether the scheduler at `base` answers /readyz 200 (its informers synced)."""
    try:
        status, _ = await fetch(f"{base}/readyz")
    except aiohttp.ClientError:
        return False
    return status == 200


@asynccontextmanager
async def priority_classes(kube: KubeClient, classes: Mapping[str, int]) -> AsyncIterator[None]:
    """PriorityClasses by name and value for the block (one already there is kept as it
    is), deleted after it."""
    path = "/apis/scheduling.k8s.io/v1/priorityclasses"
    for name, value in classes.items():
        try:
            await kube.post(path, {"metadata": {"name": name}, "value": value})
        except ApiError as exc:
            if not exc.conflict:
                raise
    try:
        yield
    finally:
        for name in classes:
            try:
                await kube.request("DELETE", f"{path}/{name}")
            except ApiError as exc:
                if not exc.not_found:
                    raise
