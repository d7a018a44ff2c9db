package server

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// Limits bound what one cluster may hold, so no cluster can make every member cluster
// write (and every watch carry) more than the fleet planned for. Zero: no limit.
type Limits struct {
	// MaxExportsPerCluster is --max-exports-per-cluster.
	MaxExportsPerCluster int
	// MaxEndpointsPerCluster is --max-endpoints-per-cluster.
	MaxEndpointsPerCluster int
	// MaxBytesPerCluster is --max-bytes-per-cluster.
	MaxBytesPerCluster int
}

// Names of the limits, as the refusal metric labels them.
const (
	LimitExportsPerCluster   = "exports_per_cluster"
	LimitEndpointsPerCluster = "endpoints_per_cluster"
	LimitBytesPerCluster     = "bytes_per_cluster"
)

// overQuota returns a RESOURCE_EXHAUSTED status when a cluster holding u would exceed a limit.
func (s *Server) overQuota(key store.ClusterKey, u store.Usage) error {
	if l := s.limits.MaxExportsPerCluster; l > 0 && u.Exports > l {
		s.refused(LimitExportsPerCluster)
		return status.Error(codes.ResourceExhausted, fmt.Sprintf("cluster %s/%s: %d exports, at most %d per cluster (--max-exports-per-cluster); nothing was changed",
			key.Clusterset, key.ClusterID, u.Exports, l))
	}
	if l := s.limits.MaxEndpointsPerCluster; l > 0 && u.Endpoints > l {
		s.refused(LimitEndpointsPerCluster)
		return status.Error(codes.ResourceExhausted, fmt.Sprintf("cluster %s/%s: %d endpoints in all its exports, at most %d per cluster (--max-endpoints-per-cluster); nothing was changed",
			key.Clusterset, key.ClusterID, u.Endpoints, l))
	}
	if l := s.limits.MaxBytesPerCluster; l > 0 && u.Bytes > l {
		s.refused(LimitBytesPerCluster)
		return status.Error(codes.ResourceExhausted, fmt.Sprintf("cluster %s/%s: %d bytes of specs and endpoints in all its exports, at most %d per cluster (--max-bytes-per-cluster); nothing was changed",
			key.Clusterset, key.ClusterID, u.Bytes, l))
	}
	return nil
}

// quotaNames maps a store quota to the refusal metric's limit name and the flag.
func quotaNames(quota string) (limit, flag string) {
	switch quota {
	case store.QuotaExports:
		return LimitExportsPerCluster, "--max-exports-per-cluster"
	case store.QuotaEndpoints:
		return LimitEndpointsPerCluster, "--max-endpoints-per-cluster"
	default:
		return LimitBytesPerCluster, "--max-bytes-per-cluster"
	}
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
