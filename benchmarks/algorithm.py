"""The scheduling cycle alone, no network: find a node for a pod and assume it there.

SchedulingBasic's shapes (nodes cpu 4 / memory 32Gi / pods 110; pods 100m / 500Mi), the default
profile, a cache pre-filled with `--initial` pods. The topology shape adds what makes
kube-scheduler slow at scale: nodes in three zones, pods in apps of 20 replicas (arriving app
after app, as ReplicaSets create them), each with a zone spread and per-host anti-affinity
over its app, 10,000 pods placed beforehand. The preemption shapes are timed per attempt, on
nodes full of four 900m pods each: a 3-CPU pod of higher priority (`preemption`), one of the
same priority that finds nothing to evict (`preemption-none`), and 1.37's workload-aware
preemption for a gang of 3-CPU members, one per 50 nodes (`group-preemption`). Pods are
timed in batches; the figure is the median batch's time per pod, with the best batch beside it
(on a shared machine the best is the least disturbed).

The price of writing a plugin one node at a time: the same cycle with one more plugin, a
`RowFilterPlugin` (or a `RowScorePlugin`) that reads one node annotation, measured on
`--adapted-pods` pods; the columns show what it adds per pod. Reproduce with:

    .venv/bin/python -m benchmarks algorithm --nodes 500 5000 15000 --repeat 3 --save

`--save` writes `results/<date>-algorithm.json`, from which benchmarks/README.md's table is made.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ascheduler.app import build_frameworks
from ascheduler.cache import Cache
from ascheduler.config import SchedulerConfig
from ascheduler.devcluster.nodes import FakeNodes, fake_node_body
from ascheduler.features import Features, Release, parse_gates
from ascheduler.framework import (
    CycleState,
    Handle,
    NoArgs,
    NodeInfo,
    PluginRef,
    Registration,
    Registry,
    RowFilterPlugin,
    RowScorePlugin,
    Status,
    default_plugins,
    multipoint,
)
from ascheduler.framework.extender import Extenders
from ascheduler.framework.runtime import Framework
from ascheduler.groupplanner import GroupPlanner
from ascheduler.model import PodInfo, parse_node, parse_pod
from ascheduler.model.dra import parse_device_class, parse_resource_claim, parse_resource_slice
from ascheduler.model.podgroups import parse_scheduling_group
from ascheduler.plugins import IN_TREE
from ascheduler.plugins.grouppreemption import GroupPreemption
from benchmarks import report
from benchmarks.common import RESULTS, context, save
from benchmarks.workloads import device_claim, dra_class, dra_slice

ANNOTATION = "example.com/maintenance"


class AdaptedFilter(RowFilterPlugin):
    """What a first plugin looks like: one annotation read per node."""

    name = "AdaptedFilter"

    def filter_node(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if node.annotations.get(ANNOTATION):
            return Status.unschedulable("node(s) are in maintenance")
        return Status()


class AdaptedScore(RowScorePlugin):
    name = "AdaptedScore"

    def score_node(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        return 0 if node.annotations.get(ANNOTATION) else 1


ADAPTED = {
    "filter": Registration("AdaptedFilter", lambda args, handle: AdaptedFilter(), NoArgs),
    "score": Registration("AdaptedScore", lambda args, handle: AdaptedScore(), NoArgs),
}


def basic_pod(i: int) -> PodInfo:
    return parse_pod(
        {
            "metadata": {"name": f"pod-{i}", "namespace": "bench", "uid": f"uid-{i}"},
            "spec": {
                "schedulerName": "ascheduler",
                "containers": [
                    {"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}
                ],
            },
        }
    )


ZONE = "topology.kubernetes.io/zone"
#: Replicas per app in the topology shape (apps = pods / this).
REPLICAS = 20


def topology_pod(i: int) -> PodInfo:
    """Replica `i % REPLICAS` of app `i // REPLICAS`: a DoNotSchedule zone spread (maxSkew 1)
    and required anti-affinity per host, both over its own app's pods."""
    app = {"matchLabels": {"app": f"app-{i // REPLICAS}"}}
    return parse_pod(
        {
            "metadata": {
                "name": f"pod-{i}",
                "namespace": "bench",
                "uid": f"uid-{i}",
                "labels": {"app": f"app-{i // REPLICAS}"},
            },
            "spec": {
                "schedulerName": "ascheduler",
                "containers": [
                    {"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}
                ],
                "topologySpreadConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": ZONE,
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": app,
                    }
                ],
                "affinity": {
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {"labelSelector": app, "topologyKey": "kubernetes.io/hostname"}
                        ]
                    }
                },
            },
        }
    )


