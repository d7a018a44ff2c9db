package integration

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// importConditionOf returns one condition of a ServiceImport, or a text saying why there is none.
func importConditionOf(t *testing.T, c *harness.Cluster, ns, name, typ string) (*metav1.Condition, string) {
	t.Helper()
	si := &mcsv1beta1.ServiceImport{}
	if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, si); err != nil {
		return nil, err.Error()
	}
	if cond := meta.FindStatusCondition(si.Status.Conditions, typ); cond != nil {
		return cond, ""
	}
	return nil, typ + " missing"
}

// importCondition renders one condition of a ServiceImport as "Type=Status Reason".
func importCondition(t *testing.T, c *harness.Cluster, ns, name, typ string) string {
	t.Helper()
	cond, why := importConditionOf(t, c, ns, name, typ)
	if cond == nil {
		return why
	}
	return fmt.Sprintf("%s=%s %s", cond.Type, cond.Status, cond.Reason)
}

// importConditionMessage returns the message of one condition of a ServiceImport.
func importConditionMessage(t *testing.T, c *harness.Cluster, ns, name, typ string) string {
	t.Helper()
	cond, why := importConditionOf(t, c, ns, name, typ)
	if cond == nil {
		return why
	}
	return cond.Message
}

// relayClusterset starts a memory-store registry and three clusters (use1-a, usw2-a,
// euw1-a), each with a controller (extra flags added) exporting dynamo/relay from
// 10.<i>.0.1.
func relayClusterset(t *testing.T, ctx context.Context, extra ...string) (*harness.Registry, []string, []*harness.Cluster, []*harness.Controller) {
	t.Helper()
	reg := harness.StartRegistry(t, "--store=memory")
	ids := []string{"use1-a", "usw2-a", "euw1-a"}
	cls := harness.StartClusters(t, harness.ClusterOptions{Names: ids})
	var ctls []*harness.Controller
	for i, c := range cls {
		createNamespaces(t, ctx, c.Client, "dynamo")
		ctls = append(ctls, c.StartController(t, "mcs-controller/"+ids[i], controllerArgs(reg, ids[i], extra...)...))
		mustCreate(t, c, service("dynamo", "relay", 80), serviceExport("dynamo", "relay"), slice("dynamo", "relay", "relay-"+ids[i], fmt.Sprintf("10.%d.0.1", i+1)))
	}
	return reg, ids, cls, ctls
}

