"""kube-scheduler's HTTP extenders, against a tiny extender the test starts: filter and its
reasons in the failure message, prioritize with weight, bind delegated, the preempt verb
replacing preemption's candidates, ignorable and non-ignorable extenders that are down,
`managedResources` choosing the pods it sees, and the configuration refused where
kube-scheduler refuses it."""

from __future__ import annotations

import base64
import ssl
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from ascheduler.config import parse
from ascheduler.devcluster.certs import generate
from ascheduler.framework import ConfigError, CycleState, Handle, multipoint
from ascheduler.framework.args import decode
from ascheduler.framework.extender import (
    ExtenderConfig,
    ExtenderError,
    Extenders,
)
from ascheduler.framework.runtime import Framework
from ascheduler.model import PodInfo, parse_node, parse_pod
from ascheduler.plugins import IN_TREE
from ascheduler.plugins.defaultpreemption import CHOSEN
from tests.kit import make_cache, node, on, pod
from tests.kit.http import serve
from tests.kit.scheduling import Env

HEAD = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
Answer = Callable[[dict[str, Any]], Any]


class Extender:
    """An extender on a free port: answers each verb with `answers[verb](request body)`
    (a status int answers that HTTP code) and records what it was sent."""

    def __init__(self) -> None:
        self.answers: dict[str, Answer | int] = {}
        self.seen: dict[str, list[dict[str, Any]]] = {}
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        verb = request.match_info["verb"]
        body = await request.json()
        self.seen.setdefault(verb, []).append(body)
        answer = self.answers.get(verb, 404)
        if isinstance(answer, int):
            return web.Response(status=answer)
        return web.json_response(answer(body))


@pytest.fixture
async def extender() -> AsyncIterator[Extender]:
    ext = Extender()
    async with serve("/scheduler/{verb}", ext.handle) as base:
        ext.url = f"{base}/scheduler"
        yield ext


def config(**fields: Any) -> ExtenderConfig:
    return decode(ExtenderConfig, fields, "extenders[0]")


def framework(cache: Any, *configs: ExtenderConfig) -> Framework:
    fw = Framework(
        multipoint("x"),
        IN_TREE,
        Handle(nodes=cache.table, storage=cache.storage, attachments=cache.attachments),
    )
    fw.extenders = Extenders(configs)
    return fw


def names(body: dict[str, Any]) -> list[str]:
    if "NodeNames" in body:
        return list(body["NodeNames"])
    return [n["metadata"]["name"] for n in body["Nodes"]["items"]]


def gpu_pod(name: str = "p") -> Any:
    return parse_pod(pod(name, cpu="100m", extra={"example.com/gpu": "1"}), keep_raw=True)


def cache_of(*names_: str) -> Any:
    cache = make_cache([])
    for name in names_:
        cache.add_node(parse_node(node(name, extra={"example.com/gpu": "4"}), keep_raw=True))
    return cache


async def test_filter_keeps_what_the_extender_keeps(extender: Extender) -> None:
    extender.answers["filter"] = lambda body: {
        "NodeNames": [n for n in names(body) if n != "b"],
        "FailedNodes": {"b": "node(s) had no free device"},
    }
    cache = cache_of("a", "b")
    fw = framework(
        cache, config(urlPrefix=extender.url, filterVerb="filter", nodeCacheCapable=True)
    )
    result = await fw.find_nodes_with_extenders(CycleState(), gpu_pod(), cache.table)
    assert result.node == "a"
    (sent,) = extender.seen["filter"]
    assert sorted(sent["NodeNames"]) == ["a", "b"]
    assert sent["Pod"]["metadata"]["name"] == "p"
    assert "Nodes" not in sent  # nodeCacheCapable: names only


