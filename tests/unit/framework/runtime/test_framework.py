"""The Framework with the default profile: the `0/N nodes are available` message, picking a
node by weighted scores, configuration errors, Reserve / Unreserve, Permit through
`WaitingPods`, and how many feasible nodes are scored."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from ascheduler.cache import Cache
from ascheduler.durations import go_duration
from ascheduler.features import SUPPORTED, Features, Release, parse_gates
from ascheduler.framework import (
    SKIP,
    SUCCESS,
    Code,
    ConfigError,
    CycleState,
    Diagnosis,
    Handle,
    IntArray,
    NoArgs,
    NodeTable,
    PermitPlugin,
    Plugin,
    PluginRef,
    PodGroupPostFilterPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ProfileSpec,
    Registration,
    Registry,
    ReservePlugin,
    ScorePlugin,
    Status,
    default_plugins,
    multipoint,
)
from ascheduler.framework.runtime import Framework, num_feasible_nodes_to_find
from ascheduler.framework.runtime.framework import WORKLOAD_DISABLED
from ascheduler.model import PodInfo
from ascheduler.model.pod import PREEMPT_NEVER
from ascheduler.model.podgroups import SchedulingGroup
from ascheduler.plugins import IN_TREE
from ascheduler.plugins.defaultpreemption import GROUP_MAY_NOT_PREEMPT, NO_GROUP_VICTIMS
from ascheduler.plugins.dynamicresources.state import CLAIMS_RELEASED
from tests.kit import (
    Json,
    expr,
    make_cache,
    node,
    on,
    parsed,
    pod,
    term,
)

DEFAULT_PLUGINS = default_plugins(IN_TREE)
TAINT = {"key": "dedicated", "value": "x", "effect": "NoSchedule"}
TAINTED = "node(s) had untolerated taint(s)"


def build(
    cache: Cache,
    *,
    extra: Sequence[PluginRef] = (),
    registry: Sequence[Registration[Any]] = (),
    args: Mapping[str, Mapping[str, Any]] | None = None,
    percentage: int = 0,
    post_filters: bool = True,
    features: Features | None = None,
) -> Framework:
    """The default plugins of `features`' release (the default release when None), and
    `extra`; without `post_filters`, without the default ones that have a PostFilter
    (DynamicResources, DefaultPreemption)."""
    gates = features or Features.defaults()
    handle = Handle(
        nodes=cache.table, storage=cache.storage, attachments=cache.attachments, features=gates
    )
    own_post_filters = ("DynamicResources", "DefaultPreemption")
    defaults = default_plugins(IN_TREE, gates)
    base = [p for p in defaults if post_filters or p.name not in own_post_filters]
    spec = multipoint("x", (*base, *extra), args)
    return Framework(
        spec,
        Registry([*IN_TREE.values(), *registry]),
        handle,
        percentage_of_nodes_to_score=percentage,
    )


def schedule(
    nodes: Sequence[Json], existing: Sequence[Json], raw: Json, features: Features | None = None
) -> Any:
    cache = make_cache(nodes, existing)
    return build(cache, features=features).find_nodes(CycleState(), parsed(raw), cache.table)


# -- the default profile ---------------------------------------------------------------------


@pytest.mark.parametrize("release", SUPPORTED, ids=str)
def test_default_profile_order_and_weights(release: Release) -> None:
    """kube-scheduler's `getDefaultPlugins` of each release: NodeName before
    NodeUnschedulable from 1.37, NodeDeclaredFeatures (its gate on) from 1.36."""
    fw = build(make_cache([]), features=Features.defaults(release))
    first = ["NodeName", "NodeUnschedulable"]
    if release < Release(1, 37):
        first.reverse()
    declared = ["NodeDeclaredFeatures"] if release >= Release(1, 36) else []
    assert [p.name for p in fw.filter_plugins] == [
        *first,
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
        "DynamicResources",
        *declared,
    ]
    assert fw.queue_sort.name == "PrioritySort"
    assert [p.name for p in fw.pre_enqueue_plugins] == [
        "SchedulingGates",
        "DynamicResources",
        "DefaultPreemption",
        "GangScheduling",
        "Coscheduling",
    ]
    assert [p.name for p in fw.post_filter_plugins] == [
        "DynamicResources",
        "DefaultPreemption",
        "Coscheduling",
    ]
    assert [p.name for p in fw.permit_plugins] == ["GangScheduling", "Coscheduling"]
    assert [p.name for p in fw.bind_plugins] == ["DefaultBinder"]
    weights = {p.name: fw.weights[p.name] for p in fw.score_plugins}
    assert weights == {
        "TaintToleration": 3,
        "NodeAffinity": 2,
        "NodeResourcesFit": 1,
        "PodTopologySpread": 2,
        "InterPodAffinity": 2,
        "NodeResourcesBalancedAllocation": 1,
        "ImageLocality": 1,
        # (its PreScore skips it unless the StorageCapacityScoring gate is on)
        "VolumeBinding": 1,
        # (its PreScore skips it unless a claim has firstAvailable subrequests)
        "DynamicResources": 2,
    }


def test_pre_enqueue_reports_the_gate() -> None:
    fw = build(make_cache([]))
    status = fw.run_pre_enqueue(parsed(pod(gates=["g"])))
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.plugin == "SchedulingGates"
    assert status.message == "waiting for scheduling gates: [g]"
    assert fw.run_pre_enqueue(parsed(pod())).ok


# -- the failure message ---------------------------------------------------------------------

GPU = "nvidia.com/gpu"


def worded(message: str, release: Release) -> str:
    """A case's message in `release`'s words: DynamicResources' PostFilter, before
    preemption's, says `no new claims to deallocate` until 1.36 and nothing from 1.37
    (`dynamicresources.go:PostFilter`); from 1.37 NodeName's PreFilter narrows the cycle to
    the named node and every other node is charged to it (`node_name.go:PreFilter`)."""
    newer = release >= Release(1, 37)
    return message.format(
        dra="" if newer else "no new claims to deallocate, ",
        node_name="didn't satisfy plugin(s) [NodeName]"
        if newer
        else "didn't match the requested node name",
    )


# Messages with `{dra}` and `{node_name}` where the releases word them differently (`worded`).
MESSAGE_CASES = [
    pytest.param(
        [node("t", taints=[TAINT]), node("s1", cpu="1"), node("s2", cpu="1")],
        [],
        pod(cpu="2"),
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu."
        " {dra}"
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
        id="two-reasons",
    ),
    pytest.param(
        [node(f"t{i}", taints=[TAINT]) for i in range(10)]
        + [node("s1", cpu="1"), node("s2", cpu="1")],
        [],
        pod(cpu="2"),
        "0/12 nodes are available: 10 node(s) had untolerated taint(s), 2 Insufficient cpu."
        " {dra}"
        "preemption: 0/12 nodes are available: 12 Preemption is not helpful for scheduling.",
        id="sorted-as-strings-10-before-2",
    ),
    pytest.param(
        [node("a", cpu="1", memory="1Gi"), node("b", cpu="1", memory="1Gi")],
        [],
        pod(cpu="2", memory="2Gi"),
        "0/2 nodes are available: 2 Insufficient cpu, 2 Insufficient memory."
        " {dra}"
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
        id="several-fit-reasons-per-node",
    ),
    pytest.param(
        [
            node("n1", cpu="1", memory="1Gi", extra={GPU: "1"}),
            node("n2", cpu="1", memory="8Gi", extra={GPU: "1"}),
            node("n3", cpu="4", memory="8Gi"),
        ],
        [],
        pod(cpu="2", memory="2Gi", extra={GPU: "1"}),
        "0/3 nodes are available: 1 Insufficient memory, 1 Insufficient nvidia.com/gpu, "
        "2 Insufficient cpu."
        " {dra}"
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
        id="counts-sum-beyond-n",
    ),
    pytest.param(
        [
            node("cordoned", cpu="1", unschedulable=True, taints=[TAINT]),
            node("tainted", cpu="1", labels={"zone": "a"}, taints=[TAINT]),
            node("elsewhere", cpu="1", labels={"zone": "b"}),
            node("small", cpu="1", labels={"zone": "a"}),
        ],
        [],
        pod(cpu="2", node_selector={"zone": "a"}),
        "0/4 nodes are available: 1 Insufficient cpu, "
        "1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint(s), 1 node(s) were unschedulable."
        " {dra}"
        "preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling.",
        id="first-failing-filter-wins",
    ),
    pytest.param(
        [node("ports"), node("crowded", pods="1")],
        [
            on("ports", pod("web", ports=[{"containerPort": 80, "hostPort": 80}])),
            on("crowded", pod("other")),
        ],
        pod(ports=[{"containerPort": 80, "hostPort": 80}]),
        "0/2 nodes are available: 1 Too many pods, "
        "1 node(s) didn't have free ports for the requested pod ports."
        " {dra}"
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.",
        id="uppercase-sorts-first",
    ),
    pytest.param(
        [node("n1"), node("n2")],
        [],
        pod(node_name="n9"),
        "0/2 nodes are available: 2 node(s) {node_name}."
        " {dra}"
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
        id="node-name",
    ),
    pytest.param(
        [node("n1", labels={"zone": "a"}), node("n2")],
        [],
        pod(required=[term(expr("zone", "In", "b"))]),
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."
        " {dra}"
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
        id="affinity",
    ),
]


@pytest.mark.parametrize("release", SUPPORTED, ids=str)
@pytest.mark.parametrize(("nodes", "existing", "raw", "message"), MESSAGE_CASES)
def test_failure_message(
    nodes: list[Json], existing: list[Json], raw: Json, message: str, release: Release
) -> None:
    result = schedule(nodes, existing, raw, Features.defaults(release))
    message = worded(message, release)
    assert result.node is None
    assert result.status.rejected
    assert result.status.message == message
    assert result.diagnosis is not None
    assert result.diagnosis.message() == message
    assert result.diagnosis.num_nodes == len(nodes)


def test_a_pod_group_member_runs_no_post_filter_from_137() -> None:
    """1.37's pod group cycle leaves a member's preemption to the group (PodGroupPostFilter):
    its message has no `preemption:` part; a pod of no group, and any pod before 1.37, has."""
    cache = make_cache([node("a", cpu="1")])
    member = parsed(pod("m", cpu="2", schedulingGroup={"podGroupName": "g"}))
    alone = parsed(pod("p", cpu="2"))
    shown = {}
    for release, gates in (("1.36", "GenericWorkload=true"), ("1.37", "GenericWorkload=true")):
        features = parse_gates(gates, Release.parse(release))
        handle = Handle(nodes=cache.table, storage=cache.storage, features=features)
        fw = Framework(multipoint("x", DEFAULT_PLUGINS), IN_TREE, handle)
        for p in (member, alone):
            shown[release, p.name] = fw.find_nodes(CycleState(), p, cache.table).status.message
    assert "preemption:" not in shown["1.37", "m"]
    assert shown["1.37", "m"].startswith("0/1 nodes are available: 1 Insufficient cpu.")
    assert "preemption:" in shown["1.37", "p"]
    assert "preemption:" in shown["1.36", "m"]


def test_rejecting_plugins_are_the_first_failing_filters() -> None:
    result = schedule(
        [node("t", cpu="1", taints=[TAINT]), node("s", cpu="1"), node("u", unschedulable=True)],
        [],
        pod(cpu="2"),
    )
    assert result.diagnosis.rejecting_plugins == {
        "TaintToleration",
        "NodeResourcesFit",
        "NodeUnschedulable",
    }


def test_no_nodes() -> None:
    result = schedule([], [], pod())
    assert result.node is None
    assert result.status.rejected
    assert result.status.message == "no nodes available to schedule pods"
    assert result.diagnosis.message() == "no nodes available to schedule pods"


@pytest.mark.parametrize(
    ("nodes", "existing", "raw", "unresolvable"),
    [
        pytest.param(
            [node("a", cpu="1"), node("b", cpu="1")], [], pod(cpu="2"), True, id="too-big"
        ),
        pytest.param(
            [node("a", taints=[TAINT]), node("b", cpu="1")],
            [],
            pod(cpu="2"),
            True,
            id="taint-and-too-big",
        ),
        pytest.param(
            [node("a", cpu="1"), node("b", cpu="4")],
            [on("b", pod("e", cpu="3"))],
            pod(cpu="2"),
            False,
            id="one-resolvable",
        ),
        pytest.param(
            [node("a", cpu="1", memory="4Gi")],
            [on("a", pod("e", memory="3Gi"))],
            pod(cpu="2", memory="2Gi"),
            True,  # one status per node: unresolvable as soon as one request can never fit
            id="node-with-unresolvable-and-resolvable-reasons",
        ),
    ],
)
def test_unresolvable(
    nodes: list[Json], existing: list[Json], raw: Json, unresolvable: bool
) -> None:
    result = schedule(nodes, existing, raw)
    assert result.node is None
    assert result.diagnosis.unresolvable is unresolvable
    expected = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else Code.UNSCHEDULABLE
    assert result.status.code is expected


@pytest.mark.parametrize("release", SUPPORTED, ids=str)
@pytest.mark.parametrize(
    ("nodes", "raw", "message"),
    [
        pytest.param(
            [node("n1", taints=[TAINT]), node("n2"), node("n3")],
            pod(required=[term(fields=[expr("metadata.name", "In", "n1")])]),
            "0/3 nodes are available: 1 node(s) had untolerated taint(s), "
            "2 node(s) didn't satisfy plugin(s) [NodeAffinity]."
            " {dra}"
            "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
            id="narrowed-to-named-node",
        ),
        pytest.param(
            [node("n1"), node("n2"), node("n3")],
            pod(
                required=[
                    term(
                        fields=[
                            expr("metadata.name", "In", "n1"),
                            expr("metadata.name", "In", "n2"),
                        ]
                    )
                ]
            ),
            # An outright PreFilter rejection: DynamicResources' PostFilter fails (no state).
            "0/3 nodes are available: pod affinity terms conflict. not found",
            id="conflicting-names",
        ),
        pytest.param(
            [node("n1"), node("n2")],
            pod(required=[term(fields=[expr("metadata.name", "In", "ghost")])]),
            "0/2 nodes are available: 2 node(s) didn't satisfy plugin(s) [NodeAffinity]."
            " {dra}"
            "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
            id="named-node-missing",
        ),
        pytest.param(
            [node("n1", cpu="1"), node("n2", cpu="1"), node("n3", cpu="1")],
            pod(
                cpu="2",
                required=[term(expr("zone", "Exists"), fields=[expr("metadata.name", "In", "n1")])],
            ),
            "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
            "2 node(s) didn't satisfy plugin(s) [NodeAffinity]."
            " {dra}"
            "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
            id="filters-only-the-named-node",
        ),
    ],
)
def test_node_affinity_prefilter_message(
    nodes: list[Json], raw: Json, message: str, release: Release
) -> None:
    """kube-scheduler's NodeAffinity PreFilter narrows the nodes to the names of required
    `matchFields metadata.name In` terms; the others count under the absent status."""
    result = schedule(nodes, [], raw, Features.defaults(release))
    assert result.node is None
    assert result.status.rejected
    assert result.diagnosis.message() == worded(message, release)
    assert "NodeAffinity" in result.diagnosis.rejecting_plugins


def test_prefilter_rejection_status_is_the_fit_error_message() -> None:
    raw = pod(
        required=[
            term(fields=[expr("metadata.name", "In", "n1"), expr("metadata.name", "In", "n2")])
        ]
    )
    result = schedule([node("n1"), node("n2"), node("n3")], [], raw)
    assert result.status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert result.status.message == (
        # DynamicResources' PreFilter never ran: its PostFilter fails on its missing state,
        # ending PostFilter before preemption (kube-scheduler's words, on the plane).
        "0/3 nodes are available: pod affinity terms conflict. not found"
    )


def test_match_fields_schedules_on_the_named_node() -> None:
    result = schedule(
        [node("n1"), node("n2"), node("n3")],
        [],
        pod(required=[term(fields=[expr("metadata.name", "In", "n2")])]),
    )
    assert result.node == "n2"
    assert result.status.ok


# -- choosing a node -------------------------------------------------------------------------

PREFER_A = [{"weight": 50, "preference": term(expr("zone", "In", "a"))}]
SOFT = {"key": "soft", "effect": "PreferNoSchedule"}


@pytest.mark.parametrize(
    ("nodes", "raw", "args", "chosen"),
    [
        # a: NodeAffinity 100 x 2 = 200, TaintToleration 0 x 3; b: 0 + 100 x 3 = 300.
        pytest.param(
            [node("a", labels={"zone": "a"}, taints=[SOFT]), node("b")],
            pod(cpu="1", preferred=PREFER_A),
            {},
            "b",
            id="taint-weight-3-beats-affinity-weight-2",
        ),
        pytest.param(
            [node("a", labels={"zone": "a"}, taints=[SOFT]), node("b")],
            pod(cpu="1", preferred=PREFER_A, tolerations=[{"key": "soft", "operator": "Exists"}]),
            {},
            "a",
            id="tolerated-prefer-taint",
        ),
        # LeastAllocated: big (87 + 93) // 2 = 90, small (50 + 75) // 2 = 62; balanced
        # big 96, small 87.
        pytest.param(
            [node("big", cpu="8", memory="16Gi"), node("small", cpu="2", memory="4Gi")],
            pod(cpu="1", memory="1Gi"),
            {},
            "big",
            id="least-allocated",
        ),
        # MostAllocated: big (12 + 6) // 2 = 9 + 96, small (50 + 25) // 2 = 37 + 87.
        pytest.param(
            [node("big", cpu="8", memory="16Gi"), node("small", cpu="2", memory="4Gi")],
            pod(cpu="1", memory="1Gi"),
            {"NodeResourcesFit": {"scoringStrategy": {"type": "MostAllocated"}}},
            "small",
            id="most-allocated",
        ),
    ],
)
def test_picks_highest_weighted_score(
    nodes: list[Json], raw: Json, args: dict[str, Any], chosen: str
) -> None:
    cache = make_cache(nodes)
    result = build(cache, args=args).find_nodes(CycleState(), parsed(raw), cache.table)
    assert result.status.ok
    assert result.node == chosen
    assert result.feasible == len(nodes)


# Which score plugins kube-scheduler scores (and logs at -v=10) in the default profile for a
# pod: a PreScore that skips leaves its plugin out; the others never skip. VolumeBinding's
# PreScore skips a pod without claims only while StorageCapacityScoring is off (before 1.37).
ALWAYS_SCORED = {"TaintToleration", "NodeResourcesFit", "ImageLocality", "DynamicResources"}
PREFERS_ZONE = {
    "nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "preference": {"matchExpressions": [expr("zone", "In", "z1")]}}
        ]
    }
}


@pytest.mark.parametrize(
    ("raw", "scored"),
    [
        pytest.param(pod("p", cpu="1"), {"NodeResourcesBalancedAllocation"}, id="plain"),
        pytest.param(pod("p", cpu="0", memory="0"), set(), id="best-effort"),
        pytest.param(
            pod("p", cpu="1", affinity=PREFERS_ZONE),
            {"NodeResourcesBalancedAllocation", "NodeAffinity"},
            id="preferred-node-affinity",
        ),
        pytest.param(
            pod(
                "p",
                cpu="1",
                topologySpreadConstraints=[
                    {
                        "maxSkew": 1,
                        "topologyKey": "zone",
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": {"matchLabels": {"app": "x"}},
                    }
                ],
            ),
            {"NodeResourcesBalancedAllocation", "PodTopologySpread"},
            id="soft-spread",
        ),
    ],
)
@pytest.mark.parametrize("release", SUPPORTED, ids=str)
def test_skipped_score_plugins_are_kube_scheduler_s(
    raw: Json, scored: set[str], release: Release
) -> None:
    """The dry run's parts are the plugins kube-scheduler scores; TaintToleration gives every
    node 100 x 3 when no node has an untolerated PreferNoSchedule taint."""
    cache = make_cache(
        [node("a", labels={"zone": "z1"}), node("b", labels={"zone": "z2"}), node("c")]
    )
    fw = build(cache, features=Features.defaults(release))
    dry = fw.dry_run(parsed(raw), cache.table, post_filter=False)
    volumes = {"VolumeBinding"} if release >= Release(1, 37) else set()
    assert set(dry.scores) == ALWAYS_SCORED | scored | volumes
    if volumes:
        assert dry.scores["VolumeBinding"].tolist() == [0, 0, 0]
    assert dry.scores["TaintToleration"].tolist() == [100, 100, 100]
    weighted = sum(s * fw.weights[name] for name, s in dry.scores.items())
    assert dry.total.tolist() == weighted.tolist()
    assert all(t >= 300 for t in dry.total.tolist())


def test_without_score_plugins_every_node_totals_one() -> None:
    """kube-scheduler's prioritizeNodes: no score plugin and no extender, every node 1."""
    cache = make_cache([node("a"), node("b")])
    spec = multipoint("x", DEFAULT_PLUGINS)
    spec = ProfileSpec(spec.scheduler_name, spec.points, disabled={"score": frozenset({"*"})})
    fw = Framework(spec, IN_TREE, Handle(nodes=cache.table))
    assert not fw.score_plugins
    assert fw.evaluate(parsed(pod("p")), cache.table).scores == {"a": 1, "b": 1}


