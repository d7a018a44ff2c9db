package imports

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
	"github.com/ai-dynamo/global-discovery-mcs/registry/internal/lease"
	"github.com/ai-dynamo/global-discovery-mcs/registry/merge"
	"github.com/ai-dynamo/global-discovery-mcs/registry/store"
)

// set is one clusterset's facts and imports.
type set struct {
	cache *Cache
	name  string
	// epoch names this set's revision sequence. A set loaded again (after a drop) starts a
	// new sequence that knows nothing of what was deleted in between, so watches of the old
	// one must not resume from it.
	epoch string
	// refresh serializes reads of the store with the updates made from them, so a later
	// refresh never applies an older read. A cluster's state known without a read (a
	// registration's or renewal's result, a stream image) does not wait for it: it would
	// queue behind other Services' reads, and leases expire while it waits. Instead each
	// known state is numbered (knownSeq), and a read that started before a cluster's last
	// known state keeps that state.
	refresh sync.Mutex
	// commit gathers the Services of concurrent refreshes into one: a burst of syncs
	// merges each Service once per batch, not once per sync.
	commit groupCommit

	mu       sync.Mutex
	closed   bool
	clusters map[string]store.Cluster
	// known is each cluster's last state known without a read (nil: deleted) and when,
	// by knownSeq.
	known    map[string]knownCluster
	knownSeq uint64
	// leases are the verdicts the imports were last computed with, and participants the
	// clusters whose exports take part under them.
	leases       map[string]lease.Verdict
	participants map[string]merge.Participant
	exports      map[store.ServiceKey][]store.Export
	// byCluster indexes exports by cluster, so what one cluster exports is found without
	// walking the clusterset.
	byCluster map[string]map[store.ServiceKey]struct{}
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
	// prev is the import before this change (nil: none), what a watcher whose cursor is
	// before rev holds: the base of its delta.
	prev *registryv1.ServiceImport
}

// knownCluster is a cluster's state known without a read, numbered.
type knownCluster struct {
	cluster *store.Cluster
	seq     uint64
}

// readStart is the number of the last known state, before a read of the store.
func (s *set) readStart() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.knownSeq
}

// newerKnownLocked is the state known of the cluster since a read that started at since.
func (s *set) newerKnownLocked(clusterID string, since uint64) (knownCluster, bool) {
	k, ok := s.known[clusterID]
	return k, ok && k.seq > since
}

// applyKnown applies a cluster's state known without reading the store (nil: deleted),
// unless it is older than the state held (by renew time); while the set loads, it is
// kept for the load to apply.
func (s *set) applyKnown(clusterID string, cl *store.Cluster) {
	now := s.cache.now()
	repl := s.cache.replication()
	s.mu.Lock()
	defer s.mu.Unlock()
	if cl != nil {
		if held, ok := s.clusters[clusterID]; ok && held.RenewTime.After(cl.RenewTime) {
			return
		}
		if k, ok := s.known[clusterID]; ok && k.cluster != nil && k.cluster.RenewTime.After(cl.RenewTime) {
			return
		}
	}
	if s.known == nil {
		s.known = map[string]knownCluster{}
	}
	s.knownSeq++
	s.known[clusterID] = knownCluster{cluster: cl, seq: s.knownSeq}
	if s.clusters == nil {
		return
	}
	s.setClusterLocked(clusterID, cl, now, repl)
}