async def test_a_full_node_list_is_sent_when_not_node_cache_capable(extender: Extender) -> None:
    extender.answers["filter"] = lambda body: {"Nodes": body["Nodes"]}
    cache = cache_of("a")
    fw = framework(cache, config(urlPrefix=extender.url, filterVerb="filter"))
    assert (await fw.find_nodes_with_extenders(CycleState(), gpu_pod(), cache.table)).node == "a"
    (sent,) = extender.seen["filter"]
    (sent_node,) = sent["Nodes"]["items"]
    assert sent_node["status"]["allocatable"]["cpu"] == "4"  # the whole Node object


async def test_extender_reasons_join_the_failure_message(extender: Extender) -> None:
    extender.answers["filter"] = lambda body: {
        "NodeNames": [],
        "FailedNodes": {"a": "node(s) had no free device", "b": "node(s) had no free device"},
        "FailedAndUnresolvableNodes": {"c": "node(s) are not managed"},
    }
    cache = cache_of("a", "b", "c", "tiny")
    cache.update_node(parse_node(node("tiny", cpu="50m", extra={"example.com/gpu": "4"})))
    fw = framework(
        cache, config(urlPrefix=extender.url, filterVerb="filter", nodeCacheCapable=True)
    )
    result = await fw.find_nodes_with_extenders(CycleState(), gpu_pod(), cache.table)
    assert result.node is None
    assert result.status.message == (
        "0/4 nodes are available: 1 Insufficient cpu, 1 node(s) are not managed, "
        "2 node(s) had no free device. "
        "preemption: 0/4 nodes are available: "
        "2 No preemption victims found for incoming pod, "
        "2 Preemption is not helpful for scheduling."
    )
    assert result.diagnosis is not None
    assert "Extender" in result.diagnosis.rejecting_plugins
    statuses = result.diagnosis.statuses(cache.table.names)
    assert statuses["c"].plugin == "Extender"


async def test_prioritize_adds_weighted_scores(extender: Extender) -> None:
    extender.answers["prioritize"] = lambda body: [
        {"Host": n, "Score": 10 if n == "b" else 0} for n in names(body)
    ]
    cache = cache_of("a", "b", "c")
    fw = framework(
        cache,
        config(
            urlPrefix=extender.url, prioritizeVerb="prioritize", weight=5, nodeCacheCapable=True
        ),
    )
    for _ in range(5):  # without the extender the three nodes tie and one is picked at random
        result = await fw.find_nodes_with_extenders(CycleState(), gpu_pod(), cache.table)
        assert result.node == "b"


async def test_a_failing_prioritize_is_ignored(extender: Extender) -> None:
    extender.answers["prioritize"] = 500
    cache = cache_of("a", "b")
    fw = framework(cache, config(urlPrefix=extender.url, prioritizeVerb="prioritize", weight=1))
    assert (await fw.find_nodes_with_extenders(CycleState(), gpu_pod(), cache.table)).node


@pytest.mark.parametrize("ignorable", [True, False])
async def test_an_extender_that_is_down(ignorable: bool) -> None:
    cache = cache_of("a")
    down = config(
        urlPrefix="http://127.0.0.1:9/scheduler", filterVerb="filter", ignorable=ignorable
    )
    fw = framework(cache, down)
    if ignorable:
        result = await fw.find_nodes_with_extenders(CycleState(), gpu_pod(), cache.table)
        assert result.node == "a"
    else:
        with pytest.raises(ExtenderError, match="failed filter with extender at URL"):
            await fw.find_nodes_with_extenders(CycleState(), gpu_pod(), cache.table)


async def test_an_extender_error_answer_fails_the_attempt(extender: Extender) -> None:
    extender.answers["filter"] = lambda body: {"Error": "inventory unavailable"}
    cache = cache_of("a")
    fw = framework(cache, config(urlPrefix=extender.url, filterVerb="filter"))
    with pytest.raises(ExtenderError, match="inventory unavailable"):
        await fw.find_nodes_with_extenders(CycleState(), gpu_pod(), cache.table)


