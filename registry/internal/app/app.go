// Package app assembles the mcs-registry process: the store, the imports cache, the gRPC
// server, the REST gateway and the admin endpoints, and shuts them down in order.
package app

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/encoding/protojson"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/authz"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/imports"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/server"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/tlsfiles"
)

// Defaults of the limits, as the flags and the chart set them.
const (
	DefaultMaxExportsPerCluster   = 1000
	DefaultMaxEndpointsPerCluster = 50000
	DefaultMaxWatches             = 10000
	DefaultMaxWatchesPerClient    = 16
	DefaultSendTimeout            = 30 * time.Second
	DefaultIdleTimeout            = 5 * time.Minute
	DefaultMaxConnections         = 10000
)

// Run serves until ctx ends, then shuts down gracefully.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := newMetrics(reg)
	// The TLS files are read again when they change (a renewed certificate, a CA added to
	// the client-CA bundle): new connections use them with no restart.
	var grpcTLS, restTLS *tls.Config
	if cfg.TLSCertFile != "" {
		src, err := tlsfiles.Load(tlsfiles.Files{CertFile: cfg.TLSCertFile, KeyFile: cfg.TLSKeyFile, ClientCAFile: cfg.ClientCAFile}, log, m.tlsObserver(reg))
		if err != nil {
			return err
		}
		grpcTLS, restTLS = src.ServerConfig(), src.ServerConfig("h2", "http/1.1")
	}
	serverTLS := grpcTLS != nil
	// Every read skips a bad item again: count each skip, log each item once (up to a
	// thousand items, so a flood of them cannot grow the set without bound).
	var badMu sync.Mutex
	logged := map[string]bool{}
	badItem := func(pk, sk string, err error) {
		m.badItems.Inc()
		badMu.Lock()
		first := !logged[pk+"\x00"+sk] && len(logged) < 1000
		if first {
			logged[pk+"\x00"+sk] = true
		}
		badMu.Unlock()
		if first {
			log.Warn("skipped a stored item that cannot be decoded", "pk", pk, "sk", sk, "error", err)
		}
	}
	st, err := openStore(ctx, cfg, m.capacity, badItem)
	if err != nil {
		return err
	}

	runCtx, stopBackground := context.WithCancel(context.Background())
	defer stopBackground()
	cache := imports.New(imports.Options{Store: st, Logger: log, Observer: m.observer()})
	reg.MustRegister(newInventory(cache))
	go func() {
		if err := cache.Run(runCtx); err != nil && !errors.Is(err, context.Canceled) {
			log.Error("imports cache stopped", "error", err)
		}
	}()

	draining := make(chan struct{})
	var shuttingDown atomic.Bool
	countUnary, countStream := m.interceptors()
	unary := []grpc.UnaryServerInterceptor{countUnary}
	stream := []grpc.StreamServerInterceptor{countStream}
	var az *authz.Authorizer
	var clientOf func(context.Context) string
	if cfg.ClientCAFile != "" {
		az = &authz.Authorizer{TrustDomain: cfg.TrustDomain, Admins: cfg.AdminIdentities, Log: log, Denied: m.denied}
		unary, stream = append(unary, az.Unary), append(stream, az.Stream)
		clientOf = az.IdentityOf
	}
	svc := server.New(server.Options{Store: st, Cache: cache, Logger: log, Draining: draining, Refused: m.refused,
		Limits: server.Limits{MaxExportsPerCluster: cfg.MaxExportsPerCluster, MaxEndpointsPerCluster: cfg.MaxEndpointsPerCluster},
		Watch:  server.WatchLimits{MaxWatches: cfg.MaxWatches, MaxWatchesPerClient: cfg.MaxWatchesPerClient, SendTimeout: cfg.SendTimeout, ClientOf: clientOf},
	})
	decoding := server.NewDecoding()
	grpcOpts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(decoding.Codec()),
		grpc.MaxRecvMsgSize(cfg.MaxRequestBytes),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
		// Controllers keep watches open for hours; allow their keepalive pings. A connection
		// with no call for --idle-timeout is closed (GOAWAY), and one whose peer does not
		// answer a ping within 10 s; a connection must finish its handshake within 10 s.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second, MaxConnectionIdle: cfg.IdleTimeout}),
		grpc.ConnectionTimeout(handshakeTimeout),
	}
	internalGRPC := grpc.NewServer(grpcOpts...)
	if serverTLS {
		grpcOpts = append(grpcOpts, grpc.Creds(credentials.NewTLS(grpcTLS)))
	}
	grpcServer := grpc.NewServer(grpcOpts...)
	healthServer := health.NewServer()
	// gRPC health and /readyz follow the store: a controller's failback probe moves back
	// only to a registry that can serve. "" and the service's name say the same.
	var storeState storeHealth
	go storeState.follow(runCtx, healthServer, st, m.storeUp.Set)
	for _, s := range []*grpc.Server{grpcServer, internalGRPC} {
		s.RegisterService(decoding.ServiceDesc(), svc)
		healthpb.RegisterHealthServer(s, healthServer)
	}
	reflection.Register(grpcServer)
	// Every method's series exist from the start at 0, so rate() and alerts see the first call.
	m.grpc.InitializeMetrics(grpcServer)

	grpcLis, err := net.Listen("tcp", cfg.GRPCAddr)
	if err != nil {
		return fmt.Errorf("--grpc-addr: %w", err)
	}
	restLis, err := net.Listen("tcp", cfg.RESTAddr)
	if err != nil {
		grpcLis.Close()
		return fmt.Errorf("--rest-addr: %w", err)
	}
	// At most --max-connections open on each listener: more wait to be accepted.
	grpcLis, restLis = netutil.LimitListener(grpcLis, cfg.MaxConnections), netutil.LimitListener(restLis, cfg.MaxConnections)
	adminLis, err := net.Listen("tcp", cfg.AdminAddr)
	if err != nil {
		grpcLis.Close()
		restLis.Close()
		return fmt.Errorf("--admin-addr: %w", err)
	}

	// The REST gateway calls the service through in-process gRPC connections, one per call,
	// so a call goes through the same interceptors as a gRPC one, TLS is terminated once (at
	// the REST listener), and one client's call cannot end another's.
	inproc := bufconn.Listen(1 << 20)
	marshal := protojson.MarshalOptions{EmitUnpopulated: true}
	gwOpts := []runtime.ServeMuxOption{
		runtime.WithMarshalerOption(runtime.MIMEWildcard, &compactJSON{JSONPb: runtime.JSONPb{
			MarshalOptions:   marshal,
			UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: true},
		}}),
		// No HTTP header becomes gRPC metadata: the service reads none, and a REST client
		// must never set its own identity.
		runtime.WithIncomingHeaderMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithOutgoingHeaderMatcher(func(string) (string, bool) { return "", false }),
	}
	identity := func(*http.Request) string { return "" }
	if az != nil {
		// The REST listener verified the client certificate; its identity goes to the
		// in-process gRPC server, which authorizes the call like a gRPC one.
		identity = func(r *http.Request) string {
			if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
				return ""
			}
			id, err := az.CertIdentity(r.TLS.VerifiedChains[0][0])
			if err != nil {
				return ""
			}
			return id.URI
		}
		gwOpts = append(gwOpts, runtime.WithMetadata(func(_ context.Context, r *http.Request) metadata.MD {
			if id := identity(r); id != "" {
				return metadata.Pairs(authz.IdentityHeader, id)
			}
			return nil
		}))
	}
	gw := runtime.NewServeMux(gwOpts...)
	if err := registryv1.RegisterRegistryServiceHandlerClient(ctx, gw, registryv1.NewRegistryServiceClient(newPerCallConn(inproc, cfg.MaxRequestBytes))); err != nil {
		return fmt.Errorf("register the REST gateway: %w", err)
	}
	// Registered last, so it takes the watch path from the generated handler.
	watch := &restWatch{svc: svc, intercept: chainStream(stream), identity: identity, sendTimeout: cfg.SendTimeout, marshal: marshal}
	if err := gw.HandlePath(http.MethodGet, "/v1/clustersets/{clusterset}/imports:watch", watch.serve); err != nil {
		return fmt.Errorf("register the REST watch: %w", err)
	}
	restHandler := writeDeadline(http.MaxBytesHandler(gw, int64(cfg.MaxRequestBytes)), cfg.SendTimeout)
	// No WriteTimeout: watches last for hours; each write of an answer or a watch message
	// has its own deadline (--send-timeout) instead.
	restServer := &http.Server{Handler: restHandler, ReadHeaderTimeout: handshakeTimeout, ReadTimeout: time.Minute,
		IdleTimeout: cfg.IdleTimeout, MaxHeaderBytes: maxHeaderBytes, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	if serverTLS {
		restServer.TLSConfig = restTLS
	} else {
		restServer.Protocols = new(http.Protocols)
		restServer.Protocols.SetHTTP1(true)
		restServer.Protocols.SetUnencryptedHTTP2(true)
	}

	adminMux := http.NewServeMux()
	adminMux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	adminMux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	adminMux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if shuttingDown.Load() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		if err := storeState.state(); err != nil {
			http.Error(w, "store not reachable: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	adminServer := &http.Server{Handler: adminMux, ReadHeaderTimeout: 10 * time.Second}

	errc := make(chan error, 4)
	go func() { errc <- serveErr("grpc", grpcServer.Serve(grpcLis)) }()
	go func() { errc <- serveErr("internal grpc", internalGRPC.Serve(inproc)) }()
	go func() {
		if serverTLS {
			errc <- serveErr("rest", restServer.ServeTLS(restLis, "", ""))
		} else {
			errc <- serveErr("rest", restServer.Serve(restLis))
		}
	}()
	go func() { errc <- serveErr("admin", adminServer.Serve(adminLis)) }()
	log.Info("mcs-registry serving", "grpc", grpcLis.Addr().String(), "rest", restLis.Addr().String(), "admin", adminLis.Addr().String(),
		"store", cfg.Store, "tls", serverTLS, "client_auth", az != nil)

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	// Shut down: fail readiness, end watches so clients move to another replica, let
	// in-flight requests finish, then stop.
	log.Info("mcs-registry shutting down", "timeout", cfg.ShutdownTimeout)
	shuttingDown.Store(true)
	healthServer.Shutdown()
	close(draining)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	stopped := make(chan struct{})
	go func() {
		grpcServer.GracefulStop()
		close(stopped)
	}()
	_ = restServer.Shutdown(sctx)
	select {
	case <-stopped:
	case <-sctx.Done():
		grpcServer.Stop()
	}
	internalGRPC.Stop()
	_ = adminServer.Shutdown(sctx)
	stopBackground()
	log.Info("mcs-registry stopped")
	return runErr
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

// compactJSON is the gateway's marshaler with whitespace removed: protojson varies its
// spacing on purpose, and users grep the output (for "state":"LEASE_STATE_ACTIVE").
type compactJSON struct {
	runtime.JSONPb
}

func (c *compactJSON) Marshal(v any) ([]byte, error) {
	b, err := c.JSONPb.Marshal(v)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return b, nil
	}
	return buf.Bytes(), nil
}
