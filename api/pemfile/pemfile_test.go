package pemfile

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func certPEM(t *testing.T, cn string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestCertPool(t *testing.T) {
	a, b := certPEM(t, "a"), certPEM(t, "b")
	key := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte("x")})
	bad := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not DER")})
	for _, tc := range []struct {
		name    string
		data    []byte
		certs   int
		wantErr string
	}{
		{"one", a, 1, ""},
		{"two", append(append([]byte{}, a...), b...), 2, ""},
		{"a key beside the certificate is skipped", append(append([]byte{}, key...), a...), 1, ""},
		{"empty", nil, 0, "no PEM certificate in it"},
		{"not PEM", []byte("hello"), 0, "no PEM certificate in it"},
		{"only a key", key, 0, "no PEM certificate in it"},
		{"a bad block after a good one", append(append([]byte{}, a...), bad...), 0, "PEM block 2:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ca.crt")
			if err := os.WriteFile(path, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			pool, err := CertPool(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), path) {
					t.Fatalf("err = %v, want one naming %s and %q", err, path, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := len(pool.Subjects()); got != tc.certs { //nolint:staticcheck // SA1019: a pool of the file's CAs, not the system's.
				t.Fatalf("%d certificates, want %d", got, tc.certs)
			}
		})
	}
}

func TestCertPoolLimits(t *testing.T) {
	dir := t.TempDir()
	if _, err := CertPool(filepath.Join(dir, "missing")); err == nil || !os.IsNotExist(err) {
		t.Fatalf("missing file: err = %v", err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, MaxBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := CertPool(big); err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Fatalf("oversized file: err = %v", err)
	}
}
