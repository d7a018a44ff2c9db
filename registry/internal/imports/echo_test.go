package imports

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store/memory"
)

// hookedReads is the memory store with a hook run before every read of one Service's
// exports: to count, fail or hold those reads.
type hookedReads struct {
	*memory.Store
	before func() error
}

func (s hookedReads) ListServiceExports(ctx context.Context, cs string, k store.ServiceKey) ([]store.Export, error) {
	if err := s.before(); err != nil {
		return nil, err
	}
	return s.Store.ListServiceExports(ctx, cs, k)
}

// TestEchoCostsNothing: a write's own result is applied without a read, and the change
// feed's echo of a write this replica applied already costs neither a store read nor a
// merge, whether it carries the write whole (the memory store's feed) or only its keys and
// times (the dynamodb store's stream); an echo that arrives first is applied (one read),
// and the write's own result after it merges nothing; a change the cache does not hold
// (another writer's delete) is read and applied. The feed is not run: each change is
// handed to Apply, so the order is the test's.
func TestEchoCostsNothing(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	var merges, reads atomic.Int64
	c := New(Options{Store: hookedReads{st, func() error { reads.Add(1); return nil }}, Observer: Observer{Recomputed: func(bool) { merges.Add(1) }}})
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
	apply := func(ch store.Change) {
		t.Helper()
		if err := c.Apply(ctx, ch); err != nil {
			t.Fatal(err)
		}
	}
	echo := func(services []store.ServiceKey, after ...store.Export) {
		t.Helper()
		apply(store.Change{Kind: store.ChangeExport, Clusterset: "prod", ClusterID: "use1-a", Services: services, Known: true, Exports: after})
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
	apply(store.ExportPut(e))
	cost("a put applied from its result", 0, 1)
	echo([]store.ServiceKey{router}, e)
	cost("its echo", 0, 0)
	apply(store.ExportPut(e))
	cost("its whole echo", 0, 0)

	e, err = st.PutExport(ctx, export("router", now.Add(2*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	echo([]store.ServiceKey{router}, e)
	cost("an echo before the put's result", 1, 1)
	apply(store.ExportPut(e))
	cost("the put's result after its echo", 0, 0)

	at := now.Add(3 * time.Millisecond)
	stored, _, err := st.SyncExports(ctx, cluster, []store.Export{export("router", at), export("pool", at)})
	if err != nil {
		t.Fatal(err)
	}
	apply(store.ExportsSynced(cluster, stored, nil))
	cost("a sync applied from its result", 0, 2)
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

	stored, deleted, err := st.SyncExports(ctx, cluster, []store.Export{export("pool", now.Add(4*time.Millisecond))})
	if err != nil {
		t.Fatal(err)
	}
	apply(store.ExportsSynced(cluster, stored, deleted))
	cost("a sync that deletes an export the cache holds (one read) and adds one", 1, 2)
	if imp, err := c.Import(ctx, "prod", router); err != nil || imp != nil {
		t.Fatalf("the export the sync deleted is still imported: %v %v", imp, err)
	}
}

// TestFailedApplyReloads: a change the cache cannot apply (its read fails) is an error,
// and the next read of the clusterset loads it from the store again, so no answer comes
// from the import the change should have replaced.
func TestFailedApplyReloads(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	var fail atomic.Bool
	c := New(Options{Store: hookedReads{st, func() error {
		if fail.Load() {
			return errors.New("the table is unreachable")
		}
		return nil
	}}})
	now := time.Now()
	cluster := store.ClusterKey{Clusterset: "prod", ClusterID: "use1-a"}
	if _, err := st.RegisterCluster(ctx, store.Cluster{Clusterset: "prod", ClusterID: "use1-a", LeaseDuration: time.Minute, RegisterTime: now, RenewTime: now}); err != nil {
		t.Fatal(err)
	}
	k := store.ServiceKey{Namespace: "dynamo", Name: "router"}
	e, err := st.PutExport(ctx, store.Export{Clusterset: "prod", ClusterID: "use1-a", Service: k, CreateTime: now, UpdateTime: now,
		Spec: &registryv1.ExportSpec{Type: registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP, Ports: []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(ctx, store.ExportPut(e)); err != nil {
		t.Fatal(err)
	}
	if imp, err := c.Import(ctx, "prod", k); err != nil || imp == nil {
		t.Fatalf("import before the delete: %v %v", imp, err)
	}
	if _, err := st.DeleteExport(ctx, cluster, k); err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	if err := c.Apply(ctx, store.ExportDeleted(cluster, k)); err == nil {
		t.Fatal("a change whose read failed was applied without an error")
	}
	fail.Store(false)
	if imp, err := c.Import(ctx, "prod", k); err != nil || imp != nil {
		t.Fatalf("after a failed change the cache still answers with the deleted export's import: %v %v", imp, err)
	}
}

// TestCallerThatLeavesDropsNothing: a write whose client cancels while its change waits
// for the group commit's running batch does not drop the clusterset (a new epoch for
// every watcher, which controllers take for a registry restart); the batch it joined
// applies its change.
func TestCallerThatLeavesDropsNothing(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	started, release := make(chan struct{}, 1), make(chan struct{})
	c := New(Options{Store: hookedReads{st, func() error {
		select {
		case started <- struct{}{}: // the first read: its batch is running
		default:
		}
		<-release
		return nil
	}}})
	now := time.Now()
	if _, err := st.RegisterCluster(ctx, store.Cluster{Clusterset: "prod", ClusterID: "use1-a", LeaseDuration: time.Minute, RegisterTime: now, RenewTime: now}); err != nil {
		t.Fatal(err)
	}
	before, err := c.List(ctx, "prod", Filter{})
	if err != nil {
		t.Fatal(err)
	}
	router := store.ServiceKey{Namespace: "dynamo", Name: "router"}
	first := make(chan error, 1)
	go func() {
		first <- c.Apply(ctx, store.Change{Kind: store.ChangeExport, Clusterset: "prod", Service: router})
	}()
	<-started // the first change's batch is running
	e, err := st.PutExport(ctx, store.Export{Clusterset: "prod", ClusterID: "use1-a", Service: store.ServiceKey{Namespace: "dynamo", Name: "pool"}, CreateTime: now, UpdateTime: now,
		Spec: &registryv1.ExportSpec{Type: registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP, Ports: []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}}}})
	if err != nil {
		t.Fatal(err)
	}
	left, cancel := context.WithCancel(ctx)
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	if err := c.Apply(left, store.ExportPut(e)); !errors.Is(err, context.Canceled) {
		t.Fatalf("a change whose caller left: %v, want context.Canceled", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	after, err := c.List(ctx, "prod", Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if after.Epoch != before.Epoch {
		t.Fatalf("the epoch changed from %s to %s: a caller that left dropped the clusterset", before.Epoch, after.Epoch)
	}
	if imp, err := c.Import(ctx, "prod", e.Service); err != nil || imp == nil {
		t.Fatalf("the change of the caller that left was not applied by its batch: %v %v", imp, err)
	}
}
