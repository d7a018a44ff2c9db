package integration

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// regionSet is two regions replicated 2 s late as a Global Table, a registry in each, and
// member clusters whose controllers talk to one region's registry each, every cluster
// exporting dynamo/relay from 10.<i+1>.0.1.
type regionSet struct {
	repl   *harness.Replicator
	regs   [2]*harness.Registry
	ids    []string
	cls    []*harness.Cluster
	ctls   []*harness.Controller
	region []string // each cluster's registry region
}

// startRegionSet starts the clusters ids; home[i] is the region (0: us-east-1, 1:
// us-west-2) whose registry cluster i's controller uses.
func startRegionSet(t *testing.T, ctx context.Context, ids []string, home []int, regFlags, ctlFlags []string) *regionSet {
	t.Helper()
	d1, d2, table, repl := twoRegions(t, ctx)
	rs := &regionSet{repl: repl, ids: ids}
	rs.regs[0], rs.regs[1] = dynamoRegistry(t, d1, table, regFlags...), dynamoRegistry(t, d2, table, regFlags...)
	regions := []string{d1.Region, d2.Region}
	rs.cls = harness.StartClusters(t, harness.ClusterOptions{Names: ids})
	for i, c := range rs.cls {
		createNamespaces(t, ctx, c.Client, "dynamo")
		args := append(controllerArgs(rs.regs[home[i]], ids[i], ctlFlags...), "--region="+regions[home[i]])
		rs.ctls = append(rs.ctls, c.StartController(t, "mcs-controller/"+ids[i], args...))
		rs.region = append(rs.region, regions[home[i]])
		mustCreate(t, c, service("dynamo", "relay", 80), serviceExport("dynamo", "relay"), slice("dynamo", "relay", "relay-"+ids[i], fmt.Sprintf("10.%d.0.1", i+1)))
	}
	return rs
}

// relayImport is the import of dynamo/relay from the given clusters (indexes into ids).
func (rs *regionSet) relayImport(from ...int) string {
	var ids, eps []string
	for _, i := range from {
		ids = append(ids, rs.ids[i])
	}
	sort.Strings(ids)
	for _, id := range ids {
		for i := range rs.ids {
			if rs.ids[i] == id {
				eps = append(eps, fmt.Sprintf("%s:10.%d.0.1:true", id, i+1))
			}
		}
	}
	return fmt.Sprintf("ClusterSetIP [http/TCP/80] clusters=[%s] ips svc:true [%s]", strings.Join(ids, " "), strings.Join(eps, " "))
}

// outages reports, for each cluster's monitor, the time it was without the endpoints of
// the clusters homed in the other region.
func (rs *regionSet) outages(t *testing.T, monitors []*harness.EndpointsMonitor) []time.Duration {
	t.Helper()
	out := make([]time.Duration, len(monitors))
	for i, m := range monitors {
		if err := m.Err(); err != nil {
			t.Fatalf("%s: %v", rs.ids[i], err)
		}
		for _, d := range m.Outage() {
			out[i] += d
		}
	}
	return out
}

// TestReplicationStallCostsNoEndpoints: use1-a's controller uses region A's registry and
// usw2-a's region B's, with the defaults (lease 30 s, renewal every 10 s, hold 2 min). A
// 90 s replication stall, and 90 s of a 25 s replication lag, cost neither cluster a
// moment without the other's endpoints. Before the hold, the stall cost 68 s each way and
// the lag 38 s. While the registry holds a cluster, its region's metric, ListClusters,
// mcs-admin describe and the importing ServiceImport's ReplicationHeld condition say so.
// The stall and the lag run side by side, each on a region set of its own: both mostly
// wait out their 90 s.
func TestReplicationStallCostsNoEndpoints(t *testing.T) {
	t.Run("Stall", func(t *testing.T) {
		t.Parallel()
		replicationStall(t)
	})
	t.Run("Lag", func(t *testing.T) {
		t.Parallel()
		replicationLag(t)
	})
}

// startRelayPair starts use1-a on region A's registry and usw2-a on region B's, with the
// defaults, each importing the other's dynamo/relay, and monitors each cluster's imported
// endpoints of the other.
func startRelayPair(t *testing.T, ctx context.Context) (*regionSet, []*harness.EndpointsMonitor) {
	t.Helper()
	rs := startRegionSet(t, ctx, []string{"use1-a", "usw2-a"}, []int{0, 1}, nil, nil)
	both := rs.relayImport(0, 1)
	for _, c := range rs.cls {
		waitImport(t, c, "dynamo", "relay", both)
	}
	return rs, []*harness.EndpointsMonitor{
		rs.cls[0].MonitorImportedEndpoints(t, "dynamo", "relay", rs.ids[1]),
		rs.cls[1].MonitorImportedEndpoints(t, "dynamo", "relay", rs.ids[0]),
	}
}

