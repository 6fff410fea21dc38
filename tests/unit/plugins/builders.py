"""Raw Kubernetes JSON builders and small drivers for running one plugin over a `Cache`.

Tests describe nodes and pods the way the API shows them and go through `parse_node` /
`parse_pod`, so what is tested is what the scheduler sees from a watch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ascheduler.cache import Cache
from ascheduler.framework import Code, CycleState, FilterResult, Handle, PreScorePlugin
from ascheduler.model import parse_node, parse_pod
from ascheduler.model.pod import PodInfo
from ascheduler.plugins import IN_TREE

MI = 2**20
GI = 2**30

Json = dict[str, Any]


def node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: str = "110",
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    unschedulable: bool = False,
    extra: Mapping[str, str] | None = None,
) -> Json:
    """A Node object with `status.allocatable` = cpu, memory, pods and `extra`."""
    spec: Json = {}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": dict(labels or {})},
        "spec": spec,
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})},
        },
    }


def container(
    name: str = "c",
    *,
    cpu: str | None = None,
    memory: str | None = None,
    extra: Mapping[str, str] | None = None,
    ports: Sequence[Mapping[str, Any]] = (),
    restart_policy: str | None = None,
) -> Json:
    """A container; `resources.requests` only holds what is given (absent, not zero)."""
    requests: Json = {}
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    requests.update(extra or {})
    c: Json = {"name": name, "image": "registry.k8s.io/pause:3.10"}
    if requests:
        c["resources"] = {"requests": requests}
    if ports:
        c["ports"] = [dict(p) for p in ports]
    if restart_policy is not None:
        c["restartPolicy"] = restart_policy
    return c


def pod(
    name: str = "p",
    *,
    cpu: str | None = None,
    memory: str | None = None,
    extra: Mapping[str, str] | None = None,
    containers: Sequence[Json] | None = None,
    init_containers: Sequence[Json] = (),
    ports: Sequence[Mapping[str, Any]] = (),
    node_name: str | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
    node_selector: Mapping[str, str] | None = None,
    required: Sequence[Json] | None = None,
    preferred: Sequence[Json] = (),
    priority: int | None = None,
    gates: Sequence[str] = (),
) -> Json:
    """A Pod object. `required` is the list of required nodeSelectorTerms (None: no such
    field); `preferred` the preferredDuringScheduling... list."""
    if containers is None:
        containers = [container(cpu=cpu, memory=memory, extra=extra, ports=ports)]
    spec: Json = {"containers": [dict(c) for c in containers]}
    if init_containers:
        spec["initContainers"] = [dict(c) for c in init_containers]
    if node_name is not None:
        spec["nodeName"] = node_name
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if node_selector is not None:
        spec["nodeSelector"] = dict(node_selector)
    node_affinity: Json = {}
    if required is not None:
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": list(required)
        }
    if preferred:
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = list(preferred)
    if node_affinity:
        spec["affinity"] = {"nodeAffinity": node_affinity}
    if priority is not None:
        spec["priority"] = priority
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": spec,
    }


def on(node_name: str, raw_pod: Json) -> Json:
    """The same pod, assigned to `node_name` (as the watch shows a bound pod)."""
    out = {**raw_pod, "spec": {**raw_pod["spec"], "nodeName": node_name}}
    return out


def expr(key: str, operator: str, *values: str) -> Json:
    return {"key": key, "operator": operator, "values": list(values)}


def term(*expressions: Json, fields: Sequence[Json] = ()) -> Json:
    t: Json = {"matchExpressions": list(expressions)}
    if fields:
        t["matchFields"] = list(fields)
    return t


def parsed(raw_pod: Json) -> PodInfo:
    info = parse_pod(raw_pod)
    assert not info.errors, info.errors
    return info


def make_cache(nodes: Iterable[Json], pods: Iterable[Json] = ()) -> Cache:
    """A cache with `nodes` and the assigned `pods` (each must carry spec.nodeName)."""
    cache = Cache()
    for raw in nodes:
        info = parse_node(raw)
        assert not info.errors, info.errors
        cache.add_node(info)
    for raw in pods:
        info = parsed(raw)
        assert info.node_name, "existing pods must be assigned"
        cache.add_pod(info)
    return cache


def make_plugin(name: str, cache: Cache, args: Mapping[str, Any] | None = None) -> Any:
    """The in-tree plugin `name`, its `args` decoded as a profile would decode them."""
    registration = IN_TREE[name]
    return registration.build(registration.decode_args(args, "args"), Handle(nodes=cache.table))


def run_filter(plugin: Any, raw_pod: Json, cache: Cache) -> FilterResult | None:
    return plugin.filter(CycleState(), parsed(raw_pod), cache.table)  # type: ignore[no-any-return]


def rejected_reasons(result: FilterResult | None, cache: Cache) -> dict[str, list[str]]:
    """{node name: [reasons]} for every rejected node; checks `rejected` is the union."""
    names = cache.table.names
    if result is None:
        return {}
    union = np.zeros(len(names), dtype=np.bool_)
    out: dict[str, list[str]] = {}
    for rejection in result.rejections:
        assert rejection.nodes.shape == (len(names),)
        union |= rejection.nodes
        for row in np.flatnonzero(rejection.nodes):
            out.setdefault(names[int(row)], []).append(rejection.reason)
    assert np.array_equal(union, result.rejected), "rejected must be the union of rejections"
    return {name: sorted(reasons) for name, reasons in out.items()}


def rejection_codes(result: FilterResult | None, cache: Cache) -> dict[tuple[str, str], Code]:
    """{(node name, reason): code} for every rejection."""
    names = cache.table.names
    out: dict[tuple[str, str], Code] = {}
    if result is None:
        return out
    for rejection in result.rejections:
        for row in np.flatnonzero(rejection.nodes):
            out[(names[int(row)], rejection.reason)] = rejection.code
    return out


def run_score(
    plugin: Any, raw_pod: Json, cache: Cache, feasible: Sequence[str] | None = None
) -> dict[str, int] | None:
    """PreScore, Score and NormalizeScore as the framework runs them; None when PreScore
    says SKIP. Returns {node name: score} over `feasible` (default: every node)."""
    table = cache.table
    names = list(table.names) if feasible is None else list(feasible)
    rows = np.array([table.index[n] for n in names], dtype=np.int64)
    state = CycleState()
    info = parsed(raw_pod)
    if isinstance(plugin, PreScorePlugin):
        status = plugin.pre_score(state, info, table, rows)
        if status.code is Code.SKIP:
            return None
        assert status.ok, status
    scores = plugin.score(state, info, table, rows)
    assert scores.shape == rows.shape
    scores = plugin.normalize(state, info, scores)
    return {name: int(s) for name, s in zip(names, scores, strict=True)}
