package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// TestTLS: a registry serving TLS with a private CA; a controller that trusts the CA and
// dials a host named in the certificate registers and exports; the REST port serves TLS
// too. TestRegistryMisconfigurations covers the controllers that cannot connect.
func TestTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ca := harness.NewCA(t, "registry")
	certFile, keyFile := ca.IssueServer(t, "mcs-registry", []string{"localhost"}, nil)
	reg := harness.StartRegistry(t, "--store=memory", "--tls-cert-file="+certFile, "--tls-key-file="+keyFile)
	_, grpcPort, _ := net.SplitHostPort(reg.GRPCAddr)
	_, restPort, _ := net.SplitHostPort(reg.RESTAddr)

	cl := harness.StartClusters(t, harness.ClusterOptions{Names: []string{"good"}})[0]
	createNamespaces(t, ctx, cl.Client, "dynamo")
	mustCreate(t, cl, service("dynamo", "svc", 80), serviceExport("dynamo", "svc"))
	cl.StartController(t, "mcs-controller/good", "--registry-url=https://localhost:"+grpcPort, "--registry-tls-ca-file="+ca.CertFile,
		"--clusterset-id=prod", "--cluster-id=good", "--region=r")
	waitExport(t, cl, "dynamo", "svc", readyConditions, 30*time.Second)

	// REST over TLS, verified against the CA with the certificate's host.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: ca.ClientConfig(t, "localhost", "", "")}}
	resp, err := hc.Get("https://localhost:" + restPort + "/v1/clustersets/prod/clusters")
	if err != nil {
		t.Fatalf("REST over TLS: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `"clusterId":"good","region":"r","lease":{"state":"LEASE_STATE_ACTIVE"`) || strings.Contains(string(body), "wrong-") {
		t.Fatalf("clusters over TLS: %s", body)
	}
	// Plaintext to the TLS port fails.
	if resp, err := http.Get("http://" + reg.RESTAddr + "/v1/clustersets/prod/clusters"); err == nil {
		_ = resp.Body.Close()
		if code, _ := get(t, "http://"+reg.RESTAddr+"/v1/clustersets/prod/clusters"); code == 200 {
			t.Fatal("the TLS REST port answered plaintext")
		}
	}
}

func waitOutput(t *testing.T, p *harness.Process, text string) {
	t.Helper()
	harness.Eventually(t, fmt.Sprintf("%s logs %q", p.Name, text), 30*time.Second, func() string {
		if out := p.Output(); !strings.Contains(out, text) {
			return out
		}
		return ""
	})
}

// TestRegistryMisconfigurations: each way of pointing a controller at the registry wrongly
// — TLS ended at a load balancer that does not negotiate ALPN h2, https:// to a plaintext
// registry, http:// to a TLS registry, a certificate without the URL's host, another CA —
// leaves the export Pending with a message that names the cause and the fix, and the log
// says it too. The same load balancer offering h2 works, so the ALPN case is the ALPN.
func TestRegistryMisconfigurations(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ca := harness.NewCA(t, "registry")
	certFile, keyFile := ca.IssueServer(t, "mcs-registry", []string{"localhost"}, nil)
	tlsReg := harness.StartRegistry(t, "--store=memory", "--tls-cert-file="+certFile, "--tls-key-file="+keyFile)
	_, tlsPort, _ := net.SplitHostPort(tlsReg.GRPCAddr)
	plain := harness.StartRegistry(t, "--store=memory")
	_, plainPort, _ := net.SplitHostPort(plain.GRPCAddr)
	port := func(addr string) string { _, p, _ := net.SplitHostPort(addr); return p }
	noALPN := harness.TerminateTLS(t, plain.GRPCAddr, certFile, keyFile)
	withALPN := harness.TerminateTLS(t, plain.GRPCAddr, certFile, keyFile, "h2")
	other := harness.NewCA(t, "other")

	cases := []struct {
		name string
		args []string
		hint string // "" : the export becomes Ready
	}{
		{"lb-h2", []string{"--registry-url=https://localhost:" + port(withALPN.Addr), "--registry-tls-ca-file=" + ca.CertFile}, ""},
		{"lb-no-alpn", []string{"--registry-url=https://localhost:" + port(noALPN.Addr), "--registry-tls-ca-file=" + ca.CertFile}, "ALPN policy HTTP2Preferred or HTTP2Only"},
		{"https-to-plain", []string{"--registry-url=https://localhost:" + plainPort, "--registry-tls-ca-file=" + ca.CertFile}, "the URL is https:// but the registry answers in plaintext"},
		{"http-to-tls", []string{"--registry-url=http://localhost:" + tlsPort, "--registry-allow-insecure-http"}, "use an https:// URL"},
		{"wrong-host", []string{"--registry-url=https://127.0.0.1:" + tlsPort, "--registry-tls-ca-file=" + ca.CertFile}, "the registry's certificate does not name the URL's host"},
		{"wrong-ca", []string{"--registry-url=https://localhost:" + tlsPort, "--registry-tls-ca-file=" + other.CertFile}, "not signed by a CA of --registry-tls-ca-file"},
	}
	// One cluster; each controller watches its own namespace under its own identity.
	cl := harness.StartClusters(t, harness.ClusterOptions{Names: []string{"member"}})[0]
	ctls := map[string]*harness.Controller{}
	for _, tc := range cases {
		createNamespaces(t, ctx, cl.Client, tc.name)
		mustCreate(t, cl, service(tc.name, "svc", 80), serviceExport(tc.name, "svc"))
		ctls[tc.name] = cl.StartController(t, "mcs-controller/"+tc.name, append([]string{
			"--clusterset-id=prod", "--cluster-id=" + tc.name, "--region=r", "--watch-namespaces=" + tc.name,
			"--leader-elect=false", "--registry-call-timeout=2s"}, tc.args...)...)
	}
	for _, tc := range cases {
		if tc.hint == "" {
			waitExport(t, cl, tc.name, "svc", readyConditions, 30*time.Second)
			continue
		}
		harness.Eventually(t, tc.name+": Ready names the cause", 30*time.Second, func() string {
			se := &mcsv1beta1.ServiceExport{}
			if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: tc.name, Name: "svc"}, se); err != nil {
				return err.Error()
			}
			c := findCondition(se, string(mcsv1beta1.ServiceExportConditionReady))
			if c.Status != metav1.ConditionUnknown || c.Reason != "Pending" ||
				!strings.HasPrefix(c.Message, "waiting for the cluster to register with the registry: ") || !strings.Contains(c.Message, tc.hint) {
				return fmt.Sprintf("Ready=%s %s %q", c.Status, c.Reason, c.Message)
			}
			return ""
		})
		waitOutput(t, ctls[tc.name].Process, tc.hint)
	}
	for _, tc := range cases {
		if tc.hint != "" {
			line, _, _ := strings.Cut(grepLines(ctls[tc.name].Output(), `"hint"`), "\n")
			t.Logf("%s logs: %s", tc.name, line)
		}
	}
}
