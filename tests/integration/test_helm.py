"""The Helm chart (deploy/helm/ascheduler), with helm built from its Go module: it lints; it
renders with its default values, with each example configuration in config/, and with the
optional parts on, every rendered configuration valid to `ascheduler config validate`; its
schema refuses bad values; and its manifests, server-side applied to the plane, run a
scheduler (under the chart's own ServiceAccount token and ConfigMap) that schedules pods."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ascheduler.devcluster import ControlPlane, ensure_built
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.plane import PlaneState
from ascheduler.kube import ApiError, KubeClient
from ascheduler.locks.keys import group_key, lock_lease_name
from ascheduler.locks.memberlease import MEMBER_PREFIX
from ascheduler.locks.settings import DEFAULT_LEASE_GROUPS
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import create_pods, eventually, pause_pod, wait_bound
from tests.integration.test_deploy import (
    KINDS,
    NAMESPACE,
    assert_authorized,
    service_account_kubeconfig,
)
from tests.integration.test_rbac import allowed

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "ascheduler"
EXAMPLES = sorted((ROOT / "config").glob("*.yaml"))
RELEASE = "ascheduler-chart"
MORE_KINDS = {
    "Service": ("/api/v1", "services", True),
    "CustomResourceDefinition": (
        "/apis/apiextensions.k8s.io/v1",
        "customresourcedefinitions",
        False,
    ),
}


def helm(
    tmp: Path, *args: str, values: dict[str, Any] | None = None
) -> subprocess.CompletedProcess[str]:
    """`helm ARGS` with its own homes under `tmp` (and `values` as a values file)."""
    env = {
        "HOME": str(tmp),
        "HELM_CONFIG_HOME": str(tmp / "helm-config"),
        "HELM_CACHE_HOME": str(tmp / "helm-cache"),
        "HELM_DATA_HOME": str(tmp / "helm-data"),
        "PATH": "/usr/bin:/bin",
    }
    extra: list[str] = []
    if values is not None:
        file = tmp / f"values-{len(list(tmp.glob('values-*')))}.yaml"
        file.write_text(yaml.safe_dump(values))
        extra = ["--values", str(file)]
    return subprocess.run(
        [str(ensure_built().helm), *args, *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def render(tmp: Path, values: dict[str, Any] | None = None, *flags: str) -> list[dict[str, Any]]:
    done = helm(
        tmp, "template", RELEASE, str(CHART), "--namespace", NAMESPACE, *flags, values=values
    )
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def config_of(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (configmap,) = [d for d in docs if d["kind"] == "ConfigMap"]
    config: dict[str, Any] = yaml.safe_load(configmap["data"]["config.yaml"])
    return config


def validate(tmp: Path, config: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    file = tmp / "rendered-config.yaml"
    file.write_text(yaml.safe_dump(config))
    return subprocess.run(
        [sys.executable, "-m", "ascheduler", "config", "validate", str(file)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def by_kind(docs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for d in docs:
        out.setdefault(d["kind"], []).append(d)
    return out


def test_the_chart_lints(tmp_path: Path) -> None:
    done = helm(tmp_path, "lint", str(CHART), "--strict")
    assert done.returncode == 0, done.stdout + done.stderr


def test_default_values_render_a_valid_second_scheduler(tmp_path: Path) -> None:
    docs = render(tmp_path)
    kinds = by_kind(docs)
    assert set(kinds) == {
        "ServiceAccount",
        "ConfigMap",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
        "Service",
    }
    config = config_of(docs)
    assert validate(tmp_path, config).returncode == 0
    assert config["profiles"] == [{"schedulerName": "ascheduler"}]
    assert config["leaderElection"]["resourceNamespace"] == NAMESPACE
    assert config["ascheduler"]["nodeLock"]["policy"] == "devices"
    (deployment,) = kinds["Deployment"]
    assert deployment["spec"]["replicas"] == 2
    # The secure port: HTTPS probes, the Service on it, no plain listener configured; the
    # metrics reader ClusterRole, bound to no one unless told.
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["args"][-2:] == ["--secure-port", "10259"]
    assert container["ports"] == [{"name": "https", "containerPort": 10259}]
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["scheme"] == "HTTPS"
    (service,) = kinds["Service"]
    assert service["spec"]["ports"][0]["port"] == 10259
    assert "httpAddress" not in config["ascheduler"]
    reader = [d for d in kinds["ClusterRole"] if d["metadata"]["name"].endswith("metrics-reader")]
    assert reader[0]["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    # The Lease Role names the Lease the configuration leads on.
    (role,) = kinds["Role"]
    named = [r for r in role["rules"] if r.get("resourceNames")]
    assert named[0]["resourceNames"] == [config["leaderElection"]["resourceName"]]


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_each_example_configuration_renders_valid(tmp_path: Path, example: Path) -> None:
    wanted = yaml.safe_load(example.read_text())
    config = config_of(render(tmp_path, {"schedulerConfig": wanted}))
    done = validate(tmp_path, config)
    assert done.returncode == 0, done.stdout + done.stderr
    # The example's profiles are the ones rendered; the Lease lives in the release namespace.
    assert config["profiles"] == wanted["profiles"]
    assert config["leaderElection"]["resourceNamespace"] == NAMESPACE


def test_lease_groups_render_into_the_configuration(tmp_path: Path) -> None:
    config = config_of(render(tmp_path, {"nodeLock": {"leaseGroups": 32}}))
    assert validate(tmp_path, config).returncode == 0
    assert config["ascheduler"]["nodeLock"]["leaseGroups"] == 32
    assert (
        config_of(render(tmp_path, {"nodeLock": {"leaseGroups": 0}}))["ascheduler"]["nodeLock"][
            "leaseGroups"
        ]
        == 0
    )
    # Unset, the chart names none: the scheduler's default applies.
    assert "leaseGroups" not in config_of(render(tmp_path, {}))["ascheduler"]["nodeLock"]


def test_sharding_renders_active_replicas(tmp_path: Path) -> None:
    values = {
        "replicas": 3,
        "sharding": {"enabled": True},
        "leaderElection": {"enabled": False},
        "nodeLock": {"policy": "all"},
    }
    docs = render(tmp_path, values)
    config = config_of(docs)
    done = validate(tmp_path, config)
    assert done.returncode == 0, done.stdout + done.stderr
    assert config["ascheduler"]["sharding"] == {
        "enabled": True,
        "group": RELEASE[:40].rstrip("-"),
        "memberDuration": "15s",
    }
    assert config["leaderElection"]["leaderElect"] is False
    (deployment,) = by_kind(docs)["Deployment"]
    assert deployment["spec"]["replicas"] == 3
    # Off by default: no section, as before.
    assert "sharding" not in config_of(render(tmp_path))["ascheduler"]


def test_the_optional_parts_render(tmp_path: Path) -> None:
    docs = render(
        tmp_path,
        {
            "mode": "replacement",
            "binding": "bindrequest",
            "crds": {"podGroups": True},
            "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
            "nodeLock": {"key": "hami.io/mutex.lock", "policy": "all"},
            "tls": {"secretName": "ascheduler-serving"},
            "metricsReader": {
                "subjects": [
                    {"kind": "ServiceAccount", "name": "prometheus", "namespace": "monitoring"}
                ]
            },
        },
    )
    kinds = by_kind(docs)
    config = config_of(docs)
    assert validate(tmp_path, config).returncode == 0
    assert config["profiles"] == [{"schedulerName": "default-scheduler"}]
    assert config["ascheduler"]["binding"] == "bindrequest"
    assert sorted(d["metadata"]["name"] for d in kinds["Deployment"]) == [
        RELEASE,
        f"{RELEASE}-binder",
    ]
    crds = {d["metadata"]["name"]: d for d in kinds["CustomResourceDefinition"]}
    assert set(crds) == {"bindrequests.ascheduler.io", "podgroups.scheduling.x-k8s.io"}
    for crd in crds.values():
        assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    (monitor,) = kinds["ServiceMonitor"]
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    (endpoint,) = monitor["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["scheme"]) == ("https", "https")
    assert endpoint["path"] == "/metrics"
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}
    # The serving certificate from the Secret, in both Deployments.
    for deployment in kinds["Deployment"]:
        pod = deployment["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        assert "--tls-cert-file" in container["args"]
        assert {"name": "tls", "secret": {"secretName": "ascheduler-serving"}} in pod["volumes"]
    (binding,) = [
        d for d in kinds["ClusterRoleBinding"] if d["metadata"]["name"].endswith("metrics-reader")
    ]
    assert binding["subjects"][0]["name"] == "prometheus"
    assert {d["metadata"]["name"] for d in kinds["ServiceAccount"]} == {
        RELEASE,
        f"{RELEASE}-binder",
    }


def node_lock_roles(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in docs if d["metadata"]["name"] == f"{RELEASE}-node-locks"}


@pytest.mark.parametrize(
    ("values", "on_nodes"),
    [
        ({}, False),
        ({"nodeLock": {"object": "lease"}}, False),
        ({"nodeLock": {"object": "node"}}, True),
        ({"nodeLock": {"key": "hami.io/mutex.lock"}}, True),
        ({"schedulerConfig": {"ascheduler": {"nodeLock": {"object": "node"}}}}, True),
        ({"nodeLock": {"object": "node"}, "binding": "bindrequest"}, True),
    ],
)
def test_patch_nodes_only_with_the_node_locks_on_nodes(
    tmp_path: Path, values: dict[str, Any], on_nodes: bool
) -> None:
    """No role of the chart writes a pod (but its binding, status, deletion) or a Node; the
    Node lock's ClusterRole (patch nodes) comes with the locks on Nodes, bound to the
    scheduler's account and the binder's when there is one."""
    docs = render(tmp_path, values)
    for role in (d for d in docs if d["kind"] == "ClusterRole"):
        for rule in role["rules"]:
            if "" not in rule.get("apiGroups", ()):
                continue
            if "pods" in rule["resources"]:
                assert not {"patch", "update", "*"} & set(rule["verbs"]), role["metadata"]
            if "nodes" in rule["resources"] and role["metadata"]["name"] != (
                f"{RELEASE}-node-locks"
            ):
                assert not {"patch", "update", "*"} & set(rule["verbs"]), role["metadata"]
    roles = node_lock_roles(docs)
    if not on_nodes:
        assert roles == {}
        return
    assert roles["ClusterRole"]["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["patch"]}
    ]
    subjects = {s["name"] for s in roles["ClusterRoleBinding"]["subjects"]}
    binder = values.get("binding") == "bindrequest"
    assert subjects == ({RELEASE, f"{RELEASE}-binder"} if binder else {RELEASE})


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        ({"nodeLock": {"policy": "sometimes"}}, "nodeLock.policy"),
        ({"nodeLock": {"key": "hami.io/mutex.lock", "object": "lease"}}, "nodeLock.object"),
        ({"binding": "later"}, "binding"),
        ({"replicas": 3, "leaderElection": {"enabled": False}}, "leaderElection.enabled"),
        ({"nodeLock": {"timeout": "soon"}}, "nodeLock.timeout"),
        ({"nodeLock": {"leaseGroups": -1}}, "nodeLock.leaseGroups"),
        ({"sharding": {"enabled": True}, "nodeLock": {"policy": "all"}}, "leaderElection.enabled"),
        ({"sharding": {"enabled": True}, "leaderElection": {"enabled": False}}, "nodeLock.policy"),
        ({"sharding": {"group": "Team_A"}}, "sharding.group"),
        ({"unknownValue": 1}, "unknownValue"),
    ],
)
def test_the_schema_refuses_bad_values(
    tmp_path: Path, values: dict[str, Any], problem: str
) -> None:
    done = helm(tmp_path, "template", RELEASE, str(CHART), values=values)
    assert done.returncode != 0
    assert problem.rsplit(".", 1)[-1] in done.stderr, done.stderr


async def apply(kube: KubeClient, doc: dict[str, Any]) -> None:
    prefix, plural, namespaced = {**KINDS, **MORE_KINDS}[doc["kind"]]
    meta = doc["metadata"]
    where = f"/namespaces/{meta.get('namespace', NAMESPACE)}" if namespaced else ""
    await kube.request(
        "PATCH",
        f"{prefix}{where}/{plural}/{meta['name']}",
        body=doc,
        params={"fieldManager": "ascheduler-helm-test", "force": "true"},
        content_type="application/apply-patch+yaml",
    )


async def test_the_rendered_chart_applies_and_its_service_account_schedules(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    nodes: NodeFactory,
    tmp_path: Path,
    cluster_objects: list[str],
) -> None:
    profile = f"{namespace}-charted"
    docs = render(
        tmp_path,
        {
            "schedulerName": profile,
            "nodeLock": {"policy": "all", "whenAlone": "lock"},
            "crds": {"podGroups": True},
        },
    )
    try:
        await kube.post("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    except ApiError as exc:
        if not exc.conflict:
            raise
    for doc in docs:
        await apply(kube, doc)
        if doc["kind"] in ("ClusterRole", "ClusterRoleBinding"):
            cluster_objects.append(
                f"/apis/rbac.authorization.k8s.io/v1/{doc['kind'].lower()}s/{doc['metadata']['name']}"
            )
    # Its ServiceAccount may not change a pod (spec or metadata) nor patch a Node.
    for verb in ("patch", "update"):
        assert not await allowed(kube, RELEASE, verb, "pods", namespace=namespace)
        assert not await allowed(kube, RELEASE, verb, "nodes", name="any")
    assert await allowed(kube, RELEASE, "patch", "pods", namespace=namespace, subresource="status")
    kubeconfig = await service_account_kubeconfig(kube, plane_state, RELEASE, tmp_path)
    config = config_of(docs)
    config["ascheduler"]["httpAddress"] = "127.0.0.1:0"
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(config))
    names = await nodes(FakeNodes(count=2, prefix=f"{namespace}-n"))
    record = plane.start_ascheduler(
        "ascheduler-charted",
        "--config",
        str(config_file),
        kubeconfig=str(kubeconfig),
        http_address=None,
    )
    try:
        await create_pods(
            kube, namespace, [pause_pod(f"p{i}", scheduler_name=profile) for i in range(3)]
        )
        placed = await wait_bound(kube, namespace, [f"p{i}" for i in range(3)], timeout=90)
        # Locked binds: their node's group's Lease (the default layout) made in the release
        # namespace, under the chart's RBAC.
        leases = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases"
        group = group_key(next(iter(placed.values())), DEFAULT_LEASE_GROUPS)

        async def lease_made() -> bool:
            try:
                await kube.get(f"{leases}/{lock_lease_name(group)}")
            except ApiError:
                return False
            return True

        assert await eventually(lease_made, what="the node group's lock Lease")
        assert set(placed.values()) <= set(names)
        # Its member Lease too (see nodeLock.whenAlone), deleted when it stops.
        assert [n for n in await lease_names(kube, leases) if n.startswith(MEMBER_PREFIX)]
        assert_authorized(await asyncio.to_thread(Path(record.log).read_text))
    finally:
        plane.stop_process(record)
    assert not [n for n in await lease_names(kube, leases) if n.startswith(MEMBER_PREFIX)]


async def lease_names(kube: KubeClient, leases: str) -> list[str]:
    return [str(item["metadata"]["name"]) for item in (await kube.get(leases))["items"]]


async def test_helm_install_and_uninstall_on_the_plane(
    plane: ControlPlane,
    plane_state: PlaneState,
    kube: KubeClient,
    namespace: str,
    tmp_path: Path,
    cluster_objects: list[str],
) -> None:
    """`helm install` itself (its own apply of the chart), then `helm uninstall`: the objects
    come and go with the release, the BindRequest CRD stays (kept on uninstall)."""
    release = f"{namespace}-rel"[:40]
    kubeconfig = ("--kubeconfig", str(plane_state.admin_kubeconfig))
    values = {"binding": "bindrequest", "replicas": 1}
    # The plane made the CRDs already (as a cluster with an earlier release would have them):
    # the release takes them over.
    done = await asyncio.to_thread(
        helm,
        tmp_path,
        "install",
        release,
        str(CHART),
        "--namespace",
        namespace,
        "--take-ownership",
        *kubeconfig,
        values=values,
    )
    assert done.returncode == 0, done.stderr
    for suffix in ("", "-binder", "-debug-reader"):
        cluster_objects.append(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{release}{suffix}")
    status = await asyncio.to_thread(
        helm, tmp_path, "status", release, "--namespace", namespace, "-o", "json", *kubeconfig
    )
    assert '"status":"deployed"' in status.stdout.replace(" ", "")
    apps = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    assert (await kube.get(f"{apps}/{release}"))["spec"]["replicas"] == 1
    await kube.get(f"{apps}/{release}-binder")
    configmap = await kube.get(f"/api/v1/namespaces/{namespace}/configmaps/{release}-config")
    config = yaml.safe_load(configmap["data"]["config.yaml"])
    assert config["ascheduler"]["binding"] == "bindrequest"
    assert validate(tmp_path, config).returncode == 0
    done = await asyncio.to_thread(
        helm, tmp_path, "uninstall", release, "--namespace", namespace, "--wait", *kubeconfig
    )
    assert done.returncode == 0, done.stderr
    with pytest.raises(ApiError) as gone:
        await kube.get(f"{apps}/{release}")
    assert gone.value.not_found
    crd = await kube.get(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/bindrequests.ascheduler.io"
    )
    assert crd["metadata"]["name"] == "bindrequests.ascheduler.io"
