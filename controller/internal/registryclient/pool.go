// Package registryclient is the controller's side of the registry: connections to the
// registry URLs with failover, the cluster's session (registration and heartbeats), and the
// watch of the clusterset's imports.
package registryclient

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

// Target is one registry URL.
type Target struct {
	// URL as given.
	URL string
	// Address is host:port, with the scheme's default port when the URL has none.
	Address string
	// Host is the host the certificate must name.
	Host   string
	Secure bool
}

// ParseURLs checks the registry URLs: http or https, the same scheme for all, and http only
// when allowInsecure is set. A URL without a port gets 443 (https) or 80 (http).
func ParseURLs(raw []string, allowInsecure bool) ([]Target, error) {
	if len(raw) == 0 {
		return nil, errors.New("--registry-url: at least one URL is required")
	}
	var out []Target
	for _, r := range raw {
		u, err := url.Parse(r)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("--registry-url %q: not a URL like https://mcs-registry.example.internal:9090", r)
		}
		if u.Path != "" && u.Path != "/" {
			return nil, fmt.Errorf("--registry-url %q: a gRPC URL has no path", r)
		}
		t := Target{URL: r, Host: u.Hostname()}
		port := u.Port()
		switch u.Scheme {
		case "https":
			t.Secure = true
			if port == "" {
				port = "443"
			}
		case "http":
			if !allowInsecure {
				return nil, fmt.Errorf("--registry-url %q: http:// sends the cluster's exports in plaintext; use https:// or set --registry-allow-insecure-http", r)
			}
			if port == "" {
				port = "80"
			}
		default:
			return nil, fmt.Errorf("--registry-url %q: the scheme must be https or http", r)
		}
		t.Address = net.JoinHostPort(t.Host, port)
		if len(out) > 0 && out[0].Secure != t.Secure {
			return nil, fmt.Errorf("--registry-url %q: every URL must use the same scheme as %q", r, out[0].URL)
		}
		out = append(out, t)
	}
	return out, nil
}

// Metrics are the hooks the pool and the session report to. Any field may be nil.
type Metrics struct {
	// ConnectionState: 1 when the URL answered its last call or health check, 0 when not.
	ConnectionState func(url string, up bool)
	// Active: the URL calls go to now.
	Active    func(url string)
	Failover  func(from, to string)
	Heartbeat func(ok bool)
	Register  func(ok bool)
}

type conn struct {
	target Target
	cc     *grpc.ClientConn
	client registryv1.RegistryServiceClient
	health healthpb.HealthClient

	mu sync.Mutex
	// abandoned ends when the health watch leaves this URL: the calls and streams still on
	// it end too, rather than wait for their timeout on a registry that went silent.
	abandoned context.Context
	abandon   context.CancelFunc
}

func newConn(t Target, cc *grpc.ClientConn) *conn {
	c := &conn{target: t, cc: cc, client: registryv1.NewRegistryServiceClient(cc), health: healthpb.NewHealthClient(cc)}
	c.abandoned, c.abandon = context.WithCancel(context.Background())
	return c
}

// bind returns ctx, ended also when the URL is abandoned, and its release.
func (c *conn) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	c.mu.Lock()
	abandoned := c.abandoned
	c.mu.Unlock()
	bctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(abandoned, cancel)
	context.AfterFunc(bctx, func() { stop() })
	return bctx, cancel
}

// leave ends every call and stream on the URL; later ones start afresh.
func (c *conn) leave() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.abandon()
	c.abandoned, c.abandon = context.WithCancel(context.Background())
}

// Pool holds a connection per registry URL and sends each call to the first URL, in
// failover order, that answers. After a failover it probes the earlier URLs, with backoff and
// jitter, and moves back when one answers again.
type Pool struct {
	conns   []*conn
	log     *slog.Logger
	metrics Metrics
	// CallTimeout bounds one attempt on one URL.
	callTimeout time.Duration

	mu      sync.Mutex
	current int
}

