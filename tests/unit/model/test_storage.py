"""Storage objects parsed for the volume plugins: what is read, the defaults the API leaves
implicit, and unreadable fields recorded by path instead of raising."""

from __future__ import annotations

from typing import Any

from ascheduler.model.storage import (
    BETA_STORAGE_CLASS,
    FILESYSTEM,
    IMMEDIATE,
    SELECTED_NODE,
    WAIT_FOR_FIRST_CONSUMER,
    ClaimRef,
    parse_capacity,
    parse_claim,
    parse_csi_driver,
    parse_csi_node,
    parse_storage_class,
    parse_volume,
    parse_volume_attachment,
)
from ascheduler.model.topology import NOTHING


def claim(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "ns", "name": "data-0", "uid": "c1", "resourceVersion": "7"},
        "spec": spec,
    }


def test_a_claim_with_its_class_request_and_annotations() -> None:
    raw = claim(
        storageClassName="local",
        accessModes=["ReadWriteOnce"],
        resources={"requests": {"storage": "10Gi"}},
        selector={"matchLabels": {"tier": "fast"}},
    )
    raw["metadata"]["annotations"] = {SELECTED_NODE: "n1"}
    raw["metadata"]["ownerReferences"] = [
        {"kind": "Pod", "name": "web", "uid": "p1", "controller": True}
    ]
    c = parse_claim(raw)
    assert c.errors == ()
    assert (c.key, c.storage_class, c.request) == ("ns/data-0", "local", 10 * 2**30)
    assert (c.volume_mode, c.phase, c.bound) == (FILESYSTEM, "Pending", False)
    assert c.access_modes == ("ReadWriteOnce",)
    assert c.selector is not None
    assert c.selector.matches({"tier": "fast"})
    assert c.annotations[SELECTED_NODE] == "n1"
    assert c.owner_uid == "p1"


def test_a_claim_s_class_none_empty_or_from_the_beta_annotation() -> None:
    assert parse_claim(claim()).storage_class is None
    assert parse_claim(claim(storageClassName="")).storage_class == ""
    raw = claim(storageClassName="new")
    raw["metadata"]["annotations"] = {BETA_STORAGE_CLASS: "old"}
    assert parse_claim(raw).storage_class == "old"  # the annotation wins
    bound = parse_claim(claim(volumeName="pv-1"))
    assert bound.bound
    assert bound.volume_name == "pv-1"


def test_a_claim_s_unreadable_fields_are_named() -> None:
    c = parse_claim(
        claim(
            storageClassName=3,
            resources={"requests": {"storage": "lots"}},
            accessModes="ReadWriteOnce",
            selector={"matchExpressions": [{"key": "a", "operator": "Near"}]},
        )
    )
    assert [e.split(":")[0] for e in c.errors] == [
        "spec.storageClassName",
        "spec.resources.requests.storage",
        "spec.accessModes",
        "spec.selector.matchExpressions[0].operator",
    ]
    assert c.selector == NOTHING  # a selector that does not parse matches nothing
    assert c.request == 0


def volume(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "pv-1", "uid": "v1", "labels": {"zone": "a"}}, "spec": spec}


def test_a_volume_with_capacity_claim_ref_node_affinity_and_csi() -> None:
    v = parse_volume(
        volume(
            capacity={"storage": "5Gi"},
            storageClassName="local",
            accessModes=["ReadWriteOnce", "ReadOnlyMany"],
            claimRef={"namespace": "ns", "name": "data-0", "uid": "c1"},
            nodeAffinity={
                "required": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "h", "operator": "In", "values": ["n1"]}]}
                    ]
                }
            },
            csi={"driver": "hostpath.csi.k8s.io", "volumeHandle": "h-1"},
        )
    )
    assert v.errors == ()
    assert (v.capacity, v.storage_class, v.phase) == (5 * 2**30, "local", "Pending")
    assert v.claim_ref == ClaimRef("ns", "data-0", "c1")
    assert v.node_affinity is not None
    assert len(v.node_affinity) == 1
    assert (v.csi_driver, v.csi_handle, v.in_tree) == ("hostpath.csi.k8s.io", "h-1", "")
    assert dict(v.labels) == {"zone": "a"}
    local = parse_volume(volume(local={"path": "/mnt"}))
    assert (local.in_tree, local.node_affinity, local.claim_ref) == ("local", None, None)


