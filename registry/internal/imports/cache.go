// Package imports keeps, per clusterset, the ServiceImports merged from the store's facts,
// versioned by revision, and serves them to lists and watches. It is the registry's cache in
// the go-control-plane sense: the store holds facts, this package holds derived snapshots,
// and the server only speaks the protocol.
//
// The cache learns of changes three ways: the server refreshes what it has just written
// (read-your-writes on one replica), the store's change feed reports writes of other
// replicas, and a timer fires when a lease expires, because an import is a function of the
// facts and of the current time.
package imports

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/merge"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/validate"
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
}

// Cache holds the imports of every clusterset it has been asked about.
type Cache struct {
	store   store.Store
	now     func() time.Time
	history int
	log     *slog.Logger
	obs     Observer
	epoch   string

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
	return &Cache{
		store: opts.Store, now: opts.Now, history: opts.History, log: opts.Logger,
		obs: opts.Observer, epoch: hex.EncodeToString(b[:]), sets: map[string]*set{},
	}
}

// Run applies the store's change feed until ctx ends.
func (c *Cache) Run(ctx context.Context) error {
	changes, err := c.store.Changes(ctx)
	if err != nil {
		return fmt.Errorf("subscribe to store changes: %w", err)
	}
	for ch := range changes {
		c.Apply(ctx, ch)
	}
	return ctx.Err()
}

