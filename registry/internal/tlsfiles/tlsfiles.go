// Package tlsfiles serves TLS from files that are replaced while the server runs: a
// certificate renewed by cert-manager (a Secret volume swapped under the pod) or a client-CA
// bundle with a new CA added is used by the next handshake, with no restart. The files
// reload through internal/filereload, as the controller's do.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"time"

	"github.com/ai-dynamo/global-discovery-mcs/api/pemfile"
	"github.com/ai-dynamo/global-discovery-mcs/internal/filereload"
)

// Files name the key pair and, optionally, the bundle of CAs that sign client certificates.
type Files struct {
	CertFile, KeyFile string
	// ClientCAFile: empty serves TLS without client certificates.
	ClientCAFile string
}

// Observer receives reload results, for metrics. Any field may be nil.
type Observer struct {
	// Reloaded is called after the files changed and were read again (ok) or could not be
	// (the last good ones stay in use).
	Reloaded func(ok bool)
	// Certificate is called with the serving certificate in use, at start and after each
	// reload.
	Certificate func(*x509.Certificate)
}

// serving is what one read of the files gives.
type serving struct {
	cert     *tls.Certificate
	leaf     *x509.Certificate
	clientCA *x509.CertPool
}

// Source holds the last good contents of the files.
type Source struct {
	v *filereload.Value[serving]
}

// Load reads the files; an error names the flag of the file that is wrong.
func Load(files Files, log *slog.Logger, obs Observer) (*Source, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	v, err := filereload.Load("TLS files", []string{files.CertFile, files.KeyFile, files.ClientCAFile},
		func() (serving, error) { return read(files) },
		filereload.Options[serving]{Log: log, Reloaded: func(ok bool, s serving) {
			if ok {
				log.Info("serving certificate", "cert_file", files.CertFile, "serial", s.leaf.SerialNumber.String(),
					"not_after", s.leaf.NotAfter.UTC().Format(time.RFC3339))
				if f := obs.Certificate; f != nil {
					f(s.leaf)
				}
			}
			if f := obs.Reloaded; f != nil {
				f(ok)
			}
		}})
	if err != nil {
		return nil, err
	}
	if f := obs.Certificate; f != nil {
		f(v.Get().leaf)
	}
	return &Source{v: v}, nil
}

// ServerConfig returns a server configuration that uses the current files at each
// handshake, offering nextProtos in ALPN (gRPC adds h2 itself; an HTTP server needs both).
func (s *Source) ServerConfig(nextProtos ...string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cur := s.v.Get()
			c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cur.cert}, NextProtos: nextProtos}
			if cur.clientCA != nil {
				c.ClientCAs, c.ClientAuth = cur.clientCA, tls.RequireAndVerifyClientCert
			}
			return c, nil
		},
	}
}

// read loads every file, all or nothing.
func read(files Files) (serving, error) {
	cert, err := tls.LoadX509KeyPair(files.CertFile, files.KeyFile)
	if err != nil {
		return serving{}, fmt.Errorf("--tls-cert-file/--tls-key-file: load key pair: %w", err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return serving{}, fmt.Errorf("--tls-cert-file %s: %w", files.CertFile, err)
	}
	var pool *x509.CertPool
	if files.ClientCAFile != "" {
		if pool, err = pemfile.CertPool(files.ClientCAFile); err != nil {
			return serving{}, fmt.Errorf("--client-ca-file: %w", err)
		}
	}
	return serving{cert: &cert, leaf: leaf, clientCA: pool}, nil
}
