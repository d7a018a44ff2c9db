package integration

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// TestControllerRefusesV1alpha1OnlyCRDs: against a real kube-apiserver whose MCS CRDs serve
// only v1alpha1, mcs-controller exits at start-up with an error naming each CRD, the
// version it lacks and the remedy.
func TestControllerRefusesV1alpha1OnlyCRDs(t *testing.T) {
	cl := harness.StartClusters(t, harness.ClusterOptions{SkipCRDs: true})[0]
	crds, err := harness.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	var old []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range crds {
		if crd.Spec.Group != "multicluster.x-k8s.io" {
			continue
		}
		var keep []apiextensionsv1.CustomResourceDefinitionVersion
		for _, v := range crd.Spec.Versions {
			if v.Name == "v1alpha1" {
				v.Storage, v.Served = true, true
				keep = append(keep, v)
			}
		}
		crd.Spec.Versions = keep
		old = append(old, crd)
	}
	if len(old) != 2 {
		t.Fatalf("want the ServiceExport and ServiceImport CRDs, got %d", len(old))
	}
	if _, err := envtest.InstallCRDs(cl.Config, envtest.CRDInstallOptions{CRDs: old}); err != nil {
		t.Fatalf("install v1alpha1-only CRDs: %v", err)
	}
	cmd := exec.Command(harness.Binary(t, "mcs-controller"), "--kubeconfig="+cl.Kubeconfig,
		"--registry-url=http://127.0.0.1:1", "--registry-allow-insecure-http",
		"--clusterset-id=prod", "--cluster-id=a", "--region=r", "--leader-elect=false",
		"--metrics-addr=0", "--health-probe-addr="+harness.Addr(harness.FreePort(t)))
	done := make(chan struct{})
	var out []byte
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		t.Fatal("mcs-controller did not exit against v1alpha1-only CRDs")
	}
	var exit *exec.ExitError
	if !asExit(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("mcs-controller: %v, want exit status 1; output:\n%s", err, out)
	}
	for _, want := range []string{
		"CRD serviceexports.multicluster.x-k8s.io serves v1alpha1 but not v1beta1",
		"CRD serviceimports.multicluster.x-k8s.io serves v1alpha1 but not v1beta1",
		"install the mcs-api v0.5.2 CRDs", "crds.install=true",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
