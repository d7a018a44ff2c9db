package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// NewReplicas returns n stores over one fresh, empty backing (registry replicas sharing a
// table; a store that cannot be shared returns one store n times), each enforcing q.
type NewReplicas func(t *testing.T, q store.Quota, n int) []store.Store

// RunQuota runs the quota conformance suite: a store enforces its Quota in the write itself,
// so replicas sharing it never let a cluster past a quota, even writing at once.
func RunQuota(t *testing.T, newReplicas NewReplicas) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, newReplicas NewReplicas)
	}{
		{"ExportsPerCluster", testQuotaExports},
		{"EndpointsAndBytesPerCluster", testQuotaEndpointsAndBytes},
		{"SyncReplacingAFullSet", testQuotaSyncReplacesFullSet},
		{"ConcurrentWritersOnTwoReplicas", testQuotaConcurrentReplicas},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newReplicas) })
	}
}

func quotaError(t *testing.T, err error, limit string) {
	t.Helper()
	var qe *store.QuotaError
	if !errors.As(err, &qe) || !errors.Is(err, store.ErrQuotaExceeded) || qe.Limit != limit {
		t.Fatalf("error %v; want a *QuotaError for %s", err, limit)
	}
}

func countExports(t *testing.T, s store.Store, clusterID string) int {
	t.Helper()
	list, err := s.ListExports(context.Background(), "prod")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list {
		if e.ClusterID == clusterID {
			n++
		}
	}
	return n
}

func testQuotaExports(t *testing.T, newReplicas NewReplicas) {
	ctx := context.Background()
	s := newReplicas(t, store.Quota{Exports: 3}, 1)[0]
	mustRegister(t, s, cluster("prod", "a", t0))
	mustRegister(t, s, cluster("prod", "b", t0))
	for i := range 3 {
		mustPut(t, s, export("prod", "a", "dynamo", fmt.Sprintf("svc%d", i), 80, t0))
	}
	_, err := s.PutExport(ctx, export("prod", "a", "dynamo", "svc3", 80, t0))
	quotaError(t, err, store.QuotaExports)
	mustPut(t, s, export("prod", "a", "dynamo", "svc1", 81, t0)) // a replacement adds nothing
	mustPut(t, s, export("prod", "b", "dynamo", "svc3", 80, t0)) // another cluster's quota
	if ok, err := s.DeleteExport(ctx, store.ClusterKey{Clusterset: "prod", ClusterID: "a"}, store.ServiceKey{Namespace: "dynamo", Name: "svc0"}); !ok || err != nil {
		t.Fatalf("DeleteExport: %v %v", ok, err)
	}
	mustPut(t, s, export("prod", "a", "dynamo", "svc3", 80, t0)) // the delete freed one
	if n := countExports(t, s, "a"); n != 3 {
		t.Fatalf("cluster a holds %d exports, want 3", n)
	}
	// A deleted cluster registered again starts from nothing.
	if _, err := s.DeleteCluster(ctx, store.ClusterKey{Clusterset: "prod", ClusterID: "a"}); err != nil {
		t.Fatal(err)
	}
	mustRegister(t, s, cluster("prod", "a", t0))
	for i := range 3 {
		mustPut(t, s, export("prod", "a", "dynamo", fmt.Sprintf("again%d", i), 80, t0))
	}
}

