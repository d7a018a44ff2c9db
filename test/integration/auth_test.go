package integration

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

func dialTLS(t *testing.T, addr string, cfg *tls.Config) registryv1.RegistryServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return registryv1.NewRegistryServiceClient(conn)
}

// TestAuthenticatedClusters: with --client-ca-file a cluster may write only its own records,
// read only its clusterset; an admin may do everything; unknown and expired certificates are
// refused; REST callers cannot forge an identity.
func TestAuthenticatedClusters(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	serverCA, clientCA, otherCA := harness.NewCA(t, "server"), harness.NewCA(t, "clients"), harness.NewCA(t, "other")
	certFile, keyFile := serverCA.IssueServer(t, "registry", []string{"localhost"}, nil)
	reg := harness.StartRegistry(t, "--store=memory", "--tls-cert-file="+certFile, "--tls-key-file="+keyFile,
		"--client-ca-file="+clientCA.CertFile, "--trust-domain=example.org")
	_, grpcPort, _ := net.SplitHostPort(reg.GRPCAddr)
	_, restPort, _ := net.SplitHostPort(reg.RESTAddr)
	addr := "localhost:" + grpcPort
	day := time.Now().Add(24 * time.Hour)
	aCert, aKey := clientCA.IssueClient(t, "use1-a", []string{"spiffe://example.org/clusterset/prod/cluster/use1-a"}, day)
	bCert, bKey := clientCA.IssueClient(t, "usw2-a", []string{"spiffe://example.org/clusterset/prod/cluster/usw2-a"}, day)
	adminCert, adminKey := clientCA.IssueClient(t, "admin", []string{"spiffe://example.org/admin"}, day)
	a := dialTLS(t, addr, serverCA.ClientConfig(t, "localhost", aCert, aKey))
	b := dialTLS(t, addr, serverCA.ClientConfig(t, "localhost", bCert, bKey))
	admin := dialTLS(t, addr, serverCA.ClientConfig(t, "localhost", adminCert, adminKey))

	svc := &registryv1.ServiceKey{Namespace: "dynamo", Name: "svc"}
	for _, c := range []struct {
		client registryv1.RegistryServiceClient
		id     string
	}{{a, "use1-a"}, {b, "usw2-a"}} {
		if _, err := c.client.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: c.id}); err != nil {
			t.Fatalf("%s registers itself: %v", c.id, err)
		}
		if _, err := c.client.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: c.id, Service: svc, Spec: relaySpec(80), EndpointGroups: endpoints("10.0.0.1")}); err != nil {
			t.Fatalf("%s exports: %v", c.id, err)
		}
	}
	denied := func(what string, err error, parts ...string) {
		t.Helper()
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("%s: %v, want PERMISSION_DENIED", what, err)
		}
		for _, p := range parts {
			if !strings.Contains(err.Error(), p) {
				t.Fatalf("%s: %q does not name %q", what, err, p)
			}
		}
	}
	_, err := a.PutExport(ctx, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "usw2-a", Service: svc, Spec: relaySpec(81)})
	denied("write as another cluster", err, "prod/usw2-a", "spiffe://example.org/clusterset/prod/cluster/use1-a")
	_, err = a.DeleteExport(ctx, &registryv1.DeleteExportRequest{Clusterset: "prod", ClusterId: "usw2-a", Service: svc})
	denied("delete another cluster's export", err)
	_, err = a.RenewLease(ctx, &registryv1.RenewLeaseRequest{Clusterset: "prod", ClusterId: "usw2-a"})
	denied("renew as another cluster", err)
	_, err = a.RegisterCluster(ctx, &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: "usw2-a"})
	denied("register as another cluster", err)
	_, err = a.SyncExports(ctx, &registryv1.SyncExportsRequest{Clusterset: "prod", ClusterId: "usw2-a"})
	denied("sync as another cluster", err)
	_, err = a.DeleteCluster(ctx, &registryv1.DeleteClusterRequest{Clusterset: "prod", ClusterId: "usw2-a"})
	denied("delete a cluster", err, "needs an admin identity")
	_, err = a.ListClusters(ctx, &registryv1.ListClustersRequest{Clusterset: "staging"})
	denied("read another clusterset", err, `clusterset "staging"`)
	w, err := a.WatchImports(ctx, &registryv1.WatchImportsRequest{Clusterset: "staging"})
	if err == nil {
		_, err = w.Recv()
	}
	denied("watch another clusterset", err)
	// usw2-a's export is untouched.
	exports, err := b.ListExports(ctx, &registryv1.ListExportsRequest{Clusterset: "prod", ClusterId: "usw2-a"})
	if err != nil || len(exports.GetExports()) != 1 || exports.GetExports()[0].GetSpec().GetPorts()[0].GetPort() != 80 {
		t.Fatalf("usw2-a's export changed: %v %v", exports, err)
	}
	// Reads of its own clusterset are allowed.
	if _, err := a.ListImports(ctx, &registryv1.ListImportsRequest{Clusterset: "prod"}); err != nil {
		t.Fatalf("a cluster reads its clusterset: %v", err)
	}

	// REST: the identity comes from the client certificate; a forged header does not help.
	restA := &http.Client{Transport: &http.Transport{TLSClientConfig: serverCA.ClientConfig(t, "localhost", aCert, aKey)}}
	req, _ := http.NewRequest(http.MethodDelete, "https://localhost:"+restPort+"/v1/clustersets/prod/clusters/usw2-a", nil)
	req.Header.Set("Grpc-Metadata-X-Mcs-Client-Identity", "spiffe://example.org/admin")
	resp, err := restA.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "needs an admin identity") {
		t.Fatalf("REST delete with a forged identity header: %d %s", resp.StatusCode, body)
	}
	resp, err = restA.Get("https://localhost:" + restPort + "/v1/clustersets/prod/clusters")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("REST read of its own clusterset: %v %v", resp, err)
	}
	resp.Body.Close()

	// An admin reads everything and deletes clusters.
	if _, err := admin.ListClusters(ctx, &registryv1.ListClustersRequest{Clusterset: "prod"}); err != nil {
		t.Fatalf("admin read: %v", err)
	}
	if _, err := admin.DeleteCluster(ctx, &registryv1.DeleteClusterRequest{Clusterset: "prod", ClusterId: "usw2-a"}); err != nil {
		t.Fatalf("admin delete: %v", err)
	}

	// A certificate of an unknown CA, an expired one, and none at all fail the handshake.
	uCert, uKey := otherCA.IssueClient(t, "unknown", []string{"spiffe://example.org/clusterset/prod/cluster/use1-a"}, day)
	eCert, eKey := clientCA.IssueClient(t, "expired", []string{"spiffe://example.org/clusterset/prod/cluster/use1-a"}, time.Now().Add(-time.Minute))
	for name, cfg := range map[string]*tls.Config{
		"unknown CA": serverCA.ClientConfig(t, "localhost", uCert, uKey),
		"expired":    serverCA.ClientConfig(t, "localhost", eCert, eKey),
		"no cert":    serverCA.ClientConfig(t, "localhost", "", ""),
	} {
		c := dialTLS(t, addr, cfg)
		if _, err := c.ListClusters(ctx, &registryv1.ListClustersRequest{Clusterset: "prod"}); status.Code(err) != codes.Unavailable {
			t.Fatalf("%s certificate: %v, want the handshake refused", name, err)
		}
	}
	if _, body := get(t, "http://"+reg.AdminAddr+"/metrics"); !strings.Contains(body, `mcs_registry_permission_denied_total{method="/globaldiscoverymcs.registry.v1.RegistryService/PutExport"} 1`) {
		t.Fatalf("denials not counted:\n%s", grepLines(body, "permission_denied"))
	}
}

