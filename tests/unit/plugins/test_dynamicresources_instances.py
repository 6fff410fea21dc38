"""DynamicResources' PreBind and Unreserve when another instance schedules the same pod: a
reservation is reused only where its allocation admits the node, and a failed cycle undoes
only what it wrote and the pod will not use. The claims and the pod live in a stand-in for
the API server that checks resourceVersions as it does."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from ascheduler.cache import Cache
from ascheduler.framework import CycleState
from ascheduler.kube import ApiError
from ascheduler.model import parse_pod
from ascheduler.model.dra import parse_resource_claim
from ascheduler.plugins.dynamicresources.state import NOT_AVAILABLE
from tests.kit import make_plugin
from tests.unit.dra.helpers import allocated, claim, exactly
from tests.unit.plugins.test_dynamicresources import claiming, cluster

NAME = "DynamicResources"
CLAIM = "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/a"
POD = "/api/v1/namespaces/ns/pods/x"
UID = "pod-uid"


class Answer:
    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body

    def json(self) -> dict[str, Any]:
        return self.body


class Api:
    """GET and PUT (of an object or its status) on objects by path; a PUT whose
    resourceVersion is not the stored one answers 409. `patch` removes a reservedFor entry
    as the strategic merge patch kube-scheduler's Unreserve sends does."""

    def __init__(self, **objects: dict[str, Any]) -> None:
        self.objects = {path: copy.deepcopy(obj) for path, obj in objects.items()}
        self.writes: list[str] = []

    def claim(self) -> Any:
        return parse_resource_claim(copy.deepcopy(self.objects[CLAIM]))

    async def get(self, path: str, **_: Any) -> dict[str, Any]:
        if path not in self.objects:
            raise ApiError(404, "NotFound", "not found", method="GET", path=path)
        return copy.deepcopy(self.objects[path])

    async def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> Answer:
        assert method == "PUT", method
        self.writes.append(path)
        target = path.removesuffix("/status")
        current = self.objects[target]
        rv = current["metadata"]["resourceVersion"]
        if body["metadata"].get("resourceVersion") != rv:
            raise ApiError(
                409, "Conflict", "the object has been modified", method=method, path=path
            )
        new = copy.deepcopy(current)
        if path.endswith("/status"):
            new["status"] = copy.deepcopy(body.get("status") or {})
        else:
            new["metadata"] = copy.deepcopy(body["metadata"])
        new["metadata"]["resourceVersion"] = str(int(rv) + 1)
        self.objects[target] = new
        return Answer(copy.deepcopy(new))

    async def patch(self, path: str, patch: Any, **_: Any) -> dict[str, Any]:
        self.writes.append(path)
        target = self.objects[path.removesuffix("/status")]
        gone = {e["uid"] for e in patch["status"]["reservedFor"]}
        status = target.setdefault("status", {})
        status["reservedFor"] = [r for r in status.get("reservedFor") or [] if r["uid"] not in gone]
        target["metadata"]["resourceVersion"] = str(int(target["metadata"]["resourceVersion"]) + 1)
        return copy.deepcopy(target)


def me() -> dict[str, Any]:
    return {"resource": "pods", "name": "x", "uid": UID}


def pod(node: str = "") -> dict[str, Any]:
    return {"metadata": {"name": "x", "namespace": "ns", "uid": UID}, "spec": {"nodeName": node}}


def reserved_cycle(cache: Cache, api: Api, node: str) -> tuple[Any, CycleState, Any]:
    """This instance's cycle for pod x up to Reserve on `node`, claim a unallocated."""
    plugin = make_plugin(NAME, cache)
    plugin.handle.kube = api
    state = CycleState()
    info = parse_pod(claiming("a", uid=UID))
    _, status = plugin.pre_filter(state, info, cache.table)
    assert status.ok, status
    plugin.filter(state, info, cache.table)
    assert plugin.reserve(state, info, node).ok
    return plugin, state, info


def another_instance_wrote(cache: Cache, api: Api, raw: dict[str, Any]) -> None:
    """Another instance's write of claim a, as the API server and then our informer have it."""
    old = api.claim()
    raw["metadata"]["resourceVersion"] = str(int(old.resource_version) + 1)
    api.objects[CLAIM] = copy.deepcopy(raw)
    cache.resources.handlers["ResourceClaim"].on_update(old, parse_resource_claim(raw))


async def settle(plugin: Any) -> None:
    await asyncio.gather(*list(plugin.writer.cleanups))


