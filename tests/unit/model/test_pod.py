"""`parse_pod`: effective requests by Kubernetes' rules, and bad input recorded, never raised."""

from __future__ import annotations

from typing import Any

import pytest

from ascheduler.model import parse_pod
from ascheduler.model.affinity import NodeSelectorTerm, PreferredTerm, Requirement, Toleration
from ascheduler.model.pod import PodInfo
from ascheduler.model.resources import DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST

MI = 2**20
GI = 2**30
REQUIRED = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"


def container(name: str = "c", *, sidecar: bool = False, **requests: str) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "pause"}
    if requests:
        c["resources"] = {"requests": {k.replace("_", "-"): v for k, v in requests.items()}}
    if sidecar:
        c["restartPolicy"] = "Always"
    return c


def pod(spec: dict[str, Any] | None = None, **meta: Any) -> PodInfo:
    metadata = {"name": "p", "namespace": "ns", "uid": "uid-1", **meta}
    return parse_pod({"metadata": metadata, "spec": spec if spec is not None else {}})


# -- effective requests -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(
            {
                "initContainers": [
                    container("i1", cpu="500m"),
                    container("s1", sidecar=True, cpu="200m"),
                    container("i2", cpu="1000m"),
                ],
                "containers": [container("a", cpu="300m"), container("b", cpu="400m")],
            },
            {"cpu": 1200},
            id="facts-example",
        ),
        pytest.param(
            {
                "containers": [
                    container("a", cpu="100m", memory="1Gi"),
                    container("b", cpu="200m", memory="512Mi"),
                ]
            },
            {"cpu": 300, "memory": GI + 512 * MI},
            id="containers-sum",
        ),
        pytest.param(
            {"initContainers": [container(cpu="2")], "containers": [container(cpu="500m")]},
            {"cpu": 2000},
            id="init-larger-than-containers",
        ),
        pytest.param(
            {
                "initContainers": [container("i", cpu="2", memory="1Mi")],
                "containers": [container(cpu="1", memory="1Gi")],
            },
            {"cpu": 2000, "memory": GI},
            id="max-per-resource",
        ),
        pytest.param(
            {
                "initContainers": [container("s", sidecar=True, cpu="200m")],
                "containers": [container(cpu="300m")],
            },
            {"cpu": 500},
            id="sidecar-runs-with-containers",
        ),
        pytest.param(
            {
                "initContainers": [
                    container("i1", cpu="1"),
                    container("s1", sidecar=True, cpu="200m"),
                ],
                "containers": [container(cpu="100m")],
            },
            {"cpu": 1000},
            id="init-before-sidecar-ignores-it",
        ),
        pytest.param(
            {
                "initContainers": [
                    container("s1", sidecar=True, cpu="300m"),
                    container("s2", sidecar=True, cpu="300m"),
                    container("i", cpu="500m"),
                ],
                "containers": [container(cpu="100m")],
            },
            {"cpu": 1100},
            id="init-after-two-sidecars",
        ),
        pytest.param(
            {
                "containers": [container(cpu="100m", memory="1Gi")],
                "resources": {"requests": {"cpu": "2"}},
            },
            {"cpu": 2000, "memory": GI},
            id="pod-level-cpu-replaces-aggregate",
        ),
        pytest.param(
            {
                "containers": [container(cpu="1", memory="2Gi")],
                "resources": {"requests": {"memory": "512Mi"}},
            },
            {"cpu": 1000, "memory": 512 * MI},
            id="pod-level-memory-replaces-even-when-smaller",
        ),
        pytest.param(
            {
                "containers": [container(cpu="100m")],
                "overhead": {"cpu": "250m", "memory": "120Mi"},
            },
            {"cpu": 350, "memory": 120 * MI},
            id="overhead-added",
        ),
        pytest.param(
            {
                "containers": [container(cpu="100m")],
                "resources": {"requests": {"cpu": "1"}},
                "overhead": {"cpu": "100m"},
            },
            {"cpu": 1100},
            id="overhead-added-after-pod-level",
        ),
        pytest.param(
            {
                "initContainers": [container(**{"nvidia.com/gpu": "1"})],
                "containers": [container(cpu="1", **{"nvidia.com/gpu": "2"})],
            },
            {"cpu": 1000, "nvidia.com/gpu": 2},
            id="extended-resources",
        ),
        pytest.param(
            {"containers": [container(cpu="0", memory="0")]},
            {},
            id="zero-requests-dropped",
        ),
        pytest.param({"containers": [container()]}, {}, id="no-requests"),
        pytest.param({}, {}, id="no-containers"),
        pytest.param(
            {"containers": [container(ephemeral_storage="1Gi")]},
            {"ephemeral-storage": GI},
            id="ephemeral-storage",
        ),
    ],
)
def test_effective_requests(spec: dict[str, Any], expected: dict[str, int]) -> None:
    info = pod(spec)
    assert info.errors == ()
    assert dict(info.requests) == expected


