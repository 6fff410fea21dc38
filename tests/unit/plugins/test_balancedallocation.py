"""NodeResourcesBalancedAllocation: real requests (no non-zero defaults), fractions capped at
1, the balance int((1 - std) * 100) with std = |f1 - f2| / 2 for two resources, the population
std for more; skipped for pods that request none of its resources. 1.35 scores the balance
with the pod; from 1.36 the change the pod makes to it."""

from __future__ import annotations

from typing import Any

import pytest

from ascheduler.features import Features, Release
from tests.kit import Json, container, make_cache, make_plugin, node, on, parsed, pod, run_score

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
#: The release whose score is the balance itself (`balancedResourceScorer` of 1.35).
AT_1_35 = Features.defaults(Release(1, 35))


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
    assert run_score(make_plugin(BALANCED, cache, features=AT_1_35), raw, cache) == expected


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
    plugin = make_plugin(BALANCED, cache, args, features=AT_1_35)
    assert run_score(plugin, raw, cache) == expected


AT_1_36 = Features.defaults(Release(1, 36))
AT_1_37 = Features.defaults(Release(1, 37))


@pytest.mark.parametrize("features", [AT_1_36, AT_1_37], ids=["1.36", "1.37"])
@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # From 1.36 the change the pod makes: 50 + (50 + with - without) // 2.
        # n1: with 93 (.5 vs .375), without 93 (.25 vs .125): unchanged -> 75.
        # n2: 100 and 100 -> 75. n3: with 81 (.5 vs .125), without 100 -> 50 + 31 // 2 = 65.
        pytest.param(pod(cpu="1", memory="2Gi"), {"n1": 75, "n2": 75, "n3": 65}, id="basic"),
        # n1: with 81 (.5 vs .125), without 93 -> 50 + 38 // 2 = 69; n2: 87 vs 100 -> 68;
        # n3: 75 vs 100 -> 62.
        pytest.param(pod(cpu="1"), {"n1": 69, "n2": 68, "n3": 62}, id="real-requests"),
        # Memory alone evens n1 out (.25 vs .25 = 100 from 93) -> 50 + 57 // 2 = 78; n2: .0 vs
        # .125 -> 93 from 100 -> 71; n3: 0 vs 1/16 -> 96 from 100 -> 73.
        pytest.param(pod(memory="1Gi"), {"n1": 78, "n2": 71, "n3": 73}, id="evens-out"),
        # Capped fractions: n1 with 62 (1 vs .25), without 93 -> 50 + 19 // 2 = 59;
        # n2: 56 vs 100 -> 53; n3: 53 vs 100 -> 51.
        pytest.param(pod(cpu="8", memory="1Gi"), {"n1": 59, "n2": 53, "n3": 51}, id="capped"),
    ],
)
def test_score_change_in_balance(features: Features, raw: Json, expected: dict[str, int]) -> None:
    cache = make_cache(NODES, PODS)
    plugin = make_plugin(BALANCED, cache, features=features)
    assert run_score(plugin, raw, cache) == expected
    # One row at a time (what batching rescoring uses), the same numbers.
    info = parsed(raw)
    rows = {n: plugin.score_row(info, cache.table, cache.table.index[n]) for n in expected}
    assert rows == expected


def test_score_change_in_balance_over_three_resources() -> None:
    # g: cpu 1/4, mem 2/8, gpu 2/4 -> 88 with the pod; nothing used without it -> 100:
    # 50 + (50 + 88 - 100) // 2 = 69.
    cache = make_cache([node("g", cpu="4", memory="8Gi", extra={GPU: "4"})])
    plugin = make_plugin(BALANCED, cache, THREE, features=AT_1_37)
    assert run_score(plugin, pod(cpu="1", memory="2Gi", extra={GPU: "2"}), cache) == {"g": 69}
