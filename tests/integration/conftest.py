"""One real control plane for the whole integration session, a namespace per test.

The plane is built (once, cached) and started before the first integration test and stopped,
by pid, after the last. Its processes also die with the test run if it is killed outright.
"""

from __future__ import annotations

import hashlib
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from ascheduler.devcluster import ControlPlane, ensure_built
from ascheduler.devcluster.nodes import (
    FakeNodes,
    create_fake_nodes,
    delete_fake_nodes,
    wait_nodes_ready,
)
from ascheduler.devcluster.plane import PlaneState
from ascheduler.devcluster.processes import ProcessRecord
from ascheduler.kube import ApiError, KubeClient

NodeFactory = Callable[[FakeNodes], Awaitable[list[str]]]


#: Integration tests marked `slow`, by folder or file under tests/integration/: the comparisons
#: with kube-scheduler, the benchmark harness, the fault injection and the races between
#: instances. Everything else under tests/integration/ is `integration` only.
SLOW = frozenset(
    {
        "differential",
        "benchmarks",
        "test_faults.py",
        "binding/test_multi_instance.py",
        "binding/test_multi_instance_dra.py",
        "binding/test_shared_pods_dra.py",
        "test_sharding.py",
    }
)


#: Integration test files marked `compat`: the compatibility subset `make test` also runs on
#: the oldest supported release (with the smoke tests), where the whole suite runs on the
#: newest. The differential scenarios hold ascheduler to that release's kube-scheduler pod by
#: pod and score by score, which is what a release's behaviour is; the release checks read
#: its version and gates.
COMPAT = frozenset(
    {
        "differential/test_scenarios.py",
        "test_releases.py",
    }
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/integration/ is `integration`; those under SLOW are `slow` too,
    those in COMPAT `compat` (the tiers of docs/testing.md)."""
    here = Path(__file__).parent
    for item in items:
        path = Path(str(item.fspath))
        if here not in path.parents:
            continue
        item.add_marker(pytest.mark.integration)
        relative = path.relative_to(here)
        if relative.parts[0] in SLOW or relative.as_posix() in SLOW:
            item.add_marker(pytest.mark.slow)
        if relative.as_posix() in COMPAT:
            item.add_marker(pytest.mark.compat)


def _progress(message: str) -> None:
    print(f"[plane] {message}", file=sys.stderr, flush=True)


@pytest.fixture(scope="session")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    bins = ensure_built(progress=_progress)
    cp = ControlPlane(
        tmp_path_factory.mktemp("plane"),
        bins=bins,
        die_with_parent=True,
        progress=_progress,
        # The Workload API served, for GangScheduling (on per scheduler, by its own gates).
        feature_gates="GenericWorkload=true",
    )
    cp.up()
    try:
        yield cp
    finally:
        cp.down(remove_state=False)


@pytest.fixture(scope="session")
def plane_state(plane: ControlPlane) -> PlaneState:
    return plane.require_state()


@pytest.fixture(scope="session")
async def kube(plane_state: PlaneState) -> AsyncIterator[KubeClient]:
    """An admin client on the session's event loop."""
    async with await KubeClient.connect(str(plane_state.admin_kubeconfig)) as client:
        yield client


def _namespace_name(nodeid: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", nodeid.rsplit("::", 1)[-1].lower()).strip("-")[:40]
    digest = hashlib.sha1(nodeid.encode()).hexdigest()[:6]
    return re.sub("-+", "-", f"t-{slug}-{digest}")


@pytest.fixture
async def namespace(kube: KubeClient, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """A fresh namespace; its pods are force-deleted and the namespace finalized afterwards
    (the plane runs no controller-manager to do it). Pending pods go first, so that freeing
    the bound pods' room does not retry pods about to be deleted anyway."""
    name = _namespace_name(request.node.nodeid)
    await kube.post("/api/v1/namespaces", {"metadata": {"name": name}})
    try:
        yield name
    finally:
        await kube.request(
            "DELETE",
            f"/api/v1/namespaces/{name}/pods",
            params={"gracePeriodSeconds": 0, "fieldSelector": "spec.nodeName="},
        )
        await kube.request(
            "DELETE", f"/api/v1/namespaces/{name}/pods", params={"gracePeriodSeconds": 0}
        )
        await kube.request("DELETE", f"/api/v1/namespaces/{name}")
        await kube.request(
            "PUT",
            f"/api/v1/namespaces/{name}/finalize",
            body={"metadata": {"name": name}, "spec": {"finalizers": []}},
        )


@pytest.fixture(scope="session")
def ascheduler(plane: ControlPlane, plane_state: PlaneState) -> Iterator[ProcessRecord]:
    """One `ascheduler run` process (profile `ascheduler`) for the session, stopped by pid."""
    record = plane.start_ascheduler("ascheduler", "--log-level", "debug")
    try:
        yield record
    finally:
        plane.stop_process(record)


@pytest.fixture
async def nodes(kube: KubeClient) -> AsyncIterator[NodeFactory]:
    """Creates fake nodes for one test (Ready before it returns) and deletes them after."""
    created: list[str] = []

    async def make(shape: FakeNodes) -> list[str]:
        names = await create_fake_nodes(kube, shape)
        created.extend(names)
        await wait_nodes_ready(kube, names)
        return names

    yield make
    await delete_fake_nodes(kube, created)


@pytest.fixture
async def cluster_objects(kube: KubeClient) -> AsyncIterator[list[str]]:
    """Cluster-scoped objects a test creates (their paths appended), deleted after it."""
    created: list[str] = []
    yield created
    for path in reversed(created):
        try:
            await kube.request("DELETE", path)
        except ApiError as exc:
            if not exc.not_found:
                raise