def test_single_feasible_node_is_chosen() -> None:
    result = schedule([node("t", taints=[TAINT]), node("ok"), node("s", cpu="1")], [], pod(cpu="2"))
    assert (result.node, result.feasible) == ("ok", 1)


# -- configuration errors --------------------------------------------------------------------


def test_unknown_multipoint_plugin() -> None:
    with pytest.raises(ConfigError) as err:
        build(make_cache([]), extra=[PluginRef("NoSuchPlugin")])
    index = len(DEFAULT_PLUGINS)
    assert err.value.problems == [
        f'plugins.multiPoint.enabled[{index}].name: unknown plugin "NoSuchPlugin"'
    ]


def test_unknown_plugin_at_an_extension_point() -> None:
    spec = ProfileSpec(
        "x",
        {"multiPoint": DEFAULT_PLUGINS, "score": (PluginRef("NodeAffinity"), PluginRef("Nope"))},
    )
    handle = Handle()
    with pytest.raises(ConfigError) as err:
        Framework(spec, IN_TREE, handle)
    assert 'plugins.score.enabled[1].name: unknown plugin "Nope"' in err.value.problems


def test_plugin_at_a_point_it_does_not_implement() -> None:
    spec = ProfileSpec("x", {"multiPoint": DEFAULT_PLUGINS, "filter": (PluginRef("PrioritySort"),)})
    handle = Handle()
    with pytest.raises(ConfigError, match=r"plugins\.filter\.enabled\[0\]\.name"):
        Framework(spec, IN_TREE, handle)


