package importer

import (
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TestHoldEnd: the hold's rule, every case — the refill and the deletion delay count from
// their own starts, and the later end holds; they never add up.
func TestHoldEnd(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		refill  time.Time
		delay   time.Duration
		wantEnd time.Time
		wantWhy holdReason
	}{
		{"neither: no hold", time.Time{}, 0, time.Time{}, holdNone},
		{"a refill alone", t0.Add(30 * time.Second), 0, t0.Add(30 * time.Second), holdRefill},
		{"a delay alone", time.Time{}, time.Minute, t0.Add(time.Minute), holdDelay},
		{"both, the refill ends later", t0.Add(2 * time.Minute), time.Minute, t0.Add(2 * time.Minute), holdRefill},
		{"both, the delay ends later: not refill then delay", t0.Add(30 * time.Second), time.Minute, t0.Add(time.Minute), holdDelay},
		{"both ending at once: the delay", t0.Add(time.Minute), time.Minute, t0.Add(time.Minute), holdDelay},
		{"a refill that ended before the cluster went missing", t0.Add(-time.Second), 0, t0.Add(-time.Second), holdRefill},
	} {
		t.Run(tc.name, func(t *testing.T) {
			end, why := holdEnd(t0, tc.refill, tc.delay)
			if !end.Equal(tc.wantEnd) || why != tc.wantWhy {
				t.Fatalf("holdEnd = %v %v, want %v %v", end, why, tc.wantEnd, tc.wantWhy)
			}
		})
	}
}

// TestHolds: the holds of imports, from a cluster found missing to its hold's end, with
// the refilling clusters counted once across imports.
func TestHolds(t *testing.T) {
	t0 := time.Now()
	pool, router := types.NamespacedName{Namespace: "dynamo", Name: "pool"}, types.NamespacedName{Namespace: "dynamo", Name: "router"}
	h := newHolds()
	refill := t0.Add(30 * time.Second)
	if !h.keep(pool, "b", t0, refill, 0) || !h.keep(router, "b", t0, refill, 0) || !h.keep(pool, "c", t0, time.Time{}, time.Minute) {
		t.Fatal("b (refill) and c (delay) not kept")
	}
	r, d, next := h.settle(pool, []string{"b", "c"}, t0)
	if !slices.Equal(r, []string{"b"}) || !slices.Equal(d, []string{"c"}) || next != 30*time.Second {
		t.Fatalf("pool: refill %v, delayed %v, next %s", r, d, next)
	}
	h.settle(router, []string{"b"}, t0)
	if n := h.refillClusters(); n != 1 {
		t.Fatalf("%d clusters held for the refill, want 1 (b, in two imports)", n)
	}
	// b returned (the refill no longer awaits it): both imports are reconciled now.
	if got := h.returned(func(string) time.Time { return time.Time{} }); len(got) != 2 {
		t.Fatalf("imports to reconcile after b returned: %v, want pool and router", got)
	}
	// The delay counts from when c was first found missing, not from each reconcile.
	later := t0.Add(61 * time.Second)
	if h.keep(pool, "c", later, time.Time{}, time.Minute) {
		t.Fatal("c kept past its delay")
	}
	if h.keep(pool, "b", later, time.Time{}, 0) {
		t.Fatal("b kept after the refill ended")
	}
	if r, d, next := h.settle(pool, nil, later); r != nil || d != nil || next != 0 {
		t.Fatalf("pool after the holds ended: %v %v %s", r, d, next)
	}
	h.settle(router, nil, later)
	if n := h.refillClusters(); n != 0 || len(h.byKey) != 0 {
		t.Fatalf("after every hold ended: %d refilling, %d imports", n, len(h.byKey))
	}
}
