"""Storage objects as the volume plugins read them: PersistentVolumeClaims, PersistentVolumes,
StorageClasses, CSINodes, CSIDrivers and CSIStorageCapacities.

Parsing never raises. A field that cannot be read is recorded in the object's `errors` with
its path, and the plugins report the object by kind, name and that error on the pods that
depend on it (`persistentvolume "pv-1": spec.nodeAffinity.required...: ...`), while
everything else is scheduled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ascheduler.model.affinity import NodeSelectorTerm, SpecError, parse_term
from ascheduler.model.quantity import QuantityError, parse_value
from ascheduler.model.topology import NOTHING, LabelSelector, parse_selector
from ascheduler.model.volumes import AWS_EBS, GCE_PD, PORTWORX, string_field

#: The annotations kube-scheduler and the persistentvolume controller read and write.
SELECTED_NODE: Final = "volume.kubernetes.io/selected-node"
BIND_COMPLETED: Final = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER: Final = "pv.kubernetes.io/bound-by-controller"
STORAGE_PROVISIONER: Final = "volume.kubernetes.io/storage-provisioner"
BETA_STORAGE_PROVISIONER: Final = "volume.beta.kubernetes.io/storage-provisioner"
BETA_STORAGE_CLASS: Final = "volume.beta.kubernetes.io/storage-class"
MIGRATED_PLUGINS: Final = "storage.alpha.kubernetes.io/migrated-plugins"
#: StorageClass `volumeBindingMode`.
IMMEDIATE: Final = "Immediate"
WAIT_FOR_FIRST_CONSUMER: Final = "WaitForFirstConsumer"
#: A StorageClass whose provisioner is this has no dynamic provisioning.
NO_PROVISIONER: Final = "kubernetes.io/no-provisioner"
FILESYSTEM: Final = "Filesystem"


def _meta(obj: Any) -> Mapping[str, Any]:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    return meta if isinstance(meta, Mapping) else {}


def _section(obj: Any, key: str, errors: list[str]) -> Mapping[str, Any]:
    value = obj.get(key) if isinstance(obj, Mapping) else None
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        errors.append(f"{key}: expected an object")
        return {}
    return value


def _strings(raw: Any, path: str, errors: list[str]) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
        errors.append(f"{path}: expected a list of strings")
        return ()
    return tuple(raw)


def _string_map(raw: Any, path: str, errors: list[str]) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping) or not all(isinstance(v, str) for v in raw.values()):
        errors.append(f"{path}: expected a map of strings")
        return {}
    return {str(k): v for k, v in raw.items()}


def _storage(raw: Any, path: str, errors: list[str]) -> int | None:
    """A `storage` quantity in bytes; None when absent or unreadable (an error then)."""
    if raw is None:
        return None
    try:
        return parse_value(raw)
    except QuantityError as exc:
        errors.append(f"{path}: {exc}")
        return None


def _selector(raw: Any, path: str, errors: list[str]) -> LabelSelector | None:
    if raw is None:
        return None
    try:
        return parse_selector(raw, path)
    except SpecError as exc:
        errors.append(str(exc))
        return NOTHING


@dataclass(frozen=True, slots=True)
class ClaimRef:
    namespace: str
    name: str
    uid: str = ""


@dataclass(frozen=True, slots=True)
class VolumeClaim:
    """A PersistentVolumeClaim."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    deleting: bool
    #: The beta annotation `volume.beta.kubernetes.io/storage-class`, else
    #: `spec.storageClassName`; None: neither set, "": explicitly no class.
    storage_class: str | None
    volume_name: str
    phase: str
    access_modes: tuple[str, ...]
    volume_mode: str
    #: `spec.resources.requests.storage` in bytes (0 when absent).
    request: int
    selector: LabelSelector | None
    annotations: Mapping[str, str] = field(default_factory=dict)
    #: The uid of the controlling owner (a generic ephemeral volume's pod).
    owner_uid: str = ""
    errors: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def bound(self) -> bool:
        return bool(self.volume_name)

    @property
    def class_name(self) -> str:
        return self.storage_class or ""


