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

// TestEchoCostsNothing: the change feed's echo of a write this replica applied already
// (from a put's result, or by reading a sync back) costs neither a store read nor a merge;
// an echo that arrives first is applied (one read), and the write's own result after it
// merges nothing; a change the cache does not hold (another writer's delete) is read and
// applied. The feed is not run: each echo is handed to Apply, so the order is the test's.
func TestEchoCostsNothing(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	var merges, reads atomic.Int64
	c := New(Options{Store: countedReads{st, &reads}, Observer: Observer{Recomputed: func(bool) { merges.Add(1) }}})
	now := time.Now()
	cluster := store.ClusterKey{Clusterset: "prod", ClusterID: "use1-a"}
	if _, err := st.RegisterCluster(ctx, store.Cluster{Clusterset: "prod", ClusterID: "use1-a", LeaseDuration: time.Minute, RegisterTime: now, RenewTime: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.List(ctx, "prod", Filter{}); err != nil { // loads the clusterset
		t.Fatal(err)
	}
	export := func(name string, at time.Time) store.Export {
		return store.Export{Clusterset: "prod", ClusterID: "use1-a", Service: store.ServiceKey{Namespace: "dynamo", Name: name}, CreateTime: at, UpdateTime: at,
			Spec:           &registryv1.ExportSpec{Type: registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP, Ports: []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}}},
			EndpointGroups: []*registryv1.EndpointGroup{{AddressType: "IPv4", Endpoints: []*registryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}}}}}
	}
	router, pool := store.ServiceKey{Namespace: "dynamo", Name: "router"}, store.ServiceKey{Namespace: "dynamo", Name: "pool"}
	echo := func(services []store.ServiceKey, after ...store.Export) {
		c.Apply(ctx, store.Change{Kind: store.ChangeExport, Clusterset: "prod", ClusterID: "use1-a", Services: services, Known: true, Exports: after})
	}
	cost := func(what string, wantReads, wantMerges int64) {
		t.Helper()
		if r, m := reads.Swap(0), merges.Swap(0); r != wantReads || m != wantMerges {
			t.Fatalf("%s: %d store reads and %d merges, want %d and %d", what, r, m, wantReads, wantMerges)
		}
	}
	reads.Store(0)
	merges.Store(0)

	e, err := st.PutExport(ctx, export("router", now.Add(time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	c.ApplyPut("prod", e)
	cost("a put applied from its result", 0, 1)
	echo([]store.ServiceKey{router}, e)
	cost("its echo", 0, 0)

	e, err = st.PutExport(ctx, export("router", now.Add(2*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	echo([]store.ServiceKey{router}, e)
	cost("an echo before the put's result", 1, 1)
	c.ApplyPut("prod", e)
	cost("the put's result after its echo", 0, 0)

	at := now.Add(3 * time.Millisecond)
	stored, _, err := st.SyncExports(ctx, cluster, []store.Export{export("router", at), export("pool", at)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RefreshServices(ctx, "prod", []store.ServiceKey{router, pool}); err != nil {
		t.Fatal(err)
	}
	cost("a sync read back", 2, 2)
	echo([]store.ServiceKey{router, pool}, stored...)
	cost("its echo", 0, 0)

	if _, err := st.DeleteExport(ctx, cluster, pool); err != nil {
		t.Fatal(err)
	}
	echo([]store.ServiceKey{pool})
	cost("another writer's delete", 1, 1)
	if imp, err := c.Import(ctx, "prod", pool); err != nil || imp != nil {
		t.Fatalf("the deleted export's import is still there: %v %v", imp, err)
	}
	echo([]store.ServiceKey{pool})
	cost("the delete's echo once applied", 0, 0)
}
