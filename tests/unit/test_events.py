"""The status writer never dies: every failure of a write is logged and the next item sent."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from ascheduler.events import NOTE_LIMIT, StatusWriter, truncate_note
from ascheduler.features import Release
from ascheduler.groupstatus import PodGroupStatusWriter, Verdict
from ascheduler.kube import ApiError, ConnectionFailed
from ascheduler.model import parse_pod
from ascheduler.model.podgroups import parse_scheduling_group


class FlakyKube:
    def __init__(self, failures: list[BaseException]) -> None:
        self.failures = failures
        self.sent: list[str] = []

    async def request(self, method: str, path: str, **kwargs: Any) -> None:
        if self.failures:
            raise self.failures.pop(0)
        self.sent.append(path)


async def test_the_writer_outlives_every_kind_of_failure() -> None:
    kube = FlakyKube(
        [
            ConnectionFailed("POST", "/x", aiohttp.ServerDisconnectedError()),
            ConnectionFailed("POST", "/x", aiohttp.ClientPayloadError("cut")),
            ApiError(500, "InternalError", "etcd", method="POST", path="/x"),
            ApiError(404, "NotFound", "gone", method="POST", path="/x"),
            RuntimeError("a bug in building the event"),
        ]
    )
    writer = StatusWriter(kube, workers=1, hostname="test")  # type: ignore[arg-type]
    pod = parse_pod({"metadata": {"name": "p", "namespace": "ns", "uid": "u"}})
    for i in range(6):
        writer.scheduled(pod, f"n{i}", "ascheduler")
    task = asyncio.create_task(writer.run())
    try:
        async with asyncio.timeout(10):
            await writer.queue.join()
        assert not task.done()
        assert len(kube.sent) == 1  # the sixth event, after five failures
        assert writer.sent == 1
    finally:
        task.cancel()


async def test_events_wait_for_binds_but_conditions_do_not() -> None:
    kube = FlakyKube([])
    writer = StatusWriter(kube, workers=1, hostname="test", defer=30.0)  # type: ignore[arg-type]
    pod = parse_pod({"metadata": {"name": "p", "namespace": "ns", "uid": "u"}})
    writer.idle.clear()  # binds under way
    writer.scheduled(pod, "n1", "ascheduler")
    writer.failed(pod, "0/1 nodes are available: 1 Insufficient cpu.", "ascheduler")
    task = asyncio.create_task(writer.run())
    try:
        for _ in range(50):
            await asyncio.sleep(0)
        # The condition went out; both events are held back, and the queue is not done.
        assert kube.sent == ["/api/v1/namespaces/ns/pods/p/status"]
        assert writer.queue._unfinished_tasks == 2  # type: ignore[attr-defined]
        writer.idle.set()  # the burst is over
        async with asyncio.timeout(10):
            await writer.queue.join()
        events = "/apis/events.k8s.io/v1/namespaces/ns/events"
        assert kube.sent == ["/api/v1/namespaces/ns/pods/p/status", events, events]
    finally:
        task.cancel()


async def test_a_held_event_goes_out_after_its_deadline_under_steady_load() -> None:
    kube = FlakyKube([])
    writer = StatusWriter(kube, workers=1, hostname="test", defer=0.05)  # type: ignore[arg-type]
    pod = parse_pod({"metadata": {"name": "p", "namespace": "ns", "uid": "u"}})
    writer.idle.clear()  # and never set again
    writer.scheduled(pod, "n1", "ascheduler")
    task = asyncio.create_task(writer.run())
    try:
        async with asyncio.timeout(10):
            await writer.queue.join()
        assert len(kube.sent) == 1
    finally:
        task.cancel()


# -- truncate_note ---------------------------------------------------------------------------


def test_short_notes_are_kept() -> None:
    assert truncate_note("") == ""
    assert truncate_note("0/1 nodes are available") == "0/1 nodes are available"
    exact = "x" * NOTE_LIMIT
    assert truncate_note(exact) == exact


@pytest.mark.parametrize("length", [NOTE_LIMIT + 1, 2000, 100_000])
def test_long_notes_are_cut_to_1020_bytes_and_marked(length: int) -> None:
    note = "".join(chr(ord("a") + i % 26) for i in range(length))
    cut = truncate_note(note)
    assert len(cut.encode()) == NOTE_LIMIT == 1024
    assert cut == note[:1020] + " ..."


def test_multibyte_notes_are_cut_on_bytes_and_stay_valid() -> None:
    note = "é" * 600  # 1200 bytes
    cut = truncate_note(note)
    assert cut == "é" * 510 + " ..."
    assert len(cut.encode()) == 1024
    odd = "a" + "é" * 600  # the 1020-byte cut falls inside a character
    cut = truncate_note(odd)
    assert cut == "a" + "é" * 509 + " ..."
    assert len(cut.encode()) <= 1024


async def test_a_drain_writes_the_pod_groups_verdicts_too() -> None:
    kube = FlakyKube([])
    writer = StatusWriter(kube, workers=1, hostname="test")  # type: ignore[arg-type]
    writer.pod_groups = PodGroupStatusWriter(kube, Release(1, 37))  # type: ignore[arg-type]
    group = parse_scheduling_group(
        {
            "metadata": {"name": "g", "namespace": "ns", "uid": "u"},
            "spec": {"schedulingPolicy": {"basic": {}}},
        }
    )
    writer.pod_groups.set(group, Verdict(True, "Scheduled"))
    task = asyncio.create_task(writer.run())
    try:
        async with asyncio.timeout(10):
            await writer.drain()
        assert kube.sent == ["/apis/scheduling.k8s.io/v1beta1/namespaces/ns/podgroups/g/status"]
    finally:
        task.cancel()
