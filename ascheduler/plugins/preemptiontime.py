"""When a pod started, as both preemptions read it (a victim's importance)."""

from __future__ import annotations

import datetime as dt

from ascheduler.model import PodInfo


def _timestamp(value: str) -> float | None:
    if not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.timestamp()


def start_time(pod: PodInfo, now: float) -> float:
    """kube-scheduler's `GetPodStartTime`: `status.startTime`, or now for a pod that has not
    started (assumed, or bound and not yet running)."""
    at = _timestamp(pod.start_time)
    return now if at is None else at
