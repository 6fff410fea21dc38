"""Node locks, device locks and lock membership: the bottom layer the binder builds on.

It imports only `ascheduler.model`, `ascheduler.kube` and leaf utilities (`metrics`,
`durations`, `waits`); whatever it needs from above (the cache's view of a node, who to tell
that a lock was let go) is passed in. docs/node-locks.md is the map and the glossary.

* `keys`: lock keys (a node, or a lease group) and the objects locks live on;
* `values`: the lock value format, who holds it, `LockContended`;
* `settings`: `LockSettings` and every lock default;
* `hold`: `Hold`, `Holds`, and a hold's time budget;
* `state`, `handover`, `acquire`, `coalescing`, `sweep`, `nodelocks`: `NodeLocks`, in layers;
* `devicelocks`: the locks around device allocations (node and pool locks);
* `memberlease`, `memberview`, `members`: who shares the nodes, and binding alone.
"""

from ascheduler.locks.devicelocks import CapacityTaken, DeviceLocks, DeviceTaken
from ascheduler.locks.hold import Hold, Holds
from ascheduler.locks.members import Members, witnessing
from ascheduler.locks.nodelocks import RELEASE_ALL_SECONDS, NodeLocks
from ascheduler.locks.settings import LockSettings
from ascheduler.locks.values import Known, LockContended, lock_wait_message

__all__ = [
    "RELEASE_ALL_SECONDS",
    "CapacityTaken",
    "DeviceLocks",
    "DeviceTaken",
    "Hold",
    "Holds",
    "Known",
    "LockContended",
    "LockSettings",
    "Members",
    "NodeLocks",
    "lock_wait_message",
    "witnessing",
]
