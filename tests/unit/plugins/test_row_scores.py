"""The per-row (plain Python) scores equal the vectorized ones, for every strategy, on random
clusters: the framework mixes both when it rescores only the rows that changed."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from ascheduler.cache import Cache
from ascheduler.framework import Handle
from ascheduler.model import parse_node, parse_pod
from ascheduler.plugins import IN_TREE

STRATEGIES: list[dict[str, Any]] = [
    {},
    {"scoringStrategy": {"type": "MostAllocated"}},
    {
        "scoringStrategy": {
            "type": "RequestedToCapacityRatio",
            "resources": [
                {"name": "cpu", "weight": 2},
                {"name": "memory", "weight": 1},
                {"name": "nvidia.com/gpu", "weight": 3},
            ],
            "requestedToCapacityRatio": {
                "shape": [
                    {"utilization": 0, "score": 10},
                    {"utilization": 60, "score": 3},
                    {"utilization": 100, "score": 0},
                ]
            },
        }
    },
    {
        "scoringStrategy": {
            "type": "LeastAllocated",
            "resources": [
                {"name": "cpu", "weight": 1},
                {"name": "memory", "weight": 5},
                {"name": "ephemeral-storage", "weight": 2},
                {"name": "nvidia.com/gpu", "weight": 1},
            ],
        }
    },
]


def random_cluster(seed: int) -> Cache:
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


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("args", STRATEGIES, ids=["least", "most", "rtc", "least-weighted"])
def test_row_scores_equal_vector_scores(seed: int, args: dict[str, Any]) -> None:
    cache = random_cluster(seed)
    handle = Handle(nodes=cache.table)
    rng = random.Random(seed + 100)
    fit, balanced = IN_TREE["NodeResourcesFit"], IN_TREE["NodeResourcesBalancedAllocation"]
    for plugin in (
        fit.build(fit.decode_args(args, "args"), handle),
        balanced.build(balanced.decode_args({}, "args"), handle),
    ):
        for k in range(10):
            requests = {"cpu": f"{rng.randint(0, 2000)}m", "memory": f"{rng.randint(0, 4096)}Mi"}
            if k % 3 == 0:
                requests["nvidia.com/gpu"] = "1"
            pod = parse_pod(
                {
                    "metadata": {"name": "q", "namespace": "x", "uid": f"q{k}"},
                    "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]},
                }
            )
            rows = np.arange(cache.table.n)
            vector = plugin.score(None, pod, cache.table, rows)  # type: ignore[arg-type, attr-defined]
            scalar = [plugin.score_row(pod, cache.table, int(r)) for r in rows]  # type: ignore[attr-defined]
            assert vector.tolist() == scalar, (plugin.name, k)