@dataclass(frozen=True, slots=True)
class Volume:
    """A PersistentVolume."""

    name: str
    uid: str
    resource_version: str
    deleting: bool
    storage_class: str
    #: `spec.capacity.storage` in bytes (0 when absent).
    capacity: int
    access_modes: tuple[str, ...]
    volume_mode: str
    claim_ref: ClaimRef | None
    phase: str
    #: `spec.nodeAffinity.required.nodeSelectorTerms` (None: no node affinity).
    node_affinity: tuple[NodeSelectorTerm, ...] | None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    #: CSI: (driver, volumeHandle); ("", "") for other sources.
    csi_driver: str = ""
    csi_handle: str = ""
    #: The in-tree source's key in `spec` (gcePersistentDisk, awsElasticBlockStore...), "",
    #: and the id of the disk it names (pdName, volumeID, diskURI), "" for other sources.
    in_tree: str = ""
    in_tree_id: str = ""
    errors: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    resource_version: str
    provisioner: str
    binding_mode: str
    #: `allowedTopologies`: terms of (key, values) requirements; () when unrestricted.
    allowed_topologies: tuple[tuple[tuple[str, tuple[str, ...]], ...], ...] = ()
    errors: tuple[str, ...] = ()

    @property
    def delayed(self) -> bool:
        return self.binding_mode == WAIT_FOR_FIRST_CONSUMER


@dataclass(frozen=True, slots=True)
class CSINodeDriver:
    name: str
    node_id: str
    #: `allocatable.count`: how many volumes of this driver the node takes (None: no limit).
    count: int | None
    topology_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CSINode:
    name: str
    resource_version: str
    drivers: Mapping[str, CSINodeDriver] = field(default_factory=dict)
    errors: tuple[str, ...] = ()
    #: The `storage.alpha.kubernetes.io/migrated-plugins` annotation, as written.
    migrated_plugins: str = ""


@dataclass(frozen=True, slots=True)
class CSIDriver:
    name: str
    resource_version: str
    #: `spec.storageCapacity`: the driver publishes CSIStorageCapacity objects.
    storage_capacity: bool = False
    attach_required: bool = True
    #: `spec.preventPodSchedulingIfMissing` (1.36 on): with the VolumeLimitScaling gate,
    #: nodes whose CSINode does not list the driver take none of its volumes.
    prevent_scheduling_if_missing: bool = False


@dataclass(frozen=True, slots=True)
class StorageCapacity:
    """A CSIStorageCapacity."""

    namespace: str
    name: str
    resource_version: str
    storage_class: str
    node_topology: LabelSelector | None
    capacity: int | None
    maximum_volume_size: int | None
    errors: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class VolumeAttachment:
    """A VolumeAttachment: a CSI volume the attach/detach controller attached to a node."""

    name: str
    resource_version: str
    #: `spec.attacher`: the CSI driver that attached it.
    attacher: str
    node_name: str
    #: `spec.source.persistentVolumeName` ("" for an inline volume's attachment).
    volume_name: str
    errors: tuple[str, ...] = ()


