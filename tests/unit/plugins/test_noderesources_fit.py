"""NodeResourcesFit: the filter (every failing resource listed; a request above the node's
whole allocatable is UnschedulableAndUnresolvable) and the three scoring strategies, with the
expected scores worked out by hand from kube-scheduler's integer formulas."""

from __future__ import annotations

from typing import Any

import pytest

from ascheduler.framework import Code
from tests.kit import (
    Json,
    container,
    make_cache,
    make_plugin,
    node,
    on,
    parsed,
    pod,
    rejected_reasons,
    rejection_codes,
    run_score,
)
from tests.kit import run_filter as run

FIT = "NodeResourcesFit"
GPU = "nvidia.com/gpu"
CPU_R, MEM_R, PODS_R, GPU_R = (
    "Insufficient cpu",
    "Insufficient memory",
    "Too many pods",
    "Insufficient nvidia.com/gpu",
)
U, UU = Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE

# small: less than some requests in total; big: has GPUs; full: pod count exhausted;
# busy: mostly requested by an existing pod.
FILTER_NODES = [
    node("small", cpu="1", memory="1Gi"),
    node("big", cpu="8", memory="16Gi", extra={GPU: "2"}),
    node("full", cpu="4", memory="8Gi", pods="2"),
    node("busy", cpu="4", memory="8Gi", extra={GPU: "1"}),
]
FILTER_PODS = [
    on("full", pod("f1")),
    on("full", pod("f2")),
    on("busy", pod("b1", cpu="3", memory="6Gi", extra={GPU: "1"})),
]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(pod(), {"full": {PODS_R: U}}, id="requests-nothing-only-pod-count"),
        pytest.param(
            pod(cpu="0", memory="0"), {"full": {PODS_R: U}}, id="explicit-zero-only-pod-count"
        ),
        pytest.param(
            pod(cpu="2"),
            {"small": {CPU_R: UU}, "full": {PODS_R: U}, "busy": {CPU_R: U}},
            id="cpu",
        ),
        pytest.param(pod(cpu="1"), {"full": {PODS_R: U}}, id="cpu-exactly-what-is-left"),
        pytest.param(
            pod(cpu="1001m"),
            {"small": {CPU_R: UU}, "full": {PODS_R: U}, "busy": {CPU_R: U}},
            id="cpu-one-milli-too-many",
        ),
        pytest.param(
            pod(memory="3Gi"),
            {"small": {MEM_R: UU}, "full": {PODS_R: U}, "busy": {MEM_R: U}},
            id="memory",
        ),
        pytest.param(
            pod(cpu="2", memory="3Gi"),
            {
                "small": {CPU_R: UU, MEM_R: UU},
                "full": {PODS_R: U},
                "busy": {CPU_R: U, MEM_R: U},
            },
            id="several-reasons-per-node",
        ),
        pytest.param(
            pod(extra={GPU: "1"}),
            # full has no GPU at all: the whole node is unresolvable, Too many pods included.
            {"small": {GPU_R: UU}, "full": {PODS_R: UU, GPU_R: UU}, "busy": {GPU_R: U}},
            id="extended-resource",
        ),
        pytest.param(
            pod(extra={GPU: "3"}),
            {
                "small": {GPU_R: UU},
                "big": {GPU_R: UU},
                "full": {PODS_R: UU, GPU_R: UU},
                "busy": {GPU_R: UU},
            },
            id="extended-beyond-every-node",
        ),
        pytest.param(
            pod(cpu="5", memory="3Gi"),
            {
                "small": {CPU_R: UU, MEM_R: UU},
                "full": {PODS_R: UU, CPU_R: UU},
                # memory alone could be freed on busy, but cpu never: one status for the node
                "busy": {CPU_R: UU, MEM_R: UU},
            },
            id="node-status-unresolvable-if-any-reason-is",
        ),
        pytest.param(
            pod(cpu="500m", init_containers=[container("init", cpu="2")]),
            {"small": {CPU_R: UU}, "full": {PODS_R: U}, "busy": {CPU_R: U}},
            id="init-container-counts",
        ),
        pytest.param(
            pod(containers=[container("a", cpu="600m"), container("b", cpu="500m")]),
            {"small": {CPU_R: UU}, "full": {PODS_R: U}, "busy": {CPU_R: U}},
            id="containers-summed",
        ),
    ],
)
def test_filter(raw: Json, expected: dict[str, dict[str, Code]]) -> None:
    cache = make_cache(FILTER_NODES, FILTER_PODS)
    result = run(make_plugin(FIT, cache), raw, cache)
    assert rejected_reasons(result, cache) == {n: sorted(r) for n, r in expected.items()}
    codes = rejection_codes(result, cache)
    assert codes == {(n, reason): code for n, r in expected.items() for reason, code in r.items()}