#: Devices per node in the DRA shape (scheduler_perf's SchedulingWithResourceClaimTemplate).
DRA_DEVICES = 8


def add_devices(cache: Cache, names: Sequence[str], pods: int) -> None:
    """The DRA shape's cluster: the DeviceClass, a ResourceSlice of `DRA_DEVICES` per node,
    and a claim of its own for one device for each of `pods` pods (`claim-<pod name>`)."""
    handlers = cache.resources.handlers
    handlers["DeviceClass"].on_add(parse_device_class({**dra_class(), "apiVersion": "v1"}))
    for name in names:
        handlers["ResourceSlice"].on_add(parse_resource_slice(dra_slice(name, DRA_DEVICES)))
    for i in range(pods):
        raw = device_claim(f"pod-{i}")
        raw["metadata"].update(namespace="bench", uid=f"claim-uid-{i}", resourceVersion="1")
        handlers["ResourceClaim"].on_add(parse_resource_claim(raw))


def dra_pod(i: int) -> PodInfo:
    """SchedulingBasic's pod with its own claim for one device (`add_devices`)."""
    raw = {
        "metadata": {"name": f"pod-{i}", "namespace": "bench", "uid": f"uid-{i}"},
        "spec": {
            "schedulerName": "ascheduler",
            "resourceClaims": [{"name": "resource", "resourceClaimName": f"claim-pod-{i}"}],
            "containers": [
                {
                    "name": "c",
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "500Mi"},
                        "claims": [{"name": "resource"}],
                    },
                }
            ],
        },
    }
    return parse_pod(raw)


def measure(
    nodes: int,
    pods: int,
    initial: int,
    batch: int,
    adapted: str | None = None,
    shape_name: str = "basic",
) -> dict[str, Any]:
    cache = Cache()
    zones = ("zone-a", "zone-b", "zone-c") if shape_name == "topology" else ("",)
    for i in range(nodes):
        # Zones in turn, so that consecutive rows are in different zones.
        zone = zones[i % len(zones)]
        group = FakeNodes(count=1, labels={ZONE: zone} if zone else {})
        cache.add_node(parse_node(fake_node_body(f"node-{i}", group)))
    registry, profile = IN_TREE, multipoint("ascheduler")
    if adapted is not None:
        extra = ADAPTED[adapted]
        registry = Registry([*IN_TREE.values(), extra])
        profile = multipoint("ascheduler", (*default_plugins(IN_TREE), PluginRef(extra.name)))
    fw = Framework(
        profile,
        registry,
        Handle(
            nodes=cache.table,
            storage=cache.storage,
            resources=cache.resources,
            attachments=cache.attachments,
        ),
    )
    if shape_name == "dra":
        add_devices(cache, cache.table.names, initial + pods)

    def make(i: int, name: str) -> PodInfo:
        if shape_name == "topology":
            # One parse per app (pods of an app differ only in name and uid).
            app = i // REPLICAS
            template = shapes.get(app) or shapes.setdefault(app, topology_pod(i))
        elif shape_name == "dra":
            return dataclasses.replace(dra_pod(i), uid=name, name=name)
        else:
            template = basic
        return dataclasses.replace(template, uid=name, name=name)

    basic = basic_pod(0)
    shapes: dict[int, PodInfo] = {}
    names = cache.table.names
    for i in range(initial):
        # Round robin: an app's replicas land on consecutive rows, so on distinct nodes
        # spread evenly over the zones.
        pod = make(i, f"initial-{i}")
        if shape_name == "dra":  # its claim allocated there (Reserve holds it in flight)
            state = CycleState()
            fw.find_nodes(state, pod, cache.table)
            assert fw.reserve(state, pod, names[i % nodes]).ok
        cache.assume(pod, names[i % nodes])
    queue = [make(initial + i, f"m-{i}") for i in range(pods)]
    per_pod: list[float] = []
    # The DRA shape runs Reserve too: it is where the claim's devices are picked.
    reserving = shape_name == "dra"
    for start in range(0, pods, batch):
        chunk = queue[start : start + batch]
        t0 = time.perf_counter()
        for pod in chunk:
            state = CycleState()
            result = fw.find_nodes(state, pod, cache.table)
            assert result.node is not None, result.status
            if reserving:
                assert fw.reserve(state, pod, result.node).ok
            cache.assume(pod, result.node)
        per_pod.append((time.perf_counter() - t0) / len(chunk))
    return {
        "shape": shape_name,
        "nodes": nodes,
        "pods": pods,
        "initial_pods": initial,
        "us_per_pod_median": round(statistics.median(per_pod) * 1e6, 1),
        "us_per_pod_best": round(min(per_pod) * 1e6, 1),
        "batches": len(per_pod),
    }