// PoolOptions configure NewPool.
type PoolOptions struct {
	Targets []Target
	// TLS gives the configuration of each new TLS connection (LoadTLSFiles's Config).
	TLS         func() *tls.Config
	Logger      *slog.Logger
	Metrics     Metrics
	CallTimeout time.Duration
	// DialOptions are added to every connection's (the fleet simulator decodes the
	// watches of many simulated clusters with one shared codec).
	DialOptions []grpc.DialOption
}

// reconnect bounds how long a connection waits between attempts to reach a registry that
// went away. gRPC's default grows to 120 s: after a registry restart of ten seconds, a
// controller would come back tens of seconds later, past the hold its peers keep its
// endpoints for. An attempt every few seconds per controller costs the registry nothing.
var reconnect = grpc.ConnectParams{
	Backoff:           grpcbackoff.Config{BaseDelay: 500 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 3 * time.Second},
	MinConnectTimeout: 10 * time.Second,
}

// NewPool connects (lazily) to every target.
func NewPool(opts PoolOptions) (*Pool, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.CallTimeout == 0 {
		opts.CallTimeout = 10 * time.Second
	}
	p := &Pool{log: opts.Logger, metrics: opts.Metrics, callTimeout: opts.CallTimeout}
	for _, t := range opts.Targets {
		creds := insecure.NewCredentials()
		if t.Secure {
			creds = &filesCreds{config: opts.TLS, serverName: t.Host}
		}
		dial := append([]grpc.DialOption{
			grpc.WithTransportCredentials(creds),
			grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true}),
			grpc.WithConnectParams(reconnect),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256 << 20)),
		}, opts.DialOptions...)
		cc, err := grpc.NewClient(t.Address, dial...)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("registry %s: %w", t.URL, err)
		}
		p.conns = append(p.conns, newConn(t, cc))
	}
	if f := p.metrics.Active; f != nil && len(p.conns) > 0 {
		f(p.conns[0].target.URL)
	}
	return p, nil
}

// Close closes every connection.
func (p *Pool) Close() {
	for _, c := range p.conns {
		_ = c.cc.Close()
	}
}

// Current returns the URL calls go to now.
func (p *Pool) Current() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conns[p.current].target.URL
}

// transient reports an error that another registry URL may not have.
func transient(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Unknown, codes.Internal, codes.ResourceExhausted:
		return true
	}
	return false
}

// ClustersetUnknown reports the registry's answer to a read of a clusterset in which no
// cluster is registered: it holds nothing of the clusterset.
func ClustersetUnknown(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.InvalidArgument {
		return false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == registryv1.ErrorReason_ERROR_REASON_CLUSTERSET_UNKNOWN.String() {
			return true
		}
	}
	return false
}

// Call runs fn against the current URL, and on a transient error against each next URL in
// failover order, moving the current URL to the first that answers. Each attempt has the
// pool's call timeout.
func (p *Pool) Call(ctx context.Context, fn func(context.Context, registryv1.RegistryServiceClient) error) error {
	_, err := p.try(ctx, false, func(ctx context.Context, c registryv1.RegistryServiceClient) error {
		actx, cancel := context.WithTimeout(ctx, p.callTimeout)
		defer cancel()
		return fn(actx, c)
	})
	return err
}

// Stream opens a server stream on the current URL (failing over like Call) and returns the
// URL it is on. The stream lives until ctx ends or the health watch leaves the URL.
func (p *Pool) Stream(ctx context.Context, open func(context.Context, registryv1.RegistryServiceClient) error) (string, error) {
	return p.try(ctx, true, open)
}

