"""Device binding conditions (DRADeviceBindingConditions: off in 1.35, on from 1.36), each
run on the plane's release by both schedulers:

* a pod whose only devices have binding conditions: unschedulable in 1.35 (such devices are
  never allocated), held in PreBind from 1.36 (allocated and reserved, waiting for a
  controller that never comes) by both, while a pod without claims binds;
* pools with such devices are tried last from 1.36: a node with one pool of them and one
  plain pool gets its plain device allocated, and the pod binds without waiting (were the
  pool of waiting devices tried first, its pod would wait in PreBind).
"""

from __future__ import annotations

from tests.integration.differential.harness import Json, Scenario, pause
from tests.integration.differential.scenarios import (
    THREE,
    claiming,
    device_claim,
    device_class,
    device_slice,
    gpu,
    want,
)


def attachable(name: str, model: str) -> Json:
    """A device a controller must attach before a pod using it binds."""
    return {
        **gpu(name, model),
        "bindingConditions": ["Attached"],
        "bindingFailureConditions": ["AttachFailed"],
    }


DRA_BINDCOND: list[Scenario] = [
    Scenario(
        "dra bindcond: a device with binding conditions, unschedulable or held in PreBind",
        nodes=THREE,
        devices=[
            device_class("gpu"),
            device_slice("a-attach", [attachable("x0", "a100")], node="a"),
        ],
        objects=[device_claim("one", want("r", "gpu", 1))],
        pods=[claiming("waits", "one"), pause("plain")],
        together=True,
        held=frozenset({"waits"}),
        # No dry run together: b and c tie for the pod without claims.
        ties=frozenset({"plain"}),
    ),
    Scenario(
        "dra bindcond: pools with binding conditions are tried last",
        nodes=THREE,
        devices=[
            device_class("gpu"),
            # The pool of waiting devices sorts first: from 1.36 it is still tried last.
            device_slice("a0-attach", [attachable("x0", "a100")], node="a"),
            device_slice("a1-plain", [gpu("g0", "a100")], node="a"),
        ],
        objects=[device_claim("one", want("r", "gpu", 1))],
        pods=[claiming("first", "one")],
    ),
]
