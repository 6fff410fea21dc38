"""kube-scheduler's HTTP extenders (`extenders:` in a `KubeSchedulerConfiguration`).

An extender is a web service the scheduler consults after its own plugins, speaking
kube-scheduler's JSON (the Go field names of `k8s.io/kube-scheduler/extender/v1`, which Go
decodes case-insensitively; so do we):

* **filter** (`filterVerb`): `ExtenderArgs` (the Pod, and the candidate Nodes, or only their
  names when `nodeCacheCapable`) -> `ExtenderFilterResult` (the nodes kept, `FailedNodes` and
  `FailedAndUnresolvableNodes` with a reason each, or an `Error`). Extenders run in order,
  each on what the previous one kept; their reasons join the `0/N nodes are available`
  message as kube-scheduler reports them.
* **prioritize** (`prioritizeVerb`): `ExtenderArgs` -> `HostPriorityList` of 0..10 scores,
  added to the plugins' total as `score * weight * (MAX_NODE_SCORE / 10)`. A failing
  prioritize is ignored, as kube-scheduler ignores it.
* **bind** (`bindVerb`): `ExtenderBindingArgs` -> `ExtenderBindingResult`; the first extender
  that binds and is interested in the pod binds it instead of the Bind plugins.

An extender with `managedResources` is only consulted for pods that request or limit one of
them (`IsInterested`); its `ignoredByScheduler` resources are left out of NodeResourcesFit.
* **preempt** (`preemptVerb`): `ExtenderPreemptionArgs` (the Pod, and each candidate node's
  victims: whole pods in `NodeNameToVictims`, or only their UIDs in `NodeNameToMetaVictims`
  when `nodeCacheCapable`) -> `ExtenderPreemptionResult` (`NodeNameToMetaVictims`, whatever
  the extender's setting). Extenders run in order, each on what the previous returned; what
  the last returns replaces DefaultPreemption's candidates (kube-scheduler's callExtenders).

A filter, preempt or bind that fails (unreachable, non-200, an `Error`, an answer naming a node
or pod the scheduler does not know) fails the attempt with a clear error unless the extender is
`ignorable`, in which case it is skipped. Calls are awaited: the scheduling cycle stays serial,
as kube-scheduler's is, and the event loop's other work (watches, binds) goes on meanwhile.
"""

from __future__ import annotations

import abc
import base64
import contextlib
import dataclasses
import functools
import ssl
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import aiohttp
import orjson
import structlog

from ascheduler.framework.args import Seconds
from ascheduler.framework.errors import PluginArgsError
from ascheduler.framework.interface import (
    MAX_NODE_SCORE,
    Code,
    CycleState,
    Diagnosis,
    PostFilterPlugin,
    PostFilterResult,
    Status,
)
from ascheduler.framework.nodes import NodeTable
from ascheduler.model import Node, PodInfo, parse_pod, reparse_pod
from ascheduler.model.resources import V1_35, RequestsRule

log = structlog.get_logger(__name__)

#: kube-scheduler's `MaxExtenderPriority`, and its default `httpTimeout`.
MAX_EXTENDER_PRIORITY: Final = 10
DEFAULT_TIMEOUT: Final = 5.0
#: The pseudo-plugin extenders reject as (kube-scheduler's `framework.ExtenderName`).
EXTENDER: Final = "Extender"
#: `httpTimeout` not given: DEFAULT_TIMEOUT.
UNSET: Final = Seconds(0)


@dataclass(frozen=True)
class ExtenderManagedResource:
    name: str
    ignored_by_scheduler: bool = False


@dataclass(frozen=True)
class ExtenderTLSConfig:
    insecure: bool = False
    server_name: str = ""
    cert_file: str = ""
    key_file: str = ""
    ca_file: str = ""
    #: PEM, base64-encoded as a KubeSchedulerConfiguration writes []byte fields.
    cert_data: str = ""
    key_data: str = ""
    ca_data: str = ""


