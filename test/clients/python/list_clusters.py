"""Calls the registry through the generated Python client: registers a cluster, then lists
the clusterset and prints each cluster id with its lease state as JSON.

Usage: python3 list_clusters.py <gen/python dir> <host:grpc-port> <clusterset> <cluster-id>
"""
import json
import sys

sys.path.insert(0, sys.argv[1])

import grpc  # noqa: E402
from globaldiscoverymcs.registry.v1 import registry_pb2, registry_pb2_grpc  # noqa: E402


def main() -> None:
    addr, clusterset, cluster_id = sys.argv[2:5]
    with grpc.insecure_channel(addr) as channel:
        stub = registry_pb2_grpc.RegistryServiceStub(channel)
        stub.RegisterCluster(
            registry_pb2.RegisterClusterRequest(clusterset=clusterset, cluster_id=cluster_id, region="py-region"),
            timeout=10,
        )
        resp = stub.ListClusters(registry_pb2.ListClustersRequest(clusterset=clusterset), timeout=10)
    out = [
        {"clusterId": c.cluster_id, "region": c.region, "state": registry_pb2.LeaseState.Name(c.lease.state)}
        for c in resp.clusters
    ]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
