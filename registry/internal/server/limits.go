package server

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// Names of the per-cluster quotas, as the refusal metric labels them.
const (
	LimitExportsPerCluster   = "exports_per_cluster"
	LimitEndpointsPerCluster = "endpoints_per_cluster"
	LimitBytesPerCluster     = "bytes_per_cluster"
)

// quotaRefusal is the RESOURCE_EXHAUSTED status of a write past a quota, naming its flag;
// the refusal is counted. The quotas (--max-exports-per-cluster, --max-endpoints-per-cluster,
// --max-bytes-per-cluster) are the store's: it checks each write against what it holds of
// the cluster through every replica, and refuses one whose own weight passes a quota
// without asking the table. The server checks none itself.
func (s *Server) quotaRefusal(qe *store.QuotaError) error {
	limit, flag, what := LimitBytesPerCluster, "--max-bytes-per-cluster", "bytes of specs and endpoints in all its exports"
	switch qe.Limit {
	case store.QuotaExports:
		limit, flag, what = LimitExportsPerCluster, "--max-exports-per-cluster", "exports"
	case store.QuotaEndpoints:
		limit, flag, what = LimitEndpointsPerCluster, "--max-endpoints-per-cluster", "endpoints in all its exports"
	}
	s.refused(limit)
	return status.Error(codes.ResourceExhausted, fmt.Sprintf("cluster %s/%s: %d %s, at most %d per cluster (%s); nothing was changed",
		qe.Cluster.Clusterset, qe.Cluster.ClusterID, qe.Used, what, qe.Max, flag))
}

// clusterLocks serializes one cluster's export writes on this replica, so a quota is
// checked against what the cluster holds and no two of its writes race past it.
type clusterLocks struct {
	mu sync.Mutex
	m  map[store.ClusterKey]*clusterLock
}

type clusterLock struct {
	held  chan struct{} // a one-slot semaphore, so a waiting write can give up with its context
	users int
}

// lock locks the cluster's writes and returns the unlock, or the context's error.
func (l *clusterLocks) lock(ctx context.Context, k store.ClusterKey) (func(), error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[store.ClusterKey]*clusterLock{}
	}
	e := l.m[k]
	if e == nil {
		e = &clusterLock{held: make(chan struct{}, 1)}
		l.m[k] = e
	}
	e.users++
	l.mu.Unlock()
	release := func() {
		l.mu.Lock()
		if e.users--; e.users == 0 {
			delete(l.m, k)
		}
		l.mu.Unlock()
	}
	select {
	case e.held <- struct{}{}:
		return func() { <-e.held; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}