def test_pod_level_hugepages_replace_aggregate() -> None:
    info = pod(
        {
            "containers": [container(cpu="1", hugepages_2Mi="2Mi")],
            "resources": {"requests": {"cpu": "1", "hugepages-2Mi": "4Mi"}},
        }
    )
    assert info.errors == ()
    assert info.requests.get("hugepages-2Mi") == 4 * MI


@pytest.mark.parametrize(
    ("spec", "cpu", "memory"),
    [
        pytest.param(
            {"containers": [container()]},
            DEFAULT_MILLI_CPU_REQUEST,
            DEFAULT_MEMORY_REQUEST,
            id="no-requests-get-defaults",
        ),
        pytest.param({"containers": [container(), container("b")]}, 200, 400 * MI, id="two"),
        pytest.param({"containers": [container(cpu="0")]}, 0, 200 * MI, id="explicit-zero-cpu"),
        pytest.param(
            {"containers": [container(cpu="0", memory="0")]}, 0, 0, id="explicit-zero-both"
        ),
        pytest.param({"containers": [container(cpu="500m")]}, 500, 200 * MI, id="cpu-only"),
        pytest.param({"containers": [container(memory="1Gi")]}, 100, GI, id="memory-only"),
        pytest.param(
            {"containers": [container(cpu="1")], "initContainers": [container("i")]},
            1000,
            200 * MI,
            id="init-default-below-containers",
        ),
        pytest.param(
            {"containers": [container(cpu="10m")], "initContainers": [container("i")]},
            100,
            200 * MI,
            id="init-default-above-containers",
        ),
        pytest.param(
            {
                "containers": [container()],
                "initContainers": [container("s", sidecar=True)],
            },
            200,
            400 * MI,
            id="sidecar-default-added",
        ),
        pytest.param(
            {"containers": [container()], "overhead": {"cpu": "50m", "memory": "10Mi"}},
            150,
            210 * MI,
            id="overhead-added",
        ),
        pytest.param(
            {"containers": [container()], "resources": {"requests": {"cpu": "2"}}},
            2000,
            200 * MI,
            id="pod-level-cpu",
        ),
    ],
)
def test_nonzero_requests(spec: dict[str, Any], cpu: int, memory: int) -> None:
    info = pod(spec)
    assert (info.nonzero_cpu, info.nonzero_memory) == (cpu, memory)


def test_defaults_are_for_scoring_only() -> None:
    info = pod({"containers": [container()]})
    assert "cpu" not in info.requests
    assert "memory" not in info.requests
    assert info.nonzero_cpu == 100
    assert info.nonzero_memory == 200 * 1024 * 1024


# -- other fields -----------------------------------------------------------------------------


def test_host_ports() -> None:
    info = pod(
        {
            "containers": [
                {
                    "name": "a",
                    "ports": [
                        {"containerPort": 80, "hostPort": 8080},
                        {"containerPort": 53, "hostPort": 53, "protocol": "UDP"},
                        {"containerPort": 81, "hostPort": 9090, "hostIP": "127.0.0.1"},
                        {"containerPort": 82},
                        {"containerPort": 83, "hostPort": 0},
                    ],
                }
            ],
            "initContainers": [
                {"name": "side", "restartPolicy": "Always", "ports": [{"hostPort": 7000}]},
                {"name": "init", "ports": [{"hostPort": 7001}]},
            ],
        }
    )
    assert info.errors == ()
    assert set(info.host_ports) == {
        ("0.0.0.0", "TCP", 8080),
        ("0.0.0.0", "UDP", 53),
        ("127.0.0.1", "TCP", 9090),
        ("0.0.0.0", "TCP", 7000),
    }
    assert len(info.host_ports) == 4


