"""Prometheus metrics of ascheduler's own (kube-scheduler's names live beside them)."""

from __future__ import annotations

from typing import Final

from prometheus_client import Counter, Histogram

NODE_LOCK_WAIT: Final = Histogram(
    "ascheduler_node_lock_wait_seconds",
    "Time from asking for a node's lock (both levels) to holding it.",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
NODE_LOCK_CONTENDED: Final = Counter(
    "ascheduler_node_lock_contended_total",
    "Node-lock acquisitions refused because another pod held the lock or won the race.",
)
NODE_LOCK_RECOVERED: Final = Counter(
    "ascheduler_node_lock_recovered_total",
    "Node locks taken over from a holder that crashed or left garbage.",
    ["kind"],
)
