// Package tlsfiles serves TLS from files that are replaced while the server runs: a
// certificate renewed by cert-manager (a Secret volume swapped under the pod) or a client-CA
// bundle with a new CA added is used by the next handshake, with no restart.
//
// The files are read at most once a second, on a handshake (they are small): a
// registry's connections are long-lived, so this costs nothing, and a rotation is seen by
// the first connection after it rather than after a polling period.
package tlsfiles

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/ai-dynamo/global-discovery-mcs/api/pemfile"
)

// checkEvery bounds how often the files are looked at.
const checkEvery = time.Second

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

// Source holds the last good contents of the files.
type Source struct {
	files Files
	log   *slog.Logger
	obs   Observer

	mu       sync.Mutex
	checked  time.Time
	stamp    string // of the files in use
	badStamp string // of files that failed to load, logged once
	cert     *tls.Certificate
	leaf     *x509.Certificate
	clientCA *x509.CertPool
}

// Load reads the files; an error names the flag of the file that is wrong.
func Load(files Files, log *slog.Logger, obs Observer) (*Source, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Source{files: files, log: log, obs: obs}
	// Read first: its errors name the flag of the file that is wrong.
	if err := s.read(); err != nil {
		return nil, err
	}
	stamp, err := s.stampOf()
	if err != nil {
		return nil, err
	}
	s.stamp, s.checked = stamp, time.Now()
	if f := obs.Certificate; f != nil {
		f(s.leaf)
	}
	return s, nil
}

// ServerConfig returns a server configuration that uses the current files at each
// handshake, offering nextProtos in ALPN (gRPC adds h2 itself; an HTTP server needs both).
func (s *Source) ServerConfig(nextProtos ...string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := s.current()
			c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cert}, NextProtos: nextProtos}
			if pool != nil {
				c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
			}
			return c, nil
		},
	}
}

// current returns the key pair and client CAs to use now, reading the files again when
// they changed since they were last read.
func (s *Source) current() (*tls.Certificate, *x509.CertPool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Since(s.checked) < checkEvery {
		return s.cert, s.clientCA
	}
	s.checked = time.Now()
	stamp, err := s.stampOf()
	if err != nil || stamp == s.stamp {
		// A file missing mid-rotation: keep what works until it is back.
		return s.cert, s.clientCA
	}
	if err := s.read(); err != nil {
		// A half-written rotation (a new certificate with the old key) loads on a later
		// handshake, once the files agree; meanwhile the last good pair serves (read
		// changes nothing when it fails).
		if stamp != s.badStamp {
			s.badStamp = stamp
			s.log.Warn("the TLS files changed but cannot be used; serving the previous ones", "error", err)
			if f := s.obs.Reloaded; f != nil {
				f(false)
			}
		}
		return s.cert, s.clientCA
	}
	s.stamp, s.badStamp = stamp, ""
	s.log.Info("TLS files reloaded", "cert_file", s.files.CertFile, "client_ca_file", s.files.ClientCAFile,
		"serial", s.leaf.SerialNumber.String(), "not_after", s.leaf.NotAfter.UTC().Format(time.RFC3339))
	if f := s.obs.Reloaded; f != nil {
		f(true)
	}
	if f := s.obs.Certificate; f != nil {
		f(s.leaf)
	}
	return s.cert, s.clientCA
}

// read loads every file into s, all or nothing. The caller holds s.mu (or owns s).
func (s *Source) read() error {
	cert, err := tls.LoadX509KeyPair(s.files.CertFile, s.files.KeyFile)
	if err != nil {
		return fmt.Errorf("--tls-cert-file/--tls-key-file: load key pair: %w", err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return fmt.Errorf("--tls-cert-file %s: %w", s.files.CertFile, err)
	}
	var pool *x509.CertPool
	if s.files.ClientCAFile != "" {
		if pool, err = pemfile.CertPool(s.files.ClientCAFile); err != nil {
			return fmt.Errorf("--client-ca-file: %w", err)
		}
	}
	s.cert, s.leaf, s.clientCA = &cert, leaf, pool
	return nil
}

// stampOf identifies the files' contents. The contents, not the modification times: two
// writes within one tick of the kernel's file clock, of the same size, look alike to stat.
func (s *Source) stampOf() (string, error) {
	h := sha256.New()
	for _, f := range []string{s.files.CertFile, s.files.KeyFile, s.files.ClientCAFile} {
		if f == "" {
			continue
		}
		b, err := os.ReadFile(f) //nolint:gosec // G304: the operator names the files, in flags.
		if err != nil {
			return "", fmt.Errorf("TLS file: %w", err)
		}
		sum := sha256.Sum256(b)
		h.Write(sum[:])
	}
	return string(h.Sum(nil)), nil
}
