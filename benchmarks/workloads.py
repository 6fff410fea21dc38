"""The workloads `python -m benchmarks run` knows, named as scheduler_perf names them.

A workload is its nodes (one or more groups of one shape each), its pods (built by index, so
every scheduler gets the same sequence) and ascheduler's flags for it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from ascheduler.devcluster.nodes import FakeNodes

#: The label of the nodes a run makes (its value: the run's id).
BENCH_LABEL = "ascheduler.io/benchmark"
GPU = "nvidia.com/gpu"
ZONE = "topology.kubernetes.io/zone"
ZONES = ("zone-a", "zone-b", "zone-c")


def pod(
    name: str,
    scheduler: str,
    *,
    requests: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
    affinity: dict[str, Any] | None = None,
    tolerations: list[dict[str, str]] | None = None,
    labels: dict[str, str] | None = None,
    **spec_fields: Any,
) -> dict[str, Any]:
    requests = {"cpu": "100m", "memory": "500Mi"} if requests is None else requests
    resources: dict[str, Any] = {"requests": requests}
    # The API server wants extended resources (not overcommittable) limited to their request.
    extended = {k: v for k, v in requests.items() if "/" in k}
    if extended:
        resources["limits"] = extended
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [
            {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": resources}
        ],
    }
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity:
        spec["affinity"] = affinity
    if tolerations:
        spec["tolerations"] = tolerations
    spec.update(spec_fields)
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"metadata": meta, "spec": spec}


def basic_pod(name: str, scheduler: str, index: int) -> dict[str, Any]:
    """SchedulingBasic's pod: cpu 100m, memory 500Mi, nothing else."""
    return pod(name, scheduler)


def gpu_pod(name: str, scheduler: str, index: int) -> dict[str, Any]:
    return pod(name, scheduler, requests={"cpu": "100m", "memory": "500Mi", GPU: "1"})


_GPU_TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}
_INFRA_TOLERATION = {
    "key": "dedicated",
    "operator": "Equal",
    "value": "infra",
    "effect": "NoSchedule",
}


def mixed_pod(name: str, scheduler: str, index: int) -> dict[str, Any]:
    """Ten pod shapes in turn: plain, zone selectors, required and preferred node affinity,
    tolerations of the infra taint, and GPU pods tolerating the GPU nodes' taint."""
    zone = ZONES[index % len(ZONES)]
    match index % 10:
        case 0 | 1 | 2 | 3:
            return pod(name, scheduler)
        case 4 | 5:
            return pod(name, scheduler, node_selector={ZONE: zone})
        case 6:
            others = [z for z in ZONES if z != zone]
            term = {"matchExpressions": [{"key": ZONE, "operator": "In", "values": others}]}
            preferred = {
                "weight": 10,
                "preference": {
                    "matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]
                },
            }
            affinity = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]},
                    "preferredDuringSchedulingIgnoredDuringExecution": [preferred],
                }
            }
            return pod(name, scheduler, affinity=affinity)
        case 7:
            return pod(
                name,
                scheduler,
                node_selector={"node-role": "infra"},
                tolerations=[_INFRA_TOLERATION],
            )
        case _:
            return pod(
                name,
                scheduler,
                requests={"cpu": "200m", "memory": "1Gi", GPU: "1"},
                tolerations=[_GPU_TOLERATION],
            )


# -- scheduler_perf's topology workloads (its templates, in one namespace: terms naming
# scheduler_perf's two namespaces select the same pods as terms naming the pod's own) ---------

HOSTNAME = "kubernetes.io/hostname"


def _spreading(action: str) -> Callable[[str, str, int], dict[str, Any]]:
    """Initial pods plain (pod-default), measured ones spread over zones with maxSkew 5."""

    def make(name: str, scheduler: str, index: int) -> dict[str, Any]:
        if name.startswith("init-"):
            return pod(name, scheduler)
        constraint = {
            "maxSkew": 5,
            "topologyKey": ZONE,
            "whenUnsatisfiable": action,
            "labelSelector": {"matchLabels": {"color": "blue"}},
        }
        return pod(
            name, scheduler, labels={"color": "blue"}, topologySpreadConstraints=[constraint]
        )

    return make


