package registryclient

import (
	"slices"
	"strings"
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

// view renders the mirror: "svc=a,b svc2=c".
func view(w *ImportWatch) string {
	keys := w.Keys()
	slices.SortFunc(keys, func(a, b types.NamespacedName) int { return strings.Compare(a.Name, b.Name) })
	var out []string
	for _, k := range keys {
		var cs []string
		for _, c := range w.Get(k).GetClusters() {
			cs = append(cs, c.GetClusterId())
		}
		out = append(out, k.Name+"="+strings.Join(cs, ","))
	}
	return strings.Join(out, " ")
}

// viewAwaited is view, then after a semicolon the clusters among a, b and c that a
// refill awaits: "pool=a; b,c".
func viewAwaited(w *ImportWatch) string {
	var awaited []string
	for _, c := range []string{"a", "b", "c"} {
		if !w.RefillUntil(c).IsZero() {
			awaited = append(awaited, c)
		}
	}
	return view(w) + "; " + strings.Join(awaited, ",")
}

// TestRefill: after the registry's epoch changes, the watch shows the new registry's
// imports as they are and awaits the clusters of the old epoch until each appears again
// (the importer keeps their objects meanwhile).
func TestRefill(t *testing.T) {
	before := snapshot("e1", 3, imp("pool", "a", "b", "c"), imp("router", "b"), imp("only-c", "c"))
	tests := []struct {
		name  string
		steps []*registryv1.WatchImportsResponse
		want  string
	}{{
		name:  "same epoch: a snapshot replaces, nobody is awaited",
		steps: []*registryv1.WatchImportsResponse{snapshot("e1", 9, imp("pool", "a"))},
		want:  "pool=a; ",
	}, {
		name:  "new epoch, empty: every cluster is awaited",
		steps: []*registryv1.WatchImportsResponse{snapshot("e2", 0)},
		want:  "; a,b,c",
	}, {
		name:  "a returned: the others are awaited",
		steps: []*registryv1.WatchImportsResponse{snapshot("e2", 1, imp("pool", "a"))},
		want:  "pool=a; b,c",
	}, {
		name: "b returned without the pool",
		steps: []*registryv1.WatchImportsResponse{
			snapshot("e2", 1, imp("pool", "a")),
			delta("e2", 2, []*registryv1.ServiceImport{imp("router", "b")}),
		},
		want: "pool=a router=b; c",
	}, {
		name: "every cluster returned: the refill ends, later deletions apply at once",
		steps: []*registryv1.WatchImportsResponse{
			snapshot("e2", 1, imp("pool", "a")),
			delta("e2", 2, []*registryv1.ServiceImport{imp("router", "b"), imp("pool", "a", "b")}),
			delta("e2", 3, []*registryv1.ServiceImport{imp("only-c", "c"), imp("pool", "a", "b", "c")}),
			delta("e2", 4, nil, "only-c"),
		},
		want: "pool=a,b,c router=b; ",
	}, {
		name: "a second epoch change during a refill awaits again what returned after the first",
		steps: []*registryv1.WatchImportsResponse{
			snapshot("e2", 1, imp("pool", "a")),
			snapshot("e3", 0),
		},
		want: "; a,b,c",
	}, {
		name:  "a new Service during a refill applies at once",
		steps: []*registryv1.WatchImportsResponse{snapshot("e2", 1, imp("new", "a"))},
		want:  "new=a; b,c",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &ImportWatch{RefillHold: time.Hour}
			w.apply(before)
			for _, s := range tt.steps {
				w.apply(s)
			}
			if got := viewAwaited(w); got != tt.want {
				t.Errorf("view = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRefillDisabled(t *testing.T) {
	w := &ImportWatch{}
	w.apply(snapshot("e1", 1, imp("pool", "a", "b")))
	w.apply(snapshot("e2", 0, imp("pool", "a")))
	if got := viewAwaited(w); got != "pool=a; " {
		t.Errorf("view = %q, want pool=a and nobody awaited", got)
	}
}

// TestRefillEnds: a cluster that does not return is no longer awaited when the refill's
// time is up.
func TestRefillEnds(t *testing.T) {
	w := &ImportWatch{RefillHold: 200 * time.Millisecond}
	w.apply(snapshot("e1", 1, imp("pool", "a", "b"), imp("router", "b")))
	w.apply(snapshot("e2", 1, imp("pool", "a")))
	if got := viewAwaited(w); got != "pool=a; b" {
		t.Fatalf("view = %q", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for viewAwaited(w) != "pool=a; " {
		if time.Now().After(deadline) {
			t.Fatalf("the refill did not end: %q", viewAwaited(w))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRefillCountsFromTheLostStream: the refill counts from when the old epoch's stream
// ended; a registry gone longer than the hold awaits nobody.
func TestRefillCountsFromTheLostStream(t *testing.T) {
	w := &ImportWatch{RefillHold: time.Minute}
	w.apply(snapshot("e1", 1, imp("pool", "a", "b")))
	w.lost = time.Now().Add(-2 * time.Minute)
	w.apply(snapshot("e2", 1, imp("pool", "a")))
	if got := viewAwaited(w); got != "pool=a; " {
		t.Errorf("view = %q, want pool=a and nobody awaited (every lease of the old epoch has expired)", got)
	}
	w.lost = time.Now().Add(-30 * time.Second)
	w.apply(snapshot("e3", 1))
	if got := viewAwaited(w); got != "; a" {
		t.Errorf("view = %q, want a awaited (half the hold is left)", got)
	}
	if left := time.Until(w.RefillUntil("a")); left < 25*time.Second || left > 31*time.Second {
		t.Errorf("a awaited for %s more, want about 30 s", left)
	}
}
