package identity

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMostCommonRegion(t *testing.T) {
	node := func(region string) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}}}
		if region != "" {
			n.Labels[RegionLabel] = region
		}
		return n
	}
	tests := []struct {
		regions []string
		want    string
	}{
		{nil, ""},
		{[]string{"", ""}, ""},
		{[]string{"us-east-1"}, "us-east-1"},
		{[]string{"us-west-2", "us-east-1", "us-west-2"}, "us-west-2"},
		{[]string{"us-west-2", "us-east-1"}, "us-east-1"}, // a tie: the first by name
		{[]string{"b", "a", "", "", ""}, "a"},
	}
	for _, tc := range tests {
		var nodes []corev1.Node
		for _, r := range tc.regions {
			nodes = append(nodes, node(r))
		}
		if got := MostCommonRegion(nodes); got != tc.want {
			t.Errorf("MostCommonRegion(%v) = %q, want %q", tc.regions, got, tc.want)
		}
	}
}
