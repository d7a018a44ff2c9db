package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// TestTLS: a registry serving TLS with a private CA; a controller that trusts the CA and
// dials a host named in the certificate registers and exports; a controller with another CA,
// or dialing a host the certificate does not name, never registers and says why; the REST
// port serves TLS too.
func TestTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ca := harness.NewCA(t, "registry")
	certFile, keyFile := ca.IssueServer(t, "mcs-registry", []string{"localhost"}, nil)
	reg := harness.StartRegistry(t, "--store=memory", "--tls-cert-file="+certFile, "--tls-key-file="+keyFile)
	_, grpcPort, _ := net.SplitHostPort(reg.GRPCAddr)
	_, restPort, _ := net.SplitHostPort(reg.RESTAddr)

	cls := harness.StartClusters(t, harness.ClusterOptions{Names: []string{"good", "wrong-ca", "wrong-host"}})
	for _, cl := range cls {
		createNamespaces(t, ctx, cl.Client, "dynamo")
		mustCreate(t, cl, service("dynamo", "svc", 80), serviceExport("dynamo", "svc"))
	}
	other := harness.NewCA(t, "other")
	cls[0].StartController(t, "mcs-controller/good", "--registry-url=https://localhost:"+grpcPort, "--registry-tls-ca-file="+ca.CertFile,
		"--clusterset-id=prod", "--cluster-id=good", "--region=r")
	wrongCA := cls[1].StartController(t, "mcs-controller/wrong-ca", "--registry-url=https://localhost:"+grpcPort, "--registry-tls-ca-file="+other.CertFile,
		"--clusterset-id=prod", "--cluster-id=wrong-ca", "--region=r", "--registry-call-timeout=2s")
	wrongHost := cls[2].StartController(t, "mcs-controller/wrong-host", "--registry-url=https://127.0.0.1:"+grpcPort, "--registry-tls-ca-file="+ca.CertFile,
		"--clusterset-id=prod", "--cluster-id=wrong-host", "--region=r", "--registry-call-timeout=2s")

	waitExport(t, cls[0], "dynamo", "svc", readyConditions, 30*time.Second)
	pending := "Valid=True Valid\nReady=Unknown Pending\nConflict=Unknown Pending"
	waitExport(t, cls[1], "dynamo", "svc", pending, 10*time.Second)
	waitExport(t, cls[2], "dynamo", "svc", pending, 10*time.Second)
	waitOutput(t, wrongCA.Process, "certificate signed by unknown authority")
	waitOutput(t, wrongHost.Process, "127.0.0.1")
	waitOutput(t, wrongHost.Process, "x509")

	// REST over TLS, verified against the CA with the certificate's host.
	pem, err := os.ReadFile(ca.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
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
	if _, err := http.Get("http://" + reg.RESTAddr + "/v1/clustersets/prod/clusters"); err == nil {
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
