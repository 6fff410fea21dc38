"""kube-scheduler as the oracle: one scenario, run once by kube-scheduler and once by
ascheduler on the same plane, compared pod by pod.

A `Scenario` names its nodes, the pods already placed (bound directly, as if by anyone), the
objects pods depend on (Services, ...), namespaces with their labels, and the pods to
schedule, in order. Names are logical: each run gets its own namespaces (`df-<id>-<run>-<ns>`)
and the scenario's nodes get a prefix, so runs never see each other's pods; node names in a
pod (nodeName, hostname selectors, matchFields) and namespaces in affinity terms are rewritten.

Each pod is created once the previous one is decided (bound, or `PodScheduled=False`), so
both schedulers see the same sequence. Controllers (a StatefulSet) are created with the run's
scheduler in their pod template, and the pods they make are decided in the order they come.
Where ascheduler breaks a tie (equal best scores, as its dry run finds them) differently
from kube-scheduler, the pod is moved to kube-scheduler's node before the next one, so both
runs go on from the same cluster. An `independent` scenario deletes each pod after its
decision: every pod meets the same base state (the randomised mode runs that way).

Compared per pod: bound or pending; the node, unless the scenario says a tie may place the
pod anywhere among equals (`ties`) or the dry run finds a tie; for pending pods the
`PodScheduled` reason and the whole message (preemption's part included). A tie is reported
as such, never skipped. In a `preemption` scenario a pod nominated to a node is followed until
it is bound, and the nominated node, the existing pods evicted for it and its first failure's
message are compared too. Scores too: every plugin's weighted score on every node and each
node's total, as kube-scheduler logs them for a pod's first attempt, against ascheduler's dry
run of that pod (`scores.py`).
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ascheduler.app import DRA_KINDS, STORAGE_KINDS, build_frameworks, taint_rules_path
from ascheduler.cache import Cache
from ascheduler.config import SchedulerConfig
from ascheduler.config import parse as parse_config
from ascheduler.devcluster import ControlPlane, versions
from ascheduler.devcluster.nodes import FakeNodes, fake_node_body, wait_nodes_ready
from ascheduler.devcluster.plane import FAKE_NODE_ANNOTATION
from ascheduler.features import Release, parse_gates
from ascheduler.kube import ApiError, KubeClient
from ascheduler.model import parse_node, parse_pod
from ascheduler.model.dra_taints import parse_device_taint_rule
from ascheduler.model.objects import parse_namespace, parse_selecting
from ascheduler.model.resources import RequestsRule
from ascheduler.plugins import IN_TREE
from tests.integration.differential.groups import compare_groups, pod_group_conditions
from tests.integration.differential.scores import (
    SCORE_LOG_ARGS,
    Expected,
    Scores,
    expected,
    first_attempts,
    log_size,
    mismatches,
)

Json = dict[str, Any]
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
KUBE = "diff-kube"
ASCHEDULER = "diff-asch"
DECISION_TIMEOUT = 30.0
#: How long pods a scenario expects to stay undecided are given after the others decided.
HELD_SETTLE = 5.0
#: How long a controller's pod found unschedulable is watched for a later decision: its
#: controller creates what it needs (a claim) just before it, and a scheduler may see the pod
#: first, find it unschedulable, and place it once the claim arrives.
CONTROLLED_SETTLE = 5.0
NO_DECISION = "(no decision)"
#: Reasons the harness gives a pod nobody decided.
UNDECIDED = (NO_DECISION, "(never created)")
#: Cluster-scoped storage kinds a scenario may have, and where they are created.
_STORAGE_PATHS: Mapping[str, str] = {
    "StorageClass": "/apis/storage.k8s.io/v1/storageclasses",
    "PersistentVolume": "/api/v1/persistentvolumes",
    "VolumeAttachment": "/apis/storage.k8s.io/v1/volumeattachments",
    "CSIDriver": "/apis/storage.k8s.io/v1/csidrivers",
}
CSINODES = "/apis/storage.k8s.io/v1/csinodes"
#: Cluster-scoped DRA kinds a scenario may have, and where they are created.
_DEVICE_PATHS: Mapping[str, str] = {
    "DeviceClass": "/apis/resource.k8s.io/v1/deviceclasses",
    "ResourceSlice": "/apis/resource.k8s.io/v1/resourceslices",
    "DeviceTaintRule": "/apis/resource.k8s.io/v1/devicetaintrules",
}
_CLAIM_KINDS = ("ResourceClaim", "ResourceClaimTemplate")
#: How long a preemptor has to be bound once nominated (its victims deleted and gone).
PREEMPTION_TIMEOUT = 30.0
#: How long a preemptor's FailedScheduling event may take to appear (Events wait while
#: binds are under way).
FIRST_FAILURE_TIMEOUT = 10.0
#: The priority classes scenarios name (created once per session; Never does not preempt).
PRIORITY_CLASSES: Mapping[str, tuple[int, str]] = {
    "diff-low": (10, "PreemptLowerPriority"),
    "diff-mid": (100, "PreemptLowerPriority"),
    "diff-high": (1000, "PreemptLowerPriority"),
    "diff-never": (1000, "Never"),
}


def plane_release() -> Release:
    """The release of the plane the scenarios run on (and of its kube-scheduler)."""
    return Release.parse(versions.release().kubernetes)


def fake_node(
    name: str,
    *,
    zone: str | None = None,
    labels: Mapping[str, str] | None = None,
    cpu: str = "4",
    memory: str = "16Gi",
    pods: int = 110,
    taints: Sequence[Mapping[str, str]] = (),
    images: Sequence[tuple[str, int]] = (),
    unschedulable: bool = False,
    extended: Mapping[str, str] | None = None,
    kubelet: bool = True,
) -> Json:
    """A logical node (named without the scenario's prefix). Without `kubelet`, kwok leaves
    it alone: it is Ready from its creation on, and a pod deleted there stays terminating
    for its grace period, as on a node whose kubelet is slow to stop it."""
    all_labels = dict(labels or {})
    if zone is not None:
        all_labels[ZONE] = zone
    shape = FakeNodes(
        1,
        cpu=cpu,
        memory=memory,
        pods=pods,
        labels=all_labels,
        taints=taints,
        unschedulable=unschedulable,
        extended=dict(extended or {}),
    )
    body = fake_node_body(name, shape)
    if images:
        body["status"]["images"] = [{"names": [n], "sizeBytes": size} for n, size in images]
    if not kubelet:
        del body["metadata"]["annotations"][FAKE_NODE_ANNOTATION]
        body["status"]["conditions"] = [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "held"}
        ]
    return body


def pause(
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    namespace: str = "default",
    cpu: str = "100m",
    memory: str = "128Mi",
    node: str | None = None,
    image: str = "registry.k8s.io/pause:3.10",
    extended: Mapping[str, str] | None = None,
    **spec: Any,
) -> Json:
    """A logical pod; `node` places it directly (an existing pod)."""
    resources: Json = {"requests": {"cpu": cpu, "memory": memory, **(extended or {})}}
    if extended:
        resources["limits"] = dict(extended)
    body: Json = {
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "spec": {
            "containers": [{"name": "main", "image": image, "resources": resources}],
            **spec,
        },
    }
    if node is not None:
        body["spec"]["nodeName"] = node
    return body


@dataclass
class Scenario:
    name: str
    nodes: Sequence[Json]
    pods: Sequence[Json]
    existing: Sequence[Json] = ()
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: {"default": {}})
    #: (collection under the namespace, e.g. "services", body with a logical namespace).
    objects: Sequence[tuple[str, Json]] = ()
    #: Cluster-scoped storage objects, by kind ("StorageClass", "PersistentVolume"): each
    #: run gets its own copies (`cluster_name`), and the names claims and volumes give
    #: each other, their namespaces and the hostnames in node affinities are rewritten.
    #: CSIDrivers keep their names (the drivers' names, as volumes and CSINodes write them).
    storage: Sequence[tuple[str, Json]] = ()
    #: DeviceClasses, ResourceSlices and DeviceTaintRules, by kind: each run gets its own
    #: copies (classes and pools named by `cluster_name`, claims' class names and rules' pools
    #: rewritten), slices' logical `nodeName` and hostnames made real.
    devices: Sequence[tuple[str, Json]] = ()
    #: CSINodes of logical nodes: driver -> `allocatable.count` (None: the driver, no count).
    csi_nodes: Mapping[str, Mapping[str, int | None]] = field(default_factory=dict)
    #: Controllers (collection as in `objects`, body) whose pods the scheduler under test
    #: places: their pod template gets its name, their claim templates the run's classes.
    controllers: Sequence[tuple[str, Json]] = ()
    #: The pods the controllers create (logical namespace "default"), decided in this order
    #: after the existing pods and before `pods`; no dry run for them (they are not ours to
    #: show it before they exist).
    controlled: Sequence[str] = ()
    #: Claims (logical namespace/name) the volume controller must have bound before the
    #: pods come.
    bound_claims: Sequence[str] = ()
    #: Pods a random tie-break may place on different nodes (bound-ness still compared).
    ties: frozenset[str] = frozenset()
    #: Each pod deleted after its decision (all meet the same base state).
    independent: bool = False
    #: Check every decision against a dry run of ascheduler's framework (ties found there),
    #: and the scores kube-scheduler logs against the dry run's.
    dry_run: bool = True
    #: A profile's `pluginConfig` (and other fields) both schedulers run this scenario with;
    #: None: the default profile.
    profile: Mapping[str, Any] | None = None
    #: `--feature-gates` both schedulers run this scenario with (a pair of its own, as for
    #: `profile`).
    feature_gates: str = ""
    #: Pods may preempt: a pod nominated to a node is waited for until it is bound there, and
    #: the nominated node and the existing pods evicted for it are compared too.
    preemption: bool = False
    #: Victims stay terminating (on a node without kubelet): a nominated preemptor is
    #: followed until its victims are going, not until bound, and the pods after it meet
    #: its nomination.
    victims_linger: bool = False
    #: Pods created all at once, then every decision awaited together (gangs: a member's
    #: decision waits for its siblings); no dry run. A pod still undecided after
    #: `DECISION_TIMEOUT` is "(no decision)" in both runs alike.
    together: bool = False
    #: With `together`: pods neither run should decide (held by PreEnqueue, or waiting on
    #: Permit for siblings that never come); they are read once the others are decided and
    #: `HELD_SETTLE` more seconds have passed, and agree when both are still undecided.
    held: frozenset[str] = frozenset()
    #: Existing pods' status, by pod name, written after the pod is placed (and, on a node
    #: kwok runs, once kwok has made it Running): an in-place resize as the kubelet reports
    #: it. Container statuses are merged by name, conditions by type, other fields set.
    statuses: Mapping[str, Json] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return hashlib.sha1(self.name.encode()).hexdigest()[:6]

    def decided(self) -> list[str]:
        """Every pod whose outcome the runs compare, in the order they are decided."""
        return [*self.controlled, *(raw["metadata"]["name"] for raw in self.pods)]


@dataclass(frozen=True)
class Outcome:
    node: str  # logical; "" when not bound
    reason: str = ""
    message: str = ""
    #: The dry run's best nodes (logical) before this pod, when asked for.
    best: frozenset[str] | None = None
    #: Preemption: the node the first failure nominated, and the existing pods gone since.
    nominated: str = ""
    victims: frozenset[str] = frozenset()
    #: The scores kube-scheduler should log for the pod's first attempt (the dry run's).
    scores: Expected | None = None

    @property
    def bound(self) -> bool:
        return bool(self.node)

    def describe(self) -> str:
        return f"on {self.node}" if self.node else f"{self.reason}: {self.message}"


class Runner:
    """Runs scenarios on a plane whose kube-scheduler and ascheduler serve `KUBE` and
    `ASCHEDULER`; a scenario with a profile of its own gets a pair of its own. `logs`: each
    kube-scheduler's log (by schedulerName), started with `SCORE_LOG_ARGS`."""

    def __init__(
        self,
        kube: KubeClient,
        plane: ControlPlane | None = None,
        logs: Mapping[str, str] | None = None,
    ) -> None:
        self.kube = kube
        self.plane = plane
        self.logs = dict(logs or {})

    @contextmanager
    def schedulers(self, s: Scenario) -> Iterator[tuple[str, str]]:
        """(kube-scheduler's, ascheduler's) schedulerName for the scenario: the shared pair,
        or, for a scenario with `profile`, a pair started with it (the same profile for
        both: kube-scheduler's file, ascheduler's `--config`) and stopped after."""
        if s.profile is None and not s.feature_gates:
            yield KUBE, ASCHEDULER
            return
        assert self.plane is not None, "a scenario with a profile needs the plane"
        kube_name, ours_name = f"{KUBE}-{s.id}", f"{ASCHEDULER}-{s.id}"
        profile = dict(s.profile or {})
        gates = [f"--feature-gates={s.feature_gates}"] if s.feature_gates else []
        kube = self.plane.start_kube_scheduler(
            name=kube_name,
            scheduler_name=kube_name,
            profile=profile,
            extra_args=[*gates, *SCORE_LOG_ARGS],
        )
        self.logs[kube_name] = kube.log
        config = self.plane.state_dir / f"{ours_name}.yaml"
        config.write_text(
            json.dumps(
                {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "KubeSchedulerConfiguration",
                    "profiles": [{"schedulerName": ours_name, **profile}],
                }
            )
        )
        ours = self.plane.start_ascheduler(
            ours_name, "--config", str(config), "--no-leader-elect", *gates
        )
        try:
            yield kube_name, ours_name
        finally:
            self.plane.stop_process(ours)
            self.plane.stop_process(kube)

    # -- names -------------------------------------------------------------------------------

    @staticmethod
    def node_name(s: Scenario, logical: str) -> str:
        return f"df{s.id}-{logical}"

    @staticmethod
    def logical_node(s: Scenario, real: str) -> str:
        return real.removeprefix(f"df{s.id}-")

    @staticmethod
    def namespace(s: Scenario, run: str, logical: str) -> str:
        return f"df-{s.id}-{run}-{logical}"[:63]

    @staticmethod
    def cluster_name(s: Scenario, run: str, logical: str) -> str:
        return f"df{s.id}-{run}-{logical}"

    def _hostnames(self, s: Scenario, terms: list[Json]) -> None:
        """Logical hostnames in node selector terms (or topology terms) made real."""
        nodes = {n["metadata"]["name"] for n in s.nodes}
        for term in terms:
            for key in ("matchExpressions", "matchLabelExpressions"):
                for expr in term.get(key) or []:
                    if expr.get("key") == HOSTNAME:
                        expr["values"] = [
                            self.node_name(s, v) if v in nodes else v
                            for v in expr.get("values") or []
                        ]

    def _rewrite_storage(self, s: Scenario, run: str, kind: str, obj: Json) -> Json:
        body = copy.deepcopy(obj)
        if kind == "CSIDriver":
            # Named by its driver, which volumes and CSINodes name as written: one run's at
            # a time (each run deletes its own).
            return body
        meta = body.setdefault("metadata", {})
        spec = body.setdefault("spec", {}) if kind != "StorageClass" else body
        if kind in ("StorageClass", "PersistentVolume"):
            meta["name"] = self.cluster_name(s, run, meta["name"])
        if kind == "StorageClass":
            self._hostnames(s, body.get("allowedTopologies") or [])
            return body
        if kind == "VolumeAttachment":
            meta["name"] = self.cluster_name(s, run, meta["name"])
            spec["nodeName"] = self.node_name(s, spec["nodeName"])
            source = spec.get("source") or {}
            if source.get("persistentVolumeName"):
                source["persistentVolumeName"] = self.cluster_name(
                    s, run, source["persistentVolumeName"]
                )
            return body
        if spec.get("storageClassName"):
            spec["storageClassName"] = self.cluster_name(s, run, spec["storageClassName"])
        if kind == "PersistentVolume":
            if spec.get("csi"):
                handle = spec["csi"]["volumeHandle"]
                spec["csi"]["volumeHandle"] = self.cluster_name(s, run, handle)
            ref = spec.get("claimRef")
            if ref:
                ref["namespace"] = self.namespace(s, run, ref.get("namespace", "default"))
            required = (spec.get("nodeAffinity") or {}).get("required") or {}
            self._hostnames(s, required.get("nodeSelectorTerms") or [])
        elif spec.get("volumeName"):
            spec["volumeName"] = self.cluster_name(s, run, spec["volumeName"])
        return body

    def _rewrite_device(self, s: Scenario, run: str, kind: str, obj: Json) -> Json:
        body = copy.deepcopy(obj)
        body["metadata"]["name"] = self.cluster_name(s, run, body["metadata"]["name"])
        if kind == "ResourceSlice":
            spec = body["spec"]
            spec["pool"]["name"] = self.cluster_name(s, run, spec["pool"]["name"])
            if spec.get("nodeName"):
                spec["nodeName"] = self.node_name(s, spec["nodeName"])
            self._hostnames(s, (spec.get("nodeSelector") or {}).get("nodeSelectorTerms") or [])
            for device in spec.get("devices") or []:  # perDeviceNodeSelection
                if device.get("nodeName"):
                    device["nodeName"] = self.node_name(s, device["nodeName"])
                terms = (device.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
                self._hostnames(s, terms)
        selector = body.get("spec", {}).get("deviceSelector") or {}
        if kind == "DeviceTaintRule" and selector.get("pool"):
            selector["pool"] = self.cluster_name(s, run, selector["pool"])
        return body

    def _rewrite_claim(self, s: Scenario, run: str, obj: Json) -> Json:
        """A ResourceClaim or ResourceClaimTemplate: its requests' classes made the run's."""
        body = copy.deepcopy(obj)
        body["metadata"].pop("namespace", None)
        spec = body["spec"]
        if body["kind"] == "ResourceClaimTemplate":
            spec = spec["spec"]
        for request in (spec.get("devices") or {}).get("requests") or []:
            for alternative in [request.get("exactly") or {}, *request.get("firstAvailable", [])]:
                if alternative.get("deviceClassName"):
                    alternative["deviceClassName"] = self.cluster_name(
                        s, run, alternative["deviceClassName"]
                    )
        return body

    def _rewrite_controller(self, s: Scenario, run: str, obj: Json, scheduler: str) -> Json:
        body = copy.deepcopy(obj)
        body["metadata"].pop("namespace", None)
        spec = body["spec"]
        template = spec["template"]
        template["spec"] = self._rewrite(s, run, {"spec": template["spec"]}, scheduler)["spec"]
        for claim_template in spec.get("volumeClaimTemplates") or []:
            claim_spec = claim_template.get("spec") or {}
            if claim_spec.get("storageClassName"):
                claim_spec["storageClassName"] = self.cluster_name(
                    s, run, claim_spec["storageClassName"]
                )
        return body

    def _rewrite(self, s: Scenario, run: str, obj: Json, scheduler: str | None) -> Json:
        if obj.get("kind") in _CLAIM_KINDS:
            return self._rewrite_claim(s, run, obj)
        if obj.get("kind") == "PersistentVolumeClaim":
            body = self._rewrite_storage(s, run, "PersistentVolumeClaim", obj)
            body["metadata"].pop("namespace", None)
            return body
        body = copy.deepcopy(obj)
        meta = body.setdefault("metadata", {})
        meta.pop("namespace", None)
        spec = body.get("spec")
        if body.get("kind", "Pod") != "Pod" or spec is None or "containers" not in spec:
            return body
        if scheduler is not None:
            spec["schedulerName"] = scheduler
        if spec.get("nodeName"):
            spec["nodeName"] = self.node_name(s, spec["nodeName"])
        nodes = {n["metadata"]["name"] for n in s.nodes}

        def names(values: list[str]) -> list[str]:
            return [self.node_name(s, v) if v in nodes else v for v in values]

        selector = spec.get("nodeSelector") or {}
        if selector.get(HOSTNAME) in nodes:
            selector[HOSTNAME] = self.node_name(s, selector[HOSTNAME])
        affinity = spec.get("affinity") or {}
        required = (affinity.get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        ) or {}
        for term in required.get("nodeSelectorTerms") or []:
            for expr in term.get("matchExpressions") or []:
                if expr.get("key") == HOSTNAME:
                    expr["values"] = names(expr.get("values") or [])
            for expr in term.get("matchFields") or []:
                expr["values"] = names(expr.get("values") or [])
        for kind in ("podAffinity", "podAntiAffinity"):
            block = affinity.get(kind) or {}
            terms = list(block.get("requiredDuringSchedulingIgnoredDuringExecution") or [])
            terms += [
                w.get("podAffinityTerm") or {}
                for w in block.get("preferredDuringSchedulingIgnoredDuringExecution") or []
            ]
            for term in terms:
                if term.get("namespaces"):
                    term["namespaces"] = [self.namespace(s, run, n) for n in term["namespaces"]]
        return body

    # -- lifecycle ---------------------------------------------------------------------------

    async def create_nodes(self, s: Scenario) -> None:
        names = []
        for raw in s.nodes:
            body = copy.deepcopy(raw)
            real = self.node_name(s, body["metadata"]["name"])
            body["metadata"]["name"] = real
            body["metadata"]["labels"][HOSTNAME] = real
            await self.kube.post("/api/v1/nodes", body)
            names.append(real)
        for logical, drivers in s.csi_nodes.items():
            real = self.node_name(s, logical)
            entries = []
            for driver, count in drivers.items():
                entry: Json = {"name": driver, "nodeID": real}
                if count is not None:
                    entry["allocatable"] = {"count": count}
                entries.append(entry)
            body = {"metadata": {"name": real}, "spec": {"drivers": entries}}
            await self.kube.post(CSINODES, body)
        await wait_nodes_ready(self.kube, names)

    async def delete_nodes(self, s: Scenario) -> None:
        paths = [f"{CSINODES}/{self.node_name(s, logical)}" for logical in s.csi_nodes]
        paths += [f"/api/v1/nodes/{self.node_name(s, raw['metadata']['name'])}" for raw in s.nodes]
        for path in paths:
            await self._delete(path)

    async def _delete(self, path: str) -> None:
        """DELETE `path`; already gone is fine."""
        try:
            await self.kube.request("DELETE", path)
        except ApiError as exc:
            if not exc.not_found:
                raise

    async def _delete_pod(self, namespace: str, name: str) -> None:
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        try:
            await self.kube.request("DELETE", path, params={"gracePeriodSeconds": 0})
        except ApiError as exc:
            if not exc.not_found:
                raise
        while True:
            try:
                await self.kube.get(path)
            except ApiError as exc:
                if exc.not_found:
                    return
                raise
            await asyncio.sleep(0.05)

    async def cleanup(self, s: Scenario, run: str) -> None:
        """Every pod of the run deleted (and gone), its namespaces and storage deleted."""
        for path, obj in s.controllers:
            ns = self.namespace(s, run, obj["metadata"].get("namespace", "default"))
            await self._delete(f"{self._collection(path, ns)}/{obj['metadata']['name']}")
        for kind, obj in s.storage:
            name = obj["metadata"]["name"]
            if kind != "CSIDriver":
                name = self.cluster_name(s, run, name)
            await self._delete(f"{_STORAGE_PATHS[kind]}/{name}")
        for kind, obj in s.devices:
            name = self.cluster_name(s, run, obj["metadata"]["name"])
            await self._delete(f"{_DEVICE_PATHS[kind]}/{name}")
        for logical in s.namespaces:
            ns = self.namespace(s, run, logical)
            listing = await self.kube.get(f"/api/v1/namespaces/{ns}/pods")
            for pod in listing.get("items", []):
                await self._delete_pod(ns, pod["metadata"]["name"])
            try:
                await self.kube.request("DELETE", f"/api/v1/namespaces/{ns}")
            except ApiError as exc:
                if not exc.not_found and exc.status != 409:  # gone, or already going
                    raise

    async def _decision(
        self,
        namespace: str,
        name: str,
        *,
        appears: bool = False,
        wait: float = DECISION_TIMEOUT,
        settle: float = 0.0,
    ) -> Outcome:
        """The pod's placement or PodScheduled=False (waiting up to `wait` seconds); with
        `appears`, the pod may not exist yet (a controller creates it). With `settle`, a pod
        found unschedulable is watched that many seconds more: a placement then wins, else
        the latest condition."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        pending: Outcome | None = None
        settled = 0.0
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        while True:
            try:
                pod = await self.kube.get(path)
            except ApiError as exc:
                if not (appears and exc.not_found):
                    raise
                if loop.time() > deadline:
                    return Outcome("", "(never created)", f"after {DECISION_TIMEOUT:.0f}s")
                await asyncio.sleep(0.05)
                continue
            if pod["spec"].get("nodeName"):
                return Outcome(str(pod["spec"]["nodeName"]))
            status = pod.get("status", {})
            for c in status.get("conditions") or []:
                if c.get("type") == "PodScheduled" and c.get("status") == "False":
                    pending = Outcome(
                        "",
                        str(c.get("reason", "")),
                        str(c.get("message", "")),
                        nominated=str(status.get("nominatedNodeName") or ""),
                    )
            if pending is not None:
                if not settled:
                    settled = loop.time() + settle
                if loop.time() >= settled:
                    return pending
            elif loop.time() >= deadline:
                return Outcome("", NO_DECISION, f"after {wait:.0f}s")
            await asyncio.sleep(0.05)

    async def write_status(self, s: Scenario, run: str, raw: Json, fragment: Json) -> None:
        """A status fragment (`Scenario.statuses`) for an existing pod, merged into what the
        API has."""
        name = raw["metadata"]["name"]
        ns = self.namespace(s, run, raw["metadata"].get("namespace", "default"))
        path = f"/api/v1/namespaces/{ns}/pods/{name}"
        node = next(n for n in s.nodes if n["metadata"]["name"] == raw["spec"]["nodeName"])
        kwok = FAKE_NODE_ANNOTATION in (node["metadata"].get("annotations") or {})
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DECISION_TIMEOUT
        while True:
            pod = await self.kube.get(path)
            status = pod.setdefault("status", {})
            if kwok and status.get("phase") != "Running":
                # kwok's pod-ready stage writes the container statuses once: after it.
                if loop.time() > deadline:
                    raise AssertionError(f"{path}: not Running after {DECISION_TIMEOUT}s")
                await asyncio.sleep(0.05)
                continue
            for key, value in fragment.items():
                if key in ("containerStatuses", "initContainerStatuses", "conditions"):
                    by = "type" if key == "conditions" else "name"
                    merged = {e[by]: e for e in status.get(key) or []}
                    for entry in value:
                        merged[entry[by]] = {**merged.get(entry[by], {}), **entry}
                    status[key] = list(merged.values())
                else:
                    status[key] = value
            try:
                await self.kube.put(f"{path}/status", pod)
                return
            except ApiError as exc:
                if exc.status != 409:  # written meanwhile: read it again
                    raise

    async def _first_failure(self, namespace: str, name: str, seen: Outcome) -> Outcome:
        """The pod's first failure as its earliest FailedScheduling event says (the condition
        polled may already show a later attempt: a preemptor retried while a victim is still
        terminating is told it is not eligible, in either scheduler, depending only on when
        kwok removes the victims); `seen` when no event comes in time."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + FIRST_FAILURE_TIMEOUT
        path = f"/apis/events.k8s.io/v1/namespaces/{namespace}/events"
        while True:
            found = [
                e
                for e in (await self.kube.get(path)).get("items") or []
                if e.get("reason") == "FailedScheduling"
                and (e.get("regarding") or {}).get("name") == name
            ]
            if found:
                first = min(found, key=lambda e: str(e.get("eventTime") or ""))
                return Outcome(
                    seen.node, seen.reason, str(first.get("note", "")), nominated=seen.nominated
                )
            if loop.time() >= deadline:
                return seen
            await asyncio.sleep(0.1)

    async def _preempted_member(
        self, s: Scenario, run: str, namespace: str, name: str, got: Outcome
    ) -> Outcome:
        """A member of a group in a `together` preemption scenario: where it ends up, the
        existing pods gone by then, and its first failure (when it had one)."""
        node, victims = got.node, frozenset[str]()
        if node or got.nominated:
            node, victims = await self._preempted(s, run, namespace, name)
        if got.reason:
            got = await self._first_failure(namespace, name, got)
        return Outcome(node, got.reason, got.message, nominated=got.nominated, victims=victims)

    async def _preempted(
        self, s: Scenario, run: str, namespace: str, name: str
    ) -> tuple[str, frozenset[str]]:
        """A nominated preemptor: the node it ends up bound to ("" if none in time) and the
        existing pods of the run that are gone or going by then."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + PREEMPTION_TIMEOUT
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        node = ""
        while loop.time() < deadline:
            node = str((await self.kube.get(path))["spec"].get("nodeName") or "")
            if node or (s.victims_linger and await self._gone(s, run)):
                break
            await asyncio.sleep(0.1)
        return node, await self._gone(s, run)

    async def _gone(self, s: Scenario, run: str) -> frozenset[str]:
        """The existing pods of the run that are gone or going."""
        gone = set()
        for raw in s.existing:
            ns = self.namespace(s, run, raw["metadata"].get("namespace", "default"))
            victim = raw["metadata"]["name"]
            try:
                body = await self.kube.get(f"/api/v1/namespaces/{ns}/pods/{victim}")
            except ApiError as exc:
                if not exc.not_found:
                    raise
                gone.add(victim)
                continue
            if body["metadata"].get("deletionTimestamp"):
                gone.add(victim)
        return frozenset(gone)

    @staticmethod
    def _collection(path: str, namespace: str) -> str:
        """`pods` or `services` (core), or `group/version/resource`, under a namespace."""
        parts = path.split("/")
        if len(parts) == 1:
            return f"/api/v1/namespaces/{namespace}/{path}"
        group, version, resource = parts
        return f"/apis/{group}/{version}/namespaces/{namespace}/{resource}"

    async def _settle_volumes(self, s: Scenario, run: str) -> None:
        """The scenario's volumes past `Pending`: both schedulers (and the dry run) pass
        over a volume the volume controller has not made `Available` yet, so a pod that
        came first would meet another cluster in each run."""
        loop = asyncio.get_running_loop()
        for kind, obj in s.storage:
            if kind != "PersistentVolume":
                continue
            name = self.cluster_name(s, run, obj["metadata"]["name"])
            url = f"{_STORAGE_PATHS[kind]}/{name}"
            deadline = loop.time() + DECISION_TIMEOUT
            while (await self.kube.get(url)).get("status", {}).get("phase", "Pending") == "Pending":
                if loop.time() > deadline:
                    raise AssertionError(f"{url}: still Pending after {DECISION_TIMEOUT}s")
                await asyncio.sleep(0.1)

    async def _settle_claims(self, s: Scenario, run: str) -> None:
        """The claims the scenario names bound by the volume controller."""
        loop = asyncio.get_running_loop()
        for key in s.bound_claims:
            logical_ns, name = key.split("/")
            ns = self.namespace(s, run, logical_ns)
            url = f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}"
            deadline = loop.time() + DECISION_TIMEOUT
            while (await self.kube.get(url)).get("status", {}).get("phase") != "Bound":
                if loop.time() > deadline:
                    raise AssertionError(f"{url}: not bound after {DECISION_TIMEOUT}s")
                await asyncio.sleep(0.1)

    async def _settle_budgets(self, s: Scenario, run: str) -> None:
        """PodDisruptionBudgets' status as kube-controller-manager computes it, once it has
        seen the existing pods (preemption reads `disruptionsAllowed` from it)."""
        loop = asyncio.get_running_loop()
        for path, obj in s.objects:
            if not path.endswith("poddisruptionbudgets"):
                continue
            ns = self.namespace(s, run, obj["metadata"].get("namespace", "default"))
            url = f"{self._collection(path, ns)}/{obj['metadata']['name']}"
            deadline = loop.time() + DECISION_TIMEOUT
            while True:
                body = await self.kube.get(url)
                status = body.get("status") or {}
                seen = status.get("observedGeneration", 0) >= body["metadata"].get("generation", 1)
                expected = status.get("expectedPods", 0)
                if seen and expected > 0 and status.get("currentHealthy", 0) == expected:
                    break
                if loop.time() > deadline:
                    raise AssertionError(
                        f"{url}: no settled status after {DECISION_TIMEOUT}s: {status}"
                    )
                await asyncio.sleep(0.1)

    async def _dry_run(
        self, s: Scenario, run: str, pod_body: Json
    ) -> tuple[frozenset[str], Expected]:
        """The best nodes ascheduler's framework finds for the pod on the current state, and
        the scores kube-scheduler should log for it there."""
        gates = parse_gates(s.feature_gates or "", plane_release())
        cache = Cache(gates)
        rule = RequestsRule.of(gates)
        for node in (await self.kube.get("/api/v1/nodes"))["items"]:
            cache.add_node(parse_node(node))
        for pod in (await self.kube.get("/api/v1/pods"))["items"]:
            info = parse_pod(pod, rule=rule)
            if info.assigned and not info.terminal:
                cache.add_pod(info)
        for ns in (await self.kube.get("/api/v1/namespaces"))["items"]:
            cache.objects.namespace_handler.on_add(parse_namespace(ns))
        for svc in (await self.kube.get("/api/v1/services"))["items"]:
            cache.objects.handlers["Service"].on_add(parse_selecting("Service", svc))
        for kind, path, parse in STORAGE_KINDS:
            for item in (await self.kube.get(path))["items"]:
                obj = parse(item)
                cache.storage.handlers[kind].on_add(obj)
                cache.storage_changed(kind, None, obj)
        for kind, path, parse in DRA_KINDS:
            for item in (await self.kube.get(path))["items"]:
                cache.resources.handlers[kind].on_add(parse(item))
        rules = taint_rules_path(gates)
        for item in (await self.kube.get(rules))["items"] if rules else ():
            cache.resources.handlers["DeviceTaintRule"].on_add(parse_device_taint_rule(item))
        config = SchedulerConfig()
        if s.profile is not None:
            document = {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [{"schedulerName": "dry-run", **s.profile}],
            }
            config = parse_config(document, IN_TREE)
        config = dataclasses.replace(config, features=gates)
        framework = next(iter(build_frameworks(config, IN_TREE, cache, None).values()))
        probe = copy.deepcopy(pod_body)
        probe["metadata"]["uid"] = "dry-run"
        table = cache.table
        dry = framework.dry_run(parse_pod(probe, rule=rule), table, post_filter=False)
        rows = dry.feasible[dry.total == dry.total.max()] if dry.feasible.size else dry.feasible
        best = frozenset(self.logical_node(s, table.names[r]) for r in rows.tolist())
        return best, expected(framework, dry, table, lambda n: self.logical_node(s, n))

    async def run(
        self,
        s: Scenario,
        run: str,
        scheduler: str,
        follow: Mapping[str, Outcome] | None = None,
    ) -> dict[str, Outcome]:
        """The scenario's pods as `scheduler` decides them: pod -> outcome. With `follow`
        (the other run's outcomes), a pod placed on a different node among equally good
        ones is moved to where the other run put it, so that one tie does not make every
        later pod meet a different cluster."""
        for logical, labels in s.namespaces.items():
            ns = self.namespace(s, run, logical)
            await self.kube.post(
                "/api/v1/namespaces", {"metadata": {"name": ns, "labels": dict(labels)}}
            )
        for kind, obj in s.storage:
            await self.kube.post(_STORAGE_PATHS[kind], self._rewrite_storage(s, run, kind, obj))
        for kind, obj in s.devices:
            await self.kube.post(_DEVICE_PATHS[kind], self._rewrite_device(s, run, kind, obj))
        for path, obj in s.objects:
            ns = self.namespace(s, run, obj["metadata"].get("namespace", "default"))
            await self.kube.post(self._collection(path, ns), self._rewrite(s, run, obj, None))
        await self._settle_volumes(s, run)
        await self._settle_claims(s, run)
        for raw in s.existing:
            ns = self.namespace(s, run, raw["metadata"].get("namespace", "default"))
            await self.kube.post(f"/api/v1/namespaces/{ns}/pods", self._rewrite(s, run, raw, None))
        for raw in s.existing:
            if raw["metadata"]["name"] in s.statuses:
                await self.write_status(s, run, raw, s.statuses[raw["metadata"]["name"]])
        await self._settle_budgets(s, run)
        outcomes: dict[str, Outcome] = {}
        for path, obj in s.controllers:
            ns = self.namespace(s, run, obj["metadata"].get("namespace", "default"))
            body = self._rewrite_controller(s, run, obj, scheduler)
            await self.kube.post(self._collection(path, ns), body)
        for name in s.controlled:
            got = await self._decision(
                self.namespace(s, run, "default"), name, appears=True, settle=CONTROLLED_SETTLE
            )
            node = self.logical_node(s, got.node) if got.node else ""
            outcomes[name] = Outcome(node, got.reason, got.message)
        if s.together:
            where = []
            for raw in s.pods:
                ns = self.namespace(s, run, raw["metadata"].get("namespace", "default"))
                body = self._rewrite(s, run, raw, scheduler)
                await self.kube.post(f"/api/v1/namespaces/{ns}/pods", body)
                where.append((ns, raw["metadata"]["name"]))
            deciding = [(ns, name) for ns, name in where if name not in s.held]
            decided = await asyncio.gather(*(self._decision(ns, n) for ns, n in deciding))
            await asyncio.sleep(HELD_SETTLE)
            decided += await asyncio.gather(
                *(self._decision(ns, n, wait=0.0) for ns, n in where if n in s.held)
            )
            deciding += [(ns, name) for ns, name in where if name in s.held]
            if s.preemption:
                # A group's preemption: each member followed until bound, then the victims
                # gone by then, and each member's first failure.
                decided = await asyncio.gather(
                    *(
                        self._preempted_member(s, run, ns, n, got)
                        for (ns, n), got in zip(deciding, decided, strict=True)
                    )
                )
            for (_, name), got in zip(deciding, decided, strict=True):
                node = self.logical_node(s, got.node) if got.node else ""
                nominated = self.logical_node(s, got.nominated) if got.nominated else ""
                outcomes[name] = Outcome(
                    node, got.reason, got.message, nominated=nominated, victims=got.victims
                )
            return outcomes
        for raw in s.pods:
            name = raw["metadata"]["name"]
            ns = self.namespace(s, run, raw["metadata"].get("namespace", "default"))
            body = self._rewrite(s, run, raw, scheduler)
            body["metadata"]["namespace"] = ns
            best, scores = await self._dry_run(s, run, body) if s.dry_run else (None, None)
            await self.kube.post(f"/api/v1/namespaces/{ns}/pods", body)
            got = await self._decision(ns, name)
            node, victims = got.node, frozenset[str]()
            if s.preemption and (node or got.nominated):
                # (a preemptor whose victims go fast may be bound before its failure is seen)
                node, victims = await self._preempted(s, run, ns, name)
            if s.preemption and got.reason:
                got = await self._first_failure(ns, name, got)
            outcome = Outcome(
                self.logical_node(s, node) if node else "",
                got.reason,
                got.message,
                best,
                self.logical_node(s, got.nominated) if got.nominated else "",
                victims,
                scores,
            )
            outcomes[name] = outcome
            if s.independent:
                await self._delete_pod(ns, name)
                continue
            other = follow.get(name) if follow is not None else None
            if (
                other is not None
                and best is not None
                and other.node
                and outcome.node
                and other.node != outcome.node
                and {other.node, outcome.node} <= best
            ):
                # A tie broken the other way: re-place it as the other run did, under another
                # name: kwok deletes a terminating pod by name, and its late delete of the old
                # pod would take a new one of the same name.
                await self._delete_pod(ns, name)
                moved = copy.deepcopy(body)
                moved["metadata"]["name"] = f"{name}-moved"
                moved["spec"]["nodeName"] = self.node_name(s, other.node)
                await self.kube.post(f"/api/v1/namespaces/{ns}/pods", moved)
        return outcomes


@dataclass
class Comparison:
    disagreements: list[str] = field(default_factory=list)
    ties: list[str] = field(default_factory=list)
    #: Pods both bound to the same node / both pending with the same message.
    same_node: int = 0
    same_pending: int = 0
    #: `scheduling.k8s.io` PodGroups whose scheduling condition both runs wrote alike.
    same_groups: int = 0
    #: Pods whose first attempt's scores were compared (nodes scored, over them all).
    scored_pods: int = 0
    scored_nodes: int = 0

    def report(self) -> str:
        lines = [f"DISAGREE {d}" for d in self.disagreements]
        lines += [f"tie      {t}" for t in self.ties]
        lines.append(
            f"agreed: {self.same_node} on the same node, {self.same_pending} pending with the "
            f"same message, {len(self.ties)} ties broken differently; scores of "
            f"{self.scored_pods} pods on {self.scored_nodes} nodes held to kube-scheduler's log; "
            f"{self.same_groups} PodGroups with the same status"
        )
        return "\n".join(lines)


def logical(s: Scenario, run: str, text: str) -> str:
    """`text` with the run's own names (namespaces, cluster-scoped objects) made logical."""
    return text.replace(f"df-{s.id}-{run}-", "").replace(f"df{s.id}-{run}-", "")


def compare(s: Scenario, kube: Mapping[str, Outcome], ours: Mapping[str, Outcome]) -> Comparison:
    out = Comparison()
    for name in s.decided():
        k, a = kube[name], ours[name]
        if name in s.held and k.reason == a.reason == NO_DECISION:
            out.same_pending += 1  # held in both, as expected
            continue
        if k.reason in UNDECIDED or a.reason in UNDECIDED:
            # Neither run decided it (a controller never made it, or no condition came): that
            # both "agree" says nothing.
            out.disagreements.append(
                f"{name}: kube-scheduler {k.describe()}; ascheduler {a.describe()}"
            )
            continue
        # The nominated node and the first failure are compared where both runs saw one.
        seen = bool(k.reason and a.reason)
        if s.preemption and (
            k.victims != a.victims
            or (seen and (k.nominated, k.reason, k.message) != (a.nominated, a.reason, a.message))
        ):
            out.disagreements.append(
                f"{name}: kube-scheduler nominated {k.nominated or '-'} evicting "
                f"{sorted(k.victims)} ({k.reason}: {k.message}); ascheduler nominated "
                f"{a.nominated or '-'} evicting {sorted(a.victims)} ({a.reason}: {a.message})"
            )
            continue
        if k.bound != a.bound:
            out.disagreements.append(
                f"{name}: kube-scheduler {k.describe()}; ascheduler {a.describe()}"
            )
            continue
        if not k.bound:
            if (k.reason, logical(s, "k", k.message)) != (a.reason, logical(s, "a", a.message)):
                out.disagreements.append(
                    f"{name}: kube-scheduler {k.describe()!r}; ascheduler {a.describe()!r}"
                )
            else:
                out.same_pending += 1
            continue
        if a.best is not None and a.node not in a.best:
            # ascheduler's decision is checked against its own framework on the API's state:
            # a node outside that set means its cache did not hold the cluster it saw.
            out.disagreements.append(
                f"{name}: ascheduler chose {a.node}, not among its best {sorted(a.best)} on "
                "the cluster as the API server has it"
            )
            continue
        best = k.best
        if best is not None and k.node not in best:
            out.disagreements.append(
                f"{name}: kube-scheduler chose {k.node}, not among ascheduler's best {sorted(best)}"
            )
            continue
        tie = name in s.ties or (best is not None and len(best) > 1)
        if k.node != a.node:
            if tie:
                out.ties.append(
                    f"{name}: kube-scheduler on {k.node}, ascheduler on {a.node}, equals "
                    f"{sorted(best) if best else '(declared by the scenario)'}"
                )
            else:
                out.disagreements.append(
                    f"{name}: kube-scheduler on {k.node}, ascheduler on {a.node}"
                )
        else:
            out.same_node += 1
    return out


async def differ(runner: Runner, s: Scenario) -> Comparison:
    """Both runs of a scenario on one set of nodes, cleaned up after; kube-scheduler's
    logged scores compared with the dry run's."""
    await runner.create_nodes(s)
    try:
        with runner.schedulers(s) as (kube_name, ours_name):
            log = runner.logs[kube_name]
            offset = log_size(log)
            kube = await runner.run(s, "k", kube_name)
            kube_groups = await pod_group_conditions(runner, s, "k")
            logged = first_attempts(log, offset, lambda n: runner.logical_node(s, n))
            await runner.cleanup(s, "k")
            ours = await runner.run(s, "a", ours_name, follow=kube)
            our_groups = await pod_group_conditions(runner, s, "a")
            await runner.cleanup(s, "a")
    finally:
        for run in ("k", "a"):
            await runner.cleanup(s, run)
        await runner.delete_nodes(s)
    comparison = compare(s, kube, ours)
    compare_groups(s, kube, kube_groups, our_groups, comparison)
    compare_scores(runner, s, kube, logged, comparison)
    return comparison


def compare_scores(
    runner: Runner,
    s: Scenario,
    kube: Mapping[str, Outcome],
    logged: Mapping[str, Scores],
    out: Comparison,
) -> None:
    """Per pod of kube-scheduler's run with a dry run, where its logged scores differ."""
    for raw in s.pods:
        name = raw["metadata"]["name"]
        want = kube[name].scores
        if want is None or want.sampled:
            continue
        key = f"{runner.namespace(s, 'k', raw['metadata'].get('namespace', 'default'))}/{name}"
        found = mismatches(name, want.scores, logged.get(key))
        out.disagreements += [f"SCORE {m}" for m in found]
        if want.scores.totals and not found:
            out.scored_pods += 1
            out.scored_nodes += len(want.scores.totals)