// TestControllerClientCertificateRotation: the controller presents its client certificate
// and picks up a rotated one without a restart.
func TestControllerClientCertificateRotation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	serverCA, clientCA := harness.NewCA(t, "server"), harness.NewCA(t, "clients")
	certFile, keyFile := serverCA.IssueServer(t, "registry", []string{"localhost"}, nil)
	reg := harness.StartRegistry(t, "--store=memory", "--tls-cert-file="+certFile, "--tls-key-file="+keyFile,
		"--client-ca-file="+clientCA.CertFile, "--trust-domain=example.org")
	_, grpcPort, _ := net.SplitHostPort(reg.GRPCAddr)
	uri := []string{"spiffe://example.org/clusterset/prod/cluster/use1-a"}
	// The first certificate expires in 20 s; the controller's files are rewritten in place.
	expiry := time.Now().Add(20 * time.Second)
	short, shortKey := clientCA.IssueClient(t, "short", uri, expiry)
	dir := t.TempDir()
	cert, key := dir+"/tls.crt", dir+"/tls.key"
	copyFile(t, short, cert)
	copyFile(t, shortKey, key)

	cl := memberCluster(t, ctx)
	ctl := cl.StartController(t, "mcs-controller", "--registry-url=https://localhost:"+grpcPort, "--registry-tls-ca-file="+serverCA.CertFile,
		"--registry-tls-cert-file="+cert, "--registry-tls-key-file="+key,
		"--clusterset-id=prod", "--cluster-id=use1-a", "--region=r", "--registry-call-timeout=2s")
	mustCreate(t, cl, service("dynamo", "svc", 80), serviceExport("dynamo", "svc"))
	waitExport(t, cl, "dynamo", "svc", readyConditions, 30*time.Second)
	// The certificate's expiry is a metric, which follows the files (the alert
	// MCSControllerClientCertificateExpiring reads it).
	const expiryMetric = "mcs_controller_registry_client_certificate_expiry_timestamp_seconds"
	waitExpiry := func(want time.Time) {
		t.Helper()
		harness.Eventually(t, expiryMetric, 30*time.Second, func() string {
			if got := harness.Metric(t, "http://"+ctl.MetricsAddr+"/metrics", expiryMetric); math.Abs(got-float64(want.Unix())) > 1 {
				return fmt.Sprintf("%s %.0f, want %d", expiryMetric, got, want.Unix())
			}
			return ""
		})
	}
	waitExpiry(expiry)

	longExpiry := time.Now().Add(24 * time.Hour)
	long, longKey := clientCA.IssueClient(t, "long", uri, longExpiry)
	copyFile(t, long, cert)
	copyFile(t, longKey, key)
	waitExpiry(longExpiry)
	time.Sleep(time.Until(expiry.Add(time.Second)))
	// New connections now need the new certificate: the first one has expired.
	reg.Restart(t)
	waitRegistryExportsTLS(t, reg, "use1-a")
	waitExport(t, cl, "dynamo", "svc", readyConditions, 60*time.Second)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to+".tmp", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(to+".tmp", to); err != nil {
		t.Fatal(err)
	}
}

// waitRegistryExportsTLS waits until the registry log shows the cluster's exports synced
// again after its restart (its REST port needs a client certificate).
func waitRegistryExportsTLS(t *testing.T, reg *harness.Registry, cluster string) {
	t.Helper()
	harness.Eventually(t, "exports synced after the registry restart", 60*time.Second, func() string {
		if out := reg.Output(); !strings.Contains(out, `msg="exports synced"`) || !strings.Contains(out, "cluster="+cluster) {
			return out
		}
		return ""
	})
}
