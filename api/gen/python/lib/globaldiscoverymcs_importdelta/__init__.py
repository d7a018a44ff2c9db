"""Applies the messages of a WatchImports stream opened with cluster_deltas and
snapshot_page_size, as importdelta in the Go module does. Hand-written (the generated code
is under src/)."""
from typing import Dict, List, Optional

from globaldiscoverymcs.registry.v1 import registry_pb2

__all__ = ["key", "apply_delta", "ImportView"]


def key(k: registry_pb2.ServiceKey) -> str:
    """Names a Service: "<namespace>/<name>"."""
    return f"{k.namespace}/{k.name}"


def apply_delta(prev: Optional[registry_pb2.ServiceImport], d: registry_pb2.ImportDelta) -> registry_pb2.ServiceImport:
    """Returns prev with d applied; prev (None: the import is new) is not changed. Clusters
    stay sorted by id."""
    out = registry_pb2.ServiceImport(service=d.service)
    if prev is not None:
        out.spec.CopyFrom(prev.spec)
        out.winning_cluster_id = prev.winning_cluster_id
        out.conflicts.extend(prev.conflicts)
    if d.HasField("header"):
        out.ClearField("spec")
        if d.header.HasField("spec"):
            out.spec.CopyFrom(d.header.spec)
        out.winning_cluster_id = d.header.winning_cluster_id
        del out.conflicts[:]
        out.conflicts.extend(d.header.conflicts)
    drop = set(d.removed_cluster_ids) | {c.cluster_id for c in d.clusters}
    kept = [c for c in (prev.clusters if prev is not None else []) if c.cluster_id not in drop]
    out.clusters.extend(sorted(kept + list(d.clusters), key=lambda c: c.cluster_id))
    return out


class ImportView:
    """A clusterset's imports as the watch sends them. Feed it every message in order, and
    tell it when a stream ends (stream_ended)."""

    def __init__(self) -> None:
        #: Imports by key: the state after the last message applied.
        self.imports: Dict[str, registry_pb2.ServiceImport] = {}
        #: Epoch and revision of the last message applied: resume a broken stream with them.
        self.epoch = ""
        self.revision = 0
        #: The last message applied ended a snapshot, which replaced imports.
        self.snapshot = False
        self._paging: Optional[Dict[str, registry_pb2.ServiceImport]] = None

    def apply(self, msg: registry_pb2.WatchImportsResponse) -> Optional[List[str]]:
        """Applies one message and returns the keys of the Services it changed (a key absent
        from imports afterwards was deleted), or None while a snapshot's pages arrive: the
        snapshot replaces imports at its last page, so a reader never sees a partial set
        (which would look like deletions)."""
        changed = set()
        if msg.snapshot:
            self._paging = {}
        if self._paging is not None:
            for imp in msg.upserts:
                self._paging[key(imp.service)] = imp
            if msg.snapshot_continues:
                return None
            changed.update(k for k in self.imports if k not in self._paging)
            changed.update(self._paging)
            self.imports, self._paging, self.snapshot = self._paging, None, True
        else:
            self.snapshot = False
            for imp in msg.upserts:
                self.imports[key(imp.service)] = imp
                changed.add(key(imp.service))
        for d in msg.deltas:
            k = key(d.service)
            self.imports[k] = apply_delta(self.imports.get(k), d)
            changed.add(k)
        for s in msg.deletes:
            self.imports.pop(key(s), None)
            changed.add(key(s))
        self.epoch, self.revision = msg.epoch, msg.revision
        return sorted(changed)

    def stream_ended(self) -> None:
        """Drops a snapshot the ended stream cut short: imports, epoch and revision stay
        those of the last whole state, which a new stream resumes from."""
        self._paging = None
