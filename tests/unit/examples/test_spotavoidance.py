"""SpotAvoidance (examples/platform): spot nodes take only pods that opted in, reclaiming
nodes take none (UnschedulableAndUnresolvable, one reason per node); the score prefers the
lowest interruption rate; the arguments are checked; cached masks follow node labels."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from spotavoidance import (
    RECLAIMING_REASON,
    REGISTRATION,
    SPOT_REASON,
    SpotAvoidance,
    SpotAvoidanceArgs,
)

from ascheduler.cache import Cache
from ascheduler.framework import Code, ConfigError, Handle, PluginArgsError
from ascheduler.model import parse_node
from tests.kit import make_cache, node, pod, rejected_reasons, rejection_codes, run_score
from tests.kit import run_filter as run

SPOT = {"example.com/capacity-type": "spot"}
RECLAIMING = {"example.com/reclaiming": "2026-01-01T00:00:00Z"}
TOLERANT = {"example.com/spot-tolerant": "true"}

NODES = [
    node("on-demand", labels={"example.com/capacity-type": "on-demand"}),
    node("plain"),
    node("spot", labels=SPOT),
    node("spot-reclaiming", labels={**SPOT, **RECLAIMING}),
    node("reclaiming", labels=RECLAIMING),
]


def plugin(cache: Cache, args: Mapping[str, Any] | None = None) -> SpotAvoidance:
    built = REGISTRATION.build(REGISTRATION.decode_args(args, "args"), Handle(nodes=cache.table))
    assert isinstance(built, SpotAvoidance)
    return built


@pytest.mark.parametrize(
    ("labels", "rejected"),
    [
        pytest.param(
            None,
            {
                "spot": [SPOT_REASON],
                "spot-reclaiming": [SPOT_REASON],
                "reclaiming": [RECLAIMING_REASON],
            },
            id="not-tolerant",
        ),
        pytest.param(
            {"example.com/spot-tolerant": "false"},
            {
                "spot": [SPOT_REASON],
                "spot-reclaiming": [SPOT_REASON],
                "reclaiming": [RECLAIMING_REASON],
            },
            id="tolerant-false-is-not-tolerant",
        ),
        pytest.param(
            TOLERANT,
            {"spot-reclaiming": [RECLAIMING_REASON], "reclaiming": [RECLAIMING_REASON]},
            id="tolerant",
        ),
    ],
)
def test_filter(labels: dict[str, str] | None, rejected: dict[str, list[str]]) -> None:
    cache = make_cache(NODES)
    result = run(plugin(cache), pod(labels=labels), cache)
    assert rejected_reasons(result, cache) == rejected
    assert set(rejection_codes(result, cache).values()) == {Code.UNSCHEDULABLE_AND_UNRESOLVABLE}


@pytest.mark.parametrize(
    ("nodes", "labels"),
    [
        pytest.param([node("a"), node("b", labels={"other": "x"})], None, id="no-spot-node"),
        pytest.param([node("a"), node("s", labels=SPOT)], TOLERANT, id="tolerant-no-reclaim"),
        pytest.param([], None, id="no-nodes"),
    ],
)
def test_filter_passes_every_node(nodes: list[dict[str, Any]], labels: Any) -> None:
    cache = make_cache(nodes)
    assert run(plugin(cache), pod(labels=labels), cache) is None


def test_filter_with_its_own_labels() -> None:
    cache = make_cache(
        [node("a", labels={"pool": "preemptible"}), node("b", labels={"pool": "spot"})]
    )
    args = {"capacityTypeLabel": "pool", "spotValue": "preemptible"}
    result = run(plugin(cache, args), pod(), cache)
    assert rejected_reasons(result, cache) == {"a": [SPOT_REASON]}


def test_relabelled_nodes_invalidate_the_cached_masks() -> None:
    cache = make_cache(NODES)
    spot = plugin(cache)
    assert set(rejected_reasons(run(spot, pod(), cache), cache)) == {
        "spot",
        "spot-reclaiming",
        "reclaiming",
    }
    cache.update_node(parse_node(node("reclaiming")))  # reclaim called off
    cache.update_node(parse_node(node("plain", labels=SPOT)))
    assert set(rejected_reasons(run(spot, pod(), cache), cache)) == {
        "spot",
        "spot-reclaiming",
        "plain",
    }


def rated(name: str, rate: str | None) -> dict[str, Any]:
    return node(name, labels={} if rate is None else {"example.com/interruption-rate": rate})


@pytest.mark.parametrize(
    ("rates", "args", "scores"),
    [
        pytest.param(
            {"a": "0", "b": "10", "c": "50", "d": "100"},
            None,
            {"a": 100, "b": 90, "c": 50, "d": 0},
            id="rates",
        ),
        pytest.param(
            {"a": "20", "b": None, "c": "junk", "d": "-5"},
            None,
            {"a": 80, "b": 100, "c": 100, "d": 100},
            id="unlabelled-and-unreadable-take-the-default",
        ),
        pytest.param(
            {"a": "20", "b": None},
            {"defaultInterruptionRate": 60},
            {"a": 100, "b": 50},
            id="a-default-of-its-own",
        ),
        pytest.param({"a": "250", "b": "40"}, None, {"a": 0, "b": 100}, id="capped-at-100"),
        pytest.param({"a": None, "b": None}, None, {"a": 100, "b": 100}, id="all-tie"),
        pytest.param({"a": "100", "b": "100"}, None, {"a": 0, "b": 0}, id="all-worst"),
    ],
)
def test_score(
    rates: dict[str, str | None], args: dict[str, Any] | None, scores: dict[str, int]
) -> None:
    cache = make_cache([rated(name, rate) for name, rate in rates.items()])
    assert run_score(plugin(cache, args), pod(), cache) == scores


def test_score_over_feasible_rows_only() -> None:
    cache = make_cache([rated("a", "10"), rated("b", "30"), rated("c", "70")])
    assert run_score(plugin(cache), pod(), cache, feasible=["c", "b"]) == {"c": 42, "b": 100}


def test_rates_follow_relabelled_nodes() -> None:
    cache = make_cache([rated("a", "10"), rated("b", "30")])
    spot = plugin(cache)
    assert run_score(spot, pod(), cache) == {"a": 100, "b": 77}
    cache.update_node(parse_node(rated("a", "90")))
    assert run_score(spot, pod(), cache) == {"a": 14, "b": 100}


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        pytest.param({"defaultInterruptionRate": 101}, "must be between 0 and 100", id="high"),
        pytest.param({"defaultInterruptionRate": -1}, "must be between 0 and 100", id="low"),
        pytest.param({"spotValue": ""}, "spotValue: required", id="empty-value"),
        pytest.param({"capacityTypeLabel": ""}, "capacityTypeLabel: required", id="no-label"),
    ],
)
def test_args_are_validated(raw: dict[str, Any], problem: str) -> None:
    with pytest.raises((ConfigError, PluginArgsError)) as info:
        REGISTRATION.decode_args(raw, "args")
    assert problem in str(info.value)


def test_args_defaults() -> None:
    assert REGISTRATION.decode_args(None, "args") == SpotAvoidanceArgs()
