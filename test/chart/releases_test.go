package chart

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// TestTwoReleasesInOneNamespace installs the chart twice into one namespace of a real
// kube-apiserver with `helm install`: the first with the manual's names, the second with
// fullnameOverride. Without the override the second install is refused (its objects
// belong to the first release); with it every object, namespaced or cluster-wide, is its
// own, its Services select only its pods, its controller dials its own registry and holds
// its own Lease, and uninstalling it leaves the first release whole.
func TestTwoReleasesInOneNamespace(t *testing.T) {
	cl := harness.StartClusters(t, harness.ClusterOptions{SkipCRDs: true})[0]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	helm := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, harness.Binary(t, "helm"), append(args, "--kubeconfig", cl.Kubeconfig, "--namespace", "shared")...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	values := []string{"--set", "controller.enabled=true", "--set", "controller.registryAllowInsecureHttp=true", "--set", "controller.clustersetId=prod", "--set", "controller.clusterId=use1-a",
		"--set", "controller.metrics.secure=true", "--set", "registry.grpcService.enabled=true"}
	if out, err := helm(append([]string{"install", "prod", chartDir(t), "--create-namespace"}, values...)...); err != nil {
		t.Fatalf("helm install prod: %v\n%s", err, out)
	}
	out, err := helm(append([]string{"install", "clash", chartDir(t), "--set", "crds.install=false"}, values...)...)
	if err == nil || !strings.Contains(out, "exists and cannot be imported into the current release") {
		t.Fatalf("a second release with the same names: %v\n%s\nwant helm's refusal of objects owned by release prod", err, out)
	}
	out, err = helm(append([]string{"install", "staging", chartDir(t), "--set", "fullnameOverride=staging", "--set", "crds.install=false"}, values...)...)
	if err != nil {
		t.Fatalf("helm install staging with fullnameOverride: %v\n%s", err, out)
	}
	if !strings.Contains(out, "deployment/staging-registry") || !strings.Contains(out, "deployment/staging-controller") {
		t.Fatalf("the staging release's notes do not name its own Deployments:\n%s", out)
	}

	owner := func(o client.Object) string { return o.GetAnnotations()["meta.helm.sh/release-name"] }
	want := map[string]string{"mcs-registry": "prod", "mcs-controller": "prod", "staging-registry": "staging", "staging-controller": "staging"}
	for name, release := range want {
		var d appsv1.Deployment
		if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: "shared", Name: name}, &d); err != nil {
			t.Fatalf("Deployment %s: %v", name, err)
		}
		if owner(&d) != release || d.Spec.Selector.MatchLabels["app.kubernetes.io/instance"] != release {
			t.Errorf("Deployment %s belongs to %q and selects instance %q, want %s", name, owner(&d), d.Spec.Selector.MatchLabels["app.kubernetes.io/instance"], release)
		}
		args := d.Spec.Template.Spec.Containers[0].Args
		switch {
		case release == "staging" && strings.HasSuffix(name, "controller"):
			if !slices.Contains(args, "--registry-url=http://staging-registry.shared.svc:9090") || !slices.Contains(args, "--leader-election-id=staging-controller.multicluster.dynamo.nvidia.com") {
				t.Errorf("staging controller args %v: want its own registry and Lease", args)
			}
			if sa := d.Spec.Template.Spec.ServiceAccountName; sa != "staging-controller" {
				t.Errorf("staging controller runs as %s", sa)
			}
		case release == "prod" && strings.HasSuffix(name, "controller"):
			if !slices.Contains(args, "--registry-url=http://mcs-registry.shared.svc:9090") || !slices.Contains(args, "--leader-election-id=mcs-controller.multicluster.dynamo.nvidia.com") {
				t.Errorf("prod controller args %v: want the manual's registry URL and the default Lease", args)
			}
		}
	}
	for _, name := range []string{"mcs-registry", "mcs-registry-grpc", "staging-registry", "staging-registry-grpc"} {
		var s corev1.Service
		if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: "shared", Name: name}, &s); err != nil {
			t.Fatalf("Service %s: %v", name, err)
		}
		if s.Spec.Selector["app.kubernetes.io/instance"] != owner(&s) {
			t.Errorf("Service %s of release %s selects instance %q", name, owner(&s), s.Spec.Selector["app.kubernetes.io/instance"])
		}
	}
	for _, name := range []string{"shared-mcs-controller", "shared-staging-controller", "shared-mcs-controller-metrics-reader", "shared-staging-controller-metrics-reader"} {
		var r rbacv1.ClusterRole
		if err := cl.Client.Get(ctx, client.ObjectKey{Name: name}, &r); err != nil {
			t.Errorf("ClusterRole %s: %v", name, err)
		}
	}

	// Uninstalling staging (its cleanup hook needs a running controller: skipped here)
	// removes its objects only.
	if out, err := helm("uninstall", "staging", "--no-hooks", "--wait", "--timeout", "60s"); err != nil {
		t.Fatalf("helm uninstall staging: %v\n%s", err, out)
	}
	var d appsv1.Deployment
	for _, name := range []string{"mcs-registry", "mcs-controller"} {
		if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: "shared", Name: name}, &d); err != nil {
			t.Errorf("prod's Deployment %s after staging's uninstall: %v", name, err)
		}
	}
	if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: "shared", Name: "staging-registry"}, &d); err == nil {
		t.Errorf("staging-registry survived its release's uninstall")
	}
	if out, err := helm("status", "prod"); err != nil || !strings.Contains(out, "STATUS: deployed") {
		t.Errorf("helm status prod: %v\n%s", err, out)
	}
}
