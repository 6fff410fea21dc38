"""The per-row (plain Python) scores equal the vectorized ones, for every strategy, on random
clusters: the framework mixes both when it rescores only the rows that changed."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from ascheduler.framework import Handle
from ascheduler.model import parse_pod
from ascheduler.plugins import IN_TREE
from tests.kit import random_cluster

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


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("args", STRATEGIES, ids=["least", "most", "rtc", "least-weighted"])
def test_row_scores_equal_vector_scores(seed: int, args: dict[str, Any]) -> None:
    cache = random_cluster(seed)
    handle = Handle(nodes=cache.table, storage=cache.storage, attachments=cache.attachments)
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
