"""What each API request of a bind costs the plane, and the bound that puts on node locks.

A plain bind makes two requests: the Binding and its `Scheduled` Event. A bind under a node
lock adds, per hold of the node's lock, the Node's lock and unlock patches and one LIST of
the node's pods (in HAMi mode too: the Binding carries the pod's `allocating` phase, no
patch does). With locks on Leases (the
default) a hold lingers, so a lock costs one write to the node's Lease when it is taken.
Where the plane is the bottleneck (it is on a small machine: `benchmarks locks` shows
ascheduler binding as fast as a no-logic binder), throughput follows the plane's CPU per pod,
so with `k` binds per hold (per lock write, on Leases):

    all / none  <=  (binding + event) / (binding + event + (lock + unlock + list) / k)
    Leases:     <=  (binding + event) / (binding + event + lease lock write / k)

Each request is sent `--count` times, 64 at a time, the way ascheduler sends it, against
`--nodes` SchedulingBasic nodes; the CPU seconds of kube-apiserver, and of the whole plane
(kube-apiserver, etcd, kwok), are read from /proc before and after. Reproduce with:

    .venv/bin/python -m benchmarks apicost --nodes 500 --count 2000 --repeat 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

from ascheduler.devcluster import ControlPlane
from ascheduler.kube import KubeClient
from ascheduler.kube.client import MERGE_PATCH
from ascheduler.locks.keys import BOUND_SUFFIX, DEFAULT_KEY, WANTED_SUFFIX, node_lease_name
from ascheduler.locks.values import replaced
from benchmarks.common import bench_plane, cpu_seconds
from benchmarks.workloads import basic_pod

PLANE: Final = ("kube-apiserver", "etcd", "kwok")
CONCURRENCY: Final = 64

#: What one request costs, for pod `i` on node `i % nodes`.
Send = Callable[[KubeClient, str, int, int], Awaitable[Any]]


def _node(i: int, nodes: int) -> str:
    return f"kwok-node-{i % nodes}"


async def _create(kube: KubeClient, ns: str, i: int, nodes: int) -> Any:
    return await kube.post(f"/api/v1/namespaces/{ns}/pods", basic_pod(f"p-{i}", "nobody", i))


async def _binding(kube: KubeClient, ns: str, i: int, nodes: int) -> Any:
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": f"p-{i}", "annotations": {"ascheduler.io/bind-phase": "success"}},
        "target": {"apiVersion": "v1", "kind": "Node", "name": _node(i, nodes)},
    }
    return await kube.request("POST", f"/api/v1/namespaces/{ns}/pods/p-{i}/binding", body=body)


def event_request(ns: str, i: int, nodes: int) -> tuple[str, dict[str, Any]]:
    """The path and body of pod `i`'s `Scheduled` Event, as ascheduler sends it."""
    body = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"p-{i}.apicost", "namespace": ns},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "ascheduler",
        "reportingInstance": "ascheduler-apicost",
        "action": "Binding",
        "reason": "Scheduled",
        "type": "Normal",
        "note": f"Successfully assigned {ns}/p-{i} to {_node(i, nodes)}",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": ns, "name": f"p-{i}"},
    }
    return f"/apis/events.k8s.io/v1/namespaces/{ns}/events", body


async def _event(kube: KubeClient, ns: str, i: int, nodes: int) -> Any:
    path, body = event_request(ns, i, nodes)
    return await kube.request("POST", path, body=body)


async def _lock_unlock(kube: KubeClient, ns: str, i: int, nodes: int) -> Any:
    """The Node's lock patch, then its unlock patch: both guarded by the version, as the lock
    does them, one pair at a time per node (the in-process lock). Counted as two requests."""
    name = _node(i, nodes)
    path = f"/api/v1/nodes/{name}"
    async with _node_locks.setdefault(name, asyncio.Lock()):
        node = await kube.get(path)  # taken off: a node's first lock usually needs no read
        version = node["metadata"]["resourceVersion"]
        holder = f"2026-01-01T00:00:00Z,{ns},p-{i}"
        locked = await kube.patch(
            path,
            {"metadata": {"resourceVersion": version, "annotations": {DEFAULT_KEY: holder}}},
            content_type=MERGE_PATCH,
        )
        version = locked["metadata"]["resourceVersion"]
        return await kube.patch(
            path,
            {"metadata": {"resourceVersion": version, "annotations": {DEFAULT_KEY: None}}},
            content_type=MERGE_PATCH,
        )


#: Per node, for one run's event loop (cleared before each).
_node_locks: dict[str, asyncio.Lock] = {}
#: Each node's Lease as it is now, for one run (cleared before each).
_leases: dict[str, Any] = {}


async def _lease_lock(kube: KubeClient, ns: str, i: int, nodes: int) -> Any:
    """The lock write on a node's Lease, as a hold takes it: the Lease as the informer has it
    sent back whole with the lock set (no read; the wanted flag cleared; the record of the
    pods bound under it, 8 here), guarded by its version, one at a time per node. A hold
    lingers: with no other instance waiting, it ends without a write."""
    name = _node(i, nodes)
    path = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{node_lease_name(name)}"
    async with _node_locks.setdefault(name, asyncio.Lock()):
        lease = _leases.get(name)
        if lease is None:  # made once per node, before the measured writes (see `measure`)
            made = await kube.post(
                f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
                {"metadata": {"name": node_lease_name(name)}, "spec": {}},
            )
            _leases[name] = made
            return made
        annotations = {
            DEFAULT_KEY: f"2026-01-01T00:00:00.{i % 1000:03d}Z,apicost",
            DEFAULT_KEY + WANTED_SUFFIX: None,
            DEFAULT_KEY + BOUND_SUFFIX: ",".join(f"{ns}-{i}-{k:032d}" for k in range(8)),
        }
        version = lease["metadata"]["resourceVersion"]
        taken = await kube.put(path, replaced(lease, version, annotations))
        _leases[name] = taken
        return taken


