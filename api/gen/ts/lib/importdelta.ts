// Hand-written (the generated code is under src/): applies the messages of a WatchImports
// stream opened with clusterDeltas and snapshotPageSize, as importdelta in the Go module does.
import { create } from "@bufbuild/protobuf";
import {
  ServiceImportSchema,
  type ImportDelta,
  type ServiceImport,
  type ServiceKey,
  type WatchImportsResponse,
} from "../src/globaldiscoverymcs/registry/v1/registry_pb.js";

/** key names a Service: "<namespace>/<name>". */
export function key(k?: ServiceKey): string {
  return `${k?.namespace ?? ""}/${k?.name ?? ""}`;
}

/**
 * applyDelta returns prev with d applied; prev (undefined: the import is new) is not
 * changed, and the result shares prev's unchanged clusters. Clusters stay sorted by id.
 */
export function applyDelta(prev: ServiceImport | undefined, d: ImportDelta): ServiceImport {
  const out = create(ServiceImportSchema, { service: d.service });
  if (prev) {
    out.spec = prev.spec;
    out.winningClusterId = prev.winningClusterId;
    out.conflicts = prev.conflicts;
  }
  if (d.header) {
    out.spec = d.header.spec;
    out.winningClusterId = d.header.winningClusterId;
    out.conflicts = d.header.conflicts;
  }
  const drop = new Set([...d.removedClusterIds, ...d.clusters.map((c) => c.clusterId)]);
  out.clusters = [...(prev?.clusters ?? []).filter((c) => !drop.has(c.clusterId)), ...d.clusters];
  out.clusters.sort((a, b) => (a.clusterId < b.clusterId ? -1 : a.clusterId > b.clusterId ? 1 : 0));
  return out;
}

/**
 * ImportView is a clusterset's imports as the watch sends them. Feed it every message in
 * order, and tell it when a stream ends (streamEnded).
 */
export class ImportView {
  /** Imports by key: the state after the last message applied. */
  imports = new Map<string, ServiceImport>();
  /** Epoch and revision of the last message applied: resume a broken stream with them. */
  epoch = "";
  revision = 0n;
  /** The last message applied ended a snapshot, which replaced imports. */
  snapshot = false;
  private paging?: Map<string, ServiceImport>;

  /**
   * apply applies one message and returns the keys of the Services it changed (a key
   * absent from imports afterwards was deleted), or undefined while a snapshot's pages
   * arrive: the snapshot replaces imports at its last page, so a reader never sees a
   * partial set (which would look like deletions).
   */
  apply(msg: WatchImportsResponse): string[] | undefined {
    const changed = new Set<string>();
    if (msg.snapshot) this.paging = new Map();
    if (this.paging) {
      for (const imp of msg.upserts) this.paging.set(key(imp.service), imp);
      if (msg.snapshotContinues) return undefined;
      for (const k of this.imports.keys()) if (!this.paging.has(k)) changed.add(k);
      for (const k of this.paging.keys()) changed.add(k);
      this.imports = this.paging;
      this.paging = undefined;
      this.snapshot = true;
    } else {
      this.snapshot = false;
      for (const imp of msg.upserts) {
        this.imports.set(key(imp.service), imp);
        changed.add(key(imp.service));
      }
    }
    for (const d of msg.deltas) {
      const k = key(d.service);
      this.imports.set(k, applyDelta(this.imports.get(k), d));
      changed.add(k);
    }
    for (const s of msg.deletes) {
      this.imports.delete(key(s));
      changed.add(key(s));
    }
    this.epoch = msg.epoch;
    this.revision = msg.revision;
    return [...changed].sort();
  }

  /**
   * streamEnded drops a snapshot the ended stream cut short: imports, epoch and revision
   * stay those of the last whole state, which a new stream resumes from.
   */
  streamEnded(): void {
    this.paging = undefined;
  }
}
