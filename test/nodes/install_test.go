package nodes

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// chartAndImage returns the chart's folder and the --set flags that run the project image
// loaded on the nodes.
func chartAndImage(t *testing.T) (string, []string) {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	repo, tag, _ := strings.Cut(harness.ProjectImage, ":")
	return filepath.Join(root, "charts", "global-discovery-mcs"),
		[]string{"--set", "image.repository=" + repo, "--set", "image.tag=" + tag, "--set", "image.pullPolicy=Never"}
}

// installEvaluation installs the chart as docs/deploy.md's evaluation path says: the first
// cluster gets the registry (memory store, plaintext) and a controller in one release, with
// the registry's gRPC Service as a NodePort; every other cluster gets a controller dialling
// it on the first cluster's node. extra adds flags to a cluster's release, by name. It waits
// until every controller and the registry are available.
func installEvaluation(t *testing.T, clusters []*harness.Cluster, extra map[string][]string) {
	t.Helper()
	chart, image := chartAndImage(t)
	first := clusters[0]
	first.Helm(t, append(append([]string{"install", "global-discovery-mcs", chart, "--namespace", "mcs-system", "--create-namespace",
		"--set", "registry.enabled=true", "--set", "controller.enabled=true",
		"--set", "controller.registryAllowInsecureHttp=true",
		"--set", "controller.clustersetId=prod", "--set", "controller.clusterId=" + first.Name,
		"--set", "registry.grpcService.enabled=true", "--set", "registry.grpcService.type=NodePort"}, image...), extra[first.Name]...)...)
	grpcSvc := &corev1.Service{}
	if err := first.Client.Get(context.Background(), client.ObjectKey{Namespace: "mcs-system", Name: "mcs-registry-grpc"}, grpcSvc); err != nil {
		t.Fatal(err)
	}
	registryURL := fmt.Sprintf("http://%s:%d", first.Nodes[0].IP, grpcSvc.Spec.Ports[0].NodePort)
	for _, c := range clusters[1:] {
		c.Helm(t, append(append([]string{"install", "mcs-controller", chart, "--namespace", "mcs-system", "--create-namespace",
			"--set", "registry.enabled=false", "--set", "controller.enabled=true",
			"--set", "controller.registryUrls={" + registryURL + "}", "--set", "controller.registryAllowInsecureHttp=true",
			"--set", "controller.clustersetId=prod", "--set", "controller.clusterId=" + c.Name}, image...), extra[c.Name]...)...)
	}
	for _, c := range clusters {
		c.WaitDeploymentAvailable(t, "mcs-system", "mcs-controller")
	}
	first.WaitDeploymentAvailable(t, "mcs-system", "mcs-registry")
}
