"""`explain`'s pod, read as the release explain behaves as: a resized pod's requests per
release (`RequestsRule`), the object kept for extenders."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from ascheduler.explain.cold import as_release, pod_from_document
from ascheduler.features import Features, Release
from ascheduler.model import parse_pod

#: A running pod whose two containers swapped sizes: 1.35/1.36 take the largest per
#: container (2 + 2), 1.37 the largest whole-pod aggregate (spec 3, allocated/actuated 3).
RESIZED: dict[str, Any] = {
    "metadata": {"name": "p", "namespace": "d", "uid": "u"},
    "spec": {
        "containers": [
            {"name": "a", "image": "pause", "resources": {"requests": {"cpu": "2"}}},
            {"name": "b", "image": "pause", "resources": {"requests": {"cpu": "1"}}},
        ]
    },
    "status": {
        "containerStatuses": [
            {
                "name": "a",
                "resources": {"requests": {"cpu": "1"}},
                "allocatedResources": {"cpu": "1"},
            },
            {
                "name": "b",
                "resources": {"requests": {"cpu": "2"}},
                "allocatedResources": {"cpu": "2"},
            },
        ]
    },
}


@pytest.mark.parametrize(
    ("release", "cpu"),
    [(Release(1, 35), 4000), (Release(1, 36), 4000), (Release(1, 37), 3000)],
    ids=str,
)
def test_a_read_pod_is_read_again_as_the_release(release: Release, cpu: int) -> None:
    # How `read_pod` reads it, before the release is known: the object kept.
    read = dataclasses.replace(parse_pod(RESIZED), raw=RESIZED)
    got = as_release(read, Features.defaults(release))
    assert got.requests["cpu"] == cpu
    assert got.raw is RESIZED


def test_a_manifest_has_no_status_so_every_release_reads_its_spec() -> None:
    pod = pod_from_document({k: v for k, v in RESIZED.items() if k != "status"}, None)
    for minor in (35, 36, 37):
        assert as_release(pod, Features.defaults(Release(1, minor))).requests["cpu"] == 3000
