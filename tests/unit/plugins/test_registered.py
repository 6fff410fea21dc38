"""Every registered plugin (in-tree, and those installed packages publish) against the plugin
contract: it builds from its default arguments and conforms to the interfaces it claims, it
says which events may help a pod it rejected, its arguments survive `config defaults`, and a
row-local score agrees with its columnar form."""

from __future__ import annotations

import random

import numpy as np
import pytest

from ascheduler.features import NEWEST, Features
from ascheduler.framework import (
    EXTENSION_POINTS,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    Handle,
    PermitPlugin,
    PostFilterPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    ReservePlugin,
    RowLocalScorePlugin,
)
from ascheduler.framework.args import encode
from ascheduler.framework.registry import conformance_problems
from ascheduler.plugins import IN_TREE
from tests.kit import pod_info, random_cluster

REGISTRY = IN_TREE.with_entry_points()
#: Extension points whose plugins can reject a pod: they must say what may help it.
REJECTING = (
    PreEnqueuePlugin,
    PreFilterPlugin,
    FilterPlugin,
    PostFilterPlugin,
    ReservePlugin,
    PermitPlugin,
)


def build(name: str, features: Features | None = None) -> object:
    registration = REGISTRY[name]
    handle = Handle() if features is None else Handle(features=features)
    return registration.build(registration.decode_args(None, "args"), handle)


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_it_builds_and_conforms(name: str) -> None:
    plugin = build(name)
    assert conformance_problems(plugin) == []
    assert any(isinstance(plugin, point) for point in EXTENSION_POINTS.values())


CAN_REJECT = sorted(n for n in REGISTRY if isinstance(build(n), REJECTING))


@pytest.mark.parametrize("name", CAN_REJECT)
def test_a_plugin_that_can_reject_registers_its_events(name: str) -> None:
    # At the newest release, with its default gates: a plugin that does nothing while its
    # gate is off (NodeDeclaredFeatures at 1.35) registers nothing there, as kube-scheduler's.
    plugin = build(name, Features.defaults(NEWEST))
    declared = REGISTRY[name].events
    events = plugin.events_to_register() if isinstance(plugin, EnqueueExtensions) else declared
    assert events, f"{name} can reject a pod but names no event that may help it"


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_its_default_arguments_round_trip(name: str) -> None:
    registration = REGISTRY[name]
    defaults = registration.decode_args(None, "args")
    assert registration.decode_args(encode(defaults), "args") == defaults


ROW_LOCAL = sorted(n for n in REGISTRY if isinstance(build(n), RowLocalScorePlugin))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("name", ROW_LOCAL)
def test_row_local_scores_equal_columnar_scores(name: str, seed: int) -> None:
    cache = random_cluster(seed)
    registration = REGISTRY[name]
    plugin = registration.build(
        registration.decode_args(None, "args"),
        Handle(nodes=cache.table, storage=cache.storage, attachments=cache.attachments),
    )
    assert isinstance(plugin, RowLocalScorePlugin)
    rng = random.Random(seed)
    rows = np.arange(cache.table.n, dtype=np.int64)
    for k in range(5):
        pod = pod_info(f"q{k}", cpu=f"{rng.randint(0, 2000)}m", memory=f"{rng.randint(0, 4096)}Mi")
        columnar = plugin.score(CycleState(), pod, cache.table, rows)
        one_by_one = [plugin.score_row(pod, cache.table, int(r)) for r in rows]
        assert columnar.tolist() == one_by_one
