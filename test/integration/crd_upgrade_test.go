package integration

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// chartCRDs renders the chart's CRDs as the chart at rev installs them (an empty rev: the
// current chart).
func chartCRDs(t *testing.T, rev string) []*unstructured.Unstructured {
	t.Helper()
	sets := []string{"registry.enabled=false", "controller.enabled=false", "crds.install=true"}
	if rev == "" {
		return kindOnly(harness.RenderChart(t, sets...), "CustomResourceDefinition")
	}
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	archive := exec.Command("bash", "-c", `git -C "$1" archive "$2" charts/global-discovery-mcs | tar -x -C "$3"`, "archive", root, rev, dir)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("the chart of %s: %v\n%s", rev, err, out)
	}
	args := []string{"template", "mcs", filepath.Join(dir, "charts", "global-discovery-mcs"), "--namespace", harness.ReleaseNamespace}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, err := exec.Command(harness.Binary(t, "helm"), args...).Output()
	if err != nil {
		t.Fatalf("helm template of the chart of %s: %v", rev, err)
	}
	return kindOnly(harness.DecodeYAML(t, "helm template", out), "CustomResourceDefinition")
}

func kindOnly(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// TestChartCRDUpgrade installs the CRDs of the earlier release's chart, writes a
// ServiceExport (as v1alpha1, the older version users may still write) and a ServiceImport,
// then upgrades the CRDs to the current chart's, as `helm upgrade` applies them: both
// objects stay, readable as v1beta1, and a new ServiceExport can be written. (A cluster
// whose CRDs came from another installation, with crds.install=false, is what every other
// integration test runs: the harness installs the mcs-api module's CRDs itself.)
func TestChartCRDUpgrade(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := harness.StartClusters(t, harness.ClusterOptions{Names: []string{"use1-a"}, SkipCRDs: true})[0]
	earlier := chartCRDs(t, harness.EarlierRelease)
	if len(earlier) < 2 {
		t.Fatalf("the earlier chart renders %d CRDs", len(earlier))
	}
	c.Apply(t, earlier...)
	createNamespaces(t, ctx, c.Client, "dynamo")
	harness.Eventually(t, "a ServiceExport under the earlier CRDs", 30*time.Second, func() string {
		se := &unstructured.Unstructured{}
		se.SetAPIVersion("multicluster.x-k8s.io/v1alpha1")
		se.SetKind("ServiceExport")
		se.SetNamespace("dynamo")
		se.SetName("relay")
		if err := c.Client.Create(ctx, se); err != nil && !apierrors.IsAlreadyExists(err) {
			return err.Error()
		}
		return ""
	})
	mustCreate(t, c, &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "dynamo", Name: "relay"},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, Ports: []mcsv1beta1.ServicePort{{Port: 80, Protocol: "TCP"}}}})

	c.Apply(t, chartCRDs(t, "")...)
	harness.Eventually(t, "the objects after the CRD upgrade", 30*time.Second, func() string {
		var se mcsv1beta1.ServiceExport
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "dynamo", Name: "relay"}, &se); err != nil {
			return "ServiceExport: " + err.Error()
		}
		var si mcsv1beta1.ServiceImport
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "dynamo", Name: "relay"}, &si); err != nil {
			return "ServiceImport: " + err.Error()
		}
		if len(si.Spec.Ports) != 1 || si.Spec.Ports[0].Port != 80 {
			return fmt.Sprintf("ServiceImport ports changed: %v", si.Spec.Ports)
		}
		return ""
	})
	mustCreate(t, c, serviceExport("dynamo", "after"))
}