@pytest.mark.parametrize(
    ("args", "path"),
    [
        pytest.param(
            {"scoringStrategy": {"type": "Fancy"}},
            "pluginConfig[NodeResourcesFit].args.scoringStrategy.type",
            id="unknown-type",
        ),
        pytest.param(
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {
                        "shape": [
                            {"utilization": 50, "score": 1},
                            {"utilization": 10, "score": 2},
                        ]
                    },
                }
            },
            "pluginConfig[NodeResourcesFit].args.scoringStrategy.requestedToCapacityRatio"
            ".shape[1].utilization",
            id="shape-not-increasing",
        ),
        pytest.param(
            {"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
            # (1.35: `...requestedToCapacityRatio.shape`; tests/unit/config/test_releases.py)
            "pluginConfig[NodeResourcesFit].args.scoringStrategy.requestedToCapacityRatio",
            id="ratio-missing",
        ),
        pytest.param(
            {"scoringStrategy": {"resources": [{"name": "cpu", "weight": 101}]}},
            "pluginConfig[NodeResourcesFit].args.scoringStrategy.resources[0].weight",
            id="weight-out-of-range",
        ),
    ],
)
def test_invalid_fit_args(args: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as err:
        build(make_cache([]), args={"NodeResourcesFit": args})
    assert len(err.value.problems) == 1
    assert err.value.problems[0].startswith(path + ":")


def test_unknown_strategy_is_named() -> None:
    with pytest.raises(ConfigError, match="Fancy"):
        build(make_cache([]), args={"NodeResourcesFit": {"scoringStrategy": {"type": "Fancy"}}})


# -- Reserve ---------------------------------------------------------------------------------


def registration(plugin: Plugin) -> Registration[NoArgs]:
    """A registration that always returns `plugin`."""
    return Registration(plugin.name, lambda args, handle: plugin, NoArgs)


class Recorder(ReservePlugin):
    """A Reserve plugin writing what is called into a shared log."""

    def __init__(self, name: str, log: list[str], result: Status = SUCCESS) -> None:
        self.name = name
        self.log = log
        self.result = result

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        self.log.append(f"reserve:{self.name}")
        return self.result

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        self.log.append(f"unreserve:{self.name}")


def reserve_framework(log: list[str], failing: Status | None) -> Framework:
    plugins = {
        "A": Recorder("A", log),
        "B": Recorder("B", log, failing or SUCCESS),
        "C": Recorder("C", log),
    }
    registry = [registration(p) for p in plugins.values()]
    return build(
        make_cache([node("n1")]),
        extra=[PluginRef("A"), PluginRef("B"), PluginRef("C")],
        registry=registry,
    )


@pytest.mark.parametrize(
    "failing",
    [
        pytest.param(Status.unschedulable("no room"), id="rejected"),
        pytest.param(Status.error("boom"), id="error"),
    ],
)
def test_reserve_failure_unreserves_in_reverse_order(failing: Status) -> None:
    log: list[str] = []
    fw = reserve_framework(log, failing)
    status = fw.reserve(CycleState(), parsed(pod()), "n1")
    assert status.code is failing.code
    assert status.plugin == "B"
    assert status.reasons == failing.reasons
    assert log[:2] == ["reserve:A", "reserve:B"]
    assert "reserve:C" not in log
    assert [e for e in log if e in ("unreserve:A", "unreserve:B")] == [
        "unreserve:B",
        "unreserve:A",
    ]
    assert log[-1] == "unreserve:A"


def test_reserve_failure_unreserves_every_reserve_plugin() -> None:
    """kube-scheduler's RunReservePluginsUnreserve runs every Reserve plugin's Unreserve in
    reverse order, also those after the failing one (Unreserve must be idempotent)."""
    log: list[str] = []
    fw = reserve_framework(log, Status.unschedulable("no room"))
    fw.reserve(CycleState(), parsed(pod()), "n1")
    assert log == ["reserve:A", "reserve:B", "unreserve:C", "unreserve:B", "unreserve:A"]


def test_reserve_success_then_unreserve_all_in_reverse() -> None:
    log: list[str] = []
    fw = reserve_framework(log, None)
    state, info = CycleState(), parsed(pod())
    assert fw.reserve(state, info, "n1").ok
    assert log == ["reserve:A", "reserve:B", "reserve:C"]
    fw.unreserve(state, info, "n1")
    assert log[3:] == ["unreserve:C", "unreserve:B", "unreserve:A"]


# -- Permit ----------------------------------------------------------------------------------


class Permit(PermitPlugin):
    def __init__(self, name: str, status: Status, timeout: float = 0.0) -> None:
        self.name = name
        self.status = status
        self.timeout = timeout

    def permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, float]:
        return self.status, self.timeout


