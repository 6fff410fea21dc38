"""Shard members: the live instances the pending pods are split among (see `split`).

Every instance in sharding mode keeps a Lease of its own in the lease namespace,
`ascheduler-shard-<group>-<digest of its identity>`, labelled with its group
(`ascheduler.io/shard-group`), holding its identity, its duration and a `renewTime` renewed
every fifth of the duration, as a leader renews its Lease well within its duration. It
watches the group's Leases (an informer on the watch client) and reads them again on each
round.

* **Another member is live** from when its Lease is first seen until its `renewTime` has
  stood unchanged for the Lease's own `leaseDurationSeconds` on this instance's clock,
  counted from when this instance first saw that value (as leader election counts a Lease
  expired: no clocks are compared), or until its Lease is deleted (a graceful stop, after
  its last bind).
* **This instance counts itself live** while its last successful renewal was *sent* less
  than the duration ago (a timer recomputes the split the moment that runs out). The others
  count from when they *saw* that renewal, later, so an instance cut off from the API server
  stops claiming pods no later than the others start claiming its share. Views that differ
  for a moment may still let two claim a pod, which the node locks make safe (see
  `ascheduler.sharding`).
* **Joining**: the Lease is written, then the group's Leases are listed, before the
  informers list the cluster, so the first pods are split among the members already there.
  Of two instances joining together, the later list sees the earlier write; the other finds
  the newcomer on its watch a moment later.
* A Lease left unrenewed for twice its duration (a member killed without a graceful stop) is
  deleted, guarded by the resourceVersion it was seen at, so crashed members' Leases do not
  pile up; a member that was alive after all writes its Lease again at its next renewal.

Every change of the live members is told to `on_change` with the new `Split`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import math
import os
import re
import socket
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import structlog

from ascheduler import metrics
from ascheduler.kube import KubeClient, KubeError
from ascheduler.kube.client import MERGE_PATCH
from ascheduler.kube.informer import Informer
from ascheduler.shards.split import Split

log = structlog.get_logger(__name__)

#: The group instances split pods in unless told another.
DEFAULT_GROUP: Final = "ascheduler"
#: How long a member's Lease stays live unrenewed.
DEFAULT_MEMBER_SECONDS: Final = 15.0
#: Renewals every RENEW of the duration; a Lease unrenewed for COLLECT durations is deleted.
RENEW: Final = 0.2
COLLECT: Final = 2.0
SHARD_PREFIX: Final = "ascheduler-shard-"
GROUP_LABEL: Final = "ascheduler.io/shard-group"
COMPONENT: Final = ("app.kubernetes.io/component", "shard-member")
#: A group names Leases and labels them: a DNS label, short enough for both.
_GROUP_RE: Final = re.compile(r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$")


@dataclass(frozen=True)
class ShardSettings:
    """Sharding mode (`ascheduler.sharding`): off by default."""

    enabled: bool = False
    #: Instances of one group split the pods among themselves; the group names their Leases.
    group: str = DEFAULT_GROUP
    member_duration: float = DEFAULT_MEMBER_SECONDS

    def __post_init__(self) -> None:
        if not _GROUP_RE.match(self.group):
            raise ValueError(
                "group must be 1-40 lowercase letters, digits and '-', starting and ending "
                f"with a letter or digit, got {self.group!r}"
            )
        if not self.member_duration > 0:
            raise ValueError(f"member duration must be positive, got {self.member_duration:g}s")


def shard_lease_name(group: str, identity: str) -> str:
    return f"{SHARD_PREFIX}{group}-{hashlib.sha256(identity.encode()).hexdigest()[:16]}"


def default_identity() -> str:
    """The pod's name where there is one (a Deployment's replica), with a random suffix so a
    process restarted in the same pod is a new member, never one a late Lease stands for."""
    base = os.environ.get("POD_NAME") or socket.gethostname()
    return f"{base}_{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True, slots=True)
class ShardLease:
    """A member's Lease as last seen ("" identity: not a member Lease, ignored)."""

    name: str
    identity: str
    #: `spec.renewTime` as written: a new value on every renewal.
    renewed: str
    #: `spec.leaseDurationSeconds`: how long it stays live unrenewed.
    duration: float
    version: str = ""


