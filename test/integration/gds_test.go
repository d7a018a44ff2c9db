package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ai-dynamo/global-discovery-mcs/gds-client/api"
	gdsclient "github.com/ai-dynamo/global-discovery-mcs/gds-client/client"
	st "github.com/ai-dynamo/global-discovery-mcs/gds-client/discovery/slicetest"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// waitBody polls url until its body equals want.
func waitBody(t *testing.T, url, want string) {
	t.Helper()
	harness.Eventually(t, "GET "+url, 20*time.Second, func() string {
		if code, body := get(t, url); code != 200 || body != want {
			return " got: " + body + "\nwant: " + want
		}
		return ""
	})
}

func createSlices(t *testing.T, ctx context.Context, c client.Client, slices ...*discoveryv1.EndpointSlice) {
	t.Helper()
	for _, s := range slices {
		if err := c.Create(ctx, s); err != nil {
			t.Fatalf("create slice %s/%s: %v", s.Namespace, s.Name, err)
		}
	}
}

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// memberCluster is the preamble of the single-cluster tests: one local cluster, use1-a,
// with the namespace dynamo.
func memberCluster(t *testing.T, ctx context.Context) *harness.Cluster {
	t.Helper()
	cl := harness.StartClusters(t, harness.ClusterOptions{Names: []string{"use1-a"}})[0]
	createNamespaces(t, ctx, cl.Client, "dynamo")
	return cl
}

func createNamespaces(t *testing.T, ctx context.Context, c client.Client, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatalf("create namespace %s: %v", n, err)
		}
	}
}

var (
	relayPorts  = []st.Port{{Name: "http", Port: 8080}}
	routerPorts = []st.Port{{Name: "http", Port: 8000}, {Name: "metrics", Port: 9100}}
)

