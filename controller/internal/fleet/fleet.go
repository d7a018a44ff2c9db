// Package fleet simulates a fleet of member clusters against a registry, for the capacity
// figures of docs/registry.md ("Scale"). Each simulated cluster is the controller's own
// registry client — its pool, its session (registration, renewals, the periodic check of
// its exports) and its import watch — with its exports held in memory instead of read
// from a kube-apiserver. A churn driver flips endpoint readiness at a set rate and times
// each flip until every cluster's watch shows it.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/types"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/controller/internal/registryclient"
)

// Config is one simulated fleet.
type Config struct {
	// Targets are the registry's URLs in failover order (registryclient.ParseURLs); every
	// simulated cluster has its own connection to each. With one URL per region (as many
	// as Regions, in the same order), each cluster starts from its own region's URL and
	// fails over to the next ones in turn.
	Targets    []registryclient.Target
	Clusterset string
	// Clusters export Services Services each, the same names in every cluster (a fleet's
	// pools), of Endpoints endpoints each.
	Clusters, Services, Endpoints int
	// Regions: cluster i is in Regions[i % len(Regions)].
	Regions []string
	// LeaseDuration, RenewInterval and VerifyEvery are the controller's flags of the same
	// names (--lease-duration, --renew-interval, --verify-exports-every).
	LeaseDuration, RenewInterval time.Duration
	VerifyEvery                  int
	// StartSpread: the clusters start evenly over this long (0: all at once).
	StartSpread time.Duration
	// Seed makes the churn's choices repeatable.
	Seed uint64
	Log  *slog.Logger
}

// Fleet is a running simulated fleet.
type Fleet struct {
	cfg     Config
	codec   *sharedCodec
	members []*member
	ids     []string // the clusters' IDs, by index
	keys    []types.NamespacedName
	flips   *flips
	rng     *rand.Rand

	// complete counts the (cluster, Service) pairs whose view holds every cluster; done is
	// closed when all do.
	completeN atomic.Int64
	done      chan struct{}
	doneOnce  sync.Once
	stats     stats
}

// stats count the simulated clusters' calls besides the session's own.
type stats struct {
	verifies, verifyErrors atomic.Int64
	syncs, syncErrors      atomic.Int64
	lastError              atomic.Pointer[string]
}

// count counts a call in ok, or in failed with its error kept as the last.
func (st *stats) count(ok, failed *atomic.Int64, err error) {
	if err == nil {
		ok.Add(1)
		return
	}
	failed.Add(1)
	msg := err.Error()
	st.lastError.Store(&msg)
}

// completed is told that one cluster's import of one Service became complete (or not).
func (f *Fleet) completed(now bool) {
	d := int64(1)
	if !now {
		d = -1
	}
	if f.completeN.Add(d) == int64(f.cfg.Clusters*f.cfg.Services) {
		f.doneOnce.Do(func() { close(f.done) })
	}
}

// fleetWindow is each simulated connection's flow-control window.
const fleetWindow = 1 << 20

