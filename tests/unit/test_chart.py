"""deploy/helm's chart and deploy/base cannot drift: the chart's CRDs are deploy/crds' files and
its RBAC rules are deploy/base's (and the node-lock overlay's), byte for byte and rule for rule;
its values file documents every value its schema knows. The roles write no pod but through
pods/binding, pods/status and deletions, and no Node but in the node-lock overlay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "ascheduler"
BASE = ROOT / "deploy" / "base"
NODE_LOCKS = ROOT / "deploy" / "overlays" / "node-lock-object-node"


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def rules(path: Path, kind: str, name: str) -> list[dict[str, Any]]:
    (doc,) = [d for d in documents(path) if d["kind"] == kind and d["metadata"]["name"] == name]
    found: list[dict[str, Any]] = doc["rules"]
    return found


def test_the_chart_s_crds_are_deploy_crds() -> None:
    crds = sorted(p.name for p in (ROOT / "deploy" / "crds").glob("*.yaml"))
    assert sorted(p.name for p in (CHART / "files" / "crds").glob("*.yaml")) == crds
    for name in crds:
        assert (CHART / "files" / "crds" / name).read_bytes() == (
            ROOT / "deploy" / "crds" / name
        ).read_bytes()


def test_the_chart_s_rbac_rules_are_deploy_base_s() -> None:
    files = CHART / "files" / "rbac"
    assert yaml.safe_load((files / "scheduler.yaml").read_text()) == rules(
        BASE / "rbac.yaml", "ClusterRole", "ascheduler"
    )
    assert yaml.safe_load((files / "debug-reader.yaml").read_text()) == rules(
        BASE / "rbac.yaml", "ClusterRole", "ascheduler-debug-reader"
    )
    assert yaml.safe_load((files / "binder.yaml").read_text()) == rules(
        BASE / "binder.yaml", "ClusterRole", "ascheduler-binder"
    )
    assert yaml.safe_load((files / "node-locks.yaml").read_text()) == rules(
        NODE_LOCKS / "rbac.yaml", "ClusterRole", "ascheduler-node-locks"
    )
    # The namespaced Lease rules: the chart's template writes them out; same verbs.
    template = (CHART / "templates" / "rbac.yaml").read_text()
    for rule in rules(BASE / "rbac.yaml", "Role", "ascheduler-leader-election"):
        assert f"verbs: [{', '.join(rule['verbs'])}]" in template


def test_the_chart_s_metrics_reader_is_deploy_base_s() -> None:
    assert yaml.safe_load((CHART / "files" / "metrics-reader.yaml").read_text()) == rules(
        BASE / "metrics-reader.yaml", "ClusterRole", "ascheduler-metrics-reader"
    )


def test_every_value_is_in_the_schema_and_the_schema_has_no_unknown_value() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert schema["additionalProperties"] is False
    assert set(values) == set(schema["properties"])
    text = (CHART / "values.yaml").read_text()
    for key in values:  # documented: a comment right above each top-level value
        lines = text.splitlines()
        at = next(i for i, line in enumerate(lines) if line.startswith(f"{key}:"))
        above = lines[at - 1].strip()
        assert above.startswith("#"), key


def granted(rules: list[dict[str, Any]], group: str, resource: str) -> set[str]:
    verbs: set[str] = set()
    for rule in rules:
        if group in rule.get("apiGroups", ()) and resource in rule.get("resources", ()):
            verbs |= set(rule["verbs"])
    return verbs


def test_no_role_writes_pods_or_nodes_but_the_node_lock_overlay() -> None:
    """kube-scheduler's system:kube-scheduler reads pods and nodes, deletes pods, creates
    Bindings and patches pods/status: so do ascheduler's roles. A pod's spec is never theirs
    to change (the bind-phase annotations ride on the Binding), nor a Node but for its lock."""
    scheduler = rules(BASE / "rbac.yaml", "ClusterRole", "ascheduler")
    binder = rules(BASE / "binder.yaml", "ClusterRole", "ascheduler-binder")
    assert granted(scheduler, "", "pods") == {"get", "list", "watch", "delete"}
    assert granted(binder, "", "pods") == {"get", "list", "watch"}
    for role in (scheduler, binder):
        assert granted(role, "", "nodes") == {"get", "list", "watch"}
        assert granted(role, "", "pods/binding") == {"create"}
        assert not [r for r in role if "*" in r["verbs"] or "*" in r.get("resources", ())]
    assert granted(scheduler, "", "pods/status") == {"patch"}
    # What the secure HTTP port needs to check its callers.
    assert granted(scheduler, "authentication.k8s.io", "tokenreviews") == {"create"}
    assert granted(scheduler, "authorization.k8s.io", "subjectaccessreviews") == {"create"}
    # The overlay: patch nodes, for both ServiceAccounts, and both run with the flag.
    overlay = rules(NODE_LOCKS / "rbac.yaml", "ClusterRole", "ascheduler-node-locks")
    assert overlay == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["patch"]}]
    (binding,) = [d for d in documents(NODE_LOCKS / "rbac.yaml") if d["kind"] != "ClusterRole"]
    assert {s["name"] for s in binding["subjects"]} == {"ascheduler", "ascheduler-binder"}
    kustomization = yaml.safe_load((NODE_LOCKS / "kustomization.yaml").read_text())
    assert kustomization["resources"] == ["../../base", "rbac.yaml"]
    patched = {p["target"]["name"]: yaml.safe_load(p["patch"]) for p in kustomization["patches"]}
    assert set(patched) == {"ascheduler", "ascheduler-binder"}
    for ops in patched.values():
        assert [op["value"] for op in ops] == ["--node-lock-object", "node"]


def test_claim_status_writes_carry_the_binding_permission_of_136() -> None:
    """From 1.36 the API server asks a write of a claim's allocation or reservedFor for the
    same verb on resourceclaims/binding (DRAResourceClaimGranularStatusAuthorization), and
    kube-scheduler's role grants update and patch there: so do the manifests and the chart."""
    scheduler = rules(BASE / "rbac.yaml", "ClusterRole", "ascheduler")
    chart = yaml.safe_load((CHART / "files" / "rbac" / "scheduler.yaml").read_text())
    for role in (scheduler, chart):
        assert granted(role, "resource.k8s.io", "resourceclaims/status") == {"update", "patch"}
        assert granted(role, "resource.k8s.io", "resourceclaims/binding") == {"update", "patch"}


def test_the_scheduler_creates_and_deletes_the_claims_of_extended_resources() -> None:
    """kube-scheduler's role, with DRAExtendedResource: read and update resourceclaims, create
    and delete them (the claim of a pod's extended resources backed by DRA), update their
    status; ascheduler's: the same, status patches beside."""
    scheduler = rules(BASE / "rbac.yaml", "ClusterRole", "ascheduler")
    assert granted(scheduler, "resource.k8s.io", "resourceclaims") == {
        "get",
        "list",
        "watch",
        "update",
        "create",
        "delete",
    }
    assert granted(scheduler, "resource.k8s.io", "resourceclaims/status") == {"update", "patch"}
