"""Nodes and pods for every unit test: raw Kubernetes JSON (`node`, `pod`), the records the
scheduler parses from it (`node_info`, `pod_info`), and small drivers that run one plugin over a
`Cache`.

Tests describe nodes and pods the way the API shows them and go through `parse_node` /
`parse_pod`, so what is tested is what the scheduler sees from a watch.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ascheduler.cache import Cache
from ascheduler.features import Features
from ascheduler.framework import (
    Code,
    CycleState,
    FilterResult,
    Handle,
    PreFilterPlugin,
    PreScorePlugin,
)
from ascheduler.model import Node, PodInfo, parse_node, parse_pod
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
    annotations: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    unschedulable: bool = False,
    extra: Mapping[str, str] | None = None,
    declared_features: Sequence[str] | None = None,
    **resources: str,
) -> Json:
    """A Node object with `status.allocatable` = cpu, memory, pods, `extra` and `resources`
    (`**{"nvidia.com/gpu": "8"}`)."""
    spec: Json = {}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    if unschedulable:
        spec["unschedulable"] = True
    meta: Json = {"name": name, "uid": f"uid-{name}", "labels": dict(labels or {})}
    if annotations:
        meta["annotations"] = dict(annotations)
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {}), **resources}
    status: Json = {"allocatable": allocatable}
    if declared_features is not None:
        status["declaredFeatures"] = list(declared_features)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta,
        "spec": spec,
        "status": status,
    }


def node_info(name: str, **fields: Any) -> Node:
    """`node(...)` as the scheduler parses it."""
    return parse_node(node(name, **fields))


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
    namespace: str = "default",
    uid: str | None = None,
    resource_version: str | None = None,
    cpu: str | None = None,
    memory: str | None = None,
    extra: Mapping[str, str] | None = None,
    containers: Sequence[Json] | None = None,
    init_containers: Sequence[Json] = (),
    ports: Sequence[Mapping[str, Any]] = (),
    host_port: int | None = None,
    node_name: str | None = None,
    scheduler_name: str | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
    node_selector: Mapping[str, str] | None = None,
    required: Sequence[Json] | None = None,
    preferred: Sequence[Json] = (),
    priority: int | None = None,
    gates: Sequence[str] = (),
    phase: str | None = None,
    labels: Mapping[str, str] | None = None,
    **spec_fields: Any,
) -> Json:
    """A Pod object (uid `uid-<name>` unless given). `required` is the list of required
    nodeSelectorTerms (None: no such field); `preferred` the preferredDuringScheduling...
    list; `host_port` one container port with that host port; `spec_fields` go into `spec`
    as they are."""
    if host_port is not None:
        ports = [*ports, {"containerPort": 80, "hostPort": host_port}]
    if containers is None:
        containers = [container(cpu=cpu, memory=memory, extra=extra, ports=ports)]
    spec: Json = {"containers": [dict(c) for c in containers]}
    if init_containers:
        spec["initContainers"] = [dict(c) for c in init_containers]
    if node_name:
        spec["nodeName"] = node_name
    if scheduler_name is not None:
        spec["schedulerName"] = scheduler_name
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
    spec.update(spec_fields)
    meta: Json = {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}"}
    if labels is not None:
        meta["labels"] = dict(labels)
    if resource_version is not None:
        meta["resourceVersion"] = resource_version
    body: Json = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    if phase is not None:
        body["status"] = {"phase": phase}
    return body


def pod_info(name: str = "p", **fields: Any) -> PodInfo:
    """`pod(...)` as the scheduler parses it."""
    return parse_pod(pod(name, **fields))


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


def make_cache(
    nodes: Iterable[Json], pods: Iterable[Json] = (), features: Features | None = None
) -> Cache:
    """A cache with `nodes` and the assigned `pods` (each must carry spec.nodeName), behaving
    as `features` (default: the default release's gates)."""
    cache = Cache(features)
    for raw in nodes:
        info = parse_node(raw)
        assert not info.errors, info.errors
        cache.add_node(info)
    for raw in pods:
        info = parsed(raw)
        assert info.node_name, "existing pods must be assigned"
        cache.add_pod(info)
    return cache


def make_plugin(
    name: str,
    cache: Cache,
    args: Mapping[str, Any] | None = None,
    features: Features | None = None,
) -> Any:
    """The in-tree plugin `name`, its `args` decoded as a profile would decode them, behaving
    as `features`' release (the default release's defaults when None)."""
    registration = IN_TREE[name]
    gates = features or Features.defaults()
    return registration.build(
        registration.decode_args(args, "args", gates),
        Handle(
            nodes=cache.table,
            objects=cache.objects,
            storage=cache.storage,
            resources=cache.resources,
            attachments=cache.attachments,
            features=gates,
        ),
    )


def run_filter(plugin: Any, raw_pod: Json, cache: Cache) -> FilterResult | None:
    """PreFilter (where the plugin has one) then Filter, as the framework runs them; a
    PreFilter that says SKIP skips the Filter (None)."""
    state = CycleState()
    info = parsed(raw_pod)
    if isinstance(plugin, PreFilterPlugin):
        _, status = plugin.pre_filter(state, info, cache.table)
        if status.code is Code.SKIP:
            return None
        assert status.ok, status
    return plugin.filter(state, info, cache.table)  # type: ignore[no-any-return]


def explained(plugin: Any, raw_pod: Json, cache: Cache) -> dict[str, list[str]]:
    """PreFilter and Filter as `run_filter`, then the plugin's explanation of each row it
    rejected: {node name: lines}."""
    state = CycleState()
    info = parsed(raw_pod)
    if isinstance(plugin, PreFilterPlugin):
        _, status = plugin.pre_filter(state, info, cache.table)
        assert status.ok, status
    result = plugin.filter(state, info, cache.table)
    if result is None:
        return {}
    return {
        cache.table.names[row]: plugin.explain(state, info, cache.table, row)
        for row in np.flatnonzero(result.rejected).tolist()
    }


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


def random_cluster(seed: int) -> Cache:
    """40 nodes of assorted shapes (some with GPUs, some with nothing) and 120 pods on them,
    some requesting nothing (the non-zero defaults apply): for comparing two ways of computing
    one thing."""
    rng = random.Random(seed)
    cache = Cache()
    for i in range(40):
        alloc: dict[str, str] = {
            "cpu": str(rng.choice([0, 1, 2, 4, 96])),
            "memory": f"{rng.choice([0, 1, 8, 512])}Gi",
            "pods": "110",
            "ephemeral-storage": f"{rng.randint(0, 90)}Gi",
        }
        if rng.random() < 0.4:
            alloc["nvidia.com/gpu"] = str(rng.randint(0, 8))
        cache.add_node(
            parse_node({"metadata": {"name": f"n{i}"}, "status": {"allocatable": alloc}})
        )
    for j in range(120):
        requests = {"cpu": f"{rng.randint(0, 3000)}m", "memory": f"{rng.randint(0, 9000)}Mi"}
        if rng.random() < 0.3:
            requests["nvidia.com/gpu"] = str(rng.randint(1, 3))
        container: dict[str, Any] = {"name": "c", "resources": {"requests": requests}}
        if rng.random() < 0.2:
            container = {"name": "c"}  # no requests: the non-zero defaults apply
        cache.add_pod(
            parse_pod(
                {
                    "metadata": {"name": f"p{j}", "namespace": "x", "uid": f"u{j}"},
                    "spec": {"nodeName": f"n{rng.randrange(40)}", "containers": [container]},
                }
            )
        )
    return cache