def _affinity_pod(
    kind: str, color: str, key: str, *, preferred: bool = False
) -> Callable[[str, str, int], dict[str, Any]]:
    term = {"labelSelector": {"matchLabels": {"color": color}}, "topologyKey": key}
    block = (
        {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "podAffinityTerm": term}
            ]
        }
        if preferred
        else {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    )

    def make(name: str, scheduler: str, index: int) -> dict[str, Any]:
        return pod(name, scheduler, labels={"color": color}, affinity={kind: block})

    return make


def zoned_nodes(count: int, zones: tuple[str, ...]) -> Callable[[str], list[FakeNodes]]:
    """scheduler_perf's node-default nodes with `topology.kubernetes.io/zone` given round
    robin over `zones`."""

    def groups(prefix: str) -> list[FakeNodes]:
        return [
            FakeNodes(
                count=count // len(zones) + (1 if i < count % len(zones) else 0),
                prefix=f"{prefix}-{zone}",
                labels={ZONE: zone},
            )
            for i, zone in enumerate(zones)
        ]

    return groups


def basic_nodes(count: int) -> Callable[[str], list[FakeNodes]]:
    """SchedulingBasic's nodes: cpu 4, memory 32Gi, 110 pods."""
    return lambda prefix: [FakeNodes(count=count, prefix=prefix)]


def gpu_nodes(count: int) -> Callable[[str], list[FakeNodes]]:
    return lambda prefix: [FakeNodes(count=count, prefix=prefix, extended={GPU: "8"})]


def mixed_nodes(count: int) -> Callable[[str], list[FakeNodes]]:
    """70% general nodes over three zones (a third with `disk=ssd`), 10% infra nodes tainted
    `dedicated=infra:NoSchedule`, 20% GPU nodes (8 GPUs, tainted `nvidia.com/gpu:NoSchedule`)."""

    def groups(prefix: str) -> list[FakeNodes]:
        general = count * 7 // 10
        infra = count // 10
        gpu = count - general - infra
        per_zone = general // len(ZONES)
        out = [
            FakeNodes(
                count=per_zone + (general - per_zone * len(ZONES) if i == 0 else 0),
                prefix=f"{prefix}-{zone}",
                labels={ZONE: zone, **({"disk": "ssd"} if i == 0 else {})},
            )
            for i, zone in enumerate(ZONES)
        ]
        out.append(
            FakeNodes(
                count=infra,
                prefix=f"{prefix}-infra",
                labels={ZONE: ZONES[0], "node-role": "infra"},
                taints=[{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}],
            )
        )
        out.append(
            FakeNodes(
                count=gpu,
                prefix=f"{prefix}-gpu",
                cpu="32",
                memory="256Gi",
                extended={GPU: "8"},
                labels={ZONE: ZONES[1], "accelerator": "nvidia"},
                taints=[{"key": GPU, "value": "present", "effect": "NoSchedule"}],
            )
        )
        return out

    return groups


# -- scheduler_perf's volume workloads ----------------------------------------------------------

#: scheduler_perf's SchedulingCSIPVs: every node attaches up to 39 volumes of this driver.
CSI_DRIVER = "ebs.csi.aws.com"
CSI_LIMIT = 39
#: The label on a run's volumes (PVs are cluster-wide; the run deletes its own by it).
VOLUME_RUN_LABEL = "ascheduler.io/bench-volumes"


def csi_nodes(count: int) -> Callable[[str], list[FakeNodes]]:
    """node-default nodes whose CSINode allows 39 `ebs.csi.aws.com` volumes (and the
    matching node allocatable scheduler_perf also sets)."""
    return lambda prefix: [
        FakeNodes(
            count=count,
            prefix=prefix,
            extended={f"attachable-volumes-csi-{CSI_DRIVER}": str(CSI_LIMIT)},
            csi_drivers={CSI_DRIVER: CSI_LIMIT},
        )
    ]


def claim_name(pod_name: str) -> str:
    return f"pvc-{pod_name}"


def volume_name(namespace: str, pod_name: str) -> str:
    return f"{namespace}-pv-{pod_name}"


def claimed_pod(name: str, scheduler: str, index: int) -> dict[str, Any]:
    """pod-default mounting its own claim (scheduler_perf's createPods with volume templates)."""
    volume = {"name": "vol", "persistentVolumeClaim": {"claimName": claim_name(name)}}
    return pod(name, scheduler, volumes=[volume])


