// Package caller names the client of a call, for what the registry counts per client (open
// watches, its share of request rate): its certificate identity when it has one, else its
// IP address. Without identities, clients behind one NAT, or a proxy that does not keep the
// client's address, share one name.
package caller

import (
	"context"
	"net"
	"net/http"

	"google.golang.org/grpc/peer"
)

// Of names the caller of a gRPC call: identityOf's answer (a certificate's URI) when it is
// not empty, else "address <ip>" of the peer, else "" (no peer: nobody to count).
func Of(ctx context.Context, identityOf func(context.Context) string) string {
	if identityOf != nil {
		if id := identityOf(ctx); id != "" {
			return id
		}
	}
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	return address(p.Addr.String())
}

// OfRequest names the caller of a REST request, as Of does.
func OfRequest(r *http.Request, identityOf func(*http.Request) string) string {
	if identityOf != nil {
		if id := identityOf(r); id != "" {
			return id
		}
	}
	if r.RemoteAddr == "" {
		return ""
	}
	return address(r.RemoteAddr)
}

// address is the name of a client known by its address: the host without the port, which
// differs on every connection.
func address(hostPort string) string {
	if host, _, err := net.SplitHostPort(hostPort); err == nil {
		hostPort = host
	}
	return "address " + hostPort
}
