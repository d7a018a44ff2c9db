package integration

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// runCleanup runs "mcs-controller cleanup" against the cluster as the chart's uninstall
// hook ServiceAccount, under the hook's RBAC, and returns its output and exit code.
func runCleanup(t *testing.T, c *harness.Cluster, args ...string) (string, int) {
	t.Helper()
	c.Apply(t, harness.RBACObjects(harness.RenderChart(t, "registry.enabled=false", "controller.enabled=true",
		"controller.registryUrls={https://mcs-registry.example:9090}"), true)...)
	kc := c.ServiceAccountKubeconfig(t, harness.ReleaseNamespace, "mcs-controller-cleanup")
	cmd := exec.Command(harness.Binary(t, "mcs-controller"), append([]string{"cleanup", "--kubeconfig=" + kc,
		"--leader-election-namespace=" + harness.ReleaseNamespace}, args...)...)
	out, err := cmd.CombinedOutput()
	if strings.Contains(string(out), "forbidden") {
		t.Fatalf("cleanup was refused a permission the chart's hook RBAC should give:\n%s", out)
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case asExit(err, &exit):
		return string(out), exit.ExitCode()
	}
	t.Fatalf("mcs-controller cleanup: %v", err)
	return "", 0
}

// managed counts the objects the controller wrote into the cluster, in cleanup's words:
// "<n> ServiceImports, <n> derived Services and <n> EndpointSlices".
func managed(t *testing.T, c *harness.Cluster) string {
	t.Helper()
	ctx := context.Background()
	var si mcsv1beta1.ServiceImportList
	var svc corev1.ServiceList
	var eps discoveryv1.EndpointSliceList
	for _, l := range []struct {
		list   client.ObjectList
		labels client.MatchingLabels
	}{
		{&si, client.MatchingLabels{"multicluster.dynamo.nvidia.com/managed-by": "mcs-controller.dynamo.nvidia.com"}},
		{&svc, client.MatchingLabels{"multicluster.dynamo.nvidia.com/managed-by": "mcs-controller.dynamo.nvidia.com"}},
		{&eps, client.MatchingLabels{discoveryv1.LabelManagedBy: "mcs-controller.dynamo.nvidia.com"}},
	} {
		if err := c.Client.List(ctx, l.list, l.labels); err != nil {
			t.Fatal(err)
		}
	}
	return fmt.Sprintf("%d ServiceImports, %d derived Services and %d EndpointSlices", len(si.Items), len(svc.Items), len(eps.Items))
}