@dataclass(frozen=True)
class ExtenderConfig:
    """One entry of `extenders:`, with kube-scheduler's field names."""

    url_prefix: str = ""
    filter_verb: str = ""
    preempt_verb: str = ""
    prioritize_verb: str = ""
    bind_verb: str = ""
    weight: int = 0
    enable_https: bool = field(default=False, metadata={"key": "enableHTTPS"})
    tls_config: ExtenderTLSConfig | None = None
    http_timeout: Seconds = UNSET
    node_cache_capable: bool = False
    managed_resources: tuple[ExtenderManagedResource, ...] = ()
    ignorable: bool = False

    def __post_init__(self) -> None:
        if not self.http_timeout:
            # kube-scheduler's defaulting: 0 (or left out) is its default timeout.
            object.__setattr__(self, "http_timeout", Seconds(DEFAULT_TIMEOUT))
        # An empty urlPrefix is accepted, as kube-scheduler accepts it: every call then fails
        # (and fails the attempt unless the extender is ignorable).
        if self.prioritize_verb and self.weight <= 0:
            raise PluginArgsError("weight: must have a positive weight applied to it")


def validate(extenders: Sequence[tuple[int, ExtenderConfig]]) -> list[str]:
    """What kube-scheduler's `validateExtenders` refuses beyond each entry on its own, for the
    entries (with their index in the file) that decoded."""
    problems = []
    seen: set[str] = set()
    for i, extender in extenders:
        for j, resource in enumerate(extender.managed_resources):
            path = f"extenders[{i}].managedResources[{j}].name"
            if not is_extended_resource_name(resource.name):
                problems.append(f"{path}: {resource.name!r} is an invalid extended resource name")
            if resource.name in seen:
                problems.append(f"{path}: duplicate extender managed resource name")
            seen.add(resource.name)
    binders = sum(1 for _, e in extenders if e.bind_verb)
    if binders > 1:
        problems.append(
            f"extenders: only one extender can implement bind (found {binders} extenders "
            "implementing bind)"
        )
    return problems


def is_extended_resource_name(name: str) -> bool:
    """Kubernetes' `IsExtendedResourceName`: a qualified name with a domain, outside
    `kubernetes.io/`, that `requests.` + it is still a valid name."""
    prefix, sep, rest = name.partition("/")
    if not sep or not prefix or not rest or "/" in rest:
        return False
    if prefix == "kubernetes.io" or prefix.endswith(".kubernetes.io"):
        return False
    return len(rest) <= 63 and all(c.isalnum() or c in "-_." for c in rest)


def ignored_by_scheduler(extenders: Iterable[ExtenderConfig]) -> tuple[str, ...]:
    return tuple(r.name for e in extenders for r in e.managed_resources if r.ignored_by_scheduler)


class ExtenderError(Exception):
    """An extender did not answer, or answered with a failure."""


@dataclass(frozen=True)
class Victims:
    """kube-scheduler's `extenderv1.Victims`: the pods preemption would evict on one node
    (most important first) and how many of them a PodDisruptionBudget protects."""

    pods: tuple[PodInfo, ...]
    pdb_violations: int = 0


#: A node's pods by uid, or None for a node the scheduler does not know.
PodsOnNode = Callable[[str], Mapping[str, PodInfo] | None]


@dataclass
class ExtenderVerdicts:
    """What one extender said about the nodes it was asked about (what `explain` shows)."""

    name: str
    ignorable: bool = False
    #: The nodes its filter was sent (none: it has no filterVerb, or was not asked).
    sent: list[str] = field(default_factory=list)
    passed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    unresolvable: dict[str, str] = field(default_factory=dict)
    filter_error: str = ""
    weight: int = 0
    #: node -> the prioritize score it gave (0..MAX_EXTENDER_PRIORITY), before its weight.
    scores: dict[str, int] = field(default_factory=dict)
    prioritize_error: str = ""

    def weighted(self, score: int) -> int:
        return score * self.weight * (MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY)


def _get(answer: Mapping[str, Any], key: str) -> Any:
    """`answer[key]`, ignoring case, as Go's JSON decoding does."""
    if key in answer:
        return answer[key]
    folded = key.lower()
    for k, v in answer.items():
        if isinstance(k, str) and k.lower() == folded:
            return v
    return None


