// Calls the registry through the generated TypeScript client: registers a cluster, then
// lists the clusterset and prints each cluster id with its lease state as JSON.
// Usage: node list_clusters.js <http://host:grpc-port> <clusterset> <cluster-id>
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { LeaseState, RegistryService } from "../../../api/gen/ts/globaldiscoverymcs/registry/v1/registry_pb.js";

async function main(): Promise<void> {
  const [baseUrl, clusterset, clusterId] = process.argv.slice(2);
  const client = createClient(RegistryService, createGrpcTransport({ baseUrl }));
  await client.registerCluster({ clusterset, clusterId, region: "ts-region" });
  const res = await client.listClusters({ clusterset });
  const out = res.clusters.map((c) => ({
    clusterId: c.clusterId,
    region: c.region,
    // protobuf-es drops the enum prefix from names; print the proto name.
    state: "LEASE_STATE_" + LeaseState[c.lease?.state ?? 0],
  }));
  console.log(JSON.stringify(out));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
