package registryclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/ai-dynamo/global-discovery-mcs/api/pemfile"
	"github.com/ai-dynamo/global-discovery-mcs/internal/filereload"
)

// TLSFiles is the controller's TLS to the registry, from files that are replaced while it
// runs (cert-manager renewing a Secret): the client certificate and the CA bundle reload
// through internal/filereload, as the registry's files do, so every new connection uses
// the files as they are then, with no restart.
type TLSFiles struct {
	roots *filereload.Value[*x509.CertPool]   // nil: the system roots
	cert  *filereload.Value[*tls.Certificate] // nil: no client certificate
}

// LoadTLSFiles reads the files: the CAs of caFile (empty: the system roots) and, when
// certFile is set, the client certificate of certFile and keyFile.
func LoadTLSFiles(caFile, certFile, keyFile string, log *slog.Logger) (*TLSFiles, error) {
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("--registry-tls-cert-file and --registry-tls-key-file: set both or neither")
	}
	f := &TLSFiles{}
	if certFile != "" {
		cert, err := filereload.Load("registry client certificate", []string{certFile, keyFile}, func() (*tls.Certificate, error) {
			c, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				return nil, fmt.Errorf("--registry-tls-cert-file/--registry-tls-key-file: %w", err)
			}
			return &c, nil
		}, filereload.Options[*tls.Certificate]{Log: log})
		if err != nil {
			return nil, err
		}
		f.cert = cert
	}
	if caFile != "" {
		roots, err := filereload.Load("registry CA bundle", []string{caFile}, func() (*x509.CertPool, error) {
			pool, err := pemfile.CertPool(caFile)
			if err != nil {
				return nil, fmt.Errorf("--registry-tls-ca-file: %w", err)
			}
			return pool, nil
		}, filereload.Options[*x509.CertPool]{Log: log})
		if err != nil {
			return nil, err
		}
		f.roots = roots
	}
	return f, nil
}

// ClientCertificateNotAfter returns when the client certificate the next connection
// presents expires (the files as they are now, read again at most once a second); false
// without a client certificate.
func (f *TLSFiles) ClientCertificateNotAfter() (time.Time, bool) {
	if f.cert == nil {
		return time.Time{}, false
	}
	c := f.cert.Get()
	leaf := c.Leaf
	if leaf == nil && len(c.Certificate) > 0 {
		var err error
		if leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return time.Time{}, false
		}
	}
	if leaf == nil {
		return time.Time{}, false
	}
	return leaf.NotAfter, true
}

// Config returns the configuration of a new connection. The server name is set per
// connection from the URL's host.
func (f *TLSFiles) Config() *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.roots != nil {
		cfg.RootCAs = f.roots.Get()
	}
	if f.cert != nil {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return f.cert.Get(), nil }
	}
	return cfg
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
