"""The re-validation view: each pod counted once against the node's allocatable."""

from __future__ import annotations

from typing import Any

from ascheduler.binding.revalidation import NodeView
from ascheduler.model import PodInfo
from tests.kit import pod_info


def _pod(uid: str, requests: dict[str, str], phase: str = "Running") -> Any:
    cpu = requests.get("cpu")
    extra = {k: v for k, v in requests.items() if k != "cpu"}
    return pod_info(uid, namespace="x", uid=uid, cpu=cpu, extra=extra, phase=phase)


def shortfall(pod: PodInfo, allocatable: dict[str, int], on_node: list[PodInfo]) -> list[str]:
    """What a hold's re-validation finds `pod` short of, on a view of `on_node`."""
    return NodeView.of(on_node, fresh=True).usage.shortfall(pod, allocatable)


def test_shortfall_counts_the_pods_already_on_the_node() -> None:
    alloc = {"cpu": 4000, "memory": 8 << 30, "pods": 3, "nvidia.com/gpu": 2}
    gpu = {"cpu": "1", "nvidia.com/gpu": "1"}
    incoming = _pod("new", gpu)
    assert shortfall(incoming, alloc, [_pod("a", gpu)]) == []
    assert shortfall(incoming, alloc, [_pod("a", gpu), _pod("b", gpu)]) == ["nvidia.com/gpu"]
    # Finished pods and the pod itself do not count.
    assert (
        shortfall(incoming, alloc, [_pod("a", gpu), _pod("b", gpu, "Succeeded"), _pod("new", gpu)])
        == []
    )
    crowded = [_pod(f"p{i}", {"cpu": "1500m"}) for i in range(3)]
    assert shortfall(incoming, alloc, crowded) == ["pods", "cpu"]
    # A pod seen twice (the cache's assumed copy and the bind's own) counts once.
    twice = _pod("a", gpu)
    assert shortfall(incoming, alloc, [twice, _pod("a", gpu)]) == []
