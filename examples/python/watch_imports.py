"""Lists the clusters of a clusterset and watches its ServiceImports through the generated
Python client (pip install ./api/gen/python). Prints one JSON line for the clusters, then
one per change of its view of the imports (a snapshot, however many pages it took, or a
delta), and exits after --events of them (0: never).

    python3 watch_imports.py --registry localhost:9090 --clusterset prod --events 2

Plaintext, as an evaluation registry serves; for TLS use grpc.secure_channel with
grpc.ssl_channel_credentials(root_certificates=..., private_key=..., certificate_chain=...).
"""
import argparse
import json
import sys

import grpc
from globaldiscoverymcs.registry.v1 import registry_pb2, registry_pb2_grpc
from globaldiscoverymcs_importdelta import ImportView


def addresses(imp: registry_pb2.ServiceImport) -> dict:
    """An import's endpoint addresses by source cluster."""
    return {c.cluster_id: [a for g in c.endpoint_groups for e in g.endpoints for a in e.addresses] for c in imp.clusters}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--registry", default="localhost:9090", help="the registry's gRPC address (host:port)")
    parser.add_argument("--clusterset", required=True, help="the clusterset id")
    parser.add_argument("--events", type=int, default=0, help="exit after this many changes of the view; 0: never")
    parser.add_argument("--page-size", type=int, default=256, help="imports per snapshot message (1 to 10000)")
    args = parser.parse_args()

    with grpc.insecure_channel(args.registry) as channel:
        stub = registry_pb2_grpc.RegistryServiceStub(channel)
        resp = stub.ListClusters(registry_pb2.ListClustersRequest(clusterset=args.clusterset), timeout=10)
        clusters = [
            {"clusterId": c.cluster_id, "region": c.region, "state": registry_pb2.LeaseState.Name(c.lease.state)}
            for c in resp.clusters
        ]
        print(json.dumps({"clusters": clusters}), flush=True)

        # Cluster deltas (an endpoint change sends only that cluster's part of the import)
        # and snapshots in pages, as the controller watches; ImportView puts them together.
        watch = stub.WatchImports(registry_pb2.WatchImportsRequest(
            clusterset=args.clusterset, include_endpoints=True, cluster_deltas=True, snapshot_page_size=args.page_size))
        view = ImportView()
        n = 0
        for msg in watch:
            changed = view.apply(msg)
            if changed is None:
                continue  # a page of a snapshot: the view changes at its last page
            # One line per change of the view: the Services changed, and for each that is
            # still imported, its endpoint addresses by source cluster. Resume after a
            # disconnect with resume_epoch and resume_revision (view.epoch, view.revision),
            # after view.stream_ended().
            upserts = [k for k in changed if k in view.imports]
            print(json.dumps({
                "revision": view.revision,
                "snapshot": view.snapshot,
                "upserts": upserts,
                "deletes": [k for k in changed if k not in view.imports],
                "endpoints": {k: addresses(view.imports[k]) for k in upserts},
            }), flush=True)
            n += 1
            if args.events and n >= args.events:
                watch.cancel()
                break
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except grpc.RpcError as err:
        print(f"error: {err.code().name}: {err.details()}", file=sys.stderr)
        sys.exit(1)
