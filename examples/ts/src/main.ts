// Lists the clusters of a clusterset and watches its ServiceImports through the generated
// TypeScript client. Prints one JSON line for the clusters, then one per change of its view of
// the imports (a snapshot, however many pages it took, or a delta), and exits after --events
// of them (0: never).
//
//   npm run build && node dist/main.js --registry http://localhost:9090 --clusterset prod --events 2
//
// Plaintext, as an evaluation registry serves; for TLS use an https:// URL and pass the CA
// (and a client certificate) in createGrpcTransport's nodeOptions.
import { parseArgs } from "node:util";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { LeaseState, RegistryService } from "@ai-dynamo/global-discovery-mcs-api/registry/v1";
import { ImportView } from "@ai-dynamo/global-discovery-mcs-api/importdelta";

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      registry: { type: "string", default: "http://localhost:9090" },
      clusterset: { type: "string" },
      events: { type: "string", default: "0" },
      "page-size": { type: "string", default: "256" },
    },
  });
  if (!values.clusterset) {
    console.error("--clusterset is required");
    process.exit(2);
  }
  const events = Number(values.events);
  const client = createClient(RegistryService, createGrpcTransport({ baseUrl: values.registry }));

  const { clusters } = await client.listClusters({ clusterset: values.clusterset });
  console.log(JSON.stringify({
    clusters: clusters.map((c) => ({
      clusterId: c.clusterId,
      region: c.region,
      // protobuf-es drops the enum prefix from names; print the proto name.
      state: "LEASE_STATE_" + LeaseState[c.lease?.state ?? LeaseState.UNSPECIFIED],
    })),
  }));

  // Cluster deltas (an endpoint change sends only that cluster's part of the import) and
  // snapshots in pages, as the controller watches; ImportView puts them together.
  const view = new ImportView();
  const abort = new AbortController();
  let n = 0;
  const request = { clusterset: values.clusterset, includeEndpoints: true, clusterDeltas: true, snapshotPageSize: Number(values["page-size"]) };
  for await (const msg of client.watchImports(request, { signal: abort.signal })) {
    const changed = view.apply(msg);
    if (changed === undefined) continue; // a page of a snapshot: the view changes at its last page
    // One line per change of the view: the Services changed, and for each that is still
    // imported, its endpoint addresses by source cluster. Resume after a disconnect with
    // resumeEpoch and resumeRevision (view.epoch, view.revision), after view.streamEnded().
    const upserts = changed.filter((k) => view.imports.has(k));
    const endpoints: Record<string, Record<string, string[]>> = {};
    for (const k of upserts) {
      endpoints[k] = Object.fromEntries(view.imports.get(k)!.clusters.map((c) => [
        c.clusterId, c.endpointGroups.flatMap((g) => g.endpoints.flatMap((e) => e.addresses)),
      ]));
    }
    console.log(JSON.stringify({
      revision: Number(view.revision),
      snapshot: view.snapshot,
      upserts,
      deletes: changed.filter((k) => !view.imports.has(k)),
      endpoints,
    }));
    if (events > 0 && ++n >= events) {
      abort.abort();
      break;
    }
  }
}

main().catch((err) => {
  console.error("error:", err);
  process.exit(1);
});
