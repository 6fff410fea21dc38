"""What an instance's node locks are configured with (`LockSettings`), and their defaults.

The configuration (`config`) builds these from the file and the flags; everything below it
takes them as given. Each default lives here once: the configuration names these constants
(`default_lease_groups` for the lease groups, which depend on where the locks live) instead of
writing its own.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass, field
from typing import Final, Literal

from ascheduler.durations import parse_seconds
from ascheduler.locks.keys import (
    BOUND_SUFFIX,
    DEFAULT_KEY,
    HAMI_KEY,
    LOCK_OBJECTS,
    WANTED_SUFFIX,
    LockObject,
    lock_object_of,
)

#: With locks on Leases, what a bind does while no other instance shares the nodes.
WhenAlone = Literal["skip", "lock"]
WHEN_ALONE: Final[tuple[WhenAlone, ...]] = ("skip", "lock")
#: The most lease groups a setting may ask for.
MAX_LEASE_GROUPS: Final = 1_000_000
#: The lease groups of locks on Leases when the configuration names none (see
#: `default_lease_groups`); benchmarks/README.md has the measurements behind the number.
DEFAULT_LEASE_GROUPS: Final = 32
DEFAULT_TIMEOUT: Final = 300.0
EXPIRE_ENV: Final = "ASCHEDULER_NODELOCK_EXPIRE"
#: How long a hold of ours stays taken after its binds, for the next binds to that node
#: (no lock, unlock or list for them), unless another instance asks for the lock.
DEFAULT_LINGER: Final = 10.0
#: How long a bind that met another instance's lock, and asked for it, waits for the holder to
#: let it go before reading the lock again (`LockSettings.handover_wait`). The holder lets a
#: parked hold go as soon as its informer shows the request, a busy one after its binds.
HANDOVER_WAIT: Final = 1.0
#: Seconds an instance's member Lease stands unrenewed before the others count it gone.
DEFAULT_MEMBER_SECONDS: Final = 15.0


def default_lease_groups(lock_object: LockObject) -> int:
    """The lease groups a configuration that names none gets: `DEFAULT_LEASE_GROUPS` with the
    locks on Leases; none on Nodes (HAMi's key, or `object: node`), which have no groups."""
    return DEFAULT_LEASE_GROUPS if lock_object == "lease" else 0


def instance_identity() -> str:
    """This process: its host and a random suffix (no comma, which separates a value's parts)."""
    host = (os.environ.get("POD_NAME") or socket.gethostname() or "ascheduler").replace(",", "-")
    return f"{host}-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class LockSettings:
    key: str = DEFAULT_KEY
    timeout: float = DEFAULT_TIMEOUT
    #: Names this instance in the values it writes under its own key.
    identity: str = field(default_factory=instance_identity)
    #: Where the lock is written; None: a Lease, but the Node under HAMi's key.
    on: LockObject | None = None
    #: Seconds a hold stays taken after its binds (0: released at once; HAMi's key: always).
    linger: float = DEFAULT_LINGER
    #: With locks on Leases: "skip" binds without the node's lock while no other instance
    #: shares the nodes, "lock" always takes it (see `members`).
    when_alone: WhenAlone = "skip"
    #: Seconds an instance's member Lease stands unrenewed before the others count it gone.
    member_duration: float = DEFAULT_MEMBER_SECONDS
    #: With locks on Leases: how many groups of nodes share a lock Lease each (0: a Lease per
    #: node). Every instance sharing the nodes should use the same number (see `keys`). Left
    #: at 0 here: the configuration always sets it, to `default_lease_groups` unless it names
    #: a number; settings built in code name theirs.
    lease_groups: int = 0
    #: Seconds a bind that meets another instance's lock (and has asked for it) waits for
    #: the hand-over before it looks again, while it has attempts left (0: fails at once).
    handover_wait: float = HANDOVER_WAIT

    def __post_init__(self) -> None:
        if not self.timeout > 0:
            raise ValueError(f"node lock timeout must be positive, got {self.timeout:g}s")
        if self.on is not None and self.on not in LOCK_OBJECTS:
            raise ValueError(
                f"node lock object must be one of {', '.join(LOCK_OBJECTS)}, got {self.on!r}"
            )
        if self.when_alone not in WHEN_ALONE:
            raise ValueError(
                f"node lock when alone must be one of {', '.join(WHEN_ALONE)}, "
                f"got {self.when_alone!r}"
            )
        if not self.member_duration > 0:
            raise ValueError(
                f"member lease duration must be positive, got {self.member_duration:g}s"
            )
        if self.linger < 0:
            raise ValueError(f"node lock linger must not be negative, got {self.linger:g}s")
        if self.handover_wait < 0:
            raise ValueError(
                f"node lock hand-over wait must not be negative, got {self.handover_wait:g}s"
            )
        if not 0 <= self.lease_groups <= MAX_LEASE_GROUPS:
            raise ValueError(
                f"node lock lease groups must be 0 to {MAX_LEASE_GROUPS}, got {self.lease_groups}"
            )
        if self.lease_groups and self.lock_object != "lease":
            raise ValueError("node lock lease groups need the locks on Leases")
        if self.hami and self.on == "lease":
            raise ValueError(
                f"the {HAMI_KEY} lock is HAMi's Node annotation: it cannot live on a Lease"
            )

    @property
    def lingers(self) -> bool:
        return self.linger > 0 and not self.hami

    @property
    def wanted_key(self) -> str:
        return self.key + WANTED_SUFFIX

    @property
    def bound_key(self) -> str:
        return self.key + BOUND_SUFFIX

    @property
    def lock_object(self) -> LockObject:
        return lock_object_of(self.key, self.on)

    @property
    def hami(self) -> bool:
        """HAMi's key: values name a pod, and a hold serves that one pod."""
        return self.key == HAMI_KEY

    @classmethod
    def from_env(
        cls,
        *,
        key: str = DEFAULT_KEY,
        timeout: float | None = None,
        on: LockObject | None = None,
    ) -> LockSettings:
        """`timeout` if given (the CLI flag), else `$ASCHEDULER_NODELOCK_EXPIRE` (seconds, or a
        Go-style duration such as `90s` or `5m`), else 5 minutes. ValueError for a value that
        does not parse or is not positive."""
        if timeout is None:
            raw = os.environ.get(EXPIRE_ENV, "")
            timeout = parse_seconds(raw) if raw else DEFAULT_TIMEOUT
        return cls(key=key, timeout=timeout, on=on)