async def test_nodes_dropped_without_a_reason_leave_the_pod_retryable(
    extender: Extender,
) -> None:
    extender.answers["filter"] = lambda body: {"NodeNames": []}
    cache = cache_of("a", "b")
    fw = framework(
        cache, config(urlPrefix=extender.url, filterVerb="filter", nodeCacheCapable=True)
    )
    result = await fw.find_nodes_with_extenders(CycleState(), gpu_pod(), cache.table)
    assert result.node is None
    assert result.diagnosis is not None
    # Retried on any event (extenders register none), never parked as beyond help.
    assert "Extender" in result.diagnosis.rejecting_plugins
    assert not result.diagnosis.unresolvable


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ({"NodeNames": "a"}, "NodeNames is not a list"),
        ({"NodeNames": ["a"], "FailedNodes": ["b"]}, "FailedNodes is not an object"),
        ({"NodeNames": ["zz"]}, "claims a filtered node 'zz'"),
        ({"Nodes": {"items": 5}}, "Nodes.items is not a list"),
        ({"Nodes": ["a"]}, "Nodes is not an object"),
        (["a"], "filter answer is not an object"),
    ],
)
async def test_a_malformed_filter_answer_is_an_extender_error(
    extender: Extender, answer: Any, says: str
) -> None:
    extender.answers["filter"] = lambda body: answer
    cache = cache_of("a", "b")
    capable = "NodeNames" in answer if isinstance(answer, dict) else True
    fw = framework(
        cache, config(urlPrefix=extender.url, filterVerb="filter", nodeCacheCapable=capable)
    )
    with pytest.raises(ExtenderError, match=says):
        await fw.find_nodes_with_extenders(CycleState(), gpu_pod(), cache.table)


async def test_a_malformed_prioritize_answer_is_ignored(extender: Extender) -> None:
    extender.answers["prioritize"] = lambda body: [{"Host": "a", "Score": "high"}, 7, None]
    cache = cache_of("a", "b")
    fw = framework(cache, config(urlPrefix=extender.url, prioritizeVerb="prioritize", weight=1))
    assert (await fw.find_nodes_with_extenders(CycleState(), gpu_pod(), cache.table)).node


@pytest.fixture
async def https_extender(tmp_path: Path) -> AsyncIterator[tuple[Extender, Path]]:
    """An extender serving HTTPS with a certificate for 127.0.0.1 from a private CA."""
    certs = generate(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certs.serving.cert, certs.serving.key)
    ext = Extender()
    ext.answers["filter"] = lambda body: {"NodeNames": names(body)}
    async with serve("/scheduler/{verb}", ext.handle, ssl_context=context) as base:
        ext.url = f"{base}/scheduler"
        yield ext, certs.ca.cert


@pytest.mark.parametrize(
    ("tls", "trusted"),
    [
        ({}, False),  # an https URL alone: the system's CAs, which do not know this one
        ({"enableHTTPS": True}, True),  # kube-scheduler: enableHTTPS without a CA skips checks
        ({"tlsConfig": {"caFile": "CA"}}, True),
        ({"tlsConfig": {"caData": "CA_DATA"}}, True),
        ({"tlsConfig": {"caFile": "CA", "serverName": "kubernetes"}}, True),
        ({"tlsConfig": {"caFile": "CA", "serverName": "elsewhere.example"}}, False),
        ({"tlsConfig": {"insecure": True}}, True),
    ],
)
async def test_https_verifies_the_extender_as_kube_scheduler_does(
    https_extender: tuple[Extender, Path], tls: dict[str, Any], trusted: bool
) -> None:
    extender, ca = https_extender
    if "tlsConfig" in tls:
        given = dict(tls["tlsConfig"])
        if given.get("caFile") == "CA":
            given["caFile"] = str(ca)
        if given.get("caData") == "CA_DATA":
            given["caData"] = base64.b64encode(ca.read_bytes()).decode()
        tls = {"tlsConfig": given}
    cache = cache_of("a")
    fw = framework(
        cache,
        config(urlPrefix=extender.url, filterVerb="filter", nodeCacheCapable=True, **tls),
    )
    if trusted:
        result = await fw.find_nodes_with_extenders(CycleState(), gpu_pod(), cache.table)
        assert result.node == "a"
    else:
        with pytest.raises(ExtenderError, match="failed filter with extender at URL https://"):
            await fw.find_nodes_with_extenders(CycleState(), gpu_pod(), cache.table)
        assert "filter" not in extender.seen
    assert fw.extenders is not None
    await fw.extenders.close()


