"""The life of a serving process, shared by `ascheduler run` and `ascheduler binder`.

Both do the same around their own work, in the same order:

1. tune the collector (`heap.tune`) and build the service (clients, informers, binders);
2. stop on SIGTERM or SIGINT (and whatever other signals the service handles);
3. open the health server before the election, so standby replicas answer `/livez` and
   are not ready ("standby: not leading");
4. with leader election, wait to lead on a client of its own (renewals never queue behind
   binds in the write pool or wait on its rate limiter), the service witnessing the node
   locks' member Leases meanwhile; then serve and renew as one unit: if either ends with an
   error the other is cancelled and the process exits 1 (never a zombie leader), a graceful
   stop ends both; without it, serve until stopped;
5. on the way out, whatever happened: the service lets go of every lock it still holds
   (before the Lease, so a successor finds none of ours), the Lease is released, the health
   server stops, the signal handlers go, and the service closes its clients.

What differs, the service says (`Service`): the scheduler's runtime schedules and binds, the
binder turns BindRequests into Bindings.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

import structlog

from ascheduler import heap
from ascheduler.config.types import SchedulerConfig
from ascheduler.http import HealthServer, open_server
from ascheduler.kube import KubeClient
from ascheduler.leader import LeaderElector, LostLeadership

log = structlog.get_logger(__name__)

#: The signals that stop the process gracefully.
STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT)


class Service(Protocol):
    """What `run` runs: built, served while leading, released and closed."""

    def signals(self) -> Mapping[signal.Signals, Callable[[], None]]:
        """Signals the service handles besides the stopping ones."""
        ...

    def ready(self) -> str:
        """Why the service is not ready ("" when it is), once it leads."""
        ...

    def attach(self, health: HealthServer) -> None:
        """Anything more on the health server (gauges, endpoints), before it starts."""
        ...

    async def standby(self, waiting: Awaitable[bool]) -> bool:
        """`waiting` (the wait to lead), with whatever the service watches meanwhile."""
        ...

    async def serve(self, stop: asyncio.Event, health: HealthServer | None) -> None:
        """The service's work, until `stop` is set (then a graceful stop)."""
        ...

    async def release(self) -> None:
        """Let go of every lock still held; called on every way out, before the Lease."""
        ...

    async def close(self) -> None: ...


async def run(
    config: SchedulerConfig, build: Callable[[], Awaitable[Service]], *, agent: str
) -> int:
    """Build the service and run it as the module says: 0 after a graceful stop, 1 if
    leadership was lost. `agent` names the process's clients (`agent/auth`,
    `agent/leader-election`)."""
    heap.tune()
    service = await build()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    handlers = {**{sig: stop.set for sig in STOP_SIGNALS}, **service.signals()}
    for sig, handler in handlers.items():
        loop.add_signal_handler(sig, handler)
    health: HealthServer | None = None
    elector: LeaderElector | None = None
    try:
        health = await _health(config, service, agent)
        elector = await _elector(config, agent, health)
        return await _lead(service, stop, health, elector)
    finally:
        # Also after a lost leadership or a crash of the serving tasks (their binds were
        # cancelled, each releasing its own hold): parked holds and leftovers go here.
        await service.release()
        if elector is not None:
            await elector.release()
            await elector.kube.close()
        if health is not None:
            await health.stop()
        for sig in handlers:
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)
        await service.close()


async def _health(config: SchedulerConfig, service: Service, agent: str) -> HealthServer | None:
    """The health server, started (None: neither listener is asked for)."""
    health = await open_server(
        config.http_address,
        config.secure_serving,
        kubeconfig=config.kubeconfig,
        context=config.context,
        user_agent=f"{agent}/auth",
        not_ready=service.ready,
    )
    if health is not None:
        service.attach(health)
        await health.start()
    return health


async def _elector(
    config: SchedulerConfig, agent: str, health: HealthServer | None
) -> LeaderElector | None:
    """The elector on a client of its own (None: no leader election)."""
    if not config.leader_election.leader_elect:
        return None
    lease_client = await KubeClient.connect(
        config.kubeconfig, pool_size=2, user_agent=f"{agent}/leader-election"
    )
    if health is not None:
        health.not_ready = lambda: "standby: not leading"
    return LeaderElector(lease_client, config.leader_election)


async def _lead(
    service: Service,
    stop: asyncio.Event,
    health: HealthServer | None,
    elector: LeaderElector | None,
) -> int:
    if elector is None:
        await service.serve(stop, health)
        return 0
    if not await service.standby(elector.acquire(stop)):
        return 0  # stopped while standing by
    if health is not None:
        health.not_ready = service.ready
    lost: BaseExceptionGroup[LostLeadership] | None = None
    try:
        async with asyncio.TaskGroup() as group:
            renewal = group.create_task(elector.hold())
            await service.serve(stop, health)
            renewal.cancel()
    except* LostLeadership as group_error:
        lost = group_error
    if lost is not None:
        # The service stopped the moment the renew deadline passed (its binds cancelled,
        # each undoing its own work); exit for the supervisor to restart us.
        log.error("stopped_leading", reason=str(lost.exceptions[0]))
        return 1
    return 0