WAIT = Status(Code.WAIT)


def permit_framework(*plugins: Permit) -> Framework:
    registry = [registration(p) for p in plugins]
    return build(
        make_cache([node("n1")]),
        extra=[PluginRef(p.name) for p in plugins],
        registry=registry,
    )


async def test_permit_wait_then_allow() -> None:
    fw = permit_framework(Permit("Gate", WAIT, 60))
    info = parsed(pod())
    assert fw.permit(CycleState(), info, "n1").code is Code.WAIT
    waiting = fw.handle.waiting_pods.get(info.uid)
    assert waiting is not None
    assert (waiting.node, waiting.pending_plugins) == ("n1", frozenset({"Gate"}))
    task = asyncio.create_task(fw.wait_on_permit(info))
    await asyncio.sleep(0)
    assert not task.done()
    waiting.allow("Gate")
    status = await task
    assert status.ok
    assert fw.handle.waiting_pods.get(info.uid) is None
    assert len(fw.handle.waiting_pods) == 0


async def test_permit_wait_then_reject() -> None:
    fw = permit_framework(Permit("Gate", WAIT, 60))
    info = parsed(pod())
    fw.permit(CycleState(), info, "n1")
    task = asyncio.create_task(fw.wait_on_permit(info))
    await asyncio.sleep(0)
    fw.handle.waiting_pods.get(info.uid).reject("Gate", "quota exceeded")
    status = await task
    assert status.code is Code.UNSCHEDULABLE
    assert status.rejected
    assert status.reasons == ("quota exceeded",)
    assert status.plugin == "Gate"
    assert fw.handle.waiting_pods.get(info.uid) is None


