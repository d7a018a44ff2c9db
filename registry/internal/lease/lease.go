// Package lease judges a cluster's lease as one registry replica sees it: active, held
// because replication from the region of its last renewal lags, or expired.
//
// A renewal written through region R reaches another region's replica only after
// replication. Judged by the renewal times alone, a stall between two healthy regions
// would expire every cluster of the other region. So a lease renewed elsewhere counts
// until its expiry plus the lag measured from R — bounded by the hold — and a cluster that
// truly stopped still leaves: its own region expires it on time, and every other region
// once the lag is caught up or the hold has passed.
package lease

import (
	"time"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// Replication is what the judging replica knows of replication between regions.
type Replication struct {
	// Region is the judging replica's region. A lease renewed through it (or through no
	// region, the memory store) is judged by its expiry alone.
	Region string
	// Hold bounds how long past its expiry a lease renewed through another region is held;
	// 0 holds none.
	Hold time.Duration
	// Lag is the replication lag measured from each other region. A region that is not in
	// it (no heartbeat heard) holds nothing.
	Lag map[string]time.Duration
}

// Verdict is the judgement of one lease at one time.
type Verdict struct {
	State registryv1.LeaseState
	// Until is when the verdict changes unless a renewal arrives or the lag changes: the
	// expiry of an active lease; the end of the hold of a held one; zero for an expired one.
	Until time.Time
	// Region and Lag: what holds a held lease (the region of its last renewal and the lag
	// measured from it).
	Region string
	Lag    time.Duration
}

// Participates reports whether the cluster's exports take part in imports.
func (v Verdict) Participates() bool {
	return v.State == registryv1.LeaseState_LEASE_STATE_ACTIVE || v.State == registryv1.LeaseState_LEASE_STATE_HELD_REPLICATION
}

// Judge returns the verdict on c's lease at now; prev is the verdict before (the zero
// state when there was none).
//
// A held lease stays held while it has less time left than the lag takes, though a renewal
// arrived: under a steady lag longer than the lease minus the renewal interval, each
// renewal lands already nearly expired, and judged by its expiry alone the lease would
// turn active at every renewal and held a few seconds later — a flapping clusterset for
// a steady cause. It turns active once renewals land with more time left than the lag.
func Judge(c store.Cluster, now time.Time, r Replication, prev registryv1.LeaseState) Verdict {
	exp := c.ExpireTime()
	lag, holds := r.holdingLag(c)
	if now.Before(exp) {
		if holds && prev == registryv1.LeaseState_LEASE_STATE_HELD_REPLICATION && exp.Sub(now) < lag {
			return Verdict{State: registryv1.LeaseState_LEASE_STATE_HELD_REPLICATION, Until: exp.Add(min(lag, r.Hold)), Region: c.RenewRegion, Lag: lag}
		}
		return Verdict{State: registryv1.LeaseState_LEASE_STATE_ACTIVE, Until: exp}
	}
	expired := Verdict{State: registryv1.LeaseState_LEASE_STATE_EXPIRED}
	if !holds {
		return expired
	}
	until := exp.Add(min(lag, r.Hold))
	if !now.Before(until) {
		return expired
	}
	return Verdict{State: registryv1.LeaseState_LEASE_STATE_HELD_REPLICATION, Until: until, Region: c.RenewRegion, Lag: lag}
}

// MayHold reports whether c's lease may be held while replication lags (its verdict then
// depends on the verdict before); otherwise Judge needs no previous state.
func (r Replication) MayHold(c store.Cluster) bool {
	_, ok := r.holdingLag(c)
	return ok
}

// holdingLag returns the lag measured from the region of c's last renewal, and whether a
// lease renewed there may be held: another region, heard from, with a hold.
func (r Replication) holdingLag(c store.Cluster) (time.Duration, bool) {
	if r.Hold <= 0 || c.RenewRegion == "" || c.RenewRegion == r.Region {
		return 0, false
	}
	lag, ok := r.Lag[c.RenewRegion]
	return lag, ok
}
