package lease

import (
	"testing"
	"time"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

func TestJudge(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const (
		active  = registryv1.LeaseState_LEASE_STATE_ACTIVE
		expired = registryv1.LeaseState_LEASE_STATE_EXPIRED
		held    = registryv1.LeaseState_LEASE_STATE_HELD_REPLICATION
	)
	// Renewed at t0 through region b for 30 s: nominal expiry t0+30s.
	renewedIn := func(region string) store.Cluster {
		return store.Cluster{ClusterID: "c1", LeaseDuration: 30 * time.Second, RenewTime: t0, RenewRegion: region}
	}
	lagging := func(lag time.Duration) Replication {
		return Replication{Region: "a", Hold: 2 * time.Minute, Lag: map[string]time.Duration{"b": lag}}
	}
	tests := []struct {
		name      string
		c         store.Cluster
		at        time.Duration // after t0
		r         Replication
		prev      registryv1.LeaseState // the verdict before; zero: none
		want      registryv1.LeaseState
		wantUntil time.Duration // after t0; -1: zero
	}{
		{"before expiry: active until expiry", renewedIn("b"), 29 * time.Second, lagging(time.Minute), 0, active, 30 * time.Second},
		{"expired exactly at expiry without lag", renewedIn("b"), 30 * time.Second, lagging(0), 0, expired, -1},
		{"renewed through this region: expired at expiry", renewedIn("a"), 31 * time.Second, lagging(time.Minute), 0, expired, -1},
		{"renewed through no region (memory store): expired", renewedIn(""), 31 * time.Second, lagging(time.Minute), 0, expired, -1},
		{"no hold: expired", renewedIn("b"), 31 * time.Second, Replication{Region: "a", Lag: map[string]time.Duration{"b": time.Minute}}, 0, expired, -1},
		{"region never heard: expired", renewedIn("c"), 31 * time.Second, lagging(time.Minute), 0, expired, -1},
		{"within the lag: held until expiry plus lag", renewedIn("b"), 40 * time.Second, lagging(25 * time.Second), 0, held, 55 * time.Second},
		{"at expiry plus lag: expired", renewedIn("b"), 55 * time.Second, lagging(25 * time.Second), 0, expired, -1},
		{"a stall longer than the hold: held until expiry plus hold", renewedIn("b"), 100 * time.Second, lagging(10 * time.Minute), 0, held, 150 * time.Second},
		{"past expiry plus hold: expired whatever the lag", renewedIn("b"), 150 * time.Second, lagging(10 * time.Minute), 0, expired, -1},
		// A steady lag: a held lease stays held after a renewal that leaves it less time
		// than the lag, and turns active once a renewal leaves it more.
		{"held, renewed, less time left than the lag: held", renewedIn("b"), 5 * time.Second, lagging(50 * time.Second), held, held, 80 * time.Second},
		{"held, renewed, more time left than the lag: active", renewedIn("b"), 5 * time.Second, lagging(4 * time.Second), held, active, 30 * time.Second},
		{"active, less time left than the lag: active", renewedIn("b"), 5 * time.Second, lagging(50 * time.Second), active, active, 30 * time.Second},
		{"held, renewed through this region: active", renewedIn("a"), 5 * time.Second, lagging(50 * time.Second), held, active, 30 * time.Second},
		{"held, renewed, no hold: active", renewedIn("b"), 5 * time.Second, Replication{Region: "a", Lag: map[string]time.Duration{"b": time.Minute}}, held, active, 30 * time.Second},
		{"held, renewed, a lag past the hold: held until expiry plus hold", renewedIn("b"), 5 * time.Second, lagging(10 * time.Minute), held, held, 150 * time.Second},
		{"held, then expired: held within the lag as before", renewedIn("b"), 40 * time.Second, lagging(25 * time.Second), held, held, 55 * time.Second},
		{"a typical lag holds for that lag", renewedIn("b"), 31 * time.Second, lagging(1500 * time.Millisecond), 0, held, 31500 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := Judge(tc.c, t0.Add(tc.at), tc.r, tc.prev)
			if v.State != tc.want {
				t.Fatalf("state = %v, want %v", v.State, tc.want)
			}
			wantUntil := time.Time{}
			if tc.wantUntil >= 0 {
				wantUntil = t0.Add(tc.wantUntil)
			}
			if !v.Until.Equal(wantUntil) {
				t.Fatalf("until = %v, want %v", v.Until, wantUntil)
			}
			if v.Participates() != (tc.want != expired) {
				t.Fatalf("participates = %v in state %v", v.Participates(), v.State)
			}
			if tc.want == held && (v.Region != tc.c.RenewRegion || v.Lag != tc.r.Lag[tc.c.RenewRegion]) {
				t.Fatalf("held by %s/%v, want %s/%v", v.Region, v.Lag, tc.c.RenewRegion, tc.r.Lag[tc.c.RenewRegion])
			}
			// MayHold: where it says no, the verdict before changes nothing (a write's check
			// then reads no previous state).
			if !tc.r.MayHold(tc.c) {
				for _, prev := range []registryv1.LeaseState{0, active, held, expired} {
					if w := Judge(tc.c, t0.Add(tc.at), tc.r, prev); w != v {
						t.Fatalf("MayHold is false, yet the verdict after %v is %+v, not %+v", prev, w, v)
					}
				}
			}
		})
	}
}