async def test_a_preempted_wait_ends_in_an_error_in_kube_scheduler_s_words() -> None:
    """`waitingPod.Preempt` (DefaultPreemption, 1.36 on): not a rejection, an error that
    WaitOnPermit wraps; a second preemption finds the wait over."""
    fw = permit_framework(Permit("Gate", WAIT, 60))
    info = parsed(pod())
    fw.permit(CycleState(), info, "n1")
    task = asyncio.create_task(fw.wait_on_permit(info))
    await asyncio.sleep(0)
    waiting = fw.handle.waiting_pods.get(info.uid)
    assert waiting.preempt("DefaultPreemption", "preempted")
    assert not waiting.preempt("DefaultPreemption", "preempted")
    status = await task
    assert (status.code, status.plugin) == (Code.ERROR, "DefaultPreemption")
    assert status.reasons == ("waiting on permit for pod: preempted",)


async def test_permit_wait_times_out() -> None:
    fw = permit_framework(Permit("Gate", WAIT, 0.01))
    info = parsed(pod())
    fw.permit(CycleState(), info, "n1")
    status = await fw.wait_on_permit(info)
    assert status.code is Code.UNSCHEDULABLE
    assert status.plugin == "Gate"
    assert status.message.startswith("rejected due to timeout after waiting ")
    assert status.message.endswith(" at plugin Gate")
    assert fw.handle.waiting_pods.get(info.uid) is None


async def test_permit_timeout_message_formats_a_go_duration() -> None:
    """kube-scheduler prints the timeout with %v of a time.Duration."""
    fw = permit_framework(Permit("Gate", WAIT, 0.01))
    info = parsed(pod())
    fw.permit(CycleState(), info, "n1")
    status = await fw.wait_on_permit(info)
    assert status.message == "rejected due to timeout after waiting 10ms at plugin Gate"


async def test_permit_waits_for_every_waiting_plugin() -> None:
    fw = permit_framework(Permit("First", WAIT, 60), Permit("Second", WAIT, 60))
    info = parsed(pod())
    assert fw.permit(CycleState(), info, "n1").code is Code.WAIT
    waiting = fw.handle.waiting_pods.get(info.uid)
    assert waiting.pending_plugins == {"First", "Second"}
    task = asyncio.create_task(fw.wait_on_permit(info))
    waiting.allow("First")
    await asyncio.sleep(0)
    assert not task.done()
    assert waiting.pending_plugins == {"Second"}
    waiting.allow("Second")
    assert (await task).ok