@pytest.mark.parametrize(
    ("args", "raw", "rejected"),
    [
        pytest.param({"ignoredResources": [GPU]}, pod(extra={GPU: "3"}), {"full"}, id="ignored"),
        pytest.param(
            {"ignoredResourceGroups": ["nvidia.com"]},
            pod(extra={GPU: "3"}),
            {"full"},
            id="ignored-group",
        ),
        pytest.param(
            {"ignoredResources": ["example.com/other"]},
            pod(extra={GPU: "3"}),
            {"small", "big", "full", "busy"},
            id="other-ignored",
        ),
        pytest.param(
            {"ignoredResources": [GPU]},
            pod(cpu="2", extra={GPU: "3"}),
            {"small", "full", "busy"},
            id="ignored-only-that-resource",
        ),
        pytest.param(
            {"ignoredResources": ["cpu", "memory"]},
            pod(cpu="2", memory="3Gi"),
            {"small", "full", "busy"},
            id="ignored-native-resources-still-checked",
        ),
        pytest.param(
            {"ignoredResourceGroups": ["nvidia.com"]},
            pod(cpu="2"),
            {"small", "full", "busy"},
            id="ignored-group-leaves-cpu",
        ),
    ],
)
def test_filter_ignored_resources(args: dict[str, Any], raw: Json, rejected: set[str]) -> None:
    cache = make_cache(FILTER_NODES, FILTER_PODS)
    result = run(make_plugin(FIT, cache, args), raw, cache)
    assert set(rejected_reasons(result, cache)) == rejected


def test_assigned_pods_count_and_their_removal_frees_room() -> None:
    cache = make_cache(FILTER_NODES, FILTER_PODS)
    plugin = make_plugin(FIT, cache)
    assert "busy" in rejected_reasons(run(plugin, pod(cpu="2"), cache), cache)
    cache.remove_pod(parsed(FILTER_PODS[2]))
    assert "busy" not in rejected_reasons(run(plugin, pod(cpu="2"), cache), cache)


# -- scoring ---------------------------------------------------------------------------------
#
# n1: 4 cpu / 8Gi with a pod requesting 1 cpu / 2Gi.
# n2: 2 cpu / 4Gi with a pod requesting nothing (counts 100m / 200Mi when scoring).
# n3: 8 cpu / 4Gi, empty.
SCORE_NODES = [
    node("n1", cpu="4", memory="8Gi"),
    node("n2", cpu="2", memory="4Gi"),
    node("n3", cpu="8", memory="4Gi"),
]
SCORE_PODS = [on("n1", pod("s1", cpu="1", memory="2Gi")), on("n2", pod("s2"))]

POD_A = pod(cpu="1", memory="1Gi")
POD_NONE = pod()  # scores as 100m / 200Mi
POD_ZERO = pod(cpu="0", memory="0")  # explicit zero stays zero
POD_MIXED = pod(containers=[container("a", cpu="500m"), container("b")])  # 600m / 400Mi


