package importer

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// The hold: what this cluster imported from a source cluster that an import no longer
// lists — its EndpointSlices, and the ServiceImport and derived Service when the whole
// import went — is kept until that cluster is in the import again or the hold ends,
// whatever made it missing. One rule, one condition (EndpointsHeld, naming the held
// clusters, which status.clusters lists too), one requeue at the earliest end:
//   - the registry refills (its epoch changed, or it started empty shortly before): the
//     watch's RefillUntil for that cluster, which ends once the cluster sent its exports
//     again (it appears in any import) and at most one lease after the old registry went;
//   - --import-deletion-delay: that long after the importer first found it missing.
//
// The two count from their own starts and the hold ends at the later end: the timers
// never add up. The holds live in the leader's memory: a new leader finds the missing
// clusters again, with its own watch's refill and a deletion delay counted anew.

// holdReason is why a source cluster's objects are kept.
type holdReason int

const (
	holdNone   holdReason = iota
	holdDelay             // --import-deletion-delay
	holdRefill            // the registry refills
)

// holdEnd is the rule: when the hold of a source cluster missing from an import since
// missingSince ends, and why it lasts until then. refillUntil is the watch's RefillUntil
// for the cluster (zero: not awaited); delay is --import-deletion-delay.
func holdEnd(missingSince, refillUntil time.Time, delay time.Duration) (time.Time, holdReason) {
	end, why := time.Time{}, holdNone
	if delay > 0 {
		end, why = missingSince.Add(delay), holdDelay
	}
	if refillUntil.After(end) {
		end, why = refillUntil, holdRefill
	}
	return end, why
}

// hold is one source cluster missing from one import.
type hold struct {
	since time.Time
	end   time.Time
	why   holdReason
}

// holds are the importer's holds, by import and source cluster.
type holds struct {
	mu    sync.Mutex
	byKey map[types.NamespacedName]map[string]*hold
	// refilling counts, by cluster, the imports that keep it while the registry refills
	// (mcs_controller_registry_restart_held_clusters: the clusters with any).
	refilling map[string]int
}

func newHolds() *holds {
	return &holds{byKey: map[types.NamespacedName]map[string]*hold{}, refilling: map[string]int{}}
}

// keep reports whether the objects of cluster, missing from the import key, are kept at
// now; it notes when the cluster was first found missing.
func (h *holds) keep(key types.NamespacedName, cluster string, now, refillUntil time.Time, delay time.Duration) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.byKey[key]
	if m == nil {
		m = map[string]*hold{}
		h.byKey[key] = m
	}
	c := m[cluster]
	if c == nil {
		c = &hold{since: now}
		m[cluster] = c
	}
	end, why := holdEnd(c.since, refillUntil, delay)
	if !now.Before(end) {
		why = holdNone
	}
	h.setReason(cluster, c, why)
	c.end = end
	return why != holdNone
}

// setReason records why c is held, keeping the count of refill holds per cluster.
func (h *holds) setReason(cluster string, c *hold, why holdReason) {
	if (c.why == holdRefill) != (why == holdRefill) {
		if why == holdRefill {
			h.refilling[cluster]++
		} else if h.refilling[cluster]--; h.refilling[cluster] <= 0 {
			delete(h.refilling, cluster)
		}
	}
	c.why = why
}

// settle forgets the clusters of key that are not kept (back in the import, or their
// objects gone), and returns the kept ones by reason, sorted, and how soon the earliest
// hold ends (0: none kept).
func (h *holds) settle(key types.NamespacedName, kept []string, now time.Time) (refill, delayed []string, next time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for cluster, c := range h.byKey[key] {
		if !slices.Contains(kept, cluster) || c.why == holdNone {
			h.setReason(cluster, c, holdNone)
			delete(h.byKey[key], cluster)
			continue
		}
		if c.why == holdRefill {
			refill = append(refill, cluster)
		} else {
			delayed = append(delayed, cluster)
		}
		if d := c.end.Sub(now); next == 0 || d < next {
			next = max(d, time.Millisecond)
		}
	}
	if len(h.byKey[key]) == 0 {
		delete(h.byKey, key)
	}
	slices.Sort(refill)
	slices.Sort(delayed)
	return refill, delayed, next
}

// refillClusters is how many source clusters any import keeps while the registry refills.
func (h *holds) refillClusters() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.refilling)
}

// returned returns the imports that keep a cluster for the registry's refill that the
// refill no longer awaits (it sent its exports again): they are reconciled now, not when
// their hold would have ended.
func (h *holds) returned(refillUntil func(cluster string) time.Time) []types.NamespacedName {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []types.NamespacedName
	for key, m := range h.byKey {
		for cluster, c := range m {
			if c.why == holdRefill && refillUntil(cluster).IsZero() {
				out = append(out, key)
				break
			}
		}
	}
	return out
}

// kept are the source clusters an import keeps though it no longer lists them, by reason,
// and how soon the earliest of their holds ends (0: none).
type kept struct {
	refill, delayed []string
	next            time.Duration
}

func (k kept) clusters() []string {
	out := append(slices.Clone(k.refill), k.delayed...)
	slices.Sort(out)
	return out
}

// keep is the hold's verdict on one missing source cluster of an import.
func (r *Reconciler) keep(key types.NamespacedName, cluster string, now time.Time) bool {
	return r.holds.keep(key, cluster, now, r.Imports.RefillUntil(cluster), r.DeletionDelay)
}

// settleHolds records which missing clusters an import kept, and reports them.
func (r *Reconciler) settleHolds(key types.NamespacedName, clusters []string, now time.Time) kept {
	var k kept
	k.refill, k.delayed, k.next = r.holds.settle(key, clusters, now)
	r.setHeld("registry_restart", key, len(k.refill) > 0)
	r.setHeld("deletion_delay", key, len(k.refill) == 0 && len(k.delayed) > 0)
	if f := r.Metrics.HeldClusters; f != nil {
		f(r.holds.refillClusters())
	}
	return k
}
