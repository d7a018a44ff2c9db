package clusterset

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// StartWithChart starts the clusterset as the user manual installs it, on three clusters
// with a real node each and the project image: the chart in use1-a with the registry
// (memory store, plaintext) and a controller, its gRPC Service a NodePort that the other
// clusters' controllers (a release each) dial on the node; the Global Discovery Service from
// its example manifest with --pool-discovery=mcs in use1-a. Registry, GDS and Controller
// are nil: everything runs in pods (RegistryURL, and kubectl port-forward, reach them).
func StartWithChart(tb testing.TB, opts Options) *Clusterset {
	tb.Helper()
	names := make([]string, len(members))
	nodeLabels := map[string]map[string]string{}
	for i, m := range members {
		names[i] = m.id
		nodeLabels[m.id] = map[string]string{"topology.kubernetes.io/region": m.region, "topology.kubernetes.io/zone": m.region + "a"}
	}
	// The chart installs the CRDs.
	clusters := harness.StartClusters(tb, harness.ClusterOptions{Names: names, Dir: opts.KubeconfigDir, Nodes: true, NodeLabels: nodeLabels, SkipCRDs: true})
	cs := &Clusterset{KubeconfigDir: opts.KubeconfigDir}
	if cs.KubeconfigDir == "" {
		cs.KubeconfigDir = dirOf(clusters[0].Kubeconfig)
	}
	root, err := harness.RepoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	chart := filepath.Join(root, "charts", "global-discovery-mcs")
	repo, tag, _ := strings.Cut(harness.ProjectImage, ":")
	home := clusters[0]
	registry := harness.Release{Cluster: home, Name: "global-discovery-mcs", Deployments: []string{"mcs-registry", "mcs-controller"},
		Values: harness.WriteValues(tb, "registry", fmt.Sprintf(`image: {repository: %s, pullPolicy: Never}
registry:
  enabled: true
  grpcService: {enabled: true, type: NodePort}
controller: {enabled: true, registryAllowInsecureHttp: true, clustersetId: prod, clusterId: %s}
`, repo, home.Name))}
	registry.Install(tb, chart, tag)
	grpc := &corev1.Service{}
	if err := home.Client.Get(context.Background(), client.ObjectKey{Namespace: "mcs-system", Name: "mcs-registry-grpc"}, grpc); err != nil {
		tb.Fatal(err)
	}
	cs.RegistryURL = fmt.Sprintf("http://%s:%d", home.Nodes[0].IP, grpc.Spec.Ports[0].NodePort)
	releases := []harness.Release{registry}
	for _, c := range clusters[1:] {
		r := harness.Release{Cluster: c, Name: "mcs-controller", Deployments: []string{"mcs-controller"},
			Values: harness.WriteValues(tb, "controller-"+c.Name, fmt.Sprintf(`image: {repository: %s, pullPolicy: Never}
registry: {enabled: false}
controller: {enabled: true, registryUrls: [%q], registryAllowInsecureHttp: true, clustersetId: prod, clusterId: %s}
`, repo, cs.RegistryURL, c.Name))}
		r.Install(tb, chart, tag)
		releases = append(releases, r)
	}
	manifest, err := os.ReadFile(filepath.Join(root, "gds-client", "deploy", "global-discovery-service.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	home.Apply(tb, harness.DecodeYAML(tb, "global-discovery-service.yaml",
		[]byte(strings.ReplaceAll(string(manifest), "my-registry.example.com/global-discovery-mcs:dev", harness.ProjectImage)))...)
	for i, c := range clusters {
		releases[i].Available(tb)
		cs.Members = append(cs.Members, &Member{Cluster: c, ID: members[i].id, Region: members[i].region, PodPrefix: members[i].prefix})
	}
	home.WaitDeploymentAvailable(tb, "global-discovery", "global-discovery-service")
	return cs
}
