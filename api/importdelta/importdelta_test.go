package importdelta

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

func cluster(id string, addr string) *registryv1.ImportCluster {
	return &registryv1.ImportCluster{ClusterId: id, EndpointGroups: []*registryv1.EndpointGroup{{AddressType: "IPv4", Endpoints: []*registryv1.Endpoint{{Addresses: []string{addr}}}}}}
}

func TestApply(t *testing.T) {
	svc := &registryv1.ServiceKey{Namespace: "dynamo", Name: "router"}
	spec := &registryv1.ImportSpec{Type: registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP}
	headless := &registryv1.ImportSpec{Type: registryv1.ServiceType_SERVICE_TYPE_HEADLESS}
	prev := &registryv1.ServiceImport{Service: svc, Spec: spec, WinningClusterId: "a", Clusters: []*registryv1.ImportCluster{cluster("a", "10.0.0.1"), cluster("c", "10.0.0.3")}}
	for _, tc := range []struct {
		name  string
		prev  *registryv1.ServiceImport
		delta *registryv1.ImportDelta
		want  *registryv1.ServiceImport
	}{
		{"a new import", nil,
			&registryv1.ImportDelta{Service: svc, Header: &registryv1.ImportHeader{Spec: spec, WinningClusterId: "a"}, Clusters: []*registryv1.ImportCluster{cluster("a", "10.0.0.1")}},
			&registryv1.ServiceImport{Service: svc, Spec: spec, WinningClusterId: "a", Clusters: []*registryv1.ImportCluster{cluster("a", "10.0.0.1")}}},
		{"one cluster's endpoints change", prev,
			&registryv1.ImportDelta{Service: svc, Clusters: []*registryv1.ImportCluster{cluster("c", "10.0.0.9")}},
			&registryv1.ServiceImport{Service: svc, Spec: spec, WinningClusterId: "a", Clusters: []*registryv1.ImportCluster{cluster("a", "10.0.0.1"), cluster("c", "10.0.0.9")}}},
		{"a cluster joins between the others, kept in order", prev,
			&registryv1.ImportDelta{Service: svc, Clusters: []*registryv1.ImportCluster{cluster("b", "10.0.0.2")}},
			&registryv1.ServiceImport{Service: svc, Spec: spec, WinningClusterId: "a", Clusters: []*registryv1.ImportCluster{cluster("a", "10.0.0.1"), cluster("b", "10.0.0.2"), cluster("c", "10.0.0.3")}}},
		{"the winner leaves: new header, one cluster removed", prev,
			&registryv1.ImportDelta{Service: svc, Header: &registryv1.ImportHeader{Spec: headless, WinningClusterId: "c", Conflicts: []registryv1.ConflictReason{registryv1.ConflictReason_CONFLICT_REASON_TYPE_CONFLICT}}, RemovedClusterIds: []string{"a"}},
			&registryv1.ServiceImport{Service: svc, Spec: headless, WinningClusterId: "c", Conflicts: []registryv1.ConflictReason{registryv1.ConflictReason_CONFLICT_REASON_TYPE_CONFLICT}, Clusters: []*registryv1.ImportCluster{cluster("c", "10.0.0.3")}}},
		{"removing a cluster it does not hold changes nothing", prev,
			&registryv1.ImportDelta{Service: svc, RemovedClusterIds: []string{"z"}},
			prev},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before *registryv1.ServiceImport
			if tc.prev != nil {
				before = proto.Clone(tc.prev).(*registryv1.ServiceImport)
			}
			got := Apply(tc.prev, tc.delta)
			if !proto.Equal(got, tc.want) {
				t.Fatalf("got %v\nwant %v", got, tc.want)
			}
			if tc.prev != nil && !proto.Equal(tc.prev, before) {
				t.Fatalf("Apply changed its input: %v", tc.prev)
			}
		})
	}
}

