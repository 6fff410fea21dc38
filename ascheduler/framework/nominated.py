"""Pods nominated to nodes: preemptors waiting for their victims to go, and pods whose
`status.nominatedNodeName` says where a scheduler meant them to run.

kube-scheduler's PodNominator: a later cycle that filters a node counts the pods nominated to
it with a priority at least its own pod's (so a lower-priority pod does not take the room a
preemption made), and a preemption clears the nominations of lower-priority pods to the node
it empties.
"""

from __future__ import annotations

from ascheduler.model import PodInfo


class Nominator:
    def __init__(self) -> None:
        self._node_of: dict[str, str] = {}
        self._on: dict[str, dict[str, PodInfo]] = {}

    def nominate(self, pod: PodInfo, node: str) -> None:
        """`pod` (pending) is meant for `node`; an earlier nomination of it is replaced."""
        self.forget(pod.uid)
        if not node:
            return
        self._node_of[pod.uid] = node
        self._on.setdefault(node, {})[pod.uid] = pod

    def forget(self, uid: str) -> None:
        node = self._node_of.pop(uid, None)
        if node is None:
            return
        pods = self._on.get(node)
        if pods is not None:
            pods.pop(uid, None)
            if not pods:
                del self._on[node]

    def node_of(self, uid: str) -> str:
        return self._node_of.get(uid, "")

    def on_node(self, node: str) -> list[PodInfo]:
        return list(self._on.get(node, {}).values())

    def nodes(self) -> list[tuple[str, list[PodInfo]]]:
        """(node, pods nominated to it) for every node with any."""
        return [(node, list(pods.values())) for node, pods in self._on.items()]

    def __len__(self) -> int:
        return len(self._node_of)
