"""What the Python ceiling does for a pod with ResourceClaims: what a scheduler must write for
its claims, with no scheduling logic, so that a DRA workload's ceiling binds at the plane's
limit for the same API work kube-scheduler does, not for a bare Binding.

The devices come from the ResourceSlices of the ceiling's nodes, listed once, less those the
claims listed at the start already hold; a pod's devices are the next node in turn that has
enough free ones (no CEL, no DeviceClass, no constraints: the benchmark's class selects every
device of its driver). The claims are read from an informer (a LIST, then a WATCH), as
kube-scheduler reads them, and a pod waits for them there as kube-scheduler's PreEnqueue does:
a claim made from a template is the one the pod's `status.resourceClaimStatuses` names.

Per pod, the requests are kube-scheduler's binding cycle for it (`schedule_one.go`'s
`bindingCycle`, the DynamicResources plugin's `bindClaim`): the pod's `nominatedNodeName`
patched (PreBind has work to do), each claim's finalizer added with an update, its
`status.allocation` and `status.reservedFor` written in one status update, then the Binding.
kube-scheduler's one request more per pod is its `Scheduled` Event, which no ceiling sends.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from ascheduler.kube import ApiError, KubeClient, KubeError
from ascheduler.kube.client import STRATEGIC_MERGE_PATCH

#: The claims' API of the plane's releases (1.35-1.37).
DRA = "/apis/resource.k8s.io/v1"
#: What kube-scheduler puts on a claim before allocating it (`resourceapi.Finalizer`).
FINALIZER = "resource.kubernetes.io/delete-protection"

#: A device: (driver, pool, device name).
Device = tuple[str, str, str]


def claim_names(pod: dict[str, Any]) -> list[str] | None:
    """The names of the pod's ResourceClaims; None while one made from a template is not yet
    named in the pod's status (the resourceclaim controller writes it there, after making
    it). A template the controller made no claim for (its status names none) needs none."""
    named = {
        s["name"]: s.get("resourceClaimName")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
    }
    names: list[str] = []
    for ref in pod["spec"].get("resourceClaims") or []:
        if ref.get("resourceClaimName"):
            names.append(ref["resourceClaimName"])
        elif ref["name"] not in named:
            return None
        elif named[ref["name"]]:
            names.append(named[ref["name"]])
    return names


def requests_of(claim: dict[str, Any]) -> list[str]:
    """One request name per device the claim asks for, as its allocation's results name
    them: an `exactly` request's `count` times (one for allocation mode All, which a ceiling
    does not enumerate), a `firstAvailable` request's first subrequest as `request/sub`."""
    names: list[str] = []
    for request in (claim.get("spec") or {}).get("devices", {}).get("requests") or []:
        if request.get("exactly"):
            wanted, name = request["exactly"], request["name"]
        elif request.get("firstAvailable"):
            wanted = request["firstAvailable"][0]
            name = f"{request['name']}/{wanted['name']}"
        else:
            continue
        exact = wanted.get("allocationMode", "ExactCount") == "ExactCount"
        names += [name] * (int(wanted.get("count", 1)) if exact else 1)
    return names


def allocated_node(claim: dict[str, Any]) -> str | None:
    """The node an allocated claim's node selector names (`metadata.name In [node]`, as the
    allocator writes it for node-local devices); None when it is not allocated to one."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    for term in (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or []:
        for field_ in term.get("matchFields") or []:
            if field_.get("key") == "metadata.name" and field_.get("values"):
                return str(field_["values"][0])
    return None


def allocated_devices(claims: Iterable[dict[str, Any]]) -> set[Device]:
    """The devices the claims' allocations hold."""
    held: set[Device] = set()
    for claim in claims:
        allocated = (claim.get("status") or {}).get("allocation") or {}
        for r in (allocated.get("devices") or {}).get("results") or []:
            held.add((r["driver"], r["pool"], r["device"]))
    return held


def allocation(requests: Sequence[str], devices: Sequence[Device], node: str) -> dict[str, Any]:
    """A claim's `status.allocation`: each request's device, and the node they are on."""
    return {
        "devices": {
            "results": [
                {"request": r, "driver": d, "pool": p, "device": n}
                for r, (d, p, n) in zip(requests, devices, strict=True)
            ]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        },
    }


