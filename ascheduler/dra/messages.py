"""The allocator's error messages that changed between releases, word for word.

kube-scheduler 1.37 (dynamic-resource-allocation v0.37: `structured/internal/*/allocator_*.go`,
`cel/errors.go`) reworded two of its allocation errors, which end the pod's attempt and so
become its message:

- a selector failing at run time names the device it failed on (`selector #0 on device
  driver/pool/device`), and a missing map key (`no such key: x`) gets a hint to use optional
  chaining (`cel.EnhanceRuntimeError`);
- the claim limit is checked request by request (`claim ns/c, request r: adding 33 devices
  exceeds the claim limit of 32, with 0 already accounted for`), where 1.35 and 1.36 check
  the claim's total after all its requests (`claim ns/c: number of requested devices 33
  exceeds the claim limit of 32`).
"""

from __future__ import annotations

from typing import Final

from ascheduler.features import Features

#: `cel.EnhanceRuntimeError`'s hint (1.37), after a `no such key:` error.
OPTIONAL_HINT: Final = (
    ". consider using CEL optional chaining (.? followed by orValue()) or guarding the check "
    "with has() for optional fields"
)


def cel_runtime_error(
    features: Features, owner: str, index: int, device: tuple[str, str, str], error: str
) -> str:
    """A selector (#`index` of `owner`: `class c` or `claim ns/c`) failed on `device`."""
    if not features.since(1, 37):
        return f"{owner}: selector #{index}: CEL runtime error: {error}"
    if "no such key:" in error:
        error += OPTIONAL_HINT
    return f"{owner}: selector #{index} on device {'/'.join(device)}: CEL runtime error: {error}"


def claim_limit_per_request(features: Features) -> bool:
    """Whether the limit is checked as each request is added (1.37) rather than on the
    claim's total."""
    return features.since(1, 37)


def claim_limit_error(
    features: Features, claim: str, request: str, adding: int, counted: int, limit: int
) -> str:
    """The claim's minimum device count passed `limit`: at 1.37 when `request` added `adding`
    devices to the `counted` of the requests before it; before, `adding` is the total."""
    if claim_limit_per_request(features):
        return (
            f"claim {claim}, request {request}: adding {adding} devices exceeds the claim "
            f"limit of {limit}, with {counted} already accounted for"
        )
    return f"claim {claim}: number of requested devices {adding} exceeds the claim limit of {limit}"
