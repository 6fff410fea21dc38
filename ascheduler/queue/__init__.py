"""The scheduling queue (active / backoff / unschedulable / gated, with in-flight tracking)."""

from ascheduler.queue.queue import Clock, MonotonicClock, QueueSettings, SchedulingQueue

__all__ = ["Clock", "MonotonicClock", "QueueSettings", "SchedulingQueue"]