// Apply refreshes what a store change touched, in clustersets already loaded.
func (c *Cache) Apply(ctx context.Context, ch store.Change) {
	var err error
	switch ch.Kind {
	case store.ChangeCluster:
		switch {
		case ch.Deleted:
			c.SetCluster(ch.Clusterset, ch.ClusterID, nil)
		case ch.Cluster != nil:
			c.SetCluster(ch.Clusterset, ch.ClusterID, ch.Cluster)
		default:
			err = c.RefreshCluster(ctx, ch.Clusterset, ch.ClusterID)
		}
	case store.ChangeExport:
		if len(ch.Services) > 0 {
			err = c.RefreshServices(ctx, ch.Clusterset, ch.Services)
		} else {
			err = c.RefreshService(ctx, ch.Clusterset, ch.Service)
		}
	case store.ChangeResync:
		err = c.Resync(ctx, ch.Clusterset)
	}
	if err != nil {
		c.log.Warn("applying store change failed; the clusterset reloads on its next use", "clusterset", ch.Clusterset, "error", err)
		c.drop(ch.Clusterset)
	}
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

// set is one clusterset's facts and imports.
type set struct {
	cache *Cache
	name  string
	// epoch names this set's revision sequence. A set loaded again (after a drop) starts a
	// new sequence that knows nothing of what was deleted in between, so watches of the old
	// one must not resume from it.
	epoch string
	// refresh serializes reads of the store with the updates made from them, so a later
	// refresh never applies an older read.
	refresh sync.Mutex
	// commit gathers the Services of concurrent refreshes into one: a burst of syncs
	// merges each Service once per batch, not once per sync.
	commit groupCommit

	mu       sync.Mutex
	closed   bool
	clusters map[string]store.Cluster
	active   map[string]bool // the lease state each import was last computed with
	exports  map[store.ServiceKey][]store.Export
	// byCluster indexes exports by cluster: the endpoint count of each of its exports, so
	// what one cluster holds is found without walking the clusterset.
	byCluster map[string]map[store.ServiceKey]int
	imports   map[store.ServiceKey]*registryv1.ServiceImport
	revision  int64
	log       []logEntry
	watchers  map[*Watcher]struct{}
	// shared are the watch messages of the current revision, built once for every watcher.
	shared  sharedMessages
	timer   *time.Timer
	timerAt time.Time
}

type logEntry struct {
	rev int64
	key store.ServiceKey
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

// reload reads the whole clusterset from the store and recomputes every import. The
// caller holds s.refresh.
func (s *set) reload(ctx context.Context) error {
	clusters, err := s.cache.store.ListClusters(ctx, s.name)
	if err != nil {
		return fmt.Errorf("list clusters of %s: %w", s.name, err)
	}
	exports, err := s.cache.store.ListExports(ctx, s.name)
	if err != nil {
		return fmt.Errorf("list exports of %s: %w", s.name, err)
	}
	byID := make(map[string]store.Cluster, len(clusters))
	for _, cl := range clusters {
		byID[cl.ClusterID] = cl
	}
	bySvc := map[store.ServiceKey][]store.Export{}
	for _, e := range exports {
		bySvc[e.Service] = append(bySvc[e.Service], e)
	}
	now := s.cache.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clusters = byID
	s.active = make(map[string]bool, len(byID))
	for id, cl := range byID {
		s.active[id] = cl.Active(now)
	}
	touched := map[store.ServiceKey]bool{}
	for k := range s.exports {
		touched[k] = true
	}
	for k := range bySvc {
		touched[k] = true
	}
	s.exports = map[store.ServiceKey][]store.Export{}
	s.byCluster = map[string]map[store.ServiceKey]int{}
	for k, exports := range bySvc {
		s.setExportsLocked(k, exports)
	}
	if s.imports == nil {
		s.imports = map[store.ServiceKey]*registryv1.ServiceImport{}
	}
	for k := range touched {
		s.recomputeLocked(k, now)
	}
	s.scheduleLocked(now)
	return nil
}

// recomputeLocked merges one Service again and records a change when the import differs.
func (s *set) recomputeLocked(k store.ServiceKey, now time.Time) {
	imp := merge.Service(k, s.exports[k], s.clusters, now)
	old, had := s.imports[k]
	changed := false
	switch {
	case imp == nil && had:
		delete(s.imports, k)
		changed = true
	case imp != nil && (!had || !proto.Equal(imp, old)):
		s.imports[k] = imp
		changed = true
	}
	if f := s.cache.obs.Recomputed; f != nil {
		f(changed)
	}
	if !changed {
		return
	}
	s.revision++
	s.log = append(s.log, logEntry{rev: s.revision, key: k})
	if over := len(s.log) - s.cache.history; over > 0 {
		s.log = append(s.log[:0:0], s.log[over:]...)
	}
	for w := range s.watchers {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// scheduleLocked arms the timer for the next lease expiry of an active cluster.
func (s *set) scheduleLocked(now time.Time) {
	var next time.Time
	for _, cl := range s.clusters {
		if exp := cl.ExpireTime(); cl.Active(now) && (next.IsZero() || exp.Before(next)) {
			next = exp
		}
	}
	if next.Equal(s.timerAt) && s.timer != nil {
		return
	}
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	s.timerAt = next
	if next.IsZero() || s.closed {
		return
	}
	s.timer = time.AfterFunc(next.Sub(now), s.expire)
}

// expire recomputes the imports of clusters whose lease state changed with time.
func (s *set) expire() {
	s.refresh.Lock()
	defer s.refresh.Unlock()
	now := s.cache.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timer, s.timerAt = nil, time.Time{}
	if s.closed {
		return
	}
	for id, cl := range s.clusters {
		if a := cl.Active(now); a != s.active[id] {
			s.active[id] = a
			s.cache.log.Info("cluster lease state changed", "clusterset", s.name, "cluster", id, "active", a)
			for _, k := range s.servicesOfLocked(id) {
				s.recomputeLocked(k, now)
			}
		}
	}
	s.scheduleLocked(now)
}

func (s *set) servicesOfLocked(clusterID string) []store.ServiceKey {
	out := make([]store.ServiceKey, 0, len(s.byCluster[clusterID]))
	for k := range s.byCluster[clusterID] {
		out = append(out, k)
	}
	return out
}

// setExportsLocked replaces one Service's exports and keeps the index by cluster.
func (s *set) setExportsLocked(k store.ServiceKey, exports []store.Export) {
	for _, e := range s.exports[k] {
		if m := s.byCluster[e.ClusterID]; m != nil {
			delete(m, k)
			if len(m) == 0 {
				delete(s.byCluster, e.ClusterID)
			}
		}
	}
	if len(exports) == 0 {
		delete(s.exports, k)
		return
	}
	s.exports[k] = exports
	for _, e := range exports {
		m := s.byCluster[e.ClusterID]
		if m == nil {
			m = map[store.ServiceKey]int{}
			s.byCluster[e.ClusterID] = m
		}
		m[k] = validate.EndpointCount(e.EndpointGroups)
	}
}

// sameExports reports whether two reads of a Service's exports are the same values: a
// store that hands back the messages it was given (the memory store) makes a change
// feed's echo of a write already applied cost no merge.
func sameExports(a, b []store.Export) bool {
	if len(a) != len(b) || len(a) == 0 {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.ClusterID != y.ClusterID || !x.UpdateTime.Equal(y.UpdateTime) || !x.CreateTime.Equal(y.CreateTime) || x.Spec != y.Spec ||
			len(x.EndpointGroups) != len(y.EndpointGroups) || (len(x.EndpointGroups) > 0 && &x.EndpointGroups[0] != &y.EndpointGroups[0]) {
			return false
		}
	}
	return true
}

// Usage is what one cluster holds in a clusterset: its exports and their endpoints.
type Usage struct {
	Exports   int
	Endpoints int
}

// ClusterUsage returns what a cluster holds, leaving out its exports of the Services in
// except (the ones a write is about to replace).
func (c *Cache) ClusterUsage(ctx context.Context, clusterset, clusterID string, except ...store.ServiceKey) (Usage, error) {
	s, err := c.loaded(ctx, clusterset)
	if err != nil {
		return Usage{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.byCluster[clusterID]
	u := Usage{Exports: len(m)}
	for _, n := range m {
		u.Endpoints += n
	}
	for _, k := range except {
		if n, ok := m[k]; ok {
			u.Exports--
			u.Endpoints -= n
		}
	}
	return u, nil
}

// ServicesOf returns the Services a cluster exports, as the cache holds them.
func (c *Cache) ServicesOf(ctx context.Context, clusterset, clusterID string) ([]store.ServiceKey, error) {
	s, err := c.loaded(ctx, clusterset)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.servicesOfLocked(clusterID), nil
}

func (s *set) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
	}
	for w := range s.watchers {
		w.gone = true
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// RefreshService reads one Service's exports from the store and recomputes its import.
func (c *Cache) RefreshService(ctx context.Context, clusterset string, k store.ServiceKey) error {
	return c.RefreshServices(ctx, clusterset, []store.ServiceKey{k})
}

// RefreshServices reads several Services' exports from the store and recomputes their
// imports in one step: a watcher sees all of the new imports or none of them (a cluster's
// SyncExports, which the controllers' hold after a registry restart relies on).
func (c *Cache) RefreshServices(ctx context.Context, clusterset string, keys []store.ServiceKey) error {
	s := c.existing(clusterset)
	if s == nil {
		return nil
	}
	return s.commit.do(ctx, keys, s.refreshServices)
}

// ApplyPut applies an export this replica has just written, from the write's own result,
// without reading the store (read-your-writes at no cost). An entry of the same cluster
// that is newer (a later write that reached the cache first) is kept. Under the refresh
// lock, so no refresh that read the store before the write can apply after it.
func (c *Cache) ApplyPut(clusterset string, e store.Export) {
	s := c.existing(clusterset)
	if s == nil {
		return
	}
	s.refresh.Lock()
	defer s.refresh.Unlock()
	now := c.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.clusters == nil {
		return
	}
	held := s.exports[e.Service]
	next := make([]store.Export, 0, len(held)+1)
	placed := false
	for _, x := range held {
		switch {
		case x.ClusterID != e.ClusterID:
			next = append(next, x)
		case x.UpdateTime.After(e.UpdateTime):
			return // a newer write is held
		default:
			next = append(next, e)
			placed = true
		}
	}
	if !placed {
		next = append(next, e)
		sort.Slice(next, func(i, j int) bool { return next[i].ClusterID < next[j].ClusterID })
	}
	s.setExportsLocked(e.Service, next)
	s.recomputeLocked(e.Service, now)
}

// refreshServices reads the Services' exports and recomputes their imports in one step.
func (s *set) refreshServices(ctx context.Context, keys []store.ServiceKey) error {
	s.refresh.Lock()
	defer s.refresh.Unlock()
	read := make([][]store.Export, len(keys))
	for i, k := range keys {
		exports, err := s.cache.store.ListServiceExports(ctx, s.name, k)
		if err != nil {
			return fmt.Errorf("list exports of %s in %s: %w", k, s.name, err)
		}
		read[i] = exports
	}
	now := s.cache.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.clusters == nil {
		return nil
	}
	for i, k := range keys {
		if sameExports(s.exports[k], read[i]) {
			continue
		}
		s.setExportsLocked(k, read[i])
		s.recomputeLocked(k, now)
	}
	return nil
}

// RefreshCluster reads one cluster from the store; when its lease state changed, the
// imports of its Services are recomputed.
func (c *Cache) RefreshCluster(ctx context.Context, clusterset, clusterID string) error {
	s := c.existing(clusterset)
	if s == nil {
		return nil
	}
	s.refresh.Lock()
	defer s.refresh.Unlock()
	cl, err := c.store.GetCluster(ctx, store.ClusterKey{Clusterset: clusterset, ClusterID: clusterID})
	found := err == nil
	if err != nil && !errors.Is(err, store.ErrClusterNotFound) {
		return fmt.Errorf("get cluster %s/%s: %w", clusterset, clusterID, err)
	}
	s.setCluster(clusterID, cl, found)
	return nil
}

// SetCluster applies a cluster's state known without reading the store (a write's
// result, a stream image); nil means deleted. A state older than the one held (by renew
// time) is ignored, so a late stream record cannot undo a newer write.
func (c *Cache) SetCluster(clusterset, clusterID string, cl *store.Cluster) {
	s := c.existing(clusterset)
	if s == nil {
		return
	}
	s.refresh.Lock()
	defer s.refresh.Unlock()
	if cl == nil {
		s.setCluster(clusterID, store.Cluster{}, false)
		return
	}
	s.mu.Lock()
	held, ok := s.clusters[clusterID]
	s.mu.Unlock()
	if ok && held.RenewTime.After(cl.RenewTime) {
		return
	}
	s.setCluster(clusterID, *cl, true)
}

func (s *set) setCluster(clusterID string, cl store.Cluster, found bool) {
	now := s.cache.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.clusters == nil {
		return
	}
	prev := s.active[clusterID]
	active := found && cl.Active(now)
	if found {
		s.clusters[clusterID] = cl
		s.active[clusterID] = active
	} else {
		delete(s.clusters, clusterID)
		delete(s.active, clusterID)
	}
	if active != prev {
		for _, k := range s.servicesOfLocked(clusterID) {
			s.recomputeLocked(k, now)
		}
	}
	s.scheduleLocked(now)
}

// Resync reloads a clusterset from the store (every loaded one when name is empty).
func (c *Cache) Resync(ctx context.Context, name string) error {
	c.mu.Lock()
	var sets []*set
	for n, s := range c.sets {
		if name == "" || n == name {
			sets = append(sets, s)
		}
	}
	c.mu.Unlock()
	var errs []error
	for _, s := range sets {
		s.refresh.Lock()
		if err := s.reload(ctx); err != nil {
			errs = append(errs, err)
		}
		s.refresh.Unlock()
	}
	return errors.Join(errs...)
}

// Filter selects what a list or a watch returns.
type Filter struct {
	// Namespace limits the imports to one namespace when set.
	Namespace string
	// IncludeEndpoints keeps each cluster's endpoint groups.
	IncludeEndpoints bool
}

func (f Filter) match(k store.ServiceKey) bool {
	return f.Namespace == "" || f.Namespace == k.Namespace
}

// view returns the import as the filter shows it. Imports are shared and never changed
// after they are computed, so only a stripped copy is built.
func (f Filter) view(imp *registryv1.ServiceImport) *registryv1.ServiceImport {
	if f.IncludeEndpoints {
		return imp
	}
	out := &registryv1.ServiceImport{
		Service: imp.GetService(), Spec: imp.GetSpec(), WinningClusterId: imp.GetWinningClusterId(),
		Conflicts: imp.GetConflicts(), Clusters: make([]*registryv1.ImportCluster, len(imp.GetClusters())),
	}
	for i, cl := range imp.GetClusters() {
		out.Clusters[i] = &registryv1.ImportCluster{ClusterId: cl.GetClusterId(), ExportCreateTime: cl.GetExportCreateTime(), ExportUpdateTime: cl.GetExportUpdateTime(), Conflicts: cl.GetConflicts(),
			MissingPorts: cl.GetMissingPorts(), ExcludedPorts: cl.GetExcludedPorts()}
	}
	return out
}

// Snapshot is a clusterset's imports at one revision.
type Snapshot struct {
	Epoch    string
	Revision int64
	// Clusters is the number of registered clusters, expired or not.
	Clusters int
	// Imports sorted by namespace and name.
	Imports []*registryv1.ServiceImport
}

// List returns the imports of a clusterset. The returned messages are shared: do not change them.
func (c *Cache) List(ctx context.Context, clusterset string, f Filter) (Snapshot, error) {
	s, err := c.loaded(ctx, clusterset)
	if err != nil {
		return Snapshot{}, err
	}
	s.mu.Lock()
	snap := Snapshot{Epoch: s.epoch, Revision: s.revision, Clusters: len(s.clusters), Imports: s.listLocked(f)}
	s.mu.Unlock()
	if snap.Clusters == 0 {
		c.release(s)
	}
	return snap, nil
}

// release forgets a loaded clusterset that has no cluster and no watcher, so reads of
// names nobody uses (typos, a clusterset whose last cluster left) cost no memory. A later
// read loads it again, under a new epoch.
func (c *Cache) release(s *set) {
	c.mu.Lock()
	s.mu.Lock()
	unused := c.sets[s.name] == s && s.clusters != nil && len(s.clusters) == 0 && len(s.watchers) == 0
	if unused {
		delete(c.sets, s.name)
	}
	s.mu.Unlock()
	c.mu.Unlock()
	if unused {
		s.close()
	}
}

// Import returns one Service's import, or nil when it has none.
func (c *Cache) Import(ctx context.Context, clusterset string, k store.ServiceKey) (*registryv1.ServiceImport, error) {
	s, err := c.loaded(ctx, clusterset)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.imports[k], nil
}

func (s *set) listLocked(f Filter) []*registryv1.ServiceImport {
	keys := make([]store.ServiceKey, 0, len(s.imports))
	for k := range s.imports {
		if f.match(k) {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].Less(keys[j]) })
	out := make([]*registryv1.ServiceImport, len(keys))
	for i, k := range keys {
		out[i] = f.view(s.imports[k])
	}
	return out
}
