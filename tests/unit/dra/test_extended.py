"""Extended resources backed by DRA: which class backs a name, the claim kube-scheduler
makes for a pod (its requests and the pod-status mappings), and the earlier cycle's claim."""

from __future__ import annotations

from typing import Any

from ascheduler.dra.extended import (
    CLAIM_ANNOTATION,
    IN_MEMORY_NAME,
    ExtendedResolver,
    claim_for,
    class_may_help,
    creation_body,
    delegated_names,
    find_claim,
    requests_and_mappings,
)
from ascheduler.dra.store import ResourceObjects
from ascheduler.model import parse_pod
from ascheduler.model.dra import parse_device_class, parse_resource_claim
from ascheduler.model.extended import is_dra_extended_name
from tests.kit import container, pod

GPU = "example.com/gpu"


def klass(name: str, extended: str | None = None, created: str = "2026-01-01T00:00:00Z") -> Any:
    spec: dict[str, Any] = {"selectors": []}
    if extended is not None:
        spec["extendedResourceName"] = extended
    return parse_device_class(
        {"metadata": {"name": name, "creationTimestamp": created}, "spec": spec}
    )


def test_names_that_may_be_backed() -> None:
    assert is_dra_extended_name(GPU)
    assert is_dra_extended_name("deviceclass.resource.kubernetes.io/gpu")
    assert not is_dra_extended_name("cpu")
    assert not is_dra_extended_name("hugepages-2Mi")
    assert not is_dra_extended_name("kubernetes.io/something")
    assert not is_dra_extended_name("requests.example.com/gpu")


def test_every_class_backs_its_implicit_name_and_its_explicit_one() -> None:
    resolver = ExtendedResolver([klass("a", GPU), klass("b")])
    a = resolver.device_class(GPU)
    assert a is not None
    assert a.name == "a"
    implicit = resolver.device_class("deviceclass.resource.kubernetes.io/b")
    assert implicit is not None
    assert implicit.name == "b"
    assert resolver.device_class("example.com/fpga") is None


def test_a_shared_explicit_name_goes_to_the_older_class_then_the_smaller_name() -> None:
    older = klass("z", GPU, "2026-01-01T00:00:00Z")
    newer = klass("a", GPU, "2026-01-02T00:00:00Z")
    for order in ([older, newer], [newer, older]):
        found = ExtendedResolver(order).device_class(GPU)
        assert found is not None
        assert found.name == "z"
    tied = ExtendedResolver([klass("y", GPU), klass("x", GPU)]).device_class(GPU)
    assert tied is not None
    assert tied.name == "x"


def containers_of(raw: dict[str, Any]) -> Any:
    return parse_pod(raw).extended_containers


def test_one_request_per_container_named_by_its_place_among_sorted_requests() -> None:
    raw = pod(
        containers=[
            container("a", cpu="1", extra={GPU: "2"}),
            container("b", extra={GPU: "1", "example.com/aaa": "1"}),
        ]
    )
    resolver = ExtendedResolver([klass("gpu", GPU)])
    requests, mappings = requests_and_mappings(containers_of(raw), [GPU], resolver)
    # a: [cpu, example.com/gpu] -> 1; b: [example.com/aaa, example.com/gpu] -> 1.
    assert requests == [("container-0-request-1", "gpu", 2), ("container-1-request-1", "gpu", 1)]
    assert [(m.container, m.resource, m.request) for m in mappings] == [
        ("a", GPU, "container-0-request-1"),
        ("b", GPU, "container-1-request-1"),
    ]


def test_init_containers_reuse_later_requests_and_share_the_largest() -> None:
    raw = pod(
        init_containers=[
            container("i0", extra={GPU: "3"}),
            container("i1", extra={GPU: "5"}),
            container("side", extra={GPU: "1"}, restart_policy="Always"),
        ],
        containers=[container("main", extra={GPU: "2"})],
    )
    resolver = ExtendedResolver([klass("gpu", GPU)])
    requests, mappings = requests_and_mappings(containers_of(raw), [GPU], resolver)
    # The sidecar (1) and main (2) are long-lived; i0 (needs 3) reuses both and needs
    # nothing more; i1 (needs 5) reuses their 3 and asks 2 more.
    assert requests == [
        ("container-1-request-0", "gpu", 2),
        ("container-2-request-0", "gpu", 1),
        ("container-3-request-0", "gpu", 2),
    ]
    assert [(m.container, m.request) for m in mappings] == [
        ("side", "container-2-request-0"),
        ("main", "container-3-request-0"),
        ("i0", "container-2-request-0"),
        ("i0", "container-3-request-0"),
        ("i1", "container-2-request-0"),
        ("i1", "container-3-request-0"),
        ("i1", "container-1-request-0"),
    ]


