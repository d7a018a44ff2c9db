package app

import (
	"context"
	"net"
	"sync"
)

// inProcessListener is the listener of the gRPC server the REST gateway calls: each dial
// makes a connected in-memory pair (net.Pipe) and hands the server's end to Accept. It
// reaches only this process. That matters: the gateway passes the identity the REST
// listener verified to that server as metadata (authz.IdentityHeader), which the server
// trusts; a loopback TCP port would let any local process send it.
type inProcessListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newInProcessListener() *inProcessListener {
	return &inProcessListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept implements net.Listener.
func (l *inProcessListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener: dials fail from then on.
func (l *inProcessListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr implements net.Listener.
func (l *inProcessListener) Addr() net.Addr { return inProcessAddr{} }

// DialContext connects to the listener's server, as soon as it accepts.
func (l *inProcessListener) DialContext(ctx context.Context) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		err := net.ErrClosed
		_ = client.Close()
		_ = server.Close()
		return nil, err
	case <-ctx.Done():
		_ = client.Close()
		_ = server.Close()
		return nil, ctx.Err()
	}
}

type inProcessAddr struct{}

func (inProcessAddr) Network() string { return "pipe" }
func (inProcessAddr) String() string  { return "in-process" }
