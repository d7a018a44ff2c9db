package tlsfiles

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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ai-dynamo/global-discovery-mcs/internal/filereload"
)

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

var serial int64 = 100

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a leaf's PEM certificate and key.
func (ca *testCA) issue(t *testing.T, client bool) (certPEM, keyPEM []byte, serialNo int64) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial++
	usage := x509.ExtKeyUsageServerAuth
	if client {
		usage = x509.ExtKeyUsageClientAuth
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "leaf"}, DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage},
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), serial
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	// Replaced as a Secret volume does: a new file renamed over the old one.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// handshake connects with a client that trusts roots and presents client (when not nil),
// and returns the serial of the certificate the server served.
func handshake(t *testing.T, cfg *tls.Config, roots *x509.CertPool, client *tls.Certificate) (int64, error) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_ = tls.Server(c, cfg).Handshake()
		buf := make([]byte, 1)
		_, _ = c.Read(buf)
	}()
	ccfg := &tls.Config{RootCAs: roots, ServerName: "localhost"}
	if client != nil {
		ccfg.Certificates = []tls.Certificate{*client}
	}
	c, err := tls.Dial("tcp", l.Addr().String(), ccfg)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	// TLS 1.3 reports a refused client certificate on the first read.
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := c.Read(make([]byte, 1)); err != nil {
		if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			return 0, err
		}
	}
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64(), nil
}

func pool(cas ...*testCA) *x509.CertPool {
	p := x509.NewCertPool()
	for _, ca := range cas {
		p.AddCert(ca.cert)
	}
	return p
}

func TestRotation(t *testing.T) {
	dir := t.TempDir()
	files := Files{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"), ClientCAFile: filepath.Join(dir, "ca.crt")}
	ca1, ca2 := newCA(t, "one"), newCA(t, "two")
	cert1, key1, serial1 := ca1.issue(t, false)
	write(t, files.CertFile, cert1)
	write(t, files.KeyFile, key1)
	write(t, files.ClientCAFile, ca1.pem)
	var reloads []bool
	var notAfter time.Time
	src, err := Load(files, nil, Observer{Reloaded: func(ok bool) { reloads = append(reloads, ok) }, Certificate: func(c *x509.Certificate) { notAfter = c.NotAfter }})
	if err != nil {
		t.Fatal(err)
	}
	if notAfter.IsZero() {
		t.Fatal("the certificate in use was not reported at start")
	}
	cfg := src.ServerConfig()
	clientPair := func(ca *testCA) *tls.Certificate {
		c, k, _ := ca.issue(t, true)
		pair, err := tls.X509KeyPair(c, k)
		if err != nil {
			t.Fatal(err)
		}
		return &pair
	}
	client1, client2 := clientPair(ca1), clientPair(ca2)

	if got, err := handshake(t, cfg, pool(ca1), client1); err != nil || got != serial1 {
		t.Fatalf("before rotation: serial %d, %v; want %d", got, err, serial1)
	}
	if _, err := handshake(t, cfg, pool(ca1), client2); err == nil {
		t.Fatal("a client certificate of a CA not in the bundle was accepted")
	}

	// Half a rotation: the new certificate with the old key. The old pair keeps serving.
	cert2, key2, serial2 := ca2.issue(t, false)
	write(t, files.CertFile, cert2)
	time.Sleep(filereload.CheckEvery + 100*time.Millisecond)
	if got, err := handshake(t, cfg, pool(ca1, ca2), client1); err != nil || got != serial1 {
		t.Fatalf("mid-rotation: serial %d, %v; want the old %d", got, err, serial1)
	}
	// The rest of it: the new key, and CA two added to the client bundle.
	write(t, files.KeyFile, key2)
	write(t, files.ClientCAFile, append(append([]byte{}, ca1.pem...), ca2.pem...))
	time.Sleep(filereload.CheckEvery + 100*time.Millisecond)
	if got, err := handshake(t, cfg, pool(ca2), client2); err != nil || got != serial2 {
		t.Fatalf("after rotation: serial %d, %v; want %d", got, err, serial2)
	}
	if _, err := handshake(t, cfg, pool(ca2), client1); err != nil {
		t.Fatalf("a client of the CA still in the bundle: %v", err)
	}
	// CA one leaves the bundle.
	write(t, files.ClientCAFile, ca2.pem)
	time.Sleep(filereload.CheckEvery + 100*time.Millisecond)
	if _, err := handshake(t, cfg, pool(ca2), client1); err == nil {
		t.Fatal("a client of a CA removed from the bundle was accepted")
	}
	if want := []bool{false, true, true}; len(reloads) != len(want) || reloads[0] != want[0] || reloads[1] != want[1] || reloads[2] != want[2] {
		t.Fatalf("reloads = %v, want %v", reloads, want)
	}
}

func TestLoadErrorsNameTheFlag(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "one")
	cert, key, _ := ca.issue(t, false)
	crt, k, bad := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "bad.pem")
	write(t, crt, cert)
	write(t, k, key)
	write(t, bad, []byte("not a certificate"))
	for _, tc := range []struct {
		files Files
		want  string
	}{
		{Files{CertFile: crt, KeyFile: bad}, "--tls-cert-file/--tls-key-file"},
		{Files{CertFile: crt, KeyFile: k, ClientCAFile: bad}, "--client-ca-file"},
		{Files{CertFile: filepath.Join(dir, "missing"), KeyFile: k}, "--tls-cert-file/--tls-key-file: load key pair"},
	} {
		if _, err := Load(tc.files, nil, Observer{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load(%+v) = %v, want an error naming %q", tc.files, err, tc.want)
		}
	}
}
