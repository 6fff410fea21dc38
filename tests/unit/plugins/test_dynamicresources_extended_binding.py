"""DynamicResources' PreBind and Unreserve for extended resources backed by DRA: the claim is
created, allocated, reserved and named in the pod's status; a failed cycle deletes it; and
with several instances binding one pod, only one claim ends up named and kept. The objects
live in a stand-in for the API server that checks resourceVersions as it does."""

from __future__ import annotations

import asyncio
import copy
import itertools
from typing import Any

from ascheduler.dra.extended import CLAIM_ANNOTATION
from ascheduler.features import Features, Release
from ascheduler.framework import CycleState, Diagnosis
from ascheduler.kube import ApiError
from ascheduler.model import parse_pod
from ascheduler.model.dra import FINALIZER, parse_resource_claim
from tests.kit import container, make_plugin, pod
from tests.unit.plugins.test_dynamicresources_extended import GPU, cluster

CLAIMS = "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims"
POD = "/api/v1/namespaces/ns/pods/x"
UID = "pod-uid"
NAME = "DynamicResources"


class Answer:
    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body

    def json(self) -> dict[str, Any]:
        return self.body


def _conflict(method: str, path: str) -> ApiError:
    return ApiError(409, "Conflict", "the object has been modified", method=method, path=path)


class Api:
    """Claims created with generated names, read, updated (object or status) and deleted;
    the pod read and its status patched; writes with a stale resourceVersion answer 409."""

    def __init__(self, raw_pod: dict[str, Any]) -> None:
        self.objects: dict[str, dict[str, Any]] = {POD: copy.deepcopy(raw_pod)}
        self.objects[POD]["metadata"]["resourceVersion"] = "1"
        self.names = itertools.count()
        self.log: list[str] = []
        self.fail_pod_patch = False

    def claims(self) -> dict[str, dict[str, Any]]:
        return {p: o for p, o in self.objects.items() if p.startswith(CLAIMS)}

    async def get(self, path: str, **_: Any) -> dict[str, Any]:
        if path not in self.objects:
            raise ApiError(404, "NotFound", "not found", method="GET", path=path)
        return copy.deepcopy(self.objects[path])

    async def post(self, path: str, body: Any) -> dict[str, Any]:
        assert path == CLAIMS
        assert "name" not in body["metadata"]
        new = copy.deepcopy(body)
        name = f"{body['metadata']['generateName']}{next(self.names)}"
        new["metadata"].update(name=name, uid=f"uid-{name}", resourceVersion="1")
        self.objects[f"{CLAIMS}/{name}"] = new
        self.log.append(f"create {name}")
        return copy.deepcopy(new)

    async def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> Answer:
        assert method == "PUT", method
        return Answer(await self.put(path, body))

    async def put(self, path: str, body: Any) -> dict[str, Any]:
        target = path.removesuffix("/status")
        current = self.objects[target]
        rv = current["metadata"]["resourceVersion"]
        if body["metadata"].get("resourceVersion") != rv:
            raise _conflict("PUT", path)
        new = copy.deepcopy(current)
        if path.endswith("/status"):
            new["status"] = copy.deepcopy(body.get("status") or {})
        else:
            new["metadata"] = copy.deepcopy(body["metadata"])
        new["metadata"]["resourceVersion"] = str(int(rv) + 1)
        self.objects[target] = new
        self.log.append(f"put {path.removeprefix(CLAIMS + '/')}")
        return copy.deepcopy(new)

    async def patch(self, path: str, patch: Any, **_: Any) -> dict[str, Any]:
        assert path == f"{POD}/status"
        target = self.objects[POD]
        if self.fail_pod_patch:
            raise ApiError(500, "InternalError", "boom", method="PATCH", path=path)
        if patch["metadata"]["resourceVersion"] != target["metadata"]["resourceVersion"]:
            raise _conflict("PATCH", path)
        target.setdefault("status", {}).update(copy.deepcopy(patch["status"]))
        target["metadata"]["resourceVersion"] = str(int(target["metadata"]["resourceVersion"]) + 1)
        self.log.append("patch pod status")
        return copy.deepcopy(target)

    async def delete(self, path: str, **_: Any) -> dict[str, Any]:
        if path not in self.objects:
            raise ApiError(404, "NotFound", "not found", method="DELETE", path=path)
        assert FINALIZER not in (self.objects[path]["metadata"].get("finalizers") or [])
        self.log.append(f"delete {path.removeprefix(CLAIMS + '/')}")
        return self.objects.pop(path)


def raw_pod() -> dict[str, Any]:
    return pod("x", namespace="ns", uid=UID, containers=[container("main", extra={GPU: "2"})])


def reserved(api: Api) -> tuple[Any, CycleState, Any]:
    """A cycle of pod x up to Reserve on n1 (its two devices), at 1.37."""
    cache = cluster()
    plugin = make_plugin(NAME, cache, features=Features.defaults(Release(1, 37)))
    plugin.handle.kube = api
    state = CycleState()
    info = parse_pod(raw_pod())
    _, status = plugin.pre_filter(state, info, cache.table)
    assert status.ok, status
    plugin.filter(state, info, cache.table)
    assert plugin.reserve(state, info, "n1").ok
    return plugin, state, info


