"""NodeResourcesBalancedAllocation: real requests (no non-zero defaults), fractions capped at
1, score int((1 - std) * 100) with std = |f1 - f2| / 2 for two resources, the population
std for more; skipped for pods that request none of its resources."""

from __future__ import annotations

from typing import Any

import pytest

from tests.kit import Json, container, make_cache, make_plugin, node, on, pod, run_score

BALANCED = "NodeResourcesBalancedAllocation"
GPU = "nvidia.com/gpu"

# n1: 4 cpu / 8Gi with a pod requesting 1 cpu / 1Gi.
# n2: 4 cpu / 8Gi with a pod requesting nothing (counts as zero here).
# n3: 2 cpu / 16Gi, empty.
NODES = [
    node("n1", cpu="4", memory="8Gi"),
    node("n2", cpu="4", memory="8Gi"),
    node("n3", cpu="2", memory="16Gi"),
]
PODS = [on("n1", pod("e1", cpu="1", memory="1Gi")), on("n2", pod("e2"))]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # n1: cpu 2/4 = .5, mem 3/8 = .375 -> std .0625 -> 93.
        # n2: .25 and .25 -> 100. n3: cpu 1/2 = .5, mem 2/16 = .125 -> std .1875 -> 81.
        pytest.param(pod(cpu="1", memory="2Gi"), {"n1": 93, "n2": 100, "n3": 81}, id="basic"),
        # Only cpu requested: memory stays at its real (zero) request on n2 and n3:
        # n1: .5 vs .125 -> 81; n2: .25 vs 0 -> 87 (88 with non-zero defaults);
        # n3: .5 vs 0 -> 75.
        pytest.param(pod(cpu="1"), {"n1": 81, "n2": 87, "n3": 75}, id="real-requests"),
        # Fractions are capped at 1: cpu 9/4 -> 1 on n1, mem 2/8 -> std .375 -> 62;
        # n2: 1 vs 1/8 -> 56; n3: 1 vs 1/16 -> 53.
        pytest.param(pod(cpu="8", memory="1Gi"), {"n1": 62, "n2": 56, "n3": 53}, id="capped"),
        pytest.param(
            pod(containers=[container("a", cpu="1"), container("b", memory="2Gi")]),
            {"n1": 93, "n2": 100, "n3": 81},
            id="summed-over-containers",
        ),
    ],
)
def test_score(raw: Json, expected: dict[str, int]) -> None:
    cache = make_cache(NODES, PODS)
    assert run_score(make_plugin(BALANCED, cache), raw, cache) == expected


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(pod(), id="no-requests"),
        pytest.param(pod(cpu="0", memory="0"), id="explicit-zero"),
        pytest.param(pod(extra={GPU: "1"}), id="only-other-resources"),
    ],
)
def test_skipped_for_pods_requesting_none_of_its_resources(raw: Json) -> None:
    cache = make_cache(NODES, PODS)
    assert run_score(make_plugin(BALANCED, cache), raw, cache) is None


THREE = {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": GPU}]}


@pytest.mark.parametrize(
    ("args", "nodes", "raw", "expected"),
    [
        # cpu 1/4, mem 2/8, gpu 2/4: mean 1/3, variance 1/72, std .1179 -> 88.
        pytest.param(
            THREE,
            [node("g", cpu="4", memory="8Gi", extra={GPU: "4"})],
            pod(cpu="1", memory="2Gi", extra={GPU: "2"}),
            {"g": 88},
            id="three-resources",
        ),
        # The pod does not ask for GPUs: that resource is left out -> .25 vs .25 -> 100.
        pytest.param(
            THREE,
            [node("g", cpu="4", memory="8Gi", extra={GPU: "4"})],
            pod(cpu="1", memory="2Gi"),
            {"g": 100},
            id="unrequested-extended-left-out",
        ),
        # A node without the resource leaves it out too: cpu 1/4 vs mem 1/8 -> 93.
        pytest.param(
            THREE,
            [node("plain", cpu="4", memory="8Gi")],
            pod(cpu="1", memory="1Gi", extra={GPU: "2"}),
            {"plain": 93},
            id="node-without-resource",
        ),
        # A single resource has no deviation.
        pytest.param(
            {"resources": [{"name": "cpu"}]},
            [node("c", cpu="4", memory="8Gi")],
            pod(cpu="3", memory="1Gi"),
            {"c": 100},
            id="single-resource",
        ),
    ],
)
def test_score_resources(
    args: dict[str, Any], nodes: list[Json], raw: Json, expected: dict[str, int]
) -> None:
    cache = make_cache(nodes)
    assert run_score(make_plugin(BALANCED, cache, args), raw, cache) == expected
