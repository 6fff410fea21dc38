"""The node table's writes, which only the scheduler's cache makes: nodes added, updated and
removed (rows kept dense: the last row moves into a removed one's place), pods' usage added
and taken off, and the pod index kept up to date with them. What the columns hold and why
the table doubles as the scheduling cycle's snapshot: `ascheduler.framework.nodes`.

Usage is kept exactly (`RowUsage`) and saturated into the columns; every mutation computes
first and assigns last, so none can leave a row half-updated.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator

import numpy as np

from ascheduler.framework.nodes import CPU, MEMORY, PODS, NodeTable, RowUsage
from ascheduler.framework.podindex import TERM_KINDS, CountColumn, selector_hint
from ascheduler.model import Node, PodInfo
from ascheduler.model.nodefeatures import mask as feature_mask
from ascheduler.model.quantity import saturate
from ascheduler.model.topology import PodAffinity
from ascheduler.model.volumes import CLAIM, DISKS


class MutableNodeTable(NodeTable):
    """The node table with its writes: the one the cache owns."""

    # -- nodes -------------------------------------------------------------------------------

    def add(self, info: Node) -> int:
        if self.n == self._cap:
            self._grow()
        row = self.n
        self.n += 1
        self.names.append(info.name)
        self.infos.append(info)
        self.ports.append({})
        self._usage.append(RowUsage())
        self.index[info.name] = row
        self._index_images(info.name, None, info)
        self._requested[:, row] = 0
        self._nonzero[:, row] = 0
        self._set_spec(row, info)
        self.spec_generation += 1
        return row

    def update(self, info: Node) -> None:
        row = self.index[info.name]
        if not self.infos[row].spec_equal(info):
            self.spec_generation += 1
        self._index_images(info.name, self.infos[row], info)
        self.infos[row] = info
        self._set_spec(row, info)

    def remove(self, name: str) -> None:
        row = self.index.pop(name)
        last = self.n - 1
        self._drop_row_pods(row, last)
        self._index_images(name, self.infos[row], None)
        if row != last:
            for arr in (self._alloc, self._requested, self._free, self._nonzero):
                arr[:, row] = arr[:, last]
            self._unschedulable[row] = self._unschedulable[last]
            self._declared[row] = self._declared[last]
            self.names[row] = self.names[last]
            self.infos[row] = self.infos[last]
            self.ports[row] = self.ports[last]
            self._usage[row] = self._usage[last]
            self.index[self.names[row]] = row
        self.names.pop()
        self.infos.pop()
        self.ports.pop()
        self._usage.pop()
        self.n = last
        self.spec_generation += 1

    def _set_spec(self, row: int, info: Node) -> None:
        # Resolve (and maybe add) resource rows first: adding one replaces the arrays.
        rows = [(self._node_resource_row(name), value) for name, value in info.allocatable.items()]
        self._alloc[:, row] = 0
        for resource, value in rows:
            self._alloc[resource, row] = value
        self._free[:, row] = self._alloc[:, row] - self._requested[:, row]
        self._touch(row)
        self._unschedulable[row] = info.unschedulable
        self._declared[row] = feature_mask(info.declared_features)

    def _node_resource_row(self, name: str) -> int:
        """The row of a resource a node advertises, added the first time (zero allocatable
        everywhere, the usage pods already on nodes have of it)."""
        row = self.resource_index.get(name)
        if row is not None:
            return row
        requested = np.zeros((1, self._cap), dtype=np.int64)
        for r in range(self.n):
            requested[0, r] = saturate(self._usage[r].requested.get(name, 0))
        alloc = np.vstack([self._alloc, np.zeros((1, self._cap), dtype=np.int64)])
        requested = np.vstack([self._requested, requested])
        free = np.vstack([self._free, -requested[-1:]])
        row = len(self.resource_names)
        self._alloc, self._requested, self._free = alloc, requested, free
        self.resource_index[name] = row
        self.resource_names.append(name)
        return row

    def _grow(self) -> None:
        cap = self._cap * 2
        for attr in ("_alloc", "_requested", "_free", "_nonzero"):
            old = getattr(self, attr)
            new = np.zeros((old.shape[0], cap), dtype=np.int64)
            new[:, : self._cap] = old
            setattr(self, attr, new)
        unsched = np.zeros(cap, dtype=np.bool_)
        unsched[: self._cap] = self._unschedulable
        self._unschedulable = unsched
        declared = np.zeros(cap, dtype=np.int64)
        declared[: self._cap] = self._declared
        self._declared = declared
        for entry in (*self._counts.values(), *self._shapes.values(), *self._extra.values()):
            if entry.values is not None:
                values = np.zeros(cap, dtype=np.int64)
                values[: self._cap] = entry.values
                entry.values = values
        self._cap = cap

    def _index_images(self, node: str, old: Node | None, new: Node | None) -> None:
        if old is not None and new is not None and old.images == new.images:
            return
        for names, _ in old.images if old is not None else ():
            for name in names:
                holders = self._image_nodes.get(name)
                if holders is not None:
                    holders.pop(node, None)
                    if not holders:
                        del self._image_nodes[name]
                        del self._image_size[name]
        for names, size in new.images if new is not None else ():
            for name in names:
                self._image_nodes.setdefault(name, {})[node] = None
                self._image_size.setdefault(name, size)

    def _touch(self, row: int) -> None:
        if self._row_values:
            self._touched.append(row)

    # -- pods --------------------------------------------------------------------------------

    def add_usage(self, row: int, pod: PodInfo, sign: int) -> None:
        """Add (sign=1) or remove (sign=-1) a pod's requests on a row."""
        self._account(row, pod, sign)
        self._write_row(row, pod.requests)

    def add_usages(self, placed: Iterable[tuple[int, PodInfo]], sign: int) -> None:
        """`add_usage` for many pods (row, pod), each row's columns written once: taking
        thousands of pods off the table and putting them back (a group preemption's dry
        run) costs their bookkeeping, not a column write each."""
        touched: dict[int, set[str]] = {}
        for row, pod in placed:
            self._account(row, pod, sign)
            names = touched.get(row)
            if names is None:
                touched[row] = set(pod.requests)
            else:
                names.update(pod.requests)
        for row, names in touched.items():
            self._write_row(row, names)

    def _account(self, row: int, pod: PodInfo, sign: int) -> None:
        """A pod's usage and index entries on a row, but for the row's columns."""
        usage = self._usage[row]
        exact = usage.requested
        for name, value in pod.requests.items():
            if name == "pods":
                continue  # a pod counts as one pod, whatever it claims
            total = exact.get(name, 0) + sign * value
            if total:
                exact[name] = total
            else:
                exact.pop(name, None)
        if sign > 0:
            usage.pods[pod.uid] = pod
        else:
            usage.pods.pop(pod.uid, None)
        self._index_pod(row, pod, sign)
        usage.nonzero_cpu += sign * pod.nonzero_cpu
        usage.nonzero_memory += sign * pod.nonzero_memory
        if pod.host_ports:
            used = self.ports[row]
            for port in pod.host_ports:
                count = used.get(port, 0) + sign
                if count > 0:
                    used[port] = count
                else:
                    used.pop(port, None)

    def _write_row(self, row: int, names: Iterable[str]) -> None:
        """The row's columns from its exact usage, for the resources `names` and the counts
        every pod changes."""
        usage = self._usage[row]
        exact = usage.requested
        for name in names:
            resource = self.resource_index.get(name)
            if resource is not None and name != "pods":
                self._requested[resource, row] = saturate(exact.get(name, 0))
        self._requested[PODS, row] = len(usage.pods)
        self._nonzero[CPU, row] = saturate(usage.nonzero_cpu)
        self._nonzero[MEMORY, row] = saturate(usage.nonzero_memory)
        self._free[:, row] = self._alloc[:, row] - self._requested[:, row]
        self._touch(row)

    def replace_pod(self, row: int, old: PodInfo, new: PodInfo) -> bool:
        """Count `new` instead of `old` on `row` (the same pod, a newer version) without
        taking it off and putting it back, when nothing the row's counts read differs (its
        requests, ports, labels, namespace, deletion, pod (anti-)affinity, volumes). True if
        done; False if the caller must remove `old` and add `new`. The row is not touched:
        its usage is what it was, and scores kept per row stay valid."""
        if not (
            new.uid == old.uid
            and new.requests == old.requests
            and new.nonzero_cpu == old.nonzero_cpu
            and new.nonzero_memory == old.nonzero_memory
            and new.host_ports == old.host_ports
            and new.namespace == old.namespace
            and new.priority == old.priority
            and new.deleting == old.deleting
            and new.labels == old.labels
            and new.pod_affinity == old.pod_affinity
            and not new.volumes
            and not old.volumes
        ):
            return False
        usage = self._usage[row]
        if usage.pods.get(old.uid) is not old:
            return False
        usage.pods[new.uid] = new
        self._ns_pods[new.namespace][new.uid] = new
        self._by_priority[new.priority][new.uid] = new
        return True

    def add_extra(self, key: Hashable, row: int, sign: int) -> None:
        """Add to a count column someone else keeps up to date (`extra_counts` reads it)."""
        entry = self._extra.get(key)
        if entry is None:
            entry = self._extra[key] = CountColumn(None, {})
        entry.add(row, sign)

    def _index_pod(self, row: int, pod: PodInfo, sign: int) -> None:
        if sign > 0:
            self._pod_row[pod.uid] = row
            self._ns_pods.setdefault(pod.namespace, {})[pod.uid] = pod
            self._by_priority.setdefault(pod.priority, {})[pod.uid] = pod
            for key, value in pod.labels.items():
                self._label_pods.setdefault((pod.namespace, key, value), {})[pod.uid] = None
            if pod.volumes:
                self._index_volumes(pod, 1)
        else:
            self._unindex_pod(pod)
        for entry in self._columns_for(pod):
            if entry.predicate is not None and entry.predicate.matches(pod):
                entry.add(row, sign)
        if pod.pod_affinity:
            self._count_shape(pod.pod_affinity, row, sign)

    def _columns_for(self, pod: PodInfo) -> Iterator[CountColumn]:
        """The count columns `pod` may count in (each once)."""
        yield from self._counts_unhinted.values()
        seen: set[int] = set()
        for key, value in pod.labels.items():
            for entry in self._counts_by_label.get((key, value), {}).values():
                if id(entry) not in seen:
                    seen.add(id(entry))
                    yield entry

    def _count_shape(self, shape: PodAffinity, row: int, sign: int) -> None:
        entry = self._shapes.get(shape)
        if entry is None:
            entry = self._shapes[shape] = CountColumn(None, {})
            self._index_shape(shape, True)
        entry.add(row, sign)
        if not entry.rows:
            del self._shapes[shape]
            self._index_shape(shape, False)

    def _index_shape(self, shape: PodAffinity, add: bool) -> None:
        for kind in TERM_KINDS:
            for i, entry in enumerate(getattr(shape, kind)):
                term = entry if kind.startswith("required") else entry.term
                ref = (shape, kind, i)
                hint = selector_hint(term.selector)
                if hint is None:
                    if add:
                        self._terms_unindexed[ref] = None
                    else:
                        self._terms_unindexed.pop(ref, None)
                    continue
                key, values = hint
                for v in values:
                    group = self._terms_by_label.setdefault((key, v), {})
                    if add:
                        group[ref] = None
                    else:
                        group.pop(ref, None)
                        if not group:
                            del self._terms_by_label[(key, v)]

    def _index_volumes(self, pod: PodInfo, sign: int) -> None:
        for v in pod.volumes:
            if v.kind == CLAIM:
                key = (pod.namespace, v.claim)
                count = self._claim_users.get(key, 0) + sign
                if count > 0:
                    self._claim_users[key] = count
                else:
                    self._claim_users.pop(key, None)
            elif v.kind in DISKS:
                disk = (v.kind, v.disk)
                if sign > 0:
                    self._disk_users.setdefault(disk, {})[pod.uid] = v
                else:
                    users = self._disk_users.get(disk)
                    if users is not None:
                        users.pop(pod.uid, None)
                        if not users:
                            del self._disk_users[disk]

    def _unindex_pod(self, pod: PodInfo) -> None:
        if self._pod_row.pop(pod.uid, None) is not None and pod.volumes:
            self._index_volumes(pod, -1)
        members = self._ns_pods.get(pod.namespace)
        if members is not None:
            members.pop(pod.uid, None)
            if not members:
                del self._ns_pods[pod.namespace]
        level = self._by_priority.get(pod.priority)
        if level is not None:
            level.pop(pod.uid, None)
            if not level:
                del self._by_priority[pod.priority]
        for key, value in pod.labels.items():
            group = self._label_pods.get((pod.namespace, key, value))
            if group is not None:
                group.pop(pod.uid, None)
                if not group:
                    del self._label_pods[(pod.namespace, key, value)]

    def _drop_row_pods(self, row: int, last: int) -> None:
        """Row `row` goes away and row `last` moves into its place."""
        for pod in self._usage[row].pods.values():
            self._unindex_pod(pod)
        if row != last:
            for uid in self._usage[last].pods:
                self._pod_row[uid] = row
        for entry in (*self._counts.values(), *self._extra.values()):
            entry.move(row, last)
        for shape in list(self._shapes):
            entry = self._shapes[shape]
            entry.move(row, last)
            if not entry.rows:
                del self._shapes[shape]
                self._index_shape(shape, False)