def test_tolerations() -> None:
    info = pod(
        {
            "tolerations": [
                {"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"},
                {"key": "k2", "value": "v2"},
                {"operator": "Exists"},
                {"key": "gpu", "operator": "Exists", "effect": "NoExecute"},
            ]
        }
    )
    assert info.errors == ()
    assert info.tolerations == (
        Toleration("k", "Equal", "v", "NoSchedule"),
        Toleration("k2", "Equal", "v2", ""),
        Toleration("", "Exists", "", ""),
        Toleration("gpu", "Exists", "", "NoExecute"),
    )


def test_node_selector_is_sorted_pairs() -> None:
    info = pod({"nodeSelector": {"zone": "a", "disk": "ssd"}})
    assert info.node_selector == (("disk", "ssd"), ("zone", "a"))


def test_affinity_terms() -> None:
    info = pod(
        {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "zone", "operator": "In", "values": ["a", "b"]},
                                    {"key": "gpu", "operator": "Exists"},
                                ]
                            },
                            {
                                "matchFields": [
                                    {"key": "metadata.name", "operator": "In", "values": ["n1"]}
                                ]
                            },
                        ]
                    },
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 30,
                            "preference": {
                                "matchExpressions": [
                                    {"key": "cores", "operator": "Gt", "values": ["8"]}
                                ]
                            },
                        }
                    ],
                }
            }
        }
    )
    assert info.errors == ()
    assert info.required_terms == (
        NodeSelectorTerm(
            (Requirement("zone", "In", ("a", "b")), Requirement("gpu", "Exists", ())), ()
        ),
        NodeSelectorTerm((), (Requirement("metadata.name", "In", ("n1",)),)),
    )
    assert info.preferred_terms == (
        PreferredTerm(30, NodeSelectorTerm((Requirement("cores", "Gt", ("8",)),), ())),
    )


def test_no_required_affinity_is_none_and_empty_terms_is_empty() -> None:
    assert pod({}).required_terms is None
    empty = pod(
        {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}
                }
            }
        }
    )
    assert empty.required_terms == ()


def test_metadata_and_status_fields() -> None:
    info = parse_pod(
        {
            "metadata": {
                "name": "web",
                "namespace": "prod",
                "uid": "u-9",
                "resourceVersion": "42",
                "deletionTimestamp": "2024-01-01T00:00:00Z",
                "creationTimestamp": "2023-12-31T00:00:00Z",
            },
            "spec": {
                "schedulerName": "mine",
                "nodeName": "n1",
                "priority": 1000,
                "schedulingGates": [{"name": "a"}, {"name": "b"}],
            },
            "status": {
                "phase": "Succeeded",
                "nominatedNodeName": "n2",
                "conditions": [
                    {"type": "Ready", "status": "True"},
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": "0/1 nodes are available",
                    },
                ],
            },
        }
    )
    assert info.key == "prod/web"
    assert (info.uid, info.resource_version, info.scheduler_name) == ("u-9", "42", "mine")
    assert info.assigned
    assert info.node_name == "n1"
    assert info.priority == 1000
    assert info.scheduling_gates == ("a", "b")
    assert info.deleting
    assert info.terminal
    assert info.nominated_node_name == "n2"
    assert info.creation_timestamp == "2023-12-31T00:00:00Z"
    assert info.scheduled_condition == ("False", "Unschedulable", "0/1 nodes are available")


def test_defaults_for_a_bare_pod() -> None:
    info = parse_pod({})
    assert info.scheduler_name == "default-scheduler"
    assert info.phase == "Pending"
    assert not info.assigned
    assert not info.terminal
    assert not info.deleting
    assert info.priority == 0
    assert info.scheduled_condition is None
    assert info.errors == ()