def measure_preemption(nodes: int, attempts: int) -> dict[str, Any]:
    """A preemption attempt's whole cycle (PreFilter .. PostFilter: the dry run over the
    candidate nodes and the choice) at `nodes` nodes, each full of four low-priority pods
    (scheduler_perf PreemptionAsync's 900m), for a high-priority 3000m pod. Nothing is
    evicted, so every attempt meets the same cluster."""
    cache = Cache()
    for i in range(nodes):
        cache.add_node(parse_node(fake_node_body(f"node-{i}", FakeNodes(count=1))))
    fw = Framework(
        multipoint("ascheduler"),
        IN_TREE,
        Handle(
            nodes=cache.table,
            objects=cache.objects,
            storage=cache.storage,
            attachments=cache.attachments,
        ),
    )
    names = cache.table.names
    for i in range(nodes * 4):
        low = parse_pod(
            {
                "metadata": {"name": f"low-{i}", "namespace": "bench", "uid": f"low-{i}"},
                "spec": {
                    "containers": [
                        {"name": "c", "resources": {"requests": {"cpu": "900m", "memory": "500Mi"}}}
                    ]
                },
            }
        )
        cache.add_pod(dataclasses.replace(low, node_name=names[i % nodes]))
    times: list[float] = []
    for i in range(attempts):
        high = parse_pod(
            {
                "metadata": {"name": f"high-{i}", "namespace": "bench", "uid": f"high-{i}"},
                "spec": {
                    "priority": 10,
                    "containers": [
                        {"name": "c", "resources": {"requests": {"cpu": "3", "memory": "500Mi"}}}
                    ],
                },
            }
        )
        t0 = time.perf_counter()
        result = fw.find_nodes(CycleState(), high, cache.table)
        times.append(time.perf_counter() - t0)
        assert result.nominated_node, result.status
    return {
        "shape": "preemption",
        "nodes": nodes,
        "pods": attempts,
        "initial_pods": nodes * 4,
        "us_per_pod_median": round(statistics.median(times) * 1e6, 1),
        "us_per_pod_best": round(min(times) * 1e6, 1),
        "batches": attempts,
    }


def _full_cluster(
    nodes: int, priority: int, features: Features | None = None
) -> tuple[Cache, dict[str, Framework]]:
    """`nodes` SchedulingBasic nodes, each full of four 900m pods of `priority`, and the
    default profile's framework over them (the group dry run given to its handle)."""
    features = features or Features.defaults()
    cache = Cache(features)
    for i in range(nodes):
        cache.add_node(parse_node(fake_node_body(f"node-{i}", FakeNodes(count=1))))
    names = cache.table.names
    for i in range(nodes * 4):
        low = parse_pod(
            {
                "metadata": {"name": f"low-{i}", "namespace": "bench", "uid": f"low-{i}"},
                "spec": {
                    "schedulerName": "ascheduler",
                    "priority": priority,
                    "containers": [
                        {"name": "c", "resources": {"requests": {"cpu": "900m", "memory": "500Mi"}}}
                    ],
                },
            }
        )
        cache.add_pod(dataclasses.replace(low, node_name=names[i % nodes]))
    profile = multipoint("ascheduler")
    frameworks = build_frameworks(
        SchedulerConfig(profiles=(profile,), features=features), IN_TREE, cache, None, Extenders(())
    )
    planner = GroupPlanner(cache, frameworks)
    for fw in frameworks.values():
        fw.handle.set_group_planner(planner)
    return cache, frameworks