class HTTPExtender:
    def __init__(self, config: ExtenderConfig) -> None:
        self.config = config
        self.name = config.url_prefix
        self.managed = frozenset(r.name for r in config.managed_resources)
        self.timeout = float(config.http_timeout) or DEFAULT_TIMEOUT
        self._session: aiohttp.ClientSession | None = None
        self._tempfiles: list[Any] = []

    @property
    def is_binder(self) -> bool:
        return bool(self.config.bind_verb)

    @property
    def supports_preemption(self) -> bool:
        return bool(self.config.preempt_verb)

    def is_interested(self, pod: PodInfo) -> bool:
        """kube-scheduler's IsInterested: no managed resources, or the pod asks for one."""
        if not self.managed:
            return True
        if pod.raw is None:
            return any(name in self.managed for name in pod.requests)
        spec = pod.raw.get("spec") or {}
        for group in ("containers", "initContainers"):
            for container in spec.get(group) or []:
                resources = (container or {}).get("resources") or {}
                for kind in ("requests", "limits"):
                    if any(name in self.managed for name in resources.get(kind) or {}):
                        return True
        return False

    def _ssl(self) -> ssl.SSLContext | None:
        """kube-scheduler's makeTransport: the system's CAs, or tlsConfig's; verification is
        off with `insecure`, or with `enableHTTPS` and no CA given; a client certificate if
        configured. None: the defaults (plain HTTP, or HTTPS against the system's CAs)."""
        tls = self.config.tls_config
        if tls is None and not self.config.enable_https:
            return None
        tls = tls or ExtenderTLSConfig()
        ca_data = base64.b64decode(tls.ca_data).decode() if tls.ca_data else None
        context = ssl.create_default_context(cafile=tls.ca_file or None, cadata=ca_data)
        has_ca = bool(tls.ca_file or tls.ca_data)
        if tls.insecure or (self.config.enable_https and not has_ca):
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        cert, key = tls.cert_file, tls.key_file
        if tls.cert_data:
            cert = self._pem_file(tls.cert_data)
        if tls.key_data:
            key = self._pem_file(tls.key_data)
        if cert:
            context.load_cert_chain(cert, keyfile=key or None)
        return context

    def _pem_file(self, data: str) -> str:
        handle = tempfile.NamedTemporaryFile(suffix=".pem")  # noqa: SIM115 (kept for the process)
        handle.write(base64.b64decode(data))
        handle.flush()
        self._tempfiles.append(handle)
        return handle.name

    async def _send(self, verb: str, body: Any) -> Any:
        url = self.name.rstrip("/") + "/" + verb
        if self._session is None:
            try:
                context = self._ssl()
            except (ValueError, OSError, ssl.SSLError) as exc:
                raise ExtenderError(f"extender at URL {url}: tlsConfig: {exc}") from exc
            connector = aiohttp.TCPConnector(ssl=context if context is not None else True, limit=16)
            self._session = aiohttp.ClientSession(connector=connector)
        tls = self.config.tls_config
        try:
            async with self._session.post(
                url,
                data=orjson.dumps(body),
                headers={"Content-Type": "application/json"},
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                server_hostname=(tls.server_name or None) if tls else None,
            ) as resp:
                payload = await resp.read()
                if resp.status != 200:
                    raise ExtenderError(
                        f"failed {verb} with extender at URL {url}, code {resp.status}"
                    )
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise ExtenderError(f"failed {verb} with extender at URL {url}: {exc!r}") from exc
        try:
            return orjson.loads(payload)
        except orjson.JSONDecodeError as exc:
            raise ExtenderError(f"extender at URL {url} answered {verb} with bad JSON") from exc

    def _args(self, pod: PodInfo, nodes: Sequence[Node]) -> dict[str, Any]:
        body: dict[str, Any] = {"Pod": pod.raw if pod.raw is not None else _pod_stub(pod)}
        if self.config.node_cache_capable:
            body["NodeNames"] = [n.name for n in nodes]
        else:
            body["Nodes"] = {
                "items": [n.raw if n.raw is not None else _node_stub(n) for n in nodes]
            }
        return body

    async def filter(
        self, pod: PodInfo, nodes: Sequence[Node]
    ) -> tuple[list[str], dict[str, str], dict[str, str]]:
        """(names kept, failed: reason, failed and unresolvable: reason)."""
        if not self.config.filter_verb:
            return [n.name for n in nodes], {}, {}
        answer = await self._send(self.config.filter_verb, self._args(pod, nodes))
        if not isinstance(answer, Mapping):
            raise ExtenderError(f"extender {self.name}: filter answer is not an object")
        error = _get(answer, "Error")
        if error:
            raise ExtenderError(str(error))
        given = {n.name for n in nodes}
        kept: list[str] = []
        names = _get(answer, "NodeNames")
        listed = _get(answer, "Nodes")
        if self.config.node_cache_capable and names is not None:
            if not isinstance(names, list):
                raise ExtenderError(f"extender {self.name}: NodeNames is not a list")
            for name in names:
                if name not in given:
                    raise ExtenderError(
                        f"extender {self.name!r} claims a filtered node {name!r} which is not "
                        "found in the input node list"
                    )
                kept.append(str(name))
        elif listed is not None:
            if not isinstance(listed, Mapping):
                raise ExtenderError(f"extender {self.name}: Nodes is not an object")
            items = _get(listed, "items")
            if not isinstance(items, list | None):
                raise ExtenderError(f"extender {self.name}: Nodes.items is not a list")
            for item in items or []:
                meta = item.get("metadata") if isinstance(item, Mapping) else None
                name = meta.get("name") if isinstance(meta, Mapping) else None
                if isinstance(name, str) and name in given:
                    kept.append(name)
        return (
            kept,
            self._failures(answer, "FailedNodes"),
            self._failures(answer, "FailedAndUnresolvableNodes"),
        )

    def _failures(self, answer: Mapping[str, Any], key: str) -> dict[str, str]:
        value = _get(answer, key) or {}
        if not isinstance(value, Mapping):
            raise ExtenderError(f"extender {self.name}: {key} is not an object")
        return {str(k): str(v) for k, v in value.items()}

    async def prioritize(self, pod: PodInfo, nodes: Sequence[Node]) -> dict[str, int]:
        """Node name -> score * weight * (MAX_NODE_SCORE / MAX_EXTENDER_PRIORITY)."""
        scale = self.config.weight * (MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY)
        return {host: score * scale for host, score in (await self.scores(pod, nodes)).items()}

    async def scores(self, pod: PodInfo, nodes: Sequence[Node]) -> dict[str, int]:
        """Node name -> the score the extender gave (summed, should it name a node twice)."""
        if not self.config.prioritize_verb:
            return {}
        answer = await self._send(self.config.prioritize_verb, self._args(pod, nodes))
        if not isinstance(answer, list):
            raise ExtenderError(f"extender {self.name}: prioritize answer is not a list")
        out: dict[str, int] = {}
        for item in answer:
            if isinstance(item, Mapping):
                host, score = _get(item, "Host"), _get(item, "Score")
                if isinstance(host, str) and isinstance(score, int) and not isinstance(score, bool):
                    out[host] = out.get(host, 0) + score
        return out

    async def process_preemption(
        self, pod: PodInfo, victims: Mapping[str, Victims], pods_on: PodsOnNode
    ) -> dict[str, Victims]:
        """kube-scheduler's ProcessPreemption: the candidates and their victims sent (whole
        pods, or their UIDs when `nodeCacheCapable`); the answer, always UIDs, mapped back to
        the pods on each node. A node or pod the scheduler does not know is an error, as in
        kube-scheduler's convertToVictims."""
        sent: dict[str, Any] = {
            node: {
                "Pods": [
                    {"UID": p.uid}
                    if self.config.node_cache_capable
                    else (p.raw if p.raw is not None else _pod_stub(p))
                    for p in v.pods
                ],
                "NumPDBViolations": v.pdb_violations,
            }
            for node, v in victims.items()
        }
        body: dict[str, Any] = {
            "Pod": pod.raw if pod.raw is not None else _pod_stub(pod),
            "NodeNameToVictims": None if self.config.node_cache_capable else sent,
            "NodeNameToMetaVictims": sent if self.config.node_cache_capable else None,
        }
        answer = await self._send(self.config.preempt_verb, body)
        if not isinstance(answer, Mapping):
            raise ExtenderError(f"extender {self.name}: preempt answer is not an object")
        returned = _get(answer, "NodeNameToMetaVictims")
        if returned is None:
            return {}
        if not isinstance(returned, Mapping):
            raise ExtenderError(f"extender {self.name}: NodeNameToMetaVictims is not an object")
        out: dict[str, Victims] = {}
        for node, entry in returned.items():
            on_node = pods_on(str(node))
            if on_node is None:
                raise ExtenderError(f'nodeinfo not found for node name "{node}"')
            out[str(node)] = self._victims(str(node), entry, on_node)
        return out

    def _victims(self, node: str, entry: Any, on_node: Mapping[str, PodInfo]) -> Victims:
        where = f"extender {self.name}: NodeNameToMetaVictims[{node!r}]"
        if not isinstance(entry, Mapping):
            raise ExtenderError(f"{where} is not an object")
        listed = _get(entry, "Pods")
        violations = _get(entry, "NumPDBViolations")
        if not isinstance(listed, list | None):
            raise ExtenderError(f"{where}.Pods is not a list")
        if violations is None:
            violations = 0
        if not isinstance(violations, int) or isinstance(violations, bool):
            raise ExtenderError(f"{where}.NumPDBViolations is not an integer")
        pods: list[PodInfo] = []
        for item in listed or []:
            uid = _get(item, "UID") if isinstance(item, Mapping) else None
            if not isinstance(item, Mapping) or not isinstance(uid, str | None):
                raise ExtenderError(f"{where}.Pods: expected objects with a UID string")
            victim = on_node.get(uid or "")
            if victim is None:
                raise ExtenderError(
                    f"extender: {self.name} claims to preempt pod (UID: &{{{uid or ''}}}) on "
                    f"node: {node}, but the pod is not found on that node"
                )
            pods.append(victim)
        return Victims(tuple(pods), violations)

    async def bind(self, pod: PodInfo, node: str) -> None:
        body = {
            "PodName": pod.name,
            "PodNamespace": pod.namespace,
            "PodUID": pod.uid,
            "Node": node,
        }
        answer = await self._send(self.config.bind_verb, body)
        error = _get(answer, "Error") if isinstance(answer, Mapping) else None
        if error:
            raise ExtenderError(str(error))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
        for handle in self._tempfiles:
            with contextlib.suppress(OSError):
                handle.close()


