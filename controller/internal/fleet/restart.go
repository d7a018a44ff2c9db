package fleet

import (
	"context"
	"fmt"
	"time"
)

// RestartReport is what a registry restart (or a replica's loss) cost the fleet.
type RestartReport struct {
	// ServedAgain: from the restart until every cluster's watch holds every cluster's
	// exports again (every cluster registered and sent its exports, and every watch
	// follows the registry again).
	ServedAgain float64 `json:"served_again_s"`
	// Without: the longest any cluster spent without some other cluster's endpoints of a
	// Service, neither in its watch's imports nor kept by the controller's hold after a
	// registry restart (ImportWatch.RefillUntil), sampled every restartSample; goal 0.
	Without float64 `json:"without_endpoints_s"`
	// ClustersWithout: how many clusters spent any sample without.
	ClustersWithout int `json:"clusters_without_endpoints"`
	// WatchBytes: the bytes of watch messages all clusters received until served again.
	WatchBytes int64 `json:"watch_bytes"`
	// Example names the first gap seen: which cluster lacked whose endpoints, and when.
	Example string `json:"example,omitempty"`
}

// restartSample is how often each cluster's view is checked during a restart.
const restartSample = 200 * time.Millisecond

// Restart measures a restart that begins now: it samples every cluster's view until each
// holds every cluster again, or fails after limit.
func (f *Fleet) Restart(ctx context.Context, limit time.Duration) (RestartReport, error) {
	start, bytes0 := time.Now(), f.codec.received.Load()
	without := make([]time.Duration, len(f.members))
	example := ""
	tick := time.NewTicker(restartSample)
	defer tick.Stop()
	// The first samples come before any watch noticed: wait for the fleet to be incomplete
	// or the first sample, whichever is later, then until it is complete again.
	for {
		select {
		case <-ctx.Done():
			return RestartReport{}, ctx.Err()
		case <-tick.C:
		}
		elapsed := time.Since(start)
		for i, m := range f.members {
			if gap := m.lacksOthers(); gap != "" {
				without[i] += restartSample
				if example == "" {
					example = fmt.Sprintf("%s lacked %s at %.1f s", m.id, gap, elapsed.Seconds())
				}
			}
		}
		if f.completeN.Load() == int64(f.cfg.Clusters*f.cfg.Services) && elapsed > 2*restartSample && f.allFollow(start) {
			r := RestartReport{ServedAgain: elapsed.Seconds(), WatchBytes: f.codec.received.Load() - bytes0, Example: example}
			for _, d := range without {
				if d > 0 {
					r.ClustersWithout++
				}
				r.Without = max(r.Without, d.Seconds())
			}
			return r, nil
		}
		if elapsed > limit {
			return RestartReport{}, fmt.Errorf("not served again after %s: %d of %d cluster views of a Service hold every cluster", limit, f.completeN.Load(), f.cfg.Clusters*f.cfg.Services)
		}
	}
}

// allFollow reports whether every cluster's watch has had a snapshot of a new epoch since t:
// a watch that did not notice the restart yet still shows the old registry's imports.
func (f *Fleet) allFollow(t time.Time) bool {
	for _, m := range f.members {
		if time.Unix(0, m.newEpoch.Load()).Before(t) {
			return false
		}
	}
	return true
}

// lacksOthers names a Service whose import in the cluster's view misses another cluster's
// part that the controller would not keep either, and that cluster; "" when none does.
func (m *member) lacksOthers() string {
	n := m.fleet.cfg.Clusters
	if int(m.completeN.Load()) == len(m.fleet.keys) {
		return ""
	}
	for _, k := range m.fleet.keys {
		cls := m.watch.Get(k).GetClusters()
		if len(cls) == n {
			continue
		}
		// Clusters are sorted by ID, and IDs are sim-0000...: walk both in order.
		j := 0
		for i, id := range m.fleet.ids {
			if j < len(cls) && cls[j].GetClusterId() == id {
				j++
				continue
			}
			// The view and the hold are read one after the other: a cluster whose
			// exports arrive in between is no longer awaited. During a refill a view only
			// gains clusters, so one still missing after its hold was read is a gap.
			if i != m.idx && m.watch.RefillUntil(id).IsZero() && !m.has(k, id) {
				return fmt.Sprintf("%s's part of %s", id, k.Name)
			}
		}
	}
	return ""
}

// clusterID names simulated cluster i.
func clusterID(i int) string { return fmt.Sprintf("sim-%04d", i) }
