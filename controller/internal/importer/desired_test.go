package importer

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/names"
)

// TestDesiredFor: the objects of an import, computed once, agree with each other.
func TestDesiredFor(t *testing.T) {
	headless := routerImport("use1-a", "euw1-a")
	headless.Spec.Type = registryv1.ServiceType_SERVICE_TYPE_HEADLESS
	affinity := routerImport("use1-a")
	affinity.Spec.SessionAffinity = "ClientIP"
	cases := []struct {
		name          string
		imp           *registryv1.ServiceImport
		wantType      mcsv1beta1.ServiceImportType
		wantClusterIP string
		wantSlices    int
		wantClusters  []string
		wantAffinity  corev1.ServiceAffinity
	}{
		{"ClusterSetIP from two clusters", routerImport("use1-a", "euw1-a"), mcsv1beta1.ClusterSetIP, "", 2, []string{"use1-a", "euw1-a"}, ""},
		{"Headless", headless, mcsv1beta1.Headless, corev1.ClusterIPNone, 2, []string{"use1-a", "euw1-a"}, ""},
		{"no endpoints yet", routerImport(), mcsv1beta1.ClusterSetIP, "", 0, nil, ""},
		{"session affinity reaches the derived Service", affinity, mcsv1beta1.ClusterSetIP, "", 1, []string{"use1-a"}, corev1.ServiceAffinityClientIP},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := DesiredFor(c.imp)
			if d.Spec.Type != c.wantType || d.Headless != (c.wantType == mcsv1beta1.Headless) {
				t.Fatalf("type %s headless %v, want %s", d.Spec.Type, d.Headless, c.wantType)
			}
			if d.Service.Spec.ClusterIP != c.wantClusterIP || d.Service.Name != DerivedName("dynamo", "router") || d.Service.Spec.SessionAffinity != c.wantAffinity {
				t.Fatalf("derived Service %+v", d.Service.Spec)
			}
			if len(d.Service.Spec.Ports) != len(d.Spec.Ports) || d.Service.Spec.Ports[0].Port != d.Spec.Ports[0].Port {
				t.Fatalf("derived Service ports %v, ServiceImport ports %v", d.Service.Spec.Ports, d.Spec.Ports)
			}
			if len(d.Slices) != c.wantSlices || len(d.Clusters) != len(c.wantClusters) {
				t.Fatalf("%d slices and clusters %v, want %d and %v", len(d.Slices), d.Clusters, c.wantSlices, c.wantClusters)
			}
			for i, cl := range c.wantClusters {
				if d.Clusters[i] != cl {
					t.Fatalf("clusters %v, want %v", d.Clusters, c.wantClusters)
				}
			}
			for _, s := range d.Slices {
				if s.Labels[mcsv1beta1.LabelServiceName] != "router" || s.Labels[names.ManagedByLabel] == "" && s.Labels["endpointslice.kubernetes.io/managed-by"] != names.ManagedBy {
					t.Fatalf("slice labels %v", s.Labels)
				}
			}
			if d.Labels[names.ManagedByLabel] != names.ManagedBy || d.Annotations[names.DerivedServiceAnnotation] != d.Service.Name {
				t.Fatalf("ServiceImport labels %v annotations %v", d.Labels, d.Annotations)
			}
		})
	}
}

