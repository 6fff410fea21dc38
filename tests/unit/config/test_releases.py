"""A configuration read as each release reads it: NodeResourcesFit's `requestedToCapacityRatio`
(required with its type and forbidden with the others from 1.36), the workload scheduling
plugin sets (`placementGenerate`, `placementScore` from 1.36, `podGroupPostFilter` from 1.37),
VolumeBinding's shape defaulted with StorageCapacityScoring, and the same file checked again
at another release (`release_problems`)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from ascheduler.app import behave_as
from ascheduler.config import API_VERSION, KIND, Overrides, parse, release_problems, resolve
from ascheduler.config.profiles import RELEASE_POINTS
from ascheduler.features import NEWEST, Features, Release, parse_gates
from ascheduler.framework import POINT_SINCE, ConfigError, Handle
from ascheduler.framework.runtime import Framework
from ascheduler.kube import KubeClient
from ascheduler.plugins import IN_TREE

HEAD = {"apiVersion": API_VERSION, "kind": KIND}
ARGS = "profiles[0].pluginConfig[0].args"


def at(release: str) -> Features:
    return Features.defaults(Release.parse(release))


def fit(strategy: dict[str, Any]) -> dict[str, Any]:
    return {
        **HEAD,
        "profiles": [
            {
                "schedulerName": "s",
                "pluginConfig": [
                    {"name": "NodeResourcesFit", "args": {"scoringStrategy": strategy}}
                ],
            }
        ],
    }


SHAPE = {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}
RATIO_ON_LEAST = fit({"type": "LeastAllocated", "requestedToCapacityRatio": SHAPE})
RATIO_MISSING = fit({"type": "RequestedToCapacityRatio"})


def problems(document: dict[str, Any], release: str) -> list[str]:
    try:
        parse(document, IN_TREE, at(release))
    except ConfigError as exc:
        return exc.problems
    return []


@pytest.mark.parametrize("release", ["1.35", "1.36", "1.37"])
def test_a_ratio_with_its_type_is_accepted_everywhere(release: str) -> None:
    document = fit({"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": SHAPE})
    assert problems(document, release) == []


def test_a_ratio_with_another_type_is_ignored_by_1_35_and_forbidden_from_1_36() -> None:
    assert problems(RATIO_ON_LEAST, "1.35") == []
    for release in ("1.36", "1.37"):
        assert problems(RATIO_ON_LEAST, release) == [
            f"{ARGS}.scoringStrategy.requestedToCapacityRatio: Forbidden: must be nil when "
            f"type is not RequestedToCapacityRatio"
        ]


def test_the_ratio_type_without_its_parameter_is_refused_in_each_release_s_words() -> None:
    assert problems(RATIO_MISSING, "1.35") == [
        f"{ARGS}.scoringStrategy.requestedToCapacityRatio.shape: at least one point is required"
    ]
    assert problems(RATIO_MISSING, "1.37") == [
        f"{ARGS}.scoringStrategy.requestedToCapacityRatio: Required value: must be specified "
        f"when type is RequestedToCapacityRatio"
    ]


def test_a_file_read_at_1_35_is_checked_again_at_the_cluster_s_release() -> None:
    config = parse(RATIO_ON_LEAST, IN_TREE, at("1.35"))
    assert release_problems(config, IN_TREE, at("1.35")) == []
    assert release_problems(config, IN_TREE, at("1.36")) == [
        f"{ARGS}.scoringStrategy.requestedToCapacityRatio: Forbidden: must be nil when type "
        f"is not RequestedToCapacityRatio"
    ]


def test_the_flags_release_reads_the_file(tmp_path: Any) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        "profiles:\n"
        "- schedulerName: s\n"
        "  plugins:\n"
        "    podGroupPostFilter:\n"
        "      disabled: [{name: '*'}]\n"
    )
    with pytest.raises(ConfigError):
        resolve(str(path), Overrides(emulated_version="1.36"), IN_TREE)
    config = resolve(str(path), Overrides(emulated_version="1.37"), IN_TREE)
    assert config.features.release == Release(1, 37)
    # Without the flag: the default release, the newest.
    assert resolve(str(path), Overrides(), IN_TREE).features.release == NEWEST


def placement(point: str, entries: dict[str, Any]) -> dict[str, Any]:
    return {**HEAD, "profiles": [{"schedulerName": "s", "plugins": {point: entries}}]}


@pytest.mark.parametrize(
    ("point", "since"),
    [("placementGenerate", "1.36"), ("placementScore", "1.36"), ("podGroupPostFilter", "1.37")],
)
def test_the_workload_plugin_sets_are_fields_from_their_release(point: str, since: str) -> None:
    document = placement(point, {"disabled": [{"name": "*"}]})
    for release in ("1.35", "1.36", "1.37"):
        got = problems(document, release)
        if Release.parse(release) >= Release.parse(since):
            assert got == [], release
        else:
            assert got == [f"profiles[0].plugins.{point}: unknown field"], release


def test_the_release_of_each_new_extension_point_is_the_one_its_field_came_with() -> None:
    assert POINT_SINCE
    for point, (major, minor) in POINT_SINCE.items():
        assert RELEASE_POINTS[point] == Release(major, minor)
    # The placement points have no plugin in ascheduler: their fields came with 1.36.
    assert RELEASE_POINTS["placementGenerate"] == RELEASE_POINTS["placementScore"] == Release(1, 36)


def test_a_workload_plugin_set_enables_nothing_ascheduler_has() -> None:
    document = placement("placementScore", {"enabled": [{"name": "NodeResourcesFit"}]})
    assert problems(document, "1.37") == [
        "profiles[0].plugins.placementScore.enabled[0].name: 'NodeResourcesFit' does not "
        "extend placementScore: ascheduler has no placementScore plugins"
    ]


def test_a_profile_s_pod_group_post_filter_set_orders_and_disables_its_plugins() -> None:
    """kube-scheduler's rules for any point: the point's own entries that name multiPoint's
    plugins come first, then multiPoint's, less the disabled."""
    features = parse_gates("GenericWorkload=true", Release(1, 37))
    cases = [
        ({}, ["DynamicResources", "DefaultPreemption"]),
        ({"enabled": [{"name": "DefaultPreemption"}]}, ["DefaultPreemption", "DynamicResources"]),
        ({"disabled": [{"name": "DynamicResources"}]}, ["DefaultPreemption"]),
        ({"disabled": [{"name": "*"}]}, []),
    ]
    for entries, expected in cases:
        config = parse(placement("podGroupPostFilter", entries), IN_TREE, features)
        fw = Framework(config.profiles[0], IN_TREE, Handle(features=features))
        assert [p.name for p in fw.pod_group_post_filter_plugins] == expected, entries
    document = placement("podGroupPostFilter", {"enabled": [{"name": "NodeResourcesFit"}]})
    assert problems(document, "1.37") == [
        "profiles[0].plugins.podGroupPostFilter.enabled[0].name: plugin 'NodeResourcesFit' "
        "does not implement podGroupPostFilter"
    ]


