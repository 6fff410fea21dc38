"""ImageLocality: the sizes of the pod's images a node holds, scaled by how many nodes hold
them, clamped to 23 MiB .. 1000 MiB per container and mapped onto 0..100."""

from __future__ import annotations

from typing import Any

import pytest

from ascheduler.features import Features, Release
from ascheduler.framework import PreScorePlugin
from ascheduler.model import parse_pod
from ascheduler.plugins.imagelocality import normalized_image_name
from tests.kit import container, make_cache, make_plugin, node, pod, run_score

NAME = "ImageLocality"
MB = 1024 * 1024


def holding(name: str, *images: tuple[list[str], int]) -> dict[str, Any]:
    raw = node(name)
    raw["status"]["images"] = [{"names": names, "sizeBytes": size} for names, size in images]
    return raw


def with_images(*images: str) -> dict[str, Any]:
    return pod("p", containers=[{**container(f"c{i}"), "image": im} for i, im in enumerate(images)])


@pytest.mark.parametrize(
    ("given", "normal"),
    [
        ("nginx", "nginx:latest"),
        ("nginx:1.27", "nginx:1.27"),
        ("registry:5000/team/app", "registry:5000/team/app:latest"),
        ("registry:5000/team/app:v2", "registry:5000/team/app:v2"),
    ],
)
def test_image_names_are_normalised(given: str, normal: str) -> None:
    assert normalized_image_name(given) == normal


def test_nodes_holding_big_images_score_higher() -> None:
    nodes = [
        holding("a", (["gcr.io/big:1"], 500 * MB), (["gcr.io/small:1"], 200 * MB)),
        holding("b", (["gcr.io/big:1"], 500 * MB)),
        holding("c"),
        holding("d"),
    ]
    cache = make_cache(nodes)
    got = run_score(make_plugin(NAME, cache), with_images("gcr.io/big:1", "gcr.io/small:1"), cache)
    # big: 500 MiB * 2/4 = 250 MiB on a and b; small: 200 MiB * 1/4 = 50 MiB on a.
    # Two containers: 100 * (sum - 23 MiB) // (2000 MiB - 23 MiB).
    a = 100 * (250 * MB + int(200 * MB * 0.25) - 23 * MB) // (2000 * MB - 23 * MB)
    b = 100 * (250 * MB - 23 * MB) // (2000 * MB - 23 * MB)
    assert got == {"a": a, "b": b, "c": 0, "d": 0}
    assert a > b > 0


def test_no_image_anywhere_scores_zero_everywhere() -> None:
    """No PreScore (none in kube-scheduler's either): never skipped, every node scores 0."""
    cache = make_cache([holding("a"), holding("b", (["other:1"], 900 * MB))])
    plugin = make_plugin(NAME, cache)
    assert not isinstance(plugin, PreScorePlugin)
    assert run_score(plugin, with_images("mine:1"), cache) == {"a": 0, "b": 0}


def test_scores_over_the_feasible_rows_count_every_node() -> None:
    """The share of nodes holding an image is over all nodes, not the feasible ones."""
    cache = make_cache([holding("a", (["x:1"], 800 * MB)), holding("b"), holding("c")])
    got = run_score(make_plugin(NAME, cache), with_images("x:1"), cache, feasible=["a", "b"])
    # 800 MiB * (1/3) as Go computes it, one container: 100 * (sum - 23 MiB) // 977 MiB.
    assert got == {"a": 100 * (int(800 * MB * (1 / 3)) - 23 * MB) // (977 * MB), "b": 0}


def test_image_states_follow_node_updates_and_removal() -> None:
    from ascheduler.model import parse_node

    cache = make_cache([holding("a", (["x:1"], 800 * MB)), holding("b")])
    assert cache.table.image("x:1") == (800 * MB, ["a"])
    cache.update_node(parse_node(holding("a")))
    assert cache.table.image("x:1") == (0, [])
    cache.update_node(parse_node(holding("b", (["x:1"], 700 * MB))))
    cache.remove_node("b")
    assert cache.table.image("x:1") == (0, [])


def with_image_volumes(image: str, *references: str) -> dict[str, Any]:
    raw = with_images(image)
    raw["spec"]["volumes"] = [
        {"name": "scratch", "emptyDir": {}},
        *({"name": f"v{i}", "image": {"reference": r}} for i, r in enumerate(references)),
    ]
    return raw


def score_of(total: int, count: int) -> int:
    """`calculatePriority` by hand: the clamped sum mapped onto 0..100."""
    top = 1000 * MB * count
    return 100 * (min(max(total, 23 * MB), top) - 23 * MB) // (top - 23 * MB)


IMAGE_VOLUME_NODES = [
    holding("a", (["gcr.io/app:1"], 600 * MB), (["gcr.io/data:1"], 900 * MB)),
    holding("b", (["gcr.io/data:1"], 900 * MB)),
    holding("c"),
    holding("d"),
]
#: app:1 on a, 600 MiB * 1/4; data:1 on a and b, 900 MiB * 2/4.
APP, DATA = 150 * MB, 450 * MB


@pytest.mark.parametrize(
    ("release", "expected"),
    [
        # 1.35: image volumes are not looked at: app:1 alone, one container's ceiling.
        pytest.param(Release(1, 35), {"a": score_of(APP, 1), "b": 0, "c": 0, "d": 0}, id="1.35"),
        # 1.36: data:1 summed too, the ceiling still one container's.
        pytest.param(
            Release(1, 36),
            {"a": score_of(APP + DATA, 1), "b": score_of(DATA, 1), "c": 0, "d": 0},
            id="1.36",
        ),
        # 1.37: both image volumes (one held by no node) raise the ceiling: three images.
        pytest.param(
            Release(1, 37),
            {"a": score_of(APP + DATA, 3), "b": score_of(DATA, 3), "c": 0, "d": 0},
            id="1.37",
        ),
    ],
)
def test_image_volumes_per_release(release: Release, expected: dict[str, int]) -> None:
    cache = make_cache(IMAGE_VOLUME_NODES)
    plugin = make_plugin(NAME, cache, features=Features.defaults(release))
    raw = with_image_volumes("gcr.io/app:1", "gcr.io/data:1", "gcr.io/nowhere:2")
    got = run_score(plugin, raw, cache)
    assert got == expected
    assert got["a"] > 0


def test_image_volume_references_are_parsed() -> None:
    raw = with_image_volumes("app:1", "data:1", "")
    raw["spec"]["volumes"].append({"name": "bad", "image": {"reference": 7}})
    info = parse_pod(raw)
    assert info.image_volumes == ("data:1", "", "")
    assert info.errors == ("spec.volumes[3].image.reference: expected a string",)
