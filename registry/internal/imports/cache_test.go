package imports

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store/memory"
)

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type fixture struct {
	t     *testing.T
	ctx   context.Context
	st    *memory.Store
	cache *Cache
	clk   *clock
}

func newFixture(t *testing.T, history int) *fixture {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	clk := &clock{t: time.Now()}
	st := memory.New()
	c := New(Options{Store: st, Now: clk.Now, History: history})
	go func() { _ = c.Run(ctx) }()
	return &fixture{t: t, ctx: ctx, st: st, cache: c, clk: clk}
}

func (f *fixture) register(id string, lease time.Duration) {
	f.t.Helper()
	now := f.clk.Now()
	if _, err := f.st.RegisterCluster(f.ctx, store.Cluster{Clusterset: "prod", ClusterID: id, LeaseDuration: lease, RegisterTime: now, RenewTime: now}); err != nil {
		f.t.Fatal(err)
	}
	if err := f.cache.Apply(f.ctx, store.Change{Kind: store.ChangeCluster, Clusterset: "prod", ClusterID: id}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) put(id, name string, port int32) {
	f.t.Helper()
	k := store.ServiceKey{Namespace: "dynamo", Name: name}
	_, err := f.st.PutExport(f.ctx, store.Export{
		Clusterset: "prod", ClusterID: id, Service: k, CreateTime: f.clk.Now(),
		Spec:           &registryv1.ExportSpec{Type: registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP, Ports: []*registryv1.ServicePort{{Name: "http", Port: port}}},
		EndpointGroups: []*registryv1.EndpointGroup{{AddressType: "IPv4", Endpoints: []*registryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}}}},
	})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.cache.Apply(f.ctx, store.Change{Kind: store.ChangeExport, Clusterset: "prod", Service: k}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) next(w *Watcher) *registryv1.WatchImportsResponse {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.ctx, 5*time.Second)
	defer cancel()
	msg, err := w.Next(ctx)
	if err != nil {
		f.t.Fatalf("Next: %v", err)
	}
	return msg.WatchImportsResponse
}

func names(imps []*registryv1.ServiceImport) []string {
	var out []string
	for _, i := range imps {
		out = append(out, i.GetService().GetName())
	}
	return out
}