def _keeping(pod: PodInfo, obj: Any) -> PodInfo:
    if pod.raw is not None or not isinstance(obj, Mapping):
        return pod
    return dataclasses.replace(pod, raw=obj)


def _pod_stub(pod: PodInfo) -> dict[str, Any]:
    return {"metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid}}


def _node_stub(node: Node) -> dict[str, Any]:
    return {"metadata": {"name": node.name, "labels": dict(node.labels)}}


@dataclass
class ExtenderFiltering:
    """What the extenders made of the candidate nodes."""

    kept: list[str]
    #: node -> the status an extender rejected it with
    statuses: dict[str, Status] = field(default_factory=dict)
    filtered: bool = False


class Extenders:
    """The configured extenders, run the way kube-scheduler runs them."""

    def __init__(self, configs: Sequence[ExtenderConfig]) -> None:
        self.all = [HTTPExtender(c) for c in configs]

    def __bool__(self) -> bool:
        return bool(self.all)

    @property
    def want_raw_nodes(self) -> bool:
        return any(
            not e.config.node_cache_capable and (e.config.filter_verb or e.config.prioritize_verb)
            for e in self.all
        )

    @property
    def supports_preemption(self) -> bool:
        return any(e.supports_preemption for e in self.all)

    @property
    def want_raw_pods(self) -> bool:
        """Whether a preempt verb is sent whole victims (bound pods then keep their object)."""
        return any(e.supports_preemption and not e.config.node_cache_capable for e in self.all)

    def pod_parsers(
        self, rule: RequestsRule = V1_35
    ) -> tuple[Callable[[Any], PodInfo], Callable[[Any, PodInfo], PodInfo]]:
        """The pod informer's parse and reparse, reading requests by the release's `rule`:
        with extenders, pods not yet bound keep their object (extenders are sent the pod);
        every pod does when a preempt verb is sent whole victims (the memory that costs is
        the configuration's choice)."""
        keep = bool(self.all)
        if not self.want_raw_pods:
            return (
                functools.partial(parse_pod, keep_raw=keep, rule=rule),
                functools.partial(reparse_pod, keep_raw=keep, rule=rule),
            )

        def parse(obj: Any) -> PodInfo:
            return _keeping(parse_pod(obj, keep_raw=True, rule=rule), obj)

        def reparse(obj: Any, old: PodInfo) -> PodInfo:
            return _keeping(reparse_pod(obj, old, keep_raw=True, rule=rule), obj)

        return parse, reparse

    async def filter(
        self,
        pod: PodInfo,
        nodes: Sequence[Node],
        record: dict[str, ExtenderVerdicts] | None = None,
    ) -> ExtenderFiltering:
        """Each interested extender in turn, on what the previous kept (kube-scheduler's
        findNodesThatPassExtenders); ExtenderError from one that is not ignorable. With
        `record` (extender name -> verdicts), what each said is kept there too."""
        by_name = {n.name: n for n in nodes}
        outcome = ExtenderFiltering([n.name for n in nodes])
        for extender in self.all:
            if not outcome.kept:
                break
            if not extender.is_interested(pod):
                continue
            verdicts = None
            if record is not None and extender.config.filter_verb:
                verdicts = record.setdefault(extender.name, self._verdicts(extender))
                verdicts.sent = list(outcome.kept)
            try:
                kept, failed, hopeless = await extender.filter(
                    pod, [by_name[n] for n in outcome.kept]
                )
            except ExtenderError as exc:
                if verdicts is not None:
                    verdicts.filter_error = str(exc)
                if extender.config.ignorable:
                    log.info("extender_skipped", extender=extender.name, error=str(exc))
                    continue
                raise
            if verdicts is not None:
                verdicts.passed = list(kept)
                verdicts.failed = dict(failed)
                verdicts.unresolvable = dict(hopeless)
            for name, reason in hopeless.items():
                outcome.statuses[name] = Status(
                    Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (reason,), EXTENDER
                )
            for name, reason in failed.items():
                if name not in hopeless:
                    outcome.statuses[name] = Status(Code.UNSCHEDULABLE, (reason,), EXTENDER)
            if len(kept) != len(outcome.kept):
                outcome.filtered = True
            outcome.kept = kept
        return outcome

    async def prioritize(
        self,
        pod: PodInfo,
        nodes: Sequence[Node],
        record: dict[str, ExtenderVerdicts] | None = None,
    ) -> dict[str, int]:
        """Every interested extender's weighted scores, summed per node; one that fails
        gives none (kube-scheduler ignores prioritize errors). With `record`, each one's
        scores (before its weight) are kept there too."""
        total: dict[str, int] = {}
        for extender in self.all:
            if not extender.is_interested(pod) or not extender.config.prioritize_verb:
                continue
            verdicts = None
            if record is not None:
                verdicts = record.setdefault(extender.name, self._verdicts(extender))
            try:
                scores = await extender.scores(pod, nodes)
            except Exception as exc:  # kube-scheduler ignores every prioritize failure
                log.info("extender_prioritize_failed", extender=extender.name, error=repr(exc))
                if verdicts is not None:
                    verdicts.prioritize_error = str(exc) or repr(exc)
                continue
            if verdicts is not None:
                verdicts.scores = dict(scores)
            scale = extender.config.weight * (MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY)
            for name, score in scores.items():
                total[name] = total.get(name, 0) + score * scale
        return total

    @staticmethod
    def _verdicts(extender: HTTPExtender) -> ExtenderVerdicts:
        return ExtenderVerdicts(
            extender.name, ignorable=extender.config.ignorable, weight=extender.config.weight
        )

    async def process_preemption(
        self, pod: PodInfo, victims: Mapping[str, Victims], pods_on: PodsOnNode
    ) -> dict[str, Victims]:
        """kube-scheduler's callExtenders: each interested extender with a preempt verb in
        turn, on what the previous returned; what the last returned replaces the candidates.
        A node it returns without victims is an error, or dropped when the extender is
        ignorable; so is any other failure (ExtenderError), or the extender is skipped."""
        current = dict(victims)
        for extender in self.all:
            if not current:
                break
            if not extender.supports_preemption or not extender.is_interested(pod):
                continue
            try:
                returned = await extender.process_preemption(pod, current, pods_on)
            except ExtenderError as exc:
                if extender.config.ignorable:
                    log.info("extender_preempt_skipped", extender=extender.name, error=str(exc))
                    continue
                raise
            for node in [n for n, v in returned.items() if not v.pods]:
                if not extender.config.ignorable:
                    raise ExtenderError(f'expected at least one victim pod on node "{node}"')
                log.info("extender_preempt_node_ignored", extender=extender.name, node=node)
                del returned[node]
            current = returned
        return current

    async def bind(self, pod: PodInfo, node: str) -> Status | None:
        """The first interested binder's answer; None when none binds the pod."""
        for extender in self.all:
            if not extender.is_binder or not extender.is_interested(pod):
                continue
            try:
                await extender.bind(pod, node)
            except ExtenderError as exc:
                if extender.config.ignorable:
                    log.info("extender_bind_skipped", extender=extender.name, error=str(exc))
                    continue
                return Status.error(f"extender {extender.name} bind: {exc}", EXTENDER)
            return Status()
        return None

    async def close(self) -> None:
        for extender in self.all:
            await extender.close()


class ExtenderPostFilterPlugin(PostFilterPlugin):
    """A PostFilter that consults the HTTP extenders (preemption asks their preempt verb
    which candidates to keep). A profile with extenders awaits this instead of `post_filter`;
    the table may change during the await, so nodes cross it by name."""

    @abc.abstractmethod
    async def post_filter_with_extenders(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        diagnosis: Diagnosis,
        extenders: Extenders,
    ) -> PostFilterResult:
        """`post_filter`, the extenders asked where kube-scheduler asks them."""
