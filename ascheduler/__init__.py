"""ascheduler: an asyncio-native Kubernetes scheduler with kube-scheduler's semantics."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("ascheduler")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0"

__all__ = ["__version__"]
