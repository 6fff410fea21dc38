"""Device binding conditions (DRADeviceBindingConditions with DRAResourceClaimDeviceStatus,
beta and on from 1.36): a device may name conditions that must be True in the claim's
`status.devices[].conditions` before a pod using it is bound (`bindingConditions`, set by a
controller that attaches the device, say), and conditions that say attaching failed
(`bindingFailureConditions`).

What kube-scheduler does (v1.36/v1.37 `plugins/dynamicresources/dynamicresources.go`; the
allocator is `dra.allocator`, which records the conditions in the allocation and tries pools
with such devices last):

- **PreBind**, once the claims are written, waits while any allocated device of the pod's
  claims has binding conditions: every 5 seconds (the first check at once) it reads the
  claims and is done when each such device's conditions are all True; a failure condition
  True fails the cycle (`device binding failed: claim=c, reason=R, message="M"`), and so
  does `bindingTimeout` (DynamicResourcesArgs, default 10 minutes) passing, from PreBind's
  start (`device binding timeout: context deadline exceeded`) or from the claim's
  `allocationTimestamp` (`device binding timeout: claim=c`). PreBind also writes that
  timestamp on every claim it reserves that lacks one.
- A failed PreBind is a failed binding cycle: Unreserve takes the pod out of the claim's
  `reservedFor` and the allocation stays. The next attempt's **Filter** finds the claim
  failed or timed out and rejects every node for it (`resourceclaim not available on the
  node`), so **PostFilter** deallocates it and a later attempt allocates afresh.

ascheduler waits the same way, off the event loop's critical path: the wait is an await in
the pod's binding task, holding no device lock (the claim writes under them are done) and
giving up its binding slot meanwhile (`slot_released`), so other pods keep binding.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Final

import structlog

from ascheduler.durations import go_duration
from ascheduler.features import (
    DRA_DEVICE_BINDING_CONDITIONS,
    DRA_RESOURCE_CLAIM_DEVICE_STATUS,
    Features,
)
from ascheduler.framework import SUCCESS, Seconds, Status
from ascheduler.model.dra import ResourceClaim
from ascheduler.plugins.dynamicresources.state import DynamicResourcesArgs, go_quote

log = structlog.get_logger(__name__)

#: kube-scheduler's `DynamicResourcesBindingTimeoutDefault`.
DEFAULT_BINDING_TIMEOUT: Final = Seconds(600.0)
#: How often PreBind looks at the claims again (kube-scheduler's poll interval).
POLL_INTERVAL: Final = 5.0
FAILED: Final = "device binding failed"
TIMEOUT: Final = "device binding timeout"


def enabled(features: Features) -> bool:
    """Both gates kube-scheduler asks for (`DeviceBindingAndStatus`)."""
    return (
        DRA_DEVICE_BINDING_CONDITIONS in features and DRA_RESOURCE_CLAIM_DEVICE_STATUS in features
    )


def args_problems(args: DynamicResourcesArgs, features: Features) -> list[str]:
    """`ValidateDynamicResourcesArgs` for `bindingTimeout`: at least a second with the gates
    on, not to be set with either off."""
    timeout = args.binding_timeout
    if timeout is None:
        return []
    if not enabled(features):
        return [
            "bindingTimeout: Forbidden: DRADeviceBindingConditions or "
            "DRAResourceClaimDeviceStatus feature gate is disabled"
        ]
    if timeout < 1:
        return [
            f'bindingTimeout: Invalid value: "{go_duration(timeout)}": must be at least 1 second'
        ]
    return []


def with_binding_timeout(args: DynamicResourcesArgs, features: Features) -> DynamicResourcesArgs:
    """`SetDefaults_DynamicResourcesArgs`: 10 minutes when left out with the gates on."""
    if args.binding_timeout is not None or not enabled(features):
        return args
    return dataclasses.replace(args, binding_timeout=DEFAULT_BINDING_TIMEOUT)


class BindingFailed(Exception):
    """A binding failure condition is True (the message is kube-scheduler's)."""


def has_binding_conditions(claims: Sequence[ResourceClaim]) -> bool:
    return any(
        d.binding_conditions
        for c in claims
        if c.allocation is not None
        for d in c.allocation.devices
    )


def claim_ready(claim: ResourceClaim) -> bool:
    """kube-scheduler's isClaimReadyForBinding: every device with binding conditions has
    them all True and no failure condition True (BindingFailed for the first that is)."""
    if claim.allocation is None:
        return False
    for d in claim.allocation.devices:
        if not d.binding_conditions:
            continue
        conditions = claim.device_conditions.get(d.device_id)
        if conditions is None:
            return False
        for name in d.binding_failure_conditions:
            found = conditions.get(name)
            if found is not None and found[0] == "True":
                raise BindingFailed(
                    f"{FAILED}: claim={claim.name}, reason={found[1]}, message={go_quote(found[2])}"
                )
        for name in d.binding_conditions:
            found = conditions.get(name)
            if found is None or found[0] != "True":
                return False
    return True


def timed_out(claim: ResourceClaim, timeout: Seconds, now: datetime) -> bool:
    """kube-scheduler's isClaimTimeout: a device with binding conditions, and the claim's
    `allocationTimestamp` more than `timeout` ago."""
    allocation = claim.allocation
    if allocation is None or not allocation.timestamp:
        return False
    if not any(d.binding_conditions for d in allocation.devices):
        return False
    try:
        stamp = datetime.fromisoformat(allocation.timestamp.replace("Z", "+00:00"))
    except ValueError:
        return False
    return (now - stamp).total_seconds() > timeout


def unusable(claim: ResourceClaim, timeout: Seconds, now: datetime) -> str | None:
    """Why Filter must not use an allocated claim (its binding failed or timed out), or
    None."""
    try:
        if claim_ready(claim):
            return None
    except BindingFailed as exc:
        return str(exc)
    if timed_out(claim, timeout, now):
        return f"{TIMEOUT}: claim={claim.name}"
    return None


def now_stamp() -> str:
    """`metav1.Now()` as the API writes it (RFC 3339, seconds)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def wait_ready(
    claims: Sequence[ResourceClaim],
    latest: Callable[[ResourceClaim], ResourceClaim | None],
    timeout: Seconds,
    pod: str,
    node: str,
) -> Status:
    """PreBind's wait: `latest(claim)` the claim as the cache has it now (None: gone)."""
    if not has_binding_conditions(claims):
        return SUCCESS
    log.info("binding_conditions_pending", pod=pod, node=node)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        status = _check(claims, latest, timeout)
        if status is not None:
            log.info("binding_conditions_done", pod=pod, node=node, status=status.message)
            return status
        left = deadline - loop.time()
        if left <= 0:
            message = f"{TIMEOUT}: context deadline exceeded"
            log.info("binding_conditions_done", pod=pod, node=node, status=message)
            return Status.error(message)
        await asyncio.sleep(min(POLL_INTERVAL, left))


def _check(
    claims: Sequence[ResourceClaim],
    latest: Callable[[ResourceClaim], ResourceClaim | None],
    timeout: Seconds,
) -> Status | None:
    """SUCCESS when every claim is ready, an error status when one failed or timed out,
    None to wait on (kube-scheduler's isPodReadyForBinding)."""
    now = datetime.now(UTC)
    for claim in claims:
        current = latest(claim)
        if current is None or current.uid != claim.uid:
            return Status.error(f'resourceclaim.resource.k8s.io "{claim.name}" not found')
        try:
            ready = claim_ready(current)
        except BindingFailed as exc:
            return Status.error(str(exc))
        if not ready:
            if timed_out(current, timeout, now):
                return Status.error(f"{TIMEOUT}: claim={current.name}")
            return None
    return SUCCESS


def unusable_claims(
    claims: Sequence[ResourceClaim], features: Features, timeout: Seconds | None
) -> list[int]:
    """Filter's check: the allocated claims whose binding failed or timed out (every node
    rejects the pod for them, and PostFilter may deallocate one)."""
    if timeout is None or not enabled(features):
        return []
    now = datetime.now(UTC)
    out = []
    for i, claim in enumerate(claims):
        if claim.allocation is None:
            continue
        why = unusable(claim, timeout, now)
        if why is not None:
            log.info("resourceclaim_binding_unusable", claim=claim.key, reason=why)
            out.append(i)
    return out
