"""The debug endpoints' pure parts: the per-pod record of the last attempt (compact, dropped
when the pod goes, bounded), and the rules for serving them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ascheduler.config import Overrides, SchedulerConfig, apply, debug_problem
from ascheduler.debug import Diagnoses
from ascheduler.framework import ConfigError, Diagnosis, FilterResult, Rejection
from ascheduler.http import SecureServing, is_loopback
from tests.kit import pod_info


def diagnosis() -> Diagnosis:
    short = np.array([True, True, False, True])
    tainted = np.array([False, False, True, True])
    diag = Diagnosis(
        num_nodes=4,
        reason_counts={"Insufficient cpu": 3, "node(s) had untolerated taint(s)": 1},
        filtered=[
            ("NodeResourcesFit", FilterResult(short, [Rejection("Insufficient cpu", short)])),
            (
                "TaintToleration",
                FilterResult(tainted, [Rejection("node(s) had untolerated taint(s)", tainted)]),
            ),
        ],
    )
    diag.codes = np.ones(4, dtype=np.int64)
    return diag


def test_a_record_keeps_counts_and_a_few_nodes_under_their_first_rejection() -> None:
    records = Diagnoses()
    p = pod_info("web", namespace="shop")
    records.record(
        p,
        "default-scheduler",
        "Unschedulable",
        "0/4 nodes are available: ...",
        attempts=2,
        rejected_by=frozenset({"NodeResourcesFit", "TaintToleration"}),
        diagnosis=diagnosis(),
        names=["a", "b", "c", "d"],
    )
    body = records.get("shop/web", p.uid)
    assert body is not None
    assert body["attempts"] == 2
    assert body["rejectedBy"] == ["NodeResourcesFit", "TaintToleration"]
    assert body["reasons"] == {"Insufficient cpu": 3, "node(s) had untolerated taint(s)": 1}
    # d was rejected by NodeResourcesFit first: it is not an example of the taint.
    assert body["examples"] == {
        "Insufficient cpu": ["a", "b", "d"],
        "node(s) had untolerated taint(s)": ["c"],
    }


def test_records_go_with_their_pod_and_are_bounded() -> None:
    records = Diagnoses(limit=2)
    pods = [pod_info(f"p{i}") for i in range(3)]
    for p in pods:
        records.record(
            p,
            "x",
            "Unschedulable",
            "m",
            attempts=1,
            rejected_by=frozenset(),
            diagnosis=None,
            names=[],
        )
    assert len(records) == 2
    assert records.get(pods[0].key, pods[0].uid) is None  # the oldest went first
    records.forget(pods[1].uid)
    assert records.get(pods[1].key, pods[1].uid) is None
    # A pod of the same name but another uid (deleted and created again) is not mixed up.
    assert records.get(pods[2].key, "another-uid") is None
    assert records.get(pods[2].key, pods[2].uid) is not None


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("10.0.0.1", False),
    ],
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_debug_endpoints_need_the_loopback_listener_or_the_secure_port() -> None:
    config = SchedulerConfig()
    assert debug_problem(config) == ""
    assert "needs one" in debug_problem(dataclasses.replace(config, debug_endpoints="loopback"))
    local = dataclasses.replace(config, http_address="127.0.0.1:10251", debug_endpoints="loopback")
    assert debug_problem(local) == ""
    anywhere = dataclasses.replace(
        local, http_address="0.0.0.0:10251", allow_non_loopback_http=True
    )
    assert "without a token" in debug_problem(anywhere)
    assert debug_problem(dataclasses.replace(config, debug_endpoints="authorized")) == ""
    no_port = dataclasses.replace(
        config, secure_serving=SecureServing(port=0), debug_endpoints="authorized"
    )
    assert "secure port" in debug_problem(no_port)
    with pytest.raises(ConfigError, match="needs one"):
        apply(config, Overrides(debug_endpoints="loopback"))
    with pytest.raises(ConfigError, match="--debug-endpoints: must be one of"):
        apply(config, Overrides(debug_endpoints="everyone"))
    assert apply(config, Overrides(debug_endpoints="authorized")).debug_endpoints == "authorized"