def test_volume_binding_s_shape_is_defaulted_where_storage_capacity_scoring_is_on() -> None:
    document = {**HEAD, "profiles": [{"schedulerName": "s"}]}
    for release, shape in (("1.35", None), ("1.36", None), ("1.37", ((0, 10), (100, 0)))):
        config = parse(document, IN_TREE, at(release))
        fw = Framework(config.profiles[0], IN_TREE, Handle(features=config.features))
        args = fw.args["VolumeBinding"]
        got = None if args.shape is None else tuple((p.utilization, p.score) for p in args.shape)
        assert got == shape, release


class _Version:
    """What `behave_as` asks of the API server: its /version."""

    def __init__(self, git_version: str) -> None:
        self.git_version = git_version

    async def get(self, path: str) -> dict[str, str]:
        assert path == "/version"
        return {"gitVersion": self.git_version}


async def test_behave_as_refuses_what_the_api_server_s_release_refuses() -> None:
    config = parse(RATIO_ON_LEAST, IN_TREE, at("1.35"))  # read as 1.35 reads it: accepted
    same = await behave_as(config, cast(KubeClient, _Version("v1.35.4")))
    assert same.features.release == Release(1, 35)
    with pytest.raises(ConfigError) as raised:
        await behave_as(config, cast(KubeClient, _Version("v1.37.2")))
    assert raised.value.problems == [
        f"{ARGS}.scoringStrategy.requestedToCapacityRatio: Forbidden: must be nil when type "
        f"is not RequestedToCapacityRatio (at release 1.37)"
    ]
