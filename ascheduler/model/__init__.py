"""Compact, immutable records parsed once from the API's JSON."""

from typing import Any

from ascheduler.model import dra
from ascheduler.model.affinity import NodeSelectorTerm, PreferredTerm, Taint, Toleration
from ascheduler.model.node import Node, parse_node
from ascheduler.model.pod import PodInfo, parse_pod, reparse_pod

__all__ = [
    "Node",
    "NodeSelectorTerm",
    "PodInfo",
    "PreferredTerm",
    "Taint",
    "Toleration",
    "dra",
    "parse_node",
    "parse_pod",
    "reparse_pod",
    "version_number",
]


def version_number(obj: Any) -> int:
    """An object's resourceVersion as a number, for "which of two copies is newer" (0 when
    it is not one)."""
    try:
        return int(obj.resource_version)
    except (TypeError, ValueError):
        return 0
