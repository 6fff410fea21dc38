"""Costly selectors: which expressions count as costly, their evaluation in a child process
(never on the event loop), deadlines that stop it, and the cache's answers meanwhile."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from ascheduler.dra.allocator import EvalError
from ascheduler.dra.cel import NOT_YET, TIMED_OUT, SelectorCache, SelectorTimeout
from ascheduler.dra.celworker import FAILED, MATCH, NO_MATCH, SelectorWorker, is_costly
from ascheduler.dra.store import ResourceObjects
from ascheduler.model.dra import parse_resource_slice
from tests.unit.dra.helpers import device, slice_


@pytest.mark.parametrize(
    ("expression", "costly"),
    [
        ('device.driver == "gpu.example.com"', False),
        ('device.attributes["gpu.example.com"].model.startsWith("a1")', False),
        ("device.capacity['gpu.example.com'].mem.compareTo(quantity('1Gi')) >= 0", False),
        ('cel.bind(d, device.attributes["x"], d.a && !d.b)', False),
        ('"a+b" == device.driver', False),  # inside a literal
        ("'''x + y''' == device.driver // a + in a comment\n", False),
        ('r"all(" == device.driver', False),
        ("[1, 2, 3].all(x, x > 0)", True),
        ("[1, 2].exists (x, x > 1)", True),
        ('device.driver + "x" == "y"', True),
        ('cel.bind(a, "xx", cel.bind(b, a + a, b.size() > 1))', True),
        ('device.driver.matches("^gpu")', True),
        ('device.driver.replace("a", "aaaa") == ""', True),
        ('"unterminated == device.driver', True),
    ],
)
def test_costly_expressions_are_told_from_their_tokens(expression: str, costly: bool) -> None:
    assert is_costly(expression) is costly


def objects(count: int) -> ResourceObjects:
    store = ResourceObjects()
    devices = [device(f"d{i}", model="a100" if i % 2 else "t4", idx=i) for i in range(count)]
    store.handlers["ResourceSlice"].on_add(parse_resource_slice(slice_("s", devices, node="n1")))
    return store


MODEL_A100 = 'device.attributes["gpu.example.com"].model.matches("^a1")'
FORTY = "[" + ",".join(str(i) for i in range(40)) + "]"
#: 64,000 iterations, under Kubernetes' cost limit: a fifth of a second a device here.
SLOW = f"{FORTY}.all(a, {FORTY}.all(b, {FORTY}.all(c, a + b + c >= 0)))"
#: 2,560,000 iterations: past the limit.
OVER = f"{FORTY}.all(a, {FORTY}.all(b, {FORTY}.all(c, {FORTY}.all(d, d >= 0))))"


async def test_the_worker_evaluates_in_a_process_of_its_own() -> None:
    worker = SelectorWorker()
    got: dict[Any, Any] = {}
    items = [
        (0, {"driver": "gpu.example.com", "attributes": {}, "capacity": {}}),
        (1, {"driver": "other", "attributes": {}, "capacity": {}}),
        (2, {"driver": "gpu.example.com", "attributes": {}, "capacity": {}}),
    ]
    try:
        finished = await worker.evaluate(
            'device.driver.matches("^gpu") || 1 / (size(device.driver) - 5) >= 0',
            items,
            timeout=None,
            on_results=lambda rs: got.update(rs),
        )
        assert worker.pid is not None
        assert worker.pid != os.getpid()
    finally:
        await worker.close()
    assert finished
    assert {k: v.code for k, v in got.items()} == {0: MATCH, 1: FAILED, 2: MATCH}
    assert got[1].error == "division by zero"


async def test_a_job_past_its_deadline_is_killed_and_the_next_one_gets_a_new_process() -> None:
    worker = SelectorWorker()
    value = {"driver": "d", "attributes": {}, "capacity": {}}
    ticks = 0
    running = True

    async def ticker() -> None:
        nonlocal ticks
        while running:
            ticks += 1
            await asyncio.sleep(0.01)

    task = asyncio.create_task(ticker())
    try:
        loop = asyncio.get_running_loop()
        got: list[Any] = []
        finished = await worker.evaluate(
            SLOW, [(i, value) for i in range(30)], timeout=1.0, on_results=got.extend
        )
        assert not finished
        assert len(got) < 30
        assert worker.killed == 1
        assert worker.pid is None
        # The event loop went on while the child worked.
        assert ticks > 5
        got.clear()
        finished = await worker.evaluate(
            "device.driver.matches('d')",
            [(0, value)],
            timeout=None,
            on_results=got.extend,
        )
        assert finished
        assert [(k, o.code) for k, o in got] == [(0, MATCH)]
        assert loop.is_running()
    finally:
        running = False
        await task
        await worker.close()


async def test_costly_results_come_from_the_worker_and_are_kept_per_device() -> None:
    store = objects(6)
    cache: SelectorCache = store.selectors
    table = store.table()
    try:
        # Never evaluated where the cycle asks.
        with pytest.raises(SelectorTimeout):
            cache.matches(MODEL_A100, table.candidates[1])
        match, failed = cache.column(MODEL_A100, table, table.usable.copy())
        assert not match.any()
        assert failed.all()  # unknown: the search decides, and times out on those nodes
        assert cache.pending(MODEL_A100, table) == list(range(6))
        woken = asyncio.Event()
        assert not cache.ensure([MODEL_A100], table, timeout=None, done=woken.set)
        await asyncio.wait_for(woken.wait(), 60)
        assert cache.pending(MODEL_A100, table) == []
        assert [cache.matches(MODEL_A100, c) for c in table.candidates] == [
            i % 2 == 1 for i in range(6)
        ]
        match, failed = cache.column(MODEL_A100, table, table.usable.copy())
        assert match.tolist() == [i % 2 == 1 for i in range(6)]
        assert not failed.any()
        # Known now: nothing more to run.
        assert cache.ensure([MODEL_A100], table, timeout=None, done=woken.set)
    finally:
        await cache.close()


async def test_devices_a_job_did_not_reach_by_its_deadline_are_timed_out() -> None:
    store = objects(30)
    cache: SelectorCache = store.selectors
    table = store.table()
    try:
        woken = asyncio.Event()
        assert not cache.ensure([SLOW], table, timeout=1.0, done=woken.set)
        await asyncio.wait_for(woken.wait(), 60)
        assert cache.worker.killed == 1
        outcomes = [int(cache._slot(SLOW, c)[0][c.position]) for c in table.candidates]
        assert set(outcomes) <= {MATCH, TIMED_OUT}
        assert outcomes[-1] == TIMED_OUT
        for candidate, outcome in zip(table.candidates, outcomes, strict=True):
            if outcome == TIMED_OUT:
                with pytest.raises(SelectorTimeout):
                    cache.matches(SLOW, candidate)
            else:
                assert cache.matches(SLOW, candidate)
        # Timed-out devices are not retried until their slice changes.
        assert cache.pending(SLOW, table) == []
    finally:
        await cache.close()


async def test_a_costly_selector_failing_on_a_device_fails_as_kube_scheduler_says() -> None:
    store = objects(2)
    cache: SelectorCache = store.selectors
    table = store.table()
    expression = 'device.attributes["gpu.example.com"].nothere.matches("x")'
    try:
        woken = asyncio.Event()
        assert not cache.ensure([expression], table, timeout=None, done=woken.set)
        await asyncio.wait_for(woken.wait(), 60)
        with pytest.raises(EvalError, match="no such key: nothere"):
            cache.matches(expression, table.candidates[0])
    finally:
        await cache.close()


def test_cheap_selectors_are_still_evaluated_where_asked() -> None:
    store = objects(2)
    table = store.table()
    cheap = 'device.attributes["gpu.example.com"].model == "a100"'
    assert store.selectors.pending(cheap, table) == []
    assert [store.selectors.matches(cheap, c) for c in table.candidates] == [False, True]
    results, i = store.selectors._slot(cheap, table.candidates[0])
    assert results[i] == NO_MATCH
    assert NOT_YET == -1


async def test_the_worker_meters_cost_as_kubernetes_with_no_iteration_budget() -> None:
    """64,000 iterations evaluate (cel-cpp alone stops at 10,000); past Kubernetes' cost
    limit a selector fails with cel-go's words."""
    value = {"driver": "d", "attributes": {}, "capacity": {}}
    worker = SelectorWorker()
    got: dict[Any, Any] = {}
    try:
        for key, expression in ((0, SLOW), (1, OVER)):
            assert await worker.evaluate(
                expression, [(key, value)], timeout=None, on_results=lambda rs: got.update(rs)
            )
    finally:
        await worker.close()
    assert got[0].code == MATCH
    assert got[1].code == FAILED
    assert got[1].error == "operation cancelled: actual cost limit exceeded"
