"""Scenarios where the releases score or filter differently, each run on the plane's release
(`ASCHEDULER_KUBE_VERSION`) by both schedulers, scores held to kube-scheduler's logged ones:

* BalancedAllocation: the balance with the pod (1.35), the change the pod makes (1.36 on);
* ImageLocality: image volumes not looked at (1.35), summed (1.36), in the ceiling too (1.37);
* VolumeBinding: scored by default from 1.37 (StorageCapacityScoring beta);
* NodeVolumeLimits: under VolumeLimitScaling (on by default from 1.37, named here for the
  others) nodes without a volume's CSI driver are refused: any driver with a CSIDriver object
  in 1.35, only those setting `preventPodSchedulingIfMissing` from 1.36; and in-tree
  Portworx volumes count as their CSI driver's from 1.36.
"""

from __future__ import annotations

from tests.integration.differential.harness import HOSTNAME, Json, Scenario, fake_node, pause
from tests.integration.differential.scenarios import (
    MB,
    THREE,
    claim,
    csi_volume,
    storage_class,
    volume,
    with_claims,
)

RELEASES: list[Scenario] = []

# -- BalancedAllocation ----------------------------------------------------------------------

RELEASES += [
    Scenario(
        "releases: BalancedAllocation, the balance with the pod or the change it makes",
        nodes=[
            fake_node("cpu-heavy", cpu="4", memory="16Gi"),
            fake_node("empty", cpu="4", memory="16Gi"),
            fake_node("memory-heavy", cpu="8", memory="8Gi"),
        ],
        existing=[
            pause("busy-cpu", node="cpu-heavy", cpu="3", memory="1Gi"),
            pause("busy-memory", node="memory-heavy", cpu="500m", memory="6Gi"),
        ],
        pods=[
            # Evens out cpu-heavy (1.36 on: towards 100 there), unbalances the others.
            pause("wants-memory", cpu="100m", memory="8Gi"),
            pause("wants-cpu", cpu="2", memory="256Mi"),
            pause("even", cpu="1", memory="4Gi"),
            # Memory alone: cpu stays at its real (zero) request.
            pause("memory-only", cpu="0", memory="1Gi"),
        ],
        independent=True,
    ),
]

# -- ImageLocality ---------------------------------------------------------------------------

HELD = "docker.io/library/held:1"
DATA = "docker.io/library/data:1"


def image_volumes(*references: str) -> list[Json]:
    return [{"name": f"img{i}", "image": {"reference": r}} for i, r in enumerate(references)]


RELEASES += [
    Scenario(
        "releases: ImageLocality and image volumes",
        nodes=[
            fake_node("both", images=[(HELD, 600 * MB), (DATA, 900 * MB)]),
            fake_node("data", images=[(DATA, 900 * MB)]),
            fake_node("none"),
        ],
        pods=[
            # Only an image volume held: 0 everywhere in 1.35; 1.36 sums it against one
            # container's ceiling, 1.37 against two images'.
            pause("volume-only", volumes=image_volumes(DATA)),
            # A held container image and a held image volume: 1.36 reaches further.
            pause("image-and-volume", image=HELD, volumes=image_volumes(DATA)),
            # An image volume no node holds raises 1.37's ceiling only.
            pause(
                "with-unheld-volume",
                image=HELD,
                volumes=[*image_volumes(DATA, "docker.io/library/nowhere:2")],
            ),
        ],
        independent=True,
    ),
]

# -- VolumeBinding: StorageCapacityScoring by default in 1.37 ---------------------------------

RELEASES += [
    Scenario(
        "releases: VolumeBinding scores by storage capacity by default from 1.37",
        nodes=THREE,
        storage=[
            storage_class("local"),
            volume("a-2g", node="a", size="2Gi"),
            volume("b-10g", node="b", size="10Gi"),
            volume("c-4g", node="c", size="4Gi"),
            volume("c-1g", node="c", size="1Gi"),
        ],
        objects=[claim("first"), claim("second"), claim("third")],
        pods=[
            # 1.37: b's volume is the emptiest; before, the resource scores decide (a tie
            # between the three, each with a volume that fits).
            with_claims("first", "first"),
            with_claims("second", "second"),
            with_claims("third", "third"),
            # No claim: 1.37 scores it 0 on every node, before it is skipped.
            pause("no-claims"),
        ],
        # Before 1.37 nothing but the tie-break tells the nodes apart.
        ties=frozenset({"first", "second", "third", "no-claims"}),
    ),
]

# -- NodeVolumeLimits: the CSI driver installed (VolumeLimitScaling) --------------------------

GUARDED = "guarded.csi.io"
LENIENT = "lenient.csi.io"