async def test_managed_resources_choose_the_pods_it_sees(extender: Extender) -> None:
    extender.answers["filter"] = lambda body: {"NodeNames": []}
    cache = cache_of("a")
    fw = framework(
        cache,
        config(
            urlPrefix=extender.url,
            filterVerb="filter",
            nodeCacheCapable=True,
            managedResources=[{"name": "example.com/gpu"}],
        ),
    )
    plain = parse_pod(pod("plain", cpu="100m"), keep_raw=True)
    assert (await fw.find_nodes_with_extenders(CycleState(), plain, cache.table)).node == "a"
    assert "filter" not in extender.seen
    result = await fw.find_nodes_with_extenders(CycleState(), gpu_pod(), cache.table)
    assert result.node is None
    assert len(extender.seen["filter"]) == 1


async def test_bind_is_delegated_to_the_binding_extender(extender: Extender) -> None:
    extender.answers["bind"] = lambda body: {}
    cache = cache_of("a")
    fw = framework(cache, config(urlPrefix=extender.url, bindVerb="bind"))
    p = gpu_pod()
    status = await fw.bind(CycleState(), p, "a")
    assert status.ok
    assert extender.seen["bind"] == [
        {"PodName": "p", "PodNamespace": "default", "PodUID": p.uid, "Node": "a"}
    ]
    extender.answers["bind"] = lambda body: {"Error": "device busy"}
    status = await fw.bind(CycleState(), p, "a")
    assert not status.ok
    assert "device busy" in status.message


def test_the_file_is_validated_as_kube_scheduler_validates_it() -> None:
    with pytest.raises(ConfigError) as err:
        parse(
            {
                **HEAD,
                "extenders": [
                    {"urlPrefix": "http://a", "prioritizeVerb": "p"},
                    {"urlPrefix": "http://b", "bindVerb": "bind"},
                    {"urlPrefix": "http://d", "weght": 1},
                    {
                        "urlPrefix": "http://c",
                        "bindVerb": "bind",
                        "managedResources": [{"name": "kubernetes.io/x"}],
                    },
                    {"filterVerb": "f", "httpTimeout": "soon"},
                ],
            },
            IN_TREE,
        )
    assert err.value.problems == [
        "extenders[0].weight: must have a positive weight applied to it",
        "extenders[2].weght: unknown field",
        "extenders[4].httpTimeout: not a duration: 'soon'",
        "extenders[3].managedResources[0].name: 'kubernetes.io/x' is an invalid extended "
        "resource name",
        "extenders: only one extender can implement bind (found 2 extenders implementing bind)",
    ]


def test_ignored_by_scheduler_resources_are_left_out_of_fit() -> None:
    config_ = parse(
        {
            **HEAD,
            "extenders": [
                {
                    "urlPrefix": "http://hami:8080",
                    "filterVerb": "filter",
                    "bindVerb": "bind",
                    "nodeCacheCapable": True,
                    "httpTimeout": "30s",
                    "managedResources": [
                        {"name": "nvidia.com/gpu", "ignoredByScheduler": True},
                        {"name": "nvidia.com/gpumem", "ignoredByScheduler": True},
                    ],
                }
            ],
        },
        IN_TREE,
    )
    (spec,) = config_.profiles
    assert spec.args["NodeResourcesFit"]["ignoredResources"] == [
        "nvidia.com/gpu",
        "nvidia.com/gpumem",
    ]
    (ext,) = config_.extenders
    assert (float(ext.http_timeout), ext.node_cache_capable) == (30.0, True)
    cache = make_cache([node("n")])  # no GPUs at all: the extender decides about them
    fw = Framework(
        spec,
        IN_TREE,
        Handle(nodes=cache.table, storage=cache.storage, attachments=cache.attachments),
    )
    result = fw.find_nodes(
        CycleState(), parse_pod(pod("p", cpu="100m", extra={"nvidia.com/gpu": "1"})), cache.table
    )
    assert result.node == "n"


