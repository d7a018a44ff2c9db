package imports

import (
	"sync/atomic"
	"testing"
	"time"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// TestEchoCostsNoMerge: the change feed's echo of a write the cache already applied (the
// memory store hands back the same messages) merges nothing again.
func TestEchoCostsNoMerge(t *testing.T) {
	var merges atomic.Int64
	f := newFixture(t, 0)
	f.cache.obs.Recomputed = func(bool) { merges.Add(1) }
	f.register("a", time.Minute)
	if _, err := f.cache.List(f.ctx, "prod", Filter{}); err != nil { // loads the clusterset
		t.Fatal(err)
	}
	f.put("a", "one", 80)
	before := merges.Load()
	k := store.ServiceKey{Namespace: "dynamo", Name: "one"}
	for range 5 {
		if err := f.cache.Apply(f.ctx, store.Change{Kind: store.ChangeExport, Clusterset: "prod", Service: k}); err != nil {
			t.Fatal(err)
		}
	}
	if n := merges.Load() - before; n != 0 {
		t.Fatalf("refreshing an unchanged Service merged it %d times, want 0", n)
	}
	f.put("a", "one", 81)
	if merges.Load() == before {
		t.Fatal("a changed export was not merged")
	}
}

// TestWatchersShareMessages: watchers at the same revision with the same filter are sent
// one message (encoded once); another filter gets its own.
func TestWatchersShareMessages(t *testing.T) {
	f := newFixture(t, 0)
	f.register("a", time.Minute)
	f.put("a", "one", 80)
	watch := func(fl Filter) *Watcher {
		w, err := f.cache.Watch(f.ctx, "prod", fl, 0, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Close)
		return w
	}
	a, b, other := watch(Filter{IncludeEndpoints: true}), watch(Filter{IncludeEndpoints: true}), watch(Filter{})
	next := func(w *Watcher) *Message {
		t.Helper()
		m, err := w.Next(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	sa, sb, so := next(a), next(b), next(other)
	if sa != sb || sa == so {
		t.Fatalf("snapshots shared: a==b %v, a==other %v; want true, false", sa == sb, sa == so)
	}
	f.put("a", "one", 81)
	da, db := next(a), next(b)
	if da != db || da.GetSnapshot() || len(da.GetUpserts()) != 1 {
		t.Fatalf("deltas: shared %v, %v", da == db, da.WatchImportsResponse)
	}
	pa, _ := da.EncodedProto()
	pb, _ := db.EncodedProto()
	if &pa[0] != &pb[0] {
		t.Fatal("the shared delta was encoded twice")
	}
}

// TestWholeWriteKeepsNewer: a write's own result applied to the cache replaces an older
// entry of the same cluster, and never a newer one that reached the cache first.
func TestWholeWriteKeepsNewer(t *testing.T) {
	f := newFixture(t, 0)
	f.register("a", time.Minute)
	if _, err := f.cache.List(f.ctx, "prod", Filter{}); err != nil { // loads the clusterset
		t.Fatal(err)
	}
	k := store.ServiceKey{Namespace: "dynamo", Name: "one"}
	at := f.clk.Now()
	export := func(port int32, when time.Time) store.Export {
		return store.Export{Clusterset: "prod", ClusterID: "a", Service: k, CreateTime: at, UpdateTime: when,
			Spec: &registryv1.ExportSpec{Type: registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP, Ports: []*registryv1.ServicePort{{Name: "http", Port: port}}}}
	}
	put := func(e store.Export) {
		t.Helper()
		if err := f.cache.Apply(f.ctx, store.ExportPut(e)); err != nil {
			t.Fatal(err)
		}
	}
	port := func() int32 {
		imp, err := f.cache.Import(f.ctx, "prod", k)
		if err != nil || imp == nil {
			t.Fatalf("import: %v %v", imp, err)
		}
		return imp.GetSpec().GetPorts()[0].GetPort()
	}
	put(export(80, at.Add(time.Second)))
	if got := port(); got != 80 {
		t.Fatalf("port %d after the first write, want 80", got)
	}
	put(export(81, at)) // older than what is held
	if got := port(); got != 80 {
		t.Fatalf("an older write replaced a newer one: port %d", got)
	}
	put(export(82, at.Add(2*time.Second)))
	if got := port(); got != 82 {
		t.Fatalf("a newer write was not applied: port %d", got)
	}
}

// TestInventory: clusters by lease state, exports, imports and conflicting imports of a
// loaded clusterset; a clusterset nobody loaded is not listed.
func TestInventory(t *testing.T) {
	f := newFixture(t, 0)
	if got := f.cache.Inventory(); len(got) != 0 {
		t.Fatalf("before any read: %+v", got)
	}
	f.register("a", time.Minute)
	f.register("b", time.Minute)
	f.register("c", 10*time.Second)
	if _, err := f.cache.List(f.ctx, "prod", Filter{}); err != nil { // loads the clusterset
		t.Fatal(err)
	}
	f.put("a", "one", 80)
	f.put("b", "one", 81) // a port conflict with a's
	f.put("a", "two", 80)
	f.put("c", "three", 80)
	f.clk.Add(30 * time.Second) // c's lease expires: its export leaves the imports
	if err := f.cache.Apply(f.ctx, store.Resync("prod")); err != nil {
		t.Fatal(err)
	}
	want := Inventory{Clusterset: "prod", ActiveClusters: 2, ExpiredClusters: 1, Exports: 4, Imports: 2, Conflicts: 1}
	if got := f.cache.Inventory(); len(got) != 1 || got[0] != want {
		t.Fatalf("Inventory() = %+v, want [%+v]", got, want)
	}
}
