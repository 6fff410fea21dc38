"""An in-memory stand-in for the few API calls node locks make (one node's GET and
resourceVersion-checked merge patch, a pod GET for the dangling check, the LIST of a node's
pods), with faults injected per call. The same paths run against the real plane in
tests/integration/binding/; here, the exact interleavings that plane will not produce on demand.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from ascheduler.kube import ApiError, ConnectionFailed

LEASES = "/apis/coordination.k8s.io/v1/namespaces/"

#: What a fault does to the call it matches:
#: "lost" applies the write and loses its answer; "drop" loses the request itself;
#: "bump" changes the node (a heartbeat) just before the call, so a guarded patch conflicts;
#: "503" answers Service Unavailable without applying anything; "404" (GET) Not Found.
FAULTS = ("lost", "drop", "bump", "503", "404")


@dataclass
class Fault:
    method: str
    action: str
    #: Matches only patches that set (True) or remove (False) the lock; None: any call.
    setting: bool | None = None


@dataclass
class FakeNodeApi:
    patch_delay: float = 0.0
    rv: int = 1
    annotations: dict[str, str] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    #: (namespace, name) -> pod body, for the dangling check
    pods: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    on_patch: Callable[[], None] | None = None
    #: While set and not yet released, GETs wait on it (to interleave something with them).
    gate: asyncio.Event | None = None
    #: Raised by every call while set (a failure that is not the API server's).
    crash: BaseException | None = None
    #: Pod patches to answer 409 before one lands.
    pod_patches: list[str] = field(default_factory=list)
    #: Lock Leases: the lock object is the Lease once it exists (made by a POST), which
    #: answers like the node otherwise; bodies POSTed, in order.
    lease_exists: bool = False
    created: list[dict[str, Any]] = field(default_factory=list)
    #: Every GET path, in order.
    reads: list[str] = field(default_factory=list)
    #: What a LIST of pods answers.
    listed: list[dict[str, Any]] = field(default_factory=list)
    #: The body of every lock write that replaced the object (PUT), in order.
    puts: list[dict[str, Any]] = field(default_factory=list)

    def node(self) -> dict[str, Any]:
        return {
            "metadata": {
                "name": "n",
                "resourceVersion": str(self.rv),
                "annotations": dict(self.annotations),
            },
            "status": {"allocatable": {"pods": "10", "cpu": "10"}},
        }

    def _fault(self, method: str, setting: bool | None) -> str | None:
        for i, fault in enumerate(self.faults):
            if fault.method == method and fault.setting in (None, setting):
                del self.faults[i]
                return fault.action
        return None

    async def get(self, path: str, params: Any = None) -> dict[str, Any]:
        await asyncio.sleep(0)
        if self.gate is not None:
            await self.gate.wait()
        if self.crash is not None:
            raise self.crash
        action = self._fault("GET", None)
        if action == "503":
            raise ApiError(503, "ServiceUnavailable", "down", method="GET", path=path)
        if action == "drop":
            raise ConnectionFailed("GET", path, aiohttp.ServerDisconnectedError())
        if action == "404":
            raise ApiError(404, "NotFound", "gone", method="GET", path=path)
        self.reads.append(path)
        if path.startswith("/api/v1/nodes/"):
            return self.node()
        if LEASES in path:
            if not self.lease_exists:
                raise ApiError(404, "NotFound", "no such lease", method="GET", path=path)
            return self.node()
        if path.startswith("/api/v1/namespaces/"):
            parts = path.split("/")
            pod = self.pods.get((parts[4], parts[6]))
            if pod is None:
                raise ApiError(404, "NotFound", "no such pod", method="GET", path=path)
            return pod
        return {"items": list(self.listed)}

    async def patch(self, path: str, body: Any, content_type: str = "") -> dict[str, Any]:
        await asyncio.sleep(self.patch_delay)
        if self.crash is not None:
            raise self.crash
        if not path.startswith("/api/v1/nodes/") and LEASES not in path:
            # A pod write: the binder has no `patch pods` (its Bindings carry the annotations).
            self.pod_patches.append(path.rsplit("/", 1)[-1])
            raise ApiError(403, "Forbidden", "cannot patch pods", method="PATCH", path=path)
        if LEASES in path and not self.lease_exists:
            raise ApiError(404, "NotFound", "no such lease", method="PATCH", path=path)
        meta = body["metadata"]
        changes = dict(meta["annotations"])
        keys = [k for k in changes if not k.endswith(("-wanted", "-bound"))]
        if not keys:  # another instance asking for the lock (unguarded)
            self.annotations.update({k: v for k, v in changes.items() if v is not None})
            self.log.append("asked")
            self.rv += 1
            return self.node()
        # The lock's key (beside it: the `-wanted` request it clears, the `-bound` record a
        # release leaves).
        (key,) = keys
        value = changes.pop(key)
        action = self._fault("PATCH", value is not None)
        if action == "bump":
            self.rv += 1  # a heartbeat landed between the caller's read and this patch
        if action == "503":
            raise ApiError(503, "ServiceUnavailable", "down", method="PATCH", path=path)
        if action == "drop":
            raise ConnectionFailed("PATCH", path, aiohttp.ServerDisconnectedError())
        if meta.get("resourceVersion") not in (None, str(self.rv)):
            raise ApiError(
                409, "Conflict", "the object has been modified", method="PATCH", path=path
            )
        for other, v in changes.items():
            if v is None:
                self.annotations.pop(other, None)
            else:
                self.annotations[other] = v
        if value is None:
            self.annotations.pop(key, None)
            self.log.append("unlock")
        else:
            self.annotations[key] = value
            self.log.append(f"lock {value.split(',', 1)[-1]}")
        self.rv += 1
        if self.on_patch is not None:
            self.on_patch()
        if action == "lost":
            raise ConnectionFailed("PATCH", path, aiohttp.ServerDisconnectedError())
        return self.node()

    async def put(self, path: str, body: Any) -> dict[str, Any]:
        """A lock write replacing the object: the annotations it changes, applied as the
        guarded patch above would (faults and conflicts alike)."""
        meta = body["metadata"]
        wanted = meta.get("annotations") or {}
        changes: dict[str, str | None] = {
            k: v for k, v in wanted.items() if self.annotations.get(k) != v
        }
        changes.update({k: None for k in self.annotations if k not in wanted})
        self.puts.append(body)
        patch = {"metadata": {"resourceVersion": meta["resourceVersion"], "annotations": changes}}
        return await self.patch(path, patch)

    async def post(self, path: str, body: Any) -> dict[str, Any]:
        await asyncio.sleep(0)
        if self.crash is not None:
            raise self.crash
        self.created.append(body)
        if self.lease_exists:
            raise ApiError(409, "AlreadyExists", "exists", method="POST", path=path)
        self.lease_exists = True
        return self.node()