func TestWatchSnapshotThenDeltas(t *testing.T) {
	f := newFixture(t, 0)
	if _, err := f.cache.List(f.ctx, "prod", Filter{}); err != nil {
		t.Fatal(err)
	}
	f.register("a", 30*time.Second)
	f.put("a", "one", 80)
	w, err := f.cache.Watch(f.ctx, "prod", Filter{IncludeEndpoints: true}, 0, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	snap := f.next(w)
	if !snap.GetSnapshot() || fmt.Sprint(names(snap.GetUpserts())) != "[one]" {
		t.Fatalf("first message = %v, want a snapshot of [one]", snap)
	}
	if len(snap.GetUpserts()[0].GetClusters()[0].GetEndpointGroups()) != 1 {
		t.Fatal("snapshot lost the endpoints")
	}
	f.put("a", "two", 80)
	d := f.next(w)
	if d.GetSnapshot() || fmt.Sprint(names(d.GetUpserts())) != "[two]" || d.GetRevision() != snap.GetRevision()+1 {
		t.Fatalf("delta = %v, want upsert [two] at revision %d", d, snap.GetRevision()+1)
	}
	// Writing the same export again changes no import: no message, no revision.
	rev := d.GetRevision()
	f.put("a", "two", 80)
	if _, err := f.st.DeleteExport(f.ctx, store.ClusterKey{Clusterset: "prod", ClusterID: "a"}, store.ServiceKey{Namespace: "dynamo", Name: "one"}); err != nil {
		t.Fatal(err)
	}
	_ = f.cache.Apply(f.ctx, store.Change{Kind: store.ChangeExport, Clusterset: "prod", Service: store.ServiceKey{Namespace: "dynamo", Name: "one"}})
	d = f.next(w)
	if len(d.GetUpserts()) != 0 || len(d.GetDeletes()) != 1 || d.GetDeletes()[0].GetName() != "one" || d.GetRevision() != rev+1 {
		t.Fatalf("delta = %v, want only delete one at revision %d", d, rev+1)
	}
}

func TestWatchResume(t *testing.T) {
	f := newFixture(t, 3)
	f.register("a", 30*time.Second)
	if _, err := f.cache.List(f.ctx, "prod", Filter{}); err != nil {
		t.Fatal(err)
	}
	f.put("a", "one", 80)
	snap, _ := f.cache.List(f.ctx, "prod", Filter{})
	f.put("a", "two", 80)

	// Same epoch, revision still held: only the change after it.
	w, _ := f.cache.Watch(f.ctx, "prod", Filter{}, 0, snap.Epoch, snap.Revision)
	d := f.next(w)
	if d.GetSnapshot() || fmt.Sprint(names(d.GetUpserts())) != "[two]" {
		t.Fatalf("resumed watch got %v, want the delta [two]", d)
	}
	w.Close()

	// Another epoch (another replica or a restart): a snapshot.
	w, _ = f.cache.Watch(f.ctx, "prod", Filter{}, 0, "other-epoch", snap.Revision)
	if d := f.next(w); !d.GetSnapshot() || len(d.GetUpserts()) != 2 {
		t.Fatalf("watch from another epoch got %v, want a snapshot of 2", d)
	}
	w.Close()

	// A revision older than the kept history (3 changes): a snapshot.
	for i := range 4 {
		f.put("a", fmt.Sprintf("more%d", i), 80)
	}
	w, _ = f.cache.Watch(f.ctx, "prod", Filter{}, 0, snap.Epoch, snap.Revision)
	if d := f.next(w); !d.GetSnapshot() || len(d.GetUpserts()) != 6 {
		t.Fatalf("watch from a forgotten revision got %v, want a snapshot of 6", d)
	}
	w.Close()
}

// TestSlowWatcher: a watcher that does not read never blocks writers; when it reads again
// it gets the changes coalesced, or a snapshot when they left the history.
func TestSlowWatcher(t *testing.T) {
	f := newFixture(t, 10)
	f.register("a", 30*time.Second)
	w, _ := f.cache.Watch(f.ctx, "prod", Filter{}, 0, "", 0)
	f.next(w)
	done := make(chan struct{})
	go func() {
		for i := range 5 {
			f.put("a", fmt.Sprintf("svc%d", i), 80)
			f.put("a", fmt.Sprintf("svc%d", i), 81)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("writers blocked by a watcher that does not read")
	}
	d := f.next(w)
	if d.GetSnapshot() || len(d.GetUpserts()) != 5 {
		t.Fatalf("coalesced delta = %v, want 5 upserts", names(d.GetUpserts()))
	}
	for _, imp := range d.GetUpserts() {
		if imp.GetSpec().GetPorts()[0].GetPort() != 81 {
			t.Fatalf("%s has port %d, want the latest 81", imp.GetService().GetName(), imp.GetSpec().GetPorts()[0].GetPort())
		}
	}
	for i := range 11 {
		f.put("a", fmt.Sprintf("late%d", i), 80)
	}
	if d := f.next(w); !d.GetSnapshot() || len(d.GetUpserts()) != 16 {
		t.Fatalf("after falling behind the history: %v, want a snapshot of 16", d)
	}
}

// TestLeaseExpiryWithoutWrites: an import loses an expired cluster by the passing of time
// alone, and a renewal brings it back.
func TestLeaseExpiryWithoutWrites(t *testing.T) {
	f := newFixture(t, 0)
	f.clk = &clock{t: time.Now()}
	f.cache.now = time.Now
	if _, err := f.cache.List(f.ctx, "prod", Filter{}); err != nil {
		t.Fatal(err)
	}
	f.register("a", time.Hour)
	f.register("b", 300*time.Millisecond)
	f.put("a", "svc", 80)
	f.put("b", "svc", 80)
	w, _ := f.cache.Watch(f.ctx, "prod", Filter{}, 0, "", 0)
	if s := f.next(w); len(s.GetUpserts()[0].GetClusters()) != 2 {
		t.Fatalf("snapshot clusters = %d, want 2", len(s.GetUpserts()[0].GetClusters()))
	}
	d := f.next(w) // the expiry timer fires without any write
	if got := d.GetUpserts()[0].GetClusters(); len(got) != 1 || got[0].GetClusterId() != "a" {
		t.Fatalf("after b's lease expired: %v, want only a", got)
	}
	if _, err := f.st.RenewLease(f.ctx, store.ClusterKey{Clusterset: "prod", ClusterID: "b"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	d = f.next(w) // delivered through the store's change feed
	if got := d.GetUpserts()[0].GetClusters(); len(got) != 2 {
		t.Fatalf("after b renewed: %v, want a and b", got)
	}
}

func TestFilter(t *testing.T) {
	f := newFixture(t, 0)
	f.register("a", time.Hour)
	if _, err := f.cache.List(f.ctx, "prod", Filter{}); err != nil {
		t.Fatal(err)
	}
	f.put("a", "svc", 80)
	k := store.ServiceKey{Namespace: "other", Name: "x"}
	if _, err := f.st.PutExport(f.ctx, store.Export{Clusterset: "prod", ClusterID: "a", Service: k, Spec: &registryv1.ExportSpec{Type: registryv1.ServiceType_SERVICE_TYPE_HEADLESS}}); err != nil {
		t.Fatal(err)
	}
	_ = f.cache.Apply(f.ctx, store.Change{Kind: store.ChangeExport, Clusterset: "prod", Service: k})
	snap, _ := f.cache.List(f.ctx, "prod", Filter{Namespace: "dynamo"})
	if fmt.Sprint(names(snap.Imports)) != "[svc]" {
		t.Fatalf("namespace filter = %v", names(snap.Imports))
	}
	if len(snap.Imports[0].GetClusters()[0].GetEndpointGroups()) != 0 {
		t.Fatal("endpoints returned without IncludeEndpoints")
	}
	full, _ := f.cache.List(f.ctx, "prod", Filter{IncludeEndpoints: true})
	if len(full.Imports) != 2 || len(full.Imports[0].GetClusters()[0].GetEndpointGroups()) != 1 {
		t.Fatalf("full list = %v", full.Imports)
	}
}

// TestWatchAfterReload: once a clusterset was dropped and loaded again (after a failed
// change, or because nobody used it), a watch never resumes from a revision of before: the
// new revision sequence knows nothing of imports deleted in between, so the watcher needs
// a snapshot.
func TestWatchAfterReload(t *testing.T) {
	f := newFixture(t, 0)
	f.register("a", 30*time.Second)
	f.put("a", "one", 80)
	f.put("a", "two", 80)
	before, err := f.cache.List(f.ctx, "prod", Filter{})
	if err != nil {
		t.Fatal(err)
	}
	f.cache.drop("prod")
	if _, err := f.st.DeleteExport(f.ctx, store.ClusterKey{Clusterset: "prod", ClusterID: "a"}, store.ServiceKey{Namespace: "dynamo", Name: "one"}); err != nil {
		t.Fatal(err)
	}
	f.put("a", "three", 80)
	f.put("a", "four", 80)
	after, err := f.cache.List(f.ctx, "prod", Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if after.Revision < before.Revision {
		t.Fatalf("revision went from %d to %d; the test needs the new sequence to reach the old revision", before.Revision, after.Revision)
	}
	if after.Epoch == before.Epoch {
		t.Fatalf("epoch %q kept across a reload", after.Epoch)
	}
	w, err := f.cache.Watch(f.ctx, "prod", Filter{}, 0, before.Epoch, before.Revision)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if d := f.next(w); !d.GetSnapshot() || fmt.Sprint(names(d.GetUpserts())) != "[four three two]" {
		t.Fatalf("watch resumed across a reload got %v, want a snapshot of [four three two]", d)
	}
}

func (f *fixture) loadedSets() []string {
	f.cache.mu.Lock()
	defer f.cache.mu.Unlock()
	var out []string
	for n := range f.cache.sets {
		out = append(out, n)
	}
	return out
}

// TestUnusedClustersetReleased: reads of a clusterset with no cluster leave nothing in
// memory; a watch holds its clusterset while open, and a registration reaches it.
func TestUnusedClustersetReleased(t *testing.T) {
	f := newFixture(t, 0)
	for range 3 {
		snap, err := f.cache.List(f.ctx, "typo", Filter{})
		if err != nil || snap.Clusters != 0 || len(snap.Imports) != 0 {
			t.Fatalf("List(typo) = %+v, %v; want no clusters", snap, err)
		}
	}
	if sets := f.loadedSets(); len(sets) != 0 {
		t.Fatalf("loaded after reads of an unknown clusterset: %v", sets)
	}

	// A watch before any registration holds the clusterset and sees the first cluster's export.
	w, err := f.cache.Watch(f.ctx, "prod", Filter{}, 0, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if d := f.next(w); !d.GetSnapshot() || len(d.GetUpserts()) != 0 {
		t.Fatalf("first message = %v, want an empty snapshot", d)
	}
	if _, err := f.cache.List(f.ctx, "prod", Filter{}); err != nil {
		t.Fatal(err)
	}
	if sets := f.loadedSets(); fmt.Sprint(sets) != "[prod]" {
		t.Fatalf("loaded with an open watch: %v, want [prod]", sets)
	}
	f.register("a", 30*time.Second)
	f.put("a", "one", 80)
	if d := f.next(w); d.GetSnapshot() || fmt.Sprint(names(d.GetUpserts())) != "[one]" {
		t.Fatalf("delta = %v, want upsert [one]", d)
	}
	w.Close()
	if snap, err := f.cache.List(f.ctx, "prod", Filter{}); err != nil || snap.Clusters != 1 {
		t.Fatalf("List(prod) = %+v, %v; want 1 cluster", snap, err)
	}
	if sets := f.loadedSets(); fmt.Sprint(sets) != "[prod]" {
		t.Fatalf("a clusterset with a cluster was released: %v", sets)
	}

	// A watch of an empty clusterset releases it when it closes.
	w, err = f.cache.Watch(f.ctx, "empty", Filter{}, 0, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	f.next(w)
	w.Close()
	if sets := f.loadedSets(); fmt.Sprint(sets) != "[prod]" {
		t.Fatalf("loaded after the last watch of an empty clusterset closed: %v, want [prod]", sets)
	}
}

// slowReads delays each read of one Service's exports, so a sync applied Service by
// Service would be seen half done.
type slowReads struct{ *memory.Store }

func (s slowReads) ListServiceExports(ctx context.Context, cs string, k store.ServiceKey) ([]store.Export, error) {
	time.Sleep(time.Millisecond)
	return s.Store.ListServiceExports(ctx, cs, k)
}

// TestSyncSeenInOneStep: a cluster's SyncExports reaches a watch in one delta, never half
// applied. Controllers holding endpoints after a registry restart release a cluster's held
// entries when it appears in any import, which is only right if its whole sync is there.
func TestSyncSeenInOneStep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mem := memory.New()
	c := New(Options{Store: slowReads{mem}})
	go func() { _ = c.Run(ctx) }()
	now := time.Now()
	key := store.ClusterKey{Clusterset: "prod", ClusterID: "a"}
	if _, err := mem.RegisterCluster(ctx, store.Cluster{Clusterset: "prod", ClusterID: "a", LeaseDuration: time.Minute, RegisterTime: now, RenewTime: now}); err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(ctx, "prod", Filter{IncludeEndpoints: true}, 0, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if resp, err := w.Next(ctx); err != nil || !resp.GetSnapshot() {
		t.Fatalf("first response: %v %v", resp, err)
	}
	// Wait until the cache follows the change feed: write until a delta arrives.
	for i := 0; ; i++ {
		warm := store.Export{Clusterset: "prod", ClusterID: "a", Service: store.ServiceKey{Namespace: "dynamo", Name: "warm-up"}, CreateTime: now,
			Spec: &registryv1.ExportSpec{Type: registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP, Ports: []*registryv1.ServicePort{{Name: "http", Port: int32(80 + i)}}}}
		if _, err := mem.PutExport(ctx, warm); err != nil {
			t.Fatal(err)
		}
		wctx, wcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, err := w.Next(wctx)
		wcancel()
		if err == nil {
			break
		}
		if i == 50 {
			t.Fatal("the cache does not follow the store's change feed")
		}
	}
	const n = 100
	exports := make([]store.Export, n)
	for i := range exports {
		exports[i] = store.Export{
			Clusterset: "prod", ClusterID: "a", Service: store.ServiceKey{Namespace: "dynamo", Name: fmt.Sprintf("svc-%03d", i)}, CreateTime: now,
			Spec:           &registryv1.ExportSpec{Type: registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP, Ports: []*registryv1.ServicePort{{Name: "http", Port: 80}}},
			EndpointGroups: []*registryv1.EndpointGroup{{AddressType: "IPv4", Endpoints: []*registryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}}}},
		}
	}
	if _, _, err := mem.SyncExports(ctx, key, exports); err != nil {
		t.Fatal(err)
	}
	// Only the change feed applies the sync here, as it does on a replica that did not
	// take the call.
	nctx, ncancel := context.WithTimeout(ctx, 10*time.Second)
	defer ncancel()
	resp, err := w.Next(nctx)
	if err != nil {
		t.Fatal(err)
	}
	// n upserts, and the warm-up export's deletion (the sync does not hold it).
	if got := len(resp.GetUpserts()); got != n {
		t.Fatalf("the first delta after a sync of %d exports holds %d imports: a watcher saw the sync half applied", n, got)
	}
}