func testQuotaEndpointsAndBytes(t *testing.T, newReplicas NewReplicas) {
	ctx := context.Background()
	one := export("prod", "a", "dynamo", "x", 80, t0)
	w := store.Weight(one.Spec, one.EndpointGroups)
	s := newReplicas(t, store.Quota{Endpoints: 2, Bytes: 3*w.Bytes - 1}, 1)[0]
	mustRegister(t, s, cluster("prod", "a", t0))
	mustPut(t, s, export("prod", "a", "dynamo", "x", 80, t0))
	mustPut(t, s, export("prod", "a", "dynamo", "y", 80, t0))
	_, err := s.PutExport(ctx, export("prod", "a", "dynamo", "z", 80, t0))
	quotaError(t, err, store.QuotaEndpoints)
	// An export without endpoints passes the endpoint quota, not the byte quota.
	empty := export("prod", "a", "dynamo", "z", 80, t0)
	empty.Spec.Ports = append(empty.Spec.Ports, &registryv1.ServicePort{Name: "grpc", Protocol: "TCP", Port: 9090})
	empty.EndpointGroups = nil
	if 2*w.Bytes+store.Weight(empty.Spec, nil).Bytes > 3*w.Bytes-1 {
		_, err = s.PutExport(ctx, empty)
		quotaError(t, err, store.QuotaBytes)
	}
	// One export alone past a quota.
	big := export("prod", "a", "dynamo", "x", 80, t0)
	big.EndpointGroups[0].Endpoints = append(big.EndpointGroups[0].Endpoints, big.EndpointGroups[0].Endpoints[0], big.EndpointGroups[0].Endpoints[0])
	_, err = s.PutExport(ctx, big)
	quotaError(t, err, store.QuotaEndpoints)
	_, _, err = s.SyncExports(ctx, store.ClusterKey{Clusterset: "prod", ClusterID: "a"}, []store.Export{big})
	quotaError(t, err, store.QuotaEndpoints)
	if n := countExports(t, s, "a"); n != 2 {
		t.Fatalf("cluster a holds %d exports after the refusals, want 2", n)
	}
}

// testQuotaSyncReplacesFullSet: a sync of a set within the quota succeeds even when the
// cluster is at the quota with other exports (what it deletes is not counted with what it
// writes).
func testQuotaSyncReplacesFullSet(t *testing.T, newReplicas NewReplicas) {
	ctx := context.Background()
	s := newReplicas(t, store.Quota{Exports: 3}, 1)[0]
	mustRegister(t, s, cluster("prod", "a", t0))
	key := store.ClusterKey{Clusterset: "prod", ClusterID: "a"}
	first := []store.Export{export("prod", "a", "dynamo", "a1", 80, t0), export("prod", "a", "dynamo", "a2", 80, t0), export("prod", "a", "dynamo", "a3", 80, t0)}
	if _, _, err := s.SyncExports(ctx, key, first); err != nil {
		t.Fatal(err)
	}
	second := []store.Export{export("prod", "a", "dynamo", "b1", 80, t0), export("prod", "a", "dynamo", "b2", 80, t0), export("prod", "a", "dynamo", "a3", 81, t0)}
	if _, deleted, err := s.SyncExports(ctx, key, second); err != nil || len(deleted) != 2 {
		t.Fatalf("a sync replacing a full set: deleted %v, %v; want a1 and a2, nil", deleted, err)
	}
	_, _, err := s.SyncExports(ctx, key, append(second, export("prod", "a", "dynamo", "b4", 80, t0)))
	quotaError(t, err, store.QuotaExports)
	if n := countExports(t, s, "a"); n > 3 {
		t.Fatalf("cluster a holds %d exports, more than its quota of 3", n)
	}
}

// testQuotaConcurrentReplicas: 40 writes of one cluster at once through two replicas never
// leave it more than its 20 exports; every write that succeeded is stored, every other was
// refused (for the quota, or as unavailable after conflicting with the others).
func testQuotaConcurrentReplicas(t *testing.T, newReplicas NewReplicas) {
	ctx := context.Background()
	replicas := newReplicas(t, store.Quota{Exports: 20}, 2)
	mustRegister(t, replicas[0], cluster("prod", "a", t0))
	var mu sync.Mutex
	succeeded := 0
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := replicas[i%2].PutExport(ctx, export("prod", "a", "dynamo", fmt.Sprintf("svc%02d", i), 80, t0))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				succeeded++
			case errors.Is(err, store.ErrQuotaExceeded), errors.Is(err, store.ErrUnavailable):
			default:
				t.Errorf("write %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	n := countExports(t, replicas[0], "a")
	if n > 20 || n != succeeded {
		t.Fatalf("after 40 concurrent writes through two replicas: %d stored, %d succeeded; want at most 20, and as many stored as succeeded", n, succeeded)
	}
	// Then, one at a time, alternating replicas: exactly up to the quota.
	for i := 0; n < 20; i++ {
		mustPut(t, replicas[i%2], export("prod", "a", "dynamo", fmt.Sprintf("more%02d", i), 80, t0))
		n++
	}
	_, err := replicas[1].PutExport(ctx, export("prod", "a", "dynamo", "over", 80, t0))
	quotaError(t, err, store.QuotaExports)
	if n := countExports(t, replicas[1], "a"); n != 20 {
		t.Fatalf("cluster a holds %d exports, want 20", n)
	}
}