# -- preemptVerb ---------------------------------------------------------------------------


def crowded(*node_names: str, victims_per_node: int = 1, cache_capable: bool = True) -> Any:
    """Nodes of 2 cpus, each full of low-priority pods (1 cpu each, or 2 for one), kept
    whole when a preempt verb is sent whole victims."""
    parse, _ = Extenders(
        [config(urlPrefix="http://x", preemptVerb="p", nodeCacheCapable=cache_capable)]
    ).pod_parsers()
    cache = make_cache([])
    for name in node_names:
        cache.add_node(parse_node(node(name, cpu="2"), keep_raw=True))
        cpu = str(2 // victims_per_node)
        for i in range(victims_per_node):
            low = on(name, pod(f"{name}-low{i}", cpu=cpu, priority=i))
            cache.add_pod(parse(low))
    return cache


def preemptor() -> Any:
    return parse_pod(pod("big", cpu="2", priority=100), keep_raw=True)


def keep_only(node_name: str) -> Answer:
    def answer(body: dict[str, Any]) -> Any:
        meta = body["NodeNameToMetaVictims"]
        return {"NodeNameToMetaVictims": {node_name: meta[node_name]}}

    return answer


async def preempt(fw: Framework, cache: Any) -> tuple[Any, Any]:
    state = CycleState(dry_run=True)
    assert fw.extenders is not None
    try:
        result = await fw.find_nodes_with_extenders(state, preemptor(), cache.table)
    finally:
        await fw.extenders.close()
    return result, state.read(CHOSEN)


async def test_preempt_verb_is_sent_the_candidates_and_its_answer_replaces_them(
    extender: Extender,
) -> None:
    extender.answers["preempt"] = keep_only("b")
    cache = crowded("a", "b")
    fw = framework(
        cache, config(urlPrefix=extender.url, preemptVerb="preempt", nodeCacheCapable=True)
    )
    result, chosen = await preempt(fw, cache)
    assert result.nominated_node == "b"
    assert [v.name for v in chosen.victims] == ["b-low0"]
    (sent,) = extender.seen["preempt"]
    assert sent["Pod"]["metadata"]["name"] == "big"
    assert sent["NodeNameToVictims"] is None  # nodeCacheCapable: UIDs only
    assert sent["NodeNameToMetaVictims"] == {
        "a": {"Pods": [{"UID": "uid-a-low0"}], "NumPDBViolations": 0},
        "b": {"Pods": [{"UID": "uid-b-low0"}], "NumPDBViolations": 0},
    }


async def test_whole_victims_are_sent_when_not_node_cache_capable(extender: Extender) -> None:
    def answer(body: dict[str, Any]) -> Any:
        victims = body["NodeNameToVictims"]
        return {
            "NodeNameToMetaVictims": {
                node_name: {"Pods": [{"UID": p["metadata"]["uid"]} for p in v["Pods"]]}
                for node_name, v in victims.items()
                if node_name == "a"
            }
        }

    extender.answers["preempt"] = answer
    cache = crowded("a", "b", cache_capable=False)
    fw = framework(cache, config(urlPrefix=extender.url, preemptVerb="preempt"))
    result, chosen = await preempt(fw, cache)
    assert result.nominated_node == "a"
    assert [v.name for v in chosen.victims] == ["a-low0"]
    (sent,) = extender.seen["preempt"]
    assert sent["NodeNameToMetaVictims"] is None
    whole = sent["NodeNameToVictims"]["b"]["Pods"][0]
    assert whole["spec"]["nodeName"] == "b"  # the pod as the API server has it
    assert whole["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "2"


async def test_the_extender_may_name_other_pods_of_the_node(extender: Extender) -> None:
    """Victims are mapped back from every pod on the node (the dry run evicts only the
    lower of two 1-cpu pods; the extender asks for both)."""
    extender.answers["preempt"] = lambda body: {
        "NodeNameToMetaVictims": {
            "a": {"Pods": [{"uid": "uid-a-low1"}, {"uid": "uid-a-low0"}], "numPDBViolations": 1}
        }
    }
    cache = crowded("a", victims_per_node=2)
    fw = framework(
        cache, config(urlPrefix=extender.url, preemptVerb="preempt", nodeCacheCapable=True)
    )
    result, chosen = await preempt(fw, cache)
    (sent,) = extender.seen["preempt"]
    assert sent["NodeNameToMetaVictims"]["a"]["Pods"] == [
        {"UID": "uid-a-low1"},
        {"UID": "uid-a-low0"},
    ]  # both: the preemptor needs the whole node
    assert result.nominated_node == "a"
    assert [v.name for v in chosen.victims] == ["a-low1", "a-low0"]
    assert chosen.pdb_violations == 1


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (
            {"NodeNameToMetaVictims": {"a": {"Pods": [{"UID": "nobody"}]}}},
            "claims to preempt pod (UID: &{nobody}) on node: a, but the pod is not found",
        ),
        (
            {"NodeNameToMetaVictims": {"zz": {"Pods": [{"UID": "uid-a-low0"}]}}},
            'nodeinfo not found for node name "zz"',
        ),
        (
            {"NodeNameToMetaVictims": {"a": {"Pods": []}}},
            'expected at least one victim pod on node "a"',
        ),
        ({"NodeNameToMetaVictims": {"a": {"Pods": 3}}}, "Pods is not a list"),
        (500, "failed preempt with extender at URL"),
    ],
)
async def test_a_bad_preempt_answer_fails_preemption(
    extender: Extender, answer: Any, error: str
) -> None:
    extender.answers["preempt"] = answer if isinstance(answer, int) else (lambda _b: answer)
    cache = crowded("a", "b")
    fw = framework(
        cache, config(urlPrefix=extender.url, preemptVerb="preempt", nodeCacheCapable=True)
    )
    result, chosen = await preempt(fw, cache)
    assert chosen is None
    assert result.node is None
    assert not result.nominated_node
    assert result.status.rejected  # the pod is unschedulable, preemption's error its message
    assert "preemption: " in result.status.message
    assert error in result.status.message