def test_scheduling_spec_equal() -> None:
    base = {"containers": [container(cpu="1")], "priority": 5}
    a = pod(base, resourceVersion="1")
    b = pod(base, resourceVersion="2", labels={"x": "y"})
    assert a.scheduling_spec_equal(b)
    assert not a.scheduling_spec_equal(pod({**base, "priority": 6}))
    assert not a.scheduling_spec_equal(pod({**base, "containers": [container(cpu="2")]}))
    assert not a.scheduling_spec_equal(pod({**base, "schedulingGates": [{"name": "g"}]}))
    assert not a.scheduling_spec_equal(pod({**base, "nodeSelector": {"a": "b"}}))


# -- bad input: recorded in errors, never raised ----------------------------------------------


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        pytest.param(
            {"containers": [container(cpu="lots")]},
            "spec.containers[0].resources.requests.cpu",
            id="bad-cpu",
        ),
        pytest.param(
            {"containers": [container(), container("b", memory="1.2.3")]},
            "spec.containers[1].resources.requests.memory",
            id="bad-memory-second-container",
        ),
        pytest.param(
            {"initContainers": [container(cpu="10 Gi")]},
            "spec.initContainers[0].resources.requests.cpu",
            id="bad-init-cpu",
        ),
        pytest.param(
            {"containers": [container(cpu="-1")]},
            "spec.containers[0].resources.requests.cpu",
            id="negative-cpu",
        ),
        pytest.param(
            {"containers": [{"name": "c", "resources": {"requests": {"cpu": None}}}]},
            "spec.containers[0].resources.requests.cpu",
            id="null-cpu",
        ),
        pytest.param(
            {"containers": [{"name": "c", "resources": {"requests": {"cpu": True}}}]},
            "spec.containers[0].resources.requests.cpu",
            id="bool-cpu",
        ),
        pytest.param({"overhead": {"cpu": "1Qi"}}, "spec.overhead.cpu", id="bad-overhead"),
        pytest.param(
            {"resources": {"requests": {"memory": "lots"}}},
            "spec.resources.requests.memory",
            id="bad-pod-level",
        ),
        pytest.param(
            {"containers": [{"name": "c", "resources": {"requests": ["cpu"]}}]},
            "spec.containers[0].resources.requests",
            id="requests-list",
        ),
        pytest.param({"overhead": ["cpu"]}, "spec.overhead", id="overhead-list"),
        pytest.param(
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "a", "operator": "Near"}]}
                            ]
                        }
                    }
                }
            },
            f"{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].operator",
            id="bad-affinity-operator",
        ),
        pytest.param(
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {},
                                {
                                    "matchExpressions": [
                                        {"key": "a", "operator": "Gt", "values": ["ten"]}
                                    ]
                                },
                            ]
                        }
                    }
                }
            },
            f"{REQUIRED}.nodeSelectorTerms[1].matchExpressions[0].values[0]",
            id="gt-not-integer",
        ),
        pytest.param(
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchFields": [{"key": "x", "operator": "Exists"}]}
                            ]
                        }
                    }
                }
            },
            f"{REQUIRED}.nodeSelectorTerms[0].matchFields[0].operator",
            id="bad-field-operator",
        ),
        pytest.param(
            {
                "affinity": {
                    "nodeAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {"weight": 0, "preference": {}}
                        ]
                    }
                }
            },
            f"{PREFERRED}[0].weight",
            id="weight-zero",
        ),
        pytest.param(
            {
                "affinity": {
                    "nodeAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {"weight": "5", "preference": {}}
                        ]
                    }
                }
            },
            f"{PREFERRED}[0].weight",
            id="weight-string",
        ),
        pytest.param(
            {
                "affinity": {
                    "nodeAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "weight": 5,
                                "preference": {
                                    "matchExpressions": [
                                        {"key": "a", "operator": "In", "values": []}
                                    ]
                                },
                            }
                        ]
                    }
                }
            },
            f"{PREFERRED}[0].preference.matchExpressions[0].values",
            id="in-without-values",
        ),
        pytest.param(
            {"tolerations": [{"key": "k", "operator": "Contains", "value": "v"}]},
            "spec.tolerations[0].operator",
            id="bad-toleration-operator",
        ),
        pytest.param(
            {"tolerations": [{"operator": "Exists"}, {"key": "k", "effect": "Sometimes"}]},
            "spec.tolerations[1].effect",
            id="bad-toleration-effect",
        ),
        pytest.param(
            {"tolerations": [{"value": "v"}]},
            "spec.tolerations[0].operator",
            id="equal-without-key",
        ),
        pytest.param({"tolerations": ["k=v"]}, "spec.tolerations[0]", id="toleration-string"),
        pytest.param(
            {"containers": [{"name": "c", "ports": [{"hostPort": "8080"}]}]},
            "spec.containers[0].ports[0].hostPort",
            id="host-port-string",
        ),
        pytest.param(
            {"containers": [{"name": "c", "ports": [{"hostPort": 70000}]}]},
            "spec.containers[0].ports[0].hostPort",
            id="host-port-out-of-range",
        ),
        pytest.param({"priority": "high"}, "spec.priority", id="priority-string"),
        pytest.param({"nodeSelector": ["zone=a"]}, "spec.nodeSelector", id="selector-list"),
        pytest.param(
            {
                "initContainers": [
                    container("init"),
                    {"name": "side", "restartPolicy": "Always", "ports": [{"hostPort": "x"}]},
                ]
            },
            "spec.initContainers[1].ports[0].hostPort",
            id="sidecar-port-path-uses-real-index",
        ),
        pytest.param({"containers": ["nginx"]}, "spec.containers[0]", id="container-string"),
        pytest.param(
            {"containers": [{"name": "c", "resources": [{"requests": {"cpu": "1"}}]}]},
            "spec.containers[0].resources",
            id="resources-list",
        ),
        pytest.param(
            {"initContainers": ["busybox"]}, "spec.initContainers[0]", id="init-container-string"
        ),
        pytest.param(
            {"containers": [{"name": "c", "ports": ["8080"]}]},
            "spec.containers[0].ports[0]",
            id="port-string",
        ),
        pytest.param({"resources": ["cpu"]}, "spec.resources", id="pod-resources-list"),
        pytest.param({"affinity": ["zone"]}, "spec.affinity", id="affinity-list"),
        pytest.param(
            {"affinity": {"nodeAffinity": "zone=a"}},
            "spec.affinity.nodeAffinity",
            id="node-affinity-string",
        ),
        pytest.param(
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {"nodeSelectorTerms": []}
                        ]
                    }
                }
            },
            REQUIRED,
            id="required-list",
        ),
        pytest.param(
            {
                "affinity": {
                    "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": ["zone"]}
                }
            },
            f"{PREFERRED}[0]",
            id="preferred-item-string",
        ),
        pytest.param({"schedulingGates": ["gate"]}, "spec.schedulingGates[0]", id="gate-string"),
        pytest.param(
            {"containers": {"name": "c", "resources": {"requests": {"cpu": "1"}}}},
            "spec.containers",
            id="containers-object",
        ),
        pytest.param(
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": {"matchExpressions": []}
                        }
                    }
                }
            },
            f"{REQUIRED}.nodeSelectorTerms",
            id="terms-object",
        ),
    ],
)
def test_bad_input_is_recorded_with_its_path(spec: dict[str, Any], path: str) -> None:
    info = pod(spec)
    assert info.errors, "expected an error"
    assert any(e.startswith(f"{path}:") for e in info.errors), info.errors


