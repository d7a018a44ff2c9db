package importer

import (
	"fmt"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

// bigImport is one import of 1,000 endpoints from 10 clusters (100 each, one slice each);
// cluster c0 is the importing cluster, c1 is in its region.
func bigImport() *registryv1.ServiceImport {
	imp := &registryv1.ServiceImport{
		Service: &registryv1.ServiceKey{Namespace: "dynamo", Name: "pool"},
		Spec: &registryv1.ImportSpec{Type: registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP, IpFamilies: []string{"IPv4"},
			Ports: []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}}},
	}
	for c := range 10 {
		region := "eu-west-1"
		if c < 2 {
			region = "us-east-1"
		}
		g := &registryv1.EndpointGroup{AddressType: "IPv4", Ports: []*registryv1.EndpointPort{{Name: "http", Protocol: "TCP", Port: 8080}}}
		for e := range 100 {
			g.Endpoints = append(g.Endpoints, &registryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", c, e/250, e%250)},
				Conditions: &registryv1.EndpointConditions{Ready: ptr.To(true)}, Zone: "zone-a", TargetPod: fmt.Sprintf("pod-%d", e)})
		}
		imp.Clusters = append(imp.Clusters, &registryv1.ImportCluster{ClusterId: fmt.Sprintf("c%d", c), Region: region, EndpointGroups: []*registryv1.EndpointGroup{g}})
	}
	return imp
}

// BenchmarkRehint1000Endpoints: the importer's cost of one tier change of an import of 1,000
// endpoints from 10 clusters — the importing cluster's endpoints stop being ready, so the
// region takes the traffic: the tier choice, the hints and the slice plan, and the API
// writes that plan makes (reported as writes/op).
func BenchmarkRehint1000Endpoints(b *testing.B) {
	topo := Topology{Zones: []string{"us-east-1a", "us-east-1b", "us-east-1c"}}
	policy := []registryv1.LocalityTier{registryv1.LocalityTier_LOCALITY_TIER_CLUSTER, registryv1.LocalityTier_LOCALITY_TIER_REGION}
	before := bigImport()
	d := DesiredFor(before)
	d.Localize(before, policy, "c0", "us-east-1", topo)
	owner := d.Service.DeepCopy()
	owner.UID = "derived"
	ref := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}
	cur := make([]discoveryv1.EndpointSlice, len(d.Slices))
	for i, s := range d.Slices {
		cur[i] = *s.DeepCopy()
		cur[i].OwnerReferences = ref
	}
	after := bigImport()
	for _, e := range after.Clusters[0].EndpointGroups[0].Endpoints {
		e.Conditions.Ready = ptr.To(false)
	}
	var plan SlicePlan
	b.ReportAllocs()
	for b.Loop() {
		want := DesiredFor(after)
		want.Localize(after, policy, "c0", "us-east-1", topo)
		for _, w := range want.Slices {
			w.OwnerReferences = ref
		}
		plan = PlanSlices(cur, want.Slices, owner)
	}
	b.ReportMetric(float64(len(plan.Update)+len(plan.Create)+len(plan.Delete)), "writes/op")
}
