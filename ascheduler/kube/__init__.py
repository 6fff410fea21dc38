"""The kube client layer: raw JSON requests and errors mapped to one exception type."""

from ascheduler.kube.client import JSON, ApiError, KubeClient, Response, load_configuration

__all__ = ["JSON", "ApiError", "KubeClient", "Response", "load_configuration"]
