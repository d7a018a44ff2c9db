package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/protobuf/encoding/protojson"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/authz"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/caller"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/imports"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/ratelimit"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/server"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/tlsfiles"
	dynamostore "github.com/ai-dynamo/global-discovery-mcs/registry/store/dynamodb"
)

// buildTLS loads the TLS files; they are read again when they change (a renewed
// certificate, a CA added to the client-CA bundle): new connections use them with no
// restart.
func (p *process) buildTLS() error {
	if p.cfg.TLSCertFile == "" {
		return nil
	}
	src, err := tlsfiles.Load(tlsfiles.Files{CertFile: p.cfg.TLSCertFile, KeyFile: p.cfg.TLSKeyFile, ClientCAFile: p.cfg.ClientCAFile}, p.log, p.m.tlsObserver(p.reg))
	if err != nil {
		return err
	}
	p.grpcTLS, p.restTLS = src.ServerConfig(), src.ServerConfig("h2", "http/1.1")
	return nil
}

// buildStore opens the store and starts the imports cache over it.
func (p *process) buildStore(ctx context.Context) error {
	// Every read skips a bad item again: count each skip, log each item once (up to a
	// thousand items, so a flood of them cannot grow the set without bound).
	var badMu sync.Mutex
	logged := map[string]bool{}
	badItem := func(pk, sk string, err error) {
		p.m.badItems.Inc()
		badMu.Lock()
		first := !logged[pk+"\x00"+sk] && len(logged) < 1000
		if first {
			logged[pk+"\x00"+sk] = true
		}
		badMu.Unlock()
		if first {
			p.log.Warn("skipped a stored item that cannot be decoded", "pk", pk, "sk", sk, "error", err)
		}
	}
	// A write no caller waits for (a heartbeat, an old chunk's delete) that fails is
	// counted, and logged at its 1st, 10th, 100th, ... failure of each kind: a store that
	// stays down does not flood the log.
	var droppedMu sync.Mutex
	droppedCount := map[string]int{}
	dropped := func(op string, err error) {
		p.m.droppedWrites.WithLabelValues(op).Inc()
		droppedMu.Lock()
		droppedCount[op]++
		n := droppedCount[op]
		droppedMu.Unlock()
		if isPowerOfTen(n) {
			p.log.Warn("a store write that no request waits for failed", "op", op, "failures", n, "error", err)
		}
	}
	st, err := openStore(ctx, p.cfg, dynamostore.Options{Capacity: p.m.capacity, BadItem: badItem, DroppedWrite: dropped,
		SweptChunks: func(n int) { p.m.sweptChunks.Add(float64(n)) },
		Waiting:     func(d int) { p.m.storeWaiting.Add(float64(d)) },
		Abandoned:   p.m.storeAbandoned.Inc})
	if err != nil {
		return err
	}
	p.store = st
	runCtx, stop := context.WithCancel(context.Background())
	p.stopBackground = stop
	// A lease renewed through another region is held while replication from it lags, up
	// to --replication-stall-hold (package lease).
	var leases imports.LeaseOptions
	if ds, ok := st.(*dynamostore.Store); ok {
		leases = imports.LeaseOptions{Region: ds.Region(), Hold: p.cfg.ReplicationStallHold, Lag: ds.ReplicationLagBound}
	}
	opts := imports.Options{Store: st, Logger: p.log, Observer: p.m.observer(), Leases: leases}
	if p.cfg.Store == "memory" {
		opts.StartedEmpty = time.Now()
	}
	p.cache = imports.New(opts)
	p.reg.MustRegister(newInventory(p.cache))
	go func() {
		if err := p.cache.Run(runCtx); err != nil && !errors.Is(err, context.Canceled) {
			p.log.Error("imports cache stopped", "error", err)
		}
	}()
	p.health = health.NewServer()
	// gRPC health and /readyz follow the store: a controller's failback probe moves back
	// only to a registry that can serve. "" and the service's name say the same.
	go p.storeState.follow(runCtx, p.health, st, p.m.storeUp.Set)
	if ds, ok := st.(*dynamostore.Store); ok {
		go ds.RunHeartbeats(runCtx)
		p.reg.MustRegister(newReplicationLag(ds))
	}
	return nil
}

