// Package pemfile reads the CA bundles every binary of the project is given as a file
// (a Secret's ca.crt or a ConfigMap's key, mounted), with one rule: every CERTIFICATE block
// must parse and at least one must be there. crypto/x509's AppendCertsFromPEM skips a block
// it cannot parse, so a truncated bundle would silently trust fewer CAs than its author meant.
package pemfile

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"os"
)

// MaxBytes bounds a bundle: a CA file is a few KiB; anything this large is the wrong file.
const MaxBytes = 1 << 20

// CertPool reads path and returns the pool of its certificates. The error names the file
// and, for a bad block, its position in the file.
func CertPool(path string) (*x509.CertPool, error) {
	f, err := os.Open(path) //nolint:gosec // G304: the operator names the file, in a flag.
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > MaxBytes {
		return nil, fmt.Errorf("%s: over the limit of %d bytes for a CA bundle", path, MaxBytes)
	}
	pool, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return pool, nil
}

// Parse returns the pool of the CERTIFICATE blocks in data; other block types are skipped.
func Parse(data []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	n := 0
	for i := 1; ; i++ {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: %w", i, err)
		}
		pool.AddCert(cert)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("no PEM certificate in it")
	}
	return pool, nil
}
