package registryclient

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"

	"github.com/ai-dynamo/global-discovery-mcs/api/pemfile"
)

// caCheckEvery bounds how often the CA bundle's file is read again (on a new connection).
const caCheckEvery = time.Second

// TLSFiles is the controller's TLS to the registry, from files that are replaced while it
// runs (cert-manager renewing a Secret): the client certificate is watched by
// controller-runtime's certwatcher, and the CA bundle is read again when its file changes,
// so every new connection uses the files as they are then, with no restart.
type TLSFiles struct {
	caFile string
	cert   *certwatcher.CertWatcher // nil: no client certificate
	log    *slog.Logger

	mu       sync.Mutex
	checked  time.Time
	stamp    string
	badStamp string
	roots    *x509.CertPool // nil: the system roots
}

// LoadTLSFiles reads the files: the CAs of caFile (empty: the system roots) and, when
// certFile is set, the client certificate of certFile and keyFile.
func LoadTLSFiles(caFile, certFile, keyFile string, log *slog.Logger) (*TLSFiles, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("--registry-tls-cert-file and --registry-tls-key-file: set both or neither")
	}
	f := &TLSFiles{caFile: caFile, log: log}
	if certFile != "" {
		cw, err := certwatcher.New(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("--registry-tls-cert-file/--registry-tls-key-file: %w", err)
		}
		f.cert = cw
	}
	if caFile != "" {
		stamp, err := fileStamp(caFile)
		if err != nil {
			return nil, fmt.Errorf("--registry-tls-ca-file: %w", err)
		}
		roots, err := readCABundle(caFile)
		if err != nil {
			return nil, err
		}
		f.roots, f.stamp, f.checked = roots, stamp, time.Now()
	}
	return f, nil
}

// Start watches the client certificate until ctx ends.
func (f *TLSFiles) Start(ctx context.Context) error {
	if f.cert == nil {
		<-ctx.Done()
		return nil
	}
	return f.cert.Start(ctx)
}

// NeedLeaderElection is false: every replica keeps its files current, so a new leader has them.
func (f *TLSFiles) NeedLeaderElection() bool { return false }

// Config returns the configuration of a new connection. The server name is set per
// connection from the URL's host.
func (f *TLSFiles) Config() *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: f.currentRoots()}
	if f.cert != nil {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return f.cert.GetCertificate(nil) }
	}
	return cfg
}

// currentRoots returns the CA bundle, read again when its file changed. A bundle that
// cannot be read (missing or half-written mid-rotation) leaves the last good one in use.
func (f *TLSFiles) currentRoots() *x509.CertPool {
	if f.caFile == "" {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.checked) < caCheckEvery {
		return f.roots
	}
	f.checked = time.Now()
	stamp, err := fileStamp(f.caFile)
	if err != nil || stamp == f.stamp {
		return f.roots
	}
	roots, err := readCABundle(f.caFile)
	if err != nil {
		if stamp != f.badStamp {
			f.badStamp = stamp
			f.log.Warn("the registry CA bundle changed but cannot be used; keeping the previous one", "error", err)
		}
		return f.roots
	}
	f.roots, f.stamp, f.badStamp = roots, stamp, ""
	f.log.Info("registry CA bundle reloaded", "file", f.caFile)
	return f.roots
}

func readCABundle(path string) (*x509.CertPool, error) {
	pool, err := pemfile.CertPool(path)
	if err != nil {
		return nil, fmt.Errorf("--registry-tls-ca-file: %w", err)
	}
	return pool, nil
}

// fileStamp identifies a file's contents. The contents, not the modification time: two
// writes within one tick of the kernel's file clock, of the same size, look alike to stat.
// The file is small and read at most once a second.
func fileStamp(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return string(sum[:]), nil
}

// filesCreds are gRPC transport credentials that take a fresh TLS configuration for each
// connection, so a reloaded CA bundle or client certificate reaches the next handshake.
type filesCreds struct {
	config     func() *tls.Config
	serverName string
}

func (c *filesCreds) tls() credentials.TransportCredentials {
	cfg := c.config()
	cfg.ServerName = c.serverName
	return credentials.NewTLS(cfg)
}

func (c *filesCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c.tls().ClientHandshake(ctx, authority, conn)
}

func (c *filesCreds) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("registry client credentials: no server side")
}

func (c *filesCreds) Info() credentials.ProtocolInfo { return c.tls().Info() }

func (c *filesCreds) Clone() credentials.TransportCredentials {
	cp := *c
	return &cp
}

// OverrideServerName implements the (deprecated) interface method.
func (c *filesCreds) OverrideServerName(name string) error {
	c.serverName = name
	return nil
}