// buildGRPC makes the service and its two gRPC servers: the public one (with TLS when
// configured) and the in-process one the REST gateway calls.
func (p *process) buildGRPC() {
	cfg := p.cfg
	countUnary, countStream := p.m.interceptors()
	unary := []grpc.UnaryServerInterceptor{countUnary}
	p.stream = []grpc.StreamServerInterceptor{countStream}
	var identityOf func(context.Context) string
	if cfg.ClientCAFile != "" {
		p.az = &authz.Authorizer{TrustDomain: cfg.TrustDomain, Admins: cfg.AdminIdentities, Log: p.log, Denied: p.m.denied}
		unary, p.stream = append(unary, p.az.Unary), append(p.stream, p.az.Stream)
		identityOf = p.az.IdentityOf
	}
	p.admit = ratelimit.New(ratelimit.Share{Rate: cfg.ClientRate, Burst: cfg.ClientBurst}, p.m.clientThrottled)
	p.svc = server.New(server.Options{Store: p.store, Cache: p.cache, Logger: p.log, Draining: p.draining, Refused: p.m.refused,
		Watch: server.WatchLimits{MaxWatches: cfg.MaxWatches, MaxWatchesPerClient: cfg.MaxWatchesPerClient, SendTimeout: cfg.SendTimeout, ClientOf: identityOf},
	})
	decoding := server.NewDecoding()
	grpcOpts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(decoding.Codec()),
		grpc.MaxRecvMsgSize(cfg.MaxRequestBytes),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(p.stream...),
		// Controllers keep watches open for hours; allow their keepalive pings. A connection
		// with no call for --idle-timeout is closed (GOAWAY), and one whose peer does not
		// answer a ping within 10 s; a connection must finish its handshake within 10 s.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second, MaxConnectionIdle: cfg.IdleTimeout}),
		grpc.ConnectionTimeout(handshakeTimeout),
	}
	// The in-process server's calls come from the REST listener, which admits them.
	p.internalGRPC = grpc.NewServer(grpcOpts...)
	if p.grpcTLS != nil {
		grpcOpts = append(grpcOpts, grpc.Creds(credentials.NewTLS(p.grpcTLS)))
	}
	if p.admit.Enabled() {
		grpcOpts = append(grpcOpts,
			grpc.InTapHandle(p.admit.Tap(func(ctx context.Context) string { return caller.Of(ctx, identityOf) })),
			grpc.StatsHandler(p.admit.StatsHandler()))
	}
	p.grpcServer = grpc.NewServer(grpcOpts...)
	for _, s := range []*grpc.Server{p.grpcServer, p.internalGRPC} {
		s.RegisterService(decoding.ServiceDesc(), p.svc)
		healthpb.RegisterHealthServer(s, p.health)
	}
	reflection.Register(p.grpcServer)
	// Every method's series exist from the start at 0, so rate() and alerts see the first call.
	p.m.grpc.InitializeMetrics(p.grpcServer)
}

// buildREST makes the REST gateway. It calls the service through in-process gRPC
// connections, one per call, so a call goes through the same interceptors as a gRPC one,
// TLS is terminated once (at the REST listener), and one client's call cannot end
// another's.
func (p *process) buildREST(ctx context.Context) error {
	cfg := p.cfg
	p.inproc = newInProcessListener()
	marshal := protojson.MarshalOptions{EmitUnpopulated: true}
	gwOpts := []runtime.ServeMuxOption{
		runtime.WithMarshalerOption(runtime.MIMEWildcard, &compactJSON{JSONPb: runtime.JSONPb{
			MarshalOptions:   marshal,
			UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: true},
		}}),
		// No HTTP header becomes gRPC metadata: the service reads none, and a REST client
		// must never set its own identity.
		// A path segment keeps an encoded slash (%2F) in its value, so a name holding one is
		// refused naming its field (400), not routed nowhere (404).
		runtime.WithUnescapingMode(runtime.UnescapingModeAllExceptSlash),
		runtime.WithIncomingHeaderMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithOutgoingHeaderMatcher(func(string) (string, bool) { return "", false }),
	}
	identity := func(*http.Request) string { return "" }
	if az := p.az; az != nil {
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
	if err := registryv1.RegisterRegistryServiceHandlerClient(ctx, gw, registryv1.NewRegistryServiceClient(newPerCallConn(p.inproc, cfg.MaxRequestBytes))); err != nil {
		return fmt.Errorf("register the REST gateway: %w", err)
	}
	// Registered last, so it takes the watch path from the generated handler.
	watch := &restWatch{svc: p.svc, intercept: chainStream(p.stream), identity: identity, sendTimeout: cfg.SendTimeout, marshal: marshal}
	if err := gw.HandlePath(http.MethodGet, "/v1/clustersets/{clusterset}/imports:watch", watch.serve); err != nil {
		return fmt.Errorf("register the REST watch: %w", err)
	}
	restHandler := p.admit.HTTP(http.MaxBytesHandler(gw, int64(cfg.MaxRequestBytes)), func(r *http.Request) string { return caller.OfRequest(r, identity) })
	restHandler = writeDeadline(restHandler, cfg.SendTimeout)
	// No WriteTimeout: watches last for hours; each write of an answer or a watch message
	// has its own deadline (--send-timeout) instead.
	p.rest = &http.Server{Handler: restHandler, ReadHeaderTimeout: handshakeTimeout, ReadTimeout: time.Minute,
		IdleTimeout: cfg.IdleTimeout, MaxHeaderBytes: maxHeaderBytes, ErrorLog: slog.NewLogLogger(p.log.Handler(), slog.LevelWarn)}
	if p.restTLS != nil {
		p.rest.TLSConfig = p.restTLS
	} else {
		p.rest.Protocols = new(http.Protocols)
		p.rest.Protocols.SetHTTP1(true)
		p.rest.Protocols.SetUnencryptedHTTP2(true)
	}
	return nil
}

// buildAdmin makes the admin server: /metrics, /healthz and /readyz.
func (p *process) buildAdmin() {
	adminMux := http.NewServeMux()
	adminMux.Handle("GET /metrics", promhttp.HandlerFor(p.reg, promhttp.HandlerOpts{Registry: p.reg}))
	adminMux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	adminMux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if p.shuttingDown.Load() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		if err := p.storeState.state(); err != nil {
			http.Error(w, "store not reachable: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	p.admin = &http.Server{Handler: adminMux, ReadHeaderTimeout: 10 * time.Second}
}

// isPowerOfTen reports whether n is 1, 10, 100, ...
func isPowerOfTen(n int) bool {
	for n >= 10 && n%10 == 0 {
		n /= 10
	}
	return n == 1
}
