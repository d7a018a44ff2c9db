package registryclient

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/types"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

type recorder struct{ calls [][]types.NamespacedName }

func (r *recorder) ImportsChanged(_ context.Context, keys []types.NamespacedName) {
	r.calls = append(r.calls, slices.Clone(keys))
}

// TestImportWatchPagesAndDeltas: a snapshot in pages is applied only at its last page (the
// importer never sees a partial set, which would delete the imports not yet received),
// and cluster deltas patch the imports held.
func TestImportWatchPagesAndDeltas(t *testing.T) {
	w := &ImportWatch{}
	rec := &recorder{}
	w.onChange = func(keys []types.NamespacedName) { rec.ImportsChanged(context.Background(), keys) }
	w.apply(snapshot("e1", 3, imp("old", "a")))
	rec.calls = nil

	first := snapshot("e1", 7, imp("pool", "a"))
	first.SnapshotContinues = true
	w.apply(first)
	if got := view(w); got != "old=a" || len(rec.calls) != 0 || w.view.Revision != 3 {
		t.Fatalf("after the first page: view %q, %d notifications, revision %d; want the old state untouched", got, len(rec.calls), w.view.Revision)
	}
	w.apply(&registryv1.WatchImportsResponse{Epoch: "e1", Revision: 7, Upserts: []*registryv1.ServiceImport{imp("router", "b")}})
	if got := view(w); got != "pool=a router=b" || w.view.Revision != 7 || len(rec.calls) != 1 {
		t.Fatalf("after the last page: view %q, revision %d, %d notifications", got, w.view.Revision, len(rec.calls))
	}

	// Cluster c joins pool, and a new import arrives as a delta with its header.
	joined := imp("pool", "c").GetClusters()[0]
	w.apply(&registryv1.WatchImportsResponse{Epoch: "e1", Revision: 8, Deltas: []*registryv1.ImportDelta{
		{Service: &registryv1.ServiceKey{Namespace: "default", Name: "pool"}, Clusters: []*registryv1.ImportCluster{joined}},
		{Service: &registryv1.ServiceKey{Namespace: "default", Name: "gateway"}, Header: &registryv1.ImportHeader{Spec: &registryv1.ImportSpec{}}, Clusters: imp("gateway", "b").GetClusters()},
	}})
	if got := view(w); got != "gateway=b pool=a,c router=b" {
		t.Fatalf("after deltas: %q", got)
	}
	w.apply(&registryv1.WatchImportsResponse{Epoch: "e1", Revision: 9, Deltas: []*registryv1.ImportDelta{
		{Service: &registryv1.ServiceKey{Namespace: "default", Name: "pool"}, RemovedClusterIds: []string{"a"}},
	}, Deletes: []*registryv1.ServiceKey{{Namespace: "default", Name: "router"}}})
	if got := view(w); got != "gateway=b pool=c" || w.view.Revision != 9 {
		t.Fatalf("after a removal and a delete: %q at revision %d", got, w.view.Revision)
	}
	last := rec.calls[len(rec.calls)-1]
	if len(last) != 2 {
		t.Fatalf("last notification %v, want pool and router", last)
	}
}

// TestImportWatchFirstSnapshotInPages: the first snapshot of a new watch (nothing held
// yet) arrives in pages; every page counts, not only the last (a controller starting
// against more imports than one page imported only the last page's).
func TestImportWatchFirstSnapshotInPages(t *testing.T) {
	for _, pages := range []int{1, 2, 3} {
		w := &ImportWatch{}
		rec := &recorder{}
		w.onChange = func(keys []types.NamespacedName) { rec.ImportsChanged(context.Background(), keys) }
		var want []string
		for p := range pages {
			name := fmt.Sprintf("svc-%d", p)
			want = append(want, name+"=a")
			resp := &registryv1.WatchImportsResponse{Epoch: "e1", Revision: 5, Snapshot: p == 0, SnapshotContinues: p < pages-1,
				Upserts: []*registryv1.ServiceImport{imp(name, "a")}}
			w.apply(resp)
			if p < pages-1 && (w.synced || len(rec.calls) != 0) {
				t.Fatalf("%d pages: synced %v with %d notifications after page %d", pages, w.synced, len(rec.calls), p)
			}
		}
		if got := view(w); got != strings.Join(want, " ") || !w.synced || len(rec.calls) != 1 || len(rec.calls[0]) != pages {
			t.Fatalf("%d pages: view %q, synced %v, notifications %v; want %q", pages, got, w.synced, rec.calls, strings.Join(want, " "))
		}
	}
}

