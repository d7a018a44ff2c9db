package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ai-dynamo/global-discovery-mcs/test/harness"
)

// TestCertificateRotation: cert-manager renews every certificate and replaces both CAs
// under a running registry and controller, the way a Secret volume is updated (new files
// renamed over the old). New connections use the new files with no restart: after the old
// CAs are gone, the controller's connections are cut, it connects again (which needs the
// registry's new serving certificate and client-CA bundle, and the controller's new CA bundle
// and client certificate), and a new export is Ready. No export write fails.
func TestCertificateRotation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	serverCA1, serverCA2 := harness.NewCA(t, "server-one"), harness.NewCA(t, "server-two")
	clientCA1, clientCA2 := harness.NewCA(t, "client-one"), harness.NewCA(t, "client-two")
	uri := []string{"spiffe://example.org/clusterset/prod/cluster/use1-a"}

	regDir, ctlDir := t.TempDir(), t.TempDir()
	regCert, regKey, regCA := filepath.Join(regDir, "tls.crt"), filepath.Join(regDir, "tls.key"), filepath.Join(regDir, "ca.crt")
	ctlCert, ctlKey, ctlCA := filepath.Join(ctlDir, "tls.crt"), filepath.Join(ctlDir, "tls.key"), filepath.Join(ctlDir, "ca.crt")
	install := func(pairs ...[2]string) {
		for _, p := range pairs {
			copyFile(t, p[0], p[1])
		}
	}
	bundle := func(name string, cas ...*harness.CA) string {
		var b []byte
		for _, ca := range cas {
			pem, err := os.ReadFile(ca.CertFile)
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, pem...)
		}
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	s1, s1Key := serverCA1.IssueServer(t, "registry-1", []string{"localhost"}, nil)
	c1, c1Key := clientCA1.IssueClient(t, "use1-a-1", uri, time.Now().Add(time.Hour))
	install([2]string{s1, regCert}, [2]string{s1Key, regKey}, [2]string{clientCA1.CertFile, regCA},
		[2]string{c1, ctlCert}, [2]string{c1Key, ctlKey}, [2]string{serverCA1.CertFile, ctlCA})

	reg := harness.StartRegistry(t, "--store=memory", "--tls-cert-file="+regCert, "--tls-key-file="+regKey, "--client-ca-file="+regCA, "--trust-domain=example.org")
	front := harness.Forward(t, reg.GRPCAddr)
	_, frontPort, _ := net.SplitHostPort(front.Addr)
	cl := memberCluster(t, ctx)
	ctl := cl.StartController(t, "mcs-controller", "--registry-url=https://localhost:"+frontPort, "--registry-tls-ca-file="+ctlCA,
		"--registry-tls-cert-file="+ctlCert, "--registry-tls-key-file="+ctlKey,
		"--clusterset-id=prod", "--cluster-id=use1-a", "--region=r", "--registry-call-timeout=2s",
		"--lease-duration=10s", "--renew-interval=2s")
	mustCreate(t, cl, service("dynamo", "before", 80), serviceExport("dynamo", "before"))
	waitExport(t, cl, "dynamo", "before", readyConditions, 30*time.Second)

	// The rotation, as cert-manager and trust-manager do it: the new CAs join the bundles,
	// the leaf certificates are renewed by the new CAs, then the old CAs leave the bundles.
	install([2]string{bundle("client-cas", clientCA1, clientCA2), regCA}, [2]string{bundle("server-cas", serverCA1, serverCA2), ctlCA})
	s2, s2Key := serverCA2.IssueServer(t, "registry-2", []string{"localhost"}, nil)
	c2, c2Key := clientCA2.IssueClient(t, "use1-a-2", uri, time.Now().Add(time.Hour))
	install([2]string{s2, regCert}, [2]string{s2Key, regKey}, [2]string{c2, ctlCert}, [2]string{c2Key, ctlKey})
	install([2]string{clientCA2.CertFile, regCA}, [2]string{serverCA2.CertFile, ctlCA})

	// A new connection to the registry is served the new certificate and must present a
	// certificate of the new client CA.
	newServer := leafOf(t, s2)
	harness.Eventually(t, "the registry serves the renewed certificate", 30*time.Second, func() string {
		got, err := servedCertificate(reg.GRPCAddr, serverCA2.CertFile, c2, c2Key)
		if err != nil {
			return err.Error()
		}
		if !got.Equal(newServer) {
			return "served " + got.Subject.CommonName
		}
		return ""
	})
	harness.Eventually(t, "the registry refuses the old client CA", 30*time.Second, func() string {
		if _, err := servedCertificate(reg.GRPCAddr, serverCA2.CertFile, c1, c1Key); err == nil {
			return "a client certificate of the removed CA was accepted"
		}
		return ""
	})
	if !strings.Contains(reg.Output(), "TLS files reloaded") {
		t.Fatalf("the registry did not log the reload:\n%s", reg.Output())
	}
	if v := harness.Metric(t, "http://"+reg.AdminAddr+"/metrics", `mcs_registry_tls_reloads_total{result="success"}`); v < 1 {
		t.Fatalf("mcs_registry_tls_reloads_total{result=\"success\"} = %v", v)
	}
	if v := harness.Metric(t, "http://"+reg.AdminAddr+"/metrics", "mcs_registry_tls_certificate_expiry_timestamp_seconds"); int64(v) != newServer.NotAfter.Unix() {
		t.Fatalf("certificate expiry gauge = %v, want %d", v, newServer.NotAfter.Unix())
	}

	// The controller's connections are cut: it connects again with its new files.
	metrics := "http://" + ctl.MetricsAddr + "/metrics"
	beats := harness.Metric(t, metrics, `mcs_controller_heartbeats_total{result="success"}`)
	front.Cut()
	harness.Eventually(t, "a heartbeat over a new connection", 60*time.Second, func() string {
		if harness.Metric(t, metrics, `mcs_controller_heartbeats_total{result="success"}`) <= beats+1 {
			return ctl.Output()
		}
		return ""
	})
	mustCreate(t, cl, service("dynamo", "after", 80), serviceExport("dynamo", "after"))
	waitExport(t, cl, "dynamo", "after", readyConditions, 30*time.Second)
	waitExport(t, cl, "dynamo", "before", readyConditions, 5*time.Second)
	if v := harness.Metric(t, metrics, `mcs_controller_export_writes_total{op="put",result="failure"}`); v != 0 {
		t.Fatalf("%v export writes failed during the rotation", v)
	}

	// The inventory of the clusterset, and what each binary was built from.
	regMetrics := "http://" + reg.AdminAddr + "/metrics"
	for series, want := range map[string]float64{
		`mcs_registry_clusters{clusterset="prod",state="active"}`:  1,
		`mcs_registry_clusters{clusterset="prod",state="expired"}`: 0,
		`mcs_registry_exports{clusterset="prod"}`:                  2,
		`mcs_registry_imports{clusterset="prod"}`:                  2,
		`mcs_registry_imports_in_conflict{clusterset="prod"}`:      0,
	} {
		if got := harness.Metric(t, regMetrics, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	harness.CheckMetrics(t, regMetrics)
	harness.CheckMetrics(t, metrics)
	for url, name := range map[string]string{regMetrics: "mcs_registry_build_info", metrics: "mcs_controller_build_info"} {
		if _, body := get(t, url); !strings.Contains(body, name+"{build_date=") || !strings.Contains(body, `go_version="go1.`) {
			t.Errorf("%s: no %s with the build's labels", url, name)
		}
	}
}

// servedCertificate completes a TLS handshake with the registry (trusting caFile, presenting
// the client key pair) and returns the certificate it served.
func servedCertificate(addr, caFile, certFile, keyFile string) (*x509.Certificate, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
		&tls.Config{RootCAs: roots, ServerName: "localhost", Certificates: []tls.Certificate{pair}, NextProtos: []string{"h2"}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	// TLS 1.3 reports a refused client certificate on the first read; the server speaks
	// first in HTTP/2 (its SETTINGS), so a read returns at once when the certificate is good.
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != nil {
		return nil, err
	}
	return c.ConnectionState().PeerCertificates[0], nil
}

func leafOf(t *testing.T, certFile string) *x509.Certificate {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(certFile, strings.TrimSuffix(certFile, ".crt")+".key")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}
