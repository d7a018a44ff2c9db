// Package e2e follows the user manual's steps on a clusterset of three local clusters, and
// then breaks things, printing how long the system takes to recover.
package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/ai-dynamo/global-discovery-mcs/test/clusterset"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// get is a GET's status and body; a failed request is status 0 with the error as body,
// for waits that retry it.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	code, body, err := harness.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	return code, body
}

// exportConditions is the manual's jsonpath:
// {range .status.conditions[*]}{.type}={.status} {.reason}{"\n"}{end}
func exportConditions(c *harness.Cluster, ns, name string) string {
	se := &mcsv1beta1.ServiceExport{}
	if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, se); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, c := range se.Status.Conditions {
		fmt.Fprintf(&b, "%s=%s %s\n", c.Type, c.Status, c.Reason)
	}
	return b.String()
}

const working = "Valid=True Valid\nReady=True Ready\nConflict=False NoConflicts\n"

// imported summarizes `kubectl get serviceimports` and `kubectl get
// services,endpointslices -l multicluster.kubernetes.io/service-name` in one namespace:
// the ServiceImports, the derived Services, and the source clusters of the slices per Service.
func imported(c *harness.Cluster, ns string) string {
	ctx := context.Background()
	var sis mcsv1beta1.ServiceImportList
	var svcs corev1.ServiceList
	var slices discoveryv1.EndpointSliceList
	if err := c.Client.List(ctx, &sis, client.InNamespace(ns)); err != nil {
		return err.Error()
	}
	if err := c.Client.List(ctx, &svcs, client.InNamespace(ns), client.HasLabels{"multicluster.kubernetes.io/service-name"}); err != nil {
		return err.Error()
	}
	if err := c.Client.List(ctx, &slices, client.InNamespace(ns), client.HasLabels{"multicluster.kubernetes.io/service-name"}); err != nil {
		return err.Error()
	}
	var out []string
	for _, si := range sis.Items {
		derived := 0
		for _, s := range svcs.Items {
			if s.Labels["multicluster.kubernetes.io/service-name"] == si.Name && strings.HasPrefix(s.Name, "derived-") {
				derived++
			}
		}
		sources := map[string]int{}
		for _, s := range slices.Items {
			if s.Labels["multicluster.kubernetes.io/service-name"] == si.Name {
				sources[s.Labels["multicluster.kubernetes.io/source-cluster"]] += len(s.Endpoints)
			}
		}
		out = append(out, fmt.Sprintf("%s derived=%d slices=%v", si.Name, derived, sources))
	}
	return strings.Join(out, "; ")
}

const (
	poolsJSON = `{"api_version":"gds.dynamo.nvidia.com/v1","pools":[` +
		`{"key":{"cluster_id":"use1-a","namespace":"dynamo","dgd_name":"my-dgd"},"service":"my-dgd-pool-relay","region":"us-east-1","tier":"cluster","endpoints":[` +
		`{"address":"10.244.1.10","ready":true,"target_pod":"my-dgd-pool-relay-0","zone":"us-east-1a","ports":[{"name":"http","protocol":"TCP","port":8080}]},` +
		`{"address":"10.244.1.11","ready":true,"target_pod":"my-dgd-pool-relay-1","zone":"us-east-1a","ports":[{"name":"http","protocol":"TCP","port":8080}]}]},` +
		`{"key":{"cluster_id":"usw2-a","namespace":"dynamo","dgd_name":"my-dgd"},"service":"my-dgd-pool-relay","region":"us-west-2","tier":"any","endpoints":[` +
		`{"address":"10.244.2.10","ready":true,"target_pod":"my-dgd-pool-relay-0","zone":"us-west-2a","ports":[{"name":"http","protocol":"TCP","port":8080}]}]}]}` + "\n"
	routersJSON = `{"api_version":"gds.dynamo.nvidia.com/v1","routers":[` +
		`{"id":"use1-a/global-router-0","cluster_id":"use1-a","replica":"global-router-0","address":"10.244.1.50","url":"http://10.244.1.50:8000"},` +
		`{"id":"use1-a/global-router-1","cluster_id":"use1-a","replica":"global-router-1","address":"10.244.1.51","url":"http://10.244.1.51:8000"},` +
		`{"id":"usw2-a/global-router-0","cluster_id":"usw2-a","replica":"global-router-0","address":"10.244.2.50","url":"http://10.244.2.50:8000"}]}` + "\n"
)

func TestEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cs := clusterset.Start(t, clusterset.Options{})
	use1, usw2, euw1 := cs.Members[0], cs.Members[1], cs.Members[2]
	rest := "http://" + cs.Registry.RESTAddr

	// Check the Registry: curl -s localhost:9091/readyz
	if code, body := get(t, "http://"+cs.Registry.AdminAddr+"/readyz"); code != 200 || body != "ok\n" {
		t.Fatalf("/readyz = %d %q", code, body)
	}
	// Every cluster id appears with "state":"LEASE_STATE_ACTIVE" in its lease.
	harness.Eventually(t, "three clusters ACTIVE", 60*time.Second, func() string {
		_, body := get(t, rest+"/v1/clustersets/prod/clusters")
		for _, m := range cs.Members {
			if !strings.Contains(body, fmt.Sprintf(`"clusterId":"%s","region":"%s","lease":{"state":"LEASE_STATE_ACTIVE"`, m.ID, m.Region)) {
				return body
			}
		}
		return ""
	})

	// Export Services: the pool by label in use1-a and by ServiceExport in usw2-a, the
	// headless router in both.
	cs.DeploySample(t)
	for _, m := range []*clusterset.Member{use1, usw2} {
		for _, se := range [][2]string{{"dynamo", "my-dgd-pool-relay"}, {"global-discovery", "global-router"}} {
			harness.Eventually(t, m.ID+" ServiceExport "+se[1], 60*time.Second, func() string {
				if got := exportConditions(m.Cluster, se[0], se[1]); got != working {
					return got
				}
				return ""
			})
		}
	}
	// Verify the Imports in every member cluster where the namespace exists.
	want := "my-dgd-pool-relay derived=1 slices=map[use1-a:2 usw2-a:1]"
	for _, m := range []*clusterset.Member{use1, usw2} {
		harness.Eventually(t, m.ID+" imports", 60*time.Second, func() string {
			if got := imported(m.Cluster, "dynamo"); got != want {
				return got
			}
			return ""
		})
	}
	harness.Eventually(t, "euw1-a router import", 60*time.Second, func() string {
		if got := imported(euw1.Cluster, "global-discovery"); got != "global-router derived=1 slices=map[use1-a:2 usw2-a:1]" {
			return got
		}
		return ""
	})
	// euw1-a has no dynamo namespace: the import is held, and lands when it is created.
	if got := imported(euw1.Cluster, "dynamo"); got != "" {
		t.Fatalf("euw1-a imported into a namespace that does not exist: %s", got)
	}
	if err := euw1.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "dynamo"}}); err != nil {
		t.Fatal(err)
	}
	held := harness.Eventually(t, "euw1-a held import lands", 60*time.Second, func() string {
		if got := imported(euw1.Cluster, "dynamo"); got != want {
			return got
		}
		return ""
	})
	t.Logf("FIGURE namespace hold: the import landed %s after the namespace was created", held.Round(10*time.Millisecond))
	// The import as it landed, so that a later failure can tell a ServiceImport made again
	// from one that stayed.
	landed := &mcsv1beta1.ServiceImport{}
	if err := euw1.Client.Get(ctx, client.ObjectKey{Namespace: "dynamo", Name: "my-dgd-pool-relay"}, landed); err != nil {
		t.Fatalf("euw1-a's held import landed, then: %v", err)
	}

	// Run the Global Discovery Service with MCS: /pools and /routers.
	harness.Eventually(t, "/pools", 60*time.Second, func() string {
		if _, body := get(t, cs.GDSURL+"/pools"); body != poolsJSON {
			return body
		}
		return ""
	})
	harness.Eventually(t, "/routers", 60*time.Second, func() string {
		if _, body := get(t, cs.GDSURL+"/routers"); body != routersJSON {
			return body
		}
		return ""
	})

	// A conflict: euw1-a exports the pool with another port. Every export reports
	// Conflict=True PortConflict; the oldest (use1-a's) spec stays.
	euw1.Deploy(t, clusterset.Workload{Namespace: "dynamo", Name: "my-dgd-pool-relay", Port: 81, TargetPort: 8080, Replicas: 1, FirstIP: 10})
	conflict := "Valid=True Valid\nReady=True Ready\nConflict=True PortConflict\n"
	for _, m := range cs.Members {
		harness.Eventually(t, m.ID+" conflict", 60*time.Second, func() string {
			if got := exportConditions(m.Cluster, "dynamo", "my-dgd-pool-relay"); got != conflict {
				return got
			}
			return ""
		})
	}
	si := &mcsv1beta1.ServiceImport{}
	if err := euw1.Client.Get(ctx, client.ObjectKey{Namespace: "dynamo", Name: "my-dgd-pool-relay"}, si); err != nil || len(si.Spec.Ports) != 1 || si.Spec.Ports[0].Port != 80 {
		// What the registry and euw1-a hold, so that a failure says which side lost it.
		_, regImports := get(t, rest+"/v1/clustersets/prod/imports")
		_, metrics := get(t, "http://"+euw1.Controller.MetricsAddr+"/metrics")
		var held []string
		for _, l := range strings.Split(metrics, "\n") {
			if strings.HasPrefix(l, "mcs_controller_imports_held") || strings.HasPrefix(l, "mcs_controller_import_writes_total") {
				held = append(held, l)
			}
		}
		// The controller's own account of the import, kept short: CI prints only the head
		// of each process's output.
		exited, exitErr := euw1.Controller.Exited()
		var events []string
		for _, l := range strings.Split(euw1.Controller.Output(), "\n") {
			for _, w := range []string{"import removed", "watch ended", "epoch", "hold", "leader", "lease", "ERROR", "error", "resync", "registered"} {
				if strings.Contains(l, w) {
					events = append(events, l)
					break
				}
			}
		}
		failedAt := time.Now()
		time.Sleep(time.Second)
		later := &mcsv1beta1.ServiceImport{}
		laterErr := euw1.Client.Get(ctx, client.ObjectKey{Namespace: "dynamo", Name: "my-dgd-pool-relay"}, later)
		var evs corev1.EventList
		_ = euw1.Client.List(ctx, &evs, client.InNamespace("dynamo"))
		for _, e := range evs.Items {
			events = append(events, fmt.Sprintf("event %s/%s %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message))
		}
		t.Logf("the ServiceImport as it landed: uid %s created %s; missing at %s; a second later: uid %s created %s (%v)",
			landed.UID, landed.CreationTimestamp.Format(time.RFC3339Nano), failedAt.Format(time.RFC3339Nano), later.UID, later.CreationTimestamp.Format(time.RFC3339Nano), laterErr)
		t.Fatalf("the oldest export's port does not win: %+v %v\nregistry imports: %s\neuw1-a: %s\neuw1-a a second later: %s\neuw1-a's controller exited=%v %v; its log on imports, watches and leases:\n%s",
			si.Spec.Ports, err, regImports, strings.Join(held, "; "), imported(euw1.Cluster, "dynamo"), exited, exitErr, strings.Join(events, "\n"))
	}
	if err := euw1.Client.Delete(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "dynamo", Name: "my-dgd-pool-relay"}}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*clusterset.Member{use1, usw2} {
		harness.Eventually(t, m.ID+" conflict clears", 60*time.Second, func() string {
			if got := exportConditions(m.Cluster, "dynamo", "my-dgd-pool-relay"); got != working {
				return got
			}
			return ""
		})
	}

	whole := func() string {
		for _, m := range cs.Members {
			if got := imported(m.Cluster, "dynamo"); got != want {
				return m.ID + ": " + got
			}
		}
		if _, body := get(t, cs.GDSURL+"/pools"); body != poolsJSON {
			return body
		}
		return ""
	}

	// Fault: the memory registry restarts. Every controller registers again and sends its
	// exports; meanwhile each controller holds the endpoints it had, so no cluster is
	// without the pool's imported endpoints for any length of time.
	var monitors []*harness.EndpointsMonitor
	for _, m := range cs.Members {
		monitors = append(monitors, m.MonitorImportedEndpoints(t, "dynamo", "my-dgd-pool-relay", use1.ID, usw2.ID))
	}
	cs.Registry.Restart(t)
	took := harness.Eventually(t, "imports whole after a registry restart", 90*time.Second, func() string {
		_, body := get(t, rest+"/v1/clustersets/prod/clusters")
		if strings.Count(body, `"state":"LEASE_STATE_ACTIVE"`) != 3 {
			return body
		}
		return whole()
	})
	t.Logf("FIGURE registry restart: every cluster registered and the registry whole again after %s", took.Round(10*time.Millisecond))
	for i, mon := range monitors {
		mon.Stop()
		if err := mon.Err(); err != nil {
			t.Fatalf("%s: %v", cs.Members[i].ID, err)
		}
		outage := mon.Outage()
		var worst time.Duration
		for _, d := range outage {
			worst = max(worst, d)
		}
		t.Logf("FIGURE registry restart: %s was without imported endpoints of the pool for %s (use1-a %s, usw2-a %s)",
			cs.Members[i].ID, worst.Round(time.Millisecond), outage[use1.ID].Round(time.Millisecond), outage[usw2.ID].Round(time.Millisecond))
		if worst > 0 {
			t.Errorf("%s lost imported endpoints during the registry restart: %v", cs.Members[i].ID, outage)
		}
	}

	// Fault: the first registry URL goes down; every controller fails over to the second.
	cs.Front.Close()
	took = harness.Eventually(t, "failover to the second URL", 60*time.Second, func() string {
		for _, m := range cs.Members {
			_, body := get(t, "http://"+m.Controller.MetricsAddr+"/metrics")
			if !strings.Contains(body, fmt.Sprintf(`mcs_controller_registry_active{url="http://%s"} 1`, cs.Registry.GRPCAddr)) {
				return m.ID + " still on the first URL"
			}
		}
		return whole()
	})
	t.Logf("FIGURE failover: every controller on the second registry URL after %s, nothing lost", took.Round(10*time.Millisecond))

	// Fault: usw2-a's leader is killed while a second replica runs; the second takes over.
	second := usw2.StartController(t, "mcs-controller/usw2-a-replica", usw2.ControllerArgs...)
	time.Sleep(2 * time.Second)
	if err := usw2.Controller.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	took = harness.Eventually(t, "leader takeover", 60*time.Second, func() string {
		if !strings.Contains(second.Output(), `"msg":"cluster registered"`) {
			return "the replica has not taken over"
		}
		return whole()
	})
	t.Logf("FIGURE leader takeover: the second replica registered %s after the leader was killed (leader-election lease 6s)", took.Round(10*time.Millisecond))
	usw2.Controller = second

	// Fault: usw2-a's controller stops. After its 30 s lease its endpoints leave every other
	// cluster; they come back when it returns.
	second.Stop(10 * time.Second)
	took = harness.Eventually(t, "usw2-a's endpoints leave", 90*time.Second, func() string {
		for _, m := range []*clusterset.Member{use1, euw1} {
			if got := imported(m.Cluster, "dynamo"); got != "my-dgd-pool-relay derived=1 slices=map[use1-a:2]" {
				return m.ID + ": " + got
			}
		}
		if _, body := get(t, cs.GDSURL+"/pools"); strings.Contains(body, "usw2-a") {
			return body
		}
		return ""
	})
	t.Logf("FIGURE lease expiry: usw2-a's endpoints left the other clusters %s after its controller stopped (lease 30s)", took.Round(10*time.Millisecond))
	usw2.Controller = usw2.StartController(t, "mcs-controller/usw2-a-back", usw2.ControllerArgs...)
	took = harness.Eventually(t, "usw2-a returns", 90*time.Second, whole)
	t.Logf("FIGURE return: usw2-a's endpoints back everywhere %s after its controller started", took.Round(10*time.Millisecond))

	// Fault: use1-a's kube-apiserver restarts under its controller (and under the Global
	// Discovery Service, which reads use1-a). Both recover: a new export from use1-a is
	// Ready and imported everywhere, and /pools is whole again.
	start := time.Now()
	use1.RestartAPIServer(t)
	use1.Deploy(t, clusterset.Workload{Namespace: "dynamo", Name: "after-restart", Port: 80, TargetPort: 8080, Replicas: 1, FirstIP: 30})
	harness.Eventually(t, "recovery after an apiserver restart", 120*time.Second, func() string {
		if got := exportConditions(use1.Cluster, "dynamo", "after-restart"); got != working {
			return got
		}
		if got := imported(euw1.Cluster, "dynamo"); !strings.Contains(got, "after-restart derived=1 slices=map[use1-a:1]") {
			return got
		}
		if _, body := get(t, cs.GDSURL+"/pools"); body != poolsJSON {
			return body
		}
		return ""
	})
	t.Logf("FIGURE apiserver restart: use1-a's kube-apiserver killed and restarted; its controller and the discovery service recovered, and a new export from use1-a was Ready and imported everywhere %s after the kill", time.Since(start).Round(10*time.Millisecond))

	// Nothing exported was lost: the exports are still Ready in both exporting clusters.
	for _, m := range []*clusterset.Member{use1, usw2} {
		if got := exportConditions(m.Cluster, "dynamo", "my-dgd-pool-relay"); got != working {
			t.Fatalf("%s: %s", m.ID, got)
		}
	}
	var ns corev1.Namespace
	if err := euw1.Client.Get(ctx, client.ObjectKey{Name: "dynamo"}, &ns); apierrors.IsNotFound(err) {
		t.Fatal("namespace vanished")
	}
}