// TestUninstallCleanup: once the controller is gone, deleting a ServiceExport hangs on its
// finalizer; "mcs-controller cleanup" (the chart's post-delete hook, run here under the
// hook's RBAC) refuses to run while a replica holds the leader Lease, then removes the
// finalizers, the ServiceExports made from the export label and every imported object, and
// a second run finds nothing to do.
func TestUninstallCleanup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	reg := harness.StartRegistry(t, "--store=memory")
	cls := harness.StartClusters(t, harness.ClusterOptions{Names: []string{"a", "b"}})
	a, b := cls[0], cls[1]
	for _, c := range cls {
		createNamespaces(t, ctx, c.Client, "dynamo")
	}
	labelled := service("dynamo", "by-label", 81)
	labelled.Labels = map[string]string{"dynamo.nvidia.com/mcs-export": "true"}
	mustCreate(t, a, service("dynamo", "svc", 80), serviceExport("dynamo", "svc"), slice("dynamo", "svc", "svc-1", "10.1.0.1"), labelled)
	ctlA := a.StartController(t, "mcs-controller/a", controllerArgs(reg, "a")...)
	ctlB := b.StartController(t, "mcs-controller/b", controllerArgs(reg, "b")...)
	waitExport(t, a, "dynamo", "svc", readyConditions, 30*time.Second)
	waitExport(t, a, "dynamo", "by-label", readyConditions, 30*time.Second)
	waitImport(t, b, "dynamo", "svc", "ClusterSetIP [http/TCP/80] clusters=[a] ips svc:true [a:10.1.0.1:true]")
	waitImport(t, b, "dynamo", "by-label", "ClusterSetIP [http/TCP/81] clusters=[a] ips svc:true []")
	imported := managed(t, b)
	if imported != "2 ServiceImports, 2 derived Services and 1 EndpointSlices" {
		t.Fatalf("cluster b imported %s", imported)
	}

	// While a replica holds the leader Lease, cleanup would race the controller: it waits,
	// then refuses. A holder that is not a pod of the named Deployment (a process here) is
	// never taken for one that is gone.
	out, code := runCleanup(t, b, "--wait=2s", "--controller-deployment=mcs-controller")
	if code != 1 || !strings.Contains(out, "still holds the leader Lease mcs-system/mcs-controller.multicluster.dynamo.nvidia.com") ||
		!strings.Contains(out, "stop mcs-controller first") {
		t.Fatalf("cleanup with the controller running: exit %d\n%s", code, out)
	}
	if now := managed(t, b); now != imported {
		t.Fatalf("a refused cleanup changed cluster b: %s left of %s", now, imported)
	}

	// The controllers go (helm uninstall deletes their Deployments).
	ctlA.Stop(30 * time.Second)
	ctlB.Stop(30 * time.Second)
	if err := a.Client.Delete(ctx, serviceExport("dynamo", "svc")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	var se mcsv1beta1.ServiceExport
	if err := a.Client.Get(ctx, client.ObjectKey{Namespace: "dynamo", Name: "svc"}, &se); err != nil || se.DeletionTimestamp.IsZero() {
		t.Fatalf("without the controller, a deleted ServiceExport should wait on its finalizer: %v %+v", err, se.ObjectMeta)
	}

	// helm uninstall deletes the controller's RBAC with its Deployment, so a stopping
	// replica cannot release the Lease: it stays held by a pod that is gone. Cleanup waits
	// it out, unless told the controller's Deployment, whose gone pod holds nothing.
	lease := &coordinationv1.Lease{}
	if err := a.Client.Get(ctx, client.ObjectKey{Namespace: harness.ReleaseNamespace, Name: "mcs-controller.multicluster.dynamo.nvidia.com"}, lease); err != nil {
		t.Fatal(err)
	}
	holder, renewed, secs := "mcs-controller-7c9b6d5f4-hz2lw_3b663310-9691-4d06-86dd-0b58310a3723", metav1.NowMicro(), int32(60)
	lease.Spec.HolderIdentity, lease.Spec.RenewTime, lease.Spec.LeaseDurationSeconds = &holder, &renewed, &secs
	if err := a.Client.Update(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if out, code := runCleanup(t, a, "--wait=2s"); code != 1 || !strings.Contains(out, "still holds the leader Lease") {
		t.Fatalf("cleanup with the Lease held by a gone pod, without --controller-deployment: exit %d\n%s", code, out)
	}

	// Cluster a imports its own exports too.
	importedA := managed(t, a)
	out, code = runCleanup(t, a, "--wait=2s", "--controller-deployment=mcs-controller")
	if code != 0 || !strings.Contains(out, "removed the finalizer from 2 ServiceExports; deleted 1 ServiceExports made from the dynamo.nvidia.com/mcs-export label, "+importedA) {
		t.Fatalf("cleanup of a, its Lease held by a pod that is gone: exit %d\n%s", code, out)
	}
	waitGone(t, a, serviceExport("dynamo", "svc"))
	waitGone(t, a, serviceExport("dynamo", "by-label"))

	out, code = runCleanup(t, b)
	if code != 0 || !strings.Contains(out, "0 ServiceExports made from the dynamo.nvidia.com/mcs-export label, "+imported) {
		t.Fatalf("cleanup of b: exit %d\n%s", code, out)
	}
	for _, c := range cls {
		harness.Eventually(t, c.Name+" holds no imported object", 30*time.Second, func() string {
			if now := managed(t, c); now != "0 ServiceImports, 0 derived Services and 0 EndpointSlices" {
				return now
			}
			return ""
		})
	}

	// Idempotent: a second run changes nothing.
	for _, c := range cls {
		out, code = runCleanup(t, c, "--controller-deployment=mcs-controller") // as the chart runs it
		if code != 0 || !strings.Contains(out, "removed the finalizer from 0 ServiceExports; deleted 0 ServiceExports made from the dynamo.nvidia.com/mcs-export label, 0 ServiceImports, 0 derived Services and 0 EndpointSlices") {
			t.Fatalf("second cleanup of %s: exit %d\n%s", c.Name, code, out)
		}
	}
	// The user's Services are left alone.
	var svc corev1.Service
	if err := a.Client.Get(ctx, client.ObjectKey{Namespace: "dynamo", Name: "svc"}, &svc); err != nil {
		t.Fatalf("the exported Service: %v", err)
	}
}
