"""ImageLocality: prefer nodes that already hold the pod's images (weight 1 in the default
profile), with kube-scheduler's rules.

Each of the pod's containers and init containers whose image (normalised: `:latest` added
where no tag is given) a node reports in `status.images` adds the image's size scaled by the
share of all nodes that hold it (so an image everywhere does not pull pods together). The
sum, clamped between 23 MiB and 1000 MiB per container, maps linearly onto 0..100.

Image volumes (`spec.volumes[].image.reference`) count as images from 1.36: added to the sum
there, while the 1000 MiB ceiling still counts containers only (so such a pod reaches 100
sooner); from 1.37 every image volume, held by a node or not, raises the ceiling too.

Per pod the work is one lookup per image and numpy over the nodes holding it; a cluster whose
nodes report no images (kwok's) costs a dictionary miss per container.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from ascheduler.framework import (
    MAX_NODE_SCORE,
    CycleState,
    Handle,
    IntArray,
    NoArgs,
    NodeTable,
    Registration,
    ScorePlugin,
)
from ascheduler.model import PodInfo

NAME: Final = "ImageLocality"
MB: Final = 1024 * 1024
MIN_THRESHOLD: Final = 23 * MB
MAX_CONTAINER_THRESHOLD: Final = 1000 * MB


def normalized_image_name(name: str) -> str:
    """kube-scheduler's `normalizedImageName`: `:latest` when the name has no tag."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def priority(sums: IntArray, containers: int) -> IntArray:
    """`calculatePriority`: the clamped sum mapped onto 0..100 (integer arithmetic)."""
    top = MAX_CONTAINER_THRESHOLD * containers
    clamped = np.clip(sums, MIN_THRESHOLD, top)
    out: IntArray = MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) // (top - MIN_THRESHOLD)
    return out


class ImageLocality(ScorePlugin):
    """Score only, as kube-scheduler's: no PreScore, so it is never skipped (where no node
    holds any of the images, every node scores 0, and says so), and enabling it at the
    preScore extension point is refused as there."""

    name = NAME

    def __init__(self, *, volume_images: bool = False, volume_ceiling: bool = False) -> None:
        #: 1.36 on: image volumes' images are summed.
        self.volume_images = volume_images
        #: 1.37 on: and each raises the ceiling by 1000 MiB.
        self.volume_ceiling = volume_ceiling

    def score(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, feasible: IntArray
    ) -> IntArray:
        images = (*pod.images, *pod.image_volumes) if self.volume_images else pod.images
        count = len(images) if self.volume_ceiling else len(pod.images)
        held: list[tuple[list[int], int]] = []
        for image in images if nodes.n else ():
            size, holders = nodes.image(normalized_image_name(image))
            rows = [nodes.index[h] for h in holders if h in nodes.index]
            if rows:
                # int64(float64(size) * float64(numNodes) / float64(total)), as Go computes it
                held.append((rows, int(float(size) * (len(holders) / nodes.n))))
        if not held:
            return np.zeros(feasible.size, dtype=np.int64)
        sums = np.zeros(nodes.n, dtype=np.int64)
        for rows, scaled in held:
            sums[rows] += scaled
        out: IntArray = priority(sums[feasible], count)
        return out


def new(args: NoArgs, handle: Handle) -> ImageLocality:
    since = handle.features.since
    return ImageLocality(volume_images=since(1, 36), volume_ceiling=since(1, 37))


REGISTRATION: Final = Registration(NAME, new, NoArgs, events=frozenset(), default_weight=1)
