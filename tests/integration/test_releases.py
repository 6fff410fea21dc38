"""ascheduler behaves as the kube-scheduler of the plane's release: it reads the API server's
version at start, `--emulated-version` overrides it, and gates wrong at that release stop it
with kube-scheduler's message."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ascheduler.devcluster import ControlPlane, PlaneState, versions
from ascheduler.features import SUPPORTED, Release
from tests.integration.helpers import eventually, scheduler

PLANE_RELEASE = Release.parse(versions.release().kubernetes)


def _events(log: str, name: str) -> list[dict[str, Any]]:
    found = []
    for line in Path(log).read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("event") == name:
            found.append(entry)
    return found


@pytest.mark.smoke
async def test_ascheduler_behaves_as_the_plane_s_release(
    plane: ControlPlane, plane_state: PlaneState
) -> None:
    with scheduler(plane, plane_state, "release-probe", "release-probe") as record:

        async def said() -> list[dict[str, Any]]:
            return await asyncio.to_thread(_events, record.log, "behaving_as")

        entries = await eventually(said, what="the release it behaves as, logged")
    assert entries[0]["release"] == str(PLANE_RELEASE)
    assert entries[0]["api_server"] == versions.release().kubernetes


async def test_the_emulated_version_overrides_the_api_server_s(
    plane: ControlPlane, plane_state: PlaneState
) -> None:
    other = next(r for r in SUPPORTED if r != PLANE_RELEASE)
    with scheduler(
        plane, plane_state, "release-emulated", "release-emulated", "--emulated-version", str(other)
    ) as record:

        async def said() -> list[dict[str, Any]]:
            return await asyncio.to_thread(_events, record.log, "behaving_as")

        entries = await eventually(said, what="the release it behaves as, logged")
        warned = await asyncio.to_thread(_events, record.log, "release_emulated")
    assert entries[0]["release"] == str(other)
    assert warned, "running as another release than the API server's is warned of"


def test_a_gate_unknown_at_the_plane_s_release_stops_the_start(plane_state: PlaneState) -> None:
    # Known in 1.35's table only until 1.37 removed it; known from 1.36 on otherwise.
    gate = (
        "SchedulerQueueingHints=true"
        if Release(1, 37) <= PLANE_RELEASE
        else "TopologyAwareWorkloadScheduling=true"
        if Release(1, 36) > PLANE_RELEASE
        else "InterPodAffinityHostnameFastPath=true"
    )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "ascheduler",
            "run",
            "--kubeconfig",
            str(plane_state.admin_kubeconfig),
            "--secure-port",
            "0",
            "--feature-gates",
            gate,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 2
    name = gate.partition("=")[0]
    assert f"--feature-gates: unrecognized feature gate: {name} (at release {PLANE_RELEASE})" in (
        run.stderr
    )