def bound_claim(namespace: str, pod_name: str) -> dict[str, Any]:
    """pvc.yaml: ReadOnlyMany 1Gi, already bound to the pod's volume."""
    return {
        "metadata": {
            "name": claim_name(pod_name),
            "annotations": {"pv.kubernetes.io/bind-completed": "true"},
        },
        "spec": {
            "accessModes": ["ReadOnlyMany"],
            "resources": {"requests": {"storage": "1Gi"}},
            "volumeName": volume_name(namespace, pod_name),
        },
    }


def bound_volume(namespace: str, pod_name: str, claim_uid: str) -> dict[str, Any]:
    """pv-csi.yaml, bound to the pod's claim (its uid too, so the volume controller has
    nothing left to write)."""
    name = volume_name(namespace, pod_name)
    return {
        "metadata": {"name": name, "labels": {VOLUME_RUN_LABEL: namespace}},
        "spec": {
            "accessModes": ["ReadOnlyMany"],
            "capacity": {"storage": "1Gi"},
            "csi": {"driver": CSI_DRIVER, "volumeHandle": name},
            "persistentVolumeReclaimPolicy": "Retain",
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": namespace,
                "name": claim_name(pod_name),
                "uid": claim_uid,
            },
        },
    }


# -- scheduler_perf's DRA workloads -----------------------------------------------------------

#: scheduler_perf's test driver; its DeviceClass (`deviceclass.yaml`) selects every device of it.
DRA_DRIVER = "test-driver.cdi.k8s.io"
DRA_CLASS = "test-class"


def dra_class() -> dict[str, Any]:
    expression = f'device.driver == "{DRA_DRIVER}"'
    return {
        "metadata": {"name": DRA_CLASS},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def dra_slice(node: str, devices: int) -> dict[str, Any]:
    """scheduler_perf's `resourceSlice`: one pool per node, `devices` A100s."""
    return {
        "metadata": {"name": node},
        "spec": {
            "driver": DRA_DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 0, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"instance-{i}",
                    "attributes": {
                        "model": {"string": "A100"},
                        "family": {"string": "GPU"},
                        "driverVersion": {"version": "1.2.3"},
                        "dra.example.com/numa": {"int": i},
                    },
                    "capacity": {"memory": {"value": "1Gi"}},
                }
                for i in range(devices)
            ],
        },
    }


def device_claim_name(pod_name: str) -> str:
    return f"claim-{pod_name}"


def device_claim(pod_name: str) -> dict[str, Any]:
    """What `resourceclaimtemplate.yaml` makes for a pod: one device of the class."""
    request = {"deviceClassName": DRA_CLASS, "allocationMode": "ExactCount", "count": 1}
    return {
        "metadata": {"name": device_claim_name(pod_name)},
        "spec": {"devices": {"requests": [{"name": "req-0", "exactly": request}]}},
    }


def claiming_pod(name: str, scheduler: str, index: int) -> dict[str, Any]:
    """`pod-with-claim-template.yaml`'s pod, its claim already made (no requests)."""
    body = pod(name, scheduler, requests={})
    body["spec"]["resourceClaims"] = [
        {"name": "resource", "resourceClaimName": device_claim_name(name)}
    ]
    body["spec"]["containers"][0]["resources"]["claims"] = [{"name": "resource"}]
    return body


# -- scheduler_perf's DRA steady state ---------------------------------------------------------

#: The ResourceClaimTemplate of the steady-state pods (`resourceclaimtemplate.yaml`).
CLAIM_TEMPLATE = "test-claim-template"
#: The shared counters of a partitionable node (`resourceslice-partitionable-countersets.yaml`).
COUNTER_SET = "counter-set"


@dataclass(frozen=True)
class SteadyState:
    """scheduler_perf's steady state (`createPods` with `steadyState: true`): `pending` pods
    from the claim template at any time, each deleted once bound and another made in its
    place, for `seconds`; the resourceclaim controller makes each pod's claim and frees its
    devices once the pod is gone. Before, `init_claims` claims of `devices_per_claim`
    devices each are allocated to the nodes directly (`allocResourceClaims`), reserved for
    no pod, so they hold their devices throughout."""

    init_claims: int = 0
    pending: int = 10
    seconds: float = 30.0
    devices_per_claim: int = 1
    #: Each node's devices consume a counter set of their own (scheduler_perf's
    #: `Partitionable`): two devices of two counters each, in a slice beside the counters'.
    partitionable: bool = False