def parse_claim(obj: Any) -> VolumeClaim:
    errors: list[str] = []
    meta = _meta(obj)
    spec = _section(obj, "spec", errors)
    status = _section(obj, "status", errors)
    annotations = _string_map(meta.get("annotations"), "metadata.annotations", errors)
    storage_class = spec.get("storageClassName")
    if storage_class is not None and not isinstance(storage_class, str):
        errors.append(f"spec.storageClassName: expected a string, got {storage_class!r}")
        storage_class = None
    if BETA_STORAGE_CLASS in annotations:  # the beta annotation wins, as Kubernetes reads it
        storage_class = annotations[BETA_STORAGE_CLASS]
    resources = spec.get("resources")
    requests = resources.get("requests") if isinstance(resources, Mapping) else None
    request = _storage(
        requests.get("storage") if isinstance(requests, Mapping) else None,
        "spec.resources.requests.storage",
        errors,
    )
    owner_uid = ""
    owners = meta.get("ownerReferences")
    for ref in owners if isinstance(owners, list) else ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            owner_uid = str(ref.get("uid", ""))
            break
    return VolumeClaim(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        deleting=bool(meta.get("deletionTimestamp")),
        storage_class=storage_class,
        volume_name=str(spec.get("volumeName") or ""),
        phase=str(status.get("phase") or "Pending"),
        access_modes=_strings(spec.get("accessModes"), "spec.accessModes", errors),
        volume_mode=str(spec.get("volumeMode") or FILESYSTEM),
        request=request or 0,
        selector=_selector(spec.get("selector"), "spec.selector", errors),
        annotations=annotations,
        owner_uid=owner_uid,
        errors=tuple(errors),
    )


#: In-tree sources a PersistentVolume may have (the first found is kept).
_IN_TREE: Final = (
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "azureDisk",
    "azureFile",
    "cinder",
    "vsphereVolume",
    "portworxVolume",
    "iscsi",
    "rbd",
    "local",
    "hostPath",
    "nfs",
)


#: The field naming an in-tree source's disk.
_IN_TREE_IDS: Final = {
    "gcePersistentDisk": "pdName",
    "awsElasticBlockStore": "volumeID",
    "azureDisk": "diskURI",
    "cinder": "volumeID",
    "portworxVolume": "volumeID",
}


def parse_volume(obj: Any) -> Volume:
    errors: list[str] = []
    meta = _meta(obj)
    spec = _section(obj, "spec", errors)
    status = _section(obj, "status", errors)
    capacity = spec.get("capacity")
    size = _storage(
        capacity.get("storage") if isinstance(capacity, Mapping) else None,
        "spec.capacity.storage",
        errors,
    )
    claim_ref = None
    ref = spec.get("claimRef")
    if isinstance(ref, Mapping):
        claim_ref = ClaimRef(
            str(ref.get("namespace", "")), str(ref.get("name", "")), str(ref.get("uid", ""))
        )
    elif ref is not None:
        errors.append("spec.claimRef: expected an object")
    node_affinity: tuple[NodeSelectorTerm, ...] | None = None
    affinity = spec.get("nodeAffinity")
    if affinity is not None:
        path = "spec.nodeAffinity.required.nodeSelectorTerms"
        required = affinity.get("required") if isinstance(affinity, Mapping) else None
        raw_terms = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
        if required is None and isinstance(affinity, Mapping):
            node_affinity = None
        elif not isinstance(raw_terms, list):
            errors.append(f"{path}: expected a list")
            node_affinity = ()
        else:
            terms = []
            for i, raw in enumerate(raw_terms):
                try:
                    terms.append(parse_term(raw, f"{path}[{i}]"))
                except SpecError as exc:
                    errors.append(str(exc))
            node_affinity = tuple(terms)
    csi = spec.get("csi")
    csi_driver = csi_handle = ""
    if isinstance(csi, Mapping):
        csi_driver = str(csi.get("driver", ""))
        csi_handle = str(csi.get("volumeHandle", ""))
    in_tree = next((k for k in _IN_TREE if spec.get(k) is not None), "")
    in_tree_id = ""
    source = spec.get(in_tree) if in_tree else None
    if isinstance(source, Mapping):
        id_key = _IN_TREE_IDS.get(in_tree, "")
        in_tree_id = str(source.get(id_key) or "") if id_key else ""
        if in_tree == "awsElasticBlockStore" and in_tree_id.startswith("aws://"):
            in_tree_id = in_tree_id.rsplit("/", 1)[-1]  # aws://zone/vol-1 -> vol-1
    return Volume(
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        deleting=bool(meta.get("deletionTimestamp")),
        storage_class=_volume_class(meta, spec),
        capacity=size or 0,
        access_modes=_strings(spec.get("accessModes"), "spec.accessModes", errors),
        volume_mode=str(spec.get("volumeMode") or FILESYSTEM),
        claim_ref=claim_ref,
        phase=str(status.get("phase") or "Pending"),
        node_affinity=node_affinity,
        labels=_string_map(meta.get("labels"), "metadata.labels", errors),
        annotations=_string_map(meta.get("annotations"), "metadata.annotations", errors),
        csi_driver=csi_driver,
        csi_handle=csi_handle,
        in_tree=in_tree,
        in_tree_id=in_tree_id,
        errors=tuple(errors),
    )