def test_bad_quantity_message_names_field_and_value() -> None:
    info = pod({"containers": [container(cpu="lots")]})
    assert info.errors == ("spec.containers[0].resources.requests.cpu: not a quantity: 'lots'",)


def test_good_fields_survive_bad_neighbours() -> None:
    info = pod(
        {
            "containers": [container("a", cpu="lots", memory="1Gi"), container("b", cpu="250m")],
            "tolerations": [{"key": "k", "operator": "Nope"}, {"operator": "Exists"}],
            "priority": 7,
        }
    )
    assert len(info.errors) == 2
    assert dict(info.requests) == {"cpu": 250, "memory": GI}
    assert info.tolerations == (Toleration("", "Exists", "", ""),)
    assert info.priority == 7


def test_all_errors_are_collected() -> None:
    info = pod(
        {
            "containers": [container(cpu="x", memory="y")],
            "overhead": {"cpu": "z"},
            "tolerations": [{"key": "k", "effect": "Bad"}],
            "priority": "p",
        }
    )
    paths = sorted(e.split(":", 1)[0] for e in info.errors)
    assert paths == [
        "spec.containers[0].resources.requests.cpu",
        "spec.containers[0].resources.requests.memory",
        "spec.overhead.cpu",
        "spec.priority",
        "spec.tolerations[0].effect",
    ]


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param({"metadata": None, "spec": None, "status": None}, id="nulls"),
        pytest.param({"spec": {"containers": None, "initContainers": None}}, id="null-lists"),
        pytest.param({"spec": {"containers": [None]}}, id="null-container"),
        pytest.param({"spec": {"tolerations": [None]}}, id="null-toleration"),
        pytest.param({"spec": ["containers"]}, id="spec-list"),
        pytest.param({"status": {"conditions": ["PodScheduled"]}}, id="condition-string"),
    ],
)
def test_garbage_never_raises(obj: dict[str, Any]) -> None:
    parse_pod(obj)