// waitNoneHeld waits until each cluster's import holds no cluster.
func (rs *regionSet) waitNoneHeld(t *testing.T, what string) {
	t.Helper()
	for _, c := range rs.cls {
		harness.Eventually(t, c.Name+": ReplicationHeld=False"+what, 30*time.Second, func() string {
			if got := importCondition(t, c, "dynamo", "relay", "ReplicationHeld"); got != "ReplicationHeld=False NoneHeld" {
				return got
			}
			return ""
		})
	}
}

// noOutage fails the test for any time a cluster was without the other's endpoints, or
// any reconciler error of its controller.
func (rs *regionSet) noOutage(t *testing.T, monitors []*harness.EndpointsMonitor, what string) []time.Duration {
	t.Helper()
	out := rs.outages(t, monitors)
	for i, d := range out {
		if d > 0 {
			t.Errorf("%s was without the other region's endpoints for %s during %s; want 0 s", rs.ids[i], d.Round(time.Millisecond), what)
		}
	}
	for i, ctl := range rs.ctls {
		if n := strings.Count(ctl.Output(), "Reconciler error"); n > 0 {
			t.Errorf("%s: %d reconciler errors:\n%s", rs.ids[i], n, grepLines(ctl.Output(), "Reconciler error"))
		}
	}
	return out
}

// replicationStall: a 90 s stall. Past the lease of the last replicated renewal, each
// region holds the other's cluster, says so, and lets go when replication resumes; no
// lease expires.
func replicationStall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rs, monitors := startRelayPair(t, ctx)
	rs.repl.Pause()
	stalled := time.Now()
	for i, c := range rs.cls {
		other := 1 - i
		want := "ReplicationHeld=True ReplicationLagging"
		harness.Eventually(t, c.Name+": "+want, 80*time.Second, func() string {
			if got := importCondition(t, c, "dynamo", "relay", "ReplicationHeld"); got != want {
				return got
			}
			return ""
		})
		if msg := importConditionMessage(t, c, "dynamo", "relay", "ReplicationHeld"); !strings.Contains(msg, rs.ids[other]+" (renewed through region "+rs.region[other]+")") {
			t.Errorf("%s: ReplicationHeld message %q does not name %s and %s", c.Name, msg, rs.ids[other], rs.region[other])
		}
	}
	held := time.Since(stalled)
	for i, reg := range rs.regs {
		if !strings.Contains(harness.Scrape(t, "http://"+reg.AdminAddr+"/metrics"), `mcs_registry_clusters{clusterset="prod",state="held_replication"} 1`) {
			t.Errorf("region %d: mcs_registry_clusters does not count the held cluster", i)
		}
		_, body := get(t, "http://"+reg.RESTAddr+"/v1/clustersets/prod/clusters")
		if !strings.Contains(body, `"clusterId":"`+rs.ids[1-i]+`"`) || !strings.Contains(body, "LEASE_STATE_HELD_REPLICATION") || !strings.Contains(body, `"replicationLag"`) {
			t.Errorf("region %d: ListClusters does not show %s held: %s", i, rs.ids[1-i], body)
		}
	}
	out, err := execAdminRegistry(t, "--registry-rest-url=http://"+rs.regs[1].RESTAddr, "describe", "--clusterset-id=prod")
	if err != nil || !strings.Contains(out, "REPLICATION (lag by which the registry replica in us-west-2 judges leases)") ||
		!strings.Contains(out, "LEASE_STATE_HELD_REPLICATION") || !strings.Contains(out, "us-east-1") {
		t.Errorf("describe in region B during the stall: %v\n%s", err, out)
	}
	t.Logf("describe in region B %.0f s into the stall:\n%s", time.Since(stalled).Seconds(), out)
	time.Sleep(90*time.Second - time.Since(stalled))
	rs.repl.Resume()
	rs.waitNoneHeld(t, "")
	for i, reg := range rs.regs {
		if n := leaseTransitions(reg.Output(), rs.ids[1-i]); n["LEASE_STATE_EXPIRED"] > 0 {
			t.Errorf("region %d: %s's lease expired around the stall (%v): the hold must keep a healthy cluster", i, rs.ids[1-i], n)
		}
	}
	stall := rs.noOutage(t, monitors, "the stall")
	t.Logf("FIGURE 90 s replication stall: use1-a without usw2-a's endpoints %.1f s, usw2-a without use1-a's %.1f s (held from %.0f s into the stall; before the hold: 68.4 s and 68.9 s)",
		stall[0].Seconds(), stall[1].Seconds(), held.Seconds())
}

