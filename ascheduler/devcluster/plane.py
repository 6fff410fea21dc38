"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager
and kwok.

`ControlPlane.up()` mints certificates, starts etcd and kube-apiserver on free loopback ports,
waits for an authenticated `/readyz` to answer `ok`, writes kubeconfigs (admin in
`system:masters`, and `system:kube-scheduler`), starts kube-controller-manager with the
controllers a scheduler's users rely on (`CONTROLLERS`: Deployments create pods, PDBs get
their status, PVCs bind, claims are created from templates) and kwok, which keeps every node
annotated `kwok.x-k8s.io/node=fake` Ready and marks pods bound to them Running. A benchmark
plane runs no controller manager, as scheduler_perf runs none.

Everything lives in one state directory:

    state.json            ports, kubeconfigs, and each process's pid and start time
    pki/                  certificates and keys
    etcd/                 etcd's data
    logs/<process>.log    each process's output
    admin.kubeconfig, scheduler.kubeconfig

`down()` stops every process recorded there, by pid, and removes the directory. Any step that
fails raises `PlaneError` naming the step and the log to read, after stopping whatever this
`up()` had started.
"""

from __future__ import annotations

import contextlib
import errno
import json
import shutil
import socket
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ascheduler.devcluster import certs, processes, versions
from ascheduler.devcluster.build import Binaries, binaries, cache_dir
from ascheduler.devcluster.faultproxy import FaultProxy
from ascheduler.devcluster.processes import ProcessRecord

FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"
FAKE_NODE_VALUE = "fake"
SERVICE_CIDR = "10.0.0.0/24"
_READY_TIMEOUT = 120.0
#: The CustomResourceDefinitions the plane installs (from a checkout; absent elsewhere).
CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds"
#: kube-controller-manager's controllers the plane runs.
CONTROLLERS = (
    "deployment-controller",
    "replicaset-controller",
    "statefulset-controller",
    "job-controller",
    "disruption-controller",
    "persistentvolume-binder-controller",
    "persistentvolumeclaim-protection-controller",
    "persistentvolume-protection-controller",
    "ephemeral-volume-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "resourceclaim-controller",
)

Progress = Callable[[str], None]


class PlaneError(RuntimeError):
    """A step of bringing the plane up failed; `log` names the file to read."""

    def __init__(self, step: str, message: str, log: Path | str | None = None) -> None:
        self.step = step
        self.log = Path(log) if log is not None else None
        text = f"control plane step {step!r} failed: {message}"
        if log is not None:
            text += f"; read {log}"
        super().__init__(text)


def kube_scheduler_config(
    kubeconfig: str,
    scheduler_name: str,
    *,
    qps: int,
    burst: int,
    profile: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """kube-scheduler's configuration: one default profile (with `profile`'s fields added:
    `plugins`, `pluginConfig`), leader election off."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": kubeconfig, "qps": qps, "burst": burst},
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": scheduler_name, **(profile or {})}],
    }


def ascheduler_argv(
    kubeconfig: str,
    *args: str,
    http_address: str | None = "127.0.0.1:0",
    command: str = "run",
    secure_port: int = 0,
) -> list[str]:
    """`ascheduler run` (or `command`: `binder`) with this interpreter against `kubeconfig`;
    `args` add to it. Plain HTTP on `http_address` (default: any free loopback port, so
    several can run; None: the config's); the secure port on 127.0.0.1:`secure_port`
    (default 0: none, as the plane's kube-scheduler, so instances never race for 10259)."""
    argv = [sys.executable, "-m", "ascheduler", command, "--kubeconfig", kubeconfig]
    argv += ["--bind-address", "127.0.0.1", "--secure-port", str(secure_port)]
    if http_address is not None:
        argv += ["--http-address", http_address]
    return [*argv, *args]


def node_stages(stages_yaml: str) -> str:
    """kwok's Stage documents that act on Nodes, without the Pod ones."""
    docs = [d for d in yaml.safe_load_all(stages_yaml) if d]
    kept = [d for d in docs if (d.get("spec") or {}).get("resourceRef", {}).get("kind") == "Node"]
    return yaml.safe_dump_all(kept, sort_keys=False)