def test_a_volume_s_malformed_node_affinity_is_named() -> None:
    v = parse_volume(volume(nodeAffinity={"required": {"nodeSelectorTerms": "n1"}}))
    assert v.errors == ("spec.nodeAffinity.required.nodeSelectorTerms: expected a list",)
    assert v.node_affinity == ()  # matches no node
    bad_term = {"matchExpressions": [{"key": "h", "operator": "Gt", "values": ["x"]}]}
    v = parse_volume(volume(nodeAffinity={"required": {"nodeSelectorTerms": [bad_term]}}))
    assert len(v.errors) == 1
    assert v.errors[0].startswith("spec.nodeAffinity.required.nodeSelectorTerms[0]")


def test_storage_classes() -> None:
    wffc = parse_storage_class(
        {
            "metadata": {"name": "local"},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": WAIT_FOR_FIRST_CONSUMER,
            "allowedTopologies": [
                {"matchLabelExpressions": [{"key": "zone", "values": ["a", "b"]}]}
            ],
        }
    )
    assert wffc.delayed
    assert wffc.allowed_topologies == ((("zone", ("a", "b")),),)
    plain = parse_storage_class({"metadata": {"name": "std"}, "provisioner": "x"})
    assert (plain.binding_mode, plain.delayed, plain.errors) == (IMMEDIATE, False, ())
    odd = parse_storage_class({"metadata": {"name": "odd"}, "volumeBindingMode": "Later"})
    assert odd.errors == ("volumeBindingMode: unknown mode 'Later'",)


def test_csi_nodes_drivers_and_capacities() -> None:
    node = parse_csi_node(
        {
            "metadata": {"name": "n1"},
            "spec": {
                "drivers": [
                    {"name": "ebs.csi.aws.com", "nodeID": "i-1", "allocatable": {"count": 25}},
                    {"name": "nolimit", "nodeID": "x"},
                    {"name": "absurd", "allocatable": {"count": -4}},
                    {"nodeID": "nameless"},
                ]
            },
        }
    )
    assert node.drivers["ebs.csi.aws.com"].count == 25
    assert node.drivers["nolimit"].count is None
    assert node.drivers["absurd"].count is None
    assert node.errors == (
        "spec.drivers[2].allocatable.count: expected a non-negative integer",
        "spec.drivers[3]: expected an object with a name",
    )
    driver = parse_csi_driver({"metadata": {"name": "d"}, "spec": {"storageCapacity": True}})
    assert driver.storage_capacity
    assert driver.attach_required
    capacity = parse_capacity(
        {
            "metadata": {"namespace": "kube-system", "name": "c"},
            "storageClassName": "local",
            "nodeTopology": {"matchLabels": {"h": "n1"}},
            "capacity": "100Gi",
            "maximumVolumeSize": "20Gi",
        }
    )
    assert (capacity.capacity, capacity.maximum_volume_size) == (100 * 2**30, 20 * 2**30)
    assert capacity.node_topology is not None
    assert capacity.node_topology.matches({"h": "n1"})


def test_volume_attachments_and_their_bad_fields() -> None:
    va = parse_volume_attachment(
        {
            "metadata": {"name": "va", "resourceVersion": "4"},
            "spec": {
                "attacher": "d.csi",
                "nodeName": "n1",
                "source": {"persistentVolumeName": "pv-1"},
            },
        }
    )
    assert (va.name, va.attacher, va.node_name, va.volume_name, va.errors) == (
        "va",
        "d.csi",
        "n1",
        "pv-1",
        (),
    )
    inline = parse_volume_attachment(
        {"metadata": {"name": "i"}, "spec": {"attacher": "d", "source": {"inlineVolumeSpec": {}}}}
    )
    assert inline.volume_name == ""
    assert inline.errors == ()
    bad = parse_volume_attachment(
        {"metadata": {"name": "b"}, "spec": {"attacher": 3, "nodeName": "n", "source": []}}
    )
    assert bad.attacher == ""
    assert bad.errors == (
        "source: expected an object",
        "spec.attacher: expected a string, got 3",
    )
    csinode = parse_csi_node(
        {
            "metadata": {
                "name": "n",
                "annotations": {"storage.alpha.kubernetes.io/migrated-plugins": "a,b"},
            }
        }
    )
    assert csinode.migrated_plugins == "a,b"