// reload reads the whole clusterset from the store and recomputes every import. The
// caller holds s.refresh.
func (s *set) reload(ctx context.Context) error {
	since := s.readStart()
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
	repl := s.cache.replication()
	s.mu.Lock()
	defer s.mu.Unlock()
	// A cluster's state known since the read began is newer than the read's.
	for id := range s.known {
		if k, ok := s.newerKnownLocked(id, since); ok {
			if k.cluster == nil {
				delete(byID, id)
			} else if held, ok := byID[id]; !ok || !held.RenewTime.After(k.cluster.RenewTime) {
				byID[id] = *k.cluster
			}
		}
	}
	s.clusters = byID
	// Reads are serialized (s.refresh): every later one starts after these states.
	clear(s.known)
	s.leases = make(map[string]lease.Verdict, len(byID))
	s.participants = make(map[string]merge.Participant, len(byID))
	for id, cl := range byID {
		s.judgeLocked(id, cl, true, now, repl)
	}
	touched := map[store.ServiceKey]bool{}
	for k := range s.exports {
		touched[k] = true
	}
	for k := range bySvc {
		touched[k] = true
	}
	s.exports = map[store.ServiceKey][]store.Export{}
	s.byCluster = map[string]map[store.ServiceKey]struct{}{}
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
	old, had := s.imports[k]
	imp := shareUnchanged(old, merge.Service(k, s.exports[k], s.participants))
	changed := false
	switch {
	case imp == nil && had:
		delete(s.imports, k)
		changed = true
	case imp != nil && (!had || !sameImport(imp, old)):
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
	s.log = append(s.log, logEntry{rev: s.revision, key: k, prev: old})
	// The log holds the last history changes (heldLogLocked). Its storage is trimmed once
	// per history changes into room for as many again, so a change costs O(1), not a copy
	// of the whole log (a burst of 100,000 changes copied 4,096 entries each); an entry
	// that leaves the held window lets go of its import at once.
	h := s.cache.history
	if n := len(s.log) - h - 1; n >= 0 {
		s.log[n].prev = nil
	}
	if len(s.log) >= 2*h {
		kept := make([]logEntry, h, 2*h)
		copy(kept, s.log[len(s.log)-h:])
		s.log = kept
	}
	for w := range s.watchers {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// heldRecheck is how often held leases are judged again: the lag that holds them changes
// with time (it grows through a stall and falls when replication catches up).
const heldRecheck = time.Second

// judgeLocked judges one cluster's lease (found: it is registered) and reports whether
// the verdict differs from the one its imports were computed with.
func (s *set) judgeLocked(id string, cl store.Cluster, found bool, now time.Time, repl lease.Replication) bool {
	prev, had := s.leases[id]
	if !found {
		delete(s.leases, id)
		delete(s.participants, id)
		return had && prev.Participates()
	}
	v := lease.Judge(cl, now, repl, prev.State)
	s.leases[id] = v
	// A cluster that registers again from another region changes its imports' regions.
	moved := v.Participates() && s.participants[id].Region != cl.Region
	if v.State == prev.State && v.Region == prev.Region && !moved {
		return false
	}
	if had && (v.State != prev.State || v.Region != prev.Region) {
		s.cache.log.Info("cluster lease state changed", "clusterset", s.name, "cluster", id, "state", v.State.String(),
			"heldRegion", v.Region, "replicationLag", v.Lag)
	}
	if v.Participates() {
		s.participants[id] = merge.Participant{Region: cl.Region, HeldRegion: v.Region}
	} else {
		delete(s.participants, id)
	}
	return prev.Participates() || v.Participates()
}

// scheduleLocked arms the timer for the next change of a lease verdict: the expiry of an
// active lease, or the next check of a held one.
func (s *set) scheduleLocked(now time.Time) {
	var next time.Time
	for _, v := range s.leases {
		at := v.Until
		if v.State == registryv1.LeaseState_LEASE_STATE_HELD_REPLICATION {
			if recheck := now.Add(heldRecheck); recheck.Before(at) {
				at = recheck
			}
		}
		if !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
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

// expire recomputes the imports of clusters whose lease verdict changed with time.
func (s *set) expire() {
	s.refresh.Lock()
	defer s.refresh.Unlock()
	now := s.cache.now()
	repl := s.cache.replication()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timer, s.timerAt = nil, time.Time{}
	if s.closed {
		return
	}
	for id, cl := range s.clusters {
		if s.judgeLocked(id, cl, true, now, repl) {
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
			m = map[store.ServiceKey]struct{}{}
			s.byCluster[e.ClusterID] = m
		}
		m[k] = struct{}{}
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

// refreshServices reads the Services' exports (keys), places the exports known from writes
// (known), and recomputes each changed import once, all in one step.
func (s *set) refreshServices(ctx context.Context, keys []store.ServiceKey, known []store.Export) error {
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
	next := make(map[store.ServiceKey][]store.Export, len(keys)+len(known))
	var order []store.ServiceKey
	for i, k := range keys {
		if sameExports(s.exports[k], read[i]) {
			continue
		}
		if _, ok := next[k]; !ok {
			order = append(order, k)
		}
		next[k] = read[i]
	}
	// Known exports by Service, each Service's placed at once: a batch of many clusters'
	// syncs costs each Service one pass, not one copy of its exports per cluster.
	services, byService := store.ByService(known)
	for _, k := range services {
		held, ok := next[k]
		if !ok {
			held = s.exports[k]
		}
		if p, ok := placed(held, byService[k]); ok {
			if _, seen := next[k]; !seen {
				order = append(order, k)
			}
			next[k] = p
		}
	}
	for _, k := range order {
		s.setExportsLocked(k, next[k])
		s.recomputeLocked(k, now)
	}
	return nil
}

// setRead applies a cluster's state read from the store in a read that started at since
// (found false: not in the store), unless a state known since is newer.
func (s *set) setRead(clusterID string, cl store.Cluster, found bool, since uint64) {
	now := s.cache.now()
	repl := s.cache.replication()
	s.mu.Lock()
	defer s.mu.Unlock()
	// Reads are serialized (s.refresh): every later one starts after these states.
	defer clear(s.known)
	if s.clusters == nil {
		return
	}
	if _, newer := s.newerKnownLocked(clusterID, since); newer {
		return
	}
	var p *store.Cluster
	if found {
		p = &cl
	}
	s.setClusterLocked(clusterID, p, now, repl)
}

// setClusterLocked sets a cluster's state (nil: deleted) and recomputes its imports when
// its lease verdict changed. s.mu is held and the set loaded.
func (s *set) setClusterLocked(clusterID string, p *store.Cluster, now time.Time, repl lease.Replication) {
	var cl store.Cluster
	found := p != nil
	if found {
		cl = *p
		s.clusters[clusterID] = cl
	} else {
		delete(s.clusters, clusterID)
	}
	if s.judgeLocked(clusterID, cl, found, now, repl) {
		for _, k := range s.servicesOfLocked(clusterID) {
			s.recomputeLocked(k, now)
		}
	}
	s.scheduleLocked(now)
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