async def test_an_ignorable_extender_that_fails_is_skipped(extender: Extender) -> None:
    extender.answers["preempt"] = 500
    cache = crowded("a", "b")
    fw = framework(
        cache,
        config(
            urlPrefix=extender.url, preemptVerb="preempt", nodeCacheCapable=True, ignorable=True
        ),
    )
    result, chosen = await preempt(fw, cache)
    assert result.nominated_node in {"a", "b"}  # the dry run's candidates stand
    assert [v.node_name for v in chosen.victims] == [result.nominated_node]


async def test_an_ignorable_extender_s_node_without_victims_is_dropped(
    extender: Extender,
) -> None:
    extender.answers["preempt"] = lambda body: {
        "NodeNameToMetaVictims": {"a": {"Pods": []}, "b": body["NodeNameToMetaVictims"]["b"]}
    }
    cache = crowded("a", "b")
    fw = framework(
        cache,
        config(
            urlPrefix=extender.url, preemptVerb="preempt", nodeCacheCapable=True, ignorable=True
        ),
    )
    result, _ = await preempt(fw, cache)
    assert result.nominated_node == "b"


async def test_no_candidate_left_leaves_the_pod_unschedulable(extender: Extender) -> None:
    extender.answers["preempt"] = lambda body: {}
    cache = crowded("a", "b")
    fw = framework(
        cache, config(urlPrefix=extender.url, preemptVerb="preempt", nodeCacheCapable=True)
    )
    result, chosen = await preempt(fw, cache)
    assert chosen is None
    assert not result.nominated_node
    assert not result.clear_nomination  # kube-scheduler leaves the nomination as it is
    assert result.status.message.endswith("preemption: no candidate node for preemption")