def template_pod(name: str, scheduler: str, index: int) -> dict[str, Any]:
    """`pod-with-claim-template.yaml`'s pod: its claim made from the template by the
    resourceclaim controller."""
    body = pod(name, scheduler, requests={})
    body["spec"]["resourceClaims"] = [
        {"name": "resource", "resourceClaimTemplateName": CLAIM_TEMPLATE}
    ]
    body["spec"]["containers"][0]["resources"]["claims"] = [{"name": "resource"}]
    return body


def claim_template(devices: int) -> dict[str, Any]:
    """`resourceclaimtemplate.yaml` (one device) or `resourceclaimtemplate-for-two-devices`."""
    request = {"deviceClassName": DRA_CLASS, "allocationMode": "ExactCount", "count": devices}
    return {
        "metadata": {"name": CLAIM_TEMPLATE},
        "spec": {"spec": {"devices": {"requests": [{"name": "req-0", "exactly": request}]}}},
    }


def counter_slice(node: str) -> dict[str, Any]:
    """The counter half of a partitionable node: four counters of 1 in one set."""
    counters = {f"counter{i}": {"value": "1"} for i in range(1, 5)}
    return _half(node, "counters", sharedCounters=[{"name": COUNTER_SET, "counters": counters}])


def _half(node: str, part: str, **spec: Any) -> dict[str, Any]:
    """One of the two slices of a partitionable node's pool."""
    pool = {"name": node, "generation": 0, "resourceSliceCount": 2}
    return {
        "metadata": {"name": f"{node}-{part}"},
        "spec": {"driver": DRA_DRIVER, "nodeName": node, "pool": pool, **spec},
    }


def partitioned_slice(node: str) -> dict[str, Any]:
    """The device half: `device-1` consumes counters 1 and 2, `device-2` counters 3 and 4."""

    def device(i: int) -> dict[str, Any]:
        used = {f"counter{c}": {"value": "1"} for c in (2 * i - 1, 2 * i)}
        return {
            "name": f"device-{i}",
            "consumesCounters": [{"counterSet": COUNTER_SET, "counters": used}],
        }

    return _half(node, "devices", devices=[device(1), device(2)])


# -- scheduler_perf's preemption workloads -----------------------------------------------------

#: The priority class of scheduler_perf's `pod-high-priority*` templates (priority 10; the API
#: server's Priority admission wants a class, not a bare `spec.priority`).
HIGH = "bench-high-priority"
PRIORITY_CLASSES = {HIGH: 10}


def _low_or_default(name: str, scheduler: str, index: int) -> dict[str, Any]:
    """`pod-low-priority` (900m, priority 0) for the initial pods, `pod-default` (100m) for
    the measured ones."""
    if name.startswith("init-"):
        return pod(name, scheduler, requests={"cpu": "900m", "memory": "500Mi"})
    return pod(name, scheduler)


def _high_priority(cpu: str) -> Callable[[str, str, int], dict[str, Any]]:
    def make(name: str, scheduler: str, index: int) -> dict[str, Any]:
        return pod(
            name, scheduler, requests={"cpu": cpu, "memory": "500Mi"}, priorityClassName=HIGH
        )

    return make


#: The gates both schedulers (and the apiserver) run gang workloads with: the Workload API
#: (`scheduling.k8s.io/v1alpha1`) and kube-scheduler's GangScheduling plugin.
GANG_GATES = "GenericWorkload=true,GangScheduling=true"
#: Those gates and that API version are 1.35's: from 1.36 a gang is a PodGroup object
#: (`scheduling.k8s.io/v1alpha2`, `v1beta1` in 1.37) and 1.37 has no GangScheduling gate.
GANG_RELEASES: Final = ("1.35",)
GANG_GROUP = "workers"


def gang_name(index: int, size: int) -> str:
    return f"gang-{index // size}"


def gang_workload(name: str, size: int) -> dict[str, Any]:
    """A Workload with one pod group, a gang of `size`."""
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name},
        "spec": {"podGroups": [{"name": GANG_GROUP, "policy": {"gang": {"minCount": size}}}]},
    }


def _gang_member(size: int, initial: int) -> Callable[[str, str, int], dict[str, Any]]:
    """SchedulingBasic's pod; from index `initial` on (the measured pods), a member of the
    gang `gang-K` of `size` pods, K counted from there."""

    def make(name: str, scheduler: str, index: int) -> dict[str, Any]:
        body = basic_pod(name, scheduler, index)
        if index >= initial:
            ref = {"name": gang_name(index - initial, size), "podGroup": GANG_GROUP}
            body["spec"]["workloadRef"] = ref
        return body

    return make


