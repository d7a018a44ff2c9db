package nodes

import (
	"context"
	"encoding/json"
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

// TestUpgradeOnNodes upgrades a clusterset under traffic, as docs/deploy.md ("Upgrade")
// says: the chart and image of the earlier release (harness.EarlierRelease, its image
// built by its own `make image`) installed on three clusters with real nodes, a Service
// exported from two of them with real pods, and a client pod in the third sending requests
// through the import's clusterset IP the whole time. The registry's release is upgraded to
// the current chart and image, then each controller release, then one controller release is
// rolled back. It runs on both transport paths of the manual: the memory store over
// plaintext, and the DynamoDB store over TLS with client certificates.
//
// FIGUREs: the time each cluster was without the imported endpoints of each source (an
// EndpointSlice watch; goal 0 s), the traffic client's failed requests (goal 0), the export
// writes the controllers made to the registry (goal: at most one sync per cluster, for the
// upgrade and for the rollback), and the reconcilers' errors (goal 0).
func TestUpgradeOnNodes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("real nodes need root (network namespaces, cgroups, containerd)")
	}
	// New clusters for each path, not the package's shared ones: on clusters reset after
	// the other tests, beside the integration tests, the second path lost a request of its
	// traffic pod (2 s timeout) in two runs and its controller wrote twice in a third; on
	// new clusters it had not. Why is not known yet. The shared clusters stop first, so the
	// machine runs one clusterset at a time.
	dropClusterset(t)
	start := time.Now()
	rev := harness.EarlierRelease
	from := earlierRelease{
		rev:   rev,
		image: harness.EarlierImage(t, rev),
		chart: harness.EarlierChart(t, rev),
		bin:   harness.EarlierBinaries(t, rev),
	}
	t.Logf("FIGURE the earlier release %s: image, chart and binaries ready in %s", rev, time.Since(start).Round(time.Second))
	t.Run("MemoryPlaintext", func(t *testing.T) { upgradeUnderTraffic(t, from, false) })
	t.Run("DynamoDBTLS", func(t *testing.T) { upgradeUnderTraffic(t, from, true) })
}

type earlierRelease struct {
	rev   string
	image harness.NodeImage
	chart string
	bin   string
}

