package cleanup

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestHeld(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	o := Options{Now: func() time.Time { return now }}
	str := func(s string) *string { return &s }
	secs := func(n int32) *int32 { return &n }
	at := func(d time.Duration) *metav1.MicroTime { t := metav1.NewMicroTime(now.Add(d)); return &t }
	tests := []struct {
		name string
		spec coordinationv1.LeaseSpec
		want bool
	}{
		{"released on a clean stop", coordinationv1.LeaseSpec{HolderIdentity: str(""), RenewTime: at(-time.Second), LeaseDurationSeconds: secs(15)}, false},
		{"no holder", coordinationv1.LeaseSpec{}, false},
		{"renewed within its duration", coordinationv1.LeaseSpec{HolderIdentity: str("pod-a"), RenewTime: at(-5 * time.Second), LeaseDurationSeconds: secs(15)}, true},
		{"expired: the holder was killed", coordinationv1.LeaseSpec{HolderIdentity: str("pod-a"), RenewTime: at(-16 * time.Second), LeaseDurationSeconds: secs(15)}, false},
		{"a holder without renew time counts as holding", coordinationv1.LeaseSpec{HolderIdentity: str("pod-a")}, true},
	}
	for _, tc := range tests {
		if got := o.held(&coordinationv1.Lease{Spec: tc.spec}); got != tc.want {
			t.Errorf("%s: held = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestResultString(t *testing.T) {
	got := Result{FinalizersRemoved: 2, ExportsDeleted: 1, ImportsDeleted: 3, ServicesDeleted: 3, SlicesDeleted: 4}.String()
	want := "removed the finalizer from 2 ServiceExports; deleted 1 ServiceExports made from the dynamo.nvidia.com/mcs-export label, 3 ServiceImports, 3 derived Services and 4 EndpointSlices"
	if got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