// TestGlobalDiscoveryServiceMCS runs the real global-discovery-service against a real
// kube-apiserver holding slices written as mcs-controller writes them.
func TestGlobalDiscoveryServiceMCS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := harness.StartClusters(t, harness.ClusterOptions{SkipCRDs: true})[0]
	createNamespaces(t, ctx, cl.Client, "dynamo", "global-discovery")
	yes, no := st.Bool(true), st.Bool(false)
	createSlices(t, ctx, cl.Client,
		st.MCS("use1-a", "dynamo", "my-dgd-pool-relay", "derived-q2b3c4d5e6", "", relayPorts,
			st.Endpoint{IP: "10.1.0.11", Ready: yes, Pod: "my-dgd-pool-relay-0"}, st.Endpoint{IP: "10.1.0.12", Ready: no, Pod: "my-dgd-pool-relay-1"}),
		st.MCS("usw2-a", "dynamo", "my-dgd-pool-relay", "derived-q2b3c4d5e6", "", relayPorts,
			st.Endpoint{IP: "10.2.0.11", Pod: "my-dgd-pool-relay-0"}), // ready unset: ready
		st.MCS("euw1-a", "dynamo", "other-pool-relay", "derived-a1a1a1a1a1", "", relayPorts,
			st.Endpoint{IP: "10.3.0.11", Ready: no}), // no ready endpoint: not a pool
		st.MCS("use1-a", "global-discovery", "global-router", "derived-r0r0r0r0r0", "", routerPorts,
			st.Endpoint{IP: "10.1.1.5", Ready: yes, Pod: "global-router-7f9c-abcde"}),
		st.MCS("usw2-a", "global-discovery", "global-router", "derived-r0r0r0r0r0", "", routerPorts,
			st.Endpoint{IP: "fd00:10:2::5", Ready: yes, Hostname: "global-router-0"}),
	)
	port := harness.FreePort(t)
	base := "http://" + harness.Addr(port)
	gds := cl.StartGlobalDiscoveryService(t, "global-discovery-service",
		"--http-addr="+harness.Addr(port), "--pool-discovery=mcs",
		"--router-namespace=global-discovery", "--router-service=global-router", "--router-port-name=http")
	gds.WaitHTTP(t, base+"/readyz", 30*time.Second)

	waitBody(t, base+"/pools", `{"api_version":"gds.dynamo.nvidia.com/v1","pools":[`+
		`{"key":{"cluster_id":"use1-a","namespace":"dynamo","dgd_name":"my-dgd"},"service":"my-dgd-pool-relay","endpoints":[`+
		`{"address":"10.1.0.11","ready":true,"target_pod":"my-dgd-pool-relay-0","ports":[{"name":"http","protocol":"TCP","port":8080}]},`+
		`{"address":"10.1.0.12","ready":false,"target_pod":"my-dgd-pool-relay-1","ports":[{"name":"http","protocol":"TCP","port":8080}]}]},`+
		`{"key":{"cluster_id":"usw2-a","namespace":"dynamo","dgd_name":"my-dgd"},"service":"my-dgd-pool-relay","endpoints":[`+
		`{"address":"10.2.0.11","ready":true,"target_pod":"my-dgd-pool-relay-0","ports":[{"name":"http","protocol":"TCP","port":8080}]}]}]}`+"\n")
	waitBody(t, base+"/routers", `{"api_version":"gds.dynamo.nvidia.com/v1","routers":[`+
		`{"id":"use1-a/global-router-7f9c-abcde","cluster_id":"use1-a","replica":"global-router-7f9c-abcde","address":"10.1.1.5","url":"http://10.1.1.5:8000"},`+
		`{"id":"usw2-a/global-router-0","cluster_id":"usw2-a","replica":"global-router-0","address":"fd00:10:2::5","url":"http://[fd00:10:2::5]:8000"}]}`+"\n")

	harness.CheckMetrics(t, base+"/metrics")

	// The typed client reads the same.
	c := gdsclient.New(base, nil)
	pools, err := c.Pools(ctx)
	if err != nil || len(pools) != 2 || pools[1].Key != (api.PoolKey{ClusterID: "usw2-a", Namespace: "dynamo", DGDName: "my-dgd"}) {
		t.Fatalf("client Pools = %+v, %v", pools, err)
	}
	routers, err := c.Routers(ctx)
	if err != nil || len(routers) != 2 || routers[0].URL != "http://10.1.1.5:8000" {
		t.Fatalf("client Routers = %+v, %v", routers, err)
	}

	// usw2-a's lease expires: the controller deletes its slices; its pool and router go at once.
	if err := cl.Client.DeleteAllOf(ctx, &discoveryv1.EndpointSlice{}, client.InNamespace("dynamo"), client.MatchingLabels{"multicluster.kubernetes.io/source-cluster": "usw2-a"}); err != nil {
		t.Fatal(err)
	}
	if err := cl.Client.DeleteAllOf(ctx, &discoveryv1.EndpointSlice{}, client.InNamespace("global-discovery"), client.MatchingLabels{"multicluster.kubernetes.io/source-cluster": "usw2-a"}); err != nil {
		t.Fatal(err)
	}
	waitBody(t, base+"/routers", `{"api_version":"gds.dynamo.nvidia.com/v1","routers":[`+
		`{"id":"use1-a/global-router-7f9c-abcde","cluster_id":"use1-a","replica":"global-router-7f9c-abcde","address":"10.1.1.5","url":"http://10.1.1.5:8000"}]}`+"\n")
	if _, body := get(t, base+"/pools"); strings.Contains(body, "usw2-a") {
		t.Fatalf("pools still list usw2-a: %s", body)
	}

	// An endpoint becoming ready makes euw1-a's pool appear.
	var s discoveryv1.EndpointSlice
	if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: "dynamo", Name: "derived-a1a1a1a1a1-euw1-a"}, &s); err != nil {
		t.Fatal(err)
	}
	s.Endpoints[0].Conditions.Ready = yes
	if err := cl.Client.Update(ctx, &s); err != nil {
		t.Fatal(err)
	}
	waitBody(t, base+"/pools", `{"api_version":"gds.dynamo.nvidia.com/v1","pools":[`+
		`{"key":{"cluster_id":"euw1-a","namespace":"dynamo","dgd_name":"other"},"service":"other-pool-relay","endpoints":[`+
		`{"address":"10.3.0.11","ready":true,"ports":[{"name":"http","protocol":"TCP","port":8080}]}]},`+
		`{"key":{"cluster_id":"use1-a","namespace":"dynamo","dgd_name":"my-dgd"},"service":"my-dgd-pool-relay","endpoints":[`+
		`{"address":"10.1.0.11","ready":true,"target_pod":"my-dgd-pool-relay-0","ports":[{"name":"http","protocol":"TCP","port":8080}]},`+
		`{"address":"10.1.0.12","ready":false,"target_pod":"my-dgd-pool-relay-1","ports":[{"name":"http","protocol":"TCP","port":8080}]}]}]}`+"\n")
	if _, body := get(t, base+"/metrics"); !strings.Contains(body, "gds_discovery_pools 2") {
		t.Fatalf("metrics: %s", grepLines(body, "gds_"))
	}

	// A slice that moves to another source cluster moves its router with it.
	var rs discoveryv1.EndpointSlice
	if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: "global-discovery", Name: "derived-r0r0r0r0r0-use1-a"}, &rs); err != nil {
		t.Fatal(err)
	}
	rs.Labels["multicluster.kubernetes.io/source-cluster"] = "euw1-a"
	if err := cl.Client.Update(ctx, &rs); err != nil {
		t.Fatal(err)
	}
	waitBody(t, base+"/routers", `{"api_version":"gds.dynamo.nvidia.com/v1","routers":[`+
		`{"id":"euw1-a/global-router-7f9c-abcde","cluster_id":"euw1-a","replica":"global-router-7f9c-abcde","address":"10.1.1.5","url":"http://10.1.1.5:8000"}]}`+"\n")

	// A router port name that does not exist: no routers, and a log line naming it.
	port2 := harness.FreePort(t)
	wrong := cl.StartGlobalDiscoveryService(t, "global-discovery-service-wrong-port",
		"--http-addr="+harness.Addr(port2), "--pool-discovery=mcs",
		"--router-namespace=global-discovery", "--router-service=global-router", "--router-port-name=grpc")
	wrong.WaitHTTP(t, "http://"+harness.Addr(port2)+"/readyz", 30*time.Second)
	waitBody(t, "http://"+harness.Addr(port2)+"/routers", `{"api_version":"gds.dynamo.nvidia.com/v1","routers":[]}`+"\n")
	if out := wrong.Output(); !strings.Contains(out, `router port name \"grpc\": no TCP port of that name`) {
		t.Fatalf("no log line names the missing router port:\n%s", out)
	}
}