// TestRegistryRestartKeepsImports: a memory-store registry restarts while one member
// cluster's controller is gone. The clusters that come back lose no imported endpoint for
// any length of time (the controllers hold what they had until each cluster sent its
// exports again), the held import says so in its EndpointsHeld condition and metrics, and
// the cluster that did not come back leaves every import within one lease.
func TestRegistryRestartKeepsImports(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const lease = 6 * time.Second
	reg, ids, cls, ctls := relayClusterset(t, ctx, "--lease-duration=6s", "--renew-interval=2s")
	gone := cls[2]
	mustCreate(t, gone, service("dynamo", "only-euw1", 80), serviceExport("dynamo", "only-euw1"), slice("dynamo", "only-euw1", "only-euw1", "10.3.1.1"))
	all := "ClusterSetIP [http/TCP/80] clusters=[euw1-a use1-a usw2-a] ips svc:true [euw1-a:10.3.0.1:true use1-a:10.1.0.1:true usw2-a:10.2.0.1:true]"
	for _, c := range cls[:2] {
		waitImport(t, c, "dynamo", "relay", all)
		waitImport(t, c, "dynamo", "only-euw1", "ClusterSetIP [http/TCP/80] clusters=[euw1-a] ips svc:true [euw1-a:10.3.1.1:true]")
		if got := importCondition(t, c, "dynamo", "relay", "EndpointsHeld"); got != "EndpointsHeld=False NoneHeld" {
			t.Fatalf("%s: %s before the restart", c.Name, got)
		}
	}
	var monitors []*harness.EndpointsMonitor
	for _, c := range cls[:2] {
		monitors = append(monitors, c.MonitorImportedEndpoints(t, "dynamo", "relay", ids[0], ids[1]))
	}

	// euw1-a's controller dies with the registry, and does not come back.
	if err := ctls[2].Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	reg.Restart(t)

	// While euw1-a is held, the imports say so.
	for i, c := range cls[:2] {
		harness.Eventually(t, c.Name+": EndpointsHeld=True", lease, func() string {
			if got := importCondition(t, c, "dynamo", "relay", "EndpointsHeld"); got != "EndpointsHeld=True RegistryRestarted" {
				return got
			}
			return ""
		})
		waitMetric(t, ctls[i].MetricsAddr, `mcs_controller_imports_held{reason="registry_restart"} 2`)
		waitMetric(t, ctls[i].MetricsAddr, "mcs_controller_registry_restart_held_clusters 1")
	}
	// euw1-a leaves every import within one lease of the restart.
	without := "ClusterSetIP [http/TCP/80] clusters=[use1-a usw2-a] ips svc:true [use1-a:10.1.0.1:true usw2-a:10.2.0.1:true]"
	for _, c := range cls[:2] {
		harness.Eventually(t, c.Name+": euw1-a left", 2*lease, func() string {
			if got := importState(t, c, "dynamo", "relay"); got != without {
				return "relay: " + got
			}
			if got := importState(t, c, "dynamo", "only-euw1"); got != "none" {
				return "only-euw1: " + got
			}
			return ""
		})
	}
	left := time.Since(start)
	// One lease, plus what a reconcile and this test's polling take.
	if left > lease+2*time.Second {
		t.Errorf("euw1-a left the imports %s after the restart; want within the %s lease", left.Round(10*time.Millisecond), lease)
	}
	for i, c := range cls[:2] {
		if got := importCondition(t, c, "dynamo", "relay", "EndpointsHeld"); got != "EndpointsHeld=False NoneHeld" {
			t.Errorf("%s: %s after the hold", c.Name, got)
		}
		waitMetric(t, ctls[i].MetricsAddr, `mcs_controller_imports_held{reason="registry_restart"} 0`)
		waitMetric(t, ctls[i].MetricsAddr, "mcs_controller_registry_restart_held_clusters 0")
	}
	// Not a moment without the endpoints of the clusters that came back.
	for i, m := range monitors {
		if err := m.Err(); err != nil {
			t.Fatalf("%s: %v", cls[i].Name, err)
		}
		var out []string
		for _, id := range ids[:2] {
			if d := m.Outage()[id]; d > 0 {
				out = append(out, fmt.Sprintf("%s for %s", id, d.Round(time.Millisecond)))
			}
		}
		if len(out) > 0 {
			t.Errorf("%s lost the imported endpoints of %s during the registry restart", cls[i].Name, strings.Join(out, ", "))
		}
	}
	// A quiet clusterset logs no reconciler error, through a restart too.
	for i, ctl := range ctls[:2] {
		if n := strings.Count(ctl.Output(), "Reconciler error"); n > 0 {
			t.Errorf("%s: %d reconciler errors:\n%s", ids[i], n, grepLines(ctl.Output(), "Reconciler error"))
		}
	}
	t.Logf("registry restart: 0 s without the endpoints of the returning clusters; the stopped cluster left %s after the restart (lease %s)", left.Round(10*time.Millisecond), lease)
}