def least_args(resources: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    strategy: dict[str, Any] = {"type": "LeastAllocated"}
    if resources is not None:
        strategy["resources"] = resources
    return {"scoringStrategy": strategy}


@pytest.mark.parametrize(
    ("args", "raw", "expected"),
    [
        # LeastAllocated, per resource (alloc - req) * 100 // alloc, then the weighted mean.
        # n1: cpu 2000/4000 -> 50, mem 3Gi/8Gi -> 62: 56. n2: cpu 1100/2000 -> 45,
        # mem 1224Mi/4096Mi -> 70: 57. n3: cpu 1000/8000 -> 87, mem 1Gi/4Gi -> 75: 81.
        pytest.param({}, POD_A, {"n1": 56, "n2": 57, "n3": 81}, id="least-default"),
        pytest.param(least_args(), POD_A, {"n1": 56, "n2": 57, "n3": 81}, id="least"),
        # n1: cpu 1100 -> 72, mem 2248Mi/8192Mi -> 72. n2: 200/2000 -> 90, 400Mi -> 90.
        # n3: 100/8000 -> 98, 200Mi/4096Mi -> 95: 96.
        pytest.param({}, POD_NONE, {"n1": 72, "n2": 90, "n3": 96}, id="least-nonzero"),
        pytest.param({}, POD_ZERO, {"n1": 75, "n2": 95, "n3": 100}, id="least-explicit-zero"),
        # 600m / 400Mi: n1 1600 -> 60, 2448Mi -> 70: 65; n2 700 -> 65, 600Mi -> 85: 75;
        # n3 600 -> 92, 400Mi -> 90: 91.
        pytest.param({}, POD_MIXED, {"n1": 65, "n2": 75, "n3": 91}, id="least-per-container"),
        # weights cpu 3, memory 1: n1 (150 + 62) // 4 = 53; n2 (135 + 70) // 4 = 51;
        # n3 (261 + 75) // 4 = 84.
        pytest.param(
            least_args([{"name": "cpu", "weight": 3}, {"name": "memory", "weight": 1}]),
            POD_A,
            {"n1": 53, "n2": 51, "n3": 84},
            id="least-weighted",
        ),
        pytest.param(
            least_args([{"name": "cpu", "weight": 1}]),
            POD_A,
            {"n1": 50, "n2": 45, "n3": 87},
            id="least-cpu-only",
        ),
        # MostAllocated: min(req, alloc) * 100 // alloc.
        # n1: 50, 37 -> 43. n2: 55, 29 -> 42. n3: 12, 25 -> 18.
        pytest.param(
            {"scoringStrategy": {"type": "MostAllocated"}},
            POD_A,
            {"n1": 43, "n2": 42, "n3": 18},
            id="most",
        ),
        # n1: 1100 -> 27, 2248Mi -> 27. n2: 200 -> 10, 400Mi -> 9: 9. n3: 1, 4: 2.
        pytest.param(
            {"scoringStrategy": {"type": "MostAllocated"}},
            POD_NONE,
            {"n1": 27, "n2": 9, "n3": 2},
            id="most-nonzero",
        ),
        # Shape (0,0)-(100,10) scales to a score equal to utilization; the mean is rounded
        # half away from zero. n1: 50, 37 -> 43.5 -> 44. n2: 55, 29 -> 42.
        # n3: 12, 25 -> 18.5 -> 19.
        pytest.param(
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {
                        "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
                    },
                }
            },
            POD_A,
            {"n1": 44, "n2": 42, "n3": 19},
            id="rtc-linear-round-half-up",
        ),
        # Shape (0,100)-(50,30)-(100,0), integer interpolation truncating toward zero:
        # n1: cpu 50 -> 30, mem 37 -> 100 + (-70*37)/50 = 100 - 51 = 49: 39.5 -> 40.
        # n2: cpu 55 -> 30 + (-30*5)/50 = 27, mem 29 -> 100 - 40 = 60: 43.5 -> 44.
        # n3: cpu 12 -> 100 - 16 = 84, mem 25 -> 65: 74.5 -> 75.
        pytest.param(
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {
                        "shape": [
                            {"utilization": 0, "score": 10},
                            {"utilization": 50, "score": 3},
                            {"utilization": 100, "score": 0},
                        ]
                    },
                }
            },
            POD_A,
            {"n1": 40, "n2": 44, "n3": 75},
            id="rtc-broken-line-truncates",
        ),
    ],
)
def test_score(args: dict[str, Any], raw: Json, expected: dict[str, int]) -> None:
    cache = make_cache(SCORE_NODES, SCORE_PODS)
    assert run_score(make_plugin(FIT, cache, args), raw, cache) == expected


def rtc(shape: list[tuple[int, int]], resources: list[dict[str, Any]] | None = None) -> dict:
    strategy: dict[str, Any] = {
        "type": "RequestedToCapacityRatio",
        "requestedToCapacityRatio": {"shape": [{"utilization": u, "score": s} for u, s in shape]},
    }
    if resources is not None:
        strategy["resources"] = resources
    return {"scoringStrategy": strategy}