// replicationLag: 90 s of a 25 s lag, more than the lease minus the renewal interval. A
// steady lag is a steady state: each region holds the other's cluster once, through every
// renewal that lands nearly expired, and lets go once when renewals land fresh.
func replicationLag(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rs, monitors := startRelayPair(t, ctx)
	logged := [2]int{len(rs.regs[0].Output()), len(rs.regs[1].Output())}
	rs.repl.SetDelay(25 * time.Second)
	time.Sleep(90 * time.Second)
	rs.repl.SetDelay(2 * time.Second)
	// What was read in the last 25 s still arrives 25 s late.
	time.Sleep(30 * time.Second)
	both := rs.relayImport(0, 1)
	for _, c := range rs.cls {
		waitImport(t, c, "dynamo", "relay", both)
	}
	rs.waitNoneHeld(t, " after the lag")
	for i, reg := range rs.regs {
		lagged := leaseTransitions(reg.Output()[logged[i]:], rs.ids[1-i])
		t.Logf("FIGURE region %d's lease transitions of %s during the lag: %v", i, rs.ids[1-i], lagged)
		if lagged["LEASE_STATE_HELD_REPLICATION"] > 1 || lagged["LEASE_STATE_ACTIVE"] > 1 || lagged["LEASE_STATE_EXPIRED"] > 0 {
			t.Errorf("region %d: %s's lease changed state %v under a steady lag; want at most one transition each way", i, rs.ids[1-i], lagged)
		}
	}
	lag := rs.noOutage(t, monitors, "the lag")
	t.Logf("FIGURE 90 s of a 25 s replication lag: use1-a without usw2-a's endpoints %.1f s, usw2-a without use1-a's %.1f s (before the hold: 38 s each)",
		lag[0].Seconds(), lag[1].Seconds())
}

// leaseTransitions counts a registry's logged lease state changes of one cluster, by the
// state entered.
func leaseTransitions(output, cluster string) map[string]int {
	out := map[string]int{}
	for _, line := range strings.Split(output, "\n") {
		if !strings.Contains(line, `msg="cluster lease state changed"`) || !strings.Contains(line, " cluster="+cluster+" ") {
			continue
		}
		for _, state := range []string{"LEASE_STATE_ACTIVE", "LEASE_STATE_HELD_REPLICATION", "LEASE_STATE_EXPIRED"} {
			if strings.Contains(line, " state="+state+" ") {
				out[state]++
			}
		}
	}
	return out
}

// TestReplicationStallHoldIsBounded: lease 6 s, renewal every 2 s, hold 15 s; use1-a and
// euw1-a on region A's registry, usw2-a on B's. Replication stalls and euw1-a's controller
// is killed at once: euw1-a leaves region A's imports within its lease and region B's
// within lease + hold. The stall outlasts the hold, so the healthy clusters expire in the
// other region as they did before the hold, and come back when replication resumes;
// euw1-a does not.
func TestReplicationStallHoldIsBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const lease, hold = 6 * time.Second, 15 * time.Second
	rs := startRegionSet(t, ctx, []string{"use1-a", "usw2-a", "euw1-a"}, []int{0, 1, 0},
		[]string{"--replication-stall-hold=15s"}, []string{"--lease-duration=6s", "--renew-interval=2s"})
	all := rs.relayImport(0, 1, 2)
	for _, c := range rs.cls {
		waitImport(t, c, "dynamo", "relay", all)
	}
	rs.repl.Pause()
	if err := rs.ctls[2].Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	// Region A (use1-a's view): euw1-a's own region expires it on time, while it holds
	// usw2-a.
	waitImport(t, rs.cls[0], "dynamo", "relay", rs.relayImport(0, 1))
	inA := time.Since(stopped)
	// Region B (usw2-a's view): held, then gone with use1-a, whose renewals B has not seen
	// for longer than lease + hold either.
	harness.Eventually(t, "usw2-a: euw1-a and use1-a left after the hold", lease+hold+20*time.Second, func() string {
		if got := importState(t, rs.cls[1], "dynamo", "relay"); got != rs.relayImport(1) {
			return got
		}
		return ""
	})
	inB := time.Since(stopped)
	t.Logf("FIGURE killed during a stall: euw1-a left region A's imports %.1f s and region B's %.1f s after its controller stopped (lease %s, hold %s)",
		inA.Seconds(), inB.Seconds(), lease, hold)
	// Its last renewal was at most one renewal interval before it stopped; then the
	// reconcile and this test's polling.
	if inB > lease+hold+5*time.Second {
		t.Errorf("euw1-a left region B's imports %s after it stopped; want within lease + hold (%s)", inB.Round(100*time.Millisecond), lease+hold)
	}
	if inA > lease+5*time.Second {
		t.Errorf("euw1-a left region A's imports %s after it stopped; want within the lease (%s)", inA.Round(100*time.Millisecond), lease)
	}
	// And region A lets usw2-a go after the hold too.
	waitImport(t, rs.cls[0], "dynamo", "relay", rs.relayImport(0))
	if got := importCondition(t, rs.cls[1], "dynamo", "relay", "ReplicationHeld"); got != "ReplicationHeld=False NoneHeld" {
		t.Errorf("usw2-a after the hold: %s", got)
	}
	rs.repl.Resume()
	for _, i := range []int{0, 1} {
		waitImport(t, rs.cls[i], "dynamo", "relay", rs.relayImport(0, 1))
	}
}
