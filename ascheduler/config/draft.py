"""The configuration while the command-line flags are applied over it (`flags.apply`): the
changes so far and the problems found, in stages, each stage closing with its checks across
its flags (the secure port's, the leader election's, the node locks', the binding's, the
sharding's).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from ascheduler.config.types import LeaderElection, SchedulerConfig
from ascheduler.config.validation import secure_problems
from ascheduler.http import SecureServing
from ascheduler.locks import LockSettings
from ascheduler.locks.keys import LockObject, lock_object_of
from ascheduler.locks.settings import default_lease_groups

#: When a flag is applied: the stages run in this order, each ending with its checks.
Stage = Literal["plain", "secure", "election", "locks", "binding", "sharding", "debug"]
STAGES: Final[tuple[Stage, ...]] = (
    "plain",
    "secure",
    "election",
    "locks",
    "binding",
    "sharding",
    "debug",
)


@dataclass
class Draft:
    """The configuration while the flags are applied: the changes so far and the problems."""

    config: SchedulerConfig
    #: The file named profiles (which `--scheduler-name` must not silently replace).
    file_profiles: bool
    problems: list[str] = field(default_factory=list)
    changes: dict[str, Any] = field(default_factory=dict)
    #: The secure serving once a flag of it is given.
    secure: SecureServing | None = None
    #: The leader election, the node lock and where it lives, from the file, as the flags
    #: change them.
    election: LeaderElection = field(init=False)
    lock: LockSettings = field(init=False)
    on: LockObject | None = field(init=False)
    #: --node-lock-key and --node-lock-lease-groups, applied with the object.
    lock_key: str | None = None
    lease_groups: int | None = None
    #: Changes of `BindSettings`.
    binding: dict[str, Any] = field(default_factory=dict)
    #: Changes of `ShardSettings`.
    sharding: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.election = self.config.leader_election
        self.lock = self.config.binding.lock
        self.on = self.lock.on

    def problem(self, flag: str, message: str) -> None:
        self.problems.append(f"{flag}: {message}")


def _nothing(d: Draft) -> None:
    pass


def _finish_secure(d: Draft) -> None:
    if d.secure is not None:
        d.problems.extend(secure_problems(d.secure))
        d.changes["secure_serving"] = d.secure


def _finish_election(d: Draft) -> None:
    e = d.election
    if e.leader_elect and e.renew_deadline >= e.lease_duration:
        # The file's election went unchecked while it did not elect.
        d.problems.append(
            "leaderElection.leaseDuration: must be greater than renewDeadline "
            f"({e.lease_duration:g}s <= {e.renew_deadline:g}s)"
        )
    d.changes["leader_election"] = e


def _finish_locks(d: Draft) -> None:
    """The key, the object and the lease groups together: the groups follow where the flags
    put the locks unless the file or a flag named them."""
    lock = d.lock
    groups = d.lease_groups
    if groups is None:
        groups = lock.lease_groups
        if not d.config.lease_groups_named:
            groups = default_lease_groups(lock_object_of(d.lock_key or lock.key, d.on))
    try:
        d.lock = dataclasses.replace(lock, key=d.lock_key or lock.key, on=d.on, lease_groups=groups)
    except ValueError as exc:
        flags = "--node-lock-key, --node-lock-object"
        if d.lease_groups is not None:
            flags += ", --node-lock-lease-groups"
        d.problem(flags, str(exc))


def _finish_binding(d: Draft) -> None:
    try:
        binding = dataclasses.replace(d.config.binding, lock=d.lock, **d.binding)
    except ValueError as exc:
        d.problem("--node-lock-policy", str(exc))
        return
    d.changes["binding"] = binding
    if binding.policy == "devices" and not binding.device_resources:
        d.problem(
            "--device-resources",
            "must name at least one resource under policy 'devices' "
            "(or use --node-lock-policy none)",
        )


def _finish_sharding(d: Draft) -> None:
    if not d.sharding:
        return
    try:
        d.changes["sharding"] = dataclasses.replace(d.config.sharding, **d.sharding)
    except ValueError as exc:
        d.problem("--sharding-group", str(exc))


#: Each stage's closing checks, across its flags and the file's values they leave in place.
FINISH: Final[Mapping[Stage, Callable[[Draft], None]]] = {
    "plain": _nothing,
    "secure": _finish_secure,
    "election": _finish_election,
    "locks": _finish_locks,
    "binding": _finish_binding,
    "sharding": _finish_sharding,
    "debug": _nothing,
}
