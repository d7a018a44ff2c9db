package dynamodb

import (
	"testing"
	"time"
)

// TestReplicationLagBoundKeepsItsPeak: when the silence of a stall ends, the bound falls
// back only after lagPeakWindow, so the renewals queued behind the first heartbeat land
// before the clusters they renew would expire; a rising bound counts at once.
func TestReplicationLagBoundKeepsItsPeak(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	now := t0
	st := &Store{now: func() time.Time { return now }, replication: newReplication(ReplicationOptions{Region: "us-west-2", Replica: "a", Interval: 2 * time.Second})}
	p := &peer{region: "us-east-1", lastSeen: t0, rtt: 200 * time.Millisecond}
	st.replication.peers["us-east-1#b"] = p
	bound := func() time.Duration { return st.ReplicationLagBound()["us-east-1"] }

	if got := bound(); got != 200*time.Millisecond {
		t.Fatalf("steady: %s", got)
	}
	now = t0.Add(90 * time.Second) // a 90 s stall: silence beyond the interval adds up
	if got := bound(); got != 88*time.Second+200*time.Millisecond {
		t.Fatalf("stalled: %s", got)
	}
	p.lastSeen = now // the first heartbeat after the stall
	if got := bound(); got != 88*time.Second+200*time.Millisecond {
		t.Fatalf("just after the stall the bound fell to %s", got)
	}
	now = now.Add(lagPeakWindow + time.Second)
	p.lastSeen = now
	if got := bound(); got != 200*time.Millisecond {
		t.Fatalf("a window later: %s, want the measured 200ms", got)
	}
	p.rtt = 5 * time.Second
	if got := bound(); got != 5*time.Second {
		t.Fatalf("a rising bound: %s", got)
	}
}
