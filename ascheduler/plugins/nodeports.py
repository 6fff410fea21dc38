"""NodePorts: a pod's host ports must be free on the node (same protocol and port, and the
same host IP or either side 0.0.0.0, conflict)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

import numpy as np

from ascheduler.framework import (
    SUCCESS,
    ClusterEvent,
    CycleState,
    ExplainFilterPlugin,
    FilterResult,
    Handle,
    NoArgs,
    NodeTable,
    Registration,
    Status,
    WhatIfFilterPlugin,
)
from ascheduler.model import PodInfo
from ascheduler.model.pod import HostPort

NAME: Final = "NodePorts"
REASON: Final = "node(s) didn't have free ports for the requested pod ports"
_ANY_IP: Final = "0.0.0.0"


def conflicts(wanted: HostPort, used: Mapping[HostPort, int]) -> bool:
    ip, proto, port = wanted
    for uip, uproto, uport in used:
        if uport == port and uproto == proto and (ip == uip or _ANY_IP in (ip, uip)):
            return True
    return False


class NodePorts(WhatIfFilterPlugin, ExplainFilterPlugin):
    name = NAME

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult | None:
        if not pod.host_ports:
            return None
        mask = np.zeros(nodes.n, dtype=np.bool_)
        for row, used in enumerate(nodes.ports):
            if used and any(conflicts(p, used) for p in pod.host_ports):
                mask[row] = True
        if not mask.any():
            return None
        return FilterResult.single(REASON, mask)

    def explain(self, state: CycleState, pod: PodInfo, nodes: NodeTable, row: int) -> list[str]:
        lines = []
        for wanted in pod.host_ports:
            ip, proto, port = wanted
            holders = sorted(
                other.key
                for other in nodes.pods(row).values()
                if any(conflicts(wanted, {used: 1}) for used in other.host_ports)
            )
            if holders or conflicts(wanted, nodes.ports[row]):
                lines.append(
                    f"host port {ip}:{port}/{proto} in use"
                    + (f" by pod {', '.join(holders)}" if holders else "")
                )
        return lines

    def filter_what_if(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        row: int,
        removed: Sequence[PodInfo],
        added: Sequence[PodInfo],
    ) -> Status:
        if not pod.host_ports:
            return SUCCESS
        used = dict(nodes.ports[row])
        for p in removed:
            for port in p.host_ports:
                left = used.get(port, 0) - 1
                if left > 0:
                    used[port] = left
                else:
                    used.pop(port, None)
        for p in added:
            for port in p.host_ports:
                used[port] = used.get(port, 0) + 1
        if used and any(conflicts(p, used) for p in pod.host_ports):
            return Status.unschedulable(REASON)
        return SUCCESS


def new(args: NoArgs, handle: Handle) -> NodePorts:
    return NodePorts()


REGISTRATION: Final = Registration(
    NAME,
    new,
    NoArgs,
    events=frozenset({ClusterEvent.NODE_ADD, ClusterEvent.ASSIGNED_POD_DELETE}),
    default_weight=1,
    kube_points=frozenset({"preFilter"}),
)