def test_short_lived_requests_merge_into_the_largest() -> None:
    raw = pod(
        init_containers=[container("i0", extra={GPU: "1"}), container("i1", extra={GPU: "4"})],
        containers=[container("main", cpu="1")],
    )
    resolver = ExtendedResolver([klass("gpu", GPU)])
    requests, mappings = requests_and_mappings(containers_of(raw), [GPU], resolver)
    assert requests == [("container-1-request-0", "gpu", 4)]
    assert {m.request for m in mappings} == {"container-1-request-0"}


def test_the_claim_and_what_creating_it_sends() -> None:
    info = parse_pod(pod("web", namespace="ns", uid="u1"))
    claim = claim_for(info, "tmp", [("container-0-request-0", "gpu", 1)])
    assert claim.name == IN_MEMORY_NAME
    assert claim.uid == "tmp"
    assert not claim.errors
    assert claim.owner_pod_uid == "u1"
    (request,) = claim.requests
    assert request.exactly is not None
    assert request.exactly.class_name == "gpu"
    body = creation_body(claim)
    meta = body["metadata"]
    assert "name" not in meta
    assert "uid" not in meta
    assert meta["generateName"] == "web-extended-resources-"
    assert meta["annotations"] == {CLAIM_ANNOTATION: "true"}
    assert meta["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "u1", "controller": True}
    ]
    assert body["spec"]["devices"]["requests"][0]["exactly"] == {
        "deviceClassName": "gpu",
        "allocationMode": "ExactCount",
        "count": 1,
    }


def test_the_earlier_cycles_claim_is_annotated_and_controlled_by_the_pod() -> None:
    info = parse_pod(pod("web", namespace="ns", uid="u1"))

    def made(name: str, *, annotated: bool, uid: str, controller: bool = True) -> Any:
        meta: dict[str, Any] = {
            "name": name,
            "namespace": "ns",
            "uid": f"c-{name}",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": uid}
                | ({"controller": True} if controller else {})
            ],
        }
        if annotated:
            meta["annotations"] = {CLAIM_ANNOTATION: "true"}
        return parse_resource_claim({"metadata": meta, "spec": {"devices": {}}})

    others = [
        made("plain", annotated=False, uid="u1"),
        made("other-pod", annotated=True, uid="u2"),
        made("not-controller", annotated=True, uid="u1", controller=False),
    ]
    assert find_claim(info, others) is None
    found = find_claim(info, [*others, made("mine", annotated=True, uid="u1")])
    assert found is not None
    assert found.name == "mine"


def test_delegated_names_need_a_backing_class() -> None:
    objects = ResourceObjects()
    assert delegated_names(objects, [(GPU, 1)]) == frozenset()
    objects.handlers["DeviceClass"].on_add(klass("gpu", GPU))
    assert delegated_names(objects, [(GPU, 1), ("cpu", 100), ("example.com/x", 1)]) == {GPU}
    assert delegated_names(objects, [("deviceclass.resource.kubernetes.io/gpu", 1)]) == {
        "deviceclass.resource.kubernetes.io/gpu"
    }
    assert delegated_names(None, [(GPU, 1)]) == frozenset()


def test_class_events_wake_pods_asking_for_what_the_class_backs() -> None:
    wants = parse_pod(pod(extra={GPU: "1"}))
    implicit = parse_pod(pod(extra={"deviceclass.resource.kubernetes.io/gpu": "1"}))
    assert class_may_help(wants, None, klass("gpu", GPU))
    assert not class_may_help(wants, None, klass("gpu"))
    assert class_may_help(implicit, None, klass("gpu"))
    # An update matters only when it changes the explicit name.
    assert not class_may_help(wants, klass("gpu", GPU), klass("gpu", GPU))
    assert class_may_help(wants, klass("gpu"), klass("gpu", GPU))
    assert not class_may_help(implicit, klass("gpu"), klass("gpu", "example.com/x"))
