"""The one place that pins what the local control plane is built from.

A plane is built for one Kubernetes release: kube-apiserver, kube-scheduler,
kube-controller-manager and kubectl from that release of the `k8s.io/kubernetes` module, with
an etcd of the line that release is tested against (its `build/dependencies.yaml`; the
newest patch of that line) and kwok. Each release's binaries live in their own cache
directory, so planes of several releases can be built side by side and switched between
with `--kubernetes-version` (`ascheduler cluster build|up`) or `ASCHEDULER_KUBE_VERSION`
(the test suite, the demo and the benchmarks).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class Release:
    #: kube-apiserver and kube-scheduler, built from the `k8s.io/kubernetes` module.
    kubernetes: str
    #: etcd, built from `go.etcd.io/etcd/server/v3` through a wrapper `main` package.
    etcd: str
    #: kwok keeps fake nodes Ready and marks pods bound to them Running.
    kwok: str
    #: The API version that serves the Workload API when `GenericWorkload` is on.
    workload_api: str

    @property
    def minor(self) -> str:
        """`v1.37.2` -> `1.37`."""
        major, minor, _patch = self.kubernetes.lstrip("v").split(".")
        return f"{major}.{minor}"


#: The releases a plane can be built for, by minor version.
RELEASES: Final = {
    "1.35": Release("v1.35.4", etcd="v3.6.16", kwok="v0.8.0", workload_api="v1alpha1"),
    "1.36": Release("v1.36.3", etcd="v3.6.16", kwok="v0.8.0", workload_api="v1alpha2"),
    "1.37": Release("v1.37.2", etcd="v3.7.3", kwok="v0.8.0", workload_api="v1beta1"),
}
#: The release a plane is built for when none is named.
DEFAULT_RELEASE: Final = "1.37"
#: Names the release for the tests, the demo and the benchmarks (`1.36`, `v1.36.3`).
RELEASE_ENV: Final = "ASCHEDULER_KUBE_VERSION"

#: helm, built from `helm.sh/helm/v4` (the chart in deploy/helm is linted, rendered and installed
#: with it); one for every release.
HELM_VERSION: Final = "v4.3.1"

# The default release's pins, by their old names.
KUBERNETES_VERSION: Final = RELEASES[DEFAULT_RELEASE].kubernetes
ETCD_VERSION: Final = RELEASES[DEFAULT_RELEASE].etcd
KWOK_VERSION: Final = RELEASES[DEFAULT_RELEASE].kwok

_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")


class UnsupportedRelease(ValueError):
    """A Kubernetes version no plane is built for."""


def release(version: str | None = None) -> Release:
    """The release `version` names (`1.36`, `1.36.3`, `v1.36.3`); with None, the one
    `$ASCHEDULER_KUBE_VERSION` names, else the default. A patch other than the pinned one
    is refused: the plane is built from exactly the pinned patch."""
    if version is None:
        version = os.environ.get(RELEASE_ENV) or DEFAULT_RELEASE
    match = _VERSION.fullmatch(version.strip())
    supported = ", ".join(r.kubernetes for r in RELEASES.values())
    if match is None:
        raise UnsupportedRelease(f"{version!r} is not a Kubernetes version (one of {supported})")
    found = RELEASES.get(f"{match[1]}.{match[2]}")
    if found is None or (match[3] is not None and found.kubernetes != f"v{match[0].lstrip('v')}"):
        raise UnsupportedRelease(
            f"Kubernetes {version} is not supported by the local plane (one of {supported})"
        )
    return found
