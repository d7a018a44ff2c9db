package imports

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store/memory"
)

// countedReads counts the reads of one Service's exports.
type countedReads struct {
	*memory.Store
	reads *atomic.Int64
}

func (s countedReads) ListServiceExports(ctx context.Context, cs string, k store.ServiceKey) ([]store.Export, error) {
	s.reads.Add(1)
	return s.Store.ListServiceExports(ctx, cs, k)
}

// TestEchoCostsNothing: a write the replica applied from its own result is merged once
// and read never; the change feed's echo of it (put, sync) neither reads the store nor
// merges, whichever of the two reaches the cache first. A change the cache does not hold
// yet (another writer's delete) is still read and applied.
func TestEchoCostsNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := memory.New()
	var merges, reads atomic.Int64
	c := New(Options{Store: countedReads{st, &reads}, Observer: Observer{Recomputed: func(bool) { merges.Add(1) }}})
	go func() { _ = c.Run(ctx) }()
	now := time.Now()
	cluster := store.ClusterKey{Clusterset: "prod", ClusterID: "use1-a"}
	if _, err := st.RegisterCluster(ctx, store.Cluster{Clusterset: "prod", ClusterID: "use1-a", LeaseDuration: time.Minute, RegisterTime: now, RenewTime: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.List(ctx, "prod", Filter{}); err != nil { // loads the clusterset
		t.Fatal(err)
	}
	settle := func() int64 {
		time.Sleep(200 * time.Millisecond) // the feed delivers its echoes
		reads.Store(0)
		return merges.Swap(0)
	}
	// readsOf counts the store reads since the last settle, after the feed delivered.
	readsOf := func() int64 { time.Sleep(200 * time.Millisecond); return reads.Load() }
	settle()
	export := func(name string, at time.Time) store.Export {
		return store.Export{Clusterset: "prod", ClusterID: "use1-a", Service: store.ServiceKey{Namespace: "dynamo", Name: name}, CreateTime: at, UpdateTime: at,
			Spec:           &registryv1.ExportSpec{Type: registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP, Ports: []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}}},
			EndpointGroups: []*registryv1.EndpointGroup{{AddressType: "IPv4", Endpoints: []*registryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}}}}}
	}

	// A put applied from its result: one merge, the echo none.
	e, err := st.PutExport(ctx, export("router", now.Add(time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	c.ApplyPut("prod", e)
	if r := readsOf(); r != 0 {
		t.Fatalf("a put and its echo read the store %d times, want 0", r)
	}
	if n := settle(); n != 1 {
		t.Fatalf("a put and its echo merged %d times, want 1", n)
	}
	// The echo first, then the write's own result: still one merge.
	e, err = st.PutExport(ctx, export("router", now.Add(2*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	c.ApplyPut("prod", e)
	if n := settle(); n != 1 {
		t.Fatalf("an echo then its put merged %d times, want 1", n)
	}
	// A sync applied from its result, as the server does: neither it nor its echo reads.
	at := now.Add(3 * time.Millisecond)
	stored, _, err := st.SyncExports(ctx, cluster, []store.Export{export("router", at), export("pool", at)})
	if err != nil || len(stored) != 2 {
		t.Fatal(err)
	}
	c.ApplySync("prod", "use1-a", []store.ServiceKey{stored[0].Service, stored[1].Service}, stored, at)
	if r := readsOf(); r != 0 {
		t.Fatalf("a sync of two Services and its echo read the store %d times, want 0", r)
	}
	if n := settle(); n != 2 {
		t.Fatalf("a sync of two Services and its echo merged %d times, want 2", n)
	}
	// A sync that leaves one Service out removes the cluster's export of it; the
	// other, unchanged in content, is rewritten with the sync's time.
	at = now.Add(4 * time.Millisecond)
	stored, _, err = st.SyncExports(ctx, cluster, []store.Export{export("router", at)})
	if err != nil {
		t.Fatal(err)
	}
	c.ApplySync("prod", "use1-a", []store.ServiceKey{{Namespace: "dynamo", Name: "router"}, {Namespace: "dynamo", Name: "pool"}}, stored, at)
	if imp, _ := c.Import(ctx, "prod", store.ServiceKey{Namespace: "dynamo", Name: "pool"}); imp != nil {
		t.Fatalf("the export the sync left out is still imported: %v", imp)
	}
	if r := readsOf(); r != 0 {
		t.Fatalf("a sync that removed an export read the store %d times", r)
	}
	settle()
	if _, err := st.PutExport(ctx, export("pool", now.Add(5*time.Millisecond))); err != nil {
		t.Fatal(err)
	}
	c.ApplyPut("prod", export("pool", now.Add(5*time.Millisecond)))
	settle()

	// A delete this replica did not apply (another writer): the echo applies it.
	if _, err := st.DeleteExport(ctx, cluster, store.ServiceKey{Namespace: "dynamo", Name: "pool"}); err != nil {
		t.Fatal(err)
	}
	if r := readsOf(); r != 1 {
		t.Fatalf("an unapplied delete read the store %d times, want 1", r)
	}
	if n := settle(); n != 1 {
		t.Fatalf("an unapplied delete merged %d times, want 1", n)
	}
	imp, err := c.Import(ctx, "prod", store.ServiceKey{Namespace: "dynamo", Name: "pool"})
	if err != nil || imp != nil {
		t.Fatalf("the deleted export's import is still there: %v %v", imp, err)
	}
}
