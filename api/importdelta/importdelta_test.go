package importdelta

import (
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
