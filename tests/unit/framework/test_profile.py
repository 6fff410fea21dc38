"""The default profile per release and gates, and a file's multiPoint merged onto it."""

from __future__ import annotations

from ascheduler.features import Features, Release, parse_gates
from ascheduler.framework import (
    MultiPointChanges,
    NoArgs,
    PluginRef,
    ProfileSpec,
    Registration,
    Registry,
    default_plugins,
    multipoint,
    multipoint_plugins,
)
from ascheduler.plugins import IN_TREE


def _plugin(name: str, weight: int | None = 1, gate: str | None = None) -> Registration[NoArgs]:
    return Registration(name, lambda _a, _h: None, NoArgs, default_weight=weight, default_gate=gate)  # type: ignore[arg-type,return-value]


def _names(refs: tuple[PluginRef, ...]) -> list[str]:
    return [r.name for r in refs]


def test_node_name_runs_before_node_unschedulable_from_1_37() -> None:
    older = _names(default_plugins(IN_TREE, Features.defaults(Release(1, 36))))
    newer = _names(default_plugins(IN_TREE, Features.defaults(Release(1, 37))))
    assert older.index("NodeUnschedulable") < older.index("NodeName")
    assert newer.index("NodeName") < newer.index("NodeUnschedulable")
    assert sorted(older) == sorted(newer)


def test_a_gated_plugin_is_in_the_defaults_while_its_gate_is_on() -> None:
    registry = Registry(
        [_plugin("A"), _plugin("Gated", gate="StorageCapacityScoring"), _plugin("B", None)]
    )
    assert _names(default_plugins(registry, parse_gates("", Release(1, 35)))) == ["A"]
    assert _names(default_plugins(registry, Features.defaults(Release(1, 37)))) == ["A", "Gated"]


def test_a_files_changes_merge_onto_the_release_s_defaults() -> None:
    spec = ProfileSpec(
        "p",
        multi_point=MultiPointChanges((PluginRef("NodeName", 4),), frozenset({"ImageLocality"})),
    )
    for release in (Release(1, 35), Release(1, 37)):
        features = Features.defaults(release)
        merged = multipoint_plugins(spec, IN_TREE, features)
        defaults = default_plugins(IN_TREE, features)
        assert "ImageLocality" not in _names(merged)
        assert PluginRef("NodeName", 4) in merged
        # In place: the same order as the release's defaults.
        assert _names(merged) == [n for n in _names(defaults) if n != "ImageLocality"]


def test_a_listed_multipoint_is_taken_as_it_is() -> None:
    spec = multipoint("p", (PluginRef("PrioritySort"), PluginRef("DefaultBinder")))
    assert _names(multipoint_plugins(spec, IN_TREE, Features.defaults(Release(1, 37)))) == [
        "PrioritySort",
        "DefaultBinder",
    ]
