// Lists the clusters of a clusterset and watches its ServiceImports through the generated
// TypeScript client. Prints one JSON line for the clusters, then one per watch message, and
// exits after --events messages (0: never).
//
//   npm run build && node dist/main.js --registry http://localhost:9090 --clusterset prod --events 2
//
// Plaintext, as an evaluation registry serves; for TLS use an https:// URL and pass the CA
// (and a client certificate) in createGrpcTransport's nodeOptions.
import { parseArgs } from "node:util";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { LeaseState, RegistryService, type ServiceKey } from "@ai-dynamo/global-discovery-mcs-api/registry/v1";

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      registry: { type: "string", default: "http://localhost:9090" },
      clusterset: { type: "string" },
      events: { type: "string", default: "0" },
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

  const key = (k?: ServiceKey) => `${k?.namespace}/${k?.name}`;
  const abort = new AbortController();
  let n = 0;
  // A snapshot replaces what the client holds; otherwise upserts and deletes apply in order.
  // Resume after a disconnect with resumeEpoch and resumeRevision.
  for await (const msg of client.watchImports({ clusterset: values.clusterset }, { signal: abort.signal })) {
    console.log(JSON.stringify({
      revision: Number(msg.revision),
      snapshot: msg.snapshot,
      upserts: msg.upserts.map((i) => key(i.service)),
      deletes: msg.deletes.map(key),
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
