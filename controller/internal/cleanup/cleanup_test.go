package cleanup

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
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

func TestHolderPod(t *testing.T) {
	o := Options{ControllerDeployment: "mcs-controller"}
	tests := []struct {
		holder, want string
		ok           bool
	}{
		{"mcs-controller-86c5478bbd-v4pj8_3b663310-9691-4d06-86dd-0b58310a3723", "mcs-controller-86c5478bbd-v4pj8", true},
		{"mcs-controller-5d4f8-x2k9q_id", "mcs-controller-5d4f8-x2k9q", true},
		{"mcs-controller-7c9b6d5f4-hz2lw_id", "mcs-controller-7c9b6d5f4-hz2lw", true},
		{"mcs-controller-86c5478bbd-v4pj8", "", false},         // no identity suffix: not controller-runtime's form
		{"vm_c53aa357-a31c-4743-8150-623a2bbde9e5", "", false}, // a process outside the cluster
		{"other-86c5478bbd-v4pj8_id", "", false},               // another Deployment's pod
		{"mcs-controller-cleanup-rbfm2_id", "", false},         // a Job's pod: no template hash
		{"mcs-controller-86c5478bbd-v4pj_id", "", false},       // suffix not 5 characters
		{"mcs-controller-86c5478BBD-v4pj8_id", "", false},      // not a pod name
		{"mcs-controller--v4pj8_id", "", false},
		{"mcs-controller-bcdfghjklmnpqrstvwxz2456789bcdfghjklmnpqrs-v4pj8_id", "", false}, // 63 characters: maybe cut
		{"", "", false},
	}
	for _, tc := range tests {
		got, ok := o.holderPod(tc.holder)
		if got != tc.want || ok != tc.ok {
			t.Errorf("holderPod(%q) = %q, %v; want %q, %v", tc.holder, got, ok, tc.want, tc.ok)
		}
	}
	if _, ok := (Options{}).holderPod("mcs-controller-86c5478bbd-v4pj8_id"); ok {
		t.Error("without --controller-deployment a holder is never taken for a pod")
	}
}

func TestHolderGone(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	pod := func(name string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "mcs-system", Name: name}, Status: corev1.PodStatus{Phase: phase}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		pod("mcs-controller-86c5478bbd-rvns4", corev1.PodRunning),
		pod("mcs-controller-86c5478bbd-dbnc2", corev1.PodSucceeded),
		pod("mcs-controller-86c5478bbd-fxll2", corev1.PodFailed),
		pod("mcs-controller-86c5478bbd-rvns5", corev1.PodRunning),
	).Build()
	o := Options{ControllerDeployment: "mcs-controller"}
	tests := []struct {
		holder, namespace string
		want              bool
	}{
		{"mcs-controller-86c5478bbd-rvns4_id", "mcs-system", false},
		{"mcs-controller-86c5478bbd-dbnc2_id", "mcs-system", true},
		{"mcs-controller-86c5478bbd-fxll2_id", "mcs-system", true},
		{"mcs-controller-86c5478bbd-gxnc2_id", "mcs-system", true},
		{"mcs-controller-86c5478bbd-rvns5_id", "other", true}, // the Lease's namespace is where its holder ran
		{"vm_id", "mcs-system", false},
	}
	for _, tc := range tests {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: tc.namespace, Name: "lease"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: &tc.holder}}
		if got := o.holderGone(context.Background(), c, l); got != tc.want {
			t.Errorf("holderGone(%s/%s) = %v, want %v", tc.namespace, tc.holder, got, tc.want)
		}
	}
}
