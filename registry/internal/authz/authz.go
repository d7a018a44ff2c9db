// Package authz authorizes registry calls by the caller's certificate identity, when the
// registry requires client certificates (--client-ca-file). A cluster's identity is the URI
// SAN spiffe://<trust-domain>/clusterset/<clusterset>/cluster/<cluster-id>; it may register,
// renew and write exports only as that cluster, and read only its clusterset. An admin
// identity (spiffe://<trust-domain>/admin, or one listed) may read everything and delete
// clusters.
package authz

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

// IdentityHeader carries the REST caller's verified identity from the REST listener to the
// in-process gRPC server. It is trusted only on that in-process connection.
const IdentityHeader = "x-mcs-client-identity"

// Identity is a caller.
type Identity struct {
	URI        string
	Admin      bool
	Clusterset string
	ClusterID  string
}

func (i Identity) String() string { return i.URI }

// Authorizer checks calls.
type Authorizer struct {
	TrustDomain string
	// Admins are the admin identities; spiffe://<trust-domain>/admin always is one.
	Admins []string
	Log    *slog.Logger
	// Denied is called for every refused call, for the metric.
	Denied func(method string)
}

// Parse returns the identity of a certificate's URI SANs.
func (a *Authorizer) Parse(uris []*url.URL) (Identity, error) {
	admin := "spiffe://" + a.TrustDomain + "/admin"
	for _, u := range uris {
		s := u.String()
		if s == admin || slices.Contains(a.Admins, s) {
			return Identity{URI: s, Admin: true}, nil
		}
		if u.Scheme != "spiffe" || u.Host != a.TrustDomain {
			continue
		}
		parts := strings.Split(strings.Trim(u.Path, "/"), "/")
		if len(parts) == 4 && parts[0] == "clusterset" && parts[2] == "cluster" && parts[1] != "" && parts[3] != "" {
			return Identity{URI: s, Clusterset: parts[1], ClusterID: parts[3]}, nil
		}
	}
	return Identity{}, fmt.Errorf("the client certificate has no URI SAN spiffe://%s/clusterset/<clusterset>/cluster/<cluster-id> or admin identity", a.TrustDomain)
}

// fromContext returns the caller's identity: the verified certificate of the TLS peer, or,
// on the in-process connection of the REST gateway (no TLS), the identity the REST listener
// verified and forwarded.
func (a *Authorizer) fromContext(ctx context.Context) (Identity, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return Identity{}, status.Error(codes.Unauthenticated, "no peer")
	}
	if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
		if len(ti.State.VerifiedChains) == 0 || len(ti.State.VerifiedChains[0]) == 0 {
			return Identity{}, status.Error(codes.Unauthenticated, "no verified client certificate")
		}
		id, err := a.Parse(ti.State.VerifiedChains[0][0].URIs)
		if err != nil {
			return Identity{}, status.Error(codes.Unauthenticated, err.Error())
		}
		return id, nil
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(IdentityHeader); len(v) == 1 {
			u, err := url.Parse(v[0])
			if err == nil {
				if id, err := a.Parse([]*url.URL{u}); err == nil {
					return id, nil
				}
			}
		}
	}
	return Identity{}, status.Error(codes.Unauthenticated, "no client identity")
}

// CertIdentity returns the identity of a verified certificate, for the REST listener.
func (a *Authorizer) CertIdentity(cert *x509.Certificate) (Identity, error) {
	return a.Parse(cert.URIs)
}

type target interface {
	GetClusterset() string
}

type clusterTarget interface {
	target
	GetClusterId() string
}

// check decides one request.
func (a *Authorizer) check(id Identity, method string, req any) error {
	if id.Admin {
		return nil
	}
	name := method[strings.LastIndexByte(method, '/')+1:]
	t, ok := req.(target)
	if !ok {
		return fmt.Errorf("%s is not allowed to a cluster identity", name)
	}
	if t.GetClusterset() != id.Clusterset {
		return fmt.Errorf("%s of clusterset %q is not allowed to %s (clusterset %q)", name, t.GetClusterset(), id, id.Clusterset)
	}
	switch req.(type) {
	case *registryv1.DeleteClusterRequest:
		return fmt.Errorf("DeleteCluster needs an admin identity; %s is a cluster", id)
	case *registryv1.RegisterClusterRequest, *registryv1.RenewLeaseRequest, *registryv1.PutExportRequest,
		*registryv1.DeleteExportRequest, *registryv1.SyncExportsRequest:
		c := req.(clusterTarget)
		if c.GetClusterId() != id.ClusterID {
			return fmt.Errorf("%s as cluster %s/%s is not allowed to %s (cluster %s/%s)", name, c.GetClusterset(), c.GetClusterId(), id, id.Clusterset, id.ClusterID)
		}
	}
	return nil
}

func (a *Authorizer) deny(ctx context.Context, id Identity, method string, err error) error {
	if a.Log != nil {
		a.Log.Warn("permission denied", "identity", id.URI, "method", method, "reason", err.Error())
	}
	if a.Denied != nil {
		a.Denied(method)
	}
	return status.Error(codes.PermissionDenied, err.Error())
}

// Unary is the unary interceptor.
func (a *Authorizer) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if strings.HasPrefix(info.FullMethod, "/grpc.health.") {
		return handler(ctx, req)
	}
	id, err := a.fromContext(ctx)
	if err != nil {
		return nil, err
	}
	if err := a.check(id, info.FullMethod, req); err != nil {
		return nil, a.deny(ctx, id, info.FullMethod, err)
	}
	return handler(ctx, req)
}

// Stream is the stream interceptor; it checks the first request of the stream.
func (a *Authorizer) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if strings.HasPrefix(info.FullMethod, "/grpc.") {
		return handler(srv, ss)
	}
	id, err := a.fromContext(ss.Context())
	if err != nil {
		return err
	}
	return handler(srv, &checkedStream{ServerStream: ss, a: a, id: id, method: info.FullMethod})
}

type checkedStream struct {
	grpc.ServerStream
	a       *Authorizer
	id      Identity
	method  string
	checked bool
}

func (s *checkedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if !s.checked {
		s.checked = true
		if err := s.a.check(s.id, s.method, m); err != nil {
			return s.a.deny(s.Context(), s.id, s.method, err)
		}
	}
	return nil
}

// IdentityOf returns the URI of the caller's identity, or "" when it has none; for counting
// what one client holds (its watches).
func (a *Authorizer) IdentityOf(ctx context.Context) string {
	id, err := a.fromContext(ctx)
	if err != nil {
		return ""
	}
	return id.URI
}
