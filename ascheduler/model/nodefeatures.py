"""Node declared features: which of them a pod needs where it runs, read from its spec.

A node lists in `status.declaredFeatures` the features its kubelet supports; a pod whose spec
uses such a feature may only run on a node that declares it (component-helpers'
`nodedeclaredfeatures`, whose `InferForScheduling` this mirrors). Of the features that
library registers, only three can be required at scheduling time (the others infer only for
updates and answer false here):

* `RestartAllContainersOnContainerExits`: a container or init container has a
  `restartPolicyRules[]` entry whose `action` is `RestartAllContainers`;
* `UserNamespacesHostNetworkSupport`: `hostNetwork: true` with `hostUsers: false`;
* `VolumeBindMountOptions`: a container, init container or ephemeral container mounts a
  volume with non-empty `bindMountOptions`.

Which of these a release's library knows is the plugin's business
(`ascheduler.plugins.nodedeclaredfeatures`): the pod records every one its spec uses, so one
parse serves every release. Each is a bit, so a node's declared set and a pod's required set
are integers and the Filter is one numpy expression over the node table's column.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from ascheduler.model.fields import as_list, as_map

RESTART_ALL_CONTAINERS: Final = "RestartAllContainersOnContainerExits"
USER_NAMESPACES_HOST_NETWORK: Final = "UserNamespacesHostNetworkSupport"
VOLUME_BIND_MOUNT_OPTIONS: Final = "VolumeBindMountOptions"

#: The features a pod can require at scheduling time, each with its bit, in the library's
#: order (sorted by name, as `ndf.New` sorts its registry).
BITS: Final[Mapping[str, int]] = {
    name: 1 << i
    for i, name in enumerate(
        sorted((RESTART_ALL_CONTAINERS, USER_NAMESPACES_HOST_NETWORK, VOLUME_BIND_MOUNT_OPTIONS))
    )
}


def mask(names: Iterable[str]) -> int:
    """The bits of the schedulable features among `names` (others are none of ours)."""
    out = 0
    for name in names:
        out |= BITS.get(name, 0)
    return out


def names_of(bits: int) -> list[str]:
    """The feature names of `bits`, sorted."""
    return [name for name, bit in BITS.items() if bits & bit]


def _mounts_bind_options(container: Mapping[str, Any], path: str, errors: list[str]) -> bool:
    for j, raw in enumerate(as_list(container.get("volumeMounts"), f"{path}.volumeMounts", errors)):
        mount = as_map(raw, f"{path}.volumeMounts[{j}]", errors)
        options = mount.get("bindMountOptions")
        if options:
            if not isinstance(options, list):
                errors.append(
                    f"{path}.volumeMounts[{j}].bindMountOptions: expected a list, got "
                    f"{type(options).__name__}"
                )
            return True
    return False


def _restarts_all(container: Mapping[str, Any], path: str, errors: list[str]) -> bool:
    rules = as_list(container.get("restartPolicyRules"), f"{path}.restartPolicyRules", errors)
    for k, raw in enumerate(rules):
        rule = as_map(raw, f"{path}.restartPolicyRules[{k}]", errors)
        if rule.get("action") == "RestartAllContainers":
            return True
    return False


def infer_for_scheduling(spec: Mapping[str, Any], errors: list[str]) -> frozenset[str]:
    """The features `spec` requires of its node, by any release's rules; malformed parts
    are named in `errors` (and require nothing)."""
    needs: set[str] = set()
    groups = {
        group: [
            (i, as_map(c, f"spec.{group}[{i}]", []))
            for i, c in enumerate(as_list(spec.get(group), f"spec.{group}", []))
        ]
        for group in ("containers", "initContainers", "ephemeralContainers")
    }
    for group in ("containers", "initContainers"):
        if any(_restarts_all(c, f"spec.{group}[{i}]", errors) for i, c in groups[group]):
            needs.add(RESTART_ALL_CONTAINERS)
            break
    if spec.get("hostNetwork") is True and spec.get("hostUsers") is False:
        needs.add(USER_NAMESPACES_HOST_NETWORK)
    for group, containers in groups.items():
        if any(_mounts_bind_options(c, f"spec.{group}[{i}]", errors) for i, c in containers):
            needs.add(VOLUME_BIND_MOUNT_OPTIONS)
            break
    return frozenset(needs)