def start(devices: dict[str, int]) -> tuple[Cache, Api]:
    cache = cluster(devices)
    raw = claim("a", exactly("r"))
    cache.resources.handlers["ResourceClaim"].on_add(parse_resource_claim(raw))
    return cache, Api(**{CLAIM: raw, POD: pod()})


async def test_prebind_refuses_a_reservation_for_another_node() -> None:
    cache, api = start({"n1": 1, "n2": 1})
    plugin, state, info = reserved_cycle(cache, api, "n1")
    another_instance_wrote(
        cache,
        api,
        claim("a", exactly("r"), allocation=allocated("n2", ("n2", "g0")), reserved_for=[me()]),
    )
    status = await plugin.pre_bind(state, info, "n1")
    assert not status.ok
    assert status.reasons == (f"claim ns/a: {NOT_AVAILABLE}",)
    assert api.writes == []
    # The reservation is the other instance's: this cycle's failure leaves it.
    plugin.unreserve(state, info, "n1")
    await settle(plugin)
    assert api.writes == []
    assert api.claim().reserved_for_pod(UID)


async def test_prebind_reuses_a_reservation_for_its_node_and_a_lost_bind_leaves_it() -> None:
    cache, api = start({"n1": 2})
    plugin, state, info = reserved_cycle(cache, api, "n1")
    another_instance_wrote(
        cache,
        api,
        claim("a", exactly("r"), allocation=allocated("n1", ("n1", "g1")), reserved_for=[me()]),
    )
    assert (await plugin.pre_bind(state, info, "n1")).ok
    assert api.writes == []
    api.objects[POD] = pod("n1")  # the other instance's bind won
    plugin.unreserve(state, info, "n1")
    await settle(plugin)
    assert api.writes == []
    assert api.claim().reserved_for_pod(UID)


async def test_a_reservation_only_write_checks_the_claim_it_finds_after_a_conflict() -> None:
    # Allocated on n1 when the cycle began; by the write it was deallocated and allocated
    # on n2 for another pod (the cycle's version conflicts, the one read back is refused).
    cache, api = start({"n1": 1, "n2": 1})
    on_n1 = claim("a", exactly("r"), allocation=allocated("n1", ("n1", "g0")))
    another_instance_wrote(cache, api, on_n1)
    plugin, state, info = reserved_cycle(cache, api, "n1")
    api.objects[CLAIM]["status"] = {
        "allocation": allocated("n2", ("n2", "g0")),
        "reservedFor": [{"resource": "pods", "name": "y", "uid": "other"}],
    }
    api.objects[CLAIM]["metadata"]["resourceVersion"] = "9"
    status = await plugin.pre_bind(state, info, "n1")
    assert status.reasons == (f"claim ns/a: {NOT_AVAILABLE}",)
    assert not api.claim().reserved_for_pod(UID)


async def test_a_bind_lost_to_another_node_removes_the_allocation_this_cycle_wrote() -> None:
    cache, api = start({"n1": 1, "n2": 1})
    plugin, state, info = reserved_cycle(cache, api, "n1")
    assert (await plugin.pre_bind(state, info, "n1")).ok
    written = api.claim()
    assert written.allocation is not None
    assert written.reserved_for_pod(UID)
    api.objects[POD] = pod("n2")  # another instance bound the pod to n2 first
    plugin.unreserve(state, info, "n1")
    await settle(plugin)
    after = api.claim()
    assert after.allocation is None
    assert after.reserved_for == ()


async def test_a_bind_lost_to_a_node_the_allocation_admits_keeps_it() -> None:
    # The other instance bound the pod to n1 relying on this cycle's allocation.
    cache, api = start({"n1": 1})
    plugin, state, info = reserved_cycle(cache, api, "n1")
    assert (await plugin.pre_bind(state, info, "n1")).ok
    writes = len(api.writes)
    api.objects[POD] = pod("n1")
    plugin.unreserve(state, info, "n1")
    await settle(plugin)
    assert len(api.writes) == writes
    after = api.claim()
    assert after.allocation is not None
    assert after.reserved_for_pod(UID)


async def test_a_failed_cycle_of_a_pending_pod_removes_its_reservation_only() -> None:
    cache, api = start({"n1": 1})
    plugin, state, info = reserved_cycle(cache, api, "n1")
    assert (await plugin.pre_bind(state, info, "n1")).ok
    plugin.unreserve(state, info, "n1")
    await settle(plugin)
    after = api.claim()
    assert after.allocation is not None
    assert after.reserved_for == ()