// TestView: a snapshot in pages changes nothing until its last page (the first snapshot of
// a watch too), then replaces the view; deltas, upserts and deletes apply in order; a
// later snapshot reports what it dropped.
func TestView(t *testing.T) {
	imp := func(name, cl, addr string) *registryv1.ServiceImport {
		return &registryv1.ServiceImport{Service: &registryv1.ServiceKey{Namespace: "ns", Name: name}, Clusters: []*registryv1.ImportCluster{cluster(cl, addr)}}
	}
	page := func(rev int64, first, more bool, imps ...*registryv1.ServiceImport) *registryv1.WatchImportsResponse {
		return &registryv1.WatchImportsResponse{Epoch: "e", Revision: rev, Snapshot: first, SnapshotContinues: more, Upserts: imps}
	}
	view := func(v *View[string]) string {
		var out []string
		for k, i := range v.Imports {
			out = append(out, k+"="+i.GetClusters()[0].GetEndpointGroups()[0].GetEndpoints()[0].GetAddresses()[0])
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	v := NewView()
	for i, step := range []struct {
		msg     *registryv1.WatchImportsResponse
		done    bool
		changed string
		view    string
	}{
		{page(3, true, true, imp("a", "c1", "10.0.0.1")), false, "", ""},
		{page(3, false, true, imp("b", "c1", "10.0.0.2")), false, "", ""},
		{page(3, false, false, imp("c", "c1", "10.0.0.3")), true, "ns/a ns/b ns/c", "ns/a=10.0.0.1 ns/b=10.0.0.2 ns/c=10.0.0.3"},
		{&registryv1.WatchImportsResponse{Epoch: "e", Revision: 4, Deltas: []*registryv1.ImportDelta{{Service: &registryv1.ServiceKey{Namespace: "ns", Name: "b"}, Clusters: []*registryv1.ImportCluster{cluster("c1", "10.0.0.9")}}},
			Deletes: []*registryv1.ServiceKey{{Namespace: "ns", Name: "c"}}}, true, "ns/b ns/c", "ns/a=10.0.0.1 ns/b=10.0.0.9"},
		{page(9, true, true, imp("b", "c1", "10.0.0.9")), false, "", "ns/a=10.0.0.1 ns/b=10.0.0.9"},
		{page(9, false, false, imp("d", "c1", "10.0.0.4")), true, "ns/a ns/b ns/d", "ns/b=10.0.0.9 ns/d=10.0.0.4"},
	} {
		changed, done := v.Apply(step.msg)
		slices.Sort(changed)
		if done != step.done || strings.Join(changed, " ") != step.changed || view(v) != step.view {
			t.Fatalf("step %d: done %v changed %q view %q; want %v %q %q", i, done, changed, view(v), step.done, step.changed, step.view)
		}
		if wantSnap := done && step.msg.GetDeltas() == nil; done && v.Snapshot != wantSnap {
			t.Fatalf("step %d: Snapshot %v, want %v", i, v.Snapshot, wantSnap)
		}
	}
	if v.Epoch != "e" || v.Revision != 9 {
		t.Fatalf("epoch %q revision %d, want e 9", v.Epoch, v.Revision)
	}

	// A stream that ends mid-snapshot: the next stream resumes from revision 9 with a
	// delta; the cut snapshot's page must not turn that delta into a partial snapshot.
	v.Apply(page(12, true, true, imp("x", "c1", "10.0.0.7")))
	v.StreamEnded()
	changed, done := v.Apply(&registryv1.WatchImportsResponse{Epoch: "e", Revision: 12, Deltas: []*registryv1.ImportDelta{
		{Service: &registryv1.ServiceKey{Namespace: "ns", Name: "d"}, Clusters: []*registryv1.ImportCluster{cluster("c1", "10.0.0.5")}}}})
	if !done || strings.Join(changed, " ") != "ns/d" || view(v) != "ns/b=10.0.0.9 ns/d=10.0.0.5" {
		t.Fatalf("after a cut snapshot and a resumed delta: done %v changed %q view %q", done, changed, view(v))
	}
}
