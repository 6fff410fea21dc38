"""Builders of DRA objects for the tests (API JSON, as the informers receive it)."""

from __future__ import annotations

from typing import Any

DRIVER = "gpu.example.com"
Json = dict[str, Any]


def device(name: str, **attributes: Any) -> Json:
    """A device; `attributes` by name (str, bool, int; `v_` prefix for a version), and
    `capacity` as a dict of quantities."""
    capacity = attributes.pop("capacity", {})
    attrs: Json = {}
    for key, value in attributes.items():
        if key.startswith("v_"):
            attrs[key[2:]] = {"version": value}
        elif isinstance(value, bool):
            attrs[key] = {"bool": value}
        elif isinstance(value, int):
            attrs[key] = {"int": value}
        else:
            attrs[key] = {"string": value}
    out: Json = {"name": name, "attributes": attrs}
    if capacity:
        out["capacity"] = {k: {"value": v} for k, v in capacity.items()}
    return out


def slice_(
    name: str,
    devices: list[Json],
    *,
    node: str | None = None,
    pool: str | None = None,
    driver: str = DRIVER,
    generation: int = 1,
    count: int = 1,
    all_nodes: bool = False,
    node_selector: Json | None = None,
    rv: str = "1",
) -> Json:
    spec: Json = {
        "driver": driver,
        "pool": {
            "name": pool or node or name,
            "generation": generation,
            "resourceSliceCount": count,
        },
        "devices": devices,
    }
    if node is not None:
        spec["nodeName"] = node
    if all_nodes:
        spec["allNodes"] = True
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    return {"metadata": {"name": name, "resourceVersion": rv}, "spec": spec}


def device_class(name: str, *selectors: str, config: list[Json] | None = None) -> Json:
    spec: Json = {"selectors": [{"cel": {"expression": s}} for s in selectors]}
    if config:
        spec["config"] = config
    return {"metadata": {"name": name, "resourceVersion": "1"}, "spec": spec}


def exactly(
    name: str,
    klass: str = "gpu",
    count: int = 1,
    *selectors: str,
    mode: str = "ExactCount",
    admin: bool | None = None,
) -> Json:
    body: Json = {"deviceClassName": klass, "allocationMode": mode}
    if mode == "ExactCount":
        body["count"] = count
    if selectors:
        body["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    if admin is not None:
        body["adminAccess"] = admin
    return {"name": name, "exactly": body}


def first_available(name: str, *subs: tuple[str, str, int]) -> Json:
    return {
        "name": name,
        "firstAvailable": [
            {"name": n, "deviceClassName": k, "allocationMode": "ExactCount", "count": c}
            for n, k, c in subs
        ],
    }


def claim(
    name: str,
    *requests: Json,
    namespace: str = "ns",
    uid: str | None = None,
    constraints: list[Json] | None = None,
    allocation: Json | None = None,
    reserved_for: list[Json] | None = None,
    owner: str | None = None,
    rv: str = "1",
) -> Json:
    meta: Json = {
        "name": name,
        "namespace": namespace,
        "uid": uid or f"uid-{name}",
        "resourceVersion": rv,
    }
    if owner is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": owner, "controller": True}
        ]
    devices: Json = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    status: Json = {}
    if allocation is not None:
        status["allocation"] = allocation
    if reserved_for is not None:
        status["reservedFor"] = reserved_for
    return {"metadata": meta, "spec": {"devices": devices}, "status": status}


def allocated(node: str | None, *devices: tuple[str, str]) -> Json:
    """An allocation of (pool, device) pairs, local to `node` (None: everywhere)."""
    out: Json = {
        "devices": {
            "results": [
                {"request": "r", "driver": DRIVER, "pool": p, "device": d} for p, d in devices
            ]
        }
    }
    if node is not None:
        out["nodeSelector"] = {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        }
    return out