def _high(i: int, priority: int, **spec: Any) -> PodInfo:
    return parse_pod(
        {
            "metadata": {"name": f"high-{i}", "namespace": "bench", "uid": f"high-{i}"},
            "spec": {
                "schedulerName": "ascheduler",
                "priority": priority,
                "containers": [
                    {"name": "c", "resources": {"requests": {"cpu": "3", "memory": "500Mi"}}}
                ],
                **spec,
            },
        }
    )


def measure_no_victims(nodes: int, attempts: int) -> dict[str, Any]:
    """A pod that fits nowhere where no pod has a lower priority than it: the whole cycle
    (PreFilter .. PostFilter, the preemption finding nothing to evict), per attempt."""
    cache, frameworks = _full_cluster(nodes, priority=10)
    fw = frameworks["ascheduler"]
    times: list[float] = []
    for i in range(attempts):
        high = _high(i, 10)
        t0 = time.perf_counter()
        result = fw.find_nodes(CycleState(), high, cache.table)
        times.append(time.perf_counter() - t0)
        assert result.node is None, result.status
        assert not result.nominated_node, result.status
    return _per_attempt("preemption-none", nodes, attempts, nodes * 4, times)


#: Members of the gang in the pod group preemption shape: one per 50 nodes, at least 10.
def gang_size(nodes: int) -> int:
    return max(10, nodes // 50)


def measure_group_preemption(nodes: int, attempts: int) -> dict[str, Any]:
    """1.37's workload-aware preemption for a gang of `gang_size` members of 3 CPUs each on
    nodes full of lower-priority pods: finding the victims, the dry run of the group with
    them gone and the reprieve (DefaultPreemption's PodGroupPostFilter, nothing evicted, so
    every attempt meets the same cluster), per attempt."""
    features = parse_gates("GenericWorkload=true", Release(1, 37))
    cache, frameworks = _full_cluster(nodes, priority=0, features=features)
    size = gang_size(nodes)
    group = parse_scheduling_group(
        {
            "metadata": {"name": "gang", "namespace": "bench", "uid": "gang"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": size}}, "priority": 10},
        }
    )
    cache.gangs.scheduling_group_handler.on_add(group)
    for i in range(size):
        cache.gangs.add_pod(_high(i, 10, schedulingGroup={"podGroupName": "gang"}))
    preemption = GroupPreemption(frameworks["ascheduler"].handle)
    times: list[float] = []
    for _ in range(attempts):
        t0 = time.perf_counter()
        outcome = preemption.evaluate(group)
        times.append(time.perf_counter() - t0)
        assert len(outcome.nominations) == size, outcome.status
    return _per_attempt("group-preemption", nodes, attempts, nodes * 4, times)


def _per_attempt(
    shape: str, nodes: int, attempts: int, initial: int, times: Sequence[float]
) -> dict[str, Any]:
    return {
        "shape": shape,
        "nodes": nodes,
        "pods": attempts,
        "initial_pods": initial,
        "us_per_pod_median": round(statistics.median(times) * 1e6, 1),
        "us_per_pod_best": round(min(times) * 1e6, 1),
        "batches": attempts,
    }


#: Per-attempt shapes: (measure, attempts per size by default).
PER_ATTEMPT = {
    "preemption-none": measure_no_victims,
    "group-preemption": measure_group_preemption,
}

SHAPE_ORDER = ("basic", "topology", "preemption", "preemption-none", "group-preemption", "dra")


def merged(rows: list[dict[str, Any]], earlier: Path) -> list[dict[str, Any]]:
    """`rows` with the rows of the same day's earlier save that they do not replace (another
    shape or size), so that measuring one shape again keeps the others."""
    fresh = {(r["shape"], r["nodes"]) for r in rows}
    kept = []
    if earlier.exists():
        kept = [
            r
            for r in json.loads(earlier.read_text()).get("rows", [])
            if (r.get("shape", "basic"), r["nodes"]) not in fresh
        ]
    order = {shape: i for i, shape in enumerate(SHAPE_ORDER)}
    return sorted(
        [*kept, *rows], key=lambda r: (order.get(r.get("shape", "basic"), 99), r["nodes"])
    )


def python_loop_seconds(repeat: int = 5) -> float:
    """The best of `repeat` times of ten million additions in a plain Python loop: what this
    machine's Python does with a core, so that tables of different days and machines can be
    told apart by their machine as well as by their code."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        total = 0
        for i in range(10_000_000):
            total += i
        best = min(best, time.perf_counter() - t0)
    return round(best, 3)


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks algorithm",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--nodes", type=int, nargs="+", default=[500, 5000, 15000])
    parser.add_argument("--pods", type=int, default=3000, help="measured pods per size")
    parser.add_argument("--initial", type=int, default=1000, help="pods placed beforehand")
    parser.add_argument(
        "--topology-initial",
        type=int,
        default=10000,
        help="pods placed beforehand for the topology shape (at most 2 per node)",
    )
    parser.add_argument("--batch", type=int, default=250)
    parser.add_argument("--repeat", type=int, default=1, help="runs per size; the median is kept")
    parser.add_argument(
        "--adapted-pods",
        type=int,
        default=300,
        help="measured pods for the row-at-a-time runs (0: skip them)",
    )
    parser.add_argument(
        "--shape",
        choices=(*SHAPE_ORDER, "both", "all"),
        default="all",
        help="basic: SchedulingBasic's pod; topology: apps of 20 replicas, each pod with a "
        "zone spread and per-host anti-affinity over its app; preemption: a high-priority pod "
        "on nodes full of low-priority ones, per attempt; preemption-none: a pod that fits "
        "nowhere on nodes full of pods of its own priority, per attempt; group-preemption: a "
        "gang (a member per 50 nodes, at least 10) preempting on nodes full of low-priority "
        "pods, per attempt (1.37); dra: SchedulingBasic's pod with a claim of its own for one of "
        "8 devices per node (Reserve included); both: basic and topology (default all)",
    )
    parser.add_argument(
        "--preemption-attempts", type=int, default=30, help="attempts per size (preemption)"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per size")
    parser.add_argument(
        "--save",
        action="store_true",
        help="write results/<date>-algorithm.json and regenerate benchmarks/README.md's tables",
    )
    args = parser.parse_args(argv)
    if not args.json:
        print(
            f"{'shape':>9} {'nodes':>7} {'placed':>8} {'median us/pod':>14} {'best us/pod':>12} "
            f"{'+row filter us':>15} {'+row score us':>14}"
        )
    rows = []
    shapes = {
        "both": ("basic", "topology"),
        "all": SHAPE_ORDER,
    }.get(args.shape, (args.shape,))
    for shape_name in shapes:
        for n in args.nodes:
            initial = args.initial
            if shape_name == "topology":
                initial = min(args.topology_initial, 2 * n)
            if shape_name == "preemption":
                initial = 4 * n
                runs = [measure_preemption(n, args.preemption_attempts) for _ in range(args.repeat)]
            elif shape_name in PER_ATTEMPT:
                initial = 4 * n
                runs = [
                    PER_ATTEMPT[shape_name](n, args.preemption_attempts) for _ in range(args.repeat)
                ]
            else:
                runs = [
                    measure(n, args.pods, initial, args.batch, shape_name=shape_name)
                    for _ in range(args.repeat)
                ]
            row = {
                **runs[0],
                "us_per_pod_median": statistics.median(r["us_per_pod_median"] for r in runs),
                "us_per_pod_best": min(r["us_per_pod_best"] for r in runs),
                "us_per_pod_runs": [r["us_per_pod_median"] for r in runs],
            }
            if args.adapted_pods and shape_name == "basic":
                for kind in ADAPTED:
                    batch = min(args.batch, args.adapted_pods)
                    base = measure(n, args.adapted_pods, initial, batch)
                    with_it = measure(n, args.adapted_pods, initial, batch, adapted=kind)
                    added = with_it["us_per_pod_median"] - base["us_per_pod_median"]
                    row[f"adapted_{kind}_us_per_pod"] = round(added, 1)
            rows.append(row)
            if args.json:
                print(json.dumps(row))
            else:
                print(
                    f"{shape_name:>9} {n:>7} {initial:>8} {row['us_per_pod_median']:>14} "
                    f"{row['us_per_pod_best']:>12} "
                    f"{row.get('adapted_filter_us_per_pod', '-'):>15} "
                    f"{row.get('adapted_score_us_per_pod', '-'):>14}"
                )
            sys.stdout.flush()
    if args.save:
        result = {**context(), "repeat": args.repeat, "python_loop_s": python_loop_seconds()}
        result["rows"] = merged(rows, RESULTS / f"{result['date'][:10]}-algorithm.json")
        print(f"wrote {save('algorithm', result)}", file=sys.stderr)
        report.update_readme(RESULTS)
    return 0