#: From 1.36 a gang (or a basic group) is a PodGroup object of `scheduling.k8s.io`
#: (`v1alpha2` in 1.36, `v1beta1` in 1.37: the release's `workload_api`) that pods name with
#: `spec.schedulingGroup`; scheduler_perf's podgroup families run 1.37 with this gate alone.
POD_GROUP_GATES = "GenericWorkload=true"
POD_GROUP_RELEASES: Final = ("1.37",)
GANG: Final = "gang"
BASIC: Final = "basic"


def pod_group(
    name: str, size: int, policy: str, api: str, priority_class: str = ""
) -> dict[str, Any]:
    """scheduler_perf's podgroup template: a `gang` of minCount `size`, or a `basic` group
    (of `priority_class`: the apiserver's Priority admission sets its `spec.priority`)."""
    scheduling = {"gang": {"minCount": size}} if policy == GANG else {"basic": {}}
    spec: dict[str, Any] = {"schedulingPolicy": scheduling}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": f"scheduling.k8s.io/{api}",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": spec,
    }


def _group_member(size: int, initial: int) -> Callable[[str, str, int], dict[str, Any]]:
    """scheduler_perf's gang-pod (cpu 100m, memory 100Mi); from index `initial` on, a member
    of the PodGroup `gang-K` of `size` pods, K counted from there."""

    def make(name: str, scheduler: str, index: int) -> dict[str, Any]:
        body = pod(name, scheduler, requests={"cpu": "100m", "memory": "100Mi"})
        if index >= initial:
            body["spec"]["schedulingGroup"] = {"podGroupName": gang_name(index - initial, size)}
        return body

    return make


