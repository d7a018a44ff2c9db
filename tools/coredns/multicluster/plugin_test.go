package multicluster

import (
	"fmt"
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestImportFromSkipsPortsThatAreNot: a ServiceImport the API server stored with a port
// outside 1–65535 (or not a whole number) loses that port, never the others, and never
// becomes a wrapped-around SRV port.
func TestImportFromSkipsPortsThatAreNot(t *testing.T) {
	for _, tc := range []struct {
		name string
		port any
		want int32 // 0: skipped
	}{
		{"int", int64(8080), 8080},
		{"json number", float64(53), 53},
		{"zero", int64(0), 0},
		{"negative", int64(-1), 0},
		{"past 65535", int64(70000), 0},
		{"past int32", int64(1 << 40), 0},
		{"fraction", float64(80.5), 0},
		{"string", "80", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]any{
				"metadata": map[string]any{"namespace": "dynamo", "name": "echo"},
				"spec": map[string]any{"type": "ClusterSetIP", "ports": []any{
					map[string]any{"name": "bad", "port": tc.port},
					map[string]any{"name": "good", "port": int64(443)},
				}},
			}}
			imp := importFrom(u)
			var got []string
			for _, p := range imp.Ports {
				got = append(got, p.Name)
				if p.Name == "bad" && p.Port != tc.want {
					t.Fatalf("port %v read as %d, want %d", tc.port, p.Port, tc.want)
				}
			}
			wantN := 1
			if tc.want != 0 {
				wantN = 2
			}
			if len(imp.Ports) != wantN || imp.Ports[len(imp.Ports)-1].Name != "good" {
				t.Fatalf("ports %v, want %d with good last", got, wantN)
			}
		})
	}
}

// TestEndpointsOfReadsTheTier: an endpoint hinted for the inactive zone alone is outside the
// import's active tier; one hinted for real zones, or not hinted, is in it; a not-ready
// endpoint is left out.
func TestEndpointsOfReadsTheTier(t *testing.T) {
	no := false
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{labelSourceCluster: "euw1-a"}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.0.0.1"}, Hints: &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: inactiveZone}}}},
			{Addresses: []string{"10.0.0.2"}, Hints: &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "us-east-1a"}, {Name: "us-east-1b"}}}},
			{Addresses: []string{"10.0.0.3"}},
			{Addresses: []string{"10.0.0.4"}, Conditions: discoveryv1.EndpointConditions{Ready: &no}},
		},
	}
	var got []string
	for _, e := range endpointsOf(s) {
		got = append(got, fmt.Sprintf("%s/%s/%v", e.ClusterID, e.Address, e.Inactive))
	}
	if want := "euw1-a/10.0.0.1/true euw1-a/10.0.0.2/false euw1-a/10.0.0.3/false"; strings.Join(got, " ") != want {
		t.Fatalf("endpoints %v, want %s", got, want)
	}
}