// TestImportWatchTellsOfANewEpoch: OnEpochChange runs once a whole snapshot of another
// epoch arrives (so the session checks its lease at once), never for the first snapshot,
// a snapshot of the same epoch (a reconnect), a partial page or a delta.
func TestImportWatchTellsOfANewEpoch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		resps []*registryv1.WatchImportsResponse
		want  int
	}{
		{"first snapshot", []*registryv1.WatchImportsResponse{{Epoch: "e1", Snapshot: true}}, 0},
		{"same epoch again", []*registryv1.WatchImportsResponse{{Epoch: "e1", Snapshot: true}, {Epoch: "e1", Snapshot: true}}, 0},
		{"delta", []*registryv1.WatchImportsResponse{{Epoch: "e1", Snapshot: true}, {Epoch: "e1", Revision: 2, Upserts: []*registryv1.ServiceImport{imp("a", "x")}}}, 0},
		{"new epoch", []*registryv1.WatchImportsResponse{{Epoch: "e1", Snapshot: true}, {Epoch: "e2", Snapshot: true}}, 1},
		{"new epoch in pages", []*registryv1.WatchImportsResponse{{Epoch: "e1", Snapshot: true},
			{Epoch: "e2", Snapshot: true, SnapshotContinues: true, Upserts: []*registryv1.ServiceImport{imp("a", "x")}},
			{Epoch: "e2", Upserts: []*registryv1.ServiceImport{imp("b", "x")}}}, 1},
		{"two new epochs", []*registryv1.WatchImportsResponse{{Epoch: "e1", Snapshot: true}, {Epoch: "e2", Snapshot: true}, {Epoch: "e3", Snapshot: true}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			w := &ImportWatch{RefillHold: time.Minute, OnEpochChange: func() { calls++ }}
			for i, r := range tc.resps {
				w.apply(r)
				if r.GetSnapshotContinues() && calls != 0 {
					t.Fatalf("called after the partial page %d", i)
				}
			}
			if calls != tc.want {
				t.Fatalf("OnEpochChange ran %d times, want %d", calls, tc.want)
			}
		})
	}
}

// TestImportWatchRefillUntil: a first snapshot from a registry that started empty less than
// a hold before sets RefillUntil to that start plus the hold; an older start, a registry
// that keeps its records, or a watch that had an earlier epoch (it holds that instead) do not.
func TestImportWatchRefillUntil(t *testing.T) {
	now := time.Now()
	started := func(ago time.Duration) *timestamppb.Timestamp { return timestamppb.New(now.Add(-ago)) }
	for _, tc := range []struct {
		name  string
		resps []*registryv1.WatchImportsResponse
		want  time.Time
	}{
		{"started empty 10 s ago", []*registryv1.WatchImportsResponse{{Epoch: "e1", Snapshot: true, StartedEmpty: started(10 * time.Second)}}, now.Add(50 * time.Second)},
		{"in pages", []*registryv1.WatchImportsResponse{{Epoch: "e1", Snapshot: true, SnapshotContinues: true, StartedEmpty: started(10 * time.Second)}, {Epoch: "e1"}}, now.Add(50 * time.Second)},
		{"started empty long ago", []*registryv1.WatchImportsResponse{{Epoch: "e1", Snapshot: true, StartedEmpty: started(2 * time.Minute)}}, time.Time{}},
		{"a start in the future: one hold from now at most", []*registryv1.WatchImportsResponse{{Epoch: "e1", Snapshot: true, StartedEmpty: started(-time.Hour)}}, now.Add(time.Minute)},
		{"keeps its records", []*registryv1.WatchImportsResponse{{Epoch: "e1", Snapshot: true}}, time.Time{}},
		{"after an earlier epoch", []*registryv1.WatchImportsResponse{{Epoch: "e1", Snapshot: true}, {Epoch: "e2", Snapshot: true, StartedEmpty: started(time.Second)}}, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &ImportWatch{RefillHold: time.Minute}
			for _, r := range tc.resps {
				w.apply(r)
			}
			if got := w.RefillUntil("a"); got.Sub(tc.want).Abs() > time.Second {
				t.Fatalf("RefillUntil %v, want %v", got, tc.want)
			}
		})
	}
}
