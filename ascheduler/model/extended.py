"""The per-container view of a pod's extended-resource requests that DRA-backed extended
resources need (DRAExtendedResource).

kube-scheduler names each device request of the claim it creates for such a pod after the
container and the resource's place among the container's requests (`container-<i>-request-<j>`:
`i` counts init containers first, then containers; `j` is the resource's index among the
container's request names, sorted), and decides which requests a container may reuse by whether
it is an init container that is not a sidecar. The pod's summed requests cannot tell that, so
the containers that ask for an extended resource are kept, with just what that needs. Pods
that ask for none (nearly all) keep nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ascheduler.model.fields import as_list, as_map
from ascheduler.model.quantity import QuantityError, parse_fraction

#: The implicit extended resource name of every DeviceClass: this prefix and its name.
DEVICE_CLASS_PREFIX: Final = "deviceclass.resource.kubernetes.io/"


def is_dra_extended_name(name: str) -> bool:
    """kube's `IsDRAExtendedResourceName`: an extended resource name (`vendor/name`, not a
    native `kubernetes.io/` one nor a quota `requests.` one), or a class's implicit name."""
    if name.startswith(DEVICE_CLASS_PREFIX):
        return True
    if "/" not in name or "kubernetes.io/" in name:
        return False
    return not name.startswith("requests.")


@dataclass(frozen=True, slots=True)
class ContainerRequests:
    """One container asking for an extended resource."""

    #: Its place in init containers followed by containers.
    index: int
    name: str
    #: An init container that is not a sidecar: it runs before the others and may reuse
    #: their devices.
    short_lived: bool
    #: Every resource name it requests, sorted.
    keys: tuple[str, ...]
    #: Its requests of extended resources, as whole numbers (a fraction is left out, as
    #: kube's `AsInt64` leaves it).
    extended: Mapping[str, int]


def parse_extended_containers(spec: Mapping[str, Any]) -> tuple[ContainerRequests, ...]:
    """The containers of `spec` that request an extended resource. What is malformed is
    skipped here: the parsing of the pod's requests reports it, with its path."""
    out: list[ContainerRequests] = []
    inits = as_list(spec.get("initContainers"), "spec.initContainers", [])
    mains = as_list(spec.get("containers"), "spec.containers", [])
    for index, raw in enumerate([*inits, *mains]):
        init = index < len(inits)
        path = f"spec.initContainers[{index}]" if init else f"spec.containers[{index - len(inits)}]"
        container = as_map(raw, path, [])
        requests = as_map(
            as_map(container.get("resources"), f"{path}.resources", []).get("requests"),
            f"{path}.resources.requests",
            [],
        )
        extended: dict[str, int] = {}
        for name, value in requests.items():
            if not is_dra_extended_name(str(name)):
                continue
            try:
                amount = parse_fraction(value)
            except QuantityError:
                continue
            if amount.denominator == 1:
                extended[str(name)] = int(amount)
        if not extended:
            continue
        out.append(
            ContainerRequests(
                index=index,
                name=str(container.get("name") or ""),
                short_lived=init and container.get("restartPolicy") != "Always",
                keys=tuple(sorted(str(k) for k in requests)),
                extended=extended,
            )
        )
    return tuple(out)