async def test_extenders_run_in_order_on_what_the_previous_returned(extender: Extender) -> None:
    second = Extender()
    second.answers["preempt"] = lambda body: {
        "NodeNameToMetaVictims": body["NodeNameToMetaVictims"]
    }
    extender.answers["preempt"] = keep_only("a")
    cache = crowded("a", "b", "c")
    async with serve("/second/{verb}", second.handle) as base:
        fw = framework(
            cache,
            config(urlPrefix=extender.url, preemptVerb="preempt", nodeCacheCapable=True),
            config(urlPrefix=f"{base}/second", preemptVerb="preempt", nodeCacheCapable=True),
        )
        result, _ = await preempt(fw, cache)
    assert result.nominated_node == "a"
    assert sorted(extender.seen["preempt"][0]["NodeNameToMetaVictims"]) == ["a", "b", "c"]
    assert list(second.seen["preempt"][0]["NodeNameToMetaVictims"]) == ["a"]


async def test_an_uninterested_extender_is_not_asked_to_preempt(extender: Extender) -> None:
    extender.answers["preempt"] = keep_only("a")
    cache = crowded("a", "b")
    fw = framework(
        cache,
        config(
            urlPrefix=extender.url,
            preemptVerb="preempt",
            nodeCacheCapable=True,
            managedResources=[{"name": "example.com/gpu"}],
        ),
    )
    result, _ = await preempt(fw, cache)
    assert result.nominated_node in {"a", "b"}
    assert "preempt" not in extender.seen


async def test_the_scheduler_evicts_the_victims_the_extender_kept(extender: Extender) -> None:
    extender.answers["preempt"] = keep_only("b")
    cache = crowded("a", "b")
    options = parse(
        {
            **HEAD,
            "profiles": [{"schedulerName": "default-scheduler"}],
            "extenders": [
                {"urlPrefix": extender.url, "preemptVerb": "preempt", "nodeCacheCapable": True}
            ],
        },
        IN_TREE,
    )
    env = Env(options=options)
    for name in ("a", "b"):
        env.cache.add_node(cache.table.node(name))
        for victim in cache.table.pods(cache.table.index[name]).values():
            env.cache.add_pod(victim)
    started: list[tuple[str, list[str]]] = []

    def start(preemptor: PodInfo, node: str, victims: Sequence[PodInfo]) -> None:
        started.append((node, [v.name for v in victims]))

    env.scheduler.evictions.start = start  # type: ignore[method-assign]
    fw = env.frameworks["default-scheduler"]
    assert fw.extenders is not None
    try:
        await env.attempt(preemptor())
    finally:
        await fw.extenders.close()
    assert started == [("b", ["b-low0"])]
    assert env.scheduler.nominator.node_of("uid-big") == "b"


@pytest.mark.parametrize(
    ("fields", "bound_keeps_object"),
    [
        ({"preemptVerb": "p"}, True),  # whole victims are sent
        ({"preemptVerb": "p", "nodeCacheCapable": True}, False),  # UIDs only
        ({"filterVerb": "f"}, False),
    ],
)
def test_bound_pods_keep_their_object_only_for_a_preempt_verb_sent_whole_victims(
    fields: dict[str, Any], bound_keeps_object: bool
) -> None:
    parse_, reparse = Extenders([config(urlPrefix="http://x", **fields)]).pod_parsers()
    pending = pod("p", cpu="1")
    bound = on("n", pending)
    assert parse_(pending).raw == pending  # extenders are sent the pod being scheduled
    assert (parse_(bound).raw == bound) is bound_keeps_object
    newer = {**bound, "status": {"phase": "Running"}}
    assert (reparse(newer, parse_(bound)).raw == newer) is bound_keeps_object