async def test_allowed_plugins_timer_no_longer_rejects() -> None:
    """kube-scheduler's waitingPod.Allow stops the allowing plugin's timer."""
    fw = permit_framework(Permit("Quick", WAIT, 0.01), Permit("Slow", WAIT, 60))
    info = parsed(pod())
    fw.permit(CycleState(), info, "n1")
    waiting = fw.handle.waiting_pods.get(info.uid)
    task = asyncio.create_task(fw.wait_on_permit(info))
    waiting.allow("Quick")
    await asyncio.sleep(0.1)  # well past Quick's timeout, which Allow cancelled
    waiting.allow("Slow")
    assert (await task).ok


async def test_permit_rejection_wins_over_wait() -> None:
    fw = permit_framework(Permit("Gate", WAIT, 60), Permit("Deny", Status.unschedulable("not now")))
    info = parsed(pod())
    status = fw.permit(CycleState(), info, "n1")
    assert status.code is Code.UNSCHEDULABLE
    assert status.plugin == "Deny"
    assert status.reasons == ("not now",)
    assert fw.handle.waiting_pods.get(info.uid) is None


async def test_permit_success_without_waiting() -> None:
    fw = permit_framework(Permit("Fine", SUCCESS))
    info = parsed(pod())
    assert fw.permit(CycleState(), info, "n1").ok
    assert len(fw.handle.waiting_pods) == 0
    assert (await fw.wait_on_permit(info)).ok


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (0.000001, "1µs"),
        (0.0015, "1.5ms"),
        (0.01, "10ms"),
        (1, "1s"),
        (1.5, "1.5s"),
        (60, "1m0s"),
        (90.5, "1m30.5s"),
        (900, "15m0s"),
        (3600, "1h0m0s"),
        (3723, "1h2m3s"),
    ],
)
def test_go_duration(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


# -- numFeasibleNodesToFind ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("num_nodes", "percentage", "expected"),
    [
        (1, 0, 1),
        (50, 0, 50),
        (99, 0, 99),
        (100, 0, 100),  # 50% of 100 = 50, raised to the minimum of 100
        (500, 0, 230),  # 50 - 500/125 = 46%
        (1000, 0, 420),  # 42%
        (5000, 0, 500),  # 10%
        (6000, 0, 300),  # 50 - 48 = 2% -> the 5% floor
        (10000, 0, 500),
        (500, 10, 100),  # 50, raised to 100
        (2000, 10, 200),
        (500, 100, 500),
        (99, 10, 99),
    ],
)
def test_num_feasible_nodes_to_find(num_nodes: int, percentage: int, expected: int) -> None:
    assert num_feasible_nodes_to_find(num_nodes, percentage) == expected


@pytest.mark.parametrize(
    ("num_nodes", "percentage", "scored"),
    [(500, 0, 230), (99, 0, 99), (500, 10, 100), (300, 100, 300)],
)
def test_only_a_sample_of_feasible_nodes_is_scored(
    num_nodes: int, percentage: int, scored: int
) -> None:
    cache = make_cache([node(f"n{i:04d}") for i in range(num_nodes)])
    fw = build(cache, percentage=percentage)
    result = fw.find_nodes(CycleState(), parsed(pod(cpu="100m")), cache.table)
    assert result.status.ok
    assert result.feasible == scored


def test_the_sample_walks_the_feasible_rows_from_a_rotating_start() -> None:
    """The sample is the first `numFeasibleNodesToFind` feasible rows met walking the table
    from the start, wrapping round; the next walk starts after the last row taken. Checked
    against that walk, row by row, for feasible sets with and without a wrap."""
    import random

    import numpy as np

    rng = random.Random(7)
    cache = make_cache([node("n0")])
    fw = build(cache)
    n = 1000
    k = num_feasible_nodes_to_find(n, 0)
    for _ in range(300):
        feasible = np.array(sorted(rng.sample(range(n), rng.randint(1, n))), dtype=np.int64)
        start = rng.randrange(n)
        fw._next_start = start
        walk = [r for r in (*range(start, n), *range(start)) if r in set(feasible.tolist())]
        taken = walk[:k]
        chosen = fw._sample(feasible, n)
        assert chosen.tolist() == sorted(taken)
        expected_next = (taken[-1] + 1) % n if len(walk) > k else start
        assert fw._next_start == expected_next


@pytest.mark.parametrize("num_nodes", [4, 40])
def test_assumed_pods_change_later_scores(num_nodes: int) -> None:
    """Scores follow the usage the cache records: identical pods assumed one after another
    spread one per identical node (an empty node always scores higher under LeastAllocated),
    whether the framework rescores a few rows or many."""
    cache = make_cache([node(f"n{i:02d}") for i in range(num_nodes)])
    fw = build(cache)
    placed: dict[str, int] = {}
    for i in range(num_nodes):
        info = parsed(pod(f"p{i}", cpu="1", memory="2Gi"))
        result = fw.find_nodes(CycleState(), info, cache.table)
        assert result.status.ok
        cache.assume(info, result.node)
        placed[result.node] = placed.get(result.node, 0) + 1
    assert placed == {f"n{i:02d}": 1 for i in range(num_nodes)}


# -- PostFilter ------------------------------------------------------------------------------


class Recording(PostFilterPlugin):
    """A PostFilter that records the diagnosis it is given and answers `outcome`."""

    def __init__(self, name: str, outcome: PostFilterResult) -> None:
        self.name = name
        self.outcome = outcome
        self.seen: list[Diagnosis] = []

    def post_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, diagnosis: Diagnosis
    ) -> PostFilterResult:
        self.seen.append(diagnosis)
        return self.outcome


def post_filter_framework(*plugins: Recording) -> tuple[Framework, Cache]:
    cache = make_cache([node("t", taints=[TAINT]), node("small", cpu="1"), node("big")])
    return (
        build(
            cache,
            extra=[PluginRef(p.name) for p in plugins],
            registry=[registration(p) for p in plugins],
            post_filters=False,  # these PostFilters alone, in the order given
        ),
        cache,
    )


