"""Leader election on a `coordination.k8s.io/v1` Lease, as client-go's leaderelection does.

Standby replicas try to take the Lease every `retry_period`; a Lease counts as expired when its
record (holder, renew time) has not changed for `lease_duration` *as observed by this process*
(not by comparing clocks with the holder's). The leader renews every `retry_period`; like
client-go, every renewal is bounded by the renew deadline (counted from the last successful
renewal), and the moment that deadline passes it stops leading (`LostLeadership`), even if a
request is still hanging. Since `renew_deadline < lease_duration` and a standby counts the
duration from when *it* saw the last renewal, the old leader has stopped before any standby
can take over. On a graceful stop the leader releases the Lease (empty holder, 1 s duration)
so a standby takes over at once.

Give the elector a client of its own (`app` does): a renewal must not queue behind binds in a
shared connection pool or rate limiter.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import socket
import uuid
from typing import Any

import structlog

from ascheduler.config import LeaderElection
from ascheduler.kube import KubeClient, KubeError
from ascheduler.waits import wait_event

log = structlog.get_logger(__name__)


class LostLeadership(Exception):
    """The Lease could not be renewed in time: this process must stop leading."""


def default_identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def _micro_time(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self, kube: KubeClient, settings: LeaderElection, *, identity: str | None = None
    ) -> None:
        self.kube = kube
        self.settings = settings
        self.identity = identity or os.environ.get("POD_NAME") or default_identity()
        self.path = (
            f"/apis/coordination.k8s.io/v1/namespaces/{settings.resource_namespace}"
            f"/leases/{settings.resource_name}"
        )
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._renewed_at = 0.0
        self.leading = False

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def _spec(self, *, transitions: int, acquire_time: str) -> dict[str, Any]:
        now = _micro_time(dt.datetime.now(dt.UTC))
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, int(self.settings.lease_duration)),
            "acquireTime": acquire_time or now,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    async def try_acquire_or_renew(self) -> bool:
        try:
            lease = await self.kube.get(self.path)
        except KubeError as exc:
            if not exc.not_found:
                raise
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "name": self.settings.resource_name,
                    "namespace": self.settings.resource_namespace,
                },
                "spec": self._spec(transitions=0, acquire_time=""),
            }
            try:
                await self.kube.post(self.path.rsplit("/", 1)[0], body)
            except KubeError as err:
                if err.conflict:
                    return False  # another replica created it first
                raise
            return True
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        record = (holder, spec.get("renewTime"), spec.get("leaseDurationSeconds"))
        if record != self._observed:
            self._observed, self._observed_at = record, self._now()
        duration = float(spec.get("leaseDurationSeconds") or self.settings.lease_duration)
        expired = self._now() - self._observed_at > duration
        if holder and holder != self.identity and not expired:
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        if holder != self.identity:
            transitions += 1
        acquire_time = spec.get("acquireTime") if holder == self.identity else ""
        updated = {
            **lease,
            "spec": self._spec(transitions=transitions, acquire_time=acquire_time or ""),
        }
        try:
            await self.kube.request("PUT", self.path, body=updated)
        except KubeError as exc:
            if exc.conflict:
                return False
            raise
        return True

    async def acquire(self, stop: asyncio.Event) -> bool:
        """Wait until leading (True) or until `stop` is set (False)."""
        log.info("leader_election_waiting", lease=self.path, identity=self.identity)
        while not stop.is_set():
            try:
                async with asyncio.timeout(self.settings.renew_deadline):
                    won = await self.try_acquire_or_renew()
                if won:
                    self.leading = True
                    self._renewed_at = self._now()
                    log.info("leader_elected", lease=self.path, identity=self.identity)
                    return True
            except (KubeError, TimeoutError) as exc:
                log.warning("leader_election_error", error=str(exc))
            await wait_event(stop, self.settings.retry_period)
        return False

    async def hold(self) -> None:
        """Renew until cancelled. Every attempt is bounded by the renew deadline (from the last
        successful renewal); once it passes, raise LostLeadership at once."""
        while True:
            deadline = self._renewed_at + self.settings.renew_deadline
            await asyncio.sleep(max(0.0, min(self.settings.retry_period, deadline - self._now())))
            renewed = False
            with contextlib.suppress(TimeoutError):  # the deadline passed: checked below
                try:
                    async with asyncio.timeout_at(deadline):
                        renewed = await self.try_acquire_or_renew()
                except KubeError as exc:
                    log.warning("leader_renew_error", error=str(exc))
            if renewed:
                self._renewed_at = self._now()
                continue
            if self._now() >= deadline:
                self.leading = False
                log.error(
                    "leader_lost",
                    lease=self.path,
                    identity=self.identity,
                    renew_deadline=self.settings.renew_deadline,
                )
                raise LostLeadership(
                    f"could not renew {self.path} for {self.settings.renew_deadline:g}s"
                )

    async def release(self) -> None:
        if not self.leading:
            return
        self.leading = False
        try:
            async with asyncio.timeout(self.settings.renew_deadline):
                lease = await self.kube.get(self.path)
                if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                    return
                spec = {**lease["spec"], "holderIdentity": "", "leaseDurationSeconds": 1}
                await self.kube.request("PUT", self.path, body={**lease, "spec": spec})
            log.info("leader_released", lease=self.path)
        except (KubeError, TimeoutError) as exc:
            log.warning("leader_release_failed", error=str(exc))
