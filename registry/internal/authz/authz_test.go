package authz

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/url"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

func uris(t *testing.T, ss ...string) []*url.URL {
	t.Helper()
	var out []*url.URL
	for _, s := range ss {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

func TestParse(t *testing.T) {
	a := &Authorizer{TrustDomain: "example.org", Admins: []string{"spiffe://example.org/ops/alice"}}
	for _, tc := range []struct {
		uris []string
		want Identity
		err  bool
	}{
		{[]string{"spiffe://example.org/clusterset/prod/cluster/use1-a"}, Identity{URI: "spiffe://example.org/clusterset/prod/cluster/use1-a", Clusterset: "prod", ClusterID: "use1-a"}, false},
		{[]string{"spiffe://example.org/admin"}, Identity{URI: "spiffe://example.org/admin", Admin: true}, false},
		{[]string{"spiffe://example.org/ops/alice"}, Identity{URI: "spiffe://example.org/ops/alice", Admin: true}, false},
		// The first URI of the trust domain with the right shape wins; others are skipped.
		{[]string{"https://example.org/x", "spiffe://example.org/clusterset/prod/cluster/b"}, Identity{URI: "spiffe://example.org/clusterset/prod/cluster/b", Clusterset: "prod", ClusterID: "b"}, false},
		{[]string{"spiffe://other.org/clusterset/prod/cluster/use1-a"}, Identity{}, true},
		{[]string{"spiffe://other.org/admin"}, Identity{}, true},
		{[]string{"spiffe://example.org/clusterset/prod/cluster/"}, Identity{}, true},
		{[]string{"spiffe://example.org/clusterset/prod"}, Identity{}, true},
		{[]string{"spiffe://example.org/clusterset/prod/cluster/a/extra"}, Identity{}, true},
		{nil, Identity{}, true},
	} {
		got, err := a.Parse(uris(t, tc.uris...))
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("Parse(%v) = %+v, %v; want %+v, error %v", tc.uris, got, err, tc.want, tc.err)
		}
	}
}

func TestCheck(t *testing.T) {
	a := &Authorizer{TrustDomain: "example.org"}
	cluster := Identity{URI: "spiffe://example.org/clusterset/prod/cluster/a", Clusterset: "prod", ClusterID: "a"}
	admin := Identity{URI: "spiffe://example.org/admin", Admin: true}
	const svc = "/globaldiscoverymcs.registry.v1.RegistryService/"
	for _, tc := range []struct {
		id     Identity
		method string
		req    any
		want   string // "" allowed, else a part of the refusal
	}{
		{cluster, "RegisterCluster", &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: "a"}, ""},
		{cluster, "RegisterCluster", &registryv1.RegisterClusterRequest{Clusterset: "prod", ClusterId: "b"}, "as cluster prod/b is not allowed"},
		{cluster, "RenewLease", &registryv1.RenewLeaseRequest{Clusterset: "prod", ClusterId: "b"}, "as cluster prod/b"},
		{cluster, "PutExport", &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "a"}, ""},
		{cluster, "PutExport", &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "b"}, "as cluster prod/b"},
		{cluster, "DeleteExport", &registryv1.DeleteExportRequest{Clusterset: "prod", ClusterId: "b"}, "as cluster prod/b"},
		{cluster, "SyncExports", &registryv1.SyncExportsRequest{Clusterset: "prod", ClusterId: "b"}, "as cluster prod/b"},
		{cluster, "SyncExports", &registryv1.SyncExportsRequest{Clusterset: "staging", ClusterId: "a"}, `of clusterset "staging" is not allowed`},
		// Reads of the own clusterset, any cluster's records: allowed.
		{cluster, "ListImports", &registryv1.ListImportsRequest{Clusterset: "prod"}, ""},
		{cluster, "WatchImports", &registryv1.WatchImportsRequest{Clusterset: "prod"}, ""},
		{cluster, "ListExports", &registryv1.ListExportsRequest{Clusterset: "prod", ClusterId: "b"}, ""},
		{cluster, "ListImports", &registryv1.ListImportsRequest{Clusterset: "staging"}, `of clusterset "staging"`},
		{cluster, "DeleteCluster", &registryv1.DeleteClusterRequest{Clusterset: "prod", ClusterId: "a"}, "DeleteCluster needs an admin identity"},
		{cluster, "Unknown", struct{}{}, "is not allowed to a cluster identity"},
		{admin, "DeleteCluster", &registryv1.DeleteClusterRequest{Clusterset: "prod", ClusterId: "a"}, ""},
		{admin, "ListImports", &registryv1.ListImportsRequest{Clusterset: "staging"}, ""},
	} {
		err := a.check(tc.id, svc+tc.method, tc.req)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s %s %+v: %v; want %q", tc.id, tc.method, tc.req, err, tc.want)
		}
	}
}

// TestUnary: the identity comes from the TLS peer's verified chain, or, without TLS (the
// REST gateway's in-process connection), from the forwarded header; none is UNAUTHENTICATED
// and a refusal PERMISSION_DENIED, counted.
func TestUnary(t *testing.T) {
	denied := 0
	a := &Authorizer{TrustDomain: "example.org", Denied: func(string) { denied++ }}
	tlsPeer := func(u string) context.Context {
		cert := &x509.Certificate{URIs: uris(t, u)}
		info := credentials.TLSInfo{State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}}}
		return peer.NewContext(context.Background(), &peer.Peer{AuthInfo: info})
	}
	plainPeer := peer.NewContext(context.Background(), &peer.Peer{})
	forwarded := metadata.NewIncomingContext(plainPeer, metadata.Pairs(IdentityHeader, "spiffe://example.org/clusterset/prod/cluster/a"))
	unverified := peer.NewContext(context.Background(), &peer.Peer{AuthInfo: credentials.TLSInfo{}})
	info := &grpc.UnaryServerInfo{FullMethod: "/globaldiscoverymcs.registry.v1.RegistryService/PutExport"}
	ok := func(context.Context, any) (any, error) { return "ok", nil }
	for _, tc := range []struct {
		name string
		ctx  context.Context
		req  any
		code codes.Code
	}{
		{"tls, own cluster", tlsPeer("spiffe://example.org/clusterset/prod/cluster/a"), &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "a"}, codes.OK},
		{"tls, another cluster", tlsPeer("spiffe://example.org/clusterset/prod/cluster/a"), &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "b"}, codes.PermissionDenied},
		{"tls, no identity", tlsPeer("spiffe://other.org/x"), &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "a"}, codes.Unauthenticated},
		{"tls, chain not verified", unverified, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "a"}, codes.Unauthenticated},
		{"forwarded by the REST listener", forwarded, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "a"}, codes.OK},
		{"no peer identity", plainPeer, &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "a"}, codes.Unauthenticated},
		{"no peer", context.Background(), &registryv1.PutExportRequest{Clusterset: "prod", ClusterId: "a"}, codes.Unauthenticated},
	} {
		_, err := a.Unary(tc.ctx, tc.req, info, ok)
		if status.Code(err) != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
	if denied != 1 {
		t.Errorf("denied counted %d times, want 1", denied)
	}
	// Health checks need no identity.
	if _, err := a.Unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/grpc.health.v1.Health/Check"}, ok); err != nil {
		t.Errorf("health check: %v", err)
	}
	if got := a.IdentityOf(forwarded); got != "spiffe://example.org/clusterset/prod/cluster/a" {
		t.Errorf("IdentityOf = %q", got)
	}
}
