package imports

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// TestSnapshotPagedByBytes: a snapshot of imports carrying 250 KiB of annotations each
// (6 MiB in all) is sent in messages of at most MaxPageBytes, whatever the page size the
// watcher asked for (none included), each import once, the last message without
// snapshot_continues; an import larger than a page goes alone. Every watcher once got it
// in one message, which gRPC's default 4 MiB client limit refuses.
func TestSnapshotPagedByBytes(t *testing.T) {
	f := newFixture(t, 0)
	f.register("a", time.Minute)
	big := strings.Repeat("x", 250<<10)
	put := func(name string, annotations map[string]string) {
		k := store.ServiceKey{Namespace: "dynamo", Name: name}
		if _, err := f.st.PutExport(f.ctx, store.Export{Clusterset: "prod", ClusterID: "a", Service: k, CreateTime: f.clk.Now(),
			Spec: &registryv1.ExportSpec{Type: registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP, Ports: []*registryv1.ServicePort{{Name: "http", Port: 80}},
				ExportedAnnotations: annotations}}); err != nil {
			t.Fatal(err)
		}
		if err := f.cache.Apply(f.ctx, store.Change{Kind: store.ChangeExport, Clusterset: "prod", Service: k}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 24 {
		put(fmt.Sprintf("svc%02d", i), map[string]string{"example.com/blob": big})
	}
	// One import over a page: its annotations in 12 keys of 250 KiB (3 MiB).
	huge := map[string]string{}
	for i := range 12 {
		huge[fmt.Sprintf("example.com/blob%d", i)] = big
	}
	put("huge", huge)
	for _, pageSize := range []int{0, 3, 100} {
		w, err := f.cache.Watch(f.ctx, "prod", Filter{}, pageSize, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		for i := 0; ; i++ {
			m := f.next(w)
			if m.GetSnapshot() != (i == 0) {
				t.Fatalf("page size %d, message %d: snapshot=%v", pageSize, i, m.GetSnapshot())
			}
			n := len(m.GetUpserts())
			size := proto.Size(m)
			if n > 1 && size > MaxPageBytes+1024 || pageSize > 0 && n > pageSize || n == 0 {
				t.Errorf("page size %d, message %d: %d imports in %d bytes; want 1 to %d imports within %d bytes (or one import alone)", pageSize, i, n, size, max(pageSize, 25), MaxPageBytes)
			}
			for _, imp := range m.GetUpserts() {
				seen[imp.GetService().GetName()]++
			}
			if !m.GetSnapshotContinues() {
				break
			}
		}
		if len(seen) != 25 {
			t.Errorf("page size %d: %d imports, want 25", pageSize, len(seen))
		}
		for name, n := range seen {
			if n != 1 {
				t.Errorf("page size %d: %s sent %d times", pageSize, name, n)
			}
		}
		w.Close()
	}
}

// TestSnapshotStartedEmpty: a cache over a store that started empty puts the time on the
// first page of every snapshot, not on later pages or deltas; one over a store that keeps
// its records puts none.
func TestSnapshotStartedEmpty(t *testing.T) {
	f := newFixture(t, 0)
	started := f.clk.Now().Add(-5 * time.Second)
	f.cache.startedEmpty = timestamppb.New(started)
	f.register("a", time.Minute)
	f.put("a", "one", 80)
	f.put("a", "two", 80)
	w, err := f.cache.Watch(f.ctx, "prod", Filter{}, 1, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	first, second := f.next(w), f.next(w)
	if !first.GetSnapshot() || !first.GetStartedEmpty().AsTime().Equal(started) || second.GetStartedEmpty() != nil {
		t.Fatalf("pages: first %v %v, second %v", first.GetSnapshot(), first.GetStartedEmpty(), second.GetStartedEmpty())
	}
	f.put("a", "three", 80)
	if d := f.next(w); d.GetSnapshot() || d.GetStartedEmpty() != nil {
		t.Fatalf("delta: %v", d)
	}
	f.cache.startedEmpty = nil
	w2, err := f.cache.Watch(f.ctx, "prod", Filter{}, 0, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if m := f.next(w2); !m.GetSnapshot() || m.GetStartedEmpty() != nil {
		t.Fatalf("a store that keeps its records: %v", m.GetStartedEmpty())
	}
}
