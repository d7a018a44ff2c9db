package nodes

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// TestManualProductionOnNodes is the manual's production path on three clusters with real
// nodes: the DynamoDB store (dynoxide, which the registry pod reaches on the host), the
// table made with `mcs-admin create-table`, the registry's certificate in a
// kubernetes.io/tls Secret naming the hosts the controllers dial, the CA in a ConfigMap of
// every cluster, https:// URLs, and each controller's own client certificate (its SPIFFE
// cluster identity, docs/security.md), required by the registry.
func TestManualProductionOnNodes(t *testing.T) {
	start := time.Now()
	ids := clustersetIDs
	clusters := clusterset(t)
	use1, usw2, euw1 := clusters[0], clusters[1], clusters[2]

	// The table, as the manual makes it.
	ddb := harness.StartDynamoDBOn(t, harness.HostIP)
	table := harness.TableName(t)
	admin := exec.Command(harness.Binary(t, "mcs-admin"), "create-table", "--table="+table, "--region="+ddb.Region, "--endpoint-url="+ddb.Endpoint)
	admin.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+harness.DynamoDBAccessKey, "AWS_SECRET_ACCESS_KEY="+harness.DynamoDBSecretKey)
	if out, err := admin.CombinedOutput(); err != nil {
		t.Fatalf("mcs-admin create-table: %v\n%s", err, out)
	}

	// Certificates: the registry's names the node address (the other clusters dial its
	// NodePort there) and the in-cluster Service name (its own cluster's controller).
	const trustDomain = "mcs.test"
	serverCA, clientCA := harness.NewCA(t, "registry-ca"), harness.NewCA(t, "client-ca")
	regCert, regKey := serverCA.IssueServer(t, "registry", []string{"mcs-registry.mcs-system.svc"}, []net.IP{net.ParseIP(use1.Nodes[0].IP)})
	for _, c := range clusters {
		kubectlOK(t, c, "create", "namespace", "mcs-system")
		kubectlOK(t, c, "-n", "mcs-system", "create", "configmap", "mcs-registry-ca", "--from-file=ca.crt="+serverCA.CertFile)
		cert, key := clientCA.IssueClient(t, "controller-"+c.Name, []string{"spiffe://" + trustDomain + "/clusterset/prod/cluster/" + c.Name}, time.Now().Add(24*time.Hour))
		kubectlOK(t, c, "-n", "mcs-system", "create", "secret", "tls", "mcs-controller-tls", "--cert="+cert, "--key="+key)
	}
	kubectlOK(t, use1, "-n", "mcs-system", "create", "secret", "tls", "mcs-registry-tls", "--cert="+regCert, "--key="+regKey)
	kubectlOK(t, use1, "-n", "mcs-system", "create", "configmap", "mcs-client-ca", "--from-file=ca.crt="+clientCA.CertFile)

	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(root, "charts", "global-discovery-mcs")
	repo, tag, _ := strings.Cut(harness.ProjectImage, ":")
	values := filepath.Join(t.TempDir(), "registry-values.yaml")
	if err := os.WriteFile(values, []byte(fmt.Sprintf(`image: {repository: %s, tag: %s, pullPolicy: Never}
registry:
  enabled: true
  store: dynamodb
  dynamodb: {table: %s, region: %s}
  tls: {secretName: mcs-registry-tls, clientCaConfigMapName: mcs-client-ca, trustDomain: %s}
  grpcService: {enabled: true, type: NodePort}
  extraArgs: ["--endpoint-url=%s"]
  extraEnv:
  - {name: AWS_ACCESS_KEY_ID, value: %s}
  - {name: AWS_SECRET_ACCESS_KEY, value: %s}
controller:
  enabled: true
  clustersetId: prod
  clusterId: use1-a
  registryTlsCa: {configMapName: mcs-registry-ca}
  registryTlsClientCert: {secretName: mcs-controller-tls}
`, repo, tag, table, ddb.Region, trustDomain, ddb.Endpoint, harness.DynamoDBAccessKey, harness.DynamoDBSecretKey)), 0o600); err != nil {
		t.Fatal(err)
	}
	use1.Helm(t, "install", "global-discovery-mcs", chart, "--namespace", "mcs-system", "--values", values)
	grpcSvc := &corev1.Service{}
	if err := use1.Client.Get(context.Background(), client.ObjectKey{Namespace: "mcs-system", Name: "mcs-registry-grpc"}, grpcSvc); err != nil {
		t.Fatal(err)
	}
	registryURL := fmt.Sprintf("https://%s:%d", use1.Nodes[0].IP, grpcSvc.Spec.Ports[0].NodePort)
	image := []string{"--set", "image.repository=" + repo, "--set", "image.tag=" + tag, "--set", "image.pullPolicy=Never"}
	for _, c := range []*harness.Cluster{usw2, euw1} {
		c.Helm(t, append([]string{"install", "mcs-controller", chart, "--namespace", "mcs-system",
			"--set", "registry.enabled=false", "--set", "controller.enabled=true",
			"--set", "controller.registryUrls={" + registryURL + "}",
			"--set", "controller.registryTlsCa.configMapName=mcs-registry-ca",
			"--set", "controller.registryTlsClientCert.secretName=mcs-controller-tls",
			"--set", "controller.clustersetId=prod", "--set", "controller.clusterId=" + c.Name}, image...)...)
	}
	for _, c := range clusters {
		c.WaitDeploymentAvailable(t, "mcs-system", "mcs-controller")
	}
	use1.WaitDeploymentAvailable(t, "mcs-system", "mcs-registry")
	t.Logf("FIGURE chart installed (DynamoDB, TLS, client certificates), registry and controllers Ready: %s", time.Since(start).Round(time.Second))

	// The clusters, over HTTPS through `kubectl port-forward`, as an administrator.
	adminCert, adminKey := clientCA.IssueClient(t, "admin", []string{"spiffe://" + trustDomain + "/admin"}, time.Now().Add(24*time.Hour))
	httpsClient := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: serverCA.ClientConfig(t, "mcs-registry.mcs-system.svc", adminCert, adminKey)}}
	pf := use1.PortForward(t, "mcs-system", "deployment/mcs-registry", 8080)
	harness.Eventually(t, "every cluster LEASE_STATE_ACTIVE", time.Minute, func() string {
		resp, err := httpsClient.Get("https://127.0.0.1:" + pf + "/v1/clustersets/prod/clusters")
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if got := strings.Count(string(body), `"state":"LEASE_STATE_ACTIVE"`); got != len(ids) {
			return fmt.Sprintf("%s: %s", resp.Status, body)
		}
		return ""
	})

	// A Service exported from use1-a and usw2-a, reached from euw1-a's pod.
	exportAndReach(t, use1, usw2, euw1)
}

func kubectlOK(t *testing.T, c *harness.Cluster, args ...string) {
	t.Helper()
	if out, err := c.Kubectl(args...); err != nil {
		t.Fatalf("kubectl %s in %s: %v\n%s", strings.Join(args, " "), c.Name, err, out)
	}
}
