"""HAMi's bind phases: what a Binding carries onto its pod.

**The bind phase rides on the Binding.** The API server copies a Binding's
`metadata.annotations` onto the pod in the same write that binds it, so the pod never needs a
write of its own, and the scheduler needs no `patch pods`: its role is no wider than
kube-scheduler's. The phase the Binding carries (`<prefix>/bind-phase`, beside
`<prefix>/bind-time`, unix seconds) is `success`, or under HAMi's prefix (`hami.io`)
`allocating`: the state HAMi's own scheduler leaves a bound pod in, for HAMi's device plugin to
find on its node and mark `success` or `failed` after its allocation. A bind that fails binds
nothing, so nothing lands on the pod: the failure is reported as any other (a FailedScheduling
event and the pod's PodScheduled=False condition, through `pods/status`), and the pod is
scheduled again. A Binding that landed unanswered carries its phase all the same.
"""

from __future__ import annotations

from typing import Final

#: The annotation prefix of HAMi's bind-phase protocol.
HAMI_PREFIX: Final = "hami.io"


def bound_phase(prefix: str) -> str:
    """The bind phase a Binding carries onto its pod: `allocating` under HAMi's prefix
    (HAMi's device plugin finishes the protocol), `success` otherwise."""
    return "allocating" if prefix == HAMI_PREFIX else "success"


def phase_annotations(prefix: str, stamp: str) -> dict[str, str]:
    """What a Binding carries onto its pod: the bind phase, and the bind time (`stamp`, unix
    seconds)."""
    return {f"{prefix}/bind-phase": bound_phase(prefix), f"{prefix}/bind-time": stamp}
