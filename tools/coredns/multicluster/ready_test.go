package multicluster

import (
	"testing"

	"github.com/coredns/coredns/plugin/ready"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

var _ ready.Readiness = (*Multicluster)(nil)

// TestReady: CoreDNS is ready once both watches have synced, or while the API server does
// not serve ServiceImports at all (nothing to load, and cluster.local must work); not while
// ServiceImports exist and are not loaded yet.
func TestReady(t *testing.T) {
	served := []*metav1.APIResourceList{{GroupVersion: "multicluster.x-k8s.io/v1beta1", APIResources: []metav1.APIResource{{Name: "serviceimports"}}}}
	tests := []struct {
		name      string
		resources []*metav1.APIResourceList
		synced    bool
		want      bool
	}{
		{"not loaded", served, false, false},
		{"loaded", served, true, true},
		{"no ServiceImport API", nil, false, true},
		{"the group without ServiceImports", []*metav1.APIResourceList{{GroupVersion: "multicluster.x-k8s.io/v1beta1", APIResources: []metav1.APIResource{{Name: "serviceexports"}}}}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &Multicluster{
				discovery: &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: tt.resources}},
				loaded:    func() bool { return tt.synced },
			}
			if got := m.Ready(); got != tt.want {
				t.Fatalf("Ready = %v, want %v", got, tt.want)
			}
		})
	}
}
