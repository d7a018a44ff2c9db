package harness

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a private certificate authority for a test.
type CA struct {
	// CertFile is the PEM certificate of the CA, for --registry-tls-ca-file.
	CertFile string
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	dir      string
}

// NewCA creates a CA in a test temp dir.
func NewCA(tb testing.TB, name string) *CA {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{cert: cert, key: key, dir: tb.TempDir()}
	ca.CertFile = filepath.Join(ca.dir, name+"-ca.crt")
	writePEM(tb, ca.CertFile, "CERTIFICATE", der)
	return ca
}

// ClientConfig is a TLS client configuration that trusts this CA for serverName and,
// when certFile is set, presents the client certificate of certFile and keyFile.
func (ca *CA) ClientConfig(tb testing.TB, serverName, certFile, keyFile string) *tls.Config {
	tb.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	cfg := &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			tb.Fatalf("harness: client certificate: %v", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

// IssueServer issues a server certificate for the DNS names and IPs and returns the
// certificate and key files, for --tls-cert-file and --tls-key-file.
func (ca *CA) IssueServer(tb testing.TB, name string, dnsNames []string, ips []net.IP) (certFile, keyFile string) {
	tb.Helper()
	return ca.issue(tb, name, &x509.Certificate{
		NotAfter: time.Now().Add(90 * 24 * time.Hour), DNSNames: dnsNames, IPAddresses: ips,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// IssueClient issues a client certificate with the URI SANs, valid until notAfter, and
// returns the certificate and key files.
func (ca *CA) IssueClient(tb testing.TB, name string, uris []string, notAfter time.Time) (certFile, keyFile string) {
	tb.Helper()
	tmpl := &x509.Certificate{NotAfter: notAfter, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	for _, u := range uris {
		parsed, err := url.Parse(u)
		if err != nil {
			tb.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, parsed)
	}
	return ca.issue(tb, name, tmpl)
}

// issue signs a leaf certificate from tmpl (names, usages, expiry) with a new key.
func (ca *CA) issue(tb testing.TB, name string, tmpl *x509.Certificate) (certFile, keyFile string) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
	tmpl.Subject = pkix.Name{CommonName: name}
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	certFile, keyFile = filepath.Join(ca.dir, name+".crt"), filepath.Join(ca.dir, name+".key")
	writePEM(tb, certFile, "CERTIFICATE", der)
	writePEM(tb, keyFile, "EC PRIVATE KEY", keyDER)
	return certFile, keyFile
}

func writePEM(tb testing.TB, path, typ string, der []byte) {
	tb.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
}