@pytest.mark.parametrize(
    ("args", "nodes", "raw", "expected"),
    [
        # cpu utilization 1000*100//200000 = 0 scores 0 and leaves the weight sum;
        # memory 1Gi/8Gi = 12 -> 12 (not 6).
        pytest.param(
            rtc([(0, 0), (100, 10)]),
            [node("z", cpu="200", memory="8Gi")],
            POD_A,
            {"z": 12},
            id="rtc-zero-score-resource-dropped",
        ),
        # Below the first point the first point's score applies: cpu 5% -> 20, memory
        # 1Gi/16Gi = 6% -> 20.
        pytest.param(
            rtc([(10, 2), (100, 10)]),
            [node("z", cpu="20", memory="16Gi")],
            POD_A,
            {"z": 20},
            id="rtc-below-first-point",
        ),
        # Requests above allocatable count as 100% utilization: cpu -> 10*10, memory 50%.
        pytest.param(
            rtc([(0, 0), (100, 10)]),
            [node("z", cpu="500m", memory="2Gi")],
            POD_A,
            {"z": 75},
            id="rtc-over-capacity",
        ),
        # LeastAllocated gives 0 for a resource over capacity: cpu 0, memory 50 -> 25.
        pytest.param(
            {}, [node("z", cpu="500m", memory="2Gi")], POD_A, {"z": 25}, id="least-over-capacity"
        ),
        # MostAllocated caps at allocatable: 100m default on a 50m node -> 100;
        # 200Mi on 1Gi -> 19: 59.
        pytest.param(
            {"scoringStrategy": {"type": "MostAllocated"}},
            [node("z", cpu="50m", memory="1Gi")],
            POD_NONE,
            {"z": 59},
            id="most-over-capacity",
        ),
        # An extended resource scores only on nodes that have it and for pods asking for it:
        # g: cpu 7000*100//8000 = 87, mem 15Gi/16Gi -> 93, gpu (4-1)*100//4 = 75 (weight 2):
        # (87 + 93 + 150) // 4 = 82. plain: gpu absent -> (87 + 93) // 2 = 90.
        pytest.param(
            least_args(
                [
                    {"name": "cpu", "weight": 1},
                    {"name": "memory", "weight": 1},
                    {"name": GPU, "weight": 2},
                ]
            ),
            [
                node("g", cpu="8", memory="16Gi", extra={GPU: "4"}),
                node("plain", cpu="8", memory="16Gi"),
            ],
            pod(cpu="1", memory="1Gi", extra={GPU: "1"}),
            {"g": 82, "plain": 90},
            id="least-extended",
        ),
        pytest.param(
            least_args(
                [
                    {"name": "cpu", "weight": 1},
                    {"name": "memory", "weight": 1},
                    {"name": GPU, "weight": 2},
                ]
            ),
            [
                node("g", cpu="8", memory="16Gi", extra={GPU: "4"}),
                node("plain", cpu="8", memory="16Gi"),
            ],
            POD_A,
            {"g": 90, "plain": 90},
            id="least-extended-not-requested",
        ),
    ],
)
def test_score_edges(
    args: dict[str, Any], nodes: list[Json], raw: Json, expected: dict[str, int]
) -> None:
    cache = make_cache(nodes)
    assert run_score(make_plugin(FIT, cache, args), raw, cache) == expected


@pytest.mark.parametrize(
    ("strategy", "alloc", "wanted", "expected"),
    [
        # (d - req) * 100 = 99 * d - 1 with d = 150000000000099: the integer formula floors
        # 98.99999999999999933 to 98.
        pytest.param("LeastAllocated", "150000000000099", "1500000000001", 98, id="least"),
        # req * 100 = 99 * d - 1 with d = 150000000000099 and req = 148500000000098.
        pytest.param("MostAllocated", "150000000000099", "148500000000098", 98, id="most"),
    ],
)
def test_score_integer_division_on_large_quantities(
    strategy: str, alloc: str, wanted: str, expected: int
) -> None:
    storage = "ephemeral-storage"
    cache = make_cache([node("big-disk", extra={storage: alloc})])
    args = {"scoringStrategy": {"type": strategy, "resources": [{"name": storage}]}}
    raw = pod(extra={storage: wanted})
    assert run_score(make_plugin(FIT, cache, args), raw, cache) == {"big-disk": expected}