async def settle(plugin: Any) -> None:
    await asyncio.gather(*list(plugin.writer.cleanups))


async def test_prebind_creates_allocates_reserves_and_names_the_claim() -> None:
    api = Api(raw_pod())
    plugin, state, info = reserved(api)
    pending = state.read(NAME).claims[0].uid
    assert (await plugin.pre_bind(state, info, "n1")).ok
    ((path, claim),) = api.claims().items()
    name = path.rsplit("/", 1)[1]
    assert api.log == [f"create {name}", f"put {name}", f"put {name}/status", "patch pod status"]
    meta = claim["metadata"]
    assert meta["generateName"] == "x-extended-resources-"
    assert meta["annotations"] == {CLAIM_ANNOTATION: "true"}
    assert FINALIZER in meta["finalizers"]
    assert claim["spec"]["devices"]["requests"][0]["exactly"]["count"] == 2
    results = claim["status"]["allocation"]["devices"]["results"]
    assert sorted(r["device"] for r in results) == ["g0", "g1"]
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "x", "uid": UID}]
    assert api.objects[POD]["status"]["extendedResourceClaimStatus"] == {
        "requestMappings": [
            {"containerName": "main", "resourceName": GPU, "requestName": "container-0-request-0"}
        ],
        "resourceClaimName": name,
    }
    assert not plugin.objects.has_pending_allocation(pending)


async def test_a_failed_cycle_deletes_the_claim_it_created() -> None:
    api = Api(raw_pod())
    api.fail_pod_patch = True
    plugin, state, info = reserved(api)
    status = await plugin.pre_bind(state, info, "n1")
    assert not status.ok
    assert status.reasons[0].startswith("update pod ns/x ExtendedResourceClaimStatus: ")
    ((path, _),) = api.claims().items()
    name = path.rsplit("/", 1)[1]
    plugin.unreserve(state, info, "n1")
    await settle(plugin)
    assert api.claims() == {}
    assert api.log[-2:] == [f"put {name}", f"delete {name}"]


async def test_another_instances_claim_named_by_the_pod_wins() -> None:
    api = Api(raw_pod())
    first, first_state, info = reserved(api)
    second, second_state, _ = reserved(api)
    assert (await first.pre_bind(first_state, info, "n1")).ok
    status = await second.pre_bind(second_state, info, "n1")
    assert not status.ok
    assert "(by another scheduler)" in status.reasons[0]
    named = api.objects[POD]["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
    second.unreserve(second_state, info, "n1")
    await settle(second)
    assert list(api.claims()) == [f"{CLAIMS}/{named}"]


async def test_unreserve_keeps_a_claim_the_pod_was_bound_with() -> None:
    api = Api(raw_pod())
    plugin, state, info = reserved(api)
    assert (await plugin.pre_bind(state, info, "n1")).ok
    api.objects[POD]["spec"]["nodeName"] = "n1"  # another instance's bind went through
    plugin.unreserve(state, info, "n1")
    await settle(plugin)
    assert len(api.claims()) == 1


def stale_claim(api: Api, cache: Any) -> str:
    """A claim an earlier cycle created for pod x, in the API server and the cache."""
    name = "x-extended-resources-old"
    raw = {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": "old",
            "resourceVersion": "3",
            "finalizers": [FINALIZER],
            "annotations": {CLAIM_ANNOTATION: "true"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": "x", "uid": UID, "controller": True}
            ],
        },
        "spec": {"devices": {"requests": []}},
    }
    api.objects[f"{CLAIMS}/{name}"] = copy.deepcopy(raw)
    cache.resources.handlers["ResourceClaim"].on_add(parse_resource_claim(raw))
    return name


async def post_filtered(api: Api) -> tuple[Any, str]:
    cache = cluster()
    name = stale_claim(api, cache)
    plugin = make_plugin(NAME, cache, features=Features.defaults(Release(1, 37)))
    plugin.handle.kube = api
    state = CycleState()
    info = parse_pod(raw_pod())
    _, status = plugin.pre_filter(state, info, cache.table)
    assert status.ok, status
    plugin.filter(state, info, cache.table)
    result = plugin.post_filter(state, info, cache.table, Diagnosis(cache.table.n))
    assert result.status.reasons == ("deletion of ResourceClaim completed",)
    await settle(plugin)
    return plugin, name


async def test_postfilter_deletes_an_earlier_cycles_claim() -> None:
    api = Api(raw_pod())
    _, name = await post_filtered(api)
    assert api.claims() == {}
    assert api.log == [f"put {name}", f"delete {name}"]


async def test_postfilter_keeps_the_claim_a_bound_pod_names() -> None:
    bound = raw_pod()
    bound["spec"]["nodeName"] = "n1"
    bound["status"] = {
        "extendedResourceClaimStatus": {"resourceClaimName": "x-extended-resources-old"}
    }
    api = Api(bound)
    _, name = await post_filtered(api)
    assert list(api.claims()) == [f"{CLAIMS}/{name}"]