def csi_driver(name: str, *, prevent: bool | None) -> tuple[str, Json]:
    """A CSIDriver; `prevent` sets `preventPodSchedulingIfMissing` (1.36 on: a 1.35 API
    server drops the field)."""
    spec: Json = {}
    if prevent is not None:
        spec["preventPodSchedulingIfMissing"] = prevent
    body: Json = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIDriver",
        "metadata": {"name": name},
        "spec": spec,
    }
    return ("CSIDriver", body)


def driver_check(gates: str, *, messages: bool = False) -> Scenario:
    """Nodes of growing size: `small` lists both drivers in its CSINode, `mid` only another,
    `big` has no CSINode; the guarded driver opts in, the lenient one does not. With
    `messages`, pods only the missing drivers' nodes could take, for the failure message."""
    what = "by default" if not gates else f"with {gates}"
    if messages:
        pods = [
            with_claims("guarded-on-big", "g1", nodeSelector={HOSTNAME: "big"}),
            with_claims("guarded-not-small", "g1", affinity=not_on("small")),
            with_claims("lenient-not-small", "l1", affinity=not_on("small")),
        ]
    else:
        pods = [
            # The check on: only `small` (the guarded driver opts in); off: `big`.
            with_claims("guarded", "g1"),
            # 1.35 with the gate: every driver with a CSIDriver is checked, `small`; 1.36
            # on: the lenient driver does not opt in, `big`.
            with_claims("lenient", "l1"),
        ]
    return Scenario(
        f"releases: NodeVolumeLimits and the CSI driver installed, "
        f"{'messages' if messages else 'placements'} ({what})",
        nodes=[
            fake_node("small", cpu="2", memory="4Gi"),
            fake_node("mid", cpu="4", memory="8Gi"),
            fake_node("big", cpu="32", memory="64Gi"),
        ],
        csi_nodes={"small": {GUARDED: None, LENIENT: None}, "mid": {"other.csi.io": None}},
        feature_gates=gates,
        storage=[
            storage_class("local"),
            csi_driver(GUARDED, prevent=True),
            csi_driver(LENIENT, prevent=None),
            csi_volume("g1", "g1", driver=GUARDED),
            csi_volume("l1", "l1", driver=LENIENT),
        ],
        objects=[claim("g1", volume_name="g1"), claim("l1", volume_name="l1")],
        bound_claims=["default/g1", "default/l1"],
        pods=pods,
        independent=True,
    )


def not_on(node: str) -> Json:
    expression = {"key": HOSTNAME, "operator": "NotIn", "values": [node]}
    terms = [{"matchExpressions": [expression]}]
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }
    }


RELEASES += [
    driver_check(gates, messages=messages)
    for gates in ("", "VolumeLimitScaling=true")
    for messages in (False, True)
]

# -- NodeVolumeLimits: Portworx migrated from 1.36 ----------------------------------------------

PX = "pxd.portworx.com"


def portworx_volume(name: str, claim_name: str) -> tuple[str, Json]:
    """An in-tree Portworx PersistentVolume pre-bound to `claim_name` (class `local`)."""
    body: Json = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "local",
            "persistentVolumeReclaimPolicy": "Retain",
            "portworxVolume": {"volumeID": name},
            "claimRef": {"namespace": "default", "name": claim_name},
        },
    }
    return ("PersistentVolume", body)


def inline_portworx(name: str, volume_id: str, **kw: object) -> Json:
    return pause(name, volumes=[{"name": "px", "portworxVolume": {"volumeID": volume_id}}], **kw)


RELEASES += [
    Scenario(
        "releases: NodeVolumeLimits counts in-tree Portworx volumes from 1.36",
        nodes=[fake_node("roomy", cpu="32", memory="64Gi"), fake_node("plain")],
        # No migrated-plugins annotation: 1.35 counts no Portworx volume.
        csi_nodes={"roomy": {PX: 1}, "plain": {PX: 2}},
        storage=[
            storage_class("local"),
            portworx_volume("px-1", "px-1"),
            portworx_volume("px-2", "px-2"),
        ],
        objects=[claim("px-1", volume_name="px-1"), claim("px-2", volume_name="px-2")],
        bound_claims=["default/px-1", "default/px-2"],
        existing=[
            with_claims("holder", "px-1", node="roomy"),
            inline_portworx("inline-holder", "px-3", node="plain"),
        ],
        pods=[
            # 1.35: roomy (the resource scores); from 1.36 roomy is at its count: plain.
            with_claims("claimed", "px-2"),
            inline_portworx("inline", "px-4"),
            # What roomy has already is not new there.
            with_claims("sharing", "px-1"),
        ],
        independent=True,
    ),
]
