package registryclient

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/internal/filereload"
)

func TestParseURLs(t *testing.T) {
	tests := []struct {
		urls     []string
		insecure bool
		want     string // addresses joined, or the error substring
		wantErr  bool
	}{
		{[]string{"https://mcs-registry.example.internal:9090"}, false, "mcs-registry.example.internal:9090", false},
		{[]string{"https://mcs-registry.example.internal"}, false, "mcs-registry.example.internal:443", false},
		{[]string{"http://mcs-registry.mcs-system.svc"}, true, "mcs-registry.mcs-system.svc:80", false},
		{[]string{"https://global.example:9090", "https://use1.example:9090"}, false, "global.example:9090 use1.example:9090", false},
		{[]string{"https://[fd00::1]:9090"}, false, "[fd00::1]:9090", false},
		{[]string{"http://mcs-registry:9090"}, false, "use https:// or set --registry-allow-insecure-http", true},
		{[]string{"https://a:9090", "http://b:9090"}, true, "every URL must use the same scheme", true},
		{[]string{"grpc://a:9090"}, false, "the scheme must be https or http", true},
		{[]string{"https://a:9090/v1"}, false, "a gRPC URL has no path", true},
		{[]string{"mcs-registry:9090"}, false, "not a URL like https://", true},
		{nil, false, "at least one URL is required", true},
	}
	for _, tc := range tests {
		targets, err := ParseURLs(tc.urls, tc.insecure)
		if tc.wantErr {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseURLs(%v) error = %v, want %q", tc.urls, err, tc.want)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseURLs(%v): %v", tc.urls, err)
			continue
		}
		var addrs []string
		for _, tg := range targets {
			addrs = append(addrs, tg.Address)
		}
		if got := strings.Join(addrs, " "); got != tc.want {
			t.Errorf("ParseURLs(%v) = %s, want %s", tc.urls, got, tc.want)
		}
	}
}

func TestLoadTLSFiles(t *testing.T) {
	if _, err := LoadTLSFiles("/nonexistent/ca.crt", "", "", nil); err == nil || !strings.Contains(err.Error(), "--registry-tls-ca-file") {
		t.Fatalf("missing CA file error = %v", err)
	}
	if _, err := LoadTLSFiles("", "/nonexistent/tls.crt", "", nil); err == nil || !strings.Contains(err.Error(), "set both or neither") {
		t.Fatalf("cert without key error = %v", err)
	}
	f, err := LoadTLSFiles("", "", "", nil)
	if err != nil || f.Config().RootCAs != nil {
		t.Fatalf("no CA file: %v; want the system roots", err)
	}
}

// TestCABundleReload: a new connection after the bundle's file was replaced uses the new
// bundle; a file that is not a bundle leaves the last good one in use.
func TestCABundleReload(t *testing.T) {
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	certPEM := func(cn string) ([]byte, *x509.Certificate) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour),
			IsCA: true, BasicConstraintsValid: true}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := x509.ParseCertificate(der)
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), c
	}
	one, oneCert := certPEM("one")
	two, twoCert := certPEM("two")
	replace := func(data []byte) {
		if err := os.WriteFile(caFile+".tmp", data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(caFile+".tmp", caFile); err != nil {
			t.Fatal(err)
		}
		time.Sleep(filereload.CheckEvery + 50*time.Millisecond)
	}
	if err := os.WriteFile(caFile, one, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := LoadTLSFiles(caFile, "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	trusts := func(c *x509.Certificate) bool {
		_, err := c.Verify(x509.VerifyOptions{Roots: f.Config().RootCAs})
		return err == nil
	}
	if !trusts(oneCert) || trusts(twoCert) {
		t.Fatal("at start: want CA one only")
	}
	replace(two)
	if trusts(oneCert) || !trusts(twoCert) {
		t.Fatalf("after the bundle was replaced: want CA two only (one %v, two %v)", trusts(oneCert), trusts(twoCert))
	}
	replace([]byte("half-written"))
	if !trusts(twoCert) {
		t.Fatal("a bad bundle replaced the last good one")
	}
}

func TestClustersetUnknown(t *testing.T) {
	withInfo := func(code codes.Code, reason string) error {
		st, err := status.New(code, "clusterset: \"prod\" is unknown").WithDetails(&errdetails.ErrorInfo{Reason: reason})
		if err != nil {
			t.Fatal(err)
		}
		return st.Err()
	}
	unknown := registryv1.ErrorReason_ERROR_REASON_CLUSTERSET_UNKNOWN.String()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"the registry's refusal", withInfo(codes.InvalidArgument, unknown), true},
		{"a malformed name", status.Error(codes.InvalidArgument, "clusterset: must be a DNS label"), false},
		{"another reason", withInfo(codes.InvalidArgument, "SOMETHING_ELSE"), false},
		{"the reason on another code", withInfo(codes.NotFound, unknown), false},
		{"unavailable", status.Error(codes.Unavailable, "connection refused"), false},
		{"not a status", errors.New("boom"), false},
		{"nil", nil, false},
	}
	for _, tc := range tests {
		if got := ClustersetUnknown(tc.err); got != tc.want {
			t.Errorf("%s: ClustersetUnknown(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// TestClientCertificateNotAfter: the expiry of the client certificate as the files are
// now: a renewal written in place shows without a connection; none without a certificate.
func TestClientCertificateNotAfter(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	write := func(notAfter time.Time) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "use1-a"}, NotBefore: time.Now().Add(-time.Minute), NotAfter: notAfter}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		for file, data := range map[string][]byte{
			certFile: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			keyFile:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		} {
			if err := os.WriteFile(file, data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	first := time.Now().Add(72 * time.Hour).Truncate(time.Second)
	write(first)
	f, err := LoadTLSFiles("", certFile, keyFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := f.ClientCertificateNotAfter(); !ok || !got.Equal(first) {
		t.Fatalf("NotAfter = %v %v, want %v", got, ok, first)
	}
	renewed := first.Add(30 * 24 * time.Hour)
	write(renewed)
	time.Sleep(filereload.CheckEvery + 50*time.Millisecond)
	if got, ok := f.ClientCertificateNotAfter(); !ok || !got.Equal(renewed) {
		t.Fatalf("after the renewal: NotAfter = %v %v, want %v", got, ok, renewed)
	}
	none, err := LoadTLSFiles("", "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := none.ClientCertificateNotAfter(); ok {
		t.Fatal("a NotAfter without a client certificate")
	}
}
