package imports

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/api/importdelta"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// follower applies a watch's messages as a client does.
type follower struct {
	name     string
	w        *Watcher
	filter   Filter
	imports  map[store.ServiceKey]*registryv1.ServiceImport
	pending  map[store.ServiceKey]*registryv1.ServiceImport // a snapshot arriving in pages
	messages int
	bytes    int
}

func (fl *follower) apply(t *testing.T, m *registryv1.WatchImportsResponse) {
	t.Helper()
	fl.messages++
	fl.bytes += proto.Size(m)
	if m.GetSnapshot() {
		fl.pending = map[store.ServiceKey]*registryv1.ServiceImport{}
	}
	if fl.pending != nil {
		if len(m.GetDeltas())+len(m.GetDeletes()) > 0 {
			t.Fatalf("%s: a snapshot page holds changes: %v", fl.name, m)
		}
		for _, imp := range m.GetUpserts() {
			fl.pending[store.ServiceKey{Namespace: imp.GetService().GetNamespace(), Name: imp.GetService().GetName()}] = imp
		}
		if !m.GetSnapshotContinues() {
			fl.imports, fl.pending = fl.pending, nil
		}
		return
	}
	if m.GetSnapshotContinues() {
		t.Fatalf("%s: snapshot_continues outside a snapshot: %v", fl.name, m)
	}
	if fl.filter.ClusterDeltas && len(m.GetUpserts()) > 0 {
		t.Fatalf("%s: whole imports on a delta watch: %v", fl.name, m)
	}
	for _, imp := range m.GetUpserts() {
		fl.imports[store.ServiceKey{Namespace: imp.GetService().GetNamespace(), Name: imp.GetService().GetName()}] = imp
	}
	for _, d := range m.GetDeltas() {
		k := store.ServiceKey{Namespace: d.GetService().GetNamespace(), Name: d.GetService().GetName()}
		fl.imports[k] = importdelta.Apply(fl.imports[k], d)
	}
	for _, k := range m.GetDeletes() {
		delete(fl.imports, store.ServiceKey{Namespace: k.GetNamespace(), Name: k.GetName()})
	}
}

// drain applies every message the watch has now.
func (fl *follower) drain(t *testing.T) {
	t.Helper()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for {
		m, err := fl.w.Next(done)
		if err != nil {
			return
		}
		fl.apply(t, m.WatchImportsResponse)
	}
}

