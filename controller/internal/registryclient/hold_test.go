package registryclient

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

// imp builds an import of default/name with one endpoint group per cluster; each cluster's
// single endpoint address is the cluster id, so a view can be read back as "a,b".
func imp(name string, clusters ...string) *registryv1.ServiceImport {
	out := &registryv1.ServiceImport{Service: &registryv1.ServiceKey{Namespace: "default", Name: name}, Spec: &registryv1.ImportSpec{}}
	for _, c := range clusters {
		out.Clusters = append(out.Clusters, &registryv1.ImportCluster{ClusterId: c, EndpointGroups: []*registryv1.EndpointGroup{
			{AddressType: "IPv4", Endpoints: []*registryv1.Endpoint{{Addresses: []string{c}}}},
		}})
	}
	return out
}

func snapshot(epoch string, rev int64, imports ...*registryv1.ServiceImport) *registryv1.WatchImportsResponse {
	return &registryv1.WatchImportsResponse{Epoch: epoch, Revision: rev, Snapshot: true, Upserts: imports}
}

func delta(epoch string, rev int64, upserts []*registryv1.ServiceImport, deletes ...string) *registryv1.WatchImportsResponse {
	r := &registryv1.WatchImportsResponse{Epoch: epoch, Revision: rev, Upserts: upserts}
	for _, d := range deletes {
		r.Deletes = append(r.Deletes, &registryv1.ServiceKey{Namespace: "default", Name: d})
	}
	return r
}

// view renders what the importer sees: "svc=a,b svc2=c" (held clusters marked with *).
func view(w *ImportWatch) string {
	keys := w.Keys()
	slices.SortFunc(keys, func(a, b types.NamespacedName) int { return strings.Compare(a.Name, b.Name) })
	var out []string
	for _, k := range keys {
		i, held := w.GetHeld(k)
		if i == nil {
			continue
		}
		var cs []string
		for _, c := range i.GetClusters() {
			id := c.GetClusterId()
			if slices.Contains(held, id) {
				id += "*"
			}
			cs = append(cs, id)
		}
		out = append(out, k.Name+"="+strings.Join(cs, ","))
	}
	return strings.Join(out, " ")
}