def _gang_preemptor(
    size: int, initial: int, nodes: int, cpu: str
) -> Callable[[str, str, int], dict[str, Any]]:
    """scheduler_perf's GangPreemptionBasic: `pod-low-priority` (40m, no priority, a host
    port of `8000 + index % (initial / nodes)`, so each node holds as many) for the initial
    pods, then `gang-pod` (`cpu` each, high priority) in PodGroups of `size`."""
    per_node = max(initial // nodes, 1)

    def make(name: str, scheduler: str, index: int) -> dict[str, Any]:
        # As scheduler_perf's templates: no grace period, so a victim's deletion is final at
        # once (a benchmark plane runs no kubelet to confirm it).
        if index < initial:
            body = pod(
                name,
                scheduler,
                requests={"cpu": "40m", "memory": "100Mi"},
                terminationGracePeriodSeconds=0,
            )
            body["spec"]["containers"][0]["ports"] = [
                {"containerPort": 80, "hostPort": 8000 + index % per_node}
            ]
            return body
        body = pod(
            name,
            scheduler,
            requests={"cpu": cpu, "memory": "100Mi"},
            priorityClassName=HIGH,
            terminationGracePeriodSeconds=0,
        )
        body["spec"]["schedulingGroup"] = {"podGroupName": gang_name(index - initial, size)}
        return body

    return make


def _gang_preemption(nodes: int, initial: int, groups: int, size: int) -> Workload:
    return Workload(
        f"GangPreemptionBasic_{nodes}Nodes_{groups}PreemptorGang{'s' if groups > 1 else ''}_"
        f"{size}Pods_Evicting_{initial}InitPods",
        initial,
        groups * size,
        basic_nodes(nodes),
        _gang_preemptor(size, initial, nodes, "3970m"),
        gang_size=size,
        pod_group_policy=GANG,
        pod_group_priority_class=HIGH,
        feature_gates=POD_GROUP_GATES,
        releases=("1.37",),
        description=f"scheduler_perf's workload preemption: {nodes:,} nodes holding {initial:,} "
        f"low-priority pods (40m, spread evenly by host ports); {groups:,} high-priority gangs "
        f"of {size:,} pods of 3970m each, every member evicting a node's pods (workload-aware "
        "preemption, 1.37, GenericWorkload on in both schedulers)",
    )


#: scheduler_perf's steady state: a few pods pending, each replaced once bound.
REPLACE = "replace"


@dataclass(frozen=True)
class Workload:
    name: str
    initial_pods: int
    measured_pods: int
    nodes: Callable[[str], list[FakeNodes]]
    pod: Callable[[str, str, int], dict[str, Any]] = basic_pod
    ascheduler_args: tuple[str, ...] = ()
    description: str = ""
    #: scheduler_perf's `churn` (mode create): a pod of this shape every `churn_interval`
    #: seconds while the measured pods are scheduled (not measured themselves).
    churn: Callable[[str, str, int], dict[str, Any]] | None = None
    churn_interval: float = 0.2
    #: Every pod mounts a claim of its own, bound to a CSI volume of its own, both made
    #: before the pod (`bound_claim`, `bound_volume`).
    claims: bool = False
    #: Devices per node (a ResourceSlice each, and the DeviceClass): every pod has a
    #: ResourceClaim of its own for one, made before the pod (`device_claim`).
    devices_per_node: int = 0
    #: The measured pods come in gangs of this many (a Workload each, made before its pods;
    #: `_gang_member`), and both schedulers run with `feature_gates`.
    gang_size: int = 0
    #: The gangs are PodGroups of this policy (`gang` or `basic`, 1.36 on) rather than 1.35's
    #: Workloads.
    pod_group_policy: str = ""
    #: Their PriorityClass ("": none, priority 0).
    pod_group_priority_class: str = ""
    #: `--feature-gates` of the plane (apiserver, kube-scheduler) and of ascheduler.
    feature_gates: str = ""
    #: The releases (`1.35`) whose plane it runs on; empty: every release.
    releases: tuple[str, ...] = ()
    #: scheduler_perf's steady state, measured in mode `replace` only.
    steady_state: SteadyState | None = None

    def slices(self, node: str) -> list[dict[str, Any]]:
        """The node's ResourceSlices (a workload with `devices_per_node`)."""
        if self.steady_state is not None and self.steady_state.partitionable:
            return [counter_slice(node), partitioned_slice(node)]
        return [dra_slice(node, self.devices_per_node)]

    def modes(self) -> tuple[str, ...]:
        """The modes `--mode both` runs."""
        return (REPLACE,) if self.steady_state else ("steady", "backlog")

    def controllers(self) -> tuple[str, ...]:
        """kube-controller-manager's controllers the benchmark plane runs for it: as
        scheduler_perf, the resourceclaim controller and the garbage collector for claims
        made from templates."""
        if self.steady_state is None:
            return ()
        return ("resourceclaim-controller", "garbage-collector-controller")

    def gangs(self) -> int:
        return -(-self.measured_pods // self.gang_size) if self.gang_size else 0

    def node_count(self) -> int:
        return sum(g.count for g in self.nodes("n"))


def _pod_groups(name: str, nodes: int, groups: int, size: int, policy: str, about: str) -> Workload:
    """scheduler_perf's podgroup families: `groups` PodGroups of `policy` with `size` pods
    each, on `nodes` SchedulingBasic nodes; 1.37 with GenericWorkload. scheduler_perf makes
    no initial pods; here a plain one per five nodes is bound first, as in every workload,
    so each scheduler is running and synced before the measured pods come."""
    initial = max(nodes // 5, 10)
    return Workload(
        name,
        initial,
        groups * size,
        basic_nodes(nodes),
        _group_member(size, initial),
        gang_size=size,
        pod_group_policy=policy,
        feature_gates=POD_GROUP_GATES,
        releases=POD_GROUP_RELEASES,
        description=f"{about}{nodes:,} nodes, {initial:,} initial pods; {groups:,} PodGroups "
        f"({policy}{', minCount ' + format(size, ',') if policy == GANG else ''}) of {size:,} "
        "pods each, made before their pods (GenericWorkload on in both schedulers)",
    )


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload(
            "SchedulingBasic_500Nodes_1000Pods",
            500,
            1000,
            basic_nodes(500),
            description="500 nodes, 500 initial pods, 1,000 measured",
        ),
        Workload(
            "SchedulingBasic_5000Nodes_10000Pods",
            1000,
            10000,
            basic_nodes(5000),
            description="5,000 nodes, 1,000 initial pods, 10,000 measured",
        ),
        Workload(
            "Mixed_1000Nodes",
            1000,
            2000,
            mixed_nodes(1000),
            mixed_pod,
            description="1,000 nodes in zones, infra and GPU nodes with taints; pods with "
            "selectors, node affinity, tolerations and nvidia.com/gpu; "
            "1,000 initial, 2,000 measured",
        ),
        Workload(
            "GPU_NodeLocks_500Nodes",
            500,
            1000,
            gpu_nodes(500),
            gpu_pod,
            ascheduler_args=("--node-lock-policy", "devices"),
            description="500 nodes with 8 GPUs; every pod asks for one nvidia.com/gpu, so "
            "ascheduler locks each bind's node (policy devices); 500 initial, 1,000 measured",
        ),
        Workload(
            "TopologySpreading_5000Nodes_5000Pods",
            5000,
            5000,
            zoned_nodes(5000, ("moon-1", "moon-2", "moon-3")),
            _spreading("DoNotSchedule"),
            description="5,000 nodes in 3 zones; 5,000 plain initial pods, 5,000 measured "
            "with a DoNotSchedule zone spread (maxSkew 5)",
        ),
        Workload(
            "PreferredTopologySpreading_5000Nodes_5000Pods",
            5000,
            5000,
            zoned_nodes(5000, ("moon-1", "moon-2", "moon-3")),
            _spreading("ScheduleAnyway"),
            description="5,000 nodes in 3 zones; 5,000 plain initial pods, 5,000 measured "
            "with a ScheduleAnyway zone spread (maxSkew 5)",
        ),
        Workload(
            "SchedulingPodAntiAffinity_5000Nodes_2000Pods",
            1000,
            2000,
            basic_nodes(5000),
            _affinity_pod("podAntiAffinity", "green", HOSTNAME),
            description="5,000 nodes; 1,000 initial and 2,000 measured pods, each with "
            "required anti-affinity to the others per hostname",
        ),
        Workload(
            "SchedulingPodAffinity_5000Nodes_5000Pods",
            5000,
            5000,
            zoned_nodes(5000, ("zone1",)),
            _affinity_pod("podAffinity", "blue", ZONE),
            description="5,000 nodes in one zone; 5,000 initial and 5,000 measured pods, each "
            "with required affinity to the others per zone",
        ),
        Workload(
            "SchedulingPreferredPodAffinity_5000Nodes_5000Pods",
            5000,
            5000,
            basic_nodes(5000),
            _affinity_pod("podAffinity", "red", HOSTNAME, preferred=True),
            description="5,000 nodes; 5,000 initial and 5,000 measured pods, each preferring "
            "the others' hosts (weight 1)",
        ),
        Workload(
            "SchedulingCSIPVs_5000Nodes_5000Pods",
            5000,
            5000,
            csi_nodes(5000),
            claimed_pod,
            claims=True,
            description="5,000 nodes attaching up to 39 ebs.csi.aws.com volumes each; 5,000 "
            "initial and 5,000 measured pods, each with a claim bound to a CSI volume of its own",
        ),
        Workload(
            "SchedulingWithResourceClaimTemplate_5000Nodes_8Devices",
            5000,
            5000,
            basic_nodes(5000),
            claiming_pod,
            devices_per_node=8,
            description="5,000 nodes with 8 devices each (a ResourceSlice per node); 5,000 "
            "initial and 5,000 measured pods, each with its own claim for one device, made "
            "from the template's spec before the pod",
        ),
        Workload(
            "SchedulingWithResourceClaimTemplate_500Nodes_8Devices",
            1000,
            2000,
            basic_nodes(500),
            claiming_pod,
            devices_per_node=8,
            description="500 nodes with 8 devices each; 1,000 initial and 2,000 measured pods "
            "with a claim for one device each",
        ),
        *(
            Workload(
                f"SteadyStateResourceClaimTemplate_{fill}_500Nodes",
                0,
                10,
                basic_nodes(500),
                template_pod,
                devices_per_node=10,
                steady_state=SteadyState(init_claims=claims),
                description=f"scheduler_perf's {fill}_500nodes steady state: 500 nodes with "
                f"10 devices each, {claims:,} claims allocated before, 10 pods with a "
                "claim from the template for one device pending at a time, each deleted once "
                "bound and replaced",
            )
            for fill, claims in (("empty", 0), ("half", 2500), ("full", 4990))
        ),
        *(
            Workload(
                f"SteadyStatePartitionable_{fill}_500Nodes",
                0,
                10,
                basic_nodes(500),
                template_pod,
                devices_per_node=2,
                steady_state=SteadyState(
                    init_claims=claims, devices_per_claim=2, partitionable=True
                ),
                releases=("1.36", "1.37"),
                description=f"scheduler_perf's Partitionable {fill}_500nodes: 500 nodes, each "
                "a counter set of 4 and two devices of 2 counters each, "
                f"{claims} claims for both allocated before, 10 pods with a claim "
                "from the template for two devices pending at a time, each deleted once "
                "bound and replaced",
            )
            for fill, claims in (("empty", 0), ("half", 250), ("full", 490))
        ),
        Workload(
            "GangScheduling_5000Nodes_1000Gangs_3000Pods",
            1000,
            3000,
            basic_nodes(5000),
            _gang_member(3, 1000),
            gang_size=3,
            feature_gates=GANG_GATES,
            releases=GANG_RELEASES,
            description="5,000 nodes, 1,000 initial pods; 3,000 measured pods in 1,000 gangs "
            "of 3 (Workload API, GangScheduling on in both schedulers)",
        ),
        Workload(
            "GangScheduling_5000Nodes_1Gang_5000Pods",
            1000,
            5000,
            basic_nodes(5000),
            _gang_member(5000, 1000),
            gang_size=5000,
            feature_gates=GANG_GATES,
            releases=GANG_RELEASES,
            description="5,000 nodes, 1,000 initial pods; one gang of 5,000 measured pods "
            "(Workload API, GangScheduling on in both schedulers)",
        ),
        *(
            _pod_groups(
                f"PodGroup{kind}_5000Nodes_{groups}{noun}_{groups * size}Pods{per}",
                5000,
                groups,
                size,
                policy,
                f"scheduler_perf's podgroup {kind}: ",
            )
            for kind, policy, noun in (
                ("GangScheduling", GANG, "Gangs"),
                ("BasicScheduling", BASIC, "Groups"),
            )
            for groups, size, per in ((1000, 3, ""), (3, 1000, "_1000PerGroup"), (10, 5000, ""))
            if policy == GANG or size < 5000
        ),
        _gang_preemption(100, 1000, 1, 100),
        _gang_preemption(100, 1000, 10, 10),
        Workload(
            "PreemptionAsync_5000Nodes",
            20000,
            5000,
            basic_nodes(5000),
            _low_or_default,
            churn=_high_priority("3000m"),
            description="5,000 nodes full of 20,000 low-priority pods (900m); a high-priority "
            "pod (3000m, preempting three) every 200 ms while 5,000 default pods are measured",
        ),
        Workload(
            "Unschedulable_5000Nodes_10000Pods",
            100,
            10000,
            basic_nodes(5000),
            churn=_high_priority("9"),
            description="5,000 nodes, 100 initial pods; a high-priority pod no node can take "
            "(9 cpu) every 200 ms while 10,000 default pods are measured",
        ),
        Workload(
            "Smoke_Preemption_10Nodes",
            40,
            20,
            basic_nodes(10),
            _low_or_default,
            churn=_high_priority("3000m"),
            description="a tiny preemption size to check the churn works",
        ),
        Workload(
            "Smoke_CSIPVs_10Nodes",
            10,
            40,
            csi_nodes(10),
            claimed_pod,
            claims=True,
            description="a tiny size to check the volume workloads work",
        ),
        Workload(
            "Smoke_DRA_10Nodes",
            10,
            40,
            basic_nodes(10),
            claiming_pod,
            devices_per_node=8,
            description="a tiny size to check the DRA workloads work",
        ),
        Workload(
            "Smoke_SteadyState_DRA_10Nodes",
            0,
            4,
            basic_nodes(10),
            template_pod,
            devices_per_node=10,
            steady_state=SteadyState(init_claims=90, pending=4, seconds=8.0),
            description="a tiny size to check the DRA steady state works: 10 devices left",
        ),
        Workload(
            "Smoke_SteadyState_Partitionable_10Nodes",
            0,
            4,
            basic_nodes(10),
            template_pod,
            devices_per_node=2,
            steady_state=SteadyState(
                init_claims=5, pending=4, seconds=8.0, devices_per_claim=2, partitionable=True
            ),
            releases=("1.36", "1.37"),
            description="a tiny size to check the partitionable steady state works",
        ),
        Workload(
            "Smoke_Gangs_10Nodes",
            10,
            40,
            basic_nodes(10),
            _gang_member(4, 10),
            gang_size=4,
            feature_gates=GANG_GATES,
            releases=GANG_RELEASES,
            description="a tiny size to check the gang workloads work",
        ),
        _pod_groups("Smoke_PodGroups_10Nodes", 10, 10, 3, GANG, "a tiny size: "),
        Workload(
            "Smoke_10Nodes_40Pods",
            10,
            40,
            basic_nodes(10),
            description="a tiny size to check the harness works",
        ),
    )
}
