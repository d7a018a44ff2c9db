package importer

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
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
				if s.Labels[mcsv1beta1.LabelServiceName] != "router" || s.Labels[ManagedByLabel] == "" && s.Labels["endpointslice.kubernetes.io/managed-by"] != ManagedBy {
					t.Fatalf("slice labels %v", s.Labels)
				}
			}
			if d.Labels[ManagedByLabel] != ManagedBy || d.Annotations[DerivedServiceAnnotation] != d.Service.Name {
				t.Fatalf("ServiceImport labels %v annotations %v", d.Labels, d.Annotations)
			}
		})
	}
}
