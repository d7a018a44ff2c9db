// Package imports keeps, per clusterset, the ServiceImports merged from the store's facts,
// versioned by revision, and serves them to lists and watches. It is the registry's cache in
// the go-control-plane sense: the store holds facts, this package holds derived snapshots,
// and the server only speaks the protocol.
//
// Changes reach the cache one way, as a store.Change given to Apply: the store's change
// feed reports every replica's writes, and the server gives it each of its own writes'
// results before it answers (read-your-writes on one replica). Besides, a timer fires when
// a lease expires (or a held lease is due to be judged again), because an import is a
// function of the facts, the current time and the replication lag measured from each
// region.
package imports

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/lease"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// DefaultHistory is how many changed Services a clusterset remembers for resuming watches.
const DefaultHistory = 4096

// Observer receives the cache's events, for metrics. Any field may be nil.
type Observer struct {
	// Recomputed is called after a Service's import was recomputed; changed says whether it
	// differed from before.
	Recomputed func(changed bool)
	// Snapshot is called when a watch is sent a full snapshot.
	Snapshot func()
	// Delta is called when a watch is sent a delta.
	Delta func()
}

// Options configure a Cache.
type Options struct {
	Store store.Store
	// Now returns the current time; nil: time.Now.
	Now func() time.Time
	// History is the number of changes kept for resuming watches; 0: DefaultHistory.
	History  int
	Logger   *slog.Logger
	Observer Observer
	// Leases says how leases renewed through other regions are judged; zero: by their
	// expiry alone.
	Leases LeaseOptions
	// StartedEmpty is when a store that starts empty (the memory store) started; zero for a
	// store that keeps its records. Snapshots carry it (started_empty): a controller that
	// started after the registry then keeps what it imported of clusters that have not sent
	// their exports again yet.
	StartedEmpty time.Time
}

// LeaseOptions hold leases renewed through another region while replication from it lags
// (package lease).
type LeaseOptions struct {
	// Region is this replica's region.
	Region string
	// Hold bounds the hold past a lease's expiry; 0: none.
	Hold time.Duration
	// Lag returns the replication lag measured from each other region; nil: none measured.
	Lag func() map[string]time.Duration
}

// Cache holds the imports of every clusterset it has been asked about.
type Cache struct {
	store   store.Store
	now     func() time.Time
	history int
	log     *slog.Logger
	obs     Observer
	epoch   string
	leases  LeaseOptions
	// startedEmpty is Options.StartedEmpty as the snapshots carry it; nil: not set.
	startedEmpty *timestamppb.Timestamp

	mu   sync.Mutex
	sets map[string]*set
	// loads counts the clustersets loaded; it makes each loaded set's epoch unique.
	loads uint64
}

// New returns a cache over a store. Run must be running for changes made by other
// replicas and lease expiries to reach it.
func New(opts Options) *Cache {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.History <= 0 {
		opts.History = DefaultHistory
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	c := &Cache{
		store: opts.Store, now: opts.Now, history: opts.History, log: opts.Logger,
		obs: opts.Observer, leases: opts.Leases, epoch: hex.EncodeToString(b[:]), sets: map[string]*set{},
	}
	if !opts.StartedEmpty.IsZero() {
		c.startedEmpty = timestamppb.New(opts.StartedEmpty)
	}
	return c
}

// Run applies the store's change feed until ctx ends.
func (c *Cache) Run(ctx context.Context) error {
	changes, err := c.store.Changes(ctx)
	if err != nil {
		return fmt.Errorf("subscribe to store changes: %w", err)
	}
	for ch := range changes {
		_ = c.Apply(ctx, ch) // logged; the clusterset reloads on its next use
	}
	return ctx.Err()
}

// Close stops the cache's lease timers and ends every watch.
func (c *Cache) Close() { c.drop("") }

// drop forgets a clusterset (all of them when name is empty): its next use reloads it and
// its watchers get a snapshot.
func (c *Cache) drop(name string) {
	c.mu.Lock()
	var dropped []*set
	for n, s := range c.sets {
		if name == "" || n == name {
			dropped = append(dropped, s)
			delete(c.sets, n)
		}
	}
	c.mu.Unlock()
	for _, s := range dropped {
		s.close()
	}
}

// dropSet forgets s if it is still the loaded set of its clusterset (not one loaded again
// since), so the callers of a failed batch drop it once, not each the set after it.
func (c *Cache) dropSet(s *set) {
	c.mu.Lock()
	current := c.sets[s.name] == s
	if current {
		delete(c.sets, s.name)
	}
	c.mu.Unlock()
	if current {
		s.close()
	}
}

// loaded returns the clusterset, loading it from the store on first use.
func (c *Cache) loaded(ctx context.Context, name string) (*set, error) {
	c.mu.Lock()
	s := c.sets[name]
	if s == nil {
		c.loads++
		s = &set{cache: c, name: name, epoch: fmt.Sprintf("%s-%d", c.epoch, c.loads), watchers: map[*Watcher]struct{}{}}
		c.sets[name] = s
	}
	c.mu.Unlock()
	// Loaded already: no wait for a refresh in progress (reads and quota checks would
	// otherwise queue behind the store reads of other writes).
	s.mu.Lock()
	ready := s.clusters != nil
	s.mu.Unlock()
	if ready {
		return s, nil
	}
	s.refresh.Lock()
	defer s.refresh.Unlock()
	s.mu.Lock()
	ready = s.clusters != nil
	s.mu.Unlock()
	if ready {
		return s, nil
	}
	if err := s.reload(ctx); err != nil {
		c.mu.Lock()
		s.mu.Lock()
		if c.sets[name] == s && len(s.watchers) == 0 {
			delete(c.sets, name)
		}
		s.mu.Unlock()
		c.mu.Unlock()
		return nil, err
	}
	return s, nil
}

// existing returns the clusterset when it is loaded, else nil: a change to a clusterset
// nobody asked about needs no work.
func (c *Cache) existing(name string) *set {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sets[name]
}

// replication is what the lease judge needs to know now.
func (c *Cache) replication() lease.Replication {
	r := lease.Replication{Region: c.leases.Region, Hold: c.leases.Hold}
	if c.leases.Lag != nil && r.Hold > 0 {
		r.Lag = c.leases.Lag()
	}
	return r
}

// Replication returns this replica's region and the replication lag it measures from each
// other region (nil: none measured).
func (c *Cache) Replication() (string, map[string]time.Duration) {
	if c.leases.Lag == nil {
		return c.leases.Region, nil
	}
	return c.leases.Region, c.leases.Lag()
}

// Judge returns the verdict on a cluster's lease now, as this replica's imports apply it
// (from the verdict they were last computed with, when its clusterset is loaded). Every
// write asks it: the clusterset's lock, which its merges hold, is taken only for a lease
// the replication hold may keep, whose verdict depends on the one before.
func (c *Cache) Judge(cl store.Cluster) lease.Verdict {
	r := c.replication()
	var prev registryv1.LeaseState
	if r.MayHold(cl) {
		c.mu.Lock()
		s := c.sets[cl.Clusterset]
		c.mu.Unlock()
		if s != nil {
			s.mu.Lock()
			prev = s.leases[cl.ClusterID].State
			s.mu.Unlock()
		}
	}
	return lease.Judge(cl, c.now(), r, prev)
}
