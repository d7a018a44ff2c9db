"""Lists the clusters of a clusterset and watches its ServiceImports through the generated
Python client (pip install ./api/gen/python). Prints one JSON line for the clusters, then
one per watch message, and exits after --events messages (0: never).

    python3 watch_imports.py --registry localhost:9090 --clusterset prod --events 2

Plaintext, as an evaluation registry serves; for TLS use grpc.secure_channel with
grpc.ssl_channel_credentials(root_certificates=..., private_key=..., certificate_chain=...).
"""
import argparse
import json
import sys

import grpc
from globaldiscoverymcs.registry.v1 import registry_pb2, registry_pb2_grpc


def key(k: registry_pb2.ServiceKey) -> str:
    return f"{k.namespace}/{k.name}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--registry", default="localhost:9090", help="the registry's gRPC address (host:port)")
    parser.add_argument("--clusterset", required=True, help="the clusterset id")
    parser.add_argument("--events", type=int, default=0, help="exit after this many watch messages; 0: never")
    args = parser.parse_args()

    with grpc.insecure_channel(args.registry) as channel:
        stub = registry_pb2_grpc.RegistryServiceStub(channel)
        resp = stub.ListClusters(registry_pb2.ListClustersRequest(clusterset=args.clusterset), timeout=10)
        clusters = [
            {"clusterId": c.cluster_id, "region": c.region, "state": registry_pb2.LeaseState.Name(c.lease.state)}
            for c in resp.clusters
        ]
        print(json.dumps({"clusters": clusters}), flush=True)

        watch = stub.WatchImports(registry_pb2.WatchImportsRequest(clusterset=args.clusterset))
        n = 0
        # A snapshot replaces what the client holds; otherwise upserts and deletes apply in
        # order. Resume after a disconnect with resume_epoch and resume_revision.
        for msg in watch:
            print(json.dumps({
                "revision": msg.revision,
                "snapshot": msg.snapshot,
                "upserts": [key(i.service) for i in msg.upserts],
                "deletes": [key(k) for k in msg.deletes],
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
