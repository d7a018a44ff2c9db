// Package discovery finds Global Router pools and router replicas from imported
// EndpointSlices, for the Global Discovery Service. It watches EndpointSlices in every
// namespace (it needs only get, list and watch on endpointslices) and keeps a current
// Snapshot, rebuilt on every change, that callers read or subscribe to.
package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ai-dynamo/global-discovery-mcs/gds-client/api"
)

// Observer receives the discovery's events, for metrics. Any field may be nil.
type Observer struct {
	// Built is called after each snapshot build with its duration and the slices read.
	Built func(d time.Duration, slices int, snap Snapshot)
}

// Discovery keeps the current Snapshot of pools and routers.
type Discovery struct {
	cfg    Config
	client kubernetes.Interface
	log    *slog.Logger
	obs    Observer

	mu       sync.Mutex
	snap     Snapshot
	synced   bool
	subs     map[chan Snapshot]struct{}
	problems map[string]bool

	dirty  chan struct{}
	lister listersv1.EndpointSliceLister
}

// New returns a Discovery; Run starts it.
func New(cfg Config, client kubernetes.Interface, log *slog.Logger, obs Observer) (*Discovery, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Discovery{
		cfg: cfg, client: client, log: log, obs: obs,
		snap:  Snapshot{Pools: []api.Pool{}, Routers: []api.Router{}},
		subs:  map[chan Snapshot]struct{}{},
		dirty: make(chan struct{}, 1), problems: map[string]bool{},
	}, nil
}

// selector keeps the watch to the slices of this mode.
func (d *Discovery) selector() string {
	if d.cfg.Mode == ModeKarmada {
		return discoveryv1.LabelServiceName
	}
	return LabelServiceName + "," + LabelSourceCluster
}

// Run watches EndpointSlices until ctx ends.
func (d *Discovery) Run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(d.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = d.selector() }))
	inf := factory.Discovery().V1().EndpointSlices()
	d.lister = inf.Lister()
	mark := func(any) {
		select {
		case d.dirty <- struct{}{}:
		default:
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: mark, DeleteFunc: mark, UpdateFunc: func(_, n any) { mark(n) },
	}); err != nil {
		return fmt.Errorf("watch EndpointSlices: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		return fmt.Errorf("EndpointSlice cache did not sync: %w", errors.Join(ctx.Err(), context.Canceled))
	}
	d.rebuild()
	d.mu.Lock()
	d.synced = true
	d.mu.Unlock()
	d.log.Info("EndpointSlice cache synced", "mode", d.cfg.Mode)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-d.dirty:
			d.rebuild()
		}
	}
}

func (d *Discovery) rebuild() {
	start := time.Now()
	all, err := d.lister.List(labels.Everything())
	if err != nil {
		d.log.Error("list EndpointSlices from the cache", "error", err)
		return
	}
	snap := Build(d.cfg, all)
	if f := d.obs.Built; f != nil {
		f(time.Since(start), len(all), snap)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	snap.Generation = d.snap.Generation + 1
	// Log each problem once while it lasts.
	seen := map[string]bool{}
	for _, p := range snap.Problems {
		seen[p] = true
		if !d.problems[p] {
			d.log.Warn(p)
		}
	}
	d.problems = seen
	d.snap = snap
	for ch := range d.subs {
		// Latest value wins: a slow subscriber skips intermediate snapshots.
		select {
		case <-ch:
		default:
		}
		ch <- snap
	}
}

// Snapshot returns the current pools and routers. Callers must not change it.
func (d *Discovery) Snapshot() Snapshot {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.snap
}

// Synced reports whether the first full list of EndpointSlices has been read.
func (d *Discovery) Synced() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.synced
}

// Subscribe returns a channel that receives the current snapshot, then every new one,
// until ctx ends. A slow reader gets the latest snapshot, not every one.
func (d *Discovery) Subscribe(ctx context.Context) <-chan Snapshot {
	ch := make(chan Snapshot, 1)
	d.mu.Lock()
	d.subs[ch] = struct{}{}
	if d.synced {
		ch <- d.snap
	}
	d.mu.Unlock()
	go func() {
		<-ctx.Done()
		d.mu.Lock()
		delete(d.subs, ch)
		d.mu.Unlock()
	}()
	return ch
}
