"""Extended resources backed by DRA (DRAExtendedResource: beta and on in 1.36, GA in 1.37).

A DeviceClass stands for an extended resource two ways: `spec.extendedResourceName`, and
always its implicit name `deviceclass.resource.kubernetes.io/<class name>`. A pod asking for
such a resource on a node that advertises none of it in allocatable gets devices of the class
instead: kube-scheduler's DynamicResources makes one ResourceClaim for the pod, per node, with
one request per container (`container-<i>-request-<j>`, ExactCount of what the container asks),
allocates it with the pod's own claims, and at PreBind creates it (`<pod>-extended-resources-`,
owned by the pod, annotated `resource.kubernetes.io/extended-resource-claim: "true"`), writes
its allocation and reservation, and records it in the pod's
`status.extendedResourceClaimStatus`. NodeResourcesFit leaves such a resource to DRA on the
nodes that advertise none of it. A node that does advertise it serves it the device-plugin
way: counted against its allocatable by NodeResourcesFit, no devices.

Here: which class backs a resource name (kube's ExtendedResourceCache, rebuilt from the store's
classes when they change), the claim kube-scheduler would make for a pod and a set of
resources, the mappings it writes into the pod's status, and the claim of an earlier cycle.
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ascheduler.dra.store import ResourceObjects
from ascheduler.model import PodInfo
from ascheduler.model.dra import EXACT_COUNT, DeviceClass, ResourceClaim, parse_resource_claim
from ascheduler.model.extended import DEVICE_CLASS_PREFIX, ContainerRequests, is_dra_extended_name

#: The name of the claim while it exists only in memory (not a valid object name, so it
#: never meets a real claim).
IN_MEMORY_NAME: Final = "<extended-resources>"
#: The annotation that marks the claim kube-scheduler creates.
CLAIM_ANNOTATION: Final = "resource.kubernetes.io/extended-resource-claim"


class ExtendedResolver:
    """Which DeviceClass backs an extended resource name (kube's `ExtendedResourceCache`).

    Every class backs its implicit name; an explicit `extendedResourceName` two classes share
    goes to the older one (then the smaller name), as the cache keeps it. (The cache, fed
    class by class, also leaves out the implicit name of a class that lost such a tie when it
    arrived after the winner; a set of classes cannot tell arrival order, so here every class
    keeps its implicit name.)
    """

    def __init__(self, classes: Iterable[DeviceClass]) -> None:
        self._by_name: dict[str, DeviceClass] = {}
        explicit: dict[str, DeviceClass] = {}
        for klass in classes:
            self._by_name[DEVICE_CLASS_PREFIX + klass.name] = klass
            name = klass.extended_resource_name
            if name is None:
                continue
            held = explicit.get(name)
            if held is None or (klass.created, klass.name) < (held.created, held.name):
                explicit[name] = klass
        self._by_name.update(explicit)

    def device_class(self, resource: str) -> DeviceClass | None:
        return self._by_name.get(resource)


_RESOLVERS: weakref.WeakKeyDictionary[ResourceObjects, tuple[int, ExtendedResolver]] = (
    weakref.WeakKeyDictionary()
)


def resolver_for(objects: ResourceObjects) -> ExtendedResolver:
    """The resolver of the store's classes, rebuilt only when they changed."""
    hit = _RESOLVERS.get(objects)
    if hit is not None and hit[0] == objects.class_generation:
        return hit[1]
    resolver = ExtendedResolver(objects.classes.values())
    _RESOLVERS[objects] = (objects.class_generation, resolver)
    return resolver


def backed_requests(pod: PodInfo, resolver: ExtendedResolver) -> dict[str, int]:
    """The pod's requests of extended resources some class backs (none: DRA has nothing
    to do for its extended resources)."""
    return {
        name: value
        for name, value in pod.fit_requests.items()
        if value > 0 and is_dra_extended_name(name) and resolver.device_class(name) is not None
    }


def delegated_names(
    objects: ResourceObjects | None, wanted: Iterable[tuple[str, int]]
) -> frozenset[str]:
    """NodeResourcesFit's `shouldDelegateResourceToDRA`, before the node: the requested
    resources a class backs, which a node advertising none of leaves to DynamicResources
    (None: DRAExtendedResource is off)."""
    if objects is None or not objects.classes:
        return frozenset()
    names = [name for name, value in wanted if value > 0 and is_dra_extended_name(name)]
    if not names:
        return frozenset()
    resolver = resolver_for(objects)
    return frozenset(name for name in names if resolver.device_class(name) is not None)


def class_may_help(pod: PodInfo, old: Any, new: Any) -> bool:
    """NodeResourcesFit's `isSchedulableAfterDeviceClassEvent`: a class added whose implicit
    name the pod requests, or added or updated with an `extendedResourceName` (a new one, for
    an update) the pod requests."""
    if not isinstance(new, DeviceClass):
        return True
    requests = pod.fit_requests
    if isinstance(old, DeviceClass):
        if old.extended_resource_name == new.extended_resource_name:
            return False
    elif DEVICE_CLASS_PREFIX + new.name in requests:
        return True
    return new.extended_resource_name is not None and new.extended_resource_name in requests


def extended_requests(pod: PodInfo) -> dict[str, int]:
    """Every extended-resource request of the pod (kube's `podScalarResources`, filtered)."""
    return {n: v for n, v in pod.fit_requests.items() if v > 0 and is_dra_extended_name(n)}


@dataclass(frozen=True, slots=True)
class RequestMapping:
    """One `status.extendedResourceClaimStatus.requestMappings` entry."""

    container: str
    resource: str
    request: str

    def to_api(self) -> dict[str, str]:
        return {
            "containerName": self.container,
            "resourceName": self.resource,
            "requestName": self.request,
        }


@dataclass(frozen=True, slots=True)
class _Request:
    name: str
    class_name: str
    count: int


@dataclass(slots=True)
class Extended:
    """A pod's extended resources backed by DRA, through one scheduling cycle (DynamicResources'
    state)."""

    #: The in-memory claim's uid (what holds its allocation in flight).
    uid: str
    #: Every extended-resource request of the pod, and those a class backs.
    requests: dict[str, int]
    backed: dict[str, int]
    #: A claim an earlier cycle created for the pod (PostFilter deletes it).
    stale: ResourceClaim | None = None
    #: Its index among the state's claims once Reserve fixed a node that needs it.
    index: int | None = None
    mappings: list[RequestMapping] = field(default_factory=list)


def find_claim(pod: PodInfo, claims: Iterable[ResourceClaim]) -> ResourceClaim | None:
    """The claim an earlier cycle created for the pod (kube's `findExtendedResourceClaim`):
    annotated, and controlled by the pod (its name and uid)."""
    for claim in claims:
        meta = (claim.raw or {}).get("metadata")
        if not isinstance(meta, Mapping):
            continue
        annotations = meta.get("annotations")
        if not isinstance(annotations, Mapping) or annotations.get(CLAIM_ANNOTATION) != "true":
            continue
        refs = meta.get("ownerReferences")
        for ref in refs if isinstance(refs, list) else ():
            if (
                isinstance(ref, Mapping)
                and ref.get("name") == pod.name
                and ref.get("controller") is True
                and ref.get("uid") == pod.uid
            ):
                return claim
    return None


def new_claim_uid() -> str:
    """The temporary uid of the in-memory claim (what marks its allocation in flight)."""
    return str(uuid.uuid4())


def claim_for(
    pod: PodInfo, uid: str, requests: Sequence[tuple[str, str, int]] = ()
) -> ResourceClaim:
    """The claim kube-scheduler makes for the pod: `requests` as (name, class, count)."""
    body: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "namespace": pod.namespace,
            "name": IN_MEMORY_NAME,
            "uid": uid,
            "generateName": f"{pod.name}-extended-resources-",
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pod.name,
                    "uid": pod.uid,
                    "controller": True,
                }
            ],
            "annotations": {CLAIM_ANNOTATION: "true"},
        },
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": name,
                        "exactly": {
                            "deviceClassName": klass,
                            "allocationMode": EXACT_COUNT,
                            "count": count,
                        },
                    }
                    for name, klass, count in requests
                ]
            }
            if requests
            else {}
        },
    }
    return parse_resource_claim(body)


