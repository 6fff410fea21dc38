"""The one place that pins what the local control plane is built from.

Change a version here and the next `ascheduler cluster build` builds it into its own cache
directory; binaries of other versions stay where they are.
"""

from __future__ import annotations

from typing import Final

#: kube-apiserver and kube-scheduler, built from the `k8s.io/kubernetes` module.
KUBERNETES_VERSION: Final = "v1.35.4"
#: etcd, built from `go.etcd.io/etcd/server/v3` through a wrapper `main` package.
ETCD_VERSION: Final = "v3.6.16"
#: kwok keeps fake nodes Ready and marks pods bound to them Running.
KWOK_VERSION: Final = "v0.8.0"
#: helm, built from `helm.sh/helm/v4` (the chart in deploy/helm is linted, rendered and installed
#: with it).
HELM_VERSION: Final = "v4.3.1"