def test_the_kept_misfit_rows_follow_every_change_of_usage_and_nodes() -> None:
    """The filter answers "nothing rejected" from rows kept per request shape and updated
    row by row; through random pods coming and going, nodes added, resized and removed, it
    agrees with working the reasons out from scratch."""
    import random

    from ascheduler.framework import CycleState
    from ascheduler.model import parse_node

    rng = random.Random(3)
    cache = make_cache([node(f"n{i}", cpu="2", pods="3") for i in range(4)])
    plugin = make_plugin(FIT, cache)
    shapes = [parsed(pod("a", cpu="500m")), parsed(pod("b", cpu="2")), parsed(pod("c"))]
    placed = []
    rejected_seen = 0
    for step in range(600):
        op = rng.random()
        names = list(cache.table.names)
        if op < 0.45 and names:
            p = parsed(on(rng.choice(names), pod(f"p{step}", cpu=rng.choice(["100m", "1"]))))
            cache.add_pod(p)
            placed.append(p)
        elif op < 0.8 and placed:
            cache.remove_pod(placed.pop(rng.randrange(len(placed))))
        elif op < 0.9:
            name = f"n{rng.randrange(6)}"
            cpu = rng.choice(["1", "2", "4"])
            cache.add_node(parse_node(node(name, cpu=cpu, pods="3")))
        elif names:
            cache.remove_node(rng.choice(names))
            placed = [p for p in placed if cache.has_pod(p.uid)]
        for shape in shapes:
            wanted = tuple((n, v) for n, v in shape.requests.items() if v > 0)
            fast = plugin.filter(CycleState(), shape, cache.table)
            slow = plugin._rejections(cache.table, wanted)
            if slow is None:
                assert fast is None, step
                continue
            rejected_seen += 1
            assert fast is not None, step
            assert fast.rejected.tolist() == slow.rejected.tolist(), step
    assert rejected_seen > 100


# -- in-place resize and pod-level resources -------------------------------------------------


def test_a_pod_being_scheduled_is_filtered_by_its_spec_not_its_status() -> None:
    """kube-scheduler's PreFilter reads the spec only (`computePodResourceRequest`); the
    status resources of a pod count once it is on a node."""
    cache = make_cache(FILTER_NODES, FILTER_PODS)
    plugin = make_plugin(FIT, cache)
    raw = pod(cpu="2")
    raw["status"] = {"containerStatuses": [{"name": "c", "resources": {"requests": {"cpu": "8"}}}]}
    assert parsed(raw).requests["cpu"] == 8000
    got = rejected_reasons(run(plugin, raw, cache), cache)
    assert got == rejected_reasons(run(plugin, pod(cpu="2"), cache), cache)
    assert got != rejected_reasons(run(plugin, pod(cpu="8"), cache), cache)


def test_a_pod_level_pod_is_scored_by_its_containers_each_defaulted() -> None:
    """The pod being scheduled scores as v1.35's Fit scorer reads it: `PodRequests` without
    pod-level requests (its scorer is built without the PodLevelResources switch) and with
    each container's missing cpu or memory at 100m / 200Mi; kube-scheduler's `-v=10` scores
    agree (the differential scenario of pod-level resources)."""
    cache = make_cache(SCORE_NODES, SCORE_PODS)
    plugin = make_plugin(FIT, cache, {"scoringStrategy": {"type": "LeastAllocated"}})
    levelled = pod(containers=[container("a", memory="1Gi"), container("b")])
    levelled["spec"]["resources"] = {"requests": {"cpu": "1"}}
    containers_only = pod(containers=[container("a", memory="1Gi"), container("b")])
    with_pod_level_cpu = pod(
        containers=[container("a", cpu="1", memory="1Gi"), container("b", cpu="0")]
    )
    got = run_score(plugin, levelled, cache)
    assert got == run_score(plugin, containers_only, cache)
    assert got != run_score(plugin, with_pod_level_cpu, cache)