// New builds the fleet's clusters, connected lazily; Start runs them.
func New(cfg Config) (*Fleet, error) {
	if cfg.Clusters <= 0 || cfg.Services <= 0 || cfg.Endpoints <= 0 {
		return nil, fmt.Errorf("clusters %d, services %d, endpoints %d: each must be positive", cfg.Clusters, cfg.Services, cfg.Endpoints)
	}
	if cfg.Endpoints > 65536 || cfg.Services > 65536 || cfg.Clusters > 65536 {
		return nil, errors.New("clusters, services and endpoints: at most 65,536 each (the simulated addresses)")
	}
	if len(cfg.Regions) == 0 {
		cfg.Regions = []string{"sim"}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	f := &Fleet{cfg: cfg, codec: newSharedCodec(), done: make(chan struct{}), rng: rand.New(rand.NewPCG(cfg.Seed, 1))} //nolint:gosec // the churn's choices, repeatable by seed
	for s := range cfg.Services {
		f.keys = append(f.keys, types.NamespacedName{Namespace: "fleet", Name: fmt.Sprintf("pool-%02d", s)})
	}
	f.flips = newFlips(f)
	for i := range cfg.Clusters {
		id := clusterID(i)
		f.ids = append(f.ids, id)
		// The simulated cluster's own log is quiet: a thousand of them would drown the report.
		quiet := slog.New(slog.DiscardHandler)
		targets := cfg.Targets
		if r := len(cfg.Regions); r > 1 && len(targets) == r {
			j := i % r
			targets = append(slices.Clone(targets[j:]), targets[:j]...)
		}
		pool, err := registryclient.NewPool(registryclient.PoolOptions{
			Targets: targets, Logger: quiet, DialOptions: []grpc.DialOption{
				grpc.WithDefaultCallOptions(grpc.ForceCodecV2(f.codec)),
				// gRPC grows each connection's window up to 16 MiB when reads fall
				// behind; a thousand connections in one process would buffer gigabytes
				// the registry already sent. A fixed window bounds that.
				grpc.WithInitialWindowSize(fleetWindow), grpc.WithInitialConnWindowSize(fleetWindow),
			},
		})
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("cluster %s: %w", id, err)
		}
		m := &member{idx: i, id: id, fleet: f, pool: pool, complete: map[types.NamespacedName]bool{}}
		m.session = &registryclient.Session{Pool: pool, Clusterset: cfg.Clusterset, ClusterID: id, Region: cfg.Regions[i%len(cfg.Regions)],
			LeaseDuration: cfg.LeaseDuration, RenewInterval: cfg.RenewInterval, RetryInterval: 2 * time.Second, VerifyEvery: cfg.VerifyEvery,
			Version: "fleet-simulator", Log: quiet}
		m.watch = &registryclient.ImportWatch{Pool: pool, Clusterset: cfg.Clusterset, IncludeEndpoints: true, RefillHold: cfg.LeaseDuration,
			Log: quiet}
		m.watch.OnEpochChange = func() {
			m.newEpoch.Store(time.Now().UnixNano())
			m.session.Check()
		}
		for s, k := range f.keys {
			m.exports = append(m.exports, exportOf(k, i, s, cfg.Endpoints))
		}
		f.members = append(f.members, m)
	}
	return f, nil
}

// exportOf is cluster i's export of Service s: one TCP port, e ready endpoints.
func exportOf(k types.NamespacedName, i, s, e int) *registryv1.ExportContent {
	g := &registryv1.EndpointGroup{AddressType: "IPv4", Ports: []*registryv1.EndpointPort{{Name: "http", Protocol: "TCP", Port: 8000}}}
	for j := range e {
		g.Endpoints = append(g.Endpoints, &registryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", i>>8, i&0xff, (s*e+j)%250+1)},
			Conditions: &registryv1.EndpointConditions{Ready: proto.Bool(true), Serving: proto.Bool(true), Terminating: proto.Bool(false)},
			TargetPod:  fmt.Sprintf("pool-%02d-%d", s, j),
		})
	}
	return &registryv1.ExportContent{
		Service:        &registryv1.ServiceKey{Namespace: k.Namespace, Name: k.Name},
		Spec:           &registryv1.ExportSpec{Ports: []*registryv1.ServicePort{{Name: "http", Protocol: "TCP", Port: 8000}}, Type: registryv1.ServiceType_SERVICE_TYPE_CLUSTER_SET_IP},
		EndpointGroups: []*registryv1.EndpointGroup{g},
	}
}

// Start runs every cluster's session and watch until ctx ends, spread over StartSpread.
func (f *Fleet) Start(ctx context.Context) {
	for i, m := range f.members {
		var delay time.Duration
		if f.cfg.StartSpread > 0 {
			delay = f.cfg.StartSpread * time.Duration(i) / time.Duration(len(f.members))
		}
		go func() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			go func() { _ = m.watch.Run(ctx, m) }()
			_ = m.session.Run(ctx, m)
		}()
	}
}

// Converged is closed when every cluster's view holds every cluster's export of every
// Service.
func (f *Fleet) Converged() <-chan struct{} { return f.done }

// Complete is how many (cluster, Service) views hold every cluster, of Clusters × Services.
func (f *Fleet) Complete() int64 { return f.completeN.Load() }

// WatchBytes is the bytes of watch messages the clusters have received so far.
func (f *Fleet) WatchBytes() int64 { return f.codec.received.Load() }

// Calls are the simulated clusters' export checks and syncs so far, and how many failed.
func (f *Fleet) Calls() (verifies, verifyErrors, syncs, syncErrors int64) {
	return f.stats.verifies.Load(), f.stats.verifyErrors.Load(), f.stats.syncs.Load(), f.stats.syncErrors.Load()
}

// LastError is the last error of a cluster's export check or sync; "" when none failed.
func (f *Fleet) LastError() string {
	if p := f.stats.lastError.Load(); p != nil {
		return *p
	}
	return ""
}

// Close closes every cluster's connections.
func (f *Fleet) Close() {
	for _, m := range f.members {
		m.pool.Close()
	}
}