// TestRegistryDownLongerThanAReconnect: a memory-store registry is away for 17 s (a pod
// replaced on a busy node), with the default lease (30 s) and renewal (10 s). Each
// controller must reach the new registry soon after it answers — not at gRPC's default
// reconnect backoff, which by then waits 10–17 s between attempts — register again, send
// its exports, and watch again, all within the hold, which counts from the old watch's
// end: no cluster may see a moment without the others' endpoints.
func TestRegistryDownLongerThanAReconnect(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	reg, ids, cls, ctls := relayClusterset(t, ctx)
	all := "ClusterSetIP [http/TCP/80] clusters=[euw1-a use1-a usw2-a] ips svc:true [euw1-a:10.3.0.1:true use1-a:10.1.0.1:true usw2-a:10.2.0.1:true]"
	var monitors []*harness.EndpointsMonitor
	for _, c := range cls {
		waitImport(t, c, "dynamo", "relay", all)
		var others []string
		for _, id := range ids {
			if id != c.Name {
				others = append(others, id)
			}
		}
		monitors = append(monitors, c.MonitorImportedEndpoints(t, "dynamo", "relay", others...))
	}

	start := time.Now()
	reg.RestartAfter(t, 17*time.Second)
	back := time.Now()
	// Each controller logs the end of its hold, and why it ended.
	const ended = "the hold after the registry's epoch changed ended: "
	for i, ctl := range ctls {
		harness.Eventually(t, ids[i]+": the hold ended", time.Minute, func() string {
			if !strings.Contains(ctl.Output(), ended) {
				return "no hold ended yet"
			}
			return ""
		})
		if !strings.Contains(ctl.Output(), ended+"every cluster returned") {
			t.Errorf("%s: the hold did not end with every cluster back:\n%s", ids[i], grepLines(ctl.Output(), ended))
		}
	}
	whole := time.Since(back)
	for i, m := range monitors {
		m.Stop()
		if err := m.Err(); err != nil {
			t.Fatalf("%s: %v", cls[i].Name, err)
		}
		for id, d := range m.Outage() {
			if d > 0 {
				t.Errorf("%s had no endpoints from %s for %s while the registry was away", cls[i].Name, id, d.Round(time.Millisecond))
			}
		}
		waitImport(t, cls[i], "dynamo", "relay", all)
	}
	t.Logf("registry away %s: every cluster's imports whole again %s after it answered (%s after it stopped); 0 s without endpoints",
		back.Sub(start).Round(100*time.Millisecond), whole.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))
}

// TestImportDeletionDelayHolds: with --import-deletion-delay, a cluster whose export left
// an import keeps its endpoints in the other clusters for the delay, counted from when
// each controller found it missing, with EndpointsHeld=True DeletionDelayed and the
// cluster still in status.clusters; then its endpoints go and the condition clears.
func TestImportDeletionDelayHolds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const delay = 8 * time.Second
	_, _, cls, _ := relayClusterset(t, ctx, "--import-deletion-delay="+delay.String())
	all := "ClusterSetIP [http/TCP/80] clusters=[euw1-a use1-a usw2-a] ips svc:true [euw1-a:10.3.0.1:true use1-a:10.1.0.1:true usw2-a:10.2.0.1:true]"
	use1 := cls[0]
	waitImport(t, use1, "dynamo", "relay", all)

	// euw1-a stops exporting: the registry's import no longer lists it. The ServiceExport
	// is deleted as soon as the import shows it, often before euw1-a's exporter first
	// reconciled it (its finalizer not yet there): the export is withdrawn all the same.
	if err := cls[2].Client.Delete(ctx, serviceExport("dynamo", "relay")); err != nil {
		t.Fatal(err)
	}
	gone := time.Now()
	harness.Eventually(t, "use1-a holds euw1-a's endpoints", 30*time.Second, func() string {
		if got := importCondition(t, use1, "dynamo", "relay", "EndpointsHeld"); got != "EndpointsHeld=True DeletionDelayed" {
			return got + "; import: " + importState(t, use1, "dynamo", "relay")
		}
		return ""
	})
	if got := importState(t, use1, "dynamo", "relay"); got != all {
		t.Fatalf("during the delay: %s, want euw1-a's endpoints and entry kept: %s", got, all)
	}
	without := "ClusterSetIP [http/TCP/80] clusters=[use1-a usw2-a] ips svc:true [use1-a:10.1.0.1:true usw2-a:10.2.0.1:true]"
	harness.Eventually(t, "euw1-a's endpoints gone after the delay", 2*delay, func() string {
		if got := importState(t, use1, "dynamo", "relay"); got != without {
			return got
		}
		return ""
	})
	if took := time.Since(gone); took < delay {
		t.Errorf("euw1-a's endpoints left after %s, before the %s delay", took.Round(10*time.Millisecond), delay)
	}
	if got := importCondition(t, use1, "dynamo", "relay", "EndpointsHeld"); got != "EndpointsHeld=False NoneHeld" {
		t.Errorf("after the delay: %s", got)
	}
}
