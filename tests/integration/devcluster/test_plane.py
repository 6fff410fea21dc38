"""The local control plane is real: authenticated API, built versions, kube-scheduler binds,
kwok runs pods, and `cluster down` leaves nothing behind."""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from ascheduler.devcluster import ControlPlane, PlaneError, versions
from ascheduler.devcluster.build import Binaries
from ascheduler.devcluster.nodes import (
    FakeNodes,
    create_fake_nodes,
    delete_fake_nodes,
    wait_nodes_ready,
)
from ascheduler.devcluster.plane import PlaneState
from ascheduler.devcluster.processes import ProcessRecord, is_alive
from ascheduler.kube import KubeClient
from tests.integration.helpers import eventually, get_pod, pause_pod


def test_readyz_needs_and_accepts_client_certificates(
    plane: ControlPlane, plane_state: PlaneState
) -> None:
    assert plane.readyz().strip() == "ok"
    anonymous = ssl.create_default_context(cafile=str(plane_state.ca_cert))
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"{plane_state.server}/api/v1/nodes", context=anonymous, timeout=5)
    assert err.value.code in (401, 403)


@pytest.mark.smoke
async def test_apiserver_reports_the_pinned_release(
    kube: KubeClient, plane_state: PlaneState
) -> None:
    info = await kube.get("/version")
    assert info["gitVersion"] == versions.release().kubernetes
    assert plane_state.kubernetes_version == info["gitVersion"]


@pytest.mark.smoke
def test_binaries_report_their_versions(plane: ControlPlane) -> None:
    release = versions.release()
    assert plane.bins.release == release
    for binary in (plane.bins.kube_apiserver, plane.bins.kube_scheduler):
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=True)
        assert release.kubernetes in out.stdout
    out = subprocess.run(
        [str(plane.bins.etcd), "--version"], capture_output=True, text=True, check=True
    )
    assert release.etcd.lstrip("v") in out.stdout


async def test_kube_scheduler_binds_a_pod_and_kwok_runs_it(
    plane: ControlPlane, kube: KubeClient, namespace: str
) -> None:
    shape = FakeNodes(count=3, prefix=f"{namespace}-n", labels={"plane-test": namespace})
    names = await create_fake_nodes(kube, shape)
    await wait_nodes_ready(kube, names)
    scheduler: ProcessRecord = plane.start_kube_scheduler(name="kube-scheduler-plane-test")
    try:
        pod = pause_pod(
            "p0", scheduler_name="default-scheduler", nodeSelector={"plane-test": namespace}
        )
        await kube.post(f"/api/v1/namespaces/{namespace}/pods", pod)

        async def running() -> dict[str, object] | None:
            body = await get_pod(kube, namespace, "p0")
            return body if body.get("status", {}).get("phase") == "Running" else None

        body = await eventually(running, what="pod p0 bound and Running", timeout=90)
        assert body["spec"]["nodeName"] in names  # type: ignore[index]
        conditions = {c["type"]: c["status"] for c in body["status"]["conditions"]}  # type: ignore[index]
        assert conditions.get("PodScheduled") == "True"
    finally:
        plane.stop_process(scheduler)
        await delete_fake_nodes(kube, names)
    assert not is_alive(scheduler)


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ascheduler", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


def test_cli_up_prints_kubeconfig_and_down_stops_every_process(tmp_path: Path) -> None:
    state_dir = tmp_path / "cli-plane"
    env = dict(os.environ)
    up = _cli("cluster", "up", "--state-dir", str(state_dir), env=env)
    plane = ControlPlane.attach(state_dir)
    try:
        assert up.returncode == 0, up.stderr
        assert plane is not None
        kubeconfig = plane.require_state().admin_kubeconfig
        assert f"export KUBECONFIG={kubeconfig}" in up.stdout
        assert f"export PATH={plane.bins.kubectl.parent}:$PATH" in up.stdout
        assert plane.readyz().strip() == "ok"
        records = list(plane.require_state().processes)
        assert {r.name for r in records} == {
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kwok",
        }
        assert all(is_alive(r) for r in records)
        # The built kubectl, as `cluster up` says to use it.
        kubectl = subprocess.run(
            [str(plane.bins.kubectl), "get", "namespaces", "-o", "name"],
            capture_output=True,
            text=True,
            env={**env, "KUBECONFIG": str(kubeconfig)},
            timeout=60,
            check=False,
        )
        assert kubectl.returncode == 0, kubectl.stderr
        assert "namespace/default" in kubectl.stdout.split()

        status = _cli("cluster", "status", "--state-dir", str(state_dir), env=env)
        assert status.returncode == 0, status.stdout + status.stderr

        down = _cli("cluster", "down", "--state-dir", str(state_dir), env=env)
        assert down.returncode == 0, down.stderr
        assert not any(is_alive(r) for r in records)
        assert not state_dir.exists()
    finally:
        if plane is not None and state_dir.exists():
            plane.down()


def test_failed_start_names_the_step_and_log_and_stops_what_started(
    plane: ControlPlane, tmp_path: Path
) -> None:
    broken = tmp_path / "kube-apiserver"
    broken.write_text("#!/bin/sh\necho 'simulated failure' >&2\nexit 3\n")
    broken.chmod(0o755)
    bins = Binaries(
        etcd=plane.bins.etcd,
        kube_apiserver=broken,
        kube_scheduler=plane.bins.kube_scheduler,
        kwok=plane.bins.kwok,
        kube_controller_manager=plane.bins.kube_controller_manager,
        kubectl=plane.bins.kubectl,
        helm=plane.bins.helm,
        release=plane.bins.release,
    )
    failing = ControlPlane(tmp_path / "failing", bins=bins, die_with_parent=True)
    with pytest.raises(PlaneError) as err:
        failing.up()
    assert err.value.step == "kube-apiserver"
    assert err.value.log is not None
    assert "simulated failure" in err.value.log.read_text()
    assert (tmp_path / "failing" / "logs" / "etcd.log").exists()  # etcd had started
    assert _processes_mentioning(str(tmp_path / "failing")) == []


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and state != "Z":
            found.append(int(proc.name))
    return found


def test_busy_apiserver_port_is_reported_before_anything_starts(
    plane: ControlPlane, plane_state: PlaneState, tmp_path: Path
) -> None:
    failing = ControlPlane(
        tmp_path / "busy",
        bins=plane.bins,
        die_with_parent=True,
        apiserver_port=plane_state.apiserver_port,
    )
    with pytest.raises(PlaneError, match=f"port 127.0.0.1:{plane_state.apiserver_port}"):
        failing.up()
    assert not (tmp_path / "busy" / "logs" / "etcd.log").exists()
