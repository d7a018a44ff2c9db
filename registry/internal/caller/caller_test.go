package caller

import (
	"context"
	"net"
	"net/http/httptest"
	"testing"

	"google.golang.org/grpc/peer"
)

func TestOf(t *testing.T) {
	withPeer := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 40000}})
	v6 := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP("fd00::1"), Port: 40000}})
	identity := func(context.Context) string { return "spiffe://example.org/clusterset/prod/cluster/a" }
	none := func(context.Context) string { return "" }
	tests := []struct {
		name       string
		ctx        context.Context
		identityOf func(context.Context) string
		want       string
	}{
		{"an identity names the caller", withPeer, identity, "spiffe://example.org/clusterset/prod/cluster/a"},
		{"without one, its address, without the port", withPeer, none, "address 10.1.2.3"},
		{"no identity function", withPeer, nil, "address 10.1.2.3"},
		{"IPv6", v6, nil, "address fd00::1"},
		{"no peer: nobody", context.Background(), none, ""},
	}
	for _, tt := range tests {
		if got := Of(tt.ctx, tt.identityOf); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.9.9.9:1234"
	if got := OfRequest(r, nil); got != "address 10.9.9.9" {
		t.Errorf("REST: %q", got)
	}
}