def parse_shard_lease(raw: Mapping[str, Any]) -> ShardLease:
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    if not isinstance(meta, Mapping) or not isinstance(spec, Mapping):
        return ShardLease("", "", "", 0.0)
    name = str(meta.get("name", ""))
    identity = str(spec.get("holderIdentity") or "")
    seconds = spec.get("leaseDurationSeconds")
    duration = float(seconds) if isinstance(seconds, int) and seconds > 0 else 0.0
    if not name.startswith(SHARD_PREFIX) or not duration:
        identity = ""
    renewed = str(spec.get("renewTime") or "")
    return ShardLease(name, identity, renewed, duration, str(meta.get("resourceVersion", "")))


def _micro_time() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class ShardMembers:
    """Our member Lease renewed, the group's others watched, and the split they make."""

    def __init__(
        self,
        kube: KubeClient,
        namespace: str,
        settings: ShardSettings,
        *,
        identity: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube = kube
        self.settings = settings
        self.identity = identity or default_identity()
        self.name = shard_lease_name(settings.group, self.identity)
        self.selector = f"{GROUP_LABEL}={settings.group}"
        self._leases = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self._clock = clock
        #: identity -> the other members' Leases as last seen (live or not)
        self._others: dict[str, ShardLease] = {}
        #: identity -> (its renewTime value, when this instance first saw that value)
        self._seen: dict[str, tuple[str, float]] = {}
        #: when our last successful renewal was sent (our clock); None: not registered
        self._renewed_at: float | None = None
        #: Recomputes the split the moment our own Lease runs out unrenewed.
        self._expiry: asyncio.TimerHandle | None = None
        self.split = Split.of(self.identity, ())
        #: Told each new split (the live members changed).
        self.on_change: Callable[[Split], None] = lambda _split: None

    @property
    def duration(self) -> float:
        return self.settings.member_duration

    # -- what is seen ------------------------------------------------------------------------

    def observe(self, lease: ShardLease) -> None:
        """Another member's Lease as the informer or our read shows it."""
        if not lease.identity or lease.identity == self.identity:
            return
        seen = self._seen.get(lease.identity)
        if seen is None or seen[0] != lease.renewed:
            self._seen[lease.identity] = (lease.renewed, self._clock())
        self._others[lease.identity] = lease
        self.update()

    def observe_gone(self, identity: str) -> None:
        """A member's Lease deleted: it left (or was collected)."""
        self._others.pop(identity, None)
        self._seen.pop(identity, None)
        self.update()

    def _unrenewed_for(self, lease: ShardLease) -> float:
        seen = self._seen.get(lease.identity)
        return 0.0 if seen is None else self._clock() - seen[1]

    def live(self) -> list[str]:
        """The live members, this instance among them while its own Lease is."""
        members = [
            identity
            for identity, lease in self._others.items()
            if self._unrenewed_for(lease) < lease.duration
        ]
        renewed = self._renewed_at
        if renewed is not None and self._clock() - renewed < self.duration:
            members.append(self.identity)
        return members

    def update(self) -> None:
        """The split recomputed; `on_change` told if the live members changed."""
        split = Split.of(self.identity, self.live())
        metrics.SHARD_MEMBERS.set(len(split.members))
        if split == self.split:
            return
        before, self.split = self.split, split
        log.info(
            "shard_members_changed",
            members=list(split.members),
            joined=sorted(set(split.members) - set(before.members)),
            left=sorted(set(before.members) - set(split.members)),
            live=split.live,
        )
        self.on_change(split)

    # handlers of the informer
    def on_add(self, lease: ShardLease) -> None:
        self.observe(lease)

    def on_update(self, old: ShardLease, new: ShardLease) -> None:
        self.observe(new)

    def on_delete(self, lease: ShardLease) -> None:
        if lease.identity and lease.identity != self.identity:
            self.observe_gone(lease.identity)

    def informer(self, kube: KubeClient) -> Informer[ShardLease]:
        """The group's Leases, watched (on the watch client)."""
        return Informer(
            kube,
            self._leases,
            parse=parse_shard_lease,
            key=lambda lease: lease.name,
            version=lambda lease: lease.version,
            handler=self,
            label_selector=self.selector,
            name="shard-members",
        )

    # -- our Lease ---------------------------------------------------------------------------

    def _body(self) -> dict[str, Any]:
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": self.name,
                "labels": {
                    "app.kubernetes.io/managed-by": "ascheduler",
                    COMPONENT[0]: COMPONENT[1],
                    GROUP_LABEL: self.settings.group,
                },
            },
            "spec": {
                "holderIdentity": self.identity,
                # Rounded up: the others never count us gone before we stop counting us.
                "leaseDurationSeconds": max(1, math.ceil(self.duration)),
                "renewTime": _micro_time(),
            },
        }

    async def _renew(self) -> None:
        """Our Lease renewed (written again if it is gone: collected while we were cut off)."""
        sent = self._clock()
        body = self._body()
        try:
            await self.kube.patch(f"{self._leases}/{self.name}", body, content_type=MERGE_PATCH)
        except KubeError as exc:
            if not exc.not_found:
                raise
            await self.kube.post(self._leases, body)
        self._renewed_at = sent
        if self._expiry is not None:
            self._expiry.cancel()
        late_in = max(0.0, sent + self.duration - self._clock())
        self._expiry = asyncio.get_running_loop().call_later(late_in, self.update)
        self.update()

    async def _list(self) -> None:
        """The group's Leases from the API server: members met, gone ones dropped."""
        listing = await self.kube.get(self._leases, params={"labelSelector": self.selector})
        found: set[str] = set()
        for raw in listing.get("items") or []:
            lease = parse_shard_lease(raw)
            found.add(lease.identity)
            self.observe(lease)
        for identity in [i for i in self._others if i not in found]:
            self.observe_gone(identity)

    async def join(self) -> None:
        """Write our Lease, then read the group's; retried until both succeed."""
        delay = 0.2
        while True:
            try:
                await self._renew()
                await self._list()
                break
            except KubeError as exc:
                log.warning("shard_join_failed", error=str(exc), retry_in=delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        self.update()
        log.info(
            "shard_joined",
            lease=self.name,
            identity=self.identity,
            members=list(self.split.members),
        )

    async def join_unless(self, stop: asyncio.Event) -> bool:
        """`join`, unless `stop` is set first (False then)."""
        joining = asyncio.ensure_future(self.join())
        stopped = asyncio.ensure_future(stop.wait())
        await asyncio.wait([joining, stopped], return_when=asyncio.FIRST_COMPLETED)
        for task in (joining, stopped):
            task.cancel()
        return not stop.is_set()

    async def run(self) -> None:
        """Renew, read the group's Leases, collect dead ones, until cancelled. Each round is
        bounded by the renewal period, so a hanging request never keeps this instance
        counting itself live past its Lease."""
        while True:
            try:
                async with asyncio.timeout(RENEW * self.duration):
                    await self._round()
            except (KubeError, TimeoutError) as exc:
                log.warning("shard_round_failed", error=str(exc) or type(exc).__name__)
            except Exception:  # never ends the process: the split follows what is known
                log.exception("shard_round_crashed")
            self.update()
            await asyncio.sleep(RENEW * self.duration)

    async def _round(self) -> None:
        await self._renew()
        await self._list()
        for lease in [
            lease
            for lease in self._others.values()
            if self._unrenewed_for(lease) >= COLLECT * lease.duration
        ]:
            await self._collect(lease)

    async def _collect(self, lease: ShardLease) -> None:
        """Delete a Lease unrenewed for `COLLECT` durations, unless renewed meanwhile."""
        body = {"preconditions": {"resourceVersion": lease.version}} if lease.version else None
        try:
            await self.kube.request("DELETE", f"{self._leases}/{lease.name}", body=body)
        except KubeError as exc:
            if not exc.not_found:
                log.info("shard_member_collect_failed", member=lease.identity, error=str(exc))
                return
        log.info("shard_member_collected", member=lease.identity, lease=lease.name)
        self.observe_gone(lease.identity)

    async def leave(self) -> None:
        """Delete our Lease (after our last bind): the others take our share at once."""
        self._renewed_at = None
        if self._expiry is not None:
            self._expiry.cancel()
        self.update()
        try:
            await self.kube.request("DELETE", f"{self._leases}/{self.name}")
        except KubeError as exc:
            if not exc.not_found:
                log.warning("shard_leave_failed", error=str(exc))