def _volume_class(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> str:
    annotations = meta.get("annotations")
    if isinstance(annotations, Mapping) and isinstance(annotations.get(BETA_STORAGE_CLASS), str):
        return str(annotations[BETA_STORAGE_CLASS])
    return str(spec.get("storageClassName") or "")


def parse_storage_class(obj: Any) -> StorageClass:
    errors: list[str] = []
    meta = _meta(obj)
    mode = obj.get("volumeBindingMode") if isinstance(obj, Mapping) else None
    if mode not in (None, IMMEDIATE, WAIT_FOR_FIRST_CONSUMER):
        errors.append(f"volumeBindingMode: unknown mode {mode!r}")
    topologies = []
    raw_topologies = obj.get("allowedTopologies") if isinstance(obj, Mapping) else None
    for i, term in enumerate(raw_topologies if isinstance(raw_topologies, list) else ()):
        expressions = term.get("matchLabelExpressions") if isinstance(term, Mapping) else None
        requirements = []
        for j, expr in enumerate(expressions if isinstance(expressions, list) else ()):
            path = f"allowedTopologies[{i}].matchLabelExpressions[{j}]"
            if not isinstance(expr, Mapping) or not isinstance(expr.get("key"), str):
                errors.append(f"{path}: expected a key and values")
                continue
            requirements.append(
                (str(expr["key"]), _strings(expr.get("values"), f"{path}.values", errors))
            )
        topologies.append(tuple(requirements))
    provisioner = obj.get("provisioner") if isinstance(obj, Mapping) else None
    return StorageClass(
        name=str(meta.get("name", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        provisioner=str(provisioner or ""),
        binding_mode=str(mode or IMMEDIATE),
        allowed_topologies=tuple(topologies),
        errors=tuple(errors),
    )


def parse_csi_node(obj: Any) -> CSINode:
    errors: list[str] = []
    meta = _meta(obj)
    spec = _section(obj, "spec", errors)
    drivers: dict[str, CSINodeDriver] = {}
    raw_drivers = spec.get("drivers")
    for i, raw in enumerate(raw_drivers if isinstance(raw_drivers, list) else ()):
        path = f"spec.drivers[{i}]"
        if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
            errors.append(f"{path}: expected an object with a name")
            continue
        count: int | None = None
        allocatable = raw.get("allocatable")
        if isinstance(allocatable, Mapping) and allocatable.get("count") is not None:
            value = allocatable["count"]
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                count = value
            else:
                errors.append(f"{path}.allocatable.count: expected a non-negative integer")
        drivers[raw["name"]] = CSINodeDriver(
            raw["name"],
            str(raw.get("nodeID", "")),
            count,
            _strings(raw.get("topologyKeys"), f"{path}.topologyKeys", errors),
        )
    annotations = meta.get("annotations")
    migrated = annotations.get(MIGRATED_PLUGINS) if isinstance(annotations, Mapping) else None
    return CSINode(
        str(meta.get("name", "")),
        str(meta.get("resourceVersion", "")),
        drivers,
        tuple(errors),
        migrated if isinstance(migrated, str) else "",
    )


def parse_csi_driver(obj: Any) -> CSIDriver:
    meta = _meta(obj)
    spec = obj.get("spec") if isinstance(obj, Mapping) else None
    spec = spec if isinstance(spec, Mapping) else {}
    attach = spec.get("attachRequired")
    return CSIDriver(
        str(meta.get("name", "")),
        str(meta.get("resourceVersion", "")),
        storage_capacity=spec.get("storageCapacity") is True,
        attach_required=attach is not False,
        prevent_scheduling_if_missing=spec.get("preventPodSchedulingIfMissing") is True,
    )


def parse_capacity(obj: Any) -> StorageCapacity:
    errors: list[str] = []
    meta = _meta(obj)
    raw = obj if isinstance(obj, Mapping) else {}
    return StorageCapacity(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        storage_class=str(raw.get("storageClassName") or ""),
        node_topology=_selector(raw.get("nodeTopology"), "nodeTopology", errors),
        capacity=_storage(raw.get("capacity"), "capacity", errors),
        maximum_volume_size=_storage(raw.get("maximumVolumeSize"), "maximumVolumeSize", errors),
        errors=tuple(errors),
    )


def parse_volume_attachment(obj: Any) -> VolumeAttachment:
    errors: list[str] = []
    meta = _meta(obj)
    spec = _section(obj, "spec", errors)
    source = _section(spec, "source", errors)
    return VolumeAttachment(
        name=str(meta.get("name", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        attacher=string_field(spec, "attacher", "spec", errors),
        node_name=string_field(spec, "nodeName", "spec", errors),
        volume_name=string_field(source, "persistentVolumeName", "spec.source", errors),
        errors=tuple(errors),
    )


def not_found(kind: str, name: str) -> str:
    """The API server's NotFound text, as kube-scheduler's listers give it
    (`persistentvolumeclaim "x" not found`, `storageclass.storage.k8s.io "x" not found`)."""
    return f'{kind} "{name}" not found'


#: In-tree plugins whose volumes kube-scheduler counts as their CSI driver's.
MIGRATED_PROVISIONERS: Final = {
    "kubernetes.io/aws-ebs": "ebs.csi.aws.com",
    "kubernetes.io/gce-pd": "pd.csi.storage.gke.io",
    "kubernetes.io/azure-disk": "disk.csi.azure.com",
    "kubernetes.io/cinder": "cinder.csi.openstack.org",
}
#: A PersistentVolume's in-tree source -> the CSI driver it migrated to.
MIGRATED_SOURCES: Final = {
    "awsElasticBlockStore": "ebs.csi.aws.com",
    "gcePersistentDisk": "pd.csi.storage.gke.io",
    "azureDisk": "disk.csi.azure.com",
    "cinder": "cinder.csi.openstack.org",
}
#: Inline in-tree disks kube-scheduler counts, -> the CSI driver each migrated to.
INLINE_DRIVERS: Final = {GCE_PD: "pd.csi.storage.gke.io", AWS_EBS: "ebs.csi.aws.com"}
#: Portworx: NodeVolumeLimits counts its in-tree volumes (PersistentVolumes, inline ones and
#: its provisioner's) as its CSI driver's from 1.36 wherever the node has a CSINode; in 1.35
#: only where the CSINode's migrated-plugins annotation lists it (not modelled: not counted).
PORTWORX_PLUGIN: Final = "kubernetes.io/portworx-volume"
PORTWORX_DRIVER: Final = "pxd.portworx.com"
PORTWORX_PROVISIONERS: Final = {**MIGRATED_PROVISIONERS, PORTWORX_PLUGIN: PORTWORX_DRIVER}
PORTWORX_SOURCES: Final = {**MIGRATED_SOURCES, "portworxVolume": PORTWORX_DRIVER}
PORTWORX_INLINE: Final = {**INLINE_DRIVERS, PORTWORX: PORTWORX_DRIVER}
