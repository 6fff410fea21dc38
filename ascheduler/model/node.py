"""`Node`: what the scheduler needs of a node, parsed once from the API's JSON.

A node whose allocatable holds garbage does not crash anything: the bad resource counts as
zero (so nothing lands there for it) and the field is named in `errors`, which the cache logs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ascheduler.model.affinity import SpecError, Taint, parse_taint
from ascheduler.model.quantity import QuantityError, parse_resource


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    uid: str
    resource_version: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool
    #: cpu in millicores, `pods` as a count, everything else in base units.
    allocatable: Mapping[str, int]
    annotations: Mapping[str, str]
    errors: tuple[str, ...] = ()
    #: `status.images`: (names, sizeBytes) per image the node holds.
    images: tuple[tuple[tuple[str, ...], int], ...] = ()
    #: `status.declaredFeatures`, as listed (the kubelet keeps it sorted); NodeDeclaredFeatures
    #: reads it, and its queueing hint compares it as kube-scheduler does (`slices.Equal`).
    declared_features: tuple[str, ...] = ()
    #: `spec.podPreemptionPolicy.disableResizePreemption`: the owners that disabled
    #: preemption for deferred in-place resizes on this node (DeferredPodScheduling).
    disable_resize_preemption: tuple[str, ...] = ()
    #: The object as the API server sent it, kept only where something needs all of it
    #: (HTTP extenders that are not nodeCacheCapable are sent nodes); never compared.
    raw: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    @property
    def resize_preemption_disabled(self) -> bool:
        """A non-empty `disableResizePreemption`, as kube-scheduler tests it."""
        return bool(self.disable_resize_preemption)

    def spec_equal(self, other: Node) -> bool:
        """Everything but allocatable that filters and scores read."""
        return (
            self.labels == other.labels
            and self.taints == other.taints
            and self.unschedulable == other.unschedulable
        )


def parse_node(obj: Mapping[str, Any], *, keep_raw: bool = False) -> Node:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    errors: list[str] = []
    allocatable: dict[str, int] = {}
    raw_alloc = status.get("allocatable") or status.get("capacity") or {}
    for name, text in raw_alloc.items() if isinstance(raw_alloc, Mapping) else ():
        try:
            value = parse_resource(str(name), text)
        except QuantityError as exc:
            errors.append(f"status.allocatable.{name}: {exc}")
            continue
        allocatable[str(name)] = max(0, value)
    taints: list[Taint] = []
    for i, t in enumerate(spec.get("taints") or []):
        try:
            taints.append(parse_taint(t, f"spec.taints[{i}]"))
        except SpecError as exc:
            errors.append(str(exc))
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    images = []
    raw_images = status.get("images") or []
    for i, image in enumerate(raw_images if isinstance(raw_images, list) else ()):
        names = image.get("names") if isinstance(image, Mapping) else None
        size = image.get("sizeBytes", 0) if isinstance(image, Mapping) else None
        if (
            not isinstance(names, list)
            or not all(isinstance(n, str) for n in names)
            or not isinstance(size, int)
            or isinstance(size, bool)
        ):
            errors.append(f"status.images[{i}]: expected names (strings) and sizeBytes")
            continue
        images.append((tuple(names), max(0, size)))
    declared: list[str] = []
    raw_declared = status.get("declaredFeatures")
    if raw_declared is not None and not isinstance(raw_declared, list):
        errors.append(
            f"status.declaredFeatures: expected a list, got {type(raw_declared).__name__}"
        )
    for i, name in enumerate(raw_declared if isinstance(raw_declared, list) else ()):
        if isinstance(name, str):
            declared.append(name)
        else:
            errors.append(f"status.declaredFeatures[{i}]: expected a string, got {name!r}")
    policy = spec.get("podPreemptionPolicy")
    owners_seen: list[str] = []
    if policy is not None and not isinstance(policy, Mapping):
        errors.append(f"spec.podPreemptionPolicy: expected an object, got {type(policy).__name__}")
    elif policy is not None:
        owners = policy.get("disableResizePreemption")
        if owners is not None and not isinstance(owners, list):
            errors.append(
                "spec.podPreemptionPolicy.disableResizePreemption: expected a list, "
                f"got {type(owners).__name__}"
            )
        for i, owner in enumerate(owners if isinstance(owners, list) else ()):
            if isinstance(owner, str):
                owners_seen.append(owner)
            else:
                errors.append(
                    f"spec.podPreemptionPolicy.disableResizePreemption[{i}]: "
                    f"expected a string, got {owner!r}"
                )
    return Node(
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        labels={str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {},
        taints=tuple(taints),
        unschedulable=bool(spec.get("unschedulable")),
        allocatable=allocatable,
        annotations=(
            {str(k): str(v) for k, v in annotations.items()}
            if isinstance(annotations, Mapping)
            else {}
        ),
        errors=tuple(errors),
        images=tuple(images),
        declared_features=tuple(declared),
        disable_resize_preemption=tuple(owners_seen),
        raw=obj if keep_raw else None,
    )