// try runs fn on the URLs in failover order, from the current one, until one answers
// without a transient error, and makes that one current. A call cut short because the
// health watch left its URL counts as transient.
func (p *Pool) try(ctx context.Context, stream bool, fn func(context.Context, registryv1.RegistryServiceClient) error) (string, error) {
	p.mu.Lock()
	start := p.current
	p.mu.Unlock()
	var errs []error
	for i := range p.conns {
		idx := (start + i) % len(p.conns)
		c := p.conns[idx]
		bctx, release := c.bind(ctx)
		err := honourRetryHints(bctx, func() error { return fn(bctx, c.client) })
		left := err != nil && bctx.Err() != nil && ctx.Err() == nil
		if !stream || err != nil {
			release() // a stream keeps its context until ctx ends or the URL is left
		}
		if left {
			err = status.Errorf(codes.Unavailable, "the health watch left %s: %v", c.target.URL, err)
		}
		if f := p.metrics.ConnectionState; f != nil {
			f(c.target.URL, err == nil || !transient(err))
		}
		if err == nil || !transient(err) || ctx.Err() != nil {
			if idx != start {
				p.switchTo(idx)
			}
			return c.target.URL, err
		}
		errs = append(errs, fmt.Errorf("%s: %w", c.target.URL, err))
	}
	return "", fmt.Errorf("no registry URL answered: %w", errors.Join(errs...))
}

// RunHealthWatch checks the current URL's gRPC health every interval, each check bounded
// by timeout. When the current URL does not answer SERVING in time — a registry that went
// silent without refusing connections, or one that drains — it moves to the next URL that
// does, and ends the calls and streams still on the old one, so neither waits for its own
// timeout. With one URL there is nowhere to go and it does nothing.
func (p *Pool) RunHealthWatch(ctx context.Context, interval, timeout time.Duration) {
	if len(p.conns) < 2 || interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.mu.Lock()
		cur := p.current
		p.mu.Unlock()
		if p.serving(ctx, cur, timeout) {
			continue
		}
		for i := 1; i < len(p.conns); i++ {
			next := (cur + i) % len(p.conns)
			if p.serving(ctx, next, timeout) {
				p.log.Warn("registry URL does not answer its health check; leaving it", "url", p.conns[cur].target.URL, "timeout", timeout)
				p.switchTo(next)
				p.conns[cur].leave()
				break
			}
		}
	}
}

// serving health-checks one URL and reports the answer as its connection state.
func (p *Pool) serving(ctx context.Context, idx int, timeout time.Duration) bool {
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := p.conns[idx].health.Check(hctx, &healthpb.HealthCheckRequest{})
	up := err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
	if ctx.Err() == nil {
		if f := p.metrics.ConnectionState; f != nil {
			f(p.conns[idx].target.URL, up)
		}
	}
	return up
}

func (p *Pool) switchTo(idx int) {
	p.mu.Lock()
	from := p.conns[p.current].target.URL
	if p.current == idx {
		p.mu.Unlock()
		return
	}
	p.current = idx
	to := p.conns[idx].target.URL
	p.mu.Unlock()
	p.log.Warn("registry failover", "from", from, "to", to)
	if f := p.metrics.Failover; f != nil {
		f(from, to)
	}
	if f := p.metrics.Active; f != nil {
		f(to)
	}
}

// RunFailback probes the URLs before the current one while calls go to a later one, and
// moves back to the first that reports SERVING. Probes back off from min to max, with
// jitter, while the earlier URLs stay down.
func (p *Pool) RunFailback(ctx context.Context, lo, hi time.Duration) {
	b := newBackoff(lo, hi)
	for b.wait(ctx) {
		p.mu.Lock()
		cur := p.current
		p.mu.Unlock()
		if cur == 0 {
			b.reset()
			continue
		}
		back := false
		for i := 0; i < cur; i++ {
			if p.serving(ctx, i, p.callTimeout) {
				p.log.Info("registry URL answers again; failing back", "url", p.conns[i].target.URL)
				p.switchTo(i)
				back = true
				break
			}
		}
		if back {
			b.reset()
		}
	}
}