def test_post_filter_runs_when_no_node_fits_with_every_nodes_status() -> None:
    nominator = Recording(
        "Nominator", PostFilterResult(Status(reasons=("made room",)), nominated_node="big")
    )
    fw, cache = post_filter_framework(nominator)
    result = fw.find_nodes(CycleState(), parsed(pod(cpu="8")), cache.table)
    assert result.node is None
    assert result.nominated_node == "big"
    (diag,) = nominator.seen
    statuses = diag.statuses(cache.table.names)
    assert statuses["t"] == Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (TAINTED,), "TaintToleration"
    )
    assert statuses["small"].reasons == ("Insufficient cpu",)
    assert statuses["small"].plugin == "NodeResourcesFit"
    assert statuses["small"].code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE  # 8 > its 1 cpu
    assert result.status.message == (
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu. made room"
    )


def test_post_filter_does_not_run_when_a_node_fits() -> None:
    nominator = Recording("Nominator", PostFilterResult(SUCCESS))
    fw, cache = post_filter_framework(nominator)
    assert fw.find_nodes(CycleState(), parsed(pod(cpu="1")), cache.table).node is not None
    assert nominator.seen == []


def test_post_filter_rejections_join_the_message_until_one_succeeds() -> None:
    first = Recording("First", PostFilterResult(Status.unschedulable("no victims")))
    second = Recording("Second", PostFilterResult(Status.unschedulable("not eligible")))
    fw, cache = post_filter_framework(first, second)
    result = fw.find_nodes(CycleState(), parsed(pod(cpu="8")), cache.table)
    assert result.nominated_node == ""
    assert result.status.message.endswith("2 Insufficient cpu. no victims, not eligible")
    assert len(second.seen) == 1


def test_an_unresolvable_post_filter_stops_the_others() -> None:
    first = Recording("First", PostFilterResult(Status.unschedulable("never", resolvable=False)))
    second = Recording("Second", PostFilterResult(SUCCESS, nominated_node="big"))
    fw, cache = post_filter_framework(first, second)
    result = fw.find_nodes(CycleState(), parsed(pod(cpu="8")), cache.table)
    assert result.status.message.endswith(" never")
    assert second.seen == []
    assert result.nominated_node == ""


def test_a_post_filter_error_ends_post_filter_and_closes_the_message() -> None:
    """kube-scheduler: the pod is unschedulable all the same, the error's text in place of
    the PostFilter reasons; the PostFilters after it do not run."""
    broken = Recording("Broken", PostFilterResult(Status.error("cannot list victims")))
    after = Recording("After", PostFilterResult(SUCCESS, nominated_node="big"))
    fw, cache = post_filter_framework(broken, after)
    result = fw.find_nodes(CycleState(), parsed(pod(cpu="8")), cache.table)
    assert result.status.rejected
    assert result.status.message == (
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu. "
        "cannot list victims"
    )
    assert after.seen == []
    assert result.nominated_node == ""


def test_post_filter_also_runs_after_a_prefilter_rejection() -> None:
    """kube-scheduler: a FitError from PreFilter goes through PostFilter too."""
    nominator = Recording("Nominator", PostFilterResult(Status.unschedulable("none")))
    fw, cache = post_filter_framework(nominator)
    disjoint = [expr("metadata.name", "In", "a"), expr("metadata.name", "In", "b")]
    raw = pod(required=[term(fields=disjoint)])
    result = fw.find_nodes(CycleState(), parsed(raw), cache.table)
    (diag,) = nominator.seen
    assert diag.prefilter_status is not None
    assert set(diag.statuses(cache.table.names)) == {"t", "small", "big"}
    assert result.status.message == ("0/3 nodes are available: pod affinity terms conflict. none")


def test_evaluate_gives_every_feasible_node_its_total_and_the_ties() -> None:
    cache = make_cache([node("a", cpu="4"), node("b", cpu="4"), node("c", cpu="8")])
    fw = build(cache)
    evaluation = fw.evaluate(parsed(pod(cpu="1")), cache.table)
    assert evaluation.status.ok
    assert set(evaluation.scores) == {"a", "b", "c"}
    assert evaluation.best == {"c"}  # the most room left
    assert evaluation.scores["a"] == evaluation.scores["b"] < evaluation.scores["c"]
    nowhere = fw.evaluate(parsed(pod(cpu="1", node_selector={"x": "y"})), cache.table)
    assert nowhere.scores == {}
    assert nowhere.best == set()
    assert not nowhere.status.ok
    assert nowhere.status.message == (
        "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
    )


class Gate(PreFilterPlugin):
    """A PreFilter answering `status`, recording that it ran."""

    def __init__(self, name: str, status: Status) -> None:
        self.name = name
        self.status = status
        self.ran = 0

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        self.ran += 1
        return None, self.status


def gated_framework(*gates: Gate) -> tuple[Framework, Cache]:
    cache = make_cache([node("a"), node("b")])
    fw = build(
        cache,
        extra=[PluginRef(g.name) for g in gates],
        registry=[registration(g) for g in gates],
        post_filters=False,
    )
    return fw, cache


def test_a_resolvable_prefilter_rejection_runs_the_rest_and_the_last_one_stands() -> None:
    """kube-scheduler (kubernetes#119770): preemption needs every PreFilter's state."""
    first = Gate("First", Status.unschedulable("first says no"))
    second = Gate("Second", Status.unschedulable("second says no"))
    fw, cache = gated_framework(first, second)
    result = fw.find_nodes(CycleState(), parsed(pod()), cache.table)
    assert (first.ran, second.ran) == (1, 1)
    assert result.status.rejected
    assert result.status.message == "0/2 nodes are available: second says no."
    assert result.diagnosis.rejecting_plugins == {"Second"}


def test_an_unresolvable_prefilter_rejection_stops_prefilter() -> None:
    first = Gate("First", Status.unschedulable("never here", resolvable=False))
    second = Gate("Second", SUCCESS)
    fw, cache = gated_framework(first, second)
    result = fw.find_nodes(CycleState(), parsed(pod()), cache.table)
    assert (first.ran, second.ran) == (1, 0)
    assert result.status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert result.status.message == "0/2 nodes are available: never here."


# -- PreScore errors and scores out of range -------------------------------------------------


class Scorer(PreScorePlugin, ScorePlugin):
    """A plugin of an outside author: its PreScore's status, its scores as given."""

    name = "Scorer"

    def __init__(self, pre: Status = SUCCESS, scores: Sequence[int] = (0, 0)) -> None:
        self.pre = pre
        self.scores = scores

    def pre_score(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: IntArray
    ) -> Status:
        return self.pre

    def score(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: IntArray
    ) -> IntArray:
        return np.array(self.scores, dtype=np.int64)[: feasible.size]