func TestRefillHold(t *testing.T) {
	before := snapshot("e1", 3, imp("pool", "a", "b", "c"), imp("router", "b"), imp("only-c", "c"))
	tests := []struct {
		name  string
		steps []*registryv1.WatchImportsResponse
		want  string
	}{{
		name:  "same epoch: a snapshot replaces, nothing is held",
		steps: []*registryv1.WatchImportsResponse{snapshot("e1", 9, imp("pool", "a"))},
		want:  "pool=a",
	}, {
		name:  "new epoch, empty: everything is held",
		steps: []*registryv1.WatchImportsResponse{snapshot("e2", 0)},
		want:  "only-c=c* pool=a*,b*,c* router=b*",
	}, {
		name:  "a returned: its entries are the registry's, the others held",
		steps: []*registryv1.WatchImportsResponse{snapshot("e2", 1, imp("pool", "a"))},
		want:  "only-c=c* pool=a,b*,c* router=b*",
	}, {
		name: "b returned without the pool: b leaves the pool, keeps the router",
		steps: []*registryv1.WatchImportsResponse{
			snapshot("e2", 1, imp("pool", "a")),
			delta("e2", 2, []*registryv1.ServiceImport{imp("router", "b")}),
		},
		want: "only-c=c* pool=a,c* router=b",
	}, {
		name: "every cluster returned: the hold ends, later deletions apply at once",
		steps: []*registryv1.WatchImportsResponse{
			snapshot("e2", 1, imp("pool", "a")),
			delta("e2", 2, []*registryv1.ServiceImport{imp("router", "b"), imp("pool", "a", "b")}),
			delta("e2", 3, []*registryv1.ServiceImport{imp("only-c", "c"), imp("pool", "a", "b", "c")}),
			delta("e2", 4, nil, "only-c"),
		},
		want: "pool=a,b,c router=b",
	}, {
		name: "a second epoch change during a hold holds again what returned after the first",
		steps: []*registryv1.WatchImportsResponse{
			snapshot("e2", 1, imp("pool", "a")),
			snapshot("e3", 0),
		},
		want: "only-c=c* pool=a*,b*,c* router=b*",
	}, {
		name:  "a new Service during a hold applies at once",
		steps: []*registryv1.WatchImportsResponse{snapshot("e2", 1, imp("new", "a"))},
		// a returned (SyncExports shows all of a cluster's exports at once) without the pool.
		want: "new=a only-c=c* pool=b*,c* router=b*",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &ImportWatch{RefillHold: time.Hour}
			w.apply(before)
			for _, s := range tt.steps {
				w.apply(s)
			}
			if got := view(w); got != tt.want {
				t.Errorf("view = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRefillHoldDisabled(t *testing.T) {
	w := &ImportWatch{}
	w.apply(snapshot("e1", 1, imp("pool", "a", "b")))
	w.apply(snapshot("e2", 0, imp("pool", "a")))
	if got := view(w); got != "pool=a" {
		t.Errorf("view = %q, want pool=a", got)
	}
}

// TestRefillHoldEnds: a cluster that does not return is dropped when the hold's time is up,
// and the Services it was held in are reported changed.
func TestRefillHoldEnds(t *testing.T) {
	var mu sync.Mutex
	var changed []types.NamespacedName
	var held []int
	w := &ImportWatch{RefillHold: 200 * time.Millisecond,
		onChange: func(k []types.NamespacedName) { mu.Lock(); changed = append(changed, k...); mu.Unlock() },
		OnHold:   func(n int) { mu.Lock(); held = append(held, n); mu.Unlock() },
	}
	w.apply(snapshot("e1", 1, imp("pool", "a", "b"), imp("router", "b")))
	w.apply(snapshot("e2", 1, imp("pool", "a")))
	if got := view(w); got != "pool=a,b* router=b*" {
		t.Fatalf("view = %q", got)
	}
	mu.Lock()
	changed = nil
	mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for view(w) != "pool=a" {
		if time.Now().After(deadline) {
			t.Fatalf("the hold did not end: %q", view(w))
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	names := map[string]bool{}
	for _, k := range changed {
		names[k.Name] = true
	}
	if !names["pool"] || !names["router"] {
		t.Errorf("changed after the hold ended = %v, want pool and router", changed)
	}
	if !slices.Equal(held, []int{1, 0}) {
		t.Errorf("held counts = %v, want [1 0] (b held after a returned, then none)", held)
	}
}

// TestRefillHoldCountsFromTheLostStream: the hold counts from when the old epoch's stream
// ended; a registry gone longer than the hold has nothing left to hold.
func TestRefillHoldCountsFromTheLostStream(t *testing.T) {
	w := &ImportWatch{RefillHold: time.Minute}
	w.apply(snapshot("e1", 1, imp("pool", "a", "b")))
	w.lost = time.Now().Add(-2 * time.Minute)
	w.apply(snapshot("e2", 1, imp("pool", "a")))
	if got := view(w); got != "pool=a" {
		t.Errorf("view = %q, want pool=a (every lease of the old epoch has expired)", got)
	}
	w.lost = time.Now().Add(-30 * time.Second)
	w.apply(snapshot("e3", 1))
	if got := view(w); got != "pool=a*" {
		t.Errorf("view = %q, want pool=a* (half the hold is left)", got)
	}
}

// TestRefillHoldDroppedServicesReported: when an epoch change ends a hold without a new
// one, the Services that were only held are reported changed, so the importer removes them.
func TestRefillHoldDroppedServicesReported(t *testing.T) {
	var changed []string
	w := &ImportWatch{RefillHold: time.Minute, onChange: func(keys []types.NamespacedName) {
		for _, k := range keys {
			changed = append(changed, k.Name)
		}
	}}
	w.apply(snapshot("e1", 1, imp("pool", "a"), imp("only-b", "b")))
	w.apply(snapshot("e2", 1, imp("pool", "a")))
	if got := view(w); got != "only-b=b* pool=a" {
		t.Fatalf("view = %q", got)
	}
	changed = nil
	w.lost = time.Now().Add(-2 * time.Minute)
	w.apply(snapshot("e3", 1, imp("pool", "a")))
	if got := view(w); got != "pool=a" {
		t.Fatalf("view = %q, want pool=a", got)
	}
	if !slices.Contains(changed, "only-b") {
		t.Errorf("changed = %v, want only-b among them", changed)
	}
}