def default_state_dir() -> Path:
    return cache_dir() / "plane"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def ensure_port_free(step: str, port: int, host: str = "127.0.0.1") -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise PlaneError(step, f"port {host}:{port} is already in use") from exc
            raise


@dataclass
class PlaneState:
    state_dir: Path
    server: str
    apiserver_port: int
    etcd_client_port: int
    etcd_peer_port: int
    admin_kubeconfig: Path
    scheduler_kubeconfig: Path
    ca_cert: Path
    admin_cert: Path
    admin_key: Path
    benchmark: bool
    processes: list[ProcessRecord] = field(default_factory=list)
    #: `--feature-gates` of kube-apiserver, kube-controller-manager and kube-scheduler.
    feature_gates: str = ""
    #: The Kubernetes release the plane runs (`v1.36.3`).
    kubernetes_version: str = versions.RELEASES[versions.DEFAULT_RELEASE].kubernetes

    def to_json(self) -> dict[str, Any]:
        return {
            "state_dir": str(self.state_dir),
            "server": self.server,
            "apiserver_port": self.apiserver_port,
            "etcd_client_port": self.etcd_client_port,
            "etcd_peer_port": self.etcd_peer_port,
            "admin_kubeconfig": str(self.admin_kubeconfig),
            "scheduler_kubeconfig": str(self.scheduler_kubeconfig),
            "ca_cert": str(self.ca_cert),
            "admin_cert": str(self.admin_cert),
            "admin_key": str(self.admin_key),
            "benchmark": self.benchmark,
            "processes": [p.to_json() for p in self.processes],
            "feature_gates": self.feature_gates,
            "kubernetes_version": self.kubernetes_version,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PlaneState:
        return cls(
            state_dir=Path(data["state_dir"]),
            server=str(data["server"]),
            apiserver_port=int(data["apiserver_port"]),
            etcd_client_port=int(data["etcd_client_port"]),
            etcd_peer_port=int(data["etcd_peer_port"]),
            admin_kubeconfig=Path(data["admin_kubeconfig"]),
            scheduler_kubeconfig=Path(data["scheduler_kubeconfig"]),
            ca_cert=Path(data["ca_cert"]),
            admin_cert=Path(data["admin_cert"]),
            admin_key=Path(data["admin_key"]),
            benchmark=bool(data["benchmark"]),
            processes=[ProcessRecord.from_json(p) for p in data["processes"]],
            feature_gates=str(data.get("feature_gates", "")),
            kubernetes_version=str(
                data.get(
                    "kubernetes_version", versions.RELEASES[versions.DEFAULT_RELEASE].kubernetes
                )
            ),
        )


def write_kubeconfig(
    path: Path, *, server: str, ca: Path, cert: Path, key: Path, user: str
) -> None:
    """A kubeconfig pointing at certificate files (JSON is valid YAML)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "local", "cluster": {"server": server, "certificate-authority": str(ca)}}
        ],
        "users": [
            {"name": user, "user": {"client-certificate": str(cert), "client-key": str(key)}}
        ],
        "contexts": [{"name": user, "context": {"cluster": "local", "user": user}}],
        "current-context": user,
    }
    path.write_text(json.dumps(config, indent=2) + "\n")
    path.chmod(0o600)


class ControlPlane:
    """One local plane in one state directory."""

    def __init__(
        self,
        state_dir: Path | None = None,
        *,
        bins: Binaries | None = None,
        benchmark: bool = False,
        apiserver_port: int = 0,
        die_with_parent: bool = False,
        progress: Progress | None = None,
        feature_gates: str = "",
        controllers: tuple[str, ...] | None = None,
    ) -> None:
        self.state_dir = (state_dir or default_state_dir()).absolute()
        #: kube-controller-manager's controllers (default `CONTROLLERS`); a benchmark plane
        #: runs it only when given some (scheduler_perf's DRA workloads run the
        #: resourceclaim controller and the garbage collector).
        self.controllers = controllers
        #: `Name=true,...` for the plane's Kubernetes processes; `GenericWorkload=true` also
        #: serves the Workload API (`scheduling.k8s.io/v1alpha1` in 1.35: the release's
        #: `workload_api`).
        self.feature_gates = feature_gates
        self.bins = bins or binaries()
        self.benchmark = benchmark
        self.apiserver_port = apiserver_port
        self.die_with_parent = die_with_parent
        self.progress = progress or (lambda _msg: None)
        self.state: PlaneState | None = None

    # -- lifecycle -------------------------------------------------------------------------

    @classmethod
    def attach(cls, state_dir: Path | None = None) -> ControlPlane | None:
        """The plane recorded in `state_dir`, or None when there is none."""
        plane = cls(state_dir)
        path = plane.state_dir / "state.json"
        if not path.exists():
            return None
        plane.state = PlaneState.from_json(json.loads(path.read_text()))
        plane.benchmark = plane.state.benchmark
        with contextlib.suppress(versions.UnsupportedRelease):
            plane.bins = binaries(release=versions.release(plane.state.kubernetes_version))
        return plane

    def up(self) -> PlaneState:
        if (self.state_dir / "state.json").exists():
            raise PlaneError(
                "state directory",
                f"{self.state_dir} already holds a plane; run `ascheduler cluster down` first",
            )
        if missing := self.bins.missing():
            raise PlaneError(
                "binaries",
                f"not built: {', '.join(map(str, missing))}; run `ascheduler cluster build`",
            )
        self.state_dir.mkdir(parents=True, exist_ok=True)
        try:
            return self._up()
        except BaseException:
            # Stop what started; keep the logs the error points at, drop the record of a plane.
            self.down(remove_state=False)
            (self.state_dir / "state.json").unlink(missing_ok=True)
            raise

    def _up(self) -> PlaneState:
        logs = self.state_dir / "logs"
        pki = certs.generate(self.state_dir / "pki")
        if self.apiserver_port:
            ensure_port_free("kube-apiserver", self.apiserver_port)
        api_port = self.apiserver_port or free_port()
        etcd_client, etcd_peer = free_port(), free_port()
        server = f"https://127.0.0.1:{api_port}"
        state = PlaneState(
            state_dir=self.state_dir,
            server=server,
            apiserver_port=api_port,
            etcd_client_port=etcd_client,
            etcd_peer_port=etcd_peer,
            admin_kubeconfig=self.state_dir / "admin.kubeconfig",
            scheduler_kubeconfig=self.state_dir / "scheduler.kubeconfig",
            ca_cert=pki.ca.cert,
            admin_cert=pki.admin.cert,
            admin_key=pki.admin.key,
            benchmark=self.benchmark,
            feature_gates=self.feature_gates,
            kubernetes_version=self.bins.release.kubernetes,
        )
        self.state = state
        self._save()

        self.progress(f"starting etcd on 127.0.0.1:{etcd_client}")
        etcd = self._spawn("etcd", self._etcd_argv(state), logs)
        self._wait_etcd(etcd, etcd_client)

        self.progress(f"starting kube-apiserver on {server}")
        apiserver = self._spawn("kube-apiserver", self._apiserver_argv(state, pki), logs)
        self._wait_ready(apiserver)

        write_kubeconfig(
            state.admin_kubeconfig,
            server=server,
            ca=pki.ca.cert,
            cert=pki.admin.cert,
            key=pki.admin.key,
            user="admin",
        )
        write_kubeconfig(
            state.scheduler_kubeconfig,
            server=server,
            ca=pki.ca.cert,
            cert=pki.scheduler.cert,
            key=pki.scheduler.key,
            user="kube-scheduler",
        )

        self._install_crds(state)

        if not self.benchmark or self.controllers:
            self.progress("starting kube-controller-manager")
            kcm = self._spawn("kube-controller-manager", self._kcm_argv(state), logs)
            self._wait_running(kcm, seconds=1.0)

        self.progress("starting kwok")
        kwok = self._spawn("kwok", self._kwok_argv(state), logs)
        self._wait_running(kwok, seconds=1.0)
        return state

    def down(self, *, remove_state: bool = True) -> None:
        """Stop every process this plane recorded, newest first, and remove its state."""
        if self.state is not None:
            for record in reversed(self.state.processes):
                processes.stop(record)
            self.state.processes.clear()
        if remove_state:
            shutil.rmtree(self.state_dir, ignore_errors=True)
        elif self.state is not None:
            self._save()

    def status(self) -> dict[str, bool]:
        """Each recorded process and whether it is alive."""
        if self.state is None:
            return {}
        return {p.name: processes.is_alive(p) for p in self.state.processes}

    def readyz(self, timeout: float = 5.0) -> str:
        """The body of an authenticated GET /readyz (`ok` when ready)."""
        state = self.require_state()
        ctx = ssl.create_default_context(cafile=str(state.ca_cert))
        ctx.load_cert_chain(str(state.admin_cert), str(state.admin_key))
        with urllib.request.urlopen(f"{state.server}/readyz", context=ctx, timeout=timeout) as resp:
            return bytes(resp.read()).decode()

    def env(self) -> dict[str, str]:
        return {"KUBECONFIG": str(self.require_state().admin_kubeconfig)}

    def restart_apiserver(self) -> None:
        """Stop kube-apiserver and start it again on the same port and etcd: clients see
        their connections drop and watches from versions the new watch cache does not hold
        answered with 410 Gone, as after a real apiserver restart."""
        argv = self.stop_apiserver()
        self.start_apiserver(argv)

    def stop_apiserver(self, *, kill: bool = False) -> tuple[str, ...]:
        """Stop kube-apiserver (SIGKILL with `kill`, as a crash would); returns its argv for
        `start_apiserver`."""
        state = self.require_state()
        (old,) = [p for p in state.processes if p.name == "kube-apiserver"]
        if kill:
            processes.kill(old)
        self.stop_process(old)
        return old.argv

    def start_apiserver(self, argv: Sequence[str]) -> None:
        """Start kube-apiserver again (on its old port and etcd) and wait until it is ready."""
        record = self._spawn("kube-apiserver", argv, self.state_dir / "logs")
        self._wait_ready(record)

    def fault_proxy(self, *, seed: int | None = None) -> FaultProxy:
        """A fault-injecting proxy in front of this plane's API server (not started)."""
        state = self.require_state()
        return FaultProxy(
            state.server, ca=state.ca_cert, cert=state.admin_cert, key=state.admin_key, seed=seed
        )

    # -- extra processes (kube-scheduler for comparison, schedulers under test) -----------

    def start_process(
        self, name: str, argv: Sequence[str], *, env: dict[str, str] | None = None
    ) -> ProcessRecord:
        """Start a process that belongs to this plane: `down()` stops it too."""
        record = self._spawn(name, argv, self.state_dir / "logs", env=env)
        return record

    def stop_process(self, record: ProcessRecord) -> None:
        processes.stop(record)
        state = self.require_state()
        state.processes = [p for p in state.processes if p.pid != record.pid]
        self._save()

    def start_kube_scheduler(
        self,
        *,
        name: str = "kube-scheduler",
        qps: int = 5000,
        burst: int = 5000,
        scheduler_name: str = "default-scheduler",
        extra_args: Sequence[str] = (),
        profile: Mapping[str, Any] | None = None,
    ) -> ProcessRecord:
        """The built kube-scheduler under `system:kube-scheduler`, leader election off."""
        state = self.require_state()
        config = self.state_dir / f"{name}.config.yaml"
        config.write_text(
            json.dumps(
                kube_scheduler_config(
                    str(state.scheduler_kubeconfig),
                    scheduler_name,
                    qps=qps,
                    burst=burst,
                    profile=profile,
                ),
                indent=2,
            )
        )
        gates = (
            [f"--feature-gates={state.feature_gates}"]
            if state.feature_gates and not any(a.startswith("--feature-gates") for a in extra_args)
            else []
        )
        argv = [
            str(self.bins.kube_scheduler),
            f"--config={config}",
            "--secure-port=0",
            "--v=1",
            *gates,
            *extra_args,
        ]
        record = self.start_process(name, argv)
        self._wait_running(record, seconds=1.0)
        return record

    def start_ascheduler(
        self,
        name: str,
        *args: str,
        kubeconfig: str | None = None,
        http_address: str | None = "127.0.0.1:0",
        env: dict[str, str] | None = None,
        command: str = "run",
        secure_port: int = 0,
    ) -> ProcessRecord:
        """`ascheduler run` (or `command`, see `ascheduler_argv`) as the plane's admin unless
        `kubeconfig` says otherwise, one of the plane's processes."""
        kubeconfig = kubeconfig or str(self.require_state().admin_kubeconfig)
        argv = ascheduler_argv(
            kubeconfig, *args, http_address=http_address, command=command, secure_port=secure_port
        )
        return self.start_process(name, argv, env=env)

    # -- internals -------------------------------------------------------------------------

    def require_state(self) -> PlaneState:
        if self.state is None:
            raise PlaneError("state", f"no plane is up in {self.state_dir}")
        return self.state

    def _save(self) -> None:
        state = self.require_state()
        tmp = self.state_dir / "state.json.tmp"
        tmp.write_text(json.dumps(state.to_json(), indent=2))
        tmp.replace(self.state_dir / "state.json")

    def _spawn(
        self, name: str, argv: Sequence[str], logs: Path, *, env: dict[str, str] | None = None
    ) -> ProcessRecord:
        state = self.require_state()
        record = processes.spawn(
            name, argv, log=logs / f"{name}.log", env=env, die_with_parent=self.die_with_parent
        )
        state.processes.append(record)
        self._save()
        return record

    def _etcd_argv(self, state: PlaneState) -> list[str]:
        client = f"http://127.0.0.1:{state.etcd_client_port}"
        peer = f"http://127.0.0.1:{state.etcd_peer_port}"
        return [
            str(self.bins.etcd),
            "--name=local",
            f"--data-dir={self.state_dir / 'etcd'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=local={peer}",
            "--unsafe-no-fsync",
            "--quota-backend-bytes=8589934592",
            "--log-level=warn",
        ]

    def _apiserver_argv(self, state: PlaneState, pki: certs.PlaneCertificates) -> list[str]:
        disabled = ["ServiceAccount", "TaintNodesByCondition"]
        argv = [
            str(self.bins.kube_apiserver),
            f"--etcd-servers=http://127.0.0.1:{state.etcd_client_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={state.apiserver_port}",
            f"--cert-dir={self.state_dir / 'pki' / 'apiserver'}",
            f"--tls-cert-file={pki.serving.cert}",
            f"--tls-private-key-file={pki.serving.key}",
            f"--client-ca-file={pki.ca.cert}",
            f"--service-account-key-file={pki.service_account_pub}",
            f"--service-account-signing-key-file={pki.service_account_key}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--authorization-mode=RBAC",
            "--endpoint-reconciler-type=none",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--allow-privileged=true",
            "--v=1",
        ]
        if self.benchmark:
            argv += [
                # For its pprof heap endpoint, which benchmarks ask to collect the Go heap's
                # garbage before each measured span (the plane's admin only; loopback).
                "--profiling=true",
                "--enable-priority-and-fairness=false",
                "--max-requests-inflight=0",
                "--max-mutating-requests-inflight=0",
                # Benchmarks clear 10,000s of pods between runs in one DELETE collection.
                "--delete-collection-workers=16",
            ]
            # No kube-controller-manager here to take the protection finalizers off the
            # claims and volumes a run deletes: don't put them on.
            disabled.append("StorageObjectInUseProtection")
        else:
            argv.append("--profiling=false")
        argv.append(f"--disable-admission-plugins={','.join(disabled)}")
        if state.feature_gates:
            argv.append(f"--feature-gates={state.feature_gates}")
            if "GenericWorkload=true" in state.feature_gates.replace(" ", ""):
                api = self.bins.release.workload_api
                argv.append(f"--runtime-config=scheduling.k8s.io/{api}=true")
        return argv

    def _kcm_argv(self, state: PlaneState) -> list[str]:
        return [
            str(self.bins.kube_controller_manager),
            f"--kubeconfig={state.admin_kubeconfig}",
            f"--authentication-kubeconfig={state.admin_kubeconfig}",
            f"--authorization-kubeconfig={state.admin_kubeconfig}",
            f"--controllers={','.join(self.controllers or CONTROLLERS)}",
            "--leader-elect=false",
            "--secure-port=0",
            "--concurrent-deployment-syncs=10",
            "--concurrent-replicaset-syncs=10",
            "--kube-api-qps=500",
            "--kube-api-burst=1000",
            "--v=1",
            *([f"--feature-gates={state.feature_gates}"] if state.feature_gates else []),
        ]

    def _kwok_argv(self, state: PlaneState) -> list[str]:
        stages = self.bins.kwok_stages
        lease_seconds = 40
        if self.benchmark:
            # As in scheduler_perf, which runs no kubelets: nodes are kept Ready, pods stay
            # Pending once bound, so the plane's CPU goes to the schedulers' requests. Nor
            # do nodes renew Leases: no node lifecycle controller runs here to read them, and
            # the Leases of nodes made together are renewed together (1,000 writes at once
            # every 10 s for 1,000 nodes), a burst landing in some runs and not in others.
            stages = self.state_dir / "kwok-node-stages.yaml"
            stages.write_text(node_stages(self.bins.kwok_stages.read_text()))
            lease_seconds = 0
        return [
            str(self.bins.kwok),
            f"--kubeconfig={state.admin_kubeconfig}",
            f"--config={stages}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={FAKE_NODE_ANNOTATION}={FAKE_NODE_VALUE}",
            "--cidr=10.0.0.1/24",
            "--node-ip=10.0.0.1",
            f"--node-lease-duration-seconds={lease_seconds}",
            "--v=WARN",
        ]

    def _install_crds(self, state: PlaneState) -> None:
        """The CustomResourceDefinitions ascheduler reads (deploy/crds: PodGroup), created
        and waited for until the apiserver serves them."""
        if not CRDS.is_dir():
            return
        ctx = ssl.create_default_context(cafile=str(state.ca_cert))
        ctx.load_cert_chain(str(state.admin_cert), str(state.admin_key))
        base = f"{state.server}/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        names = []
        for path in sorted(CRDS.glob("*.yaml")):
            for doc in yaml.safe_load_all(path.read_text()):
                if not doc:
                    continue
                name = doc["metadata"]["name"]
                self.progress(f"installing CustomResourceDefinition {name}")
                request = urllib.request.Request(
                    f"{base}/{name}?fieldManager=ascheduler-plane&force=true",
                    data=json.dumps(doc).encode(),
                    method="PATCH",
                    headers={"Content-Type": "application/apply-patch+yaml"},
                )
                with urllib.request.urlopen(request, context=ctx, timeout=30):
                    pass
                names.append(name)
        deadline = time.monotonic() + _READY_TIMEOUT
        for name in names:
            while True:
                with urllib.request.urlopen(f"{base}/{name}", context=ctx, timeout=10) as resp:
                    status = json.loads(resp.read()).get("status") or {}
                conditions = status.get("conditions") or []
                if any(
                    c.get("type") == "Established" and c.get("status") == "True" for c in conditions
                ):
                    break
                if time.monotonic() > deadline:
                    raise PlaneError("crds", f"CustomResourceDefinition {name} not established")
                time.sleep(0.1)

    def _check_alive(self, record: ProcessRecord, step: str) -> None:
        if not processes.is_alive(record):
            code = processes.exit_code(record)
            raise PlaneError(
                step, f"{record.name} exited (status {code}) while starting", record.log
            )

    def _wait_running(self, record: ProcessRecord, *, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self._check_alive(record, record.name)
            time.sleep(0.1)
        self._check_alive(record, record.name)

    def _wait_etcd(self, record: ProcessRecord, port: int) -> None:
        deadline = time.monotonic() + _READY_TIMEOUT
        last = "no answer"
        while time.monotonic() < deadline:
            self._check_alive(record, "etcd")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
                    body = json.loads(resp.read())
                    if body.get("health") == "true":
                        return
                    last = str(body)
            except (OSError, ValueError) as exc:
                last = str(exc)
            time.sleep(0.1)
        raise PlaneError("etcd", f"not healthy after {_READY_TIMEOUT:.0f}s ({last})", record.log)

    def _wait_ready(self, record: ProcessRecord) -> None:
        deadline = time.monotonic() + _READY_TIMEOUT
        last = "no answer"
        while time.monotonic() < deadline:
            self._check_alive(record, "kube-apiserver")
            try:
                if self.readyz(timeout=2.0).strip() == "ok":
                    return
            except urllib.error.HTTPError as exc:
                with contextlib.suppress(OSError):
                    last = f"HTTP {exc.code}: {exc.read().decode(errors='replace')[-300:]}"
            except OSError as exc:
                last = str(exc)
            time.sleep(0.2)
        raise PlaneError(
            "kube-apiserver", f"/readyz not ok after {_READY_TIMEOUT:.0f}s ({last})", record.log
        )