@pytest.mark.parametrize(
    ("plugin", "message"),
    [
        pytest.param(
            Scorer(pre=Status.error("no state")),
            'running PreScore plugin "Scorer": no state',
            id="prescore-error",
        ),
        pytest.param(
            Scorer(scores=(100, 101)),
            'plugin "Scorer" returns an invalid score 101, it should in the range of [0, 100] '
            "after normalizing",
            id="above",
        ),
        pytest.param(
            Scorer(scores=(-1, 0)),
            'plugin "Scorer" returns an invalid score -1, it should in the range of [0, 100] '
            "after normalizing",
            id="below",
        ),
    ],
)
def test_a_scoring_error_fails_the_attempt_as_kube_scheduler_s(
    plugin: Scorer, message: str
) -> None:
    cache = make_cache([node("a"), node("b")])
    fw = build(cache, extra=[PluginRef("Scorer")], registry=[registration(plugin)])
    result = fw.find_nodes(CycleState(), parsed(pod("p")), cache.table)
    assert result.node is None
    assert result.status.code is Code.ERROR
    assert result.status.message == message
    dry = fw.dry_run(parsed(pod("p")), cache.table)
    assert dry.status.message == message
    assert fw.place(parsed(pod("p")), cache.table) == (None, message)


def test_scores_in_range_and_a_skipping_prescore_are_fine() -> None:
    cache = make_cache([node("a"), node("b")])
    for plugin in (Scorer(scores=(0, 100)), Scorer(pre=SKIP, scores=(500, 500))):
        fw = build(cache, extra=[PluginRef("Scorer")], registry=[registration(plugin)])
        assert fw.find_nodes(CycleState(), parsed(pod("p")), cache.table).node in ("a", "b")


# -- PodGroupPostFilter (1.37) ------------------------------------------------------------------

WORKLOADS_137 = parse_gates("GenericWorkload=true", Release(1, 37))


class GroupAnswer(PodGroupPostFilterPlugin):
    """A PodGroupPostFilter answering `status` and counting its calls."""

    def __init__(self, name: str, status: Status) -> None:
        self.name = name
        self.status = status
        self.calls = 0

    def pod_group_post_filter(self, group: SchedulingGroup | None, pod: PodInfo) -> Status:
        self.calls += 1
        return self.status


def group_framework(features: Features, *plugins: GroupAnswer) -> Framework:
    """The release's default profile; with `plugins`, they replace its PodGroupPostFilters."""
    own = ("DynamicResources", "DefaultPreemption") if plugins else ()
    refs = [r for r in default_plugins(IN_TREE, features) if r.name not in own]
    refs += [PluginRef(p.name) for p in plugins]
    registry = Registry([*IN_TREE.values(), *(registration(p) for p in plugins)])
    return Framework(multipoint("x", refs), registry, Handle(features=features))


def test_the_default_pod_group_post_filters_answer_in_the_profile_s_order() -> None:
    """DynamicResources comes before DefaultPreemption (kube-scheduler's default profile): its
    Unschedulable reason is kept and the group preemption asked; "no victims" (Unschedulable
    and unresolvable) is the whole answer."""
    fw = group_framework(WORKLOADS_137)
    assert [p.name for p in fw.pod_group_post_filter_plugins] == [
        "DynamicResources",
        "DefaultPreemption",
    ]
    never = fw.pod_group_post_filter(None, parsed(pod("p", preemptionPolicy=PREEMPT_NEVER)))
    assert never == Status.unschedulable(
        CLAIMS_RELEASED, GROUP_MAY_NOT_PREEMPT, plugin="DynamicResources"
    )
    may = fw.pod_group_post_filter(None, parsed(pod("p")))
    assert may == Status.unschedulable(
        NO_GROUP_VICTIMS, plugin="DefaultPreemption", resolvable=False
    )
    assert fw.handle.pod_group_post_filter(None, parsed(pod("p"))) == may


def test_pod_group_post_filter_is_a_point_of_1_37_run_with_generic_workload_only() -> None:
    before = group_framework(
        parse_gates("GenericWorkload=true,GangScheduling=true", Release(1, 36))
    )
    assert before.pod_group_post_filter_plugins == []
    assert before.pod_group_post_filter(None, parsed(pod("p"))) == Status.unschedulable()
    # Listed at 1.37 as kube-scheduler lists them, but not run while the gate is off.
    off = group_framework(Features.defaults(Release(1, 37)))
    assert [p.name for p in off.pod_group_post_filter_plugins] == [
        "DynamicResources",
        "DefaultPreemption",
    ]
    assert off.pod_group_post_filter(None, parsed(pod("p"))) == Status.unschedulable(
        WORKLOAD_DISABLED
    )
    # Before a Framework is built on it, a handle's answer is empty.
    assert (
        Handle(features=WORKLOADS_137).pod_group_post_filter(None, parsed(pod("p")))
        == Status.unschedulable()
    )


def test_a_pod_group_post_filter_s_success_or_error_ends_the_run() -> None:
    pod_ = parsed(pod("p"))
    first = GroupAnswer("First", Status.unschedulable("first reason"))
    fine = GroupAnswer("Fine", Status(Code.SUCCESS, ("found a placement",)))
    after = GroupAnswer("After", Status.unschedulable("never asked"))
    fw = group_framework(WORKLOADS_137, first, fine, after)
    assert fw.pod_group_post_filter(None, pod_) == Status(
        Code.SUCCESS, ("found a placement",), "Fine"
    )
    assert after.calls == 0
    broken = GroupAnswer("Broken", Status.error("boom"))
    fw = group_framework(WORKLOADS_137, GroupAnswer("A", Status.unschedulable("a")), broken)
    assert fw.pod_group_post_filter(None, pod_) == Status.error(
        'error in "Broken" PodGroupPostFilter plugins: boom', "Broken"
    )
    # Unschedulable answers without reasons add none; the first to answer is named.
    quiet = GroupAnswer("Quiet", Status.unschedulable())
    loud = GroupAnswer("Loud", Status.unschedulable("loud", "er"))
    fw = group_framework(WORKLOADS_137, quiet, loud)
    assert fw.pod_group_post_filter(None, pod_) == Status.unschedulable(
        "loud", "er", plugin="Quiet"
    )