func upgradeUnderTraffic(t *testing.T, from earlierRelease, secure bool) {
	start := time.Now()
	clusters := harness.StartClusters(t, clustersetOptions())
	use1, usw2, euw1 := clusters[0], clusters[1], clusters[2]
	for _, c := range clusters {
		c.ImportImage(t, from.image)
		kubectlOK(t, c, "create", "namespace", "mcs-system")
	}
	t.Logf("FIGURE three clusters with a Ready node each, the earlier image loaded: %s", time.Since(start).Round(time.Second))

	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(root, "charts", "global-discovery-mcs")
	repo, tag, _ := strings.Cut(harness.ProjectImage, ":")
	writeValues := func(name, content string) string {
		return harness.WriteValues(t, name, fmt.Sprintf("image: {repository: %s, pullPolicy: Never}\n", repo)+content)
	}

	// The registry's cluster runs one release with the registry and its controller, as the
	// manual says; the other clusters one controller release each.
	var registryValues, controllerValues, scheme string
	var rest *http.Client
	if !secure {
		scheme, rest = "http", &http.Client{Timeout: 5 * time.Second}
		registryValues = `registry:
  enabled: true
  grpcService: {enabled: true, type: NodePort}
controller: {enabled: true, registryAllowInsecureHttp: true, clustersetId: prod, clusterId: use1-a}
`
		controllerValues = `registry: {enabled: false}
controller: {enabled: true, registryUrls: ["%s"], registryAllowInsecureHttp: true, clustersetId: prod, clusterId: %s}
`
	} else {
		scheme = "https"
		// The table as a user of the earlier release made it, with its mcs-admin.
		ddb := harness.StartDynamoDBOn(t, harness.HostIP)
		table := harness.TableName(t)
		admin := exec.Command(filepath.Join(from.bin, "mcs-admin"), "create-table", "--table="+table, "--region="+ddb.Region, "--endpoint-url="+ddb.Endpoint)
		admin.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+harness.DynamoDBAccessKey, "AWS_SECRET_ACCESS_KEY="+harness.DynamoDBSecretKey)
		if out, err := admin.CombinedOutput(); err != nil {
			t.Fatalf("mcs-admin create-table (%s): %v\n%s", from.rev, err, out)
		}
		const trustDomain = "mcs.test"
		serverCA, clientCA := harness.NewCA(t, "registry-ca"), harness.NewCA(t, "client-ca")
		regCert, regKey := serverCA.IssueServer(t, "registry", []string{"mcs-registry.mcs-system.svc"}, []net.IP{net.ParseIP(use1.Nodes[0].IP)})
		for _, c := range clusters {
			kubectlOK(t, c, "-n", "mcs-system", "create", "configmap", "mcs-registry-ca", "--from-file=ca.crt="+serverCA.CertFile)
			cert, key := clientCA.IssueClient(t, "controller-"+c.Name, []string{"spiffe://" + trustDomain + "/clusterset/prod/cluster/" + c.Name}, time.Now().Add(24*time.Hour))
			kubectlOK(t, c, "-n", "mcs-system", "create", "secret", "tls", "mcs-controller-tls", "--cert="+cert, "--key="+key)
		}
		kubectlOK(t, use1, "-n", "mcs-system", "create", "secret", "tls", "mcs-registry-tls", "--cert="+regCert, "--key="+regKey)
		kubectlOK(t, use1, "-n", "mcs-system", "create", "configmap", "mcs-client-ca", "--from-file=ca.crt="+clientCA.CertFile)
		registryValues = fmt.Sprintf(`registry:
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
`, table, ddb.Region, trustDomain, ddb.Endpoint, harness.DynamoDBAccessKey, harness.DynamoDBSecretKey)
		controllerValues = `registry: {enabled: false}
controller:
  enabled: true
  registryUrls: ["%s"]
  registryTlsCa: {configMapName: mcs-registry-ca}
  registryTlsClientCert: {secretName: mcs-controller-tls}
  clustersetId: prod
  clusterId: %s
`
		adminCert, adminKey := clientCA.IssueClient(t, "admin", []string{"spiffe://" + trustDomain + "/admin"}, time.Now().Add(24*time.Hour))
		rest = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: serverCA.ClientConfig(t, "mcs-registry.mcs-system.svc", adminCert, adminKey)}}
	}

	// Install the earlier release.
	registry := harness.Release{Cluster: use1, Name: "mcs-registry", Values: writeValues("registry", registryValues), Deployments: []string{"mcs-registry", "mcs-controller"}}
	registry.Install(t, from.chart, from.rev)
	registry.Available(t)
	grpcSvc := &corev1.Service{}
	if err := use1.Client.Get(context.Background(), client.ObjectKey{Namespace: "mcs-system", Name: "mcs-registry-grpc"}, grpcSvc); err != nil {
		t.Fatal(err)
	}
	registryURL := fmt.Sprintf("%s://%s:%d", scheme, use1.Nodes[0].IP, grpcSvc.Spec.Ports[0].NodePort)
	controllers := map[string]harness.Release{}
	for _, c := range []*harness.Cluster{usw2, euw1} {
		r := harness.Release{Cluster: c, Name: "mcs-controller", Values: writeValues("controller-"+c.Name, fmt.Sprintf(controllerValues, registryURL, c.Name)), Deployments: []string{"mcs-controller"}}
		r.Install(t, from.chart, from.rev)
		r.Available(t)
		controllers[c.Name] = r
	}
	for _, c := range clusters {
		c.WaitDeploymentAvailable(t, "mcs-system", "mcs-controller")
		wantImage(t, c, "mcs-controller", from.image.Ref)
	}
	use1.WaitDeploymentAvailable(t, "mcs-system", "mcs-registry")
	wantImage(t, use1, "mcs-registry", from.image.Ref)
	t.Logf("FIGURE the earlier release %s installed, registry and controllers Ready: %s", from.rev, time.Since(start).Round(time.Second))

	// The workload and its traffic.
	ip := exportAndReach(t, use1, usw2, euw1)
	// Every cluster holds both exports' endpoints before the upgrade begins: one that had
	// not imported them yet (an earlier controller still in its watch's backoff) would
	// count a wait from before the upgrade as the upgrade's outage.
	for _, c := range clusters {
		harness.Eventually(t, c.Name+" imports dynamo/echo's endpoints from use1-a and usw2-a", 2*time.Minute, func() string {
			from, err := c.ImportedFrom(context.Background(), "dynamo", "echo")
			if err != nil {
				return err.Error()
			}
			if !from["use1-a"] || !from["usw2-a"] {
				return fmt.Sprintf("Ready endpoints from %v", from)
			}
			return ""
		})
	}
	traffic := startTraffic(t, euw1, ip)
	var monitors []*harness.EndpointsMonitor
	for _, c := range clusters {
		monitors = append(monitors, c.MonitorImportedEndpoints(t, "dynamo", "echo", "use1-a", "usw2-a"))
	}
	scrape := scrapeControllers(t, clusters)
	before := scrape.counts()
	// The earlier release's controller pods are replaced by the upgrade, and their logs go
	// with them: followed from now, for an outage to say what they did.
	earlierLogs := make([]func() string, len(clusters))
	for i, c := range clusters {
		earlierLogs[i] = c.FollowLogs(t, "mcs-system", "app.kubernetes.io/name=mcs-controller")
	}

	// The whole import in the registry: both exporting clusters' exports (after a memory
	// registry's restart, every cluster has sent its exports again).
	whole := func(what string) {
		t.Helper()
		pf := use1.PortForward(t, "mcs-system", "deployment/mcs-registry", 8080)
		harness.Eventually(t, what+": the registry holds use1-a's and usw2-a's exports", 2*time.Minute, func() string {
			resp, err := rest.Get(scheme + "://127.0.0.1:" + pf + "/v1/clustersets/prod/imports")
			if err != nil {
				return err.Error()
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"use1-a"`) || !strings.Contains(string(body), `"usw2-a"`) {
				return fmt.Sprintf("%s: %s", resp.Status, body)
			}
			return ""
		})
	}
	// settle waits until every cluster's lease was renewed after since (each controller
	// renews every 10 s): a change has then gone through a renewal of every cluster, and
	// an outage it caused would have begun.
	settle := func(what string, since time.Time) {
		t.Helper()
		pf := use1.PortForward(t, "mcs-system", "deployment/mcs-registry", 8080)
		harness.Eventually(t, what+": every cluster's lease renewed since", time.Minute, func() string {
			resp, err := rest.Get(scheme + "://127.0.0.1:" + pf + "/v1/clustersets/prod/clusters")
			if err != nil {
				return err.Error()
			}
			defer resp.Body.Close()
			var list struct {
				Clusters []struct {
					ClusterID string `json:"clusterId"`
					Lease     struct {
						RenewTime time.Time `json:"renewTime"`
					} `json:"lease"`
				} `json:"clusters"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
				return fmt.Sprintf("%s: %v", resp.Status, err)
			}
			renewed := 0
			for _, c := range list.Clusters {
				if c.Lease.RenewTime.After(since) {
					renewed++
				}
			}
			if renewed < len(clusters) {
				return fmt.Sprintf("%d of %d clusters renewed since %s: %+v", renewed, len(clusters), since.Format(time.RFC3339Nano), list.Clusters)
			}
			return ""
		})
	}
	step := func(what string, fn func()) {
		t.Helper()
		began := time.Now()
		fn()
		t.Logf("FIGURE %s: %s", what, time.Since(began).Round(100*time.Millisecond))
	}

	// The upgrade: the registry's release first, then each controller release.
	step("helm upgrade of the registry's release (registry and use1-a's controller) to the current release", func() {
		registry.Upgrade(t, chart, tag)
		wantImage(t, use1, "mcs-registry", harness.ProjectImage)
		wantImage(t, use1, "mcs-controller", harness.ProjectImage)
		whole("after the registry's upgrade")
	})
	for _, c := range []*harness.Cluster{usw2, euw1} {
		step("helm upgrade of "+c.Name+"'s controller release", func() {
			controllers[c.Name].Upgrade(t, chart, tag)
			wantImage(t, c, "mcs-controller", harness.ProjectImage)
		})
	}
	// Every controller release is upgraded: each cluster renews through its new controller.
	settle("after the upgrade", time.Now())
	upgraded := scrape.counts()

	// A rollback of one controller release: the earlier controller against the current registry.
	step("helm rollback of usw2-a's controller release", func() {
		controllers["usw2-a"].Rollback(t)
		wantImage(t, usw2, "mcs-controller", from.image.Ref)
	})
	settle("after the rollback", time.Now())
	end := scrape.stop()

	// The figures.
	for i, m := range monitors {
		m.Stop()
		if err := m.Err(); err != nil {
			t.Fatal(err)
		}
		for _, src := range []string{"use1-a", "usw2-a"} {
			d := m.Outage()[src]
			t.Logf("FIGURE time without imported endpoints from %s in %s through the upgrade and the rollback: %s", src, clusters[i].Name, d.Round(time.Millisecond))
			if d > 0 {
				t.Errorf("%s had no endpoints from %s for %s during the upgrade: %s", clusters[i].Name, src, d, strings.Join(m.Causes()[src], "; "))
				// What the controllers of that cluster said of holds and imports.
				out, _ := clusters[i].Kubectl("-n", "mcs-system", "logs", "-l", "app.kubernetes.io/name=mcs-controller", "--prefix", "--tail=-1", "--max-log-requests=10")
				t.Logf("the controllers of %s on holds, epochs and removed imports:\n%s", clusters[i].Name,
					grepAny(out, "hold", "epoch", "started empty", "import removed", "leader", "registered"))
				t.Logf("the earlier release's controllers of %s, before the upgrade replaced them:\n%s", clusters[i].Name,
					grepAny(earlierLogs[i](), "hold", "epoch", "started empty", "import removed", "leader", "registered", "refill", "snapshot", "watch"))
			}
		}
	}
	ok, failed := traffic.results(t)
	t.Logf("FIGURE requests from euw1-a's client pod through the clusterset IP %s during the upgrade and the rollback: %d answered, %d failed", ip, ok, len(failed))
	if ok == 0 || len(failed) > 0 {
		t.Errorf("requests through %s: %d answered, failed: %v", ip, ok, failed)
	}
	for _, c := range clusters {
		up, back := upgraded.since(before, c.Name), end.since(upgraded, c.Name)
		t.Logf("FIGURE export writes to the registry by %s's controller: upgrade %s; rollback %s", c.Name, up, back)
		if up.syncs > 1 || up.puts+up.deletes > 0 || back.syncs > 1 || back.puts+back.deletes > 0 {
			t.Errorf("%s's controller wrote more than one sync to the registry: upgrade %s, rollback %s", c.Name, up, back)
		}
	}
	// The rolled-back controller still exports: usw2-a's endpoints follow a scale-down.
	kubectlOK(t, usw2, "-n", "dynamo", "scale", "deployment/echo", "--replicas=1")
	harness.Eventually(t, "usw2-a's scale-down reaches euw1-a through the rolled-back controller", time.Minute, func() string {
		if n := readyEndpoints(t, euw1, "echo", "usw2-a"); n != 1 {
			return fmt.Sprintf("%d ready endpoints from usw2-a", n)
		}
		return ""
	})
	// The current release's controllers must count no error. The rolled-back controller
	// runs the earlier release, which rewrites the slices this release hinted and counts a
	// write refused as a conflict from its stale cache as an error (this release reconciles
	// again instead): its errors are reported, not asserted.
	errs, earlierErrs := end.of(harness.ProjectImage, true).since(before, ""), end.of(harness.ProjectImage, false).since(before, "")
	t.Logf("FIGURE reconciler errors of the controllers through the upgrade and the rollback: %d of the current release, %d of the earlier release's rolled-back controller (%d scrapes of every controller pod's /metrics)",
		int(errs.errors), int(earlierErrs.errors), scrape.rounds())
	if errs.errors > 0 {
		t.Errorf("the current release's reconcilers failed %d times during the upgrade: %s", int(errs.errors), end.of(harness.ProjectImage, true).errorsBy())
	}
}

// wantImage checks that every pod of the Deployment runs image, and no other pod is left.
func wantImage(t *testing.T, c *harness.Cluster, deployment, image string) {
	t.Helper()
	harness.Eventually(t, fmt.Sprintf("%s's %s pods run %s", c.Name, deployment, image), 2*time.Minute, func() string {
		var pods corev1.PodList
		if err := c.Client.List(context.Background(), &pods, client.InNamespace("mcs-system"), client.MatchingLabels{"app.kubernetes.io/name": deployment}); err != nil {
			return err.Error()
		}
		var other []string
		for _, p := range pods.Items {
			if len(p.Spec.Containers) == 0 || p.Spec.Containers[0].Image != image {
				other = append(other, p.Name+" "+p.Spec.Containers[0].Image)
			}
		}
		if len(pods.Items) == 0 || len(other) > 0 {
			return fmt.Sprintf("%d pods; other images: %v", len(pods.Items), other)
		}
		return ""
	})
}

// grepAny returns the lines of s that contain any of subs.
func grepAny(s string, subs ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, sub := range subs {
			if strings.Contains(l, sub) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