def creation_body(claim: ResourceClaim) -> dict[str, Any]:
    """What PreBind sends to create the claim: its name and uid cleared, no status."""
    raw = dict(claim.raw or {})
    meta = {k: v for k, v in (raw.get("metadata") or {}).items() if k not in ("name", "uid")}
    return {**{k: v for k, v in raw.items() if k != "status"}, "metadata": meta}


def requests_and_mappings(
    containers: Sequence[ContainerRequests],
    resources: Iterable[str],
    resolver: ExtendedResolver,
) -> tuple[list[tuple[str, str, int]], list[RequestMapping]]:
    """kube's `createRequestsAndMappings`: for each resource (sorted), one request per long-
    lived container (a container, or a sidecar init container) asking for it; the init
    containers that run before them reuse the requests of the long-lived containers after
    them first, and share one request, the largest, for what they need beyond; requests
    sorted by name."""
    requests: list[_Request] = []
    mappings: list[RequestMapping] = []
    for resource in sorted(resources):
        klass = resolver.device_class(resource)
        if klass is None:
            continue
        long_lived: dict[int, _Request | None] = {}
        long_mappings: list[RequestMapping] = []
        for c in containers:
            if c.short_lived:
                continue
            req, maps = _container_request(c, resource, klass.name, [])
            long_lived[c.index] = req
            long_mappings += maps
        largest: _Request | None = None
        short_names: set[str] = set()
        short_mappings: list[RequestMapping] = []
        for c in containers:
            if not c.short_lived:
                continue
            later = [long_lived[i] for i in sorted(long_lived) if i >= c.index]
            req, maps = _container_request(c, resource, klass.name, later)
            if req is not None:
                short_names.add(req.name)
                if largest is None or largest.count < req.count:
                    largest = req
            short_mappings += maps
        if largest is not None and len(short_names) > 1:
            short_names.discard(largest.name)
            top = largest.name
            short_mappings = [
                RequestMapping(m.container, m.resource, top) if m.request in short_names else m
                for m in short_mappings
            ]
        if largest is not None:
            requests.append(largest)
        requests += [r for _, r in sorted(long_lived.items()) if r is not None]
        mappings += long_mappings + short_mappings
    requests.sort(key=lambda r: r.name)
    return [(r.name, r.class_name, r.count) for r in requests], mappings


def _container_request(
    c: ContainerRequests, resource: str, klass: str, reusable: Sequence[_Request | None]
) -> tuple[_Request | None, list[RequestMapping]]:
    """kube's `createResourceRequestAndMappings`."""
    wanted = c.extended.get(resource, 0)
    if wanted == 0:
        return None, []
    mappings: list[RequestMapping] = []
    total = 0
    for r in reusable:
        if r is None:
            continue
        total += r.count
        mappings.append(RequestMapping(c.name, resource, r.name))
        if total >= wanted:
            return None, mappings
    name = f"container-{c.index}-request-{c.keys.index(resource)}"
    mappings.append(RequestMapping(c.name, resource, name))
    return _Request(name, klass, wanted - total), mappings
