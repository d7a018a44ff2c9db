// Package app assembles the mcs-registry process: the store, the imports cache, the gRPC
// server, the REST gateway and the admin endpoints, and shuts them down in order.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/net/netutil"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"

	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/authz"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/imports"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/ratelimit"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/server"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// Defaults of the limits, as the flags and the chart set them.
const (
	DefaultMaxExportsPerCluster   = 1000
	DefaultMaxEndpointsPerCluster = 50000
	// DefaultMaxBytesPerCluster holds 50,000 endpoints of ~1 KiB each (hostnames, zones,
	// target references) with room for specs and annotations.
	DefaultMaxBytesPerCluster  = 64 << 20
	DefaultMaxWatches          = 10000
	DefaultMaxWatchesPerClient = 16
	DefaultSendTimeout         = 30 * time.Second
	DefaultIdleTimeout         = 5 * time.Minute
	DefaultMaxConnections      = 10000
	// DefaultClientRate and DefaultClientBurst: each client may make 200 small requests a
	// second, or send 3.2 MB a second, and send the largest request (--max-request-bytes,
	// 1,025 units at its default) from a full bucket; a controller's steady load (lease
	// renewals, export writes as endpoints change) is a few units a second.
	DefaultClientRate  = 200
	DefaultClientBurst = 2000
)

// Run serves until ctx ends, then shuts down gracefully: build, serve, shut down.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	p, err := build(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer p.stopBackground()
	if err := p.listen(); err != nil {
		return err
	}
	return p.serve(ctx)
}

// process is a built mcs-registry: its store and imports cache with their background work,
// the public gRPC server, the in-process one the REST gateway calls, the REST and admin
// HTTP servers, and their listeners. Its lifetime: build, listen, serve (until the context
// ends or a server fails), shutdown.
type process struct {
	cfg Config
	log *slog.Logger
	reg *prometheus.Registry
	m   *metrics

	store          store.Store
	cache          *imports.Cache
	stopBackground context.CancelFunc // the cache and the store health follower
	storeState     *storeHealth

	az                       *authz.Authorizer
	admit                    *ratelimit.Limiter
	stream                   []grpc.StreamServerInterceptor
	grpcTLS, restTLS         *tls.Config
	svc                      *server.Server
	grpcServer, internalGRPC *grpc.Server
	health                   *health.Server
	rest, admin              *http.Server

	grpcLis, restLis, adminLis net.Listener
	inproc                     *inProcessListener

	// draining ends the open watches; shuttingDown fails /readyz.
	draining     chan struct{}
	shuttingDown atomic.Bool
}

// build makes every part of the process, in dependency order; nothing listens yet.
func build(ctx context.Context, cfg Config, log *slog.Logger) (*process, error) {
	p := &process{cfg: cfg, log: log, reg: prometheus.NewRegistry(), draining: make(chan struct{}), storeState: &storeHealth{}}
	p.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	p.m = newMetrics(p.reg)
	if err := p.buildTLS(); err != nil {
		return nil, err
	}
	if err := p.buildStore(ctx); err != nil {
		return nil, err
	}
	p.buildGRPC()
	if err := p.buildREST(ctx); err != nil {
		p.stopBackground()
		return nil, err
	}
	p.buildAdmin()
	return p, nil
}

// listen opens the three listeners; at most --max-connections are open on the gRPC and
// REST ones (more wait to be accepted).
func (p *process) listen() error {
	var err error
	if p.grpcLis, err = net.Listen("tcp", p.cfg.GRPCAddr); err != nil {
		return fmt.Errorf("--grpc-addr: %w", err)
	}
	if p.restLis, err = net.Listen("tcp", p.cfg.RESTAddr); err != nil {
		_ = p.grpcLis.Close()
		return fmt.Errorf("--rest-addr: %w", err)
	}
	p.grpcLis, p.restLis = netutil.LimitListener(p.grpcLis, p.cfg.MaxConnections), netutil.LimitListener(p.restLis, p.cfg.MaxConnections)
	if p.adminLis, err = net.Listen("tcp", p.cfg.AdminAddr); err != nil {
		_ = p.grpcLis.Close()
		_ = p.restLis.Close()
		return fmt.Errorf("--admin-addr: %w", err)
	}
	return nil
}

// serve runs every server until ctx ends or one of them fails, then shuts them all down;
// it returns the first server's failure.
func (p *process) serve(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return serveErr("grpc", p.grpcServer.Serve(p.grpcLis)) })
	g.Go(func() error { return serveErr("internal grpc", p.internalGRPC.Serve(p.inproc)) })
	g.Go(func() error {
		if p.restTLS != nil {
			return serveErr("rest", p.rest.ServeTLS(p.restLis, "", ""))
		}
		return serveErr("rest", p.rest.Serve(p.restLis))
	})
	g.Go(func() error { return serveErr("admin", p.admin.Serve(p.adminLis)) })
	g.Go(func() error {
		<-gctx.Done()
		p.shutdown()
		return nil
	})
	p.log.Info("mcs-registry serving", "grpc", p.grpcLis.Addr().String(), "rest", p.restLis.Addr().String(), "admin", p.adminLis.Addr().String(),
		"store", p.cfg.Store, "tls", p.grpcTLS != nil, "client_auth", p.az != nil)
	err := g.Wait()
	p.log.Info("mcs-registry stopped")
	return err
}

// shutdown is the shutdown order, in one place: fail readiness, end watches so clients
// move to another replica, let in-flight requests finish (within --shutdown-timeout), then
// stop the servers and the background work.
func (p *process) shutdown() {
	p.log.Info("mcs-registry shutting down", "timeout", p.cfg.ShutdownTimeout)
	p.shuttingDown.Store(true)
	p.health.Shutdown()
	close(p.draining)
	sctx, cancel := context.WithTimeout(context.Background(), p.cfg.ShutdownTimeout)
	defer cancel()
	stopped := make(chan struct{})
	go func() {
		p.grpcServer.GracefulStop()
		close(stopped)
	}()
	_ = p.rest.Shutdown(sctx)
	select {
	case <-stopped:
	case <-sctx.Done():
		p.grpcServer.Stop()
	}
	p.internalGRPC.Stop()
	_ = p.admin.Shutdown(sctx)
	p.stopBackground()
}

const (
	// handshakeTimeout bounds a new connection's TLS and HTTP/2 handshake, and the
	// reading of a REST request's headers.
	handshakeTimeout = 10 * time.Second
	// maxHeaderBytes bounds a REST request's headers.
	maxHeaderBytes = 64 << 10
)

func serveErr(name string, err error) error {
	if err == nil || errors.Is(err, http.ErrServerClosed) || errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return fmt.Errorf("%s server: %w", name, err)
}