// TestEndpointSlicesFromAnyAcceptedExport: what the registry accepts becomes slices the API
// server takes, and what the registry decided is what the data plane gets.
func TestEndpointSlicesFromAnyAcceptedExport(t *testing.T) {
	t.Run("an endpoint without conditions is unknown, not a panic", func(t *testing.T) {
		imp := routerImport("a")
		imp.Clusters[0].EndpointGroups[0].Endpoints[0].Conditions = nil
		s := EndpointSlices(imp)
		if len(s) != 1 || s[0].Endpoints[0].Conditions.Ready != nil {
			t.Fatalf("slices %+v", s)
		}
	})
	t.Run("a port without protocol is TCP", func(t *testing.T) {
		imp := routerImport("a")
		imp.Clusters[0].EndpointGroups[0].Ports[0].Protocol = ""
		if p := EndpointSlices(imp)[0].Ports[0]; p.Protocol == nil || *p.Protocol != corev1.ProtocolTCP {
			t.Fatalf("port %+v", p)
		}
	})
	t.Run("a port excluded for a cluster is not in its slices", func(t *testing.T) {
		imp := routerImport("a", "b")
		// b exported http on another number: the registry excluded b's http (PortConflict).
		imp.Clusters[1].ExcludedPorts = []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 81}}
		imp.Clusters[1].EndpointGroups[0].Ports = append(imp.Clusters[1].EndpointGroups[0].Ports, &registryv1.EndpointPort{Name: "metrics", Protocol: "TCP", Port: 9090})
		got := map[string][]string{}
		for _, s := range EndpointSlices(imp) {
			for _, p := range s.Ports {
				got[s.Labels[mcsv1beta1.LabelSourceCluster]] = append(got[s.Labels[mcsv1beta1.LabelSourceCluster]], *p.Name)
			}
		}
		if fmt.Sprint(got) != "map[a:[http] b:[metrics]]" {
			t.Fatalf("slice ports by cluster = %v", got)
		}
	})
	t.Run("long addresses are split into slices of bounded size", func(t *testing.T) {
		imp := routerImport("a")
		g := imp.Clusters[0].EndpointGroups[0]
		g.AddressType, g.Endpoints = "FQDN", nil
		long := strings.Repeat("a", 60) + "." + strings.Repeat("b", 60) + "." + strings.Repeat("c", 60) + ".example.com"
		for i := range 100 {
			e := &registryv1.Endpoint{}
			for j := range 100 {
				e.Addresses = append(e.Addresses, fmt.Sprintf("%d-%d-%s", i, j, long))
			}
			g.Endpoints = append(g.Endpoints, e)
		}
		slices := EndpointSlices(imp)
		total := 0
		for i, s := range slices {
			bytes := 0
			for _, e := range s.Endpoints {
				for _, a := range e.Addresses {
					bytes += len(a)
				}
			}
			if bytes > MaxSliceAddressBytes || s.Name != fmt.Sprintf("%s-a-0-%d", DerivedName("dynamo", "router"), i) {
				t.Fatalf("slice %s holds %d bytes of addresses", s.Name, bytes)
			}
			total += len(s.Endpoints)
		}
		if total != 100 || len(slices) < 8 {
			t.Fatalf("%d endpoints in %d slices", total, len(slices))
		}
	})
}

// TestReplicationHeld: the clusters the registry holds while replication lags are named,
// with their region, in the ReplicationHeld condition; none held: False.
func TestReplicationHeld(t *testing.T) {
	imp := routerImport("use1-a", "usw2-a", "euw1-a")
	imp.Clusters[1].LeaseState = registryv1.LeaseState_LEASE_STATE_HELD_REPLICATION
	imp.Clusters[1].HeldRegion = "us-west-2"
	d := DesiredFor(imp)
	want := []HeldCluster{{ClusterID: imp.Clusters[1].GetClusterId(), Region: "us-west-2"}}
	if fmt.Sprint(d.ReplicationHeld) != fmt.Sprint(want) {
		t.Fatalf("held = %v, want %v", d.ReplicationHeld, want)
	}
	c := replicationHeld(d.ReplicationHeld, 3)
	if c.Type != ConditionReplicationHeld || c.Status != "True" || c.Reason != ReasonReplicationLagging || c.ObservedGeneration != 3 ||
		!strings.Contains(c.Message, imp.Clusters[1].GetClusterId()+" (renewed through region us-west-2)") {
		t.Fatalf("condition = %+v", c)
	}
	if c := replicationHeld(DesiredFor(routerImport("use1-a")).ReplicationHeld, 3); c.Status != "False" || c.Reason != ReasonNoneHeld {
		t.Fatalf("condition without held clusters = %+v", c)
	}
}