// TestGlobalDiscoveryServiceKarmada reads slices as Karmada imports them.
func TestGlobalDiscoveryServiceKarmada(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := harness.StartClusters(t, harness.ClusterOptions{SkipCRDs: true})[0]
	createNamespaces(t, ctx, cl.Client, "dynamo", "global-discovery")
	createSlices(t, ctx, cl.Client,
		st.Karmada("member1", "dynamo", "my-dgd-pool-relay", "x7k2p", relayPorts, st.Endpoint{IP: "10.1.0.11", Ready: st.Bool(true)}),
		st.Karmada("member2", "global-discovery", "global-router", "m3n4b", routerPorts, st.Endpoint{IP: "10.2.1.5", Pod: "global-router-0"}),
		// An mcs-controller slice is not read in karmada mode.
		st.MCS("use1-a", "dynamo", "my-dgd-pool-relay", "derived-q2b3c4d5e6", "", relayPorts, st.Endpoint{IP: "10.9.0.1"}),
	)
	port := harness.FreePort(t)
	base := "http://" + harness.Addr(port)
	gds := cl.StartGlobalDiscoveryService(t, "global-discovery-service",
		"--http-addr="+harness.Addr(port), "--pool-discovery=karmada",
		"--router-namespace=global-discovery", "--router-service=global-router", "--router-port-name=http")
	gds.WaitHTTP(t, base+"/readyz", 30*time.Second)
	waitBody(t, base+"/pools", `{"api_version":"gds.dynamo.nvidia.com/v1","pools":[`+
		`{"key":{"cluster_id":"member1","namespace":"dynamo","dgd_name":"my-dgd"},"service":"my-dgd-pool-relay","endpoints":[`+
		`{"address":"10.1.0.11","ready":true,"ports":[{"name":"http","protocol":"TCP","port":8080}]}]}]}`+"\n")
	waitBody(t, base+"/routers", `{"api_version":"gds.dynamo.nvidia.com/v1","routers":[`+
		`{"id":"member2/global-router-0","cluster_id":"member2","replica":"global-router-0","address":"10.2.1.5","url":"http://10.2.1.5:8000"}]}`+"\n")
}

