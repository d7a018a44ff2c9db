package integration

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// startEarlierRegistry starts the earlier release's mcs-registry with the flags that release
// knows and the store flags given.
func startEarlierRegistry(t *testing.T, bin string, store ...string) *harness.Registry {
	t.Helper()
	r := &harness.Registry{GRPCAddr: harness.Addr(harness.FreePort(t)), RESTAddr: harness.Addr(harness.FreePort(t)), AdminAddr: harness.Addr(harness.FreePort(t))}
	r.Process = harness.StartProcess(t, "mcs-registry (earlier)", filepath.Join(bin, "mcs-registry"),
		append([]string{"--grpc-addr", r.GRPCAddr, "--rest-addr", r.RESTAddr, "--admin-addr", r.AdminAddr, "--log-format", "text",
			"--max-watches-per-client=100000"}, store...)...)
	r.WaitHTTP(t, "http://"+r.AdminAddr+"/readyz", 30*time.Second)
	return r
}

// startEarlierController starts the earlier release's mcs-controller in c, as the current
// chart's ServiceAccount, with that release's names for the listen flags.
func startEarlierController(t *testing.T, c *harness.Cluster, bin string, args ...string) *harness.Controller {
	t.Helper()
	ctl := &harness.Controller{MetricsAddr: harness.Addr(harness.FreePort(t)), ProbeAddr: harness.Addr(harness.FreePort(t))}
	all := append([]string{
		"--kubeconfig=" + c.ControllerKubeconfig(t, false, false),
		"--metrics-bind-address=" + ctl.MetricsAddr,
		"--health-probe-bind-address=" + ctl.ProbeAddr,
		"--leader-election-namespace=mcs-system",
	}, args...)
	ctl.Process = harness.StartProcess(t, "mcs-controller (earlier)", filepath.Join(bin, "mcs-controller"), all...)
	harness.FailOnForbidden(t, ctl.Process, c)
	ctl.WaitHTTP(t, "http://"+ctl.ProbeAddr+"/healthz", 60*time.Second)
	return ctl
}

// TestVersionSkew runs the earlier release (harness.EarlierRelease) beside the current
// code, as a rolling upgrade leaves them for days: the current registry with an earlier
// and a current controller; the earlier registry with the same pair; and an earlier and a
// current DynamoDB-store replica over one table, each serving one of the controllers, so
// each reads the other's items and stream records. In each, both clusters' exports import
// in both clusters and an endpoint change in either cluster reaches the other — the newer
// watch options (cluster deltas, snapshot pages) fall back against a registry that does not
// know them, and an older watch is served as it asks.
func TestVersionSkew(t *testing.T) {
	earlier := harness.EarlierBinaries(t, harness.EarlierRelease)
	for _, tc := range []struct {
		name string
		// registries returns the registries the earlier and the current controller use.
		registries func(t *testing.T) (forEarlier, forCurrent *harness.Registry)
	}{
		{"current registry", func(t *testing.T) (*harness.Registry, *harness.Registry) {
			r := harness.StartRegistry(t, "--store=memory")
			return r, r
		}},
		{"earlier registry", func(t *testing.T) (*harness.Registry, *harness.Registry) {
			r := startEarlierRegistry(t, earlier, "--store=memory")
			return r, r
		}},
		{"earlier and current replicas over one table", func(t *testing.T) (*harness.Registry, *harness.Registry) {
			d := harness.StartDynamoDB(t)
			table := newTable(t, d)
			t.Setenv("AWS_ACCESS_KEY_ID", harness.DynamoDBAccessKey)
			t.Setenv("AWS_SECRET_ACCESS_KEY", harness.DynamoDBSecretKey)
			old := startEarlierRegistry(t, earlier, "--store=dynamodb", "--dynamodb-table="+table, "--region="+d.Region, "--endpoint-url="+d.Endpoint)
			return old, dynamoRegistry(t, d, table)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			regEarlier, regCurrent := tc.registries(t)
			cls := harness.StartClusters(t, harness.ClusterOptions{Names: []string{"use1-a", "usw2-a"}})
			a, b := cls[0], cls[1]
			for _, c := range cls {
				createNamespaces(t, ctx, c.Client, "dynamo")
			}
			startEarlierController(t, a, earlier, controllerArgs(regEarlier, "use1-a")...)
			b.StartController(t, "mcs-controller/usw2-a", controllerArgs(regCurrent, "usw2-a")...)

			mustCreate(t, a, service("dynamo", "relay", 80), serviceExport("dynamo", "relay"), slice("dynamo", "relay", "relay-a", "10.1.0.1"))
			mustCreate(t, b, service("dynamo", "relay", 80), serviceExport("dynamo", "relay"), slice("dynamo", "relay", "relay-b", "10.2.0.1"))
			both := "ClusterSetIP [http/TCP/80] clusters=[use1-a usw2-a] ips svc:true [use1-a:10.1.0.1:true usw2-a:10.2.0.1:true]"
			waitImport(t, a, "dynamo", "relay", both)
			waitImport(t, b, "dynamo", "relay", both)

			// A change in each cluster reaches the other.
			for _, ch := range []struct {
				c    *harness.Cluster
				name string
			}{{a, "relay-a"}, {b, "relay-b"}} {
				var s discoveryv1.EndpointSlice
				if err := ch.c.Client.Get(ctx, client.ObjectKey{Namespace: "dynamo", Name: ch.name}, &s); err != nil {
					t.Fatal(err)
				}
				s.Endpoints[0].Conditions.Ready = ptr.To(false)
				if err := ch.c.Client.Update(ctx, &s); err != nil {
					t.Fatal(err)
				}
			}
			unready := "ClusterSetIP [http/TCP/80] clusters=[use1-a usw2-a] ips svc:true [use1-a:10.1.0.1:false usw2-a:10.2.0.1:false]"
			waitImport(t, a, "dynamo", "relay", unready)
			waitImport(t, b, "dynamo", "relay", unready)
		})
	}
}
