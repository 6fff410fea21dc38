"""NodeLocks as an instance keeps them, against the in-memory lock object of `fakeapi`."""

from __future__ import annotations

from ascheduler.locks import LockSettings, NodeLocks
from ascheduler.locks.keys import DEFAULT_KEY
from ascheduler.model import PodInfo
from tests.kit import FakeClock, pod_info
from tests.unit.locks.fakeapi import FakeNodeApi

ME = "instance-a"
TIMEOUT = 60.0


def a_pod(name: str = "p0", namespace: str = "ns") -> PodInfo:
    return pod_info(name, namespace=namespace, uid=name)


def locks_for(
    api: FakeNodeApi,
    clock: FakeClock,
    *,
    key: str = DEFAULT_KEY,
    identity: str = ME,
    linger: float = 0.0,
    handover_wait: float = 0.0,
) -> NodeLocks:
    """Locks as an instance keeps them; a bind meeting another's lock fails at once unless
    `handover_wait` is given."""
    settings = LockSettings(
        key=key, timeout=TIMEOUT, identity=identity, linger=linger, handover_wait=handover_wait
    )
    return NodeLocks(api, settings, clock=clock)  # type: ignore[arg-type]


WANTED = DEFAULT_KEY + "-wanted"

LEASES = "/apis/coordination.k8s.io/v1/namespaces/ns/leases"


def lease_locks(api: FakeNodeApi, clock: FakeClock, *, replace: bool = False) -> NodeLocks:
    """Locks on Leases (made on first use), written as the binder writes them with `replace`."""

    async def create(name: str) -> None:
        await api.post(LEASES, {"metadata": {"name": name}})

    settings = LockSettings(timeout=TIMEOUT, identity=ME, linger=0.0, handover_wait=0.0)
    return NodeLocks(
        api,  # type: ignore[arg-type]
        settings,
        clock=clock,
        path=lambda name: f"{LEASES}/{name}",
        create=create,
        replace=replace,
    )
