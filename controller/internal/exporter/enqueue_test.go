package exporter

import (
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// queue records how requests are queued.
type queue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	now   []reconcile.Request
	after map[reconcile.Request]time.Duration
}

func (q *queue) Add(r reconcile.Request) { q.now = append(q.now, r) }
func (q *queue) AddAfter(r reconcile.Request, d time.Duration) {
	q.after[r] = d
}

// TestEnqueueSliceLeadingEdge: a slice change of a Service not written within the batch
// period is reconciled at once; one within the period waits for the period's end.
func TestEnqueueSliceLeadingEdge(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	quiet := types.NamespacedName{Namespace: "dynamo", Name: "quiet"}
	busy := types.NamespacedName{Namespace: "dynamo", Name: "busy"}
	fresh := types.NamespacedName{Namespace: "dynamo", Name: "fresh"}
	r := &Reconciler{BatchPeriod: 500 * time.Millisecond, Now: func() time.Time { return now },
		sent: map[types.NamespacedName]*sent{quiet: {at: now.Add(-time.Second)}, busy: {at: now.Add(-200 * time.Millisecond)}}}
	sliceOf := func(name string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "dynamo", Name: name + "-x",
			Labels: map[string]string{discoveryv1.LabelServiceName: name}}}
	}
	for _, tc := range []struct {
		key       types.NamespacedName
		wantNow   bool
		wantAfter time.Duration
	}{
		{quiet, true, 0},
		{fresh, true, 0},
		{busy, false, 300 * time.Millisecond},
	} {
		q := &queue{after: map[reconcile.Request]time.Duration{}}
		r.enqueueSlice(sliceOf(tc.key.Name), q)
		req := reconcile.Request{NamespacedName: tc.key}
		if gotNow := len(q.now) == 1 && q.now[0] == req; gotNow != tc.wantNow || q.after[req] != tc.wantAfter {
			t.Errorf("%s: queued now %v, after %s; want now %v, after %s", tc.key.Name, gotNow, q.after[req], tc.wantNow, tc.wantAfter)
		}
	}
}