def test_an_update_reparsed_from_the_old_record_equals_a_full_parse() -> None:
    """Status-only updates and binds take the cheap path; anything else a full parse; either
    way the result is what parsing the new object from scratch gives."""
    import copy
    import random

    from ascheduler.model import reparse_pod

    rng = random.Random(9)
    base = {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": "u1",
            "resourceVersion": "1",
            "labels": {"app": "web"},
        },
        "spec": {
            "nodeName": "n1",
            "priority": 5,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
            "tolerations": [{"key": "k", "operator": "Exists"}],
        },
        "status": {"phase": "Pending"},
    }
    changes = [
        lambda o: o.setdefault("status", {}).update(
            phase="Running", startTime="2030-01-01T00:00:00Z"
        ),
        lambda o: o.setdefault("status", {}).update(
            conditions=[
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"},
                {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"},
            ]
        ),
        lambda o: o.setdefault("status", {}).update(nominatedNodeName="n2"),
        lambda o: o["metadata"].update(deletionTimestamp="2030-01-01T00:00:00Z"),
        lambda o: o["metadata"].update(labels={"app": "db"}),
        lambda o: o["metadata"].update(labels={"app": "web", "topology.kubernetes.io/zone": "z1"}),
        lambda o: o["metadata"].pop("labels", None),
        lambda o: o["metadata"].update(labels={"app": 3}),  # an error: full parse reports it
        lambda o: o["metadata"].update(labels=""),  # an error: full parse reports it
        lambda o: o["spec"]["containers"][0]["resources"]["requests"].update(cpu="2"),
        lambda o: o["spec"].update(nodeName="n9"),
        lambda o: o["spec"].pop("nodeName", None),  # not bound yet: the Binding then sets it
        lambda o: o["spec"].update(nodeName=""),
        lambda o: o["spec"].update(nodeName=7),  # an error: full parse reports it
        lambda o: o["spec"].update(priority="high"),  # an error: full parse reports it
        lambda o: o.setdefault("status", {}).update(conditions="garbage"),
        lambda o: o["metadata"].update(
            ownerReferences=[
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "controller": True}
            ]
        ),
        lambda o: o.pop("status", None),
        # In-place resizes: what the kubelet reports of the container's resources.
        lambda o: o.setdefault("status", {}).update(
            containerStatuses=[
                {"name": "c", "resources": {"requests": {"cpu": "100m"}}, "ready": True}
            ]
        ),
        lambda o: o.setdefault("status", {}).update(
            containerStatuses=[
                {
                    "name": "c",
                    "resources": {"requests": {"cpu": "500m"}},
                    "allocatedResources": {"cpu": "1"},
                }
            ]
        ),
        lambda o: o.setdefault("status", {}).update(
            conditions=[{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]
        ),
        lambda o: o.setdefault("status", {}).update(
            containerStatuses=[{"name": "c", "resources": {"requests": {"cpu": "x"}}}]
        ),  # an error: full parse reports it
    ]
    cheap = 0
    for trial in range(300):
        before = copy.deepcopy(base)
        for change in rng.sample(changes, rng.randint(0, 2)):
            change(before)
        after = copy.deepcopy(before)
        after["metadata"]["resourceVersion"] = str(trial + 2)
        for change in rng.sample(changes, rng.randint(0, 2)):
            change(after)
        old = parse_pod(before)
        got = reparse_pod(after, old)
        want = parse_pod(after)
        assert got == want, trial
        assert got.fingerprint == want.fingerprint, trial
        cheap += got is not want and old.fingerprint == want.fingerprint
    assert cheap > 50


def test_a_bind_is_reparsed_without_a_full_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    """The update a Binding makes (spec.nodeName set, PodScheduled true, the node's topology
    labels added) is read off the old record; a bind that changed anything else of the spec
    is parsed in full."""
    import copy

    from ascheduler.model import pod as pod_module

    before = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "1"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending"},
    }
    old = parse_pod(before)
    after = copy.deepcopy(before)
    after["metadata"]["resourceVersion"] = "2"
    after["spec"]["nodeName"] = "n1"
    after["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
    # The API server copies the node's topology labels onto the pod it binds.
    after["metadata"]["labels"] = {"topology.kubernetes.io/zone": "z1"}
    want = parse_pod(after)
    full: list[object] = []
    parse = pod_module.parse_pod
    monkeypatch.setattr(pod_module, "parse_pod", lambda *a, **k: full.append(a) or parse(*a, **k))
    got = pod_module.reparse_pod(after, old)
    assert not full
    assert got == want
    assert got.node_name == "n1"
    assert got.labels == {"topology.kubernetes.io/zone": "z1"}
    assert got.fingerprint == want.fingerprint
    after["spec"]["priority"] = 9
    assert pod_module.reparse_pod(after, old) == parse(after)
    assert full


def test_a_resize_in_the_status_changes_the_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """A status update that moves what the kubelet reports of the containers' resources is
    parsed in full (the requests change); the kubelet's other updates of a pod that reports
    resources stay on the cheap path."""
    import copy

    from ascheduler.model import pod as pod_module

    running = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "1"},
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
        },
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": "c",
                    "resources": {"requests": {"cpu": "1"}},
                    "allocatedResources": {"cpu": "1"},
                }
            ],
        },
    }
    old = parse_pod(running)
    full: list[object] = []
    parse = pod_module.parse_pod
    monkeypatch.setattr(pod_module, "parse_pod", lambda *a, **k: full.append(a) or parse(*a, **k))

    ready = copy.deepcopy(running)
    ready["metadata"]["resourceVersion"] = "2"
    ready["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    got = pod_module.reparse_pod(ready, old)
    assert not full
    assert got.requests == {"cpu": 1000}

    resized = copy.deepcopy(ready)
    resized["metadata"]["resourceVersion"] = "3"
    resized["status"]["containerStatuses"][0]["allocatedResources"] = {"cpu": "3"}
    got = pod_module.reparse_pod(resized, got)
    assert full
    assert got.requests == {"cpu": 3000}
    assert got.spec_requests == {"cpu": 1000}
    assert got.fit_requests == {"cpu": 1000}

    infeasible = copy.deepcopy(resized)
    infeasible["metadata"]["resourceVersion"] = "4"
    infeasible["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "8"
    infeasible["status"]["containerStatuses"][0]["allocatedResources"] = {"cpu": "1"}
    infeasible["status"]["conditions"] = [
        {"type": "PodResizePending", "status": "True", "reason": "Infeasible"}
    ]
    got = pod_module.reparse_pod(infeasible, got)
    assert got.requests == {"cpu": 1000}
    assert got == parse(infeasible)