async def _list_node_pods(kube: KubeClient, ns: str, i: int, nodes: int) -> Any:
    selector = f"spec.nodeName={_node(i, nodes)},status.phase!=Succeeded,status.phase!=Failed"
    return await kube.get("/api/v1/pods", params={"fieldSelector": selector})


#: In the order they run: each needs the objects the ones before it made.
REQUESTS: Final[list[tuple[str, Send, int]]] = [
    ("create pod", _create, 1),
    ("binding", _binding, 1),
    ("event", _event, 1),
    ("lock + unlock patches (node)", _lock_unlock, 2),
    ("list the node's pods", _list_node_pods, 1),
    ("lock write (Lease)", _lease_lock, 1),
]


def lease_bound(cost: dict[str, float], per_write: float) -> float:
    """The ratio locked/unlocked the plane's CPU allows with locks on Leases, at `per_write`
    binds per lock write (a lingering hold writes only when it is taken)."""
    plain = cost["binding"] + cost["event"]
    locked = plain + cost["lock write (Lease)"] / per_write
    return plain / locked if locked > 0 else 1.0


def bound(cost: dict[str, float], per_hold: float) -> float:
    """The ratio all/none the plane's CPU allows at `per_hold` binds per hold (inf: no
    per-hold cost at all)."""
    plain = cost["binding"] + cost["event"]
    hold = cost["lock + unlock patches (node)"] * 2 + cost["list the node's pods"]
    locked = plain + hold / per_hold
    return plain / locked if locked > 0 else 1.0  # too few requests to cost a CPU tick


def run_once(
    plane: ControlPlane, index: int, nodes: int, count: int
) -> dict[str, dict[str, float]]:
    """CPU milliseconds per request of each kind: kube-apiserver alone, and the plane."""
    state = plane.require_state()
    pids = {r.name: r.pid for r in state.processes if r.name in PLANE}
    ns = f"apicost-{index}"

    _node_locks.clear()
    _leases.clear()

    def cpu() -> tuple[float, float]:
        used = {name: cpu_seconds(pid) for name, pid in pids.items()}
        return used["kube-apiserver"], sum(used.values())

    async def measure() -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        async with await KubeClient.connect(str(state.admin_kubeconfig)) as kube:
            await kube.post("/api/v1/namespaces", {"metadata": {"name": ns}})
            gate = asyncio.Semaphore(CONCURRENCY)

            async def each(send: Send) -> tuple[float, float]:
                async def one(i: int) -> None:
                    async with gate:
                        await send(kube, ns, i, nodes)

                api0, plane0 = cpu()
                await asyncio.gather(*(one(i) for i in range(count)))
                api1, plane1 = cpu()
                return api1 - api0, plane1 - plane0

            async def one_lease(i: int) -> None:
                async with gate:
                    await _lease_lock(kube, ns, i, nodes)

            async def get_node(kube: KubeClient, ns: str, i: int, nodes: int) -> Any:
                return await kube.get(f"/api/v1/nodes/{_node(i, nodes)}")

            # The lock+unlock pair reads the node first; that read is measured alone and
            # taken off (a node's lock usually goes out on the cache's version, unread).
            get_api, get_plane = await each(get_node)
            for name, send, requests in REQUESTS:
                if send is _lease_lock:  # each node's Lease made first, not measured
                    await asyncio.gather(*(one_lease(i) for i in range(nodes)))
                api, whole = await each(send)
                if send is _lock_unlock:  # never below zero: CPU time comes in ticks
                    api, whole = max(api - get_api, 0.0), max(whole - get_plane, 0.0)
                n = count * requests
                out[name] = {
                    "apiserver_ms": round(api * 1e3 / n, 3),
                    "plane_ms": round(whole * 1e3 / n, 3),
                }
            await kube.request(
                "DELETE", f"/api/v1/namespaces/{ns}/pods", params={"gracePeriodSeconds": 0}
            )
        return out

    return asyncio.run(measure())


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks apicost",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    with bench_plane("apicost", args.nodes) as plane:
        runs = [run_once(plane, i, args.nodes, args.count) for i in range(args.repeat)]
    names = [name for name, _, _ in REQUESTS]
    median = {
        scope: {n: statistics.median(r[n][scope] for r in runs) for n in names}
        for scope in ("apiserver_ms", "plane_ms")
    }
    print(f"{'request':<30} {'kube-apiserver ms':>18} {'plane ms':>10}", file=sys.stderr)
    for n in names:
        api, whole = median["apiserver_ms"][n], median["plane_ms"][n]
        print(f"{n:<30} {api:>18.2f} {whole:>10.2f}", file=sys.stderr)
    per_hold = (1.0, 2.0, 4.0, float("inf"))
    bounds = {str(k): round(bound(median["plane_ms"], k), 2) for k in per_hold}
    print(f"bound on locks all/none by binds per hold: {bounds}", file=sys.stderr)
    leases = {str(k): round(lease_bound(median["plane_ms"], k), 2) for k in per_hold}
    print(f"bound on locks on Leases by binds per lock write: {leases}", file=sys.stderr)
    summary = {
        "nodes": args.nodes,
        "count": args.count,
        "repeat": args.repeat,
        "cpu_ms_per_request_median": {
            s: {n: round(v, 3) for n, v in m.items()} for s, m in median.items()
        },
        "runs": runs,
        "bound_all_over_none_by_binds_per_hold": bounds,
        "bound_leases_by_binds_per_lock_write": leases,
    }
    print(json.dumps(summary))
    return 0
