"""Compact, immutable records parsed once from the API's JSON."""

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
]