def reservation(pod: dict[str, Any]) -> dict[str, str]:
    """The pod as a claim's consumer (`status.reservedFor`), as kube-scheduler names it."""
    return {"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}


class Devices:
    """The free devices of each node, handed out round-robin over the nodes: the next node in
    turn with enough free devices gives its first ones. Nothing is matched against a device
    class: the benchmark's selects every device of its driver."""

    def __init__(
        self, nodes: Sequence[str], slices: Iterable[dict[str, Any]], taken: set[Device]
    ) -> None:
        self.nodes = list(nodes)
        self.free: dict[str, list[Device]] = {n: [] for n in self.nodes}
        for s in slices:
            spec = s["spec"]
            if spec.get("nodeName") not in self.free:
                continue  # not one of the ceiling's nodes, or not node-local
            for d in spec.get("devices") or []:
                device = (spec["driver"], spec["pool"]["name"], d["name"])
                if device not in taken:
                    self.free[spec["nodeName"]].append(device)
        self.turn = itertools.cycle(range(len(self.nodes))) if self.nodes else iter(())
        #: Set, and replaced, whenever devices come back (`give_back`).
        self.freed = asyncio.Event()

    def give_back(self, claim: dict[str, Any]) -> None:
        """The devices of a claim no longer allocated, free again (those of its node that
        this ceiling hands out: a steady-state run's pods are deleted once bound, and the
        resourceclaim controller then takes their claims' allocations off)."""
        node = allocated_node(claim)
        if node not in self.free:
            return
        allocated = (claim.get("status") or {}).get("allocation") or {}
        for r in (allocated.get("devices") or {}).get("results") or []:
            device = (r["driver"], r["pool"], r["device"])
            if device not in self.free[node]:
                self.free[node].append(device)
        self.freed.set()
        self.freed = asyncio.Event()

    def take(self, count: int) -> tuple[str, list[Device]] | None:
        """The next node in turn with `count` free devices, and those devices, now taken;
        None when no node has that many."""
        for _ in range(len(self.nodes)):
            node = self.nodes[next(self.turn)]
            if taken := self.take_on(node, count):
                return node, taken
            if count == 0:
                return node, []
        return None

    def take_on(self, node: str, count: int) -> list[Device] | None:
        """`count` free devices of `node`, now taken; None when it has fewer (or for none)."""
        free = self.free.get(node, [])
        if count == 0 or len(free) < count:
            return None
        taken, self.free[node] = free[:count], free[count:]
        return taken


@dataclass
class Placement:
    """A pod's node, and for each of its claims the devices it is given there (none for one
    already allocated, which is only reserved)."""

    node: str
    claims: list[tuple[dict[str, Any], list[Device]]] = field(default_factory=list)


def place(devices: Devices, claims: Sequence[dict[str, Any]]) -> Placement | None:
    """Where the pod of these claims goes: the node of one already allocated, else the next
    node in turn with devices enough for all; None when there is none."""
    wanted = [0 if allocated_node(c) else len(requests_of(c)) for c in claims]
    fixed = next((n for c in claims if (n := allocated_node(c))), None)
    if fixed is not None:
        got = devices.take_on(fixed, sum(wanted)) if sum(wanted) else []
        if got is None:
            return None
        node = fixed
    else:
        chosen = devices.take(sum(wanted))
        if chosen is None:
            return None
        node, got = chosen
    placement = Placement(node)
    for claim, count in zip(claims, wanted, strict=True):
        placement.claims.append((claim, got[:count]))
        got = got[count:]
    return placement


class ClaimInformer:
    """Every ResourceClaim, listed and then watched (again from a fresh listing whenever the
    watch ends), by namespace and name; `get` waits for one not seen yet."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        #: Called with a claim's last version once its allocation is gone (taken off, or
        #: the claim deleted).
        self.released: Callable[[dict[str, Any]], None] = lambda claim: None
        self.claims: dict[tuple[str, str], dict[str, Any]] = {}
        self.synced = asyncio.Event()
        self.changed = asyncio.Event()

    async def run(self) -> None:
        while True:
            try:
                listing = await self.kube.get(f"{DRA}/resourceclaims")
                self.claims = {
                    (c["metadata"]["namespace"], c["metadata"]["name"]): c for c in listing["items"]
                }
                self._changed()
                self.synced.set()
                await self._watch(listing["metadata"]["resourceVersion"])
            except (TimeoutError, KubeError, OSError, ValueError) as exc:
                print(f"ceiling: claims watch failed, listing again: {exc!r}", file=sys.stderr)
                await asyncio.sleep(0.5)

    def _changed(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    async def _watch(self, version: str) -> None:
        params = {"watch": "true", "resourceVersion": version, "timeoutSeconds": "300"}
        async with self.kube.session.get(
            f"{self.kube.server}{DRA}/resourceclaims",
            params=params,
            headers=await self.kube.headers(),
        ) as resp:
            self.kube.count("GET", resp.status)
            if resp.status >= 400:
                raise ApiError(resp.status, "", "", method="WATCH", path="resourceclaims")
            async for line in resp.content:
                event = orjson.loads(line)
                claim = event.get("object") or {}
                if event.get("type") == "ERROR":
                    raise ApiError(
                        410, "Expired", str(claim), method="WATCH", path="resourceclaims"
                    )
                meta = claim.get("metadata") or {}
                key = (meta.get("namespace", ""), meta.get("name", ""))
                before = self.claims.get(key) or {}
                if event.get("type") in ("ADDED", "MODIFIED"):
                    self.claims[key] = claim
                    if _allocated(before) and not _allocated(claim):
                        self.released(before)
                    self._changed()
                elif event.get("type") == "DELETED":
                    self.claims.pop(key, None)
                    if _allocated(claim):
                        self.released(claim)

    async def get(self, namespace: str, name: str) -> dict[str, Any]:
        while (claim := self.claims.get((namespace, name))) is None:
            await self.changed.wait()
        return claim


def _allocated(claim: dict[str, Any]) -> bool:
    return bool((claim.get("status") or {}).get("allocation"))


class ClaimWriter:
    """The DRA half of the Python ceiling: its devices, its claim informer, and the writes a
    pod's claims need before its Binding. Started on the first pod with claims."""

    def __init__(self, watch: KubeClient, writes: KubeClient, nodes: Sequence[str]) -> None:
        self.watch = watch
        self.writes = writes
        self.nodes = nodes
        self.informer = ClaimInformer(watch)
        self.devices = Devices(nodes, (), set())
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        slices = await self.watch.get(f"{DRA}/resourceslices")
        self.task = asyncio.create_task(self.informer.run())
        await self.informer.synced.wait()
        taken = allocated_devices(self.informer.claims.values())
        self.devices = Devices(self.nodes, slices["items"], taken)
        self.informer.released = self.devices.give_back

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task

    async def place(
        self, pod: dict[str, Any], names: Sequence[str], wait: float = 60.0
    ) -> Placement | None:
        """The pod's node and devices, its claims read from the informer (waited for);
        while no node has them free, waited for up to `wait` seconds for devices to come
        back."""
        namespace = pod["metadata"]["namespace"]
        claims = [await self.informer.get(namespace, n) for n in names]
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):
                while (placement := place(self.devices, claims)) is None:
                    await self.devices.freed.wait()
                return placement
        return None

    async def write(self, pod: dict[str, Any], placement: Placement) -> None:
        """What kube-scheduler writes before the pod's Binding: its nominated node, then for
        each claim the finalizer and, in one status update, allocation and reservation."""
        meta = pod["metadata"]
        if (pod.get("status") or {}).get("nominatedNodeName") != placement.node:
            await self.writes.patch(
                f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status",
                {"status": {"nominatedNodeName": placement.node}},
                content_type=STRATEGIC_MERGE_PATCH,
            )
        for claim, devices in placement.claims:
            await self._write_claim(pod, claim, devices, placement.node)

    async def _write_claim(
        self, pod: dict[str, Any], claim: dict[str, Any], devices: list[Device], node: str
    ) -> None:
        meta = claim["metadata"]
        path = f"{DRA}/namespaces/{meta['namespace']}/resourceclaims/{meta['name']}"
        requests = requests_of(claim)
        for attempt in range(5):  # kube-scheduler's retry on conflict: read it again, redo
            try:
                status = dict(claim.get("status") or {})
                if devices:
                    if FINALIZER not in (claim["metadata"].get("finalizers") or []):
                        finalizers = [*(claim["metadata"].get("finalizers") or []), FINALIZER]
                        body = {
                            **claim,
                            "metadata": {**claim["metadata"], "finalizers": finalizers},
                        }
                        claim = await self.writes.put(path, body)
                    status["allocation"] = allocation(requests, devices, node)
                status["reservedFor"] = [*(status.get("reservedFor") or []), reservation(pod)]
                await self.writes.put(f"{path}/status", {**claim, "status": status})
                return
            except ApiError as exc:
                if not exc.conflict or attempt == 4:
                    raise
                claim = await self.writes.get(path)