// settle drains the watch until it has been sent the revision a list returns (the store's
// change feed runs beside the test and may move the cache between a drain and a list), and
// returns that list.
func (fl *follower) settle(t *testing.T, f *fixture) Snapshot {
	t.Helper()
	for range 1000 {
		fl.drain(t)
		snap, err := f.cache.List(f.ctx, "prod", fl.filter)
		if err != nil {
			t.Fatal(err)
		}
		s := fl.w.set
		s.mu.Lock()
		sent := fl.w.cursor == snap.Revision && fl.w.paging == nil
		s.mu.Unlock()
		if sent {
			return snap
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%s: the watch never caught up with the list", fl.name)
	return Snapshot{}
}

// TestClusterDeltasFollowTheImports drives random exports, deletions and cluster removals
// through the cache, and checks after every step that watchers applying cluster deltas
// (with and without endpoints, with snapshots in pages, and one that falls behind the
// history) hold exactly the imports a list returns.
func TestClusterDeltasFollowTheImports(t *testing.T) {
	f := newFixture(t, 8)
	clusters := []string{"a", "b", "c"}
	for _, id := range clusters {
		f.register(id, time.Hour)
	}
	if _, err := f.cache.List(f.ctx, "prod", Filter{}); err != nil {
		t.Fatal(err)
	}
	var followers []*follower
	watch := func(name string, fl Filter, pageSize int) *follower {
		w, err := f.cache.Watch(f.ctx, "prod", fl, pageSize, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Close)
		x := &follower{name: name, w: w, filter: fl}
		followers = append(followers, x)
		return x
	}
	full := watch("whole imports", Filter{IncludeEndpoints: true}, 0)
	deltas := watch("deltas", Filter{IncludeEndpoints: true, ClusterDeltas: true}, 0)
	watch("deltas without endpoints", Filter{ClusterDeltas: true}, 0)
	watch("deltas, snapshot in pages of 2", Filter{IncludeEndpoints: true, ClusterDeltas: true}, 2)
	lagging := watch("deltas, falls behind the history", Filter{IncludeEndpoints: true, ClusterDeltas: true}, 3)

	rng := rand.New(rand.NewPCG(1, 2))
	ports := [][]*registryv1.ServicePort{
		{{Name: "http", Protocol: "TCP", Port: 80}},
		{{Name: "http", Protocol: "TCP", Port: 80}, {Name: "grpc", Protocol: "TCP", Port: 9000}},
		{{Name: "http", Protocol: "TCP", Port: 8080}}, // a port conflict with the others
	}
	for step := range 400 {
		id := clusters[rng.IntN(len(clusters))]
		k := store.ServiceKey{Namespace: "dynamo", Name: fmt.Sprintf("svc-%d", rng.IntN(4))}
		switch op := rng.IntN(10); {
		case op < 7:
			var eps []*registryv1.Endpoint
			for i := range 1 + rng.IntN(3) {
				eps = append(eps, &registryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.0.%d", step%200, i+1)}, Conditions: &registryv1.EndpointConditions{Ready: proto.Bool(rng.IntN(2) == 0)}})
			}
			f.clk.Add(time.Millisecond)
			e := store.Export{Clusterset: "prod", ClusterID: id, Service: k, CreateTime: f.clk.Now(),
				Spec:           &registryv1.ExportSpec{Type: registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP, Ports: ports[rng.IntN(len(ports))]},
				EndpointGroups: []*registryv1.EndpointGroup{{AddressType: "IPv4", Endpoints: eps}}}
			if _, err := f.st.PutExport(f.ctx, e); err != nil {
				t.Fatal(err)
			}
			if err := f.cache.Apply(f.ctx, store.Change{Kind: store.ChangeExport, Clusterset: "prod", Service: k}); err != nil {
				t.Fatal(err)
			}
		case op < 9:
			if _, err := f.st.DeleteExport(f.ctx, store.ClusterKey{Clusterset: "prod", ClusterID: id}, k); err != nil {
				t.Fatal(err)
			}
			if err := f.cache.Apply(f.ctx, store.Change{Kind: store.ChangeExport, Clusterset: "prod", Service: k}); err != nil {
				t.Fatal(err)
			}
		default:
			if _, err := f.st.DeleteCluster(f.ctx, store.ClusterKey{Clusterset: "prod", ClusterID: id}); err != nil {
				t.Fatal(err)
			}
			if err := f.cache.Apply(f.ctx, store.Change{Kind: store.ChangeCluster, Clusterset: "prod", ClusterID: id}); err != nil {
				t.Fatal(err)
			}
			f.register(id, time.Hour)
		}
		for _, fl := range followers {
			if fl == lagging && step%25 != 24 {
				continue // reads only now and then: the history (8 changes) moves past it
			}
			snap := fl.settle(t, f)
			if len(fl.imports) != len(snap.Imports) {
				t.Fatalf("step %d, %s: %d imports, the list has %d", step, fl.name, len(fl.imports), len(snap.Imports))
			}
			for _, want := range snap.Imports {
				k := store.ServiceKey{Namespace: want.GetService().GetNamespace(), Name: want.GetService().GetName()}
				if d := cmp.Diff(want, fl.imports[k], protocmp.Transform()); d != "" {
					t.Fatalf("step %d, %s: import %s (-list +follower):\n%s", step, fl.name, k, d)
				}
			}
		}
	}
	if deltas.bytes >= full.bytes {
		t.Fatalf("deltas sent %d bytes, whole imports %d: deltas should be smaller", deltas.bytes, full.bytes)
	}
	t.Logf("whole imports: %d messages, %d bytes; deltas: %d messages, %d bytes", full.messages, full.bytes, deltas.messages, deltas.bytes)
}

// TestDeltaHoldsOnlyTheChangedCluster: one endpoint flip in one of three clusters sends
// that cluster's part and no header.
func TestDeltaHoldsOnlyTheChangedCluster(t *testing.T) {
	f := newFixture(t, 0)
	for _, id := range []string{"a", "b", "c"} {
		f.register(id, time.Hour)
		f.put(id, "one", 80)
	}
	w, err := f.cache.Watch(f.ctx, "prod", Filter{IncludeEndpoints: true, ClusterDeltas: true}, 0, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if snap := f.next(w); !snap.GetSnapshot() || len(snap.GetUpserts()) != 1 {
		t.Fatalf("first message %v, want a snapshot of one import", snap)
	}
	k := store.ServiceKey{Namespace: "dynamo", Name: "one"}
	exports, err := f.st.ListServiceExports(f.ctx, "prod", k)
	if err != nil {
		t.Fatal(err)
	}
	var e store.Export
	for _, x := range exports {
		if x.ClusterID == "b" {
			e = x
		}
	}
	e.EndpointGroups = []*registryv1.EndpointGroup{{AddressType: "IPv4", Endpoints: []*registryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: &registryv1.EndpointConditions{Ready: proto.Bool(true)}}}}}
	if _, err := f.st.PutExport(f.ctx, e); err != nil {
		t.Fatal(err)
	}
	if err := f.cache.Apply(f.ctx, store.Change{Kind: store.ChangeExport, Clusterset: "prod", Service: k}); err != nil {
		t.Fatal(err)
	}
	m := f.next(w)
	if len(m.GetUpserts()) != 0 || len(m.GetDeltas()) != 1 {
		t.Fatalf("message %v, want one delta", m)
	}
	d := m.GetDeltas()[0]
	if d.GetHeader() != nil || len(d.GetClusters()) != 1 || d.GetClusters()[0].GetClusterId() != "b" || len(d.GetRemovedClusterIds()) != 0 {
		t.Fatalf("delta %v, want only cluster b's part", d)
	}
	if !d.GetClusters()[0].GetEndpointGroups()[0].GetEndpoints()[0].GetConditions().GetReady() {
		t.Fatalf("delta %v lost the new readiness", d)
	}
}

// TestSnapshotPages: a snapshot in pages of two, each page shared by watchers at the same
// revision, and the cursor moving only after the last page.
func TestSnapshotPages(t *testing.T) {
	f := newFixture(t, 0)
	f.register("a", time.Hour)
	for i := range 5 {
		f.put("a", fmt.Sprintf("svc-%d", i), 80)
	}
	w1, _ := f.cache.Watch(f.ctx, "prod", Filter{}, 2, "", 0)
	w2, _ := f.cache.Watch(f.ctx, "prod", Filter{}, 2, "", 0)
	defer w1.Close()
	defer w2.Close()
	var got []string
	for i := range 3 {
		m1, err := w1.Next(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		m2, _ := w2.Next(f.ctx)
		if m1 != m2 {
			t.Fatalf("page %d built twice for two watchers at the same revision", i)
		}
		if m1.GetSnapshot() != (i == 0) || m1.GetSnapshotContinues() != (i < 2) {
			t.Fatalf("page %d: snapshot=%v continues=%v", i, m1.GetSnapshot(), m1.GetSnapshotContinues())
		}
		got = append(got, names(m1.GetUpserts())...)
	}
	if fmt.Sprint(got) != "[svc-0 svc-1 svc-2 svc-3 svc-4]" {
		t.Fatalf("pages hold %v", got)
	}
	// A change while w1 is between snapshots: a delta, not a new snapshot.
	f.put("a", "svc-5", 80)
	if m := f.next(w1); m.GetSnapshot() || fmt.Sprint(names(m.GetUpserts())) != "[svc-5]" {
		t.Fatalf("after the pages: %v, want the change alone", m)
	}
}
