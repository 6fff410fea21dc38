"""The scheduling cycle alone, no network: find a node for a pod and assume it there.

SchedulingBasic's shapes (nodes cpu 4 / memory 32Gi / pods 110; pods 100m / 500Mi), the default
profile, a cache pre-filled with `--initial` pods. Pods are timed in batches; the figure is
the median batch's time per pod, with the best batch beside it (on a shared machine the best
is the least disturbed). Reproduce with:

    .venv/bin/python -m benchmarks algorithm --nodes 500 5000 15000
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from ascheduler.cache import Cache
from ascheduler.devcluster.nodes import FakeNodes, fake_node_body
from ascheduler.framework import CycleState, Framework, Handle, multipoint
from ascheduler.model import PodInfo, parse_node, parse_pod
from ascheduler.plugins import IN_TREE


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


def measure(nodes: int, pods: int, initial: int, batch: int) -> dict[str, Any]:
    cache = Cache()
    shape = FakeNodes(count=nodes)
    for name in shape.names():
        cache.add_node(parse_node(fake_node_body(name, shape)))
    fw = Framework(multipoint("ascheduler"), IN_TREE, Handle(nodes=cache.table))
    template = basic_pod(0)
    for i in range(initial):
        pod = dataclasses.replace(template, uid=f"initial-{i}", name=f"initial-{i}")
        cache.assume(pod, cache.table.names[i % nodes])
    queue = [dataclasses.replace(template, uid=f"m-{i}", name=f"m-{i}") for i in range(pods)]
    per_pod: list[float] = []
    for start in range(0, pods, batch):
        chunk = queue[start : start + batch]
        t0 = time.perf_counter()
        for pod in chunk:
            result = fw.find_nodes(CycleState(), pod, cache.table)
            assert result.node is not None, result.status
            cache.assume(pod, result.node)
        per_pod.append((time.perf_counter() - t0) / len(chunk))
    return {
        "nodes": nodes,
        "pods": pods,
        "initial_pods": initial,
        "us_per_pod_median": round(statistics.median(per_pod) * 1e6, 1),
        "us_per_pod_best": round(min(per_pod) * 1e6, 1),
        "batches": len(per_pod),
    }


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks algorithm",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--nodes", type=int, nargs="+", default=[500, 5000, 15000])
    parser.add_argument("--pods", type=int, default=3000, help="measured pods per size")
    parser.add_argument("--initial", type=int, default=1000, help="pods placed beforehand")
    parser.add_argument("--batch", type=int, default=250)
    parser.add_argument("--json", action="store_true", help="one JSON object per size")
    args = parser.parse_args(argv)
    if not args.json:
        print(f"{'nodes':>7} {'median us/pod':>14} {'best us/pod':>12}")
    for n in args.nodes:
        row = measure(n, args.pods, args.initial, args.batch)
        if args.json:
            print(json.dumps(row))
        else:
            print(f"{n:>7} {row['us_per_pod_median']:>14} {row['us_per_pod_best']:>12}")
        sys.stdout.flush()
    return 0
