"""Holds: the locks this instance has taken, and the time each one may write in.

A *hold* is this instance's possession of one lock (`Hold`); the locks binds to one node take
together are a `Holds` (one, unless instances group the nodes differently, see `keys`).

**Holds are bounded in time.** A hold starts writes only within `HOLD_BUDGET` of the timeout
after it took the lock, and its writes are cut off at `HOLD_CUTOFF`; before each batch of binds
after its first it checks the lock still holds its value (`NodeLocks.still_ours`). Since any
other instance counts staleness from a moment after our lock was written, a hold has stopped
writing before anyone can take it over. The assumption: a write the API server accepted is
applied within the remaining quarter of the timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

#: Fractions of the timeout: a hold starts writes until the first, and stops them at the second.
HOLD_BUDGET: Final = 0.5
HOLD_CUTOFF: Final = 0.75
#: A parked hold is reused only while this much of its write budget is left.
REUSE_MARGIN: Final = 5.0
#: How many uids the record of bound pods beside a lock keeps.
BOUND_KEPT: Final = 64


@dataclass
class Hold:
    """A lock this instance holds: one key's (a node's own, or a lease group's)."""

    #: The lock key (a node's name, or a group's `<index>/<G>`).
    node: str
    value: str
    #: The lock object's resourceVersion after our last write of it.
    version: str
    #: The lock object as our lock write (or read) returned it: on Nodes, the Node, whose
    #: allocatable the binder then reads off it.
    node_obj: Mapping[str, Any]
    #: Times (on `clock`) until which writes may start, and after which they are cut off.
    write_until: float
    cutoff_at: float
    clock: Callable[[], float]
    #: Whether the lock object was exactly as our own last release left it: nobody took
    #: the lock in between (every holder writes it), so no other instance bound under it.
    #: Also true for a parked hold taken up again (held all along).
    undisturbed: bool = False
    #: Set once the lock was found not to hold our value: never parked, never reused.
    lost: bool = False
    #: Whether the lock object's watch has shown our value since we took it: from then on
    #: the watch, which delivers every later change in order, tells whether it still holds
    #: it (`NodeLocks.still_ours` reads the object only until then).
    confirmed: bool = False
    #: The record of pods bound under the lock found beside it when it was free (None: not
    #: known, or the lock was taken over from another holder); and the one to leave at release.
    bound_before: tuple[str, ...] | None = None
    bound_after: tuple[str, ...] | None = None
    #: Counts this instance's holds on the lock object that were *not* undisturbed (another
    #: holder may have bound under it since): what this instance knows of the nodes it
    #: stands for is as good as when it was recorded while the lineage stays the same.
    lineage: int = 0

    def reusable(self) -> bool:
        """Whether a parked hold may serve more binds: a margin of its write budget left."""
        return not self.lost and self.clock() < self.write_until - REUSE_MARGIN

    def writable(self) -> bool:
        return self.clock() < self.write_until

    def remaining(self) -> float:
        """Seconds until the cutoff."""
        return max(0.0, self.cutoff_at - self.clock())


@dataclass
class Holds:
    """The locks binds to one node take together (`NodeLocks.hold_all`): one, unless
    instances group the nodes differently. Writes go on while every one of them allows."""

    holds: list[Hold]

    def writable(self) -> bool:
        return all(h.writable() for h in self.holds)

    def remaining(self) -> float:
        """Seconds until the first cutoff."""
        return min((h.remaining() for h in self.holds), default=0.0)

    @property
    def undisturbed(self) -> bool:
        return all(h.undisturbed for h in self.holds)

    @property
    def lineage(self) -> tuple[tuple[str, int], ...]:
        return tuple((h.node, h.lineage) for h in self.holds)

    @property
    def bound_before(self) -> tuple[str, ...] | None:
        """The pods recorded beside every lock as bound under it (None: one lock has none)."""
        records = [h.bound_before for h in self.holds]
        if any(r is None for r in records):
            return None
        return tuple(uid for r in records if r is not None for uid in r)

    @property
    def node_obj(self) -> Mapping[str, Any]:
        """The first lock object as our lock write returned it (the Node, on Nodes)."""
        return self.holds[0].node_obj

    def record(self, added: Iterable[str]) -> None:
        """Leave beside each lock, at its release, the pods bound under it: what it had,
        plus `added`."""
        uids = list(added)
        for h in self.holds:
            before = h.bound_after if h.bound_after is not None else h.bound_before
            h.bound_after = (*(before or ()), *uids)[-BOUND_KEPT:]


@dataclass
class LockStats:
    acquired: int = 0
    contended: int = 0
    stale_recovered: int = 0
    dangling_recovered: int = 0
    #: Releases that failed in the hold and landed later, in the background.
    released_late: int = 0
    #: Stale locks of others cleared by the background sweep.
    stale_cleared: int = 0


@dataclass
class SharedHold:
    """A group's hold while binds to its nodes use it (see `Coalescing._join`)."""

    hold: Hold
    users: int = 1
    #: Whether every user so far finished without an error (else it is released, not parked).
    ok: bool = True
    #: Being parked or released: newcomers wait for `done` and take the lock afresh.
    closing: bool = False
    done: asyncio.Event = field(default_factory=asyncio.Event)
