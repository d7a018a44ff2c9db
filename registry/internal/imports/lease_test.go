package imports

import (
	"fmt"
	"sync"
	"testing"
	"time"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// lagMeter is a settable replication lag, as the DynamoDB store's heartbeats measure it.
type lagMeter struct {
	mu  sync.Mutex
	lag map[string]time.Duration
}

func (m *lagMeter) set(region string, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lag = map[string]time.Duration{region: d}
}

func (m *lagMeter) get() map[string]time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lag
}

// TestHeldLease: a lease renewed through another region is held, and the import says so,
// while replication from that region lags; it expires once the lag is caught up, and at
// the latest after the hold.
func TestHeldLease(t *testing.T) {
	tests := []struct {
		name string
		hold time.Duration
		// lag while held, then the lag set once the hold was seen (0: caught up).
		lag, after time.Duration
	}{
		{"the lag caught up expires it", time.Minute, time.Minute, 0},
		{"a stall longer than the hold expires it after the hold", 800 * time.Millisecond, time.Hour, time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 0)
			m := &lagMeter{}
			m.set("east", tc.lag)
			f.cache = New(Options{Store: f.st, Leases: LeaseOptions{Region: "west", Hold: tc.hold, Lag: m.get}})
			go func() { _ = f.cache.Run(f.ctx) }()
			f.clk = &clock{t: time.Now()}
			if _, err := f.cache.List(f.ctx, "prod", Filter{}); err != nil {
				t.Fatal(err)
			}
			f.register("a", time.Hour)
			now := time.Now()
			if _, err := f.st.RegisterCluster(f.ctx, store.Cluster{Clusterset: "prod", ClusterID: "b", LeaseDuration: 300 * time.Millisecond,
				RegisterTime: now, RenewTime: now, RenewRegion: "east"}); err != nil {
				t.Fatal(err)
			}
			if err := f.cache.Apply(f.ctx, store.Change{Kind: store.ChangeCluster, Clusterset: "prod", ClusterID: "b"}); err != nil {
				t.Fatal(err)
			}
			f.put("a", "svc", 80)
			f.put("b", "svc", 80)
			w, _ := f.cache.Watch(f.ctx, "prod", Filter{}, 0, "", 0)
			if s := f.next(w); len(s.GetUpserts()[0].GetClusters()) != 2 {
				t.Fatalf("snapshot clusters = %d, want 2", len(s.GetUpserts()[0].GetClusters()))
			}
			// b's lease expires: held, not dropped, and the import names the region.
			got := f.next(w).GetUpserts()[0].GetClusters()
			if len(got) != 2 || got[1].GetLeaseState() != registryv1.LeaseState_LEASE_STATE_HELD_REPLICATION || got[1].GetHeldRegion() != "east" {
				t.Fatalf("after b's lease expired: %v, want a, and b held by east", got)
			}
			if inv := f.cache.Inventory(); len(inv) != 1 || inv[0].HeldClusters != 1 || inv[0].ActiveClusters != 1 {
				t.Fatalf("inventory = %+v, want one active and one held cluster", inv)
			}
			if v := f.cache.Judge(mustCluster(t, f, "b")); v.State != registryv1.LeaseState_LEASE_STATE_HELD_REPLICATION || v.Lag != tc.lag {
				t.Fatalf("verdict = %+v", v)
			}
			m.set("east", tc.after)
			got = f.next(w).GetUpserts()[0].GetClusters()
			if len(got) != 1 || got[0].GetClusterId() != "a" {
				t.Fatalf("after the hold ended: %v, want only a", got)
			}
		})
	}
}

func mustCluster(t *testing.T, f *fixture, id string) store.Cluster {
	t.Helper()
	cl, err := f.st.GetCluster(f.ctx, store.ClusterKey{Clusterset: "prod", ClusterID: id})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// TestSteadyLagSteadyState: under a steady lag longer than the lease minus the renewal
// interval, every renewal of a cluster lands nearly expired. Its lease is held once and
// stays held across the renewals (it does not turn active at each renewal and held again
// a moment later), and turns active once when renewals land fresh again.
func TestSteadyLagSteadyState(t *testing.T) {
	f := newFixture(t, 0)
	m := &lagMeter{}
	m.set("east", 500*time.Millisecond)
	f.cache = New(Options{Store: f.st, Leases: LeaseOptions{Region: "west", Hold: time.Minute, Lag: m.get}})
	go func() { _ = f.cache.Run(f.ctx) }()
	if _, err := f.cache.List(f.ctx, "prod", Filter{}); err != nil {
		t.Fatal(err)
	}
	f.register("a", time.Hour)
	// renew writes b's renewal as replication delivers it: age old.
	renew := func(age time.Duration) {
		t.Helper()
		now := time.Now()
		if _, err := f.st.RegisterCluster(f.ctx, store.Cluster{Clusterset: "prod", ClusterID: "b", LeaseDuration: 300 * time.Millisecond,
			RegisterTime: now, RenewTime: now.Add(-age), RenewRegion: "east"}); err != nil {
			t.Fatal(err)
		}
		if err := f.cache.Apply(f.ctx, store.Change{Kind: store.ChangeCluster, Clusterset: "prod", ClusterID: "b"}); err != nil {
			t.Fatal(err)
		}
	}
	renew(0)
	f.put("b", "svc", 80)
	// A watcher keeps the clusterset loaded.
	if _, err := f.cache.Watch(f.ctx, "prod", Filter{}, 0, "", 0); err != nil {
		t.Fatal(err)
	}
	// held records each change of the held count, sampled every 5 ms.
	var changes []int
	last := -1
	sample := func(d time.Duration, every time.Duration, age time.Duration) {
		end, next := time.Now().Add(d), time.Now()
		for time.Now().Before(end) {
			if !time.Now().Before(next) {
				renew(age)
				next = next.Add(every)
			}
			inv := f.cache.Inventory()
			if len(inv) == 1 && inv[0].HeldClusters != last {
				last = inv[0].HeldClusters
				changes = append(changes, last)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// Renewals every 100 ms that land 250 ms old, 50 ms before they expire.
	sample(1500*time.Millisecond, 100*time.Millisecond, 250*time.Millisecond)
	if fmt.Sprint(changes) != "[0 1]" {
		t.Fatalf("held clusters under a steady lag changed %v, want [0 1]: held once, and kept held", changes)
	}
	// Replication catches up: renewals land fresh.
	m.set("east", 10*time.Millisecond)
	sample(500*time.Millisecond, 100*time.Millisecond, 0)
	if fmt.Sprint(changes) != "[0 1 0]" {
		t.Fatalf("held clusters after the lag ended changed %v, want [0 1 0]", changes)
	}
}
