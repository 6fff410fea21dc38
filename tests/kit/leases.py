"""An in-memory Lease collection and the client calls member Leases make of it, shared by the
unit tests of node-lock members (`ascheduler.locks.members`) and of shard members
(`ascheduler.shards.members`): several instances, each with its own client, on one store."""

from __future__ import annotations

import asyncio
from typing import Any

from ascheduler.kube import ApiError


class LeaseStore:
    """Leases by name, shared by every instance's client."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {}
        self.writes = 0
        self.down = False
        #: Called just before a DELETE is applied (a write racing with it).
        self.before_delete: Any = None

    def stamp(self, body: dict[str, Any]) -> dict[str, Any]:
        """A stored version: a resourceVersion of its own, as the API server gives."""
        self.writes += 1
        stored = {**body, "metadata": {**body["metadata"], "resourceVersion": str(self.writes)}}
        self.items[body["metadata"]["name"]] = stored
        return dict(stored)


class LeaseClient:
    """One instance's client: POST to the collection `leases`, a merge PATCH of a whole
    body, a DELETE with an optional resourceVersion precondition, a LIST by one label (all
    of them without a selector); every call fails with 503 while the store is down."""

    def __init__(self, store: LeaseStore, leases: str) -> None:
        self.store = store
        self.leases = leases

    def _check(self, method: str, path: str) -> None:
        if self.store.down:
            raise ApiError(503, "ServiceUnavailable", "down", method=method, path=path)

    async def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        await asyncio.sleep(0)
        self._check(method, path)
        if method != "DELETE":
            raise AssertionError(f"unexpected {method} {path}")
        if self.store.before_delete is not None:
            self.store.before_delete()
        name = path.rsplit("/", 1)[-1]
        current = self.store.items.get(name)
        if current is None:
            raise ApiError(404, "NotFound", "no lease", method=method, path=path)
        wanted = ((kw.get("body") or {}).get("preconditions") or {}).get("resourceVersion")
        if wanted and wanted != current["metadata"].get("resourceVersion"):
            raise ApiError(409, "Conflict", "changed", method=method, path=path)
        del self.store.items[name]
        return {}

    async def patch(self, path: str, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
        """A merge patch of a whole Lease body: it replaces what it names."""
        await asyncio.sleep(0)
        self._check("PATCH", path)
        if path.rsplit("/", 1)[-1] not in self.store.items:
            raise ApiError(404, "NotFound", "no lease", method="PATCH", path=path)
        return self.store.stamp(body)

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)
        self._check("POST", path)
        assert path == self.leases
        return self.store.stamp(body)

    async def get(self, path: str, *, params: Any = None) -> dict[str, Any]:
        await asyncio.sleep(0)
        self._check("GET", path)
        assert path == self.leases
        selector = (params or {}).get("labelSelector")
        if not selector:
            return {"items": list(self.store.items.values())}
        key, _, value = selector.partition("=")
        return {
            "items": [
                raw
                for raw in self.store.items.values()
                if raw["metadata"].get("labels", {}).get(key) == value
            ]
        }