// TestGlobalDiscoveryServiceFlags: the command refuses missing required flags, naming them.
func TestGlobalDiscoveryServiceFlags(t *testing.T) {
	bin := harness.Binary(t, "global-discovery-service")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--pool-discovery=mcs", "--router-service=r", "--router-port-name=http"}, "router namespace (--router-namespace) is required with pool discovery mcs"},
		{[]string{"--pool-discovery=mcs", "--router-namespace=n", "--router-port-name=http"}, "router service (--router-service) is required"},
		{[]string{"--pool-discovery=mcs", "--router-namespace=n", "--router-service=r"}, "router port name (--router-port-name) is required"},
		{[]string{"--pool-discovery=consul"}, `pool discovery "consul": must be mcs or karmada`},
	}
	for _, tc := range tests {
		out, err := exec.Command(bin, tc.args...).CombinedOutput()
		var exit *exec.ExitError
		if err == nil || !asExit(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("global-discovery-service %v: %v %s; want exit 2 with %q", tc.args, err, out, tc.want)
		}
	}
}

func asExit(err error, target **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	if ok {
		*target = e
	}
	return ok
}

// TestGlobalDiscoveryServiceManifest applies the example manifest to a real API server:
// every object of it is accepted.
func TestGlobalDiscoveryServiceManifest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := harness.StartClusters(t, harness.ClusterOptions{SkipCRDs: true})[0]
	root, _ := harness.RepoRoot()
	objs := harness.DecodeYAMLFile(t, root+"/gds-client/deploy/global-discovery-service.yaml")
	for _, o := range objs {
		if err := cl.Client.Create(ctx, o); err != nil {
			t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	if len(objs) != 6 {
		t.Fatalf("manifest has %d objects, want 6", len(objs))
	}
}

// TestGlobalDiscoveryServiceKubeconfigLoading: without --kubeconfig the service loads the
// kubeconfig as kubectl does: $KUBECONFIG is a list whose files are merged (a missing one is
// skipped), and ~/.kube/config is not needed.
func TestGlobalDiscoveryServiceKubeconfigLoading(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := harness.StartClusters(t, harness.ClusterOptions{SkipCRDs: true})[0]
	createNamespaces(t, ctx, cl.Client, "global-discovery")
	if err := cl.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "global-discovery", Name: "global-discovery-service"}}); err != nil {
		t.Fatal(err)
	}
	kc := cl.ServiceAccountKubeconfig(t, "global-discovery", "global-discovery-service")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "missing.kubeconfig")+string(os.PathListSeparator)+kc)
	port := harness.FreePort(t)
	// The harness passes its own --kubeconfig; an empty one after it (the last wins) leaves
	// the service to $KUBECONFIG.
	gds := cl.StartGlobalDiscoveryService(t, "global-discovery-service",
		"--http-addr="+harness.Addr(port), "--pool-discovery=mcs", "--kubeconfig=",
		"--router-namespace=global-discovery", "--router-service=global-router", "--router-port-name=http")
	gds.WaitHTTP(t, "http://"+harness.Addr(port)+"/readyz", 30*time.Second)
}
