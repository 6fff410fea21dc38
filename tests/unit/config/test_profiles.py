"""Profiles merged onto the default one and expanded point by point as kube-scheduler v1.35
merges (`mergePluginSet`) and expands (`expandMultiPointPlugins`, `getScoreWeights`) them."""

from __future__ import annotations

from typing import Any

import pytest

from ascheduler.config import API_VERSION, KIND, parse
from ascheduler.framework import ConfigError, Handle, PluginRef, merge
from ascheduler.framework.runtime import Framework
from ascheduler.plugins import IN_TREE

HEAD = {"apiVersion": API_VERSION, "kind": KIND}


def framework(plugins: dict[str, Any]) -> Framework:
    config = parse({**HEAD, "profiles": [{"schedulerName": "s", "plugins": plugins}]}, IN_TREE)
    return Framework(config.profiles[0], IN_TREE, Handle())


def names(plugins: list[Any]) -> list[str]:
    return [p.name for p in plugins]


def test_a_default_plugin_named_without_a_weight_is_replaced_at_weight_one() -> None:
    assert (
        Framework(parse(HEAD, IN_TREE).profiles[0], IN_TREE, Handle()).weights["TaintToleration"]
        == 3
    )
    fw = framework({"multiPoint": {"enabled": [{"name": "TaintToleration"}]}})
    assert fw.weights["TaintToleration"] == 1
    assert (
        framework({"multiPoint": {"enabled": [{"name": "NodeAffinity", "weight": 7}]}}).weights[
            "NodeAffinity"
        ]
        == 7
    )


def test_merge_replaces_in_place_and_appends_the_rest() -> None:
    defaults = [PluginRef("A", 1), PluginRef("B", 3), PluginRef("C", 1)]
    merged = merge(defaults, [PluginRef("D", 2), PluginRef("B", 0)], {"C"})
    assert merged == (PluginRef("A", 1), PluginRef("B", 0), PluginRef("D", 2))
    # Disabled and enabled: moved to the end; listed twice: kept twice.
    assert merge(defaults, [PluginRef("A", 5)], {"A"}) == (*defaults[1:], PluginRef("A", 5))
    twice = merge(defaults, [PluginRef("B", 1), PluginRef("B", 2)], set())
    assert [r.name for r in twice] == ["A", "B", "C", "B"]


def test_a_point_orders_overrides_then_multipoint_then_its_own() -> None:
    fw = framework({"filter": {"enabled": [{"name": "NodeResourcesFit"}, {"name": "NodePorts"}]}})
    order = names(fw.filter_plugins)
    # Both override multiPoint's entries: first, in the point's order.
    assert order[:2] == ["NodeResourcesFit", "NodePorts"]
    assert order.count("NodePorts") == 1


def test_the_score_points_own_weight_wins_and_a_star_keeps_multipoint_away() -> None:
    fw = framework(
        {
            "score": {
                "disabled": [{"name": "*"}],
                "enabled": [{"name": "ImageLocality", "weight": 5}, {"name": "NodeAffinity"}],
            }
        }
    )
    assert names(fw.score_plugins) == ["ImageLocality", "NodeAffinity"]
    assert (fw.weights["ImageLocality"], fw.weights["NodeAffinity"]) == (5, 1)


@pytest.mark.parametrize(
    ("plugins", "problem"),
    [
        (
            {"multiPoint": {"enabled": [{"name": "TaintToleration"}, {"name": "TaintToleration"}]}},
            "plugins.multiPoint.enabled: plugin 'TaintToleration' is enabled twice",
        ),
        (
            {"filter": {"enabled": [{"name": "NodePorts"}, {"name": "NodePorts"}]}},
            "plugins.filter.enabled[1].name: plugin 'NodePorts' is already enabled at filter",
        ),
        (
            {"preScore": {"enabled": [{"name": "NodeResourcesFit"}, {"name": "NodeResourcesFit"}]}},
            "plugins.preScore.enabled[1].name: plugin 'NodeResourcesFit' is already enabled at "
            "preScore",
        ),
        (
            {"preFilter": {"enabled": [{"name": "TaintToleration"}]}},
            "plugins.preFilter.enabled[0].name: plugin 'TaintToleration' does not implement "
            "preFilter",
        ),
        (
            {"score": {"enabled": [{"name": "ImageLocality", "weight": -1}]}},
            "plugins: total score of Score plugins could overflow",
        ),
    ],
)
def test_what_kube_scheduler_refuses_is_refused(plugins: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError) as err:
        framework(plugins)
    assert err.value.problems == [f"profiles[0].{problem}"]


def test_a_negative_weight_on_the_last_score_plugin_passes() -> None:
    fw = framework(
        {
            "multiPoint": {
                "disabled": [{"name": "ImageLocality"}],
                "enabled": [{"name": "ImageLocality", "weight": -1}],
            }
        }
    )
    assert fw.weights["ImageLocality"] == -1


def test_unknown_names_in_disabled_and_plugin_config_are_passed_over() -> None:
    config = parse(
        {
            **HEAD,
            "profiles": [
                {
                    "plugins": {"multiPoint": {"disabled": [{"name": "NodeDeclaredFeatures"}]}},
                    "pluginConfig": [{"name": "SomeoneElses", "args": {"x": 1}}],
                }
            ],
        },
        IN_TREE,
    )
    assert "SomeoneElses" not in config.profiles[0].args


def test_args_of_a_disabled_plugin_are_still_checked() -> None:
    with pytest.raises(ConfigError) as err:
        parse(
            {
                **HEAD,
                "profiles": [
                    {
                        "plugins": {"multiPoint": {"disabled": [{"name": "InterPodAffinity"}]}},
                        "pluginConfig": [
                            {"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 101}}
                        ],
                    }
                ],
            },
            IN_TREE,
        )
    assert err.value.problems[0].startswith(
        "profiles[0].pluginConfig[0].args.hardPodAffinityWeight"
    )


def test_profiles_share_one_queue_sort() -> None:
    with pytest.raises(ConfigError) as err:
        parse(
            {
                **HEAD,
                "profiles": [
                    {"schedulerName": "a"},
                    {
                        "schedulerName": "b",
                        "plugins": {"queueSort": {"enabled": [{"name": "PrioritySort"}]}},
                    },
                ],
            },
            IN_TREE,
        )
    assert err.value.problems == [
        "profiles[1].plugins.queueSort: must be the same for all profiles"
    ]


def test_a_point_only_kube_scheduler_s_plugin_runs_at_is_accepted_and_inert() -> None:
    """kube-scheduler's NodeResourcesFit has a PreFilter and a PreScore, its NodePorts a
    PreFilter; ascheduler's do that work in Filter and Score. A file enabling them there is
    kube-scheduler's, and runs the same profile."""
    default = framework({})
    fw = framework(
        {
            "preFilter": {"enabled": [{"name": "NodeResourcesFit"}, {"name": "NodePorts"}]},
            "preScore": {"enabled": [{"name": "NodeResourcesFit"}]},
        }
    )
    assert names(fw.pre_filter_plugins) == names(default.pre_filter_plugins)
    assert names(fw.pre_score_plugins) == names(default.pre_score_plugins)
    assert names(fw.filter_plugins) == names(default.filter_plugins)
