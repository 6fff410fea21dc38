"""NodePorts: a host port conflicts with one in use on the node for the same protocol and
port when the host IPs are equal or either is 0.0.0.0 (empty hostIP means 0.0.0.0, empty
protocol TCP)."""

from __future__ import annotations

from typing import Any

import pytest

from ascheduler.framework import Code
from tests.kit import (
    make_cache,
    make_plugin,
    node,
    on,
    parsed,
    pod,
    rejected_reasons,
    rejection_codes,
)
from tests.kit import run_filter as run

REASON = "node(s) didn't have free ports for the requested pod ports"


def port(host_port: int, protocol: str | None = None, host_ip: str | None = None) -> dict:
    p: dict[str, Any] = {"containerPort": 80, "hostPort": host_port}
    if protocol is not None:
        p["protocol"] = protocol
    if host_ip is not None:
        p["hostIP"] = host_ip
    return p


NODES = [node("any-tcp"), node("ip-tcp"), node("any-udp"), node("free")]
EXISTING = [
    on("any-tcp", pod("e1", ports=[port(8080)])),
    on("ip-tcp", pod("e2", ports=[port(8080, "TCP", "10.0.0.1")])),
    on("any-udp", pod("e3", ports=[port(8080, "UDP")])),
]


@pytest.mark.parametrize(
    ("ports", "rejected"),
    [
        pytest.param([port(8080)], {"any-tcp", "ip-tcp"}, id="wildcard-vs-all"),
        pytest.param([port(8080, "TCP", "0.0.0.0")], {"any-tcp", "ip-tcp"}, id="explicit-any"),
        pytest.param(
            [port(8080, "TCP", "10.0.0.1")], {"any-tcp", "ip-tcp"}, id="same-ip-and-wildcard"
        ),
        pytest.param([port(8080, "TCP", "10.0.0.2")], {"any-tcp"}, id="other-ip"),
        pytest.param([port(8080, "UDP")], {"any-udp"}, id="udp"),
        pytest.param([port(8080, "UDP", "10.0.0.9")], {"any-udp"}, id="udp-ip-vs-wildcard"),
        pytest.param([port(8080, "SCTP")], set(), id="sctp-free"),
        pytest.param([port(9090)], set(), id="other-port"),
        pytest.param([{"containerPort": 8080}], set(), id="no-host-port"),
        pytest.param([port(9090), port(8080, "UDP")], {"any-udp"}, id="any-port-conflicts"),
    ],
)
def test_filter(ports: list[dict[str, Any]], rejected: set[str]) -> None:
    cache = make_cache(NODES, EXISTING)
    result = run(make_plugin("NodePorts", cache), pod(ports=ports), cache)
    assert rejected_reasons(result, cache) == {name: [REASON] for name in rejected}
    assert set(rejection_codes(result, cache).values()) <= {Code.UNSCHEDULABLE}


def test_port_freed_when_pod_leaves() -> None:
    cache = make_cache(NODES, EXISTING)
    plugin = make_plugin("NodePorts", cache)
    assert set(rejected_reasons(run(plugin, pod(ports=[port(8080)]), cache), cache)) == {
        "any-tcp",
        "ip-tcp",
    }
    cache.remove_pod(parsed(EXISTING[0]))
    result = run(plugin, pod(ports=[port(8080)]), cache)
    assert set(rejected_reasons(result, cache)) == {"ip-tcp"}


def test_two_pods_same_port_count_until_both_leave() -> None:
    raws = [on("n", pod("x", ports=[port(80)])), on("n", pod("y", ports=[port(80)]))]
    cache = make_cache([node("n")], raws)
    plugin = make_plugin("NodePorts", cache)
    cache.remove_pod(parsed(raws[0]))
    assert set(rejected_reasons(run(plugin, pod(ports=[port(80)]), cache), cache)) == {"n"}
    cache.remove_pod(parsed(raws[1]))
    assert run(plugin, pod(ports=[port(80)]), cache) is None
