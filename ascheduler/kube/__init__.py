"""The kube client layer: raw JSON requests, and every failure classified once (`KubeError`:
transient, conflict or permanent)."""

from ascheduler.kube.client import (
    JSON,
    ApiError,
    ConnectionFailed,
    CredentialsFailed,
    Failure,
    KubeClient,
    KubeError,
    Response,
    load_configuration,
)

__all__ = [
    "JSON",
    "ApiError",
    "ConnectionFailed",
    "CredentialsFailed",
    "Failure",
    "KubeClient",
    "KubeError",
    "Response",
    "load_configuration",
]
