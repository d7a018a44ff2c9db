package nodes

import (
	"strings"
	"testing"
	"time"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// TestManualProductionOnNodes is docs/deploy.md's production path, as written, on three
// clusters with real nodes: the table made with `mcs-admin create-table` (dynoxide, which
// the registry pod reaches on the host), the registry's certificate in a kubernetes.io/tls
// Secret naming the host the controllers dial, the registry's release with the DynamoDB
// store and TLS, the CA in a ConfigMap of every cluster, https:// URLs to the registry's
// load balancer (its node port here), the controller added to the registry's release, every
// lease active over HTTPS; then a Service exported from two clusters and reached from the
// third's pod through its clusterset IP; then the rest of the page: its exports and checks,
// the Global Discovery Service, what the table holds, the upgrade, the rollback and the
// uninstall with each member cluster removed from the table. The controllers' client
// certificates are TestUpgradeOnNodes's (its DynamoDB path) and the integration tests'.
func TestManualProductionOnNodes(t *testing.T) {
	start := time.Now()
	clusters := clusterset(t)
	doc := newDeployDoc(t, "production", clusters, nil)
	doc.Run(t, "Export Services")
	t.Logf("FIGURE chart installed as docs/deploy.md says (DynamoDB, TLS), every lease active: %s", time.Since(start).Round(time.Second))
	exportAndReach(t, clusters[0], clusters[1], clusters[2])
	doc.workloads(t)
	doc.Run(t, "")
	t.Logf("FIGURE docs/deploy.md's production path, install to uninstall: %s", time.Since(start).Round(time.Second))
}

func kubectlOK(t *testing.T, c *harness.Cluster, args ...string) {
	t.Helper()
	if out, err := c.Kubectl(args...); err != nil {
		t.Fatalf("kubectl %s in %s: %v\n%s", strings.Join(args, " "), c.Name, err, out)
	}
}
