package harness

import (
	"crypto/tls"
	"io"
	"net"
	"sync"
	"testing"
)

// Forwarder is a TCP forwarder on a loopback port: a second address for the same server,
// which a test can take down (Close) to make that address unreachable.
type Forwarder struct {
	Addr string
	lis  net.Listener
	mu   sync.Mutex
	conn map[net.Conn]struct{}
	down bool
	// silent: bytes are dropped both ways and new connections are accepted but never
	// forwarded — a path that drops packets instead of refusing them.
	silent bool
}

// Forward listens on a free loopback port and forwards every connection to target.
func Forward(tb testing.TB, target string) *Forwarder {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("harness: forwarder: %v", err)
	}
	f := &Forwarder{Addr: lis.Addr().String(), lis: lis, conn: map[net.Conn]struct{}{}}
	go f.serve(target)
	tb.Cleanup(f.Close)
	return f
}

func (f *Forwarder) serve(target string) {
	for {
		in, err := f.lis.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		down := f.down
		f.mu.Unlock()
		if down {
			in.Close()
			continue
		}
		out, err := net.Dial("tcp", target)
		if err != nil {
			in.Close()
			continue
		}
		f.mu.Lock()
		f.conn[in], f.conn[out] = struct{}{}, struct{}{}
		f.mu.Unlock()
		go func() { _, _ = io.Copy(f.unlessSilent(out), in); out.Close() }()
		go func() { _, _ = io.Copy(f.unlessSilent(in), out); in.Close() }()
	}
}

// unlessSilent writes to w while the forwarder is not silent and drops the bytes while it is.
func (f *Forwarder) unlessSilent(w io.Writer) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		f.mu.Lock()
		silent := f.silent
		f.mu.Unlock()
		if silent {
			return len(p), nil
		}
		return w.Write(p)
	})
}

type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }

// SetSilent makes the path silent (every byte dropped both ways, on open and new
// connections alike, nothing refused or closed) or forwards again. A client learns of a
// silent path only from its own timeouts, keepalives or health checks.
func (f *Forwarder) SetSilent(silent bool) {
	f.mu.Lock()
	f.silent = silent
	f.mu.Unlock()
}

// Close stops listening and cuts every forwarded connection.
func (f *Forwarder) Close() {
	_ = f.lis.Close()
	f.Cut()
}

// SetDown makes the target unreachable through the forwarder (every forwarded connection
// cut, new ones closed at once) or reachable again.
func (f *Forwarder) SetDown(down bool) {
	f.mu.Lock()
	f.down = down
	f.mu.Unlock()
	if down {
		f.Cut()
	}
}

// Cut closes every forwarded connection and keeps listening: clients connect again.
func (f *Forwarder) Cut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.conn {
		_ = c.Close()
	}
	f.conn = map[net.Conn]struct{}{}
}

// TerminateTLS listens on a free loopback port, ends TLS there with the key pair, and
// forwards the plaintext to target: a load balancer's TLS listener. alpn are the protocols
// it offers in ALPN; none models a listener without an ALPN policy.
func TerminateTLS(tb testing.TB, target, certFile, keyFile string, alpn ...string) *Forwarder {
	tb.Helper()
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		tb.Fatalf("harness: TLS terminator: %v", err)
	}
	lis, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: alpn, MinVersion: tls.VersionTLS12})
	if err != nil {
		tb.Fatalf("harness: TLS terminator: %v", err)
	}
	f := &Forwarder{Addr: lis.Addr().String(), lis: lis, conn: map[net.Conn]struct{}{}}
	go f.serve(target)
	tb.Cleanup(f.Close)
	return f
}
